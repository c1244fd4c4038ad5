//! `pods/log`: container logs read through a [`LogSource`] the embedding process registers (`kcm up` registers the simulator's log model), with upstream's `PodLogOptions` (container, follow, previous, sinceSeconds, sinceTime, timestamps, tailLines, limitBytes).
//!
//! Upstream's API server proxies the request to the kubelet of the pod's node. kcm's nodes
//! are simulated, so the lines come from the source; without one, `pods/log` keeps the
//! `registry::connect` refusal. A follow re-reads the pod every [`FOLLOW_POLL`] and streams
//! new lines; it ends when the container terminates, when the pod is deleted, or when the
//! server shuts down.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use bytes::Bytes;
use futures::Stream;
use jiff::Timestamp;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::error::{ApiError, GroupKind, Result};
use crate::pointer::At;
use crate::registry::Registry;
use crate::resources::pod::PODS;
use crate::validation::FieldError;

/// How often a follow re-reads the pod.
pub const FOLLOW_POLL: Duration = Duration::from_millis(500);

/// One container instance's log, as the source reports it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SourceLog {
    /// `(time, text)` lines, oldest first, texts without newlines.
    pub lines: Vec<(Timestamp, String)>,
    /// Whether the instance ended (a follow stops after its lines).
    pub terminated: bool,
}

/// Reports the logs of the containers of pods, as kubelets do.
pub trait LogSource: Send + Sync + 'static {
    /// The log of `container` of `pod` (the stored object) at `now`, of its previous instance
    /// when `previous`; `Err` carries the kubelet's message (answered as `400 BadRequest`).
    fn log(
        &self,
        pod: &Value,
        container: &str,
        previous: bool,
        now: Timestamp,
    ) -> std::result::Result<SourceLog, String>;
}

/// The registered log source, if any. Held only to swap or clone the `Arc`.
#[derive(Default)]
pub struct LogSlot(RwLock<Option<Arc<dyn LogSource>>>);

impl std::fmt::Debug for LogSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("LogSlot")
            .field(&self.get().is_some())
            .finish()
    }
}

impl LogSlot {
    /// Registers `source` (replacing any earlier one).
    pub fn set(&self, source: Arc<dyn LogSource>) {
        if let Ok(mut slot) = self.0.write() {
            *slot = Some(source);
        }
    }

    /// The registered source.
    pub fn get(&self) -> Option<Arc<dyn LogSource>> {
        self.0.read().ok().and_then(|slot| slot.clone())
    }
}

/// upstream's `PodLogOptions`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodLogOptions {
    /// The container; may be omitted for a pod with one container (or a default one).
    pub container: Option<String>,
    /// Stream new lines until the container ends or the pod is deleted.
    pub follow: bool,
    /// Read the previous terminated instance.
    pub previous: bool,
    /// Only lines newer than this many seconds.
    pub since_seconds: Option<i64>,
    /// Only lines at or after this time.
    pub since_time: Option<Timestamp>,
    /// Prefix each line with its RFC 3339 time.
    pub timestamps: bool,
    /// Only the last this many lines.
    pub tail_lines: Option<i64>,
    /// Stop after this many bytes.
    pub limit_bytes: Option<i64>,
}

fn bool_param(value: Option<&str>, name: &str) -> Result<bool> {
    match value {
        None | Some("") | Some("false") | Some("0") => Ok(false),
        Some("true") | Some("1") => Ok(true),
        Some(other) => Err(ApiError::bad_request(format!(
            "invalid value {other:?} for {name}: must be true or false"
        ))),
    }
}

fn int_param(value: Option<&str>, name: &str) -> Result<Option<i64>> {
    value
        .filter(|v| !v.is_empty())
        .map(|v| {
            v.parse::<i64>().map_err(|_| {
                ApiError::bad_request(format!("invalid value {v:?} for {name}: not an integer"))
            })
        })
        .transpose()
}

