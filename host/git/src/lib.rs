//! The `Git` tool's engine: git operations on the workspace's repository, done by gitoxide in
//! rawko's own process, so that no program named by the repository (fsmonitor, hooks, pagers,
//! external diff, textconv, filter drivers) ever runs.
//!
//! Three layers keep it so. The repository is opened isolated (no system, global or
//! environment configuration) and the sections of its own config that name programs are
//! removed before anything reads them. Every operation runs on a fresh thread that the kernel
//! confines ([`rawko_sandbox::confine_thread`]): it may read the repository, write it only for a
//! write operation, execute nothing and reach no network. And the repository must be whole
//! inside its work tree: a `.git` file, a linked worktree, `core.worktree` or alternates
//! pointing elsewhere are refused rather than followed.

mod ops;
mod render;
mod repo;
mod snapshot;
mod worktree;

use std::path::{Path, PathBuf};

use serde::Deserialize;

pub use repo::Located;

/// A name as git quotes it in a patch or its output (`"..."`, C escapes and octal bytes),
/// unquoted: the bytes and how many bytes of `s` the quoted name took; `None` when `s` does
/// not start with a well-formed quoted name.
pub fn unquote(s: &[u8]) -> Option<(Vec<u8>, usize)> {
    use gix::bstr::ByteSlice;
    if !s.starts_with(b"\"") {
        return None;
    }
    let (name, used) = gix::quote::ansi_c::undo(s.as_bstr()).ok()?;
    Some((name.to_vec(), used))
}

/// Lines of diff shown unless the caller asks for another number, and the most it may ask for.
pub const DEFAULT_MAX_LINES: usize = 400;
pub const MAX_LINES: usize = 5_000;
/// Commits `log` lists unless asked otherwise, and the most it lists.
pub const DEFAULT_MAX_COUNT: usize = 20;
pub const MAX_COUNT: usize = 500;
/// Entries `status` lists per section before it says how many more there are.
pub const MAX_STATUS_ENTRIES: usize = 500;
/// Files larger than this are reported as changed, not diffed.
pub const MAX_DIFF_FILE_BYTES: usize = 2 * 1024 * 1024;

/// One operation, as the tool's input names it (`{"op": "diff", "staged": true}`).
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(tag = "op", rename_all = "lowercase", deny_unknown_fields)]
pub enum Request {
    Status {},
    Diff {
        rev: Option<String>,
        #[serde(default)]
        paths: Vec<String>,
        #[serde(default)]
        staged: bool,
        max_lines: Option<usize>,
    },
    Log {
        rev: Option<String>,
        #[serde(default)]
        paths: Vec<String>,
        max_count: Option<usize>,
    },
    Show {
        rev: String,
        max_lines: Option<usize>,
    },
    Blame {
        path: String,
        rev: Option<String>,
    },
    Branch {},
    Add {
        paths: Vec<String>,
    },
    Commit {
        message: String,
    },
    Switch {
        branch: String,
        #[serde(default)]
        create: bool,
    },
    Stash {
        #[serde(default)]
        pop: bool,
    },
    Restore {
        paths: Vec<String>,
        #[serde(default)]
        staged: bool,
    },
}

impl Request {
    /// The operation's name.
    pub fn op(&self) -> &'static str {
        match self {
            Request::Status {} => "status",
            Request::Diff { .. } => "diff",
            Request::Log { .. } => "log",
            Request::Show { .. } => "show",
            Request::Blame { .. } => "blame",
            Request::Branch {} => "branch",
            Request::Add { .. } => "add",
            Request::Commit { .. } => "commit",
            Request::Switch { .. } => "switch",
            Request::Stash { .. } => "stash",
            Request::Restore { .. } => "restore",
        }
    }

    /// Whether the operation changes the repository or the work tree.
    pub fn writes(&self) -> bool {
        matches!(
            self,
            Request::Add { .. }
                | Request::Commit { .. }
                | Request::Switch { .. }
                | Request::Stash { .. }
                | Request::Restore { .. }
        )
    }
}

/// The read operations and the write operations, as the schema lists them.
pub const READ_OPS: &[&str] = &["status", "diff", "log", "show", "blame", "branch"];
pub const WRITE_OPS: &[&str] = &["add", "commit", "switch", "stash", "restore"];

/// Who commits: the author and committer of commits the tool makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub name: String,
    pub email: String,
}

impl Default for Identity {
    fn default() -> Self {
        Identity {
            name: "rawko".into(),
            email: "rawko@localhost".into(),
        }
    }
}

