//! Health checks for `/healthz`, `/livez` and `/readyz`, answered as the Kubernetes API
//! server's `healthz` package does (`ok`, `?verbose`, `?exclude=`, `/<endpoint>/<check>`).

use std::collections::BTreeSet;
use std::sync::{Arc, PoisonError, RwLock};

/// A health check: `Ok(None)` healthy, `Ok(Some(detail))` healthy with a detail shown in
/// verbose output, `Err(reason)` unhealthy (the reason is logged; the response withholds it).
pub type CheckFn = Arc<dyn Fn() -> Result<Option<String>, String> + Send + Sync>;

/// One named check.
#[derive(Clone)]
struct NamedCheck {
    name: String,
    check: CheckFn,
}

/// The checks of one endpoint. Checks can be added while serving (controllers are added once
/// they start), as upstream's `MutableHealthzHandler`. Cheap to clone; clones share checks.
#[derive(Clone, Default)]
pub struct HealthChecks {
    /// In order of addition; names unique (adding a name again replaces the check).
    checks: Arc<RwLock<Vec<NamedCheck>>>,
}

impl std::fmt::Debug for HealthChecks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

/// What an endpoint answers: HTTP status and plain-text body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HealthResponse {
    /// 200 when every (non-excluded) check passed, else 500; 404 for an unknown single check.
    pub status: u16,
    /// The body.
    pub body: String,
}

impl HealthChecks {
    /// An endpoint with no checks (always `ok`).
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) the check `name`.
    pub fn add(&self, name: impl Into<String>, check: CheckFn) {
        let name = name.into();
        let mut checks = self.checks.write().unwrap_or_else(PoisonError::into_inner);
        match checks.iter_mut().find(|c| c.name == name) {
            Some(existing) => existing.check = check,
            None => checks.push(NamedCheck { name, check }),
        }
    }

    /// The check names, in order.
    pub fn names(&self) -> Vec<String> {
        self.snapshot().into_iter().map(|c| c.name).collect()
    }

    fn snapshot(&self) -> Vec<NamedCheck> {
        self.checks
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Answers `GET /<endpoint>?<query>`, as upstream's `handleRootHealth`: `ok` when every
    /// check passes, the per-check list with `?verbose` or on failure; `exclude=<name>`
    /// (repeatable) skips checks.
    pub fn respond(&self, endpoint: &str, query: Option<&str>) -> HealthResponse {
        let params = parse_query(query.unwrap_or_default());
        let verbose = params.iter().any(|(k, _)| k == "verbose");
        let mut excluded: BTreeSet<String> = params
            .iter()
            .filter(|(k, _)| k == "exclude")
            .flat_map(|(_, v)| v.split(',').map(str::trim).map(str::to_owned))
            .filter(|v| !v.is_empty())
            .collect();
        let mut out = String::new();
        let mut failed = false;
        // Checks run outside the lock: a check may take its own locks.
        for check in self.snapshot() {
            if excluded.remove(&check.name) {
                out.push_str(&format!("[+]{} excluded: ok\n", check.name));
                continue;
            }
            match (check.check)() {
                Ok(None) => out.push_str(&format!("[+]{} ok\n", check.name)),
                Ok(Some(detail)) => out.push_str(&format!("[+]{} ok: {detail}\n", check.name)),
                Err(reason) => {
                    failed = true;
                    tracing::info!(endpoint, check = %check.name, %reason, "health check failed");
                    out.push_str(&format!("[-]{} failed: reason withheld\n", check.name));
                }
            }
        }
        if !excluded.is_empty() {
            let names: Vec<String> = excluded.iter().map(|n| format!("{n:?}")).collect();
            out.push_str(&format!(
                "warn: some health checks cannot be excluded: no matches for {}\n",
                names.join(", ")
            ));
        }
        if failed {
            out.push_str(&format!("{endpoint} check failed\n"));
            return HealthResponse {
                status: 500,
                body: out,
            };
        }
        if !verbose {
            return HealthResponse {
                status: 200,
                body: "ok".to_owned(),
            };
        }
        out.push_str(&format!("{endpoint} check passed\n"));
        HealthResponse {
            status: 200,
            body: out,
        }
    }

    /// Answers `GET /<endpoint>/<name>`; `None` when there is no such check.
    pub fn respond_single(&self, name: &str) -> Option<HealthResponse> {
        let check = self.snapshot().into_iter().find(|c| c.name == name)?;
        Some(match (check.check)() {
            Ok(_) => HealthResponse {
                status: 200,
                body: "ok".to_owned(),
            },
            Err(reason) => HealthResponse {
                status: 500,
                body: format!("internal server error: {reason}\n"),
            },
        })
    }
}