impl PodLogOptions {
    /// Reads the options from query parameters (`get(name)` answers one parameter).
    pub fn from_query<'a>(get: impl Fn(&str) -> Option<&'a str>) -> Result<Self> {
        let since_time = get("sinceTime")
            .filter(|v| !v.is_empty())
            .map(|v| {
                v.parse::<Timestamp>().map_err(|_| {
                    ApiError::bad_request(format!(
                        "invalid value {v:?} for sinceTime: not RFC 3339"
                    ))
                })
            })
            .transpose()?;
        Ok(Self {
            container: get("container")
                .filter(|c| !c.is_empty())
                .map(str::to_owned),
            follow: bool_param(get("follow"), "follow")?,
            previous: bool_param(get("previous"), "previous")?,
            since_seconds: int_param(get("sinceSeconds"), "sinceSeconds")?,
            since_time,
            timestamps: bool_param(get("timestamps"), "timestamps")?,
            tail_lines: int_param(get("tailLines"), "tailLines")?,
            limit_bytes: int_param(get("limitBytes"), "limitBytes")?,
        })
    }

    /// upstream's `ValidatePodLogOptions`.
    pub fn validate(&self) -> Vec<FieldError> {
        let mut errs = Vec::new();
        if let Some(n) = self.tail_lines.filter(|n| *n < 0) {
            errs.push(FieldError::invalid(
                "tailLines",
                n,
                "must be greater than or equal to 0",
            ));
        }
        if let Some(n) = self.limit_bytes.filter(|n| *n < 1) {
            errs.push(FieldError::invalid(
                "limitBytes",
                n,
                "must be greater than 0",
            ));
        }
        match (self.since_seconds, self.since_time) {
            (Some(_), Some(_)) => errs.push(FieldError::forbidden(
                "",
                "at most one of `sinceTime` or `sinceSeconds` may be specified",
            )),
            (Some(n), None) if n < 1 => {
                errs.push(FieldError::invalid(
                    "sinceSeconds",
                    n,
                    "must be greater than 0",
                ));
            }
            _ => {}
        }
        errs
    }
}

/// The container a log request reads, as upstream's `LogLocation`: the one named, else the
/// only one, else the `kubectl.kubernetes.io/default-container` one.
fn container_name(pod: &Value, asked: Option<&str>) -> Result<String> {
    if let Some(name) = asked {
        return Ok(name.to_owned());
    }
    let names: Vec<&str> = pod
        .at("/spec/containers")
        .and_then(Value::as_array)
        .map(|cs| cs.iter().filter_map(|c| c["name"].as_str()).collect())
        .unwrap_or_default();
    if let [only] = names.as_slice() {
        return Ok((*only).to_owned());
    }
    if let Some(default) = pod
        .at("/metadata/annotations/kubectl.kubernetes.io~1default-container")
        .and_then(Value::as_str)
    {
        return Ok(default.to_owned());
    }
    Err(ApiError::bad_request(format!(
        "a container name must be specified for pod {}, choose one of: [{}]",
        crate::object::name(pod),
        names.join(" ")
    )))
}

/// The lines of `log` the options select (since, tail), rendered (timestamps), each ending
/// in a newline.
fn render(log: &[(Timestamp, String)], opts: &PodLogOptions, now: Timestamp) -> Vec<String> {
    let since = opts.since_time.or_else(|| {
        opts.since_seconds
            .and_then(|s| now.checked_sub(jiff::SignedDuration::from_secs(s)).ok())
    });
    let selected: Vec<&(Timestamp, String)> = log
        .iter()
        .filter(|(t, _)| since.is_none_or(|s| *t >= s))
        .collect();
    let skip = match opts.tail_lines {
        Some(n) => selected
            .len()
            .saturating_sub(usize::try_from(n).unwrap_or(0)),
        None => 0,
    };
    selected[skip..]
        .iter()
        .map(|(t, text)| render_line(*t, text, opts.timestamps))
        .collect()
}

fn render_line(t: Timestamp, text: &str, timestamps: bool) -> String {
    if timestamps {
        // RFC 3339 with the fraction trimmed, as Go's RFC3339Nano.
        format!("{t} {text}\n")
    } else {
        format!("{text}\n")
    }
}

/// Counts down `limitBytes`: the part of `chunk` still allowed.
fn limited(chunk: String, left: &mut Option<usize>) -> Option<Bytes> {
    let mut bytes = chunk.into_bytes();
    if let Some(left) = left {
        if *left == 0 {
            return None;
        }
        bytes.truncate(*left);
        *left -= bytes.len();
    }
    Some(Bytes::from(bytes))
}

