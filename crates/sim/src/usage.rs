//! The resource usage simulated pods and nodes report (what `metrics.k8s.io` serves): a share of each container's requests by default, set or ramped per pod or per container by annotations.
//!
//! Simulated containers run nothing, so their usage is a model, a pure function of the pod
//! object and the time:
//!
//! - by default a running container uses [`UsageConfig::default_share`] of its request (its
//!   limit when it has no request, else a nominal 100m CPU / 128Mi memory);
//! - `sim.kcm.io/cpu-usage` / `sim.kcm.io/memory-usage` on the pod set every container's
//!   usage, and `sim.kcm.io/cpu-usage.<container>` one container's: an absolute quantity
//!   (`250m`, `1`, `300Mi`), a percentage of the request (`150%`), or a ramp `FROM->TO/D`
//!   (`20%->150%/2m`): linear from `FROM` when the container started to `TO` after `D`, then
//!   `TO` (for load tests of autoscaling);
//! - a node uses the sum of its running pods plus a system overhead.
//!
//! Only running pods report usage, as metrics-server reports only pods whose containers run.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Container, Pod};

use crate::kubelet::parse_duration;
use crate::quantity::Quantity;

/// Sets the CPU usage of every container of the pod.
pub const CPU_USAGE_ANNOTATION: &str = "sim.kcm.io/cpu-usage";
/// Sets the memory usage of every container of the pod.
pub const MEMORY_USAGE_ANNOTATION: &str = "sim.kcm.io/memory-usage";

/// The request a container without request or limit is measured against: 100m CPU.
const NOMINAL_CPU_MILLIS: u64 = 100;
/// ... and 128Mi memory.
const NOMINAL_MEMORY_BYTES: u64 = 128 * 1024 * 1024;

/// The model's knobs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct UsageConfig {
    /// The share of its request a container uses when no annotation says otherwise.
    pub default_share: f64,
    /// CPU every node uses beyond its pods (system daemons, the kubelet), in millicores.
    pub node_cpu_overhead_millis: u64,
    /// Memory every node uses beyond its pods, in bytes.
    pub node_memory_overhead_bytes: u64,
}

/// The default share of requests a container uses.
pub const DEFAULT_USAGE_SHARE: f64 = 0.25;

impl Default for UsageConfig {
    fn default() -> Self {
        Self {
            default_share: DEFAULT_USAGE_SHARE,
            node_cpu_overhead_millis: 100,
            node_memory_overhead_bytes: 512 * 1024 * 1024,
        }
    }
}

/// What one container (or a node) uses at an instant.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// CPU in millicores.
    pub cpu_millis: u64,
    /// Memory (working set) in bytes.
    pub memory_bytes: u64,
}

impl Usage {
    /// The sum of two usages.
    pub fn plus(self, other: Usage) -> Usage {
        Usage {
            cpu_millis: self.cpu_millis.saturating_add(other.cpu_millis),
            memory_bytes: self.memory_bytes.saturating_add(other.memory_bytes),
        }
    }
}

/// One end of a usage setting.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Level {
    /// An absolute amount (millicores or bytes).
    Absolute(u64),
    /// A share of the container's request (1.0 = 100 %).
    Share(f64),
}

/// A parsed usage annotation.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Setting {
    /// The same level all along.
    Fixed(Level),
    /// From one level at the container's start to another after a duration.
    Ramp(Level, Level, Duration),
}

/// Which resource a setting is about (the unit of its absolute amounts).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Resource {
    Cpu,
    Memory,
}

impl Resource {
    fn name(self) -> &'static str {
        match self {
            Resource::Cpu => "cpu",
            Resource::Memory => "memory",
        }
    }

    fn annotation(self) -> &'static str {
        match self {
            Resource::Cpu => CPU_USAGE_ANNOTATION,
            Resource::Memory => MEMORY_USAGE_ANNOTATION,
        }
    }
}

fn parse_level(s: &str, resource: Resource) -> Option<Level> {
    let s = s.trim();
    if let Some(percent) = s.strip_suffix('%') {
        let p: f64 = percent.trim().parse().ok()?;
        return (p.is_finite() && p >= 0.0).then_some(Level::Share(p / 100.0));
    }
    let q = Quantity::parse(s).ok()?;
    let amount = match resource {
        Resource::Cpu => q.milli(),
        Resource::Memory => q.value(),
    };
    u64::try_from(amount).ok().map(Level::Absolute)
}

/// Parses `Q`, `P%` or `FROM->TO/D`; `None` for anything else (the annotation is then
/// ignored, as the simulator ignores malformed fault annotations).
fn parse_setting(s: &str, resource: Resource) -> Option<Setting> {
    let Some((from, rest)) = s.split_once("->") else {
        return parse_level(s, resource).map(Setting::Fixed);
    };
    let (to, over) = rest.split_once('/')?;
    Some(Setting::Ramp(
        parse_level(from, resource)?,
        parse_level(to, resource)?,
        parse_duration(over.trim())?,
    ))
}

