//! Watch: storage events turned into Kubernetes watch events (ADDED/MODIFIED/DELETED/BOOKMARK/ERROR), filtered by selectors.
//!
//! As upstream's cacher watch: from `resourceVersion=N` every change after N; unset or `0`
//! first replays the current state as ADDED; an object entering or leaving the selector
//! arrives as ADDED or DELETED; DELETED carries the last state at the deletion's revision;
//! BOOKMARKs only when asked for; a too-old N is an ERROR event with a 410 `Expired` Status.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use rand::Rng;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::error::{ApiError, Result};
use crate::registry::event_cache::EventCache;
use crate::registry::list::ListOptions;
use crate::registry::resource::ResourceDef;
use crate::registry::{DefRef, Registry, decode_stored, parse_resource_version};
use crate::storage::{self, Event, Revision};

/// Upstream's minimum request timeout: watches without `timeoutSeconds` last between this
/// and twice this (`--min-request-timeout`, 1800 s).
const MIN_REQUEST_TIMEOUT: Duration = Duration::from_secs(1800);

/// Encoded events buffered per watcher before the watch applies backpressure to the store.
const WATCH_BUFFER: usize = 128;

/// The annotation on the BOOKMARK that ends `sendInitialEvents`' initial ADDED events.
pub const INITIAL_EVENTS_END_ANNOTATION: &str = "k8s.io/initial-events-end";

/// Server-wide settings of watches.
#[derive(Clone, Debug)]
pub struct WatchSettings {
    /// How often a watch that asked for bookmarks gets one.
    pub bookmark_interval: Duration,
    /// Ends every watch when the server shuts down.
    pub shutdown: CancellationToken,
}

/// One encoded watch event line (`{"type":...,"object":...}\n`).
pub type EncodedEvent = Bytes;

/// Encodes a watch event as one JSON line.
pub fn encode_event(kind: &str, object: &Value) -> Bytes {
    let mut line = serde_json::to_vec(&json!({"type": kind, "object": object})).unwrap_or_default();
    line.push(b'\n');
    Bytes::from(line)
}

/// Where a watch starts.
enum Start {
    /// Replay the state at the latest revision as ADDED, then follow (`rv` unset or `0`);
    /// with `end_bookmark`, a BOOKMARK annotated `k8s.io/initial-events-end` follows the replay.
    Initial { end_bookmark: bool },
    /// Every change after this revision.
    After(Revision),
    /// Only changes after the latest revision.
    Now,
}

impl Registry {
    /// Starts a watch and returns the receiver of its encoded event lines. The watch runs on
    /// its own task until `timeoutSeconds`, a store error, server shutdown, or the receiver
    /// being dropped (the client went away).
    pub async fn watch(
        self: &Arc<Self>,
        def: DefRef,
        namespace: Option<String>,
        opts: ListOptions,
        settings: WatchSettings,
    ) -> Result<mpsc::Receiver<EncodedEvent>> {
        opts.validate()?;
        let rv = parse_resource_version(&opts.resource_version)?;
        let start = match (opts.send_initial_events, rv) {
            (Some(true), _) => Start::Initial { end_bookmark: true },
            (Some(false), None | Some(0)) => Start::Now,
            (None, None | Some(0)) => Start::Initial {
                end_bookmark: false,
            },
            (_, Some(n)) => Start::After(n),
        };
        let namespace = namespace.or_else(|| {
            opts.field_selector
                .required_value("metadata.namespace")
                .filter(|ns| !ns.is_empty() && def.namespaced)
                .map(str::to_owned)
        });
        let prefix = def.storage_prefix(namespace.as_deref());
        let timeout = match opts.timeout_seconds {
            Some(t) if t > 0 => Duration::from_secs(t.unsigned_abs()),
            _ => {
                let factor: f64 = rand::rng().random_range(1.0..2.0);
                MIN_REQUEST_TIMEOUT.mul_f64(factor)
            }
        };
        let (tx, rx) = mpsc::channel(WATCH_BUFFER);
        let registry = Arc::clone(self);
        tokio::spawn(async move {
            let deadline = tokio::time::sleep(timeout);
            let run = registry.run_watch(&def, prefix, start, opts, &settings, &tx);
            tokio::select! {
                _ = run => {}
                _ = deadline => {}
                _ = settings.shutdown.cancelled() => {}
                _ = tx.closed() => {}
            }
        });
        Ok(rx)
    }

