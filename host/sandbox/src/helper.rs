//! The sandbox helper: the `rawko` binary run as `rawko __sandbox POLICY PROGRAM ARG0 ARGS...`,
//! which confines itself and then becomes the program.
//!
//! A helper process rather than setup between `fork` and `exec` in rawko, because the pieces
//! need a process of their own: a new PID namespace only takes effect for the children of the
//! process that made it, and mounting a `/proc` for it, bind mounts and building a landlock
//! ruleset all allocate. The helper runs single-threaded, before anything else in `main`.
//!
//! In order: die with rawko (parent-death signal); new user, mount and PID namespaces (and a
//! network namespace with nothing in it when the network is off); fork, so the child is PID 1
//! of its namespace, whose processes alone a fresh `/proc` shows, and which takes every process
//! the program starts down with it when the program ends; `.git` internals and `.rawko`
//! bind-mounted read-only over themselves; resource limits; a landlock ruleset over every read,
//! write and TCP connection (and, where the kernel has it, signals and abstract sockets outside
//! the sandbox); fork the program, which execs as PID 2 while PID 1 reaps.

use std::ffi::{CString, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr,
    RulesetCreatedAttr, Scope, path_beneath_rules,
};

use crate::policy::Policy;

/// Exit status when the sandbox cannot be set up (as `env` uses 125 for its own failures).
pub const SETUP_FAILED: i32 = 125;

/// Run the helper with the arguments after [`crate::policy::HELPER_ARG`]; never returns.
pub fn main(args: &[OsString]) -> ! {
    exit_with("rawko sandbox", run(args))
}

/// Exit with `result`'s status, or say what failed (as `who`) and exit with [`SETUP_FAILED`].
pub(crate) fn exit_with(who: &str, result: Result<i32, String>) -> ! {
    let code = result.unwrap_or_else(|e| {
        eprintln!("{who}: {e}");
        SETUP_FAILED
    });
    std::process::exit(code)
}

/// A wait status as a shell reports it: the exit code, or 128 plus the signal that ended the
/// process; `None` while it has not ended (stopped or continued).
pub(crate) fn exit_status(status: libc::c_int) -> Option<i32> {
    if libc::WIFEXITED(status) {
        Some(libc::WEXITSTATUS(status))
    } else if libc::WIFSIGNALED(status) {
        Some(128 + libc::WTERMSIG(status))
    } else {
        None
    }
}

fn run(args: &[OsString]) -> Result<i32, String> {
    let (policy, program, argv) = Policy::from_args(args).map_err(|e| e.to_string())?;
    // Die with the rawko thread that started us.
    prctl_death_signal()?;
    enter_namespaces(&policy)?;
    // SAFETY: the helper is single-threaded (it runs first thing in `main`), so the child may
    // do anything the parent could.
    let pid = unsafe { libc::fork() };
    match pid {
        -1 => Err(format!("fork: {}", std::io::Error::last_os_error())),
        0 => {
            let e = confine_and_exec(&policy, &program, &argv);
            eprintln!("rawko sandbox: {e}");
            // SAFETY: leaving the forked child without running the parent's exit handlers.
            unsafe {
                libc::_exit(if e.starts_with("cannot run") {
                    127
                } else {
                    SETUP_FAILED
                })
            }
        }
        child => {
            let status = wait_for(child);
            // Everything in the command's PID namespace ended with its first process.
            if let Some(group) = &policy.process_group {
                crate::pids::remove(group);
            }
            status
        }
    }
}

fn prctl_death_signal() -> Result<(), String> {
    // SAFETY: prctl(2) with integer arguments.
    let r = unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) };
    if r != 0 {
        return Err(format!("prctl: {}", std::io::Error::last_os_error()));
    }
    Ok(())
}

