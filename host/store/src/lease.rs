//! Leases: which runner runs a task now, and how another runner tells that it has gone (its
//! process no longer there, or its heartbeat too old by the store's clock), so that a task is
//! taken over only when nobody runs it.

use std::time::Duration;

/// How long a runner's lease holds without a heartbeat before another runner may take the task,
/// unless the user's config says otherwise ([`LeaseSettings`]).
pub const LEASE_STALE: Duration = Duration::from_secs(30);
/// How often a runner renews its lease, unless the user's config says otherwise.
pub const LEASE_HEARTBEAT: Duration = Duration::from_secs(10);

/// How often a runner renews its lease, and how old a heartbeat may be before the lease is
/// stale. The store's clock judges the age, never a runner's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseSettings {
    pub heartbeat: Duration,
    pub stale: Duration,
}

impl Default for LeaseSettings {
    fn default() -> Self {
        LeaseSettings {
            heartbeat: LEASE_HEARTBEAT,
            stale: LEASE_STALE,
        }
    }
}

impl LeaseSettings {
    /// Settings from milliseconds, today's values where not given. A staleness not larger than
    /// the heartbeat would let a live runner's task be taken over between two heartbeats: an
    /// error, as is a heartbeat of zero.
    pub fn from_millis(heartbeat: Option<u64>, stale: Option<u64>) -> Result<Self, LeaseError> {
        let d = LeaseSettings::default();
        let heartbeat = heartbeat.map_or(d.heartbeat, Duration::from_millis);
        let stale = stale.map_or(d.stale, Duration::from_millis);
        if heartbeat.is_zero() {
            return Err(LeaseError::NoHeartbeat);
        }
        if stale <= heartbeat {
            return Err(LeaseError::StaleBeforeHeartbeat {
                stale_ms: stale.as_millis(),
                heartbeat_ms: heartbeat.as_millis(),
            });
        }
        Ok(LeaseSettings { heartbeat, stale })
    }
}

/// Lease settings that cannot work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LeaseError {
    #[error("heartbeatMs must be larger than 0")]
    NoHeartbeat,
    #[error(
        "staleMs ({stale_ms}) must be larger than heartbeatMs ({heartbeat_ms}): a runner's lease \
         would go stale between two of its heartbeats"
    )]
    StaleBeforeHeartbeat { stale_ms: u128, heartbeat_ms: u128 },
}

/// Who holds a lease: a host, a process on it, and a token the process drew when it started,
/// so that two processes with one pid (two containers, two machines with one name) are told
/// apart. Acquiring, renewing and giving up a lease all match the whole identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub host: String,
    pub pid: u32,
    pub token: String,
}

impl Holder {
    /// This process, as it holds leases: [`host_id`], its pid and a token drawn once.
    pub fn this_process() -> &'static Holder {
        static ME: std::sync::OnceLock<Holder> = std::sync::OnceLock::new();
        ME.get_or_init(|| {
            let mut rng = fastrand::Rng::new();
            let token: String = (0..4).map(|_| format!("{:08x}", rng.u32(..))).collect();
            Holder {
                host: host_id(),
                pid: std::process::id(),
                token,
            }
        })
    }
}

/// The host a runner says it is on: `RAWKO_HOST_ID` when set, else the machine's name.
pub fn host_id() -> String {
    match std::env::var("RAWKO_HOST_ID") {
        Ok(id) if !id.trim().is_empty() => id.trim().to_string(),
        _ => host_name(),
    }
}

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
    /// The holder's token ([`Holder`]); None in a lease an older rawko took.
    pub token: Option<String>,
    /// Milliseconds since the last heartbeat, by the store's clock.
    pub age: i64,
}

impl Lease {
    /// Why the holder of this lease no longer runs the task, judged from host `host` with
    /// leases going stale after `stale`; None while it still does. On the holder's own host its
    /// process decides: the same process (pid and start) still there is the runner, however late
    /// its heartbeat (a stopped or busy process may come back and go on). From another host, or
    /// for a lease that does not say when its process started, only a heartbeat younger than
    /// `stale` (by the store's clock) shows it is alive.
    pub fn gone(&self, host: &str, stale: Duration) -> Option<String> {
        let age = self.age;
        let fresh = age < stale.as_millis() as i64;
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

    /// Whether `holder` holds this lease: host, pid and token all match.
    pub fn held_by(&self, holder: &Holder) -> bool {
        self.pid == holder.pid
            && self.host == holder.host
            && self.token.as_deref() == Some(holder.token.as_str())
    }
}

/// This machine's name.
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
