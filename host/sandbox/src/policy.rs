//! A sandbox policy: what one native command may read, write and reach, as data. It is built in
//! rawko, handed to the sandbox helper on its command line, recorded in the audit log, and
//! enforced by the kernel in the helper ([`crate::helper`]).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};

pub use rawko_capability::Mode;

/// Resource limits of a sandboxed command (`setrlimit`, inherited by everything it starts).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// CPU seconds.
    pub cpu_secs: u64,
    /// Memory a process may have written to, in bytes (`RLIMIT_DATA`: heap and private writable
    /// mappings; address space a runtime only reserves, as V8 does, does not count).
    pub memory: u64,
    /// Largest file it may write, in bytes.
    pub file_size: u64,
    /// Open file descriptors.
    pub open_files: u64,
    /// Processes the command tree may hold at once (bounded as [`Policy::processes_by`] says).
    pub processes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            cpu_secs: 600,
            memory: 8 << 30,
            file_size: 4 << 30,
            open_files: 4096,
            processes: crate::pids::DEFAULT_MAX,
        }
    }
}

/// Everything the helper needs to confine one command. Unknown fields are refused, so that a
/// helper older than its rawko fails rather than leave out what it does not know.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    // The short fields first: the audit log keeps the start of the serialized policy.
    pub mode: Mode,
    /// Whether it may use the network; without it the command gets a network namespace of its
    /// own with nothing in it.
    pub network: bool,
    /// What holds the command tree to `limits.processes`.
    #[serde(default = "rlimit")]
    pub processes_by: crate::pids::Mechanism,
    pub limits: Limits,
    /// Directories it may write.
    pub write: Vec<PathBuf>,
    /// Places under `write` that stay read-only (`.git` internals, `.rawko`), bind-mounted
    /// read-only over themselves.
    pub read_only: Vec<PathBuf>,
    /// Directories and files it may read (and run from).
    pub read: Vec<PathBuf>,
    /// Places under `read` it may not read (the secrets of `/etc`), covered in the sandbox's
    /// mount namespace before the landlock rules are set: an empty directory with no access
    /// over a directory, `/dev/null` over a file.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hidden: Vec<PathBuf>,
    /// The command's own cgroup, made when the command is started ([`Policy::command`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_group: Option<PathBuf>,
    /// The namespaces rawko shares between its commands, joined instead of made
    /// ([`crate::namespaces`]); set when the command is started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<crate::namespaces::Shared>,
}

fn rlimit() -> crate::pids::Mechanism {
    crate::pids::Mechanism::Rlimit
}

/// Entries under `/etc` no sandboxed command reads: password hashes, sudo rules, host keys,
/// Kerberos keytabs, saved Wi-Fi and VPN secrets.
const ETC_SECRETS: &[&str] = &[
    "shadow",
    "shadow-",
    "gshadow",
    "gshadow-",
    "sudoers",
    "sudoers.d",
    "ssh",
    "security",
    "ssl/private",
    "krb5.keytab",
    "NetworkManager",
    "wpa_supplicant",
    "openvpn",
    "wireguard",
    "ipsec.secrets",
];

/// Places in a workspace that a workspace-write command only reads: git's hooks and its config
/// (which name the programs git runs for whoever uses the repository next) and rawko's own
/// configuration. Where they exist they are bind-mounted read-only over themselves.
pub const READ_ONLY_IN_WORKSPACE: [&str; 4] = [".git/hooks", ".git/config", ".git/info", ".rawko"];

/// A mount needs a place to cover, so a command could create what is absent. What it created
/// of these, and `.git` itself (a repository it made, config and hooks included), is removed
/// when the command has ended: [`CreationGuard`].
const NOT_CREATABLE: [&str; 5] = [".git", ".git/hooks", ".git/config", ".git/info", ".rawko"];

/// What a workspace-write command may not leave behind: of [`NOT_CREATABLE`], the places that
/// did not exist when it started. Checked once the command and every process it started have
/// ended (the sandbox's PID namespace guarantees nothing is left to recreate them).
#[derive(Debug, Clone, Default)]
pub struct CreationGuard {
    absent: Vec<PathBuf>,
}

impl CreationGuard {
    /// Note which of the guarded places are absent from `workspace` now.
    pub fn before(workspace: &Path) -> CreationGuard {
        CreationGuard {
            absent: NOT_CREATABLE
                .iter()
                .map(|n| workspace.join(n))
                .filter(|p| p.symlink_metadata().is_err())
                .collect(),
        }
    }