/// `a=1&b&c=x%2Cy` → pairs, with `%XX` and `+` decoded.
fn parse_query(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|part| !part.is_empty())
        .map(|part| {
            let (k, v) = part.split_once('=').unwrap_or((part, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 3;
                        continue;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The three endpoints of the manager.
///
/// - `/livez`: the process works (ping, leader election watchdog); failing means restart it.
/// - `/healthz`: liveness plus every running controller (kube-controller-manager's `/healthz`).
/// - `/readyz`: `/healthz` plus `informer-sync`, which fails while the controllers wait for
///   their caches and while shutting down.
#[derive(Clone, Debug, Default)]
pub struct HealthEndpoints {
    /// Checks of `/livez`.
    pub livez: HealthChecks,
    /// Checks of `/healthz`.
    pub healthz: HealthChecks,
    /// Checks of `/readyz`.
    pub readyz: HealthChecks,
}

impl HealthEndpoints {
    /// Endpoints holding only the `ping` check.
    pub fn new() -> Self {
        let endpoints = Self::default();
        endpoints.add_to_all("ping", Arc::new(|| Ok(None)));
        endpoints
    }

    /// Adds `check` to all three endpoints.
    pub fn add_to_all(&self, name: &str, check: CheckFn) {
        self.livez.add(name, Arc::clone(&check));
        self.healthz.add(name, Arc::clone(&check));
        self.readyz.add(name, check);
    }

    /// Adds a controller's check to `/healthz` and `/readyz`.
    pub fn add_controller(&self, name: &str, check: CheckFn) {
        self.healthz.add(name, Arc::clone(&check));
        self.readyz.add(name, check);
    }

    /// The checks of `endpoint` (`livez`, `healthz` or `readyz`).
    pub fn endpoint(&self, endpoint: &str) -> Option<&HealthChecks> {
        match endpoint {
            "livez" => Some(&self.livez),
            "healthz" => Some(&self.healthz),
            "readyz" => Some(&self.readyz),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    fn flag_check(flag: &Arc<AtomicBool>) -> CheckFn {
        let flag = Arc::clone(flag);
        Arc::new(move || {
            if flag.load(Ordering::SeqCst) {
                Ok(None)
            } else {
                Err("caches not synced".to_owned())
            }
        })
    }

    #[test]
    fn responses_follow_the_apiserver_format() {
        let synced = Arc::new(AtomicBool::new(false));
        let checks = HealthChecks::new();
        checks.add("ping", Arc::new(|| Ok(None)));
        checks.add("informer-sync", flag_check(&synced));
        checks.add(
            "leader-election",
            Arc::new(|| Ok(Some("leading as a_1".to_owned()))),
        );

        struct Case {
            name: &'static str,
            synced: bool,
            query: Option<&'static str>,
            want: HealthResponse,
        }
        let cases = [
            Case {
                name: "failing lists every check",
                synced: false,
                query: None,
                want: HealthResponse {
                    status: 500,
                    body: "[+]ping ok\n[-]informer-sync failed: reason withheld\n\
                           [+]leader-election ok: leading as a_1\nreadyz check failed\n"
                        .into(),
                },
            },
            Case {
                name: "excluding the failing check passes",
                synced: false,
                query: Some("exclude=informer-sync"),
                want: HealthResponse {
                    status: 200,
                    body: "ok".into(),
                },
            },
            Case {
                name: "unknown exclusions are warned about",
                synced: false,
                query: Some("verbose&exclude=informer-sync&exclude=nope"),
                want: HealthResponse {
                    status: 200,
                    body: "[+]ping ok\n[+]informer-sync excluded: ok\n\
                           [+]leader-election ok: leading as a_1\n\
                           warn: some health checks cannot be excluded: no matches for \"nope\"\n\
                           readyz check passed\n"
                        .into(),
                },
            },
            Case {
                name: "passing is a bare ok",
                synced: true,
                query: None,
                want: HealthResponse {
                    status: 200,
                    body: "ok".into(),
                },
            },
            Case {
                name: "verbose passing lists checks",
                synced: true,
                query: Some("verbose=1"),
                want: HealthResponse {
                    status: 200,
                    body: "[+]ping ok\n[+]informer-sync ok\n\
                           [+]leader-election ok: leading as a_1\nreadyz check passed\n"
                        .into(),
                },
            },
        ];
        for case in cases {
            synced.store(case.synced, Ordering::SeqCst);
            assert_eq!(
                checks.respond("readyz", case.query),
                case.want,
                "{}",
                case.name
            );
        }
    }

    #[test]
    fn single_checks_show_their_reason() {
        let synced = Arc::new(AtomicBool::new(false));
        let checks = HealthChecks::new();
        checks.add("informer-sync", flag_check(&synced));
        assert_eq!(
            checks.respond_single("informer-sync"),
            Some(HealthResponse {
                status: 500,
                body: "internal server error: caches not synced\n".into()
            })
        );
        synced.store(true, Ordering::SeqCst);
        assert_eq!(
            checks.respond_single("informer-sync").map(|r| r.status),
            Some(200)
        );
        assert_eq!(checks.respond_single("nope"), None);
    }

    #[test]
    fn endpoints_share_ping_and_controllers_join_healthz_and_readyz() {
        let endpoints = HealthEndpoints::new();
        endpoints.add_controller("replicaset-controller", Arc::new(|| Ok(None)));
        endpoints.readyz.add("informer-sync", Arc::new(|| Ok(None)));
        assert_eq!(endpoints.livez.names(), vec!["ping"]);
        assert_eq!(
            endpoints.healthz.names(),
            vec!["ping", "replicaset-controller"]
        );
        assert_eq!(
            endpoints.readyz.names(),
            vec!["ping", "replicaset-controller", "informer-sync"]
        );
        // Adding a name again replaces the check instead of listing it twice.
        endpoints.add_controller("replicaset-controller", Arc::new(|| Err("x".into())));
        assert_eq!(endpoints.healthz.names().len(), 2);
        assert_eq!(endpoints.healthz.respond("healthz", None).status, 500);
        assert!(endpoints.endpoint("metrics").is_none());
    }

    #[test]
    fn query_decoding() {
        assert_eq!(
            parse_query("exclude=a%2Cb&verbose&x=1+2"),
            vec![
                ("exclude".to_owned(), "a,b".to_owned()),
                ("verbose".to_owned(), String::new()),
                ("x".to_owned(), "1 2".to_owned()),
            ]
        );
        assert_eq!(percent_decode("%zz%4"), "%zz%4");
    }
}