/// New mount and PID namespaces in a user namespace, and a network namespace with nothing in
/// it unless `policy.network`: the namespaces rawko shares between its commands where it can
/// ([`crate::namespaces`]), else new ones.
fn enter_namespaces(policy: &Policy) -> Result<(), String> {
    let rest = libc::CLONE_NEWNS | libc::CLONE_NEWPID;
    if let Some(shared) = &policy.namespaces
        && let Some(opened) = crate::namespaces::open(shared, policy.network)
    {
        crate::namespaces::join(opened)?;
        // SAFETY: unshare(2) with flags only.
        if unsafe { libc::unshare(rest) } != 0 {
            return Err(format!("unshare: {}", std::io::Error::last_os_error()));
        }
        return Ok(());
    }
    let flags = if policy.network {
        rest
    } else {
        rest | libc::CLONE_NEWNET
    };
    let userns = match new_user_namespace(flags) {
        Ok(()) => return Ok(()),
        Err(e) => e,
    };
    // Root may make the other namespaces without a user namespace.
    // SAFETY: getuid cannot fail; unshare(2) with flags only.
    if unsafe { libc::getuid() } == 0 && unsafe { libc::unshare(flags) } == 0 {
        return Ok(());
    }
    Err(format!(
        "cannot create a user namespace ({userns}); the kernel sandbox needs them \
         (see `rawko doctor`)"
    ))
}

/// A new user namespace, the user and group mapped to themselves, with the namespaces `flags`
/// names made in it.
pub(crate) fn new_user_namespace(flags: libc::c_int) -> Result<(), String> {
    // SAFETY: getuid/getgid cannot fail.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    // SAFETY: unshare(2) with flags only.
    if unsafe { libc::unshare(flags | libc::CLONE_NEWUSER) } != 0 {
        return Err(std::io::Error::last_os_error().to_string());
    }
    let write =
        |file: &str, text: String| std::fs::write(file, text).map_err(|e| format!("{file}: {e}"));
    write("/proc/self/setgroups", "deny".into())?;
    write("/proc/self/uid_map", format!("{uid} {uid} 1"))?;
    write("/proc/self/gid_map", format!("{gid} {gid} 1"))
}

/// The holder: make a user namespace (the user mapped to itself) and a network namespace in
/// it, say so, and wait until stdin closes. Never returns.
pub fn holder_main() -> ! {
    exit_with("rawko sandbox namespaces", hold())
}

fn hold() -> Result<i32, String> {
    use std::io::{Read, Write};
    prctl_death_signal()?;
    new_user_namespace(libc::CLONE_NEWNET)?;
    let mut out = std::io::stdout();
    writeln!(out, "{}", crate::namespaces::READY)
        .and_then(|()| out.flush())
        .map_err(|e| format!("stdout: {e}"))?;
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    Ok(0)
}

/// Reap every child that ends until `child` has, and its status as a shell reports it (the
/// helper's only child is its namespace's init; the init's children are the program and every
/// orphan of the namespace).
fn wait_for(child: libc::pid_t) -> Result<i32, String> {
    loop {
        let mut status = 0;
        // SAFETY: waitpid(2) writes the status into a local.
        let r = unsafe { libc::waitpid(-1, &mut status, 0) };
        if r == -1 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(format!("waitpid: {e}"));
        }
        if r == child
            && let Some(code) = exit_status(status)
        {
            return Ok(code);
        }
    }
}

