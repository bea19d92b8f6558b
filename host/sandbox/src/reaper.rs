//! The reaper: the `rawko` binary run as `rawko __reap PARENT PROGRAM ARG0 ARGS...`, which
//! starts a program that runs without the kernel sandbox (mode `full`, `--no-sandbox`) and takes
//! everything it started down with it.
//!
//! A command's process group is not enough: a program that daemonizes (a new session, then a
//! fork) leaves the group, and a parent-death signal is not inherited by a program's children.
//! The reaper is a child subreaper, so every process the program leaves behind is re-parented to
//! it rather than to init, and it can find them all. When the program ends, or rawko stops it
//! (`SIGTERM`, `SIGINT`, `SIGHUP`), or rawko dies (its parent-death signal is `SIGTERM`), it kills
//! every process below it and exits with the program's status.
//!
//! Like the sandbox helper it runs single-threaded, first thing in `main`, so it can wait for
//! signals synchronously.

use std::ffi::{CString, OsString};
use std::os::unix::ffi::OsStrExt;

use crate::helper::{exit_status, exit_with};

/// The first argument that makes the `rawko` binary the reaper.
pub const REAPER_ARG: &str = "__reap";

/// `launcher __reap PARENT PROGRAM ARG0 ARGS...`: `program` started under the reaper, which dies
/// with the calling process (this one).
pub fn command(
    launcher: &std::path::Path,
    program: &std::path::Path,
    arg0: &str,
    args: &[&str],
) -> std::process::Command {
    let mut c = crate::helper_command(launcher);
    c.arg(REAPER_ARG)
        .arg(std::process::id().to_string())
        .arg(program)
        .arg(arg0)
        .args(args);
    c
}

/// Run the reaper with the arguments after [`REAPER_ARG`]; never returns.
pub fn main(args: &[OsString]) -> ! {
    exit_with("rawko reaper", run(args))
}

fn cstring(s: &OsString) -> Result<CString, String> {
    CString::new(s.as_bytes()).map_err(|_| "an argument contains a NUL byte".to_string())
}

fn run(args: &[OsString]) -> Result<i32, String> {
    let [parent, program, arg0, rest @ ..] = args else {
        return Err("usage: rawko __reap PARENT PROGRAM ARG0 [ARGS...]".into());
    };
    let parent: libc::pid_t = parent
        .to_str()
        .and_then(|p| p.parse().ok())
        .ok_or("PARENT is not a process id")?;
    let program = cstring(program)?;
    let mut argv = vec![cstring(arg0)?];
    for a in rest {
        argv.push(cstring(a)?);
    }
    let mut argv_ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    argv_ptrs.push(std::ptr::null());

    // SAFETY: plain libc calls on a local signal set; the process has a single thread.
    let (waited, old) = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in [libc::SIGCHLD, libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            libc::sigaddset(&mut set, s);
        }
        let mut old: libc::sigset_t = std::mem::zeroed();
        if libc::sigprocmask(libc::SIG_BLOCK, &set, &mut old) != 0 {
            return Err(format!("sigprocmask: {}", std::io::Error::last_os_error()));
        }
        if libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0
            || libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM, 0, 0, 0) != 0
        {
            return Err(format!("prctl: {}", std::io::Error::last_os_error()));
        }
        // rawko died before the death signal was set: nothing to run for.
        if libc::getppid() != parent {
            return Ok(128 + libc::SIGTERM);
        }
        (set, old)
    };

    // SAFETY: single-threaded, so the child may do anything; it only restores the signal mask,
    // asks to die with the reaper and execs.
    let child = unsafe { libc::fork() };
    if child == -1 {
        return Err(format!("fork: {}", std::io::Error::last_os_error()));
    }
    if child == 0 {
        // SAFETY: async-signal-safe calls only, then exec or _exit.
        unsafe {
            libc::sigprocmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
            // The Rust runtime ignores SIGPIPE in this process, and an ignored signal stays
            // ignored through exec: a writer whose reader went away would get errors instead
            // of ending as it does in a shell.
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            libc::execv(program.as_ptr(), argv_ptrs.as_ptr());
            let msg = b"rawko reaper: cannot run the program\n";
            libc::write(2, msg.as_ptr().cast(), msg.len());
            libc::_exit(127);
        }
    }

    let status = loop {
        // SAFETY: sigwaitinfo(2) fills a local siginfo.
        let signal = unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            libc::sigwaitinfo(&waited, &mut info)
        };
        match signal {
            libc::SIGCHLD => {
                if let Some(status) = reap_ready(child) {
                    break status;
                }
            }
            -1 => continue, // EINTR
            stop => {
                kill_below();
                return Ok(128 + stop);
            }
        }
    };
    kill_below();
    Ok(status)
}

