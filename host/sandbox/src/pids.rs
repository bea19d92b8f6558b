//! How many processes a sandboxed command tree, and a task, may hold at once, bounded in a way
//! that holds for root too.
//!
//! `RLIMIT_NPROC` binds nobody running as uid 0 (containers, CI and many development machines),
//! and for everyone else it counts all of the user's processes, not the command's. So where rawko
//! can make a cgroup with the `pids` controller (cgroup v2 with the controller delegated to
//! rawko's own group, or the v1 `pids` hierarchy as root), every command runs in a group of its
//! own, limited to the agent's number, inside one group per rawko process (the task), limited to
//! the largest of those numbers. Only where no group can be made does the limit fall back to
//! `RLIMIT_NPROC`: the user's current processes plus the limit.
//!
//! The groups are files in the cgroup filesystem, so something must remove them even when rawko
//! is killed with SIGKILL: the keeper (`rawko __cgroup-keeper PARENT GROUP`), a small process of
//! its own session that waits on a pidfd of rawko and, when rawko is gone, kills whatever is left
//! in the task's group and removes it. The sandbox helper removes each command's group itself
//! when the command ends.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

/// Processes one command tree (and, by default, one task) may hold at once.
pub const DEFAULT_MAX: u64 = 512;

/// The first argument that makes the `rawko` binary the keeper of a task's group.
pub const KEEPER_ARG: &str = "__cgroup-keeper";

/// What bounds the processes of a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mechanism {
    /// A cgroup v2 group with the `pids` controller.
    CgroupV2,
    /// A group in the cgroup v1 `pids` hierarchy.
    CgroupV1,
    /// `RLIMIT_NPROC`, which counts all of the user's processes and does not bind root.
    Rlimit,
}

impl Mechanism {
    /// In words, for `rawko doctor`.
    pub fn describe(self) -> &'static str {
        match self {
            Mechanism::CgroupV2 => "a cgroup (v2 `pids` controller) per command and per task",
            Mechanism::CgroupV1 => "a cgroup (v1 `pids` hierarchy) per command and per task",
            Mechanism::Rlimit => {
                "RLIMIT_NPROC, which counts all of the user's processes and does not bind root \
                 (no cgroup with the `pids` controller can be made here)"
            }
        }
    }
}

/// Where this process may make groups: the directory of its own group in a hierarchy with the
/// `pids` controller.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Base {
    mechanism: Mechanism,
    dir: PathBuf,
}

/// The mount points of the cgroup filesystems, from `/proc/self/mountinfo`: (v2 mount, v1
/// `pids` mount).
fn mounts(mountinfo: &str) -> (Option<PathBuf>, Option<PathBuf>) {
    let (mut v2, mut v1) = (None, None);
    for line in mountinfo.lines() {
        // `ID PARENT MAJ:MIN ROOT MOUNT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER_OPTIONS`
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let fields: Vec<&str> = left.split(' ').collect();
        let Some(mount) = fields.get(4) else { continue };
        let mut rest = right.split(' ');
        let (fstype, _source, options) = (rest.next(), rest.next(), rest.next().unwrap_or(""));
        // A mount point with a space is escaped as `\040`: not one rawko makes groups under.
        if mount.contains('\\') {
            continue;
        }
        match fstype {
            Some("cgroup2") if v2.is_none() => v2 = Some(PathBuf::from(mount)),
            Some("cgroup") if v1.is_none() && options.split(',').any(|o| o == "pids") => {
                v1 = Some(PathBuf::from(mount))
            }
            _ => {}
        }
    }
    (v2, v1)
}

/// This process's group in each hierarchy, from `/proc/self/cgroup`: (v2 path, v1 `pids` path).
fn own_groups(cgroup: &str) -> (Option<String>, Option<String>) {
    let (mut v2, mut v1) = (None, None);
    for line in cgroup.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if id == "0" && controllers.is_empty() {
            v2 = Some(path.to_string());
        } else if controllers.split(',').any(|c| c == "pids") {
            v1 = Some(path.to_string());
        }
    }
    (v2, v1)
}