/// The container's request of `resource` (else its limit, else the nominal amount), in
/// millicores or bytes.
fn base(container: &Container, resource: Resource) -> u64 {
    let resources = container.resources.as_ref();
    let pick = |list: Option<
        &std::collections::BTreeMap<
            String,
            k8s_openapi::apimachinery::pkg::api::resource::Quantity,
        >,
    >| {
        list.and_then(|m| m.get(resource.name()))
            .and_then(|q| Quantity::parse(&q.0).ok())
            .map(|q| match resource {
                Resource::Cpu => q.milli(),
                Resource::Memory => q.value(),
            })
            .and_then(|v| u64::try_from(v).ok())
    };
    pick(resources.and_then(|r| r.requests.as_ref()))
        .or_else(|| pick(resources.and_then(|r| r.limits.as_ref())))
        .unwrap_or(match resource {
            Resource::Cpu => NOMINAL_CPU_MILLIS,
            Resource::Memory => NOMINAL_MEMORY_BYTES,
        })
}

fn amount(level: Level, base: u64) -> f64 {
    match level {
        Level::Absolute(v) => v as f64,
        Level::Share(share) => share * base as f64,
    }
}

/// The amount a setting gives `elapsed` after the container started.
fn evaluate(setting: Setting, base: u64, elapsed: Duration) -> u64 {
    let value = match setting {
        Setting::Fixed(level) => amount(level, base),
        Setting::Ramp(from, to, over) => {
            let (from, to) = (amount(from, base), amount(to, base));
            if over.is_zero() || elapsed >= over {
                to
            } else {
                from + (to - from) * (elapsed.as_secs_f64() / over.as_secs_f64())
            }
        }
    };
    // Rounded, and never negative or beyond u64 (the cast saturates).
    value.round().max(0.0) as u64
}

/// The usage of one container of `pod`, `elapsed` after it started.
fn container_usage(
    pod: &Pod,
    container: &Container,
    config: &UsageConfig,
    elapsed: Duration,
) -> Usage {
    let annotations = pod.metadata.annotations.as_ref();
    let one = |resource: Resource| {
        let own = format!("{}.{}", resource.annotation(), container.name);
        let setting = annotations
            .and_then(|a| a.get(&own).or_else(|| a.get(resource.annotation())))
            .and_then(|s| parse_setting(s, resource))
            .unwrap_or(Setting::Fixed(Level::Share(config.default_share)));
        evaluate(setting, base(container, resource), elapsed)
    };
    Usage {
        cpu_millis: one(Resource::Cpu),
        memory_bytes: one(Resource::Memory),
    }
}

/// When the container named `name` started running (its `running.startedAt`, else the
/// pod's `startTime`), or `None` when it is not running.
fn started_at(pod: &Pod, name: &str) -> Option<Timestamp> {
    let status = pod.status.as_ref()?;
    let state = status
        .container_statuses
        .as_ref()?
        .iter()
        .find(|s| s.name == name)?
        .state
        .as_ref()?;
    let running = state.running.as_ref()?;
    running
        .started_at
        .as_ref()
        .or(status.start_time.as_ref())
        .map(|t| t.0)
}

/// The usage of each container of `pod` at `now`, in spec order; `None` when the pod is not
/// running (metrics-server reports nothing for it). A container not running yet counts as
/// using nothing.
pub fn pod_usage(pod: &Pod, config: &UsageConfig, now: Timestamp) -> Option<Vec<(String, Usage)>> {
    let status = pod.status.as_ref()?;
    if status.phase.as_deref() != Some("Running") || pod.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let spec = pod.spec.as_ref()?;
    let usages = spec
        .containers
        .iter()
        .map(|c| {
            let usage = match started_at(pod, &c.name) {
                Some(start) => {
                    let elapsed = now
                        .duration_since(start)
                        .try_into()
                        .unwrap_or(Duration::ZERO);
                    container_usage(pod, c, config, elapsed)
                }
                None => Usage::default(),
            };
            (c.name.clone(), usage)
        })
        .collect();
    Some(usages)
}

