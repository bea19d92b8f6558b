//! The kernel sandbox for the native processes rawko starts.
//!
//! Wasm plugins are contained by wasmtime; commands run by the Bash tool and by command tools
//! are native processes, and this crate is what holds them. A [`Policy`] (data: what the command
//! may read, write and reach, and its limits) is enforced by the kernel in the sandbox helper
//! ([`helper`]): namespaces, read-only bind mounts, resource limits and a landlock ruleset. Around
//! that: an environment reduced to an allow-list, a landlock ruleset on the thread that starts
//! commands (for the files rawko itself opens for their redirections), and whole process groups
//! killed when their time is up.

pub mod gitconfig;
#[cfg(target_os = "linux")]
pub mod helper;
pub mod namespaces;
pub mod pids;
pub mod policy;
pub mod probe;
pub mod program;
pub mod reaper;

pub use policy::{CreationGuard, Limits, Mode, Policy};

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde::Serialize;

/// The small program installed beside `rawko` that sets up the sandbox (and runs the reaper and
/// the cgroup keeper): it loads in a fraction of the time the whole of rawko takes, and every
/// native command pays for one start of it.
pub const HELPER_PROGRAM: &str = "rawko-sandbox";

/// The program that plays the helper's roles for `launcher` (the `rawko` binary): the static
/// helper built into rawko where it offered one ([`offer_helper`]), else the small helper
/// beside it where it is installed, else `launcher` itself, which has the same roles.
pub fn helper_program(launcher: &Path) -> PathBuf {
    builtin_helper_program().unwrap_or_else(|| installed_helper(launcher))
}

/// The static helper built into rawko, as a path to run, where it was offered and starts.
pub fn builtin_helper_program() -> Option<PathBuf> {
    builtin_helper().cloned()
}

/// Which program [`helper_program`] gives, in words, for `rawko doctor`.
pub fn helper_kind(launcher: &Path) -> &'static str {
    if builtin_helper().is_some() {
        "the static one built into rawko"
    } else if installed_helper(launcher) != launcher {
        "rawko-sandbox, beside rawko"
    } else {
        "rawko itself (no rawko-sandbox beside it)"
    }
}

static OFFERED: std::sync::OnceLock<&'static [u8]> = std::sync::OnceLock::new();

/// Offer the helper built into the running binary: a static executable, which starts in a
/// fraction of the time a dynamically linked one does. It is run from a sealed memory file (no
/// copy on disk that anything could change), once checked to start; where it cannot be, the
/// helper beside rawko is used as before.
pub fn offer_helper(executable: &'static [u8]) {
    let _ = OFFERED.set(executable);
}

/// The offered helper as a path to run (`/proc/self/fd/N` of its memory file, which each child
/// resolves through its own copy of the descriptor while it execs), made the first time.
fn builtin_helper() -> Option<&'static PathBuf> {
    static PATH: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        let bytes = OFFERED.get()?;
        match sealed_executable(bytes) {
            Ok(path) => Some(path),
            Err(e) => {
                tracing::debug!("the built-in sandbox helper cannot be used: {e}");
                None
            }
        }
    })
    .as_ref()
}

#[cfg(target_os = "linux")]
fn sealed_executable(bytes: &[u8]) -> Result<PathBuf, String> {
    use std::io::Write;
    use std::os::fd::{FromRawFd, IntoRawFd, OwnedFd};
    let err = |what: &str| format!("{what}: {}", std::io::Error::last_os_error());
    let name = c"rawko-sandbox";
    let flags = libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING;
    // Executable where the kernel asks memory files to say so (`vm.memfd_noexec`, Linux 6.3);
    // older kernels do not know the flag.
    // SAFETY: memfd_create(2) with a NUL-terminated name and flags.
    let mut fd = unsafe { libc::memfd_create(name.as_ptr(), flags | libc::MFD_EXEC) };
    if fd < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL) {
        fd = unsafe { libc::memfd_create(name.as_ptr(), flags) };
    }
    if fd < 0 {
        return Err(err("memfd_create"));
    }
    // SAFETY: `fd` was just created and is owned here alone.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut file = std::fs::File::from(owned);
    file.write_all(bytes)
        .map_err(|e| format!("writing it: {e}"))?;
    let seals = libc::F_SEAL_SEAL | libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE;
    // SAFETY: fcntl(2) on a descriptor we own.
    if unsafe { libc::fcntl(fd, libc::F_ADD_SEALS, seals) } != 0 {
        return Err(err("sealing it"));
    }
    let path = PathBuf::from(format!("/proc/self/fd/{fd}"));
    // It must start (a security module may refuse programs in memory files): with no role it
    // says so and exits with 2.
    let status = helper_command_at(&path)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .map_err(|e| format!("starting it: {e}"))?;
    if status.code() != Some(2) {
        return Err(format!("it ended with {status} when started"));
    }
    // Held open for as long as rawko runs.
    let _ = file.into_raw_fd();
    Ok(path)
}