fn writable(dir: &Path) -> bool {
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: access(2) reads a NUL-terminated path.
    unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
}

fn words(file: &Path) -> Vec<String> {
    std::fs::read_to_string(file)
        .map(|s| s.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

/// Where groups can be made, judged from the files alone (nothing is created).
fn find_base() -> Option<Base> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let cgroup = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let (v2_mount, v1_mount) = mounts(&mountinfo);
    let (v2_path, v1_path) = own_groups(&cgroup);
    let join = |mount: &Path, path: &str| mount.join(path.trim_start_matches('/'));
    if let (Some(m), Some(p)) = (&v2_mount, &v2_path) {
        let dir = join(m, p);
        // The controller must reach this group's children: already enabled below it, or
        // available to it (enabling it then fails where the group holds processes and is not a
        // namespace's root; the first group made finds out).
        let enabled = words(&dir.join("cgroup.subtree_control"))
            .iter()
            .any(|c| c == "pids");
        let available = words(&dir.join("cgroup.controllers"))
            .iter()
            .any(|c| c == "pids");
        if (enabled || available) && writable(&dir) {
            return Some(Base {
                mechanism: Mechanism::CgroupV2,
                dir,
            });
        }
    }
    if let (Some(m), Some(p)) = (&v1_mount, &v1_path) {
        let dir = join(m, p);
        if dir.join("cgroup.procs").exists() && writable(&dir) {
            return Some(Base {
                mechanism: Mechanism::CgroupV1,
                dir,
            });
        }
    }
    None
}

/// The base, found once per process.
fn base() -> Option<&'static Base> {
    static BASE: std::sync::OnceLock<Option<Base>> = std::sync::OnceLock::new();
    BASE.get_or_init(find_base).as_ref()
}

/// The group of this rawko process (its task), once made.
#[derive(Debug)]
struct TaskGroup {
    dir: PathBuf,
    /// Its `pids.max`: the largest limit a command of the task asked for.
    max: u64,
}

/// `Ok(None)` until the first command; `Err` once making the group failed (then every later
/// command falls back to the rlimit).
static TASK: Mutex<Result<Option<TaskGroup>, String>> = Mutex::new(Ok(None));
static NEXT: AtomicU64 = AtomicU64::new(0);

/// The mechanism rawko uses here, judged from the cgroup files (before any group is made).
pub fn mechanism() -> Mechanism {
    base().map_or(Mechanism::Rlimit, |b| b.mechanism)
}

/// What is in force now: [`mechanism`], unless making the task's group has failed, with the
/// reason; and the directory task groups are made in.
pub fn in_force() -> (Mechanism, Option<PathBuf>, Option<String>) {
    let failed = match &*TASK.lock().unwrap_or_else(|e| e.into_inner()) {
        Err(e) => Some(e.clone()),
        Ok(_) => None,
    };
    match (base(), failed) {
        (Some(b), None) => (b.mechanism, Some(b.dir.clone()), None),
        (_, failed) => (Mechanism::Rlimit, None, failed),
    }
}

fn write(file: &Path, text: &str) -> Result<(), String> {
    std::fs::write(file, text).map_err(|e| format!("{}: {e}", file.display()))
}

/// Make the group of one command, limited to `max` processes, inside this process's task group
/// (made, with its keeper, on first use). `None` when no group can be made: the caller bounds the
/// command with the rlimit instead.
pub fn command_group(launcher: &Path, max: u64) -> Option<PathBuf> {
    let base = base()?;
    let mut task = TASK.lock().unwrap_or_else(|e| e.into_inner());
    if task.as_ref().is_ok_and(Option::is_none) {
        *task = make_task_group(base, launcher, max).map(Some);
        if let Err(e) = &*task {
            tracing::warn!(
                "cannot make a cgroup for the process limit ({e}); commands are bounded by \
                 RLIMIT_NPROC instead"
            );
        }
    }
    let Ok(Some(group)) = &mut *task else {
        return None;
    };
    if max > group.max {
        write(&group.dir.join("pids.max"), &max.to_string()).ok()?;
        group.max = max;
    }
    let dir = group
        .dir
        .join(format!("c{}", NEXT.fetch_add(1, Ordering::Relaxed)));
    let made = std::fs::create_dir(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))
        .and_then(|()| write(&dir.join("pids.max"), &max.to_string()));
    match made {
        Ok(()) => Some(dir),
        Err(e) => {
            tracing::warn!("cannot make a command's cgroup ({e}); bounded by RLIMIT_NPROC");
            let _ = std::fs::remove_dir(&dir);
            None
        }
    }
}

