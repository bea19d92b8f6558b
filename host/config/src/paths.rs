//! Where rawko keeps things outside the workspace.
//!
//! Grants, trust decisions and installed plugins live in the data directory, and run state in
//! the state directory, never in a workspace, so nothing a repository ships can change them. Compiled plugins live in the cache
//! directory, which may be deleted at any time.

use std::path::{Path, PathBuf};

/// The user-level directories rawko uses.
#[derive(Debug, Clone)]
pub struct Dirs {
    /// Grants, trust, installed plugins (`--data-dir`, `RAWKO_DATA_DIR`, `$XDG_DATA_HOME/rawko`).
    pub data: PathBuf,
    /// Compiled plugins (`RAWKO_CACHE_DIR`, `$XDG_CACHE_HOME/rawko`).
    pub cache: PathBuf,
    /// The user's own config and agents (`$XDG_CONFIG_HOME/rawko`).
    pub config: PathBuf,
    /// Run state, one task store per workspace (`RAWKO_STATE_DIR`; `<data>/state` when the
    /// data directory was given; `$XDG_STATE_HOME/rawko`).
    pub state: PathBuf,
}

impl Dirs {
    /// Resolve the directories from an explicit data directory (flag or `RAWKO_DATA_DIR`, already
    /// merged by the caller) and the XDG environment.
    pub fn resolve(data_dir: Option<&Path>) -> Dirs {
        let home = std::env::home_dir().unwrap_or_else(|| PathBuf::from("."));
        let xdg = |var: &str, fallback: &str| -> PathBuf {
            match std::env::var_os(var) {
                // The XDG spec says relative values are to be ignored.
                Some(v) if Path::new(&v).is_absolute() => PathBuf::from(v).join("rawko"),
                _ => home.join(fallback).join("rawko"),
            }
        };
        let data = match data_dir {
            Some(d) => d.to_path_buf(),
            None => xdg("XDG_DATA_HOME", ".local/share"),
        };
        let cache = match std::env::var_os("RAWKO_CACHE_DIR") {
            Some(v) if !v.is_empty() => PathBuf::from(v),
            _ => xdg("XDG_CACHE_HOME", ".cache"),
        };
        let config = xdg("XDG_CONFIG_HOME", ".config");
        let state = match std::env::var_os("RAWKO_STATE_DIR") {
            Some(v) if !v.is_empty() => PathBuf::from(v),
            _ => match data_dir {
                Some(d) => d.join("state"),
                None => xdg("XDG_STATE_HOME", ".local/state"),
            },
        };
        Dirs {
            data,
            cache,
            config,
            state,
        }
    }
}

/// How the workspace was found, for `-v`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// The nearest directory (up to the git root) with a `.rawko/`.
    RawkoDir,
    /// The root of the git repository the directory is in.
    GitRoot,
    /// Neither: the directory itself.
    Here,
}

impl std::fmt::Display for Found {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Found::RawkoDir => "the nearest directory with a .rawko/",
            Found::GitRoot => "the root of the git repository",
            Found::Here => "the current directory (no .rawko/ or git repository above it)",
        })
    }
}

/// The workspace a command run in `start` (absolute, canonical) works in, as git finds its
/// repository: the nearest directory with a `.rawko/`, up to the root of the git repository;
/// else that root; else `start`. The search never leaves directories owned by the owner of
/// `start`, nor goes above the home directory, so a `.rawko/` someone else planted in a shared
/// parent (`/tmp/.rawko`) is never picked up.
pub fn discover_workspace(start: &Path) -> (PathBuf, Found) {
    use std::os::unix::fs::MetadataExt;
    let Ok(owner) = std::fs::metadata(start).map(|m| m.uid()) else {
        return (start.to_path_buf(), Found::Here);
    };
    let home = std::env::home_dir();
    for dir in start.ancestors() {
        if std::fs::metadata(dir).map(|m| m.uid()).ok() != Some(owner) {
            break;
        }
        if dir.join(".rawko").is_dir() {
            return (dir.to_path_buf(), Found::RawkoDir);
        }
        if dir.join(".git").exists() {
            return (dir.to_path_buf(), Found::GitRoot);
        }
        if home.as_deref() == Some(dir) {
            break;
        }
    }
    (start.to_path_buf(), Found::Here)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_workspace_is_found_as_git_finds_a_repository() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap().join("repo");
        let deep = root.join("src/a/b");
        std::fs::create_dir_all(&deep).unwrap();
        assert_eq!(discover_workspace(&deep), (deep.clone(), Found::Here));
        std::fs::create_dir(root.join(".git")).unwrap();
        assert_eq!(discover_workspace(&deep), (root.clone(), Found::GitRoot));
        // A .rawko/ between the directory and the git root is nearer.
        std::fs::create_dir(root.join("src/.rawko")).unwrap();
        assert_eq!(
            discover_workspace(&deep),
            (root.join("src"), Found::RawkoDir)
        );
        // Above the git root nothing counts.
        std::fs::remove_dir(root.join("src/.rawko")).unwrap();
        std::fs::create_dir(tmp.path().join(".rawko")).unwrap();
        assert_eq!(discover_workspace(&deep), (root.clone(), Found::GitRoot));
        // A git worktree or submodule has a .git file.
        let sub = root.join("vendor/lib");
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::write(sub.join(".git"), "gitdir: ../../.git/modules/lib\n").unwrap();
        assert_eq!(discover_workspace(&sub), (sub.clone(), Found::GitRoot));
    }
}
