//! Workspace trust: whether a workspace's own `.rawko/` files may ask for more than reading.
//!
//! A repository can ship `.rawko/agents/` and `.rawko/config.yaml`, so cloning a stranger's
//! repository and running rawko in it must not hand the stranger's agents a shell, or send the
//! user's API key to the stranger's adapter. Until the user trusts a workspace, its own agents
//! get read-only tools and its own config is ignored. The decision is stored in the user's data
//! directory, keyed by the workspace's canonical path, never in the workspace itself, and bound
//! to the content of what the workspace brings ([`brought`]): when any of it changes, the
//! workspace is untrusted again until the user looks and trusts it anew.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The file, in the data directory.
const FILE_NAME: &str = "trust.json";

/// Whether the user trusts a workspace: the one word for it that every part of rawko takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trust {
    Trusted,
    Untrusted,
}

impl Trust {
    pub fn is_trusted(self) -> bool {
        self == Trust::Trusted
    }
}

impl From<bool> for Trust {
    fn from(trusted: bool) -> Trust {
        if trusted {
            Trust::Trusted
        } else {
            Trust::Untrusted
        }
    }
}

/// Files and folders, relative to the workspace, whose content decides what a workspace asks
/// for: its config, its agents (rawko's, Claude Code's, Copilot's and opencode's), its MCP servers, its knowledge
/// sources. Any `.wasm` under `.rawko/` (bash filters, tools) counts too.
pub const BROUGHT: &[&str] = &[
    ".rawko/config.yaml",
    ".rawko/agents",
    ".rawko/knowledge.yaml",
    ".claude/agents",
    ".github/agents",
    ".opencode/agent",
    ".opencode/agents",
    ".mcp.json",
    "knowledge.yaml",
];

/// Most files [`brought`] looks at, and how deep it goes; a workspace bringing more is hashed
/// as far as these reach (the count itself is part of the digest).
const MAX_FILES: usize = 10_000;
const MAX_DEPTH: usize = 16;
const MAX_VISITS: usize = 100_000;

/// The files a workspace brings ([`BROUGHT`], and `.wasm` files under `.rawko/`), relative
/// and sorted. Symbolic links are listed, not followed.
pub fn brought(workspace: &Path) -> Vec<PathBuf> {
    fn walk(
        root: &Path,
        rel: &Path,
        depth: usize,
        wasm_only: bool,
        out: &mut Vec<PathBuf>,
        visits: &mut usize,
    ) {
        // Entries looked at, not only files kept: a huge tree under .rawko/ costs a bounded walk.
        *visits += 1;
        if out.len() >= MAX_FILES || depth > MAX_DEPTH || *visits > MAX_VISITS {
            return;
        }
        let Ok(meta) = std::fs::symlink_metadata(root.join(rel)) else {
            return;
        };
        if meta.is_dir() {
            let Ok(entries) = std::fs::read_dir(root.join(rel)) else {
                return;
            };
            let mut names: Vec<_> = entries.flatten().map(|e| e.file_name()).collect();
            names.sort();
            for name in names {
                walk(root, &rel.join(name), depth + 1, wasm_only, out, visits);
            }
        } else if !wasm_only || rel.extension().is_some_and(|e| e == "wasm") {
            out.push(rel.to_path_buf());
        }
    }
    let mut out = Vec::new();
    let mut visits = 0;
    for rel in BROUGHT {
        walk(workspace, Path::new(rel), 0, false, &mut out, &mut visits);
    }
    walk(
        workspace,
        Path::new(".rawko"),
        0,
        true,
        &mut out,
        &mut visits,
    );
    out.sort();
    out.dedup();
    out
}