/// A node's usage: its pods' (summed by the caller) plus the system overhead.
pub fn node_usage(pods: Usage, config: &UsageConfig) -> Usage {
    pods.plus(Usage {
        cpu_millis: config.node_cpu_overhead_millis,
        memory_bytes: config.node_memory_overhead_bytes,
    })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{
        ContainerState, ContainerStateRunning, ContainerStatus, PodSpec, PodStatus,
        ResourceRequirements,
    };
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    use super::*;

    const MI: u64 = 1024 * 1024;

    fn container(name: &str, cpu: Option<&str>, memory: Option<&str>) -> Container {
        let mut requests = std::collections::BTreeMap::new();
        if let Some(cpu) = cpu {
            requests.insert("cpu".to_owned(), K8sQuantity(cpu.to_owned()));
        }
        if let Some(memory) = memory {
            requests.insert("memory".to_owned(), K8sQuantity(memory.to_owned()));
        }
        Container {
            name: name.to_owned(),
            resources: Some(ResourceRequirements {
                requests: Some(requests),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn started() -> Timestamp {
        "2026-01-01T00:00:00Z".parse().expect("timestamp")
    }

    fn running_pod(annotations: &[(&str, &str)], containers: Vec<Container>) -> Pod {
        let statuses = containers
            .iter()
            .map(|c| ContainerStatus {
                name: c.name.clone(),
                state: Some(ContainerState {
                    running: Some(ContainerStateRunning {
                        started_at: Some(Time(started())),
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            })
            .collect();
        Pod {
            metadata: ObjectMeta {
                name: Some("web".into()),
                annotations: Some(
                    annotations
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                        .collect(),
                ),
                ..Default::default()
            },
            spec: Some(PodSpec {
                containers,
                ..Default::default()
            }),
            status: Some(PodStatus {
                phase: Some("Running".into()),
                start_time: Some(Time(started())),
                container_statuses: Some(statuses),
                ..Default::default()
            }),
        }
    }

    fn at(seconds: i64) -> Timestamp {
        started() + jiff::SignedDuration::from_secs(seconds)
    }

    #[test]
    fn usage_follows_requests_and_annotations() {
        struct Case {
            name: &'static str,
            annotations: &'static [(&'static str, &'static str)],
            after_secs: i64,
            want: Vec<(&'static str, u64, u64)>,
        }
        let cases = [
            Case {
                name: "default share of requests",
                annotations: &[],
                after_secs: 10,
                want: vec![("app", 50, 64 * MI), ("side", 25, 32 * MI)],
            },
            Case {
                name: "percentage for every container",
                annotations: &[(CPU_USAGE_ANNOTATION, "150%")],
                after_secs: 10,
                want: vec![("app", 300, 64 * MI), ("side", 150, 32 * MI)],
            },
            Case {
                name: "absolute amounts, one container overridden",
                annotations: &[
                    (CPU_USAGE_ANNOTATION, "10m"),
                    ("sim.kcm.io/cpu-usage.side", "1"),
                    (MEMORY_USAGE_ANNOTATION, "300Mi"),
                ],
                after_secs: 10,
                want: vec![("app", 10, 300 * MI), ("side", 1000, 300 * MI)],
            },
            Case {
                name: "ramp halfway",
                annotations: &[(CPU_USAGE_ANNOTATION, "0%->100%/60s")],
                after_secs: 30,
                want: vec![("app", 100, 64 * MI), ("side", 50, 32 * MI)],
            },
            Case {
                name: "ramp done",
                annotations: &[(CPU_USAGE_ANNOTATION, "50m->100%/1m")],
                after_secs: 600,
                want: vec![("app", 200, 64 * MI), ("side", 100, 32 * MI)],
            },
            Case {
                name: "malformed annotation falls back to the default share",
                annotations: &[(CPU_USAGE_ANNOTATION, "lots")],
                after_secs: 10,
                want: vec![("app", 50, 64 * MI), ("side", 25, 32 * MI)],
            },
        ];
        for case in cases {
            let pod = running_pod(
                case.annotations,
                vec![
                    container("app", Some("200m"), Some("256Mi")),
                    container("side", Some("100m"), Some("128Mi")),
                ],
            );
            let got = pod_usage(&pod, &UsageConfig::default(), at(case.after_secs))
                .expect("running pod reports");
            let got: Vec<(&str, u64, u64)> = got
                .iter()
                .map(|(n, u)| (n.as_str(), u.cpu_millis, u.memory_bytes))
                .collect();
            assert_eq!(got, case.want, "{}", case.name);
        }
    }

    #[test]
    fn no_request_uses_the_nominal_amounts_and_pending_pods_report_nothing() {
        let pod = running_pod(&[], vec![container("app", None, None)]);
        let config = UsageConfig {
            default_share: 1.0,
            ..UsageConfig::default()
        };
        let got = pod_usage(&pod, &config, at(1)).expect("running");
        assert_eq!(
            got[0].1,
            Usage {
                cpu_millis: NOMINAL_CPU_MILLIS,
                memory_bytes: NOMINAL_MEMORY_BYTES
            }
        );

        let mut pending = pod.clone();
        if let Some(status) = pending.status.as_mut() {
            status.phase = Some("Pending".into());
        }
        assert_eq!(pod_usage(&pending, &config, at(1)), None);
    }

    #[test]
    fn node_adds_the_overhead() {
        let config = UsageConfig::default();
        let pods = Usage {
            cpu_millis: 300,
            memory_bytes: 100 * MI,
        };
        assert_eq!(
            node_usage(pods, &config),
            Usage {
                cpu_millis: 400,
                memory_bytes: 612 * MI
            }
        );
    }

    #[test]
    fn settings_parse() {
        assert_eq!(
            parse_setting("20%->150%/2m", Resource::Cpu),
            Some(Setting::Ramp(
                Level::Share(0.2),
                Level::Share(1.5),
                Duration::from_secs(120)
            ))
        );
        assert_eq!(
            parse_setting("1Gi", Resource::Memory),
            Some(Setting::Fixed(Level::Absolute(1024 * MI)))
        );
        for bad in ["", "-5%", "1->", "1->2", "1->2/soon", "x%"] {
            assert_eq!(parse_setting(bad, Resource::Cpu), None, "{bad}");
        }
    }
}