fn make_task_group(base: &Base, launcher: &Path, max: u64) -> Result<TaskGroup, String> {
    if base.mechanism == Mechanism::CgroupV2 {
        let control = base.dir.join("cgroup.subtree_control");
        if !words(&control).iter().any(|c| c == "pids") {
            write(&control, "+pids")?;
        }
    }
    let dir = base.dir.join(format!("rawko-{}", std::process::id()));
    match std::fs::create_dir(&dir) {
        Ok(()) => {}
        // Left by an earlier process with this pid whose keeper could not remove it.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => remove_tree(&dir),
        Err(e) => return Err(format!("{}: {e}", dir.display())),
    }
    let _ = std::fs::create_dir(&dir);
    let set_up = (|| {
        write(&dir.join("pids.max"), &max.to_string())?;
        if base.mechanism == Mechanism::CgroupV2 {
            write(&dir.join("cgroup.subtree_control"), "+pids")?;
        }
        start_keeper(launcher, &dir)
    })();
    if let Err(e) = set_up {
        let _ = std::fs::remove_dir(&dir);
        return Err(e);
    }
    Ok(TaskGroup { dir, max })
}

fn start_keeper(launcher: &Path, dir: &Path) -> Result<(), String> {
    use std::process::Stdio;
    crate::helper_command(launcher)
        .arg(KEEPER_ARG)
        .arg(std::process::id().to_string())
        .arg(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map(drop)
        .map_err(|e| format!("cannot start the group's keeper: {e}"))
}

/// The process-limit group could not be joined: the file written, and why.
#[derive(Debug, thiserror::Error)]
#[error("cannot join the process-limit group: {}: {source}", file.display())]
pub struct JoinError {
    pub file: std::path::PathBuf,
    #[source]
    pub source: std::io::Error,
}

/// Join the group `dir` (the calling process, and so everything it starts).
pub fn join(dir: &Path) -> Result<(), JoinError> {
    let file = dir.join("cgroup.procs");
    std::fs::write(&file, "0").map_err(|source| JoinError { file, source })
}

/// Remove a command's group once everything in it has ended (the kernel may take a moment to
/// release the last process).
pub fn remove(dir: &Path) {
    for _ in 0..100 {
        match std::fs::remove_dir(dir) {
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                std::thread::sleep(std::time::Duration::from_millis(2))
            }
            _ => return,
        }
    }
}

/// Kill what is left in `dir` and the groups below it, and remove them, deepest first.
fn remove_tree(dir: &Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                remove_tree(&e.path());
            }
        }
    }
    for _ in 0..250 {
        if let Ok(procs) = std::fs::read_to_string(dir.join("cgroup.procs")) {
            for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
                if pid > 1 {
                    // SAFETY: kill(2) takes no pointers.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                }
            }
        }
        match std::fs::remove_dir(dir) {
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                std::thread::sleep(std::time::Duration::from_millis(20))
            }
            _ => return,
        }
    }
}

/// The keeper, with the arguments after [`KEEPER_ARG`]: wait for `PARENT` to end, then remove
/// `GROUP`. Never returns.
pub fn keeper_main(args: &[std::ffi::OsString]) -> ! {
    let code = match keep(args) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("rawko cgroup keeper: {e}");
            1
        }
    };
    std::process::exit(code)
}

