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