    async fn run_watch(
        &self,
        def: &ResourceDef,
        prefix: String,
        start: Start,
        opts: ListOptions,
        settings: &WatchSettings,
        tx: &mpsc::Sender<EncodedEvent>,
    ) {
        let bookmark = |rev: Revision, end_of_initial: bool| {
            let mut metadata = json!({"resourceVersion": rev.to_string()});
            if end_of_initial {
                metadata["annotations"] = json!({INITIAL_EVENTS_END_ANNOTATION: "true"});
            }
            encode_event(
                "BOOKMARK",
                &json!({"kind": def.kind, "apiVersion": def.api_version(), "metadata": metadata}),
            )
        };
        let error_event = |err: ApiError| encode_event("ERROR", &err.to_status());
        let mut last: Revision = match start {
            Start::After(n) => n,
            Start::Now => match self.storage().current_revision().await {
                Ok(r) => r,
                Err(e) => {
                    let _ = tx.send(error_event(ApiError::internal(e))).await;
                    return;
                }
            },
            Start::Initial { end_bookmark } => {
                let page = match self
                    .storage()
                    .list(storage::ListOptions {
                        prefix: prefix.clone(),
                        ..Default::default()
                    })
                    .await
                {
                    Ok(p) => p,
                    Err(e) => {
                        let _ = tx.send(error_event(ApiError::internal(e))).await;
                        return;
                    }
                };
                for kv in &page.kvs {
                    let Ok(obj) = decode_stored(def, kv) else {
                        continue;
                    };
                    if opts.matches(&obj) && tx.send(encode_event("ADDED", &obj)).await.is_err() {
                        return;
                    }
                }
                if end_bookmark && tx.send(bookmark(page.revision, true)).await.is_err() {
                    return;
                }
                page.revision
            }
        };
        let mut events = match self.storage().watch(&prefix, last).await {
            Ok(stream) => stream,
            Err(e) => {
                let _ = tx.send(error_event(watch_error(e, last))).await;
                return;
            }
        };
        let mut ticker = tokio::time::interval_at(
            tokio::time::Instant::now() + settings.bookmark_interval,
            settings.bookmark_interval,
        );
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                next = events.next() => {
                    let event = match next {
                        Some(Ok(ev)) => ev,
                        Some(Err(e)) => {
                            let _ = tx.send(error_event(watch_error(e, last))).await;
                            return;
                        }
                        None => return,
                    };
                    last = event.revision();
                    if let Some(line) = convert_event(&self.events, def, &event, &opts)
                        && tx.send(line).await.is_err()
                    {
                        return;
                    }
                }
                _ = ticker.tick(), if opts.allow_watch_bookmarks => {
                    // A bookmark never claims a revision this watch has not delivered up to.
                    if last > 0 && tx.send(bookmark(last, false)).await.is_err() {
                        return;
                    }
                }
            }
        }
    }
}

/// The API error a failed store watch is answered with (410 for compaction).
fn watch_error(e: storage::Error, requested: Revision) -> ApiError {
    match e {
        storage::Error::Compacted { compacted, .. } => ApiError::expired(format!(
            "too old resource version: {requested} ({compacted})"
        )),
        other => ApiError::internal(other),
    }
}