/// In the forked child, PID 1 of the new namespace: confine, then fork the program, which
/// runs as PID 2, and wait for it. Returns only on error.
///
/// Not the program itself as PID 1: the kernel drops every signal an init process leaves at
/// its default action, SIGPIPE included, so a writer whose reader went away (`yes | head -n 1`)
/// would get errors instead of ending; and the orphans of a program that never reaps would
/// stay zombies. PID 1 reaps them all, and ends with the program's status, which takes every
/// process left in the namespace down with it.
fn confine_and_exec(policy: &Policy, program: &Path, argv: &[OsString]) -> String {
    if let Err(e) = confine(policy) {
        return e;
    }
    let c = |s: &[u8]| CString::new(s).map_err(|_| "an argument holds a NUL byte".to_string());
    let prog = match c(program.as_os_str().as_bytes()) {
        Ok(p) => p,
        Err(e) => return e,
    };
    let args: Result<Vec<CString>, String> = argv.iter().map(|a| c(a.as_bytes())).collect();
    let args = match args {
        Ok(a) => a,
        Err(e) => return e,
    };
    let mut ptrs: Vec<*mut libc::c_char> = args.iter().map(|a| a.as_ptr().cast_mut()).collect();
    ptrs.push(std::ptr::null_mut());
    // posix_spawn (a vfork, not a copy of this process's memory), the program's SIGPIPE at
    // its default. It needs no parent-death signal: when PID 1 ends, the kernel kills every
    // other process of the namespace.
    let mut pid: libc::pid_t = 0;
    // SAFETY: the attribute and signal set are initialised before use and destroyed after;
    // `prog` and every pointer in `ptrs` point at NUL-terminated strings that outlive the
    // call, `ptrs` ends with a null pointer, and the environment is the helper's own.
    let r = unsafe {
        let mut attr: libc::posix_spawnattr_t = std::mem::zeroed();
        libc::posix_spawnattr_init(&mut attr);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGPIPE);
        libc::posix_spawnattr_setsigdefault(&mut attr, &set);
        libc::posix_spawnattr_setflags(&mut attr, libc::POSIX_SPAWN_SETSIGDEF as libc::c_short);
        let r = libc::posix_spawn(
            &mut pid,
            prog.as_ptr(),
            std::ptr::null(),
            &attr,
            ptrs.as_ptr(),
            environ,
        );
        libc::posix_spawnattr_destroy(&mut attr);
        r
    };
    if r != 0 {
        return format!(
            "cannot run {}: {}",
            program.display(),
            std::io::Error::from_raw_os_error(r)
        );
    }
    // As the namespace's init, it reaps every process that ends until the program has.
    let code = wait_for(pid).unwrap_or(SETUP_FAILED);
    // SAFETY: leaving without the exit handlers, as the forked child it is.
    unsafe { libc::_exit(code) }
}

unsafe extern "C" {
    /// The process's environment, as exec passes it on.
    static environ: *const *mut libc::c_char;
}

fn confine(policy: &Policy) -> Result<(), String> {
    prctl_death_signal()?;
    // First, so that nothing the command starts is outside the group.
    if let Some(group) = &policy.process_group {
        crate::pids::join(group).map_err(|e| e.to_string())?;
    }
    mounts(policy)?;
    limits(policy)?;
    landlock(policy)?;
    drop_capabilities()?;
    close_inherited()
}

/// Every capability gone, for good, before the program starts: the capabilities the user
/// namespace gave the helper, and root's (the kernel gives uid 0 a full set at exec unless told
/// not to). No sandboxed program needs one, and with one a command could change what the
/// commands of its rawko share (bring the shared network namespace's loopback device up).
fn drop_capabilities() -> Result<(), String> {
    let err = |what: &str| format!("{what}: {}", std::io::Error::last_os_error());
    // No capabilities for uid 0 at exec, locked (`SECBIT_NOROOT | SECBIT_NOROOT_LOCKED`).
    const NOROOT: libc::c_ulong = 0b11;
    // SAFETY: prctl(2) with integer arguments throughout.
    if unsafe { libc::prctl(libc::PR_SET_SECUREBITS, NOROOT, 0, 0, 0) } != 0 {
        return Err(err("securebits"));
    }
    // The bounding set emptied, so that no file capability gives one back: every capability
    // the kernel knows, up to the first number it does not (EINVAL).
    let mut cap: libc::c_ulong = 0;
    while unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) } == 0 {
        cap += 1;
    }
    if cap == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINVAL) {
        return Err(err("capability bounding set"));
    }
    let clear = libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong;
    if unsafe { libc::prctl(libc::PR_CAP_AMBIENT, clear, 0, 0, 0) } != 0 {
        return Err(err("ambient capabilities"));
    }
    // And this process's own: effective, permitted and inheritable all empty.
    let header = CapHeader {
        version: 0x2008_0522, // _LINUX_CAPABILITY_VERSION_3
        pid: 0,
    };
    let data = [CapData::default(); 2];
    // SAFETY: capset(2) reads a version 3 header and the two data words it names.
    if unsafe { libc::syscall(libc::SYS_capset, &header, data.as_ptr()) } != 0 {
        return Err(err("capset"));
    }
    Ok(())
}