fn keep(args: &[std::ffi::OsString]) -> Result<(), String> {
    let [parent, group] = args else {
        return Err("usage: rawko __cgroup-keeper PARENT GROUP".into());
    };
    let parent: libc::pid_t = parent
        .to_str()
        .and_then(|p| p.parse().ok())
        .ok_or("PARENT is not a process id")?;
    let group = PathBuf::from(group);
    // Only a group rawko makes, named after the parent, is ever removed.
    if group.file_name().and_then(|n| n.to_str()) != Some(&format!("rawko-{parent}")) {
        return Err(format!("{} is not rawko-{parent}'s group", group.display()));
    }
    // Out of the parent's session: a terminal's Ctrl-C or a stop of rawko's group spares it.
    // SAFETY: setsid(2) and getppid(2) take no arguments.
    unsafe { libc::setsid() };
    #[cfg(target_os = "linux")]
    // SAFETY: pidfd_open(2) with a pid and no flags.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, parent, 0) } as i32;
    #[cfg(not(target_os = "linux"))]
    let fd = -1;
    // The parent may have ended before the pidfd was opened (then this process was handed to
    // another parent, and the pid may be someone else's by now).
    // SAFETY: as above.
    if fd >= 0 && unsafe { libc::getppid() } == parent {
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: poll(2) on one pollfd in a local.
        while unsafe { libc::poll(&mut p, 1, -1) } < 0 {
            if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
                break;
            }
        }
    } else if fd < 0 {
        // Without pidfds (before Linux 5.3): wait for the parent to hand this process over.
        // SAFETY: getppid(2) takes no arguments.
        while unsafe { libc::getppid() } == parent {
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    }
    remove_tree(&group);
    Ok(())
}

/// The user's tasks now (what `RLIMIT_NPROC` counts: every thread of every process), from
/// `/proc`.
pub fn user_processes() -> u64 {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: getuid(2) cannot fail.
    let uid = unsafe { libc::getuid() };
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        })
        .filter(|e| e.metadata().is_ok_and(|m| m.uid() == uid))
        .map(|e| {
            std::fs::read_to_string(e.path().join("stat"))
                .ok()
                .and_then(|s| threads_of(&s))
                .unwrap_or(1)
        })
        .sum()
}

/// `num_threads` from a `/proc/PID/stat` line: the 20th field, the 18th after the command name
/// (which may itself hold spaces and parentheses, so it is found by the last `)`).
fn threads_of(stat: &str) -> Option<u64> {
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(17)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mounts_are_read_from_mountinfo() {
        let info = "\
22 1 0:21 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
30 22 0:26 / /sys/fs/cgroup/unified rw,relatime shared:9 - cgroup2 cgroup2 rw
35 22 0:31 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory
38 22 0:34 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
";
        assert_eq!(
            mounts(info),
            (
                Some(PathBuf::from("/sys/fs/cgroup/unified")),
                Some(PathBuf::from("/sys/fs/cgroup/pids"))
            )
        );
        assert_eq!(mounts("garbage\n- -\n"), (None, None));
    }

    #[test]
    fn own_groups_are_read_from_proc_self_cgroup() {
        let text = "9:name=systemd:/\n8:pids:/a/b\n4:memory:/x\n0::/user.slice/s.scope\n";
        assert_eq!(
            own_groups(text),
            (Some("/user.slice/s.scope".into()), Some("/a/b".into()))
        );
        assert_eq!(own_groups("0::/\n"), (Some("/".into()), None));
    }

    #[test]
    fn the_rlimit_fallback_counts_threads_as_the_kernel_does() {
        let stat = "42 (a) b (c)) S 1 42 42 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 7 0 1 2 3";
        assert_eq!(threads_of(stat), Some(7));
        assert_eq!(threads_of("garbage"), None);
        // This test process has several threads (the harness's), all counted.
        let here = std::thread::scope(|s| {
            s.spawn(user_processes);
            s.spawn(user_processes).join().unwrap()
        });
        assert!(here >= 3, "{here}");
    }

    #[test]
    fn the_keeper_removes_only_a_group_named_after_its_parent() {
        let args: Vec<std::ffi::OsString> = vec!["12".into(), "/sys/fs/cgroup/pids".into()];
        assert!(keep(&args).unwrap_err().contains("is not rawko-12's group"));
        assert!(keep(&["x".into(), "y".into()]).is_err());
    }
}