    /// Remove what appeared since [`CreationGuard::before`] (a symlink itself, never what it
    /// points to); the places removed, or that could not be, with the reason.
    pub fn after(&self) -> Vec<(PathBuf, std::io::Result<()>)> {
        let mut found = Vec::new();
        for p in &self.absent {
            let Ok(meta) = p.symlink_metadata() else {
                continue;
            };
            let removed = if meta.is_dir() {
                std::fs::remove_dir_all(p)
            } else {
                std::fs::remove_file(p)
            };
            found.push((p.clone(), removed));
        }
        found
    }
}

/// Names in the home directory a toolchain keeps its installs and caches under.
const HOME_TOOLCHAINS: &[&str] = &[
    ".cargo",
    ".rustup",
    ".npm",
    ".nvm",
    ".node-gyp",
    ".pyenv",
    ".local/lib",
    ".local/bin",
    ".m2",
    ".gradle",
    "go",
];

impl Policy {
    /// The policy for `mode` in `workspace`, with `tmp` as the command's private temporary
    /// directory and `home` the user's home. `protected` are rawko's own directories (config,
    /// data, cache): never readable, even where they sit under a readable directory.
    pub fn new(mode: Mode, workspace: &Path, tmp: &Path, home: Option<&Path>) -> Policy {
        let mut read: Vec<PathBuf> = [
            "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt", "/proc",
            "/sys", "/dev",
        ]
        .iter()
        .map(PathBuf::from)
        .filter(|p| p.exists())
        .collect();
        // `/etc` as one rule (a rule per entry made most of the ruleset's cost), its secrets
        // covered in the sandbox by something empty.
        let mut hidden = Vec::new();
        if Path::new("/etc").is_dir() {
            read.push(PathBuf::from("/etc"));
            hidden = ETC_SECRETS
                .iter()
                .map(|s| Path::new("/etc").join(s))
                .filter(|p| p.symlink_metadata().is_ok())
                .collect();
        }
        if let Some(home) = home {
            read.extend(HOME_TOOLCHAINS.iter().map(|t| home.join(t)));
        }
        for var in ["CARGO_HOME", "RUSTUP_HOME", "GOPATH", "GOROOT", "JAVA_HOME"] {
            if let Some(v) = std::env::var_os(var).filter(|v| Path::new(v).is_absolute()) {
                read.push(PathBuf::from(v));
            }
        }
        read.push(workspace.to_path_buf());
        read.push(tmp.to_path_buf());
        read.retain(|p| p.exists());
        read.sort();
        read.dedup();
        let mut write = vec![tmp.to_path_buf()];
        let mut read_only = Vec::new();
        if mode == Mode::WorkspaceWrite {
            write.push(workspace.to_path_buf());
            read_only = READ_ONLY_IN_WORKSPACE
                .iter()
                .map(|p| workspace.join(p))
                .filter(|p| p.exists())
                .collect();
        }
        Policy {
            mode,
            read,
            write,
            read_only,
            hidden,
            network: false,
            processes_by: crate::pids::mechanism(),
            limits: Limits::default(),
            process_group: None,
            namespaces: None,
        }
    }

    /// The command that runs `program` with `args` under this policy: `launcher` (the `rawko`
    /// binary) as the sandbox helper, which confines itself and then runs the program.
    ///
    /// The command's cgroup is made here, when the policy says to bound its processes by one; the
    /// helper joins it and removes it when the command ends. Where it cannot be made, the helper
    /// is told to bound them by `RLIMIT_NPROC` instead.
    pub fn command(&self, launcher: &Path, program: &Path, arg0: &str, args: &[&str]) -> Command {
        let mut policy = self.clone();
        if policy.processes_by != crate::pids::Mechanism::Rlimit {
            policy.process_group = crate::pids::command_group(launcher, policy.limits.processes);
            if policy.process_group.is_none() {
                policy.processes_by = crate::pids::Mechanism::Rlimit;
            }
        }
        if policy.namespaces.is_none() {
            policy.namespaces = crate::namespaces::shared(launcher);
        }
        let mut c = crate::helper_command(launcher);
        c.arg(HELPER_ARG)
            .arg(serde_json::to_string(&policy).expect("a policy serializes"))
            .arg(program)
            .arg(arg0)
            .args(args);
        c
    }

    /// The helper's arguments after [`HELPER_ARG`], read back.
    pub fn from_args(args: &[OsString]) -> Result<(Policy, PathBuf, Vec<OsString>), ArgsError> {
        let [policy, program, rest @ ..] = args else {
            return Err(ArgsError::Usage);
        };
        let policy: Policy =
            serde_json::from_str(&policy.to_string_lossy()).map_err(ArgsError::BadPolicy)?;
        Ok((policy, PathBuf::from(program), rest.to_vec()))
    }
}

