//! One user namespace and one empty network namespace per rawko process, which the sandbox
//! helper of every command joins instead of making its own: making a network namespace is the
//! most expensive step of a command's set-up, and a user namespace with its maps the next.
//!
//! The holder (`rawko-sandbox __namespaces`, [`crate::helper::holder_main`]) makes both, says so, and waits; rawko opens them
//! through `/proc/HOLDER/ns/` and keeps the descriptors for as long as it runs, which keeps the
//! namespaces alive after the holder has ended. Each helper opens those descriptors again
//! through `/proc/RAWKO/fd/N` (a helper is rawko's child, of the same user) and joins them.
//!
//! What sharing must not give: a way to change the namespace or to reach another command
//! through it. The network namespace has only its loopback device, which stays down: no
//! sandboxed program keeps a capability to bring it up (the helper drops them all before the
//! program starts, root's too). Abstract Unix sockets, which live in the network namespace,
//! are scoped to each command by landlock, so the namespace is only shared where the kernel
//! has that scope (landlock ABI 6); elsewhere each command makes its own, as before. Signals and
//! ptrace across commands are refused by landlock and by their PID namespaces, as before.

use std::io::{BufRead, BufReader, Read};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

/// The first argument that makes the `rawko` binary the holder of the shared namespaces.
pub const HOLDER_ARG: &str = "__namespaces";

/// What the holder prints once the namespaces are made.
pub(crate) const READY: &str = "ready";

/// The landlock ABI that scopes abstract Unix sockets (and signals) to a sandbox.
const SCOPED_ABI: i32 = 6;

/// The shared namespaces as a helper finds them: paths it opens and joins.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Shared {
    /// The user namespace.
    pub user: PathBuf,
    /// The network namespace with nothing in it, for commands without the network.
    pub net: PathBuf,
}

struct Held {
    user: OwnedFd,
    net: OwnedFd,
}

/// The shared namespaces of this process, made the first time they are asked for with
/// `launcher`'s helper; `None` where they cannot be shared (no abstract-socket scope in the
/// kernel, no user namespaces) or could not be made, and each command makes its own.
pub fn shared(launcher: &Path) -> Option<Shared> {
    static HELD: OnceLock<Option<Held>> = OnceLock::new();
    let held = HELD.get_or_init(|| {
        if crate::probe::landlock_abi().unwrap_or(0) < SCOPED_ABI {
            return None;
        }
        match make(launcher) {
            Ok(h) => Some(h),
            Err(e) => {
                tracing::debug!("no shared sandbox namespaces, one per command instead: {e}");
                None
            }
        }
    });
    let held = held.as_ref()?;
    let me = std::process::id();
    let fd = |f: &OwnedFd| PathBuf::from(format!("/proc/{me}/fd/{}", f.as_raw_fd()));
    Some(Shared {
        user: fd(&held.user),
        net: fd(&held.net),
    })
}

/// Start the holder, open its namespaces, and let it end.
fn make(launcher: &Path) -> Result<Held, String> {
    let mut child = crate::helper_command(launcher)
        .arg(HOLDER_ARG)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start the holder: {e}"))?;
    let mut line = String::new();
    let read = BufReader::new(child.stdout.take().expect("piped")).read_line(&mut line);
    let opened = (|| {
        if read.is_err() || line.trim() != READY {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            return Err(format!("the holder did not start: {}", err.trim()));
        }
        let open = |ns: &str| {
            let p = format!("/proc/{}/ns/{ns}", child.id());
            std::fs::File::open(&p)
                .map(OwnedFd::from)
                .map_err(|e| format!("{p}: {e}"))
        };
        Ok(Held {
            user: open("user")?,
            net: open("net")?,
        })
    })();
    // Its stdin closed, the holder ends.
    drop(child.stdin.take());
    let _ = child.wait();
    opened
}

/// The shared namespaces a command joins, opened: the user namespace, and the network
/// namespace unless it has the network.
#[cfg(target_os = "linux")]
pub(crate) struct Opened {
    user: std::fs::File,
    net: Option<std::fs::File>,
}

/// Open the shared namespaces for a command with or without `network`; `None` (and the
/// command makes its own) where they cannot be opened: rawko ended, or its descriptors cannot
/// be read here.
#[cfg(target_os = "linux")]
pub(crate) fn open(shared: &Shared, network: bool) -> Option<Opened> {
    let user = std::fs::File::open(&shared.user).ok()?;
    let net = if network {
        None
    } else {
        Some(std::fs::File::open(&shared.net).ok()?)
    };
    Some(Opened { user, net })
}

/// Join opened namespaces: a helper is single-threaded, as joining a user namespace requires,
/// and as the user namespace's owner it may.
#[cfg(target_os = "linux")]
pub(crate) fn join(opened: Opened) -> Result<(), String> {
    let setns = |f: &std::fs::File, kind: libc::c_int, what: &str| {
        // SAFETY: setns(2) on a descriptor we hold open.
        if unsafe { libc::setns(f.as_raw_fd(), kind) } != 0 {
            return Err(format!(
                "cannot join the shared {what} namespace: {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok(())
    };
    setns(&opened.user, libc::CLONE_NEWUSER, "user")?;
    if let Some(net) = &opened.net {
        setns(net, libc::CLONE_NEWNET, "network")?;
    }
    Ok(())
}