/// Reap the children that have ended; the program's status once it is among them.
fn reap_ready(program: libc::pid_t) -> Option<i32> {
    let mut found = None;
    loop {
        let mut status = 0;
        // SAFETY: waitpid(2) writes the status into a local.
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if pid <= 0 {
            return found;
        }
        if pid == program {
            found = Some(exit_status(status).unwrap_or(1));
        }
    }
}

/// Kill every process below the reaper and reap them all: descendants re-parent to the reaper
/// as their parents die, so this ends when it has no children left.
fn kill_below() {
    // SAFETY: getpid cannot fail.
    let me = unsafe { libc::getpid() };
    // Without a child there is nothing below: a process whose parent dies is re-parented to
    // the reaper in the same step, so every living descendant has a living ancestor among the
    // reaper's children. The common case (the program left nothing behind) reads no `/proc`.
    if !has_children() {
        return;
    }
    loop {
        for pid in descendants(me) {
            // SAFETY: kill(2) takes no pointers.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
        let mut status = 0;
        // SAFETY: waitpid(2) writes the status into a local.
        let pid = unsafe { libc::waitpid(-1, &mut status, 0) };
        if pid == -1 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            // ECHILD: nothing is left.
            return;
        }
    }
}

/// Whether the reaper has a child, running or ended, that it has not reaped.
fn has_children() -> bool {
    // SAFETY: waitid(2) fills a zeroed local siginfo; WNOWAIT leaves an ended child to be
    // reaped.
    let r = unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        libc::waitid(
            libc::P_ALL,
            0,
            &mut info,
            libc::WEXITED | libc::WSTOPPED | libc::WCONTINUED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    // ECHILD: none at all; 0: some (ended or still running).
    r == 0
}

/// Every process whose chain of parents reaches `root`, read from `/proc/*/stat`.
fn descendants(root: libc::pid_t) -> Vec<libc::pid_t> {
    let mut parent_of: Vec<(libc::pid_t, libc::pid_t)> = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read(e.path().join("stat")) else {
            continue;
        };
        if let Some(ppid) = ppid_of(&stat) {
            parent_of.push((pid, ppid));
        }
    }
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        let p = found[i];
        found.extend(parent_of.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c));
        i += 1;
    }
    found.remove(0);
    found
}

/// The parent pid in a `/proc/PID/stat` line: `pid (comm) state ppid ...`, where `comm` may
/// hold spaces and parentheses, so fields are counted from the last `)`.
fn ppid_of(stat: &[u8]) -> Option<libc::pid_t> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(&stat[close + 1..]).ok()?;
    rest.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parent_is_read_past_any_command_name() {
        assert_eq!(ppid_of(b"42 (sleep) S 7 42 42 0"), Some(7));
        assert_eq!(ppid_of(b"42 (a) b (c)) R 9 1 1"), Some(9));
        assert_eq!(ppid_of(b"garbage"), None);
    }

    #[test]
    fn descendants_of_this_process_include_its_children() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let below = descendants(std::process::id() as libc::pid_t);
        let _ = child.kill();
        let _ = child.wait();
        assert!(below.contains(&(child.id() as libc::pid_t)), "{below:?}");
    }
}