impl Identity {
    /// The user's own git identity (`user.name` and `user.email` of `~/.gitconfig` or
    /// `$XDG_CONFIG_HOME/git/config`), else rawko's. Read by the host, never from the repository.
    pub fn from_user_config() -> Identity {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let xdg = std::env::var_os("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .or_else(|| home.as_ref().map(|h| h.join(".config")));
        let files = [
            xdg.map(|x| x.join("git/config")),
            home.map(|h| h.join(".gitconfig")),
        ];
        let mut name = None;
        let mut email = None;
        for file in files.into_iter().flatten() {
            let Ok(cfg) =
                gix::config::File::from_path_no_includes(file.clone(), gix::config::Source::User)
            else {
                continue;
            };
            if name.is_none() {
                name = cfg.string("user.name").map(|v| v.to_string());
            }
            if email.is_none() {
                email = cfg.string("user.email").map(|v| v.to_string());
            }
        }
        let fallback = Identity::default();
        let clean = |s: String| rawko_text::line(&s, 200).replace(['<', '>'], "");
        Identity {
            name: name
                .map(clean)
                .filter(|s| !s.trim().is_empty())
                .unwrap_or(fallback.name),
            email: email
                .map(clean)
                .filter(|s| !s.trim().is_empty())
                .unwrap_or(fallback.email),
        }
    }
}

/// What a call may do and who it commits as.
#[derive(Debug, Clone)]
pub struct Options {
    /// Whether write operations are allowed (the agent may change the workspace).
    pub write: bool,
    pub identity: Identity,
}

/// Why an operation did not run or did not finish.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    /// The input asks for something the tool cannot do: a bad path, an unknown revision.
    #[error("{0}")]
    Invalid(String),
    /// The operation is not allowed for this caller or this repository.
    #[error("{0}")]
    Denied(String),
    /// The repository could not be read or written.
    #[error("{0}")]
    Failed(String),
}

pub(crate) fn failed(what: &str) -> impl Fn(&dyn std::fmt::Display) -> GitError + '_ {
    move |e| GitError::Failed(format!("{what}: {e}"))
}

/// What tells a repository apart across machines: its root commit and its default remote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RepositoryId {
    /// The root commit at the end of HEAD's first-parent line (at most [`ROOT_WALK`] commits
    /// are walked); None outside a repository, before its first commit, or past the bound.
    pub root: Option<String>,
    /// The default remote's URL, without user name or password in an `http(s)` URL and
    /// without a password in any other.
    pub remote: Option<String>,
}

/// The most commits [`repository_id`] walks to find a root commit.
pub const ROOT_WALK: usize = 200_000;

/// The identity of the repository whose root is `workspace` (nothing when the workspace is not
/// a repository's root), read on a thread the kernel confines to reading the repository, with
/// the same hardened open as every Git call: no program runs, no user or system config is read.
pub fn repository_id(workspace: &Path) -> RepositoryId {
    let Ok(located) = repo::locate(workspace) else {
        return RepositoryId::default();
    };
    if located.root != located.workspace {
        return RepositoryId::default();
    }
    let worker = std::thread::Builder::new()
        .name("rawko-git".into())
        .spawn(move || {
            let _ = rawko_sandbox::confine_thread(std::slice::from_ref(&located.root), &[]);
            let Ok(repo) = repo::open(&located) else {
                return RepositoryId::default();
            };
            let root = repo.head_id().ok().and_then(|head| {
                head.ancestors()
                    .first_parent_only()
                    .all()
                    .ok()?
                    .take(ROOT_WALK)
                    .map_while(Result::ok)
                    .enumerate()
                    .last()
                    .filter(|(n, info)| *n + 1 < ROOT_WALK || info.parent_ids.is_empty())
                    .map(|(_, info)| info.id.to_string())
            });
            let name = repo
                .remote_default_name(gix::remote::Direction::Fetch)
                .map(|n| n.to_string())
                .unwrap_or_else(|| "origin".into());
            let remote = repo.find_remote(name.as_str()).ok().and_then(|r| {
                let mut url = r.url(gix::remote::Direction::Fetch)?.clone();
                url.set_password(None);
                if matches!(url.scheme, gix::url::Scheme::Http | gix::url::Scheme::Https) {
                    url.set_user(None);
                }
                Some(url.to_bstring().to_string())
            });
            RepositoryId { root, remote }
        });
    worker.ok().and_then(|w| w.join().ok()).unwrap_or_default()
}

/// Run `request` on the repository of `workspace`, on a thread of its own that the kernel
/// confines to the repository (read-only unless the request writes). Returns the text for the
/// model.
pub fn run(workspace: &Path, request: Request, opts: &Options) -> Result<String, GitError> {
    if request.writes() && !opts.write {
        return Err(GitError::Denied(format!(
            "`{}` changes the repository, and this agent may only read the workspace; the \
             read operations are {}",
            request.op(),
            READ_OPS.join(", ")
        )));
    }
    let located = repo::locate(workspace)?;
    if request.writes() && located.root != located.workspace {
        return Err(GitError::Denied(format!(
            "`{}` would change the repository at {}, which is larger than the workspace {}; \
             the Git tool writes only when the workspace is the repository's root",
            request.op(),
            located.root.display(),
            located.workspace.display()
        )));
    }
    let opts = opts.clone();
    let handle = std::thread::Builder::new()
        .name("rawko-git".into())
        .spawn(move || {
            let writable = if request.writes() {
                vec![located.root.clone()]
            } else {
                Vec::new()
            };
            let readable = vec![located.root.clone()];
            let confinement = rawko_sandbox::confine_thread(&readable, &writable);
            if confinement == rawko_sandbox::Confinement::None {
                // No landlock here: the hardened configuration still keeps every program out.
                tracing::debug!("the git worker runs without a kernel sandbox (no landlock)");
            }
            ops::dispatch(&located, request, &opts)
        })
        .map_err(|e| GitError::Failed(format!("cannot start the git worker: {e}")))?;
    handle
        .join()
        .unwrap_or_else(|_| Err(GitError::Failed("the git operation panicked".into())))
}
