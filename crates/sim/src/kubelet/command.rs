//! What a simulated container's command does: how long it runs and how it exits.
//!
//! Nothing runs, so the simulator reads the few commands whose effect is plain from their
//! text — `sleep N`, `true`, `false`, and `sh -c` scripts made of `sleep`, `exit N`,
//! `tail -f` and `while true` loops — and gives any other command
//! [`DEFAULT_RUN_DURATION`](super::DEFAULT_RUN_DURATION) and exit code 0.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Probe};

use super::{DEFAULT_RUN_DURATION, parse_sleep};

/// How one run of a container ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    /// How long it runs; `None` = until it is killed.
    pub duration: Option<Duration>,
    /// Its exit code when it ends by itself.
    pub exit_code: i32,
}

impl Run {
    const DEFAULT: Run = Run {
        duration: Some(DEFAULT_RUN_DURATION),
        exit_code: 0,
    };
    const FOREVER: Run = Run {
        duration: None,
        exit_code: 0,
    };
}

fn program(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

/// The run of a container: its `command` followed by its `args`.
pub fn container_run(container: &Container) -> Run {
    let argv: Vec<String> = container
        .command
        .iter()
        .flatten()
        .chain(container.args.iter().flatten())
        .cloned()
        .collect();
    if container.command.as_ref().is_none_or(|c| c.is_empty()) {
        // The image's entrypoint: unknown.
        return Run::DEFAULT;
    }
    argv_run(&argv).unwrap_or(Run::DEFAULT)
}

/// The run of `argv`, when the model knows the program.
fn argv_run(argv: &[String]) -> Option<Run> {
    let (first, rest) = argv.split_first()?;
    match program(first) {
        "sleep" => {
            let duration = parse_sleep(rest)?;
            Some(Run {
                duration,
                exit_code: 0,
            })
        }
        "true" | ":" => Some(Run {
            duration: Some(Duration::ZERO),
            exit_code: 0,
        }),
        "false" => Some(Run {
            duration: Some(Duration::ZERO),
            exit_code: 1,
        }),
        "sh" | "bash" | "ash" | "dash" => match rest {
            [flag, script, ..] if flag == "-c" => Some(script_run(script)),
            _ => None,
        },
        _ => None,
    }
}

/// The run of a shell script: the sum of its `sleep`s (or forever, for `tail -f`, `sleep
/// infinity` or a `while true` loop) up to its first `exit N`; exit code 1 when its last
/// command is `false`. A script with none of these, or with a conditional (`if`, `case`,
/// `test`), runs the default time.
fn script_run(script: &str) -> Run {
    // What a conditional does depends on state the simulator does not have (a file, a
    // variable): such a script is an unknown command.
    let conditional = script
        .split(|c: char| c.is_whitespace() || c == ';')
        .any(|w| matches!(w, "if" | "elif" | "else" | "case" | "test" | "[" | "[["));
    if conditional {
        return Run::DEFAULT;
    }
    let mut total = Duration::ZERO;
    let mut known = false;
    let mut exit_code = 0;
    for command in script.split([';', '\n', '&', '|']) {
        let words: Vec<String> = command.split_whitespace().map(str::to_owned).collect();
        let Some(first) = words.first() else {
            continue;
        };
        match program(first) {
            "exit" => {
                exit_code = words.get(1).and_then(|c| c.parse().ok()).unwrap_or(0);
                known = true;
                break;
            }
            "while" | "until" => return Run::FOREVER,
            "tail" if words.iter().any(|w| w == "-f" || w == "-F") => return Run::FOREVER,
            "sleep" => match parse_sleep(&words[1..]) {
                Some(Some(d)) => {
                    total = total.saturating_add(d);
                    known = true;
                }
                Some(None) => return Run::FOREVER,
                None => {}
            },
            "false" => {
                exit_code = 1;
                known = true;
                continue;
            }
            "true" => known = true,
            _ => {}
        }
        exit_code = 0;
    }
    if !known {
        return Run::DEFAULT;
    }
    Run {
        duration: Some(total),
        exit_code,
    }
}

/// Whether `probe` succeeds, as far as the simulator can judge: an `exec` probe whose
/// command is known to exit non-zero (`false`, `sh -c "exit 1"`) fails; every other probe
/// (HTTP, TCP, gRPC, commands it cannot read) is taken as succeeding.
pub fn probe_succeeds(probe: &Probe) -> bool {
    let Some(command) = probe.exec.as_ref().and_then(|e| e.command.as_ref()) else {
        return true;
    };
    argv_run(command).is_none_or(|run| run.exit_code == 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ExecAction;

    fn run(command: &[&str]) -> Run {
        container_run(&Container {
            name: "c".into(),
            command: Some(command.iter().map(|s| s.to_string()).collect()),
            ..Container::default()
        })
    }

    fn secs(n: u64) -> Option<Duration> {
        Some(Duration::from_secs(n))
    }

    #[test]
    fn true_and_false_exit_at_once() {
        assert_eq!(
            run(&["/bin/true"]),
            Run {
                duration: secs(0),
                exit_code: 0
            }
        );
        assert_eq!(
            run(&["false"]),
            Run {
                duration: secs(0),
                exit_code: 1
            }
        );
    }

    #[test]
    fn shell_scripts_sum_their_sleeps_and_honour_exit() {
        assert_eq!(
            run(&["sh", "-c", "sleep 10; echo hi; sleep 5"]).duration,
            secs(15)
        );
        assert_eq!(
            run(&["/bin/sh", "-c", "sleep 2 && exit 3"]),
            Run {
                duration: secs(2),
                exit_code: 3
            }
        );
        assert_eq!(run(&["sh", "-c", "exit 0"]).duration, secs(0));
        assert_eq!(run(&["sh", "-c", "tail -f /dev/null"]).duration, None);
        assert_eq!(
            run(&["sh", "-c", "while true; do sleep 1; done"]).duration,
            None
        );
        assert_eq!(run(&["sh", "-c", "echo hi; false"]).exit_code, 1);
        assert_eq!(run(&["sh", "-c", "false || true"]).exit_code, 0);
        // Nothing the model reads: the default run.
        assert_eq!(run(&["sh", "-c", "cat /etc/hosts"]), Run::DEFAULT);
        assert_eq!(run(&["/agnhost", "serve-hostname"]), Run::DEFAULT);
        // A branch taken on a file the container would see: unknown, not `exit 0` at once
        // (the e2e Job disruption test's pods sleep on their first run).
        let script = "\n\t\t\tif [[ -r /data/foo-$JOB_COMPLETION_INDEX ]]\n\t\t\tthen\n\t\t\t\texit 0\n\t\t\telse\n\t\t\t\ttouch /data/foo-$JOB_COMPLETION_INDEX\n\t\t\t\tsleep 1000000\n\t\t\tfi\n\t\t";
        assert_eq!(run(&["/bin/sh", "-c", script]), Run::DEFAULT);
        assert_eq!(
            run(&["sh", "-c", "[ -f /tmp/x ] && exit 1; sleep 3"]),
            Run::DEFAULT
        );
    }

    #[test]
    fn exec_probes_known_to_fail_fail() {
        let probe = |argv: &[&str]| Probe {
            exec: Some(ExecAction {
                command: Some(argv.iter().map(|s| s.to_string()).collect()),
            }),
            ..Probe::default()
        };
        assert!(!probe_succeeds(&probe(&["/bin/false"])));
        assert!(!probe_succeeds(&probe(&["sh", "-c", "exit 1"])));
        assert!(probe_succeeds(&probe(&["cat", "/tmp/health"])));
        assert!(probe_succeeds(&probe(&["true"])));
        assert!(probe_succeeds(&Probe::default()), "HTTP/TCP: succeeds");
    }
}
