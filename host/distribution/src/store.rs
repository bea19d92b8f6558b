//! Installed plugins: the lockfile and the component files, in `<data>/plugins/`.
//!
//! `plugins.lock` (JSON) is the single source of truth: a plugin is installed exactly when the
//! lockfile names it. Components are stored by digest (`blobs/<sha256>.wasm`). An install writes
//! the component to a temporary file, syncs it and renames it into place, and only then replaces
//! the lockfile the same way; so a crash, a full disk or Ctrl-C at any point leaves either the old
//! lockfile or the new one, never half of either, and at worst an unreferenced file that the next
//! change sweeps away. Changes hold an exclusive lock on `plugins/.lock`, so two rawko processes
//! never interleave their edits. Loading a plugin checks its bytes against the lockfile's digest
//! every time, so a component changed on disk is refused rather than run.
//!
//! This is also the registry other parts of rawko use to find installed plugins: by name, their
//! bytes, kinds and grants ([`PluginStore::installed`], [`Installed::wasm`]).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::manifest::{Grant, Kind};
use super::signature::Signer;
use crate::sha256_hex;

/// The lockfile's format version.
const LOCK_VERSION: u32 = 1;
const LOCK_FILE: &str = "plugins.lock";

/// One installed plugin, as the lockfile records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    pub version: String,
    pub kinds: Vec<Kind>,
    pub description: String,
    /// `sha256:<hex>` of the component's bytes.
    pub digest: String,
    /// What the user installed it from (a path, a URL, an OCI reference).
    pub source: String,
    /// The exact thing fetched, when the source can move (an OCI tag's manifest digest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved: Option<String>,
    /// Who signed it, when it was signed by a trusted key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signer: Option<Signer>,
    /// What the plugin asked for.
    pub requested: Vec<Grant>,
    /// What the user granted: a subset of `requested`.
    pub grants: Vec<Grant>,
    /// The `rawko:plugin` version it was built against.
    pub wit: String,
    /// Seconds since the Unix epoch.
    pub installed_at: u64,
}

impl Entry {
    /// The hex digest, without the `sha256:` prefix.
    pub fn digest_hex(&self) -> &str {
        self.digest.strip_prefix("sha256:").unwrap_or(&self.digest)
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Lockfile {
    version: u32,
    #[serde(default)]
    plugins: BTreeMap<String, Entry>,
}

#[derive(Debug, thiserror::Error)]
pub enum PluginStoreError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{path}: {message}; fix or remove the file (removing it forgets every installed plugin)"
    )]
    Corrupt { path: PathBuf, message: String },
    #[error(
        "installed plugin {name}: its component {path} does not match the digest in the lockfile ({expected}); reinstall it"
    )]
    Tampered {
        name: String,
        path: PathBuf,
        expected: String,
    },
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> PluginStoreError + '_ {
    move |source| PluginStoreError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The installed plugins in one data directory.
#[derive(Debug, Clone)]
pub struct PluginStore {
    dir: PathBuf,
}

/// An installed plugin, by name.
#[derive(Debug, Clone)]
pub struct Installed {
    pub name: String,
    pub entry: Entry,
    path: PathBuf,
}

impl Installed {
    /// The component's bytes, checked against the lockfile's digest.
    pub fn wasm(&self) -> Result<Vec<u8>, PluginStoreError> {
        let bytes = std::fs::read(&self.path).map_err(io_err(&self.path))?;
        if sha256_hex(&bytes) != self.entry.digest_hex() {
            return Err(PluginStoreError::Tampered {
                name: self.name.clone(),
                path: self.path.clone(),
                expected: self.entry.digest.clone(),
            });
        }
        Ok(bytes)
    }

    pub fn kinds(&self) -> &[Kind] {
        &self.entry.kinds
    }

    /// What the user granted this plugin.
    pub fn grants(&self) -> &[Grant] {
        &self.entry.grants
    }
}

/// An exclusive hold on the store, for changing it.
#[derive(Debug)]
pub struct PluginStoreLock {
    _file: File,
}