/// A digest of what `workspace` brings: each file's path and content (a symbolic link's
/// target, a special file's kind), so that any change, addition or removal changes it.
pub fn digest(workspace: &Path) -> String {
    let mut h = Sha256::new();
    for rel in brought(workspace) {
        let path = workspace.join(&rel);
        h.update(rel.as_os_str().as_encoded_bytes());
        h.update([0]);
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.is_symlink() => {
                h.update(b"link:");
                if let Ok(target) = std::fs::read_link(&path) {
                    h.update(target.as_os_str().as_encoded_bytes());
                }
            }
            Ok(m) if m.is_file() => {
                // Streamed: a large file costs its read, never its size in memory.
                if let Ok(mut f) = std::fs::File::open(&path) {
                    let _ = std::io::copy(&mut f, &mut h);
                }
            }
            Ok(_) => h.update(b"special"),
            Err(_) => h.update(b"gone"),
        }
        h.update([0]);
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether a workspace is trusted, now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Trusted, and what it brings is what the user trusted.
    Trusted(Trusted),
    /// Trusted once, but what it brings has changed since: untrusted until trusted again.
    Changed(Trusted),
    Untrusted,
}

/// One trusted workspace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trusted {
    /// When, in milliseconds since the Unix epoch.
    pub at: i64,
    /// How: `rawko trust`, `rawko init`, `--trust`, a prompt.
    pub how: String,
    /// [`digest`] of what the workspace brought when it was trusted. A decision without one
    /// (from an older rawko) counts as changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct TrustFile {
    #[serde(default)]
    workspaces: BTreeMap<PathBuf, Trusted>,
}

#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error("trust store {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("trust store {} is corrupt ({message}); fix or delete it (every workspace will be untrusted)", path.display())]
    Corrupt { path: PathBuf, message: String },
}

/// The trust decisions in one data directory.
#[derive(Debug)]
pub struct TrustStore {
    path: PathBuf,
}

impl TrustStore {
    pub fn new(data_dir: &Path) -> Self {
        TrustStore {
            path: data_dir.join(FILE_NAME),
        }
    }

    fn read(&self) -> Result<TrustFile, TrustError> {
        match std::fs::read(&self.path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| TrustError::Corrupt {
                path: self.path.clone(),
                message: e.to_string(),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(TrustFile::default()),
            Err(source) => Err(TrustError::Io {
                path: self.path.clone(),
                source,
            }),
        }
    }

    fn write(&self, file: &TrustFile) -> Result<(), TrustError> {
        let io = |source| TrustError::Io {
            path: self.path.clone(),
            source,
        };
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(io)?;
        let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(io)?;
        let text = serde_json::to_vec_pretty(file).map_err(|e| io(std::io::Error::other(e)))?;
        tmp.write_all(&text).map_err(io)?;
        tmp.as_file().sync_all().map_err(io)?;
        tmp.persist(&self.path).map_err(|e| io(e.error))?;
        Ok(())
    }

    /// The decision recorded for `workspace` (canonical), whatever it brings now.
    pub fn get(&self, workspace: &Path) -> Result<Option<Trusted>, TrustError> {
        Ok(self.read()?.workspaces.get(workspace).cloned())
    }

    /// Whether `workspace` (canonical) is trusted with what it brings now.
    pub fn status(&self, workspace: &Path) -> Result<Status, TrustError> {
        Ok(match self.get(workspace)? {
            None => Status::Untrusted,
            Some(t) if t.digest.as_deref() == Some(digest(workspace).as_str()) => {
                Status::Trusted(t)
            }
            Some(t) => Status::Changed(t),
        })
    }

    /// Trust `workspace` (canonical) with what it brings now.
    pub fn trust(&self, workspace: &Path, how: &str) -> Result<(), TrustError> {
        let mut file = self.read()?;
        file.workspaces.insert(
            workspace.to_path_buf(),
            Trusted {
                at: std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as i64),
                how: how.to_string(),
                digest: Some(digest(workspace)),
            },
        );
        self.write(&file)
    }

