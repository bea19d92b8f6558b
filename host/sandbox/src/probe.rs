//! What this kernel offers the sandbox, for `rawko doctor` and for refusing to run native
//! commands under a mode the kernel cannot enforce.

use std::path::Path;
use std::process::{Command, Stdio};

use serde::Serialize;

use crate::policy::{Mode, Policy};

/// The kernel features the sandbox uses, as found on this machine.
#[derive(Debug, Clone, Serialize)]
pub struct Support {
    /// The landlock ABI version, if landlock is enabled (6 or more also scopes signals and
    /// abstract sockets; 4 or more covers TCP).
    pub landlock_abi: Option<i32>,
    /// `/proc/sys/user/max_user_namespaces` (0 means user namespaces are off).
    pub max_user_namespaces: Option<u64>,
    /// Whether the sandbox helper ran `true` under a read-only policy end to end, and if not,
    /// what it said.
    pub helper: Result<(), String>,
}

impl Support {
    /// What is missing for `mode`, if anything.
    pub fn missing_for(&self, mode: Mode) -> Option<String> {
        if mode == Mode::Full {
            return None;
        }
        match (&self.landlock_abi, &self.helper) {
            (None, _) => {
                Some("landlock (Linux 5.13 or later, with landlock in the `lsm=` list)".into())
            }
            (_, Err(e)) => Some(format!("a working sandbox helper: {e}")),
            _ => None,
        }
    }
}

/// The landlock ABI version the kernel offers, or `None` when landlock is off.
pub fn landlock_abi() -> Option<i32> {
    // SAFETY: landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION) only returns
    // the ABI version; it takes no memory from us.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            1u32,
        )
    };
    (v > 0).then_some(v as i32)
}

/// Probe the kernel, running `launcher` (the `rawko` binary) as the helper once.
pub fn probe(launcher: &Path) -> Support {
    let max_user_namespaces = std::fs::read_to_string("/proc/sys/user/max_user_namespaces")
        .ok()
        .and_then(|s| s.trim().parse().ok());
    let helper = (|| {
        let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
        let policy = Policy::new(Mode::ReadOnly, tmp.path(), tmp.path(), None);
        let out = policy
            .command(launcher, Path::new("/bin/sh"), "sh", &["-c", "exit 0"])
            .env_clear()
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot start {}: {e}", launcher.display()))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
        }
    })();
    Support {
        landlock_abi: landlock_abi(),
        max_user_namespaces,
        helper,
    }
}

/// A command line that runs without the helper, for comparison in benchmarks.
pub fn unsandboxed(program: &Path) -> Command {
    Command::new(program)
}