/// The answer to a log request: the lines so far, and, when following, what comes next.
pub struct LogResponse {
    /// The first chunk.
    pub first: Bytes,
    /// The rest of a follow (`None` when not following or nothing more can come).
    pub follow: Option<std::pin::Pin<Box<dyn Stream<Item = Bytes> + Send>>>,
}

impl std::fmt::Debug for LogResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogResponse")
            .field("first", &self.first.len())
            .field("follow", &self.follow.is_some())
            .finish()
    }
}

/// What a follow remembers between polls.
struct Follow {
    registry: Arc<Registry>,
    source: Arc<dyn LogSource>,
    namespace: String,
    name: String,
    container: String,
    opts: PodLogOptions,
    /// Lines of the source's log already sent or skipped.
    seen: usize,
    /// What `limitBytes` still allows.
    left: Option<usize>,
    shutdown: CancellationToken,
    done: bool,
}

impl Follow {
    /// Waits for new lines; `None` ends the stream.
    async fn next(mut self) -> Option<(Bytes, Self)> {
        loop {
            if self.done {
                return None;
            }
            tokio::select! {
                _ = self.shutdown.cancelled() => return None,
                _ = tokio::time::sleep(FOLLOW_POLL) => {}
            }
            let Ok(pod) = self.registry.get(&PODS, &self.namespace, &self.name).await else {
                // Deleted (or unreadable): the log ends, as the kubelet's stream does.
                return None;
            };
            let Ok(log) =
                self.source
                    .log(&pod, &self.container, self.opts.previous, Timestamp::now())
            else {
                return None;
            };
            self.done = log.terminated;
            if log.lines.len() <= self.seen {
                continue;
            }
            let text: String = log.lines[self.seen..]
                .iter()
                .map(|(t, line)| render_line(*t, line, self.opts.timestamps))
                .collect();
            self.seen = log.lines.len();
            let chunk = limited(text, &mut self.left)?;
            if chunk.is_empty() {
                return None;
            }
            return Some((chunk, self));
        }
    }
}

impl Registry {
    /// Where `pods/log` reads container logs (`kcm up` registers the simulator's log model).
    pub fn logs(&self) -> &LogSlot {
        &self.logs
    }

    /// Answers `GET pods/{name}/log`: 404 for a missing pod, 422 for invalid options, 400
    /// with the kubelet's words when there is no such log.
    pub async fn pod_log(
        self: &Arc<Self>,
        namespace: &str,
        name: &str,
        opts: PodLogOptions,
        shutdown: CancellationToken,
    ) -> Result<LogResponse> {
        let errs = opts.validate();
        if !errs.is_empty() {
            return Err(ApiError::invalid(
                GroupKind {
                    group: "",
                    kind: "PodLogOptions",
                },
                name,
                &errs,
            ));
        }
        let pod = self.get(&PODS, namespace, name).await?;
        let Some(source) = self.logs.get() else {
            // No source: the simulated-node refusal.
            return self
                .connect(&PODS, namespace, name, crate::registry::Subresource::Log)
                .await
                .map(|_| LogResponse {
                    first: Bytes::new(),
                    follow: None,
                });
        };
        if pod
            .at("/spec/nodeName")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            return Err(ApiError::bad_request(format!(
                "pod {name} does not have a host assigned"
            )));
        }
        let container = container_name(&pod, opts.container.as_deref())?;
        let now = Timestamp::now();
        let log = source
            .log(&pod, &container, opts.previous, now)
            .map_err(ApiError::bad_request)?;
        let mut left = opts
            .limit_bytes
            .map(|n| usize::try_from(n).unwrap_or(usize::MAX));
        let first = limited(render(&log.lines, &opts, now).concat(), &mut left).unwrap_or_default();
        let follow = (opts.follow && !log.terminated && left != Some(0)).then(|| {
            let state = Follow {
                registry: Arc::clone(self),
                source,
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                container,
                seen: log.lines.len(),
                opts,
                left,
                shutdown,
                done: false,
            };
            Box::pin(futures::stream::unfold(state, Follow::next))
                as std::pin::Pin<Box<dyn Stream<Item = Bytes> + Send>>
        });
        Ok(LogResponse { first, follow })
    }
}

#[cfg(test)]
#[path = "pod_log_tests.rs"]
mod tests;
