//! Protected paths: no tool and no shell redirection may write under a workspace's `.git/` or
//! `.rawko/`, whatever the grants say.
//!
//! Those directories decide what runs later: git hooks and `core.hooksPath`/`core.pager` in
//! `.git/config` run on the user's next commit, and `.rawko/agents/` holds the agents'
//! permissions, so a model that could write there could rewrite its own. Reading stays allowed.
//!
//! The rule is enforced by the host where the write happens, so no plugin or filter has to get
//! it right: the WASI filesystem functions that create, open for writing, rename, link, remove
//! or retime a path are wrapped (by `rawko_runtime::protect::add_to_linker`) to refuse when the path, with its symlinks
//! resolved as the operation would resolve them, lands in a protected place; and rawko's shell
//! executor checks each file it opens for a redirection ([`Protected::open_for_write`]).
//!
//! A path is protected when, below a writable grant or the workspace, one of its components is
//! `.git` or `.rawko` (which also covers nested repositories), or when it lies in the real
//! directory a workspace's `.git` or `.rawko` symlink points to. Renaming or removing a directory
//! that holds a protected one is refused too, so `.git` cannot be moved aside, written and moved
//! back.

use std::ffi::OsStr;
use std::io;
use std::os::fd::AsFd;
use std::path::{Component, Path, PathBuf};

/// Names no write may pass through below a root.
const PROTECTED_NAMES: [&str; 2] = [".git", ".rawko"];

/// Symlinks followed before a path is given up on, as the kernel does (`ELOOP`).
const MAX_LINKS: usize = 40;

/// The protected places under a set of roots (writable grants and workspaces).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Protected {
    /// Absolute, symlink-free directories below which `.git` and `.rawko` are protected.
    roots: Vec<PathBuf>,
    /// Protected directories themselves: `<root>/.git`, `<root>/.rawko`, and their real paths.
    dirs: Vec<PathBuf>,
}

impl Protected {
    /// Protection below each of `roots` (absolute, symlink-free paths).
    pub fn new(roots: impl IntoIterator<Item = PathBuf>) -> Self {
        let mut p = Protected::default();
        for root in roots {
            if p.roots.contains(&root) {
                continue;
            }
            for name in PROTECTED_NAMES {
                let dir = root.join(name);
                if let Ok(real) = dir.canonicalize()
                    && real != dir
                    && !p.dirs.contains(&real)
                {
                    p.dirs.push(real);
                }
                p.dirs.push(dir);
            }
            p.roots.push(root);
        }
        p
    }

    pub fn is_empty(&self) -> bool {
        self.roots.is_empty()
    }

    /// The protected place `real` (absolute, symlinks resolved) writes into, if any. With
    /// `ancestors`, a directory that holds a protected one counts too (for renames and removals).
    pub fn hit(&self, real: &Path, ancestors: bool) -> Option<PathBuf> {
        if let Some(d) = self.dirs.iter().find(|d| real.starts_with(d)) {
            return Some(d.clone());
        }
        for root in &self.roots {
            let Ok(rel) = real.strip_prefix(root) else {
                continue;
            };
            let mut at = root.clone();
            for c in rel.components() {
                at.push(c);
                if let Component::Normal(n) = c
                    && PROTECTED_NAMES.iter().any(|p| OsStr::new(p) == n)
                {
                    return Some(at);
                }
            }
        }
        if ancestors {
            return self.dirs.iter().find(|d| d.starts_with(real)).cloned();
        }
        None
    }

    /// Refuse a write to `rel` from the directory `base` when it lands in a protected place.
    /// `follow_last`: whether the operation follows a symlink in the last component.
    pub fn check(
        &self,
        base: &Path,
        rel: &Path,
        follow_last: bool,
        ancestors: bool,
    ) -> Result<(), Refusal> {
        match effective_path(base, rel, follow_last) {
            Ok(real) => match self.hit(&real, ancestors) {
                Some(place) => Err(Refusal::Protected { path: real, place }),
                None => Ok(()),
            },
            // Nothing there to write through: the operation itself fails the same way.
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Refusal::Unresolved {
                path: base.join(rel),
                message: e.to_string(),
            }),
        }
    }

    /// Open `target` (relative to `cwd`) for a shell redirection that writes, unless it lands in
    /// a protected place. The file actually opened is checked again before it is truncated, so
    /// a symlink swapped in between the check and the open cannot redirect the write.
    pub fn open_for_write(
        &self,
        cwd: &Path,
        target: &str,
        opts: &mut std::fs::OpenOptions,
        truncate: bool,
    ) -> Result<std::fs::File, OpenError> {
        let target_ = || target.to_string();
        let io = |source| OpenError::Io {
            target: target_(),
            source,
        };
        self.check(cwd, Path::new(target), true, false)
            .map_err(|refusal| OpenError::Refused {
                target: target_(),
                refusal,
            })?;
        let file = opts.truncate(false).open(cwd.join(target)).map_err(io)?;
        if !self.is_empty() {
            let real = fd_path(&file).map_err(|source| OpenError::Unplaced {
                target: target_(),
                source,
            })?;
            if let Some(place) = self.hit(&real, false) {
                return Err(OpenError::Refused {
                    target: target_(),
                    refusal: Refusal::Protected { path: real, place },
                });
            }
        }
        if truncate {
            file.set_len(0).map_err(io)?;
        }
        Ok(file)
    }
}

