//! Leases: which process runs a task now, and how another runner tells that it has gone (its
//! process no longer there, or its heartbeat too old), so that a task is taken over only when
//! nobody runs it.

use std::time::Duration;

/// How long a runner's lease holds without a heartbeat before another runner may take the task.
pub const LEASE_STALE: Duration = Duration::from_secs(30);
/// How often a runner renews its lease.
pub const LEASE_HEARTBEAT: Duration = Duration::from_secs(10);

/// Who runs a task now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub pid: u32,
    pub host: String,
    /// Milliseconds since the Unix epoch, of the last heartbeat.
    pub at: i64,
    /// The holder's process as it started ([`process_start`]), so that a pid the system has
    /// since given to another process is not taken for the runner. None in a lease an older
    /// rawko took, or where it could not be read.
    pub start: Option<String>,
}

impl Lease {
    /// Why the holder of this lease no longer runs the task, judged from machine `host` at `now`
    /// (milliseconds since the Unix epoch); None while it still does. On the holder's own
    /// machine its process decides: the same process (pid and start) still there is the runner,
    /// however late its heartbeat (a stopped or busy process may come back and go on). From
    /// another machine, or for a lease that does not say when its process started, only a
    /// heartbeat younger than [`LEASE_STALE`] shows it is alive.
    pub fn gone(&self, host: &str, now: i64) -> Option<String> {
        let age = now - self.at;
        let fresh = age < LEASE_STALE.as_millis() as i64;
        let who = format!("its runner (pid {} on {})", self.pid, self.host);
        let late = || {
            format!(
                "{who} has not renewed its lease for {} s",
                age.max(0) / 1000
            )
        };
        if self.host != host {
            return (!fresh).then(late);
        }
        // Whether this machine's processes can be told apart at all (a `/proc` to read).
        static IDENTIFIED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        let identified = *IDENTIFIED.get_or_init(|| process_start(std::process::id()).is_some());
        match (&self.start, process_start(self.pid)) {
            (Some(recorded), Some(found)) if *recorded == found => None,
            (Some(_), _) if identified => Some(format!("{who} is gone")),
            _ if !alive(self.pid) => Some(format!("{who} is gone")),
            _ if !fresh => Some(late()),
            _ => None,
        }
    }
}

/// This machine's name, for leases.
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "localhost".into())
}

/// Whether process `pid` exists on this machine.
fn alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Process `pid` of this machine as it started: the boot's id and the process's start time in
/// clock ticks since boot. A pid is reused once its process is gone; the pair is not, within a
/// boot or across boots. None when there is no such process (or no `/proc` to ask).
pub fn process_start(pid: u32) -> Option<String> {
    static BOOT: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    let boot = BOOT.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .ok()
            .map(|b| b.trim().to_string())
    });
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Field 2, the command's name, is in parentheses and may itself hold spaces and
    // parentheses: count from the last `)`, after which field 3 comes. The start time is
    // field 22.
    let after = &stat[stat.rfind(')')? + 1..];
    let ticks = after.split_whitespace().nth(19)?;
    Some(format!("{}/{ticks}", boot.as_deref()?))
}