/// Why the helper's arguments could not be read back.
#[derive(Debug, thiserror::Error)]
pub enum ArgsError {
    #[error("usage: rawko __sandbox POLICY PROGRAM ARG0 [ARGS...]")]
    Usage,
    #[error("bad sandbox policy: {0}")]
    BadPolicy(#[source] serde_json::Error),
}

/// The first argument that makes the `rawko` binary act as the sandbox helper.
pub const HELPER_ARG: &str = "__sandbox";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_never_readable() {
        let home = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(home.path().join(".cargo")).unwrap();
        std::fs::create_dir_all(home.path().join(".ssh")).unwrap();
        let ws = tempfile::tempdir().unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let p = Policy::new(Mode::ReadOnly, ws.path(), tmp.path(), Some(home.path()));
        assert!(p.read.contains(&home.path().join(".cargo")));
        // Every secret of `/etc` this machine has is either outside what may be read or covered.
        for secret in ETC_SECRETS.iter().map(|s| Path::new("/etc").join(s)) {
            let readable = p.read.iter().any(|r| secret.starts_with(r));
            assert!(
                !readable || !secret.exists() || p.hidden.contains(&secret),
                "{} is readable under {:?}",
                secret.display(),
                p.read
            );
        }
        for secret in [
            "shadow",
            "sudoers",
            "ssl/private",
            "krb5.keytab",
            "NetworkManager",
        ] {
            assert!(ETC_SECRETS.contains(&secret), "{secret}");
        }
        assert!(
            !p.read
                .iter()
                .any(|r| home.path().join(".ssh").starts_with(r))
        );
        assert!(!p.read.contains(&home.path().to_path_buf()));
        assert_eq!(p.write, vec![tmp.path().to_path_buf()]);
    }

    #[test]
    fn workspace_write_keeps_git_internals_read_only() {
        let ws = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(ws.path().join(".git/hooks")).unwrap();
        std::fs::write(ws.path().join(".git/config"), "").unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let p = Policy::new(Mode::WorkspaceWrite, ws.path(), tmp.path(), None);
        assert!(p.write.contains(&ws.path().to_path_buf()));
        assert!(p.read_only.contains(&ws.path().join(".git/hooks")));
        assert!(p.read_only.contains(&ws.path().join(".git/config")));
        let json = serde_json::to_string(&p).unwrap();
        let args: Vec<OsString> = vec![json.into(), "/bin/true".into(), "true".into()];
        let (back, program, rest) = Policy::from_args(&args).unwrap();
        assert_eq!(back, p);
        assert_eq!(program, PathBuf::from("/bin/true"));
        assert_eq!(rest, vec![OsString::from("true")]);
    }

    #[test]
    fn what_a_command_created_of_the_guarded_places_is_removed_and_nothing_else() {
        let ws = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        std::fs::create_dir(ws.path().join(".rawko")).unwrap();
        std::fs::write(ws.path().join(".rawko/config.yaml"), "kept").unwrap();
        let guard = CreationGuard::before(ws.path());
        // The command makes a repository and a symlink named like a guarded place.
        std::fs::create_dir_all(ws.path().join(".git/hooks")).unwrap();
        std::fs::write(ws.path().join(".git/config"), "[core]\n\tfsmonitor = x\n").unwrap();
        std::fs::write(ws.path().join("src.txt"), "work").unwrap();
        let removed = guard.after();
        let names: Vec<_> = removed
            .iter()
            .map(|(p, r)| (p.clone(), r.is_ok()))
            .collect();
        assert_eq!(names, vec![(ws.path().join(".git"), true)]);
        assert!(!ws.path().join(".git").exists());
        assert_eq!(
            std::fs::read_to_string(ws.path().join(".rawko/config.yaml")).unwrap(),
            "kept"
        );
        assert!(ws.path().join("src.txt").exists());

        // A symlink is removed itself; what it points to stays.
        let guard = CreationGuard::before(ws.path());
        std::os::unix::fs::symlink(elsewhere.path(), ws.path().join(".git")).unwrap();
        std::fs::write(elsewhere.path().join("config"), "theirs").unwrap();
        assert_eq!(guard.after().len(), 1);
        assert!(ws.path().join(".git").symlink_metadata().is_err());
        assert!(elsewhere.path().join("config").exists());
    }
}