    /// Stop trusting `workspace`; returns whether it was trusted.
    pub fn revoke(&self, workspace: &Path) -> Result<bool, TrustError> {
        let mut file = self.read()?;
        let was = file.workspaces.remove(workspace).is_some();
        if was {
            self.write(&file)?;
        }
        Ok(was)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trust_and_revoke_round_trip() {
        let data = tempfile::tempdir().unwrap();
        let ws = Path::new("/some/workspace");
        let store = TrustStore::new(data.path());
        assert_eq!(store.get(ws).unwrap(), None);
        store.trust(ws, "rawko trust").unwrap();
        assert_eq!(store.get(ws).unwrap().unwrap().how, "rawko trust");
        assert_eq!(store.get(Path::new("/some/other")).unwrap(), None);
        assert!(store.revoke(ws).unwrap());
        assert!(!store.revoke(ws).unwrap());
        assert_eq!(store.get(ws).unwrap(), None);
    }

    #[test]
    fn trust_is_bound_to_what_the_workspace_brings() {
        let data = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        let ws = ws.path();
        let write = |rel: &str, text: &str| {
            let p = ws.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        write(".rawko/agents/helper.yaml", "name: helper\n");
        write("src/main.rs", "fn main() {}\n");
        let store = TrustStore::new(data.path());
        assert_eq!(store.status(ws).unwrap(), Status::Untrusted);
        store.trust(ws, "rawko trust").unwrap();
        assert!(matches!(store.status(ws).unwrap(), Status::Trusted(_)));
        // Work on the project is not a change of what the workspace brings.
        write("src/main.rs", "fn main() { println!() }\n");
        std::fs::write(ws.join(".rawko/state.db"), "x").unwrap();
        assert!(matches!(store.status(ws).unwrap(), Status::Trusted(_)));
        // Every kind of change to it is.
        for change in [
            ".rawko/agents/helper.yaml",
            ".rawko/agents/sub/new.md",
            ".rawko/config.yaml",
            ".rawko/filters/allow.wasm",
            ".claude/agents/x.md",
            ".github/agents/x.agent.md",
            ".opencode/agent/x.md",
            ".opencode/agents/x.md",
            ".mcp.json",
            "knowledge.yaml",
        ] {
            write(change, "changed");
            assert!(
                matches!(store.status(ws).unwrap(), Status::Changed(_)),
                "{change}"
            );
            store.trust(ws, "rawko trust").unwrap();
        }
        std::fs::remove_file(ws.join(".mcp.json")).unwrap();
        assert!(matches!(store.status(ws).unwrap(), Status::Changed(_)));
        assert_eq!(
            brought(ws),
            [
                ".claude/agents/x.md",
                ".github/agents/x.agent.md",
                ".opencode/agent/x.md",
                ".opencode/agents/x.md",
                ".rawko/agents/helper.yaml",
                ".rawko/agents/sub/new.md",
                ".rawko/config.yaml",
                ".rawko/filters/allow.wasm",
                "knowledge.yaml"
            ]
            .map(PathBuf::from)
        );
    }

    #[test]
    fn a_decision_from_before_digests_counts_as_changed() {
        let data = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        std::fs::write(
            data.path().join(FILE_NAME),
            format!(
                "{{\"workspaces\": {{\"{}\": {{\"at\": 1, \"how\": \"rawko trust\"}}}}}}",
                ws.path().display()
            ),
        )
        .unwrap();
        let store = TrustStore::new(data.path());
        assert!(matches!(
            store.status(ws.path()).unwrap(),
            Status::Changed(_)
        ));
    }

    #[test]
    fn a_corrupt_file_is_an_error_not_trust() {
        let data = tempfile::tempdir().unwrap();
        std::fs::write(data.path().join(FILE_NAME), "{not json").unwrap();
        let e = TrustStore::new(data.path())
            .get(Path::new("/w"))
            .unwrap_err();
        assert!(e.to_string().contains("corrupt"), "{e}");
    }
}