/// `struct __user_cap_header_struct`.
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

/// `struct __user_cap_data_struct`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// Nothing but the standard descriptors reaches the program, whatever the helper inherited.
fn close_inherited() -> Result<(), String> {
    // SAFETY: close_range(2) with CLOSE_RANGE_CLOEXEC only marks descriptors.
    let r = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    if r != 0 {
        return Err(format!("close_range: {}", std::io::Error::last_os_error()));
    }
    Ok(())
}

/// Where POSIX shared memory lives; the sandbox gets a private tmpfs there.
const SHM: &str = "/dev/shm";
/// Whether that private tmpfs is mounted: only then may the program write there (never the
/// host's own /dev/shm).
static SHM_PRIVATE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn mount(
    source: Option<&str>,
    target: &Path,
    fstype: Option<&str>,
    flags: libc::c_ulong,
) -> Result<(), String> {
    mount_with(source, target, fstype, flags, "")
}

fn mount_with(
    source: Option<&str>,
    target: &Path,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: &str,
) -> Result<(), String> {
    let cs = |s: &str| CString::new(s).expect("no NUL");
    let source = source.map(cs);
    let fstype = fstype.map(cs);
    let data = (!data.is_empty()).then(|| cs(data));
    let target_c = CString::new(target.as_os_str().as_bytes()).map_err(|e| e.to_string())?;
    // SAFETY: every pointer is a NUL-terminated string or null, and lives across the call.
    let r = unsafe {
        libc::mount(
            source.as_ref().map_or(std::ptr::null(), |s| s.as_ptr()),
            target_c.as_ptr(),
            fstype.as_ref().map_or(std::ptr::null(), |s| s.as_ptr()),
            flags,
            data.as_ref()
                .map_or(std::ptr::null(), |s| s.as_ptr().cast::<libc::c_void>()),
        )
    };
    if r != 0 {
        return Err(format!(
            "mount {}: {}",
            target.display(),
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// This namespace's mounts: nothing propagates back, a `/proc` that shows only the sandbox's
/// processes, and the protected places read-only.
fn mounts(policy: &Policy) -> Result<(), String> {
    mount(None, Path::new("/"), None, libc::MS_REC | libc::MS_PRIVATE)?;
    mount(
        Some("proc"),
        Path::new("/proc"),
        Some("proc"),
        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
    )?;
    // A private /dev/shm (POSIX shared memory: Python's multiprocessing, browsers, test
    // runners), empty and gone with the sandbox; the host's stays unseen. Best effort.
    if Path::new(SHM).is_dir()
        && mount_with(
            Some("tmpfs"),
            Path::new(SHM),
            Some("tmpfs"),
            libc::MS_NOSUID | libc::MS_NODEV,
            "size=256m,mode=1777",
        )
        .is_ok()
    {
        SHM_PRIVATE.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    for p in &policy.read_only {
        mount(
            Some(&p.to_string_lossy()),
            p,
            None,
            libc::MS_BIND | libc::MS_REC,
        )?;
        // A remount keeps the flags the mount is locked with in a user namespace.
        let kept = statvfs_flags(p);
        mount(
            None,
            p,
            None,
            libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | kept,
        )?;
    }
    hide(&policy.hidden)
}

/// Cover each of `hidden` with something empty: a read-only tmpfs with no access over a
/// directory, `/dev/null` over anything else. The program cannot take them off (landlock
/// refuses it every mount and unmount, and it has no capability); one that cannot be covered
/// stops the command, rather than leave it readable.
fn hide(hidden: &[PathBuf]) -> Result<(), String> {
    for p in hidden {
        let Ok(meta) = std::fs::metadata(p) else {
            // Gone, or a dangling symlink: nothing to read there.
            continue;
        };
        let covered = if meta.is_dir() {
            mount_with(
                Some("tmpfs"),
                p,
                Some("tmpfs"),
                libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                "size=4k,nr_inodes=1,mode=000",
            )
        } else {
            mount(Some("/dev/null"), p, None, libc::MS_BIND)
        };
        covered.map_err(|e| format!("cannot hide {}: {e}", p.display()))?;
    }
    Ok(())
}

/// `ST_RELATIME` of statvfs(3), the kernel's `MNT_RELATIME` (4096): the libc crate names it
/// for glibc but not for musl, whose static builds are the published binaries.
const ST_RELATIME: libc::c_ulong = 4096;

/// The mount flags of the filesystem at `p` that a remount must repeat.
fn statvfs_flags(p: &Path) -> libc::c_ulong {
    let Ok(c) = CString::new(p.as_os_str().as_bytes()) else {
        return 0;
    };
    // SAFETY: statvfs(2) fills a zeroed local struct.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return 0;
    }
    let mut flags = 0;
    for (st_flag, ms_flag) in [
        (libc::ST_NOSUID, libc::MS_NOSUID),
        (libc::ST_NODEV, libc::MS_NODEV),
        (libc::ST_NOEXEC, libc::MS_NOEXEC),
        (libc::ST_NOATIME, libc::MS_NOATIME),
        (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
        (ST_RELATIME, libc::MS_RELATIME),
    ] {
        if st.f_flag & st_flag != 0 {
            flags |= ms_flag;
        }
    }
    flags
}

fn limits(policy: &Policy) -> Result<(), String> {
    let l = policy.limits;
    let mut limits = vec![
        (libc::RLIMIT_CPU, l.cpu_secs, "CPU time"),
        (libc::RLIMIT_DATA, l.memory, "memory"),
        (libc::RLIMIT_FSIZE, l.file_size, "file size"),
        (libc::RLIMIT_NOFILE, l.open_files, "open files"),
        (libc::RLIMIT_CORE, 0, "core dumps"),
    ];
    // Without a group, the one bound left: it counts every process of the user, so the
    // command may start `processes` more than the user already has.
    if policy.process_group.is_none() {
        let nproc = crate::pids::user_processes().saturating_add(l.processes);
        limits.push((libc::RLIMIT_NPROC, nproc, "processes"));
    }
    for (resource, value, name) in limits {
        let mut cur = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit/setrlimit(2) read and write a local struct.
        unsafe { libc::getrlimit(resource, &mut cur) };
        // Never raise a limit the user already set lower.
        let v = value.min(cur.rlim_max);
        let new = libc::rlimit {
            rlim_cur: v,
            rlim_max: v,
        };
        if unsafe { libc::setrlimit(resource, &new) } != 0 {
            return Err(format!(
                "setrlimit {name}: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    Ok(())
}

fn landlock(policy: &Policy) -> Result<(), String> {
    let abi = ABI::V6;
    let err = |e: landlock::RulesetError| format!("landlock: {e}");
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(abi))
        .map_err(err)?;
    if !policy.network {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(abi))
            .map_err(err)?;
    }
    let status = ruleset
        .scope(Scope::from_all(abi))
        .map_err(err)?
        .create()
        .map_err(err)?
        .add_rules(path_beneath_rules(&policy.read, AccessFs::from_read(abi)))
        .map_err(err)?
        .add_rules(path_beneath_rules(&policy.write, AccessFs::from_all(abi)))
        .map_err(err)?
        .add_rules(path_beneath_rules(
            ["/dev/null", "/dev/zero", "/dev/full", "/dev/tty"]
                .into_iter()
                .chain(
                    SHM_PRIVATE
                        .load(std::sync::atomic::Ordering::Relaxed)
                        .then_some(SHM),
                ),
            AccessFs::from_all(abi),
        ))
        .map_err(err)?
        .restrict_self()
        .map_err(err)?;
    if status.ruleset == landlock::RulesetStatus::NotEnforced {
        return Err("landlock is not enabled in this kernel (see `rawko doctor`)".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[cfg(target_env = "gnu")]
    #[test]
    fn relatime_is_the_kernels_flag() {
        assert_eq!(super::ST_RELATIME, libc::ST_RELATIME);
    }
}