/// Why a file could not be opened for a redirection: its target as written, and why.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("{target}: {refusal}")]
    Refused {
        target: String,
        #[source]
        refusal: Refusal,
    },
    #[error("{target}: {source}")]
    Io {
        target: String,
        #[source]
        source: io::Error,
    },
    #[error("{target}: cannot tell where the opened file is ({source}), so it is not written")]
    Unplaced {
        target: String,
        #[source]
        source: io::Error,
    },
}

/// Why a write was refused.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Refusal {
    #[error(
        "writing {path} is refused: it is under {place}, and .git (hooks, config) and .rawko (agents, config) decide what runs later"
    )]
    Protected { path: PathBuf, place: PathBuf },
    #[error("writing {path} is refused: cannot tell where it leads ({message})")]
    Unresolved { path: PathBuf, message: String },
}

/// Where an operation on `rel` from the directory `base` lands: the real directory it happens in
/// and the last name, with that name followed too if it is a symlink and `follow_last`.
pub fn effective_path(base: &Path, rel: &Path, follow_last: bool) -> io::Result<PathBuf> {
    let mut path = base.join(rel);
    for _ in 0..MAX_LINKS {
        let (parent, name) = match (path.parent(), path.file_name()) {
            (Some(parent), Some(name)) => (parent, name.to_os_string()),
            // The root, or a path ending in `..`: it must exist.
            _ => return path.canonicalize(),
        };
        let parent = parent.canonicalize()?;
        let candidate = parent.join(&name);
        if follow_last
            && std::fs::symlink_metadata(&candidate).is_ok_and(|m| m.file_type().is_symlink())
        {
            path = parent.join(std::fs::read_link(&candidate)?);
            continue;
        }
        return Ok(candidate);
    }
    Err(io::Error::other("too many levels of symbolic links"))
}

/// The path an open file or directory really has.
#[cfg(target_os = "linux")]
pub fn fd_path(f: &impl AsFd) -> io::Result<PathBuf> {
    use std::os::fd::AsRawFd;
    std::fs::read_link(format!("/proc/self/fd/{}", f.as_fd().as_raw_fd()))
}

#[cfg(not(target_os = "linux"))]
pub fn fd_path(_f: &impl AsFd) -> io::Result<PathBuf> {
    Err(io::Error::other(
        "finding an open file's path is only implemented on Linux",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protected_places_and_the_paths_that_reach_them() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
        std::fs::create_dir_all(ws.join("src")).unwrap();
        std::fs::create_dir_all(ws.join(".rawko/agents")).unwrap();
        std::os::unix::fs::symlink(ws.join(".git/hooks"), ws.join("hooks")).unwrap();
        std::os::unix::fs::symlink(ws.join(".git/hooks/new"), ws.join("dangling")).unwrap();
        let p = Protected::new([ws.clone()]);

        let hit = |rel: &str, follow: bool| p.check(&ws, Path::new(rel), follow, false).is_err();
        assert!(hit(".git/hooks/pre-commit", true));
        assert!(hit(".rawko/agents/x.yaml", true));
        assert!(hit("src/../.git/config", true));
        assert!(hit("hooks/pre-commit", false));
        assert!(hit("dangling", true));
        assert!(!hit("dangling", false));
        assert!(!hit("src/main.rs", true));
        assert!(!hit("git/config", true));
        // Under a missing directory the operation fails by itself; creating it is refused.
        assert!(!hit(".rawko-not/x", true));
        assert!(p.hit(&ws.join(".rawko/new"), false).is_some());
        // Moving the workspace or .git itself away is refused; its neighbours are not.
        assert!(p.check(&ws, Path::new("."), false, true).is_err());
        assert!(p.check(&ws, Path::new("src"), false, true).is_ok());
        assert!(p.hit(&ws.join("sub/.rawko/x"), false).is_some());
    }
}
