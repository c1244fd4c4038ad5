//! CPU seconds and resident memory of a process, read from `/proc/<pid>/stat` and `/proc/<pid>/status`.

use std::path::PathBuf;

/// Clock ticks per second of `/proc/<pid>/stat`'s times: `USER_HZ`, which Linux fixes at 100
/// for every user-space ABI (reading `sysconf(_SC_CLK_TCK)` would need `unsafe`).
const USER_HZ: f64 = 100.0;

/// A process's resource use at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Usage {
    /// User + system CPU seconds since the process started (all threads).
    pub cpu_seconds: f64,
    /// Resident memory now (`VmRSS`), bytes.
    pub rss_bytes: u64,
    /// Peak resident memory so far (`VmHWM`), bytes.
    pub peak_rss_bytes: u64,
}

/// Where to read a process's usage.
#[derive(Clone, Debug)]
pub struct Process {
    /// `/proc/self` or `/proc/<pid>`.
    dir: PathBuf,
}

impl Process {
    /// This process.
    pub fn current() -> Self {
        Self {
            dir: PathBuf::from("/proc/self"),
        }
    }

    /// Process `pid` (a child the bench started).
    pub fn of(pid: u32) -> Self {
        Self {
            dir: PathBuf::from(format!("/proc/{pid}")),
        }
    }

    /// Whether it is this process.
    pub fn is_current(&self) -> bool {
        self.dir.as_os_str() == "/proc/self"
    }

    /// Sockets it holds open (its `fd/` links to `socket:[…]`); `None` where unreadable.
    pub fn sockets(&self) -> Option<u64> {
        let dir = std::fs::read_dir(self.dir.join("fd")).ok()?;
        Some(
            dir.filter_map(Result::ok)
                .filter_map(|e| std::fs::read_link(e.path()).ok())
                .filter(|target| target.to_string_lossy().starts_with("socket:"))
                .count() as u64,
        )
    }

    /// Its usage now; `None` where `/proc` is missing or unreadable (not Linux).
    pub fn usage(&self) -> Option<Usage> {
        let stat = std::fs::read_to_string(self.dir.join("stat")).ok()?;
        let status = std::fs::read_to_string(self.dir.join("status")).ok()?;
        Some(Usage {
            cpu_seconds: cpu_seconds(&stat)?,
            rss_bytes: status_kib(&status, "VmRSS")? * 1024,
            peak_rss_bytes: status_kib(&status, "VmHWM")? * 1024,
        })
    }
}

/// utime + stime (fields 14 and 15) of a `/proc/<pid>/stat` line, in seconds. The command
/// name (field 2) may hold spaces and parentheses, so fields are counted after its last `)`.
pub fn cpu_seconds(stat: &str) -> Option<f64> {
    let after_comm = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_comm.split_whitespace();
    // Field 3 (state) is the first after the name: utime is the 12th, stime the 13th.
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some((utime + stime) as f64 / USER_HZ)
}

/// The value in KiB of a `Name:   1234 kB` line of `/proc/<pid>/status`.
pub fn status_kib(status: &str, name: &str) -> Option<u64> {
    status.lines().find_map(|line| {
        let value = line.strip_prefix(name)?.strip_prefix(':')?;
        value.split_whitespace().next()?.parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_seconds_counted_after_the_command_name() {
        let stat = "4242 (kcm (bench) x) S 1 4242 4242 0 -1 4194560 1000 0 0 0 \
                    250 130 0 0 20 0 9 0 12345 1000000 2000 18446744073709551615";
        assert_eq!(cpu_seconds(stat), Some(3.8));
        assert_eq!(cpu_seconds("4242 (kcm) S 1 2"), None, "truncated");
        assert_eq!(cpu_seconds("no name at all"), None);
    }

    #[test]
    fn status_values_in_kib() {
        let status = "Name:\tkcm\nVmPeak:\t  900000 kB\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\n";
        assert_eq!(status_kib(status, "VmHWM"), Some(204_800));
        assert_eq!(status_kib(status, "VmRSS"), Some(102_400));
        assert_eq!(status_kib(status, "VmSwap"), None);
        assert_eq!(status_kib(status, "Vm"), None, "a prefix is not a field");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_has_usage() {
        let usage = Process::current().usage().expect("/proc/self");
        assert!(usage.rss_bytes > 0);
        assert!(usage.peak_rss_bytes >= usage.rss_bytes);
        assert!(usage.cpu_seconds >= 0.0);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_listening_socket_is_counted() {
        let me = Process::of(std::process::id());
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        // Other tests' threads open and close sockets too: only this one is certain.
        assert!(me.sockets().expect("/proc/<pid>/fd") >= 1);
        drop(listener);
        assert_eq!(Process::of(u32::MAX).sockets(), None, "no such process");
    }
}