#[cfg(not(target_os = "linux"))]
fn sealed_executable(_bytes: &[u8]) -> Result<PathBuf, String> {
    Err("the kernel sandbox is Linux only".into())
}

/// A command that runs [`helper_program`] for `launcher`, named `rawko-sandbox` in `ps`
/// whichever program plays the part.
pub fn helper_command(launcher: &Path) -> std::process::Command {
    helper_command_at(&helper_program(launcher))
}

fn helper_command_at(program: &Path) -> std::process::Command {
    use std::os::unix::process::CommandExt;
    let mut c = std::process::Command::new(program);
    c.arg0(HELPER_PROGRAM);
    c
}

/// The small helper beside `launcher` where it is installed, else `launcher`.
fn installed_helper(launcher: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let small = launcher.with_file_name(HELPER_PROGRAM);
    if small
        .metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    {
        small
    } else {
        launcher.to_path_buf()
    }
}

/// Environment variables passed through from rawko's own environment; everything else is
/// dropped (API keys, tokens, `LD_PRELOAD`, `BASH_ENV`, ...). `PATH` is rawko's filtered one,
/// `TERM` is `dumb` and `TMPDIR` a private directory.
pub const ENV_ALLOWLIST: &[&str] = &[
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LANGUAGE",
    "TZ",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "RUSTUP_TOOLCHAIN",
    "GOPATH",
    "GOROOT",
    "GOCACHE",
    "GOMODCACHE",
    "JAVA_HOME",
];

/// Whether the kernel limited the commands' writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Confinement {
    /// Landlock enforced every write restriction.
    Full,
    /// Landlock enforced some of them (an older kernel).
    Partial,
    /// Not enforced: not Linux, or landlock unavailable.
    None,
}

/// Settings every git process gets whatever the repository's `.git/config` says, because that
/// file belongs to whoever wrote the repository: no fsmonitor program, no hooks, no pager, no
/// external diff, no ssh command, no credential helper or askpass program, no `ext::` transport,
/// no signing or signature checking program. Drivers and aliases the repository names itself
/// are read from its config for each command ([`gitconfig`]).
pub const GIT_OVERRIDES: &[(&str, &str)] = &[
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("core.pager", "cat"),
    ("core.sshCommand", "false"),
    ("core.askPass", ""),
    ("core.editor", "false"),
    ("core.gitProxy", ""),
    ("diff.external", ""),
    ("credential.helper", ""),
    ("protocol.ext.allow", "never"),
    ("sequence.editor", "false"),
    ("gpg.program", "false"),
    ("gpg.openpgp.program", "false"),
    ("gpg.x509.program", "false"),
    ("gpg.ssh.program", "false"),
    ("gpg.ssh.defaultKeyCommand", "false"),
    ("commit.gpgSign", "false"),
    ("tag.gpgSign", "false"),
    ("push.gpgSign", "false"),
    ("log.showSignature", "false"),
];

/// [`GIT_OVERRIDES`], and the overrides of what the repository around `workspace` names itself,
/// as `GIT_CONFIG_COUNT` / `GIT_CONFIG_KEY_n` / `GIT_CONFIG_VALUE_n`, which git reads after every
/// config file, plus `GIT_PAGER`.
pub fn git_env(workspace: Option<&Path>) -> Vec<(OsString, OsString)> {
    let mut all: Vec<(String, String)> = GIT_OVERRIDES
        .iter()
        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
        .collect();
    if let Some(ws) = workspace {
        all.extend(gitconfig::overrides(ws));
    }
    let mut env: Vec<(OsString, OsString)> = vec![
        ("GIT_CONFIG_COUNT".into(), all.len().to_string().into()),
        ("GIT_PAGER".into(), "cat".into()),
        ("GIT_TERMINAL_PROMPT".into(), "0".into()),
    ];
    for (i, (k, v)) in all.into_iter().enumerate() {
        env.push((format!("GIT_CONFIG_KEY_{i}").into(), k.into()));
        env.push((format!("GIT_CONFIG_VALUE_{i}").into(), v.into()));
    }
    env
}