impl PluginStore {
    pub fn new(data_dir: &Path) -> PluginStore {
        PluginStore {
            dir: data_dir.join("plugins"),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn lock_path(&self) -> PathBuf {
        self.dir.join(LOCK_FILE)
    }

    fn blob_path(&self, hex: &str) -> PathBuf {
        self.dir.join("blobs").join(format!("{hex}.wasm"))
    }

    /// Every installed plugin, by name.
    pub fn installed(&self) -> Result<Vec<Installed>, PluginStoreError> {
        Ok(self
            .read()?
            .plugins
            .into_iter()
            .map(|(name, entry)| Installed {
                path: self.blob_path(entry.digest_hex()),
                name,
                entry,
            })
            .collect())
    }

    /// The installed plugin `name`, if any.
    pub fn get(&self, name: &str) -> Result<Option<Installed>, PluginStoreError> {
        Ok(self.installed()?.into_iter().find(|p| p.name == name))
    }

    fn read(&self) -> Result<Lockfile, PluginStoreError> {
        let path = self.lock_path();
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Lockfile {
                    version: LOCK_VERSION,
                    plugins: BTreeMap::new(),
                });
            }
            Err(e) => return Err(io_err(&path)(e)),
        };
        let lock: Lockfile =
            serde_json::from_str(&text).map_err(|e| PluginStoreError::Corrupt {
                path: path.clone(),
                message: e.to_string(),
            })?;
        if lock.version != LOCK_VERSION {
            return Err(PluginStoreError::Corrupt {
                path,
                message: format!(
                    "lockfile version {} is not one this rawko reads ({LOCK_VERSION})",
                    lock.version
                ),
            });
        }
        Ok(lock)
    }

    /// Take the store's exclusive lock, waiting for another rawko to finish its change.
    pub fn lock(&self) -> Result<PluginStoreLock, PluginStoreError> {
        std::fs::create_dir_all(&self.dir).map_err(io_err(&self.dir))?;
        let path = self.dir.join(".lock");
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(io_err(&path))?;
        file.lock().map_err(io_err(&path))?;
        Ok(PluginStoreLock { _file: file })
    }

    /// Install `wasm` as plugin `name` described by `entry`, replacing any earlier version:
    /// component first, lockfile last, each by a synced rename.
    pub fn commit(
        &self,
        _lock: &PluginStoreLock,
        name: &str,
        wasm: &[u8],
        entry: Entry,
    ) -> Result<(), PluginStoreError> {
        debug_assert_eq!(entry.digest_hex(), sha256_hex(wasm));
        // Written even when a file of that name exists: it may be one changed on disk, which
        // a reinstall must replace.
        write_atomically(&self.blob_path(entry.digest_hex()), wasm)?;
        let mut lock = self.read()?;
        lock.plugins.insert(name.to_string(), entry);
        self.write(&lock)?;
        self.sweep(&lock);
        Ok(())
    }

    /// Forget plugin `name`; false if it was not installed.
    pub fn remove(&self, _lock: &PluginStoreLock, name: &str) -> Result<bool, PluginStoreError> {
        let mut lock = self.read()?;
        if lock.plugins.remove(name).is_none() {
            return Ok(false);
        }
        self.write(&lock)?;
        self.sweep(&lock);
        Ok(true)
    }

    /// Delete what an interrupted change left behind: temporary files and components no
    /// lockfile entry names. Failures only cost disk space, so they are logged.
    pub fn sweep_orphans(&self, _lock: &PluginStoreLock) {
        if let Ok(lock) = self.read() {
            self.sweep(&lock);
        }
    }

    fn sweep(&self, lock: &Lockfile) {
        let keep: std::collections::HashSet<String> = lock
            .plugins
            .values()
            .map(|e| format!("{}.wasm", e.digest_hex()))
            .collect();
        for dir in [self.dir.clone(), self.dir.join("blobs")] {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                let orphan = name.starts_with(".tmp")
                    || (dir.ends_with("blobs") && name.ends_with(".wasm") && !keep.contains(&name));
                if orphan && let Err(err) = std::fs::remove_file(e.path()) {
                    tracing::warn!("cannot remove {}: {err}", e.path().display());
                }
            }
        }
    }

    fn write(&self, lock: &Lockfile) -> Result<(), PluginStoreError> {
        let mut text = serde_json::to_string_pretty(lock).expect("the lockfile serializes");
        text.push('\n');
        write_atomically(&self.lock_path(), text.as_bytes())
    }
}

/// Write `bytes` to `path` through a synced temporary file in the same directory and a rename,
/// then sync the directory so the rename itself survives a power cut.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), PluginStoreError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io_err(dir))?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".tmp")
        .tempfile_in(dir)
        .map_err(io_err(dir))?;
    tmp.write_all(bytes).map_err(io_err(path))?;
    tmp.as_file().sync_all().map_err(io_err(path))?;
    tmp.persist(path).map_err(|e| io_err(path)(e.error))?;
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(wasm: &[u8]) -> Entry {
        Entry {
            version: "1.0.0".into(),
            kinds: vec![Kind::Tool],
            description: "d".into(),
            digest: format!("sha256:{}", sha256_hex(wasm)),
            source: "x.wasm".into(),
            resolved: None,
            signer: None,
            requested: vec![Grant::FsRead(".".into())],
            grants: vec![],
            wit: "0.1.0".into(),
            installed_at: 0,
        }
    }

    #[test]
    fn commit_replace_remove_and_sweep() {
        let data = tempfile::tempdir().unwrap();
        let store = PluginStore::new(data.path());
        assert!(store.installed().unwrap().is_empty());
        let lock = store.lock().unwrap();
        store.commit(&lock, "a", b"one", entry(b"one")).unwrap();
        assert_eq!(store.get("a").unwrap().unwrap().wasm().unwrap(), b"one");

        // A leftover temporary file from a killed install is swept by the next change.
        std::fs::write(store.dir().join("blobs").join(".tmpXYZ"), b"half").unwrap();
        store.commit(&lock, "a", b"two", entry(b"two")).unwrap();
        let blobs: Vec<_> = std::fs::read_dir(store.dir().join("blobs"))
            .unwrap()
            .collect();
        assert_eq!(blobs.len(), 1, "only the current component is kept");

        // A component changed on disk is refused.
        let installed = store.get("a").unwrap().unwrap();
        std::fs::write(&installed.path, b"evil").unwrap();
        assert!(matches!(
            installed.wasm(),
            Err(PluginStoreError::Tampered { .. })
        ));
        // Reinstalling, as the error advises, puts the right bytes back.
        store.commit(&lock, "a", b"two", entry(b"two")).unwrap();
        assert_eq!(installed.wasm().unwrap(), b"two");

        assert!(store.remove(&lock, "a").unwrap());
        assert!(!store.remove(&lock, "a").unwrap());
        assert!(store.installed().unwrap().is_empty());
    }

    #[test]
    fn a_corrupt_lockfile_is_an_error_not_an_empty_store() {
        let data = tempfile::tempdir().unwrap();
        let store = PluginStore::new(data.path());
        std::fs::create_dir_all(store.dir()).unwrap();
        std::fs::write(store.lock_path(), "{").unwrap();
        assert!(matches!(
            store.installed(),
            Err(PluginStoreError::Corrupt { .. })
        ));
    }
}