/// Turns one store event into the watch event this watcher sees, if any. Decoding and
/// encoding go through the shared `cache`, so a fan-out does the work once per event.
fn convert_event(
    cache: &EventCache,
    def: &ResourceDef,
    event: &Event,
    opts: &ListOptions,
) -> Option<Bytes> {
    match event {
        Event::Put { kv, prev } => {
            let cur = cache.object(def, kv)?;
            let cur_matches = opts.matches(&cur);
            let prev_obj = match prev {
                Some(p) if opts.filters() => cache.object(def, p),
                _ => None,
            };
            let prev_matches = match (&prev_obj, prev) {
                (Some(p), _) => opts.matches(p),
                (None, Some(_)) => !opts.filters(),
                (None, None) => false,
            };
            let (kind, revision) = match (cur_matches, prev_matches) {
                (true, true) => ("MODIFIED", kv.mod_revision),
                (true, false) => ("ADDED", kv.mod_revision),
                (false, true) => ("DELETED", kv.mod_revision),
                (false, false) => return None,
            };
            Some(cache.line(def, &kv.key, revision, kind, || {
                if kind == "DELETED" {
                    // Leaving the selector: the previous state, at this event's revision.
                    let mut gone = prev_obj.as_deref().cloned().unwrap_or(Value::Null);
                    crate::object::set_resource_version(&mut gone, kv.mod_revision);
                    encode_event(kind, &gone)
                } else {
                    encode_event(kind, &cur)
                }
            }))
        }
        Event::Delete { revision, prev } => {
            let last = cache.object(def, prev)?;
            if !opts.matches(&last) {
                return None;
            }
            Some(cache.line(def, &prev.key, *revision, "DELETED", || {
                let mut gone = Value::clone(&last);
                crate::object::set_resource_version(&mut gone, *revision);
                encode_event("DELETED", &gone)
            }))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::registry::field_selector::FieldSelector;
    use crate::resources::pod;
    use crate::storage::KeyValue;

    fn kv(name: &str, node: &str, rev: Revision) -> KeyValue {
        let obj =
            json!({"metadata": {"name": name, "namespace": "ns"}, "spec": {"nodeName": node}});
        KeyValue {
            key: Arc::from(format!("/registry/core/pods/ns/{name}")),
            value: Bytes::from(serde_json::to_vec(&obj).expect("json")),
            create_revision: 1,
            mod_revision: rev,
        }
    }

    fn decode(line: &Bytes) -> Value {
        serde_json::from_slice(line).expect("json line")
    }

    #[test]
    fn selector_transitions() {
        let opts = ListOptions {
            field_selector: FieldSelector::parse("spec.nodeName=n1", &pod::PODS).expect("parses"),
            ..Default::default()
        };
        let s = &pod::PODS;
        struct Case {
            name: &'static str,
            event: Event,
            want: Option<(&'static str, &'static str)>,
        }
        let cases = [
            Case {
                name: "enters selector",
                event: Event::Put {
                    kv: kv("a", "n1", 5),
                    prev: Some(kv("a", "", 4)),
                },
                want: Some(("ADDED", "5")),
            },
            Case {
                name: "leaves selector",
                event: Event::Put {
                    kv: kv("a", "n2", 6),
                    prev: Some(kv("a", "n1", 5)),
                },
                want: Some(("DELETED", "6")),
            },
            Case {
                name: "stays in",
                event: Event::Put {
                    kv: kv("a", "n1", 7),
                    prev: Some(kv("a", "n1", 6)),
                },
                want: Some(("MODIFIED", "7")),
            },
            Case {
                name: "never matches",
                event: Event::Put {
                    kv: kv("a", "n3", 8),
                    prev: None,
                },
                want: None,
            },
            Case {
                name: "deleted at deletion revision",
                event: Event::Delete {
                    revision: 9,
                    prev: kv("a", "n1", 7),
                },
                want: Some(("DELETED", "9")),
            },
        ];
        for case in cases {
            let got =
                convert_event(&EventCache::new(16), s, &case.event, &opts).map(|l| decode(&l));
            let got = got.as_ref().map(|v| {
                (
                    v["type"].as_str().unwrap_or("").to_owned(),
                    v["object"]["metadata"]["resourceVersion"]
                        .as_str()
                        .unwrap_or("")
                        .to_owned(),
                )
            });
            let want = case.want.map(|(t, r)| (t.to_owned(), r.to_owned()));
            assert_eq!(got, want, "case {}", case.name);
        }
    }

    #[test]
    fn unfiltered_put_is_added_or_modified() {
        let s = &pod::PODS;
        let opts = ListOptions::default();
        let added = convert_event(
            &EventCache::new(16),
            s,
            &Event::Put {
                kv: kv("a", "", 2),
                prev: None,
            },
            &opts,
        )
        .expect("event");
        assert_eq!(decode(&added)["type"], "ADDED");
        let modified = convert_event(
            &EventCache::new(16),
            s,
            &Event::Put {
                kv: kv("a", "", 3),
                prev: Some(kv("a", "", 2)),
            },
            &opts,
        )
        .expect("event");
        assert_eq!(decode(&modified)["type"], "MODIFIED");
    }
}