/// The environment every command run in `workspace` starts from.
pub fn base_env(
    path_dirs: &[PathBuf],
    tmpdir: Option<&Path>,
    workspace: Option<&Path>,
) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = Vec::new();
    for (k, v) in std::env::vars_os() {
        let Some(name) = k.to_str() else { continue };
        if ENV_ALLOWLIST.contains(&name) || name.starts_with("LC_") {
            env.push((k, v));
        }
    }
    if let Ok(path) = std::env::join_paths(path_dirs) {
        env.push(("PATH".into(), path));
    }
    env.push(("TERM".into(), "dumb".into()));
    env.extend(git_env(workspace));
    if let Some(t) = tmpdir {
        env.push(("TMPDIR".into(), t.into()));
    }
    env
}

/// Limit the writes of this thread and every process it starts to `writable` and `/dev/null`.
#[cfg(target_os = "linux")]
pub fn confine(writable: &[PathBuf]) -> Confinement {
    use landlock::{
        ABI, AccessFs, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, path_beneath_rules,
    };
    let abi = ABI::V5;
    let result = (|| -> Result<RulesetStatus, landlock::RulesetError> {
        let status = Ruleset::default()
            .handle_access(AccessFs::from_write(abi))?
            .create()?
            .add_rules(path_beneath_rules(writable, AccessFs::from_write(abi)))?
            .add_rules(path_beneath_rules(["/dev/null"], AccessFs::from_write(abi)))?
            .restrict_self()?;
        Ok(status.ruleset)
    })();
    confinement(result)
}

/// What a landlock ruleset's outcome means for the thread.
#[cfg(target_os = "linux")]
fn confinement(result: Result<landlock::RulesetStatus, landlock::RulesetError>) -> Confinement {
    match result {
        Ok(landlock::RulesetStatus::FullyEnforced) => Confinement::Full,
        Ok(landlock::RulesetStatus::PartiallyEnforced) => Confinement::Partial,
        Ok(landlock::RulesetStatus::NotEnforced) => Confinement::None,
        Err(e) => {
            tracing::info!("cannot set up landlock: {e}");
            Confinement::None
        }
    }
}

#[cfg(not(target_os = "linux"))]
pub fn confine(_writable: &[PathBuf]) -> Confinement {
    Confinement::None
}

/// Confine this thread (and anything it would start) to reading `readable` and reading and
/// writing `writable`: nothing else on the filesystem, no program executed from anywhere (no
/// path is granted the right to execute), no TCP, and no signals or abstract sockets outside
/// the thread's own domain. For host code that works on files a stranger controls and must
/// never run a program, whatever those files say.
#[cfg(target_os = "linux")]
pub fn confine_thread(readable: &[PathBuf], writable: &[PathBuf]) -> Confinement {
    use landlock::{
        ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr,
        RulesetCreatedAttr, RulesetStatus, Scope, path_beneath_rules,
    };
    let abi = ABI::V6;
    let read = AccessFs::ReadFile | AccessFs::ReadDir;
    let write = AccessFs::from_all(abi) & !AccessFs::Execute;
    let result = (|| -> Result<RulesetStatus, landlock::RulesetError> {
        let status = Ruleset::default()
            .set_compatibility(CompatLevel::BestEffort)
            .handle_access(AccessFs::from_all(abi))?
            .handle_access(AccessNet::from_all(abi))?
            .scope(Scope::from_all(abi))?
            .create()?
            .add_rules(path_beneath_rules(readable, read))?
            .add_rules(path_beneath_rules(writable, write))?
            .add_rules(path_beneath_rules(
                ["/dev/null"],
                read | AccessFs::WriteFile,
            ))?
            .restrict_self()?;
        Ok(status.ruleset)
    })();
    confinement(result)
}

