//! Workspace trust: whether a workspace's own `.rawko/` files may ask for more than reading.
//!
//! A repository can ship `.rawko/agents/` and `.rawko/config.yaml`, so cloning a stranger's
//! repository and running rawko in it must not hand the stranger's agents a shell, or send the
//! user's API key to the stranger's adapter. Until the user trusts a workspace, its own agents
//! get read-only tools and its own config is ignored. The decision is stored in the user's data
//! directory, keyed by the workspace's canonical path, never in the workspace itself.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The file, in the data directory.
const FILE_NAME: &str = "trust.json";

/// One trusted workspace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trusted {
    /// When, in milliseconds since the Unix epoch.
    pub at: i64,
    /// How: `rawko trust`, `rawko init`, `--trust`, a prompt.
    pub how: String,
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

    /// Whether `workspace` (canonical) is trusted, and since when.
    pub fn get(&self, workspace: &Path) -> Result<Option<Trusted>, TrustError> {
        Ok(self.read()?.workspaces.get(workspace).cloned())
    }

    /// Trust `workspace` (canonical).
    pub fn trust(&self, workspace: &Path, how: &str) -> Result<(), TrustError> {
        let mut file = self.read()?;
        file.workspaces.insert(
            workspace.to_path_buf(),
            Trusted {
                at: std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as i64),
                how: how.to_string(),
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
    fn a_corrupt_file_is_an_error_not_trust() {
        let data = tempfile::tempdir().unwrap();
        std::fs::write(data.path().join(FILE_NAME), "{not json").unwrap();
        let e = TrustStore::new(data.path())
            .get(Path::new("/w"))
            .unwrap_err();
        assert!(e.to_string().contains("corrupt"), "{e}");
    }
}