#[cfg(not(target_os = "linux"))]
pub fn confine_thread(_readable: &[PathBuf], _writable: &[PathBuf]) -> Confinement {
    Confinement::None
}

/// Stop a whole process group: `SIGTERM` first, so the reapers and sandbox helpers in it take
/// down everything their programs started (a reaper answers it by killing all below it), then,
/// after `grace` or as soon as the group is gone, `SIGKILL` for whatever is left.
pub fn stop_group(pgid: i32, grace: std::time::Duration) {
    if pgid <= 1 {
        return;
    }
    // SAFETY: kill(2) with a negative pid signals a process group; it takes no pointers.
    unsafe {
        libc::kill(-pgid, libc::SIGTERM);
    }
    let deadline = std::time::Instant::now() + grace;
    // SAFETY: as above; signal 0 only asks whether the group still has members.
    while unsafe { libc::kill(-pgid, 0) } == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    kill_group(pgid);
}

/// Kill a whole process group; `pgid` 0 and 1 are never signalled.
pub fn kill_group(pgid: i32) {
    if pgid > 1 {
        // SAFETY: kill(2) with a negative pid signals a process group; it takes no pointers.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_is_reduced_to_the_allow_list() {
        let env = base_env(
            &[PathBuf::from("/usr/bin")],
            Some(Path::new("/tmp/x")),
            None,
        );
        let names: Vec<String> = env
            .iter()
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect();
        for name in &names {
            assert!(
                ENV_ALLOWLIST.contains(&name.as_str())
                    || name.starts_with("LC_")
                    || ["PATH", "TERM", "TMPDIR"].contains(&name.as_str())
                    || git_env(None).iter().any(|(k, _)| k == name.as_str()),
                "{name} passed through"
            );
        }
        let get = |n: &str| env.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone());
        assert_eq!(get("PATH"), Some("/usr/bin".into()));
        assert_eq!(get("TERM"), Some("dumb".into()));
        assert_eq!(get("TMPDIR"), Some("/tmp/x".into()));
    }

    #[test]
    fn a_confined_thread_reads_only_its_grant_and_executes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("inside"), "x").unwrap();
        let outside = tempfile::NamedTempFile::new().unwrap();
        let (root, outside) = (dir.path().to_path_buf(), outside.path().to_path_buf());
        let (conf, inside_ok, outside_ok, exec_ok, write_ok) = std::thread::spawn(move || {
            let conf = confine_thread(std::slice::from_ref(&root), &[]);
            (
                conf,
                std::fs::read(root.join("inside")).is_ok(),
                std::fs::read(&outside).is_ok(),
                std::process::Command::new("/bin/true").status().is_ok(),
                std::fs::write(root.join("new"), "x").is_ok(),
            )
        })
        .join()
        .unwrap();
        assert!(inside_ok);
        if conf == Confinement::Full {
            assert!(!outside_ok, "read outside the grant");
            assert!(!exec_ok, "a program ran");
            assert!(!write_ok, "wrote inside a read-only grant");
        }
        // The rest of the process is not confined.
        assert!(std::process::Command::new("/bin/true").status().is_ok());
    }

    #[test]
    fn a_confined_process_cannot_write_outside_its_grant() {
        let dir = tempfile::tempdir().unwrap();
        let allowed = dir.path().join("ok");
        std::fs::create_dir(&allowed).unwrap();
        let outside = dir.path().join("outside.txt");
        // Confine a thread of its own: landlock applies to the calling thread and its children.
        let (allowed2, outside2) = (allowed.clone(), outside.clone());
        let (conf, inside_ok, outside_ok) = std::thread::spawn(move || {
            let conf = confine(std::slice::from_ref(&allowed2));
            let inside_ok = std::fs::write(allowed2.join("f"), "x").is_ok();
            let outside_ok = std::fs::write(&outside2, "x").is_ok();
            (conf, inside_ok, outside_ok)
        })
        .join()
        .unwrap();
        assert!(inside_ok);
        if conf == Confinement::Full {
            assert!(
                !outside_ok,
                "landlock let a write outside the grant through"
            );
            assert!(!outside.exists());
        }
    }
}
