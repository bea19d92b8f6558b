//! Compiled plugins, cached on disk.
//!
//! Compiling a component takes seconds; loading a compiled one takes a millisecond. Entries are
//! keyed by the SHA-256 of the component's bytes and by the engine's compatibility hash (wasmtime
//! version, target, settings), so a changed plugin or a different rawko never loads a stale
//! entry. Entries are written to a temporary file and renamed into place, so a crash leaves no
//! half-written entry, and a corrupt or incompatible entry is recompiled rather than trusted.
//! What a plugin says about itself at load time (its tool list) is cached beside it.

use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

/// Lowercase hex SHA-256 of `bytes`.
fn sha256_hex(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}

/// Digests known before the bytes are seen: the plugins embedded in rawko, hashed by its build
/// script, so a start of rawko does not hash megabytes of its own plugins again. Keyed by where
/// the bytes are: a `'static` shared slice is never freed or changed, so its place names its
/// content for as long as the process runs.
static VOUCHED: std::sync::Mutex<Vec<(usize, usize, &'static str)>> =
    std::sync::Mutex::new(Vec::new());

/// Record that `sha256_hex` is the SHA-256 of `wasm`, for [`ComponentCache::load`] to use
/// instead of hashing those bytes. (Checked in debug builds.)
pub fn vouch(wasm: &'static [u8], sha256_hex: &'static str) {
    let mut known = VOUCHED.lock().unwrap_or_else(|e| e.into_inner());
    known.push((wasm.as_ptr() as usize, wasm.len(), sha256_hex));
}

/// The digest of `wasm`: vouched for, else computed.
fn digest_of(wasm: &[u8]) -> String {
    let place = (wasm.as_ptr() as usize, wasm.len());
    let known = VOUCHED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .find(|(p, n, _)| (*p, *n) == place)
        .map(|(_, _, d)| d.to_string());
    match known {
        Some(d) => {
            debug_assert_eq!(d, sha256_hex(wasm), "a vouched digest is wrong");
            d
        }
        None => sha256_hex(wasm),
    }
}

/// A component ready to instantiate.
pub struct Compiled {
    pub component: Component,
    /// SHA-256 of the component's bytes.
    pub digest: String,
    /// The cache key: digest and engine settings.
    pub key: String,
    /// Whether it came from the cache rather than the compiler.
    pub from_cache: bool,
}

/// The on-disk cache, or none at all.
#[derive(Debug, Clone)]
pub struct ComponentCache {
    dir: Option<PathBuf>,
    engine_hash: String,
}

impl ComponentCache {
    /// A cache under `dir` (created on first write), or no caching when `dir` is `None`.
    pub fn new(engine: &Engine, dir: Option<PathBuf>) -> Self {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut h);
        env!("CARGO_PKG_VERSION").hash(&mut h);
        ComponentCache {
            dir: dir.map(|d| d.join("components")),
            engine_hash: format!("{:016x}", h.finish()),
        }
    }

    /// Compile `wasm`, or load it compiled from the cache.
    pub fn load(&self, engine: &Engine, wasm: &[u8]) -> wasmtime::Result<Compiled> {
        let digest = digest_of(wasm);
        let key = format!("{digest}-{}", self.engine_hash);
        if let Some(path) = self.entry(&key, "cwasm")
            && path.exists()
        {
            // SAFETY: the entry was written by `Component::serialize` from this same engine
            // configuration (the key says so), into the user's own cache directory, and was
            // renamed into place only once complete. wasmtime checks the header and version
            // again and refuses anything that does not match.
            match unsafe { Component::deserialize_file(engine, &path) } {
                Ok(component) => {
                    return Ok(Compiled {
                        component,
                        digest,
                        key,
                        from_cache: true,
                    });
                }
                Err(e) => tracing::warn!(
                    "ignoring unusable cache entry {}: {e:#}; recompiling",
                    path.display()
                ),
            }
        }
        let started = std::time::Instant::now();
        let component = Component::new(engine, wasm)?;
        tracing::debug!(
            digest = %&digest[..12],
            elapsed_ms = started.elapsed().as_millis() as u64,
            "compiled plugin"
        );
        if let Some(path) = self.entry(&key, "cwasm") {
            match component.serialize() {
                Ok(bytes) => self.write_atomically(&path, &bytes),
                Err(e) => tracing::warn!("cannot serialize compiled plugin: {e:#}"),
            }
        }
        Ok(Compiled {
            component,
            digest,
            key,
            from_cache: false,
        })
    }

    /// Read the metadata cached beside entry `key` under `name`, if any.
    pub fn read_meta(&self, key: &str, name: &str) -> Option<Vec<u8>> {
        std::fs::read(self.entry(key, name)?).ok()
    }

    /// Cache metadata beside entry `key` under `name`.
    pub fn write_meta(&self, key: &str, name: &str, bytes: &[u8]) {
        if let Some(path) = self.entry(key, name) {
            self.write_atomically(&path, bytes);
        }
    }

    fn entry(&self, key: &str, ext: &str) -> Option<PathBuf> {
        Some(self.dir.as_ref()?.join(format!("{key}.{ext}")))
    }

    /// Write via a temporary file and a rename. A failure only costs a recompilation later, so
    /// it is logged rather than returned.
    fn write_atomically(&self, path: &Path, bytes: &[u8]) {
        let result = (|| -> std::io::Result<()> {
            let dir = path.parent().unwrap_or(Path::new("."));
            std::fs::create_dir_all(dir)?;
            let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
            tmp.write_all(bytes)?;
            tmp.as_file().sync_all()?;
            tmp.persist(path).map_err(|e| e.error)?;
            Ok(())
        })();
        if let Err(e) = result {
            tracing::warn!("cannot write cache entry {}: {e}", path.display());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A vouched digest is used for exactly those bytes (in place), other bytes are hashed.
    #[test]
    fn vouched_digests_are_used_for_their_bytes_only() {
        static BYTES: &[u8] = b"vouched bytes";
        let right = sha256_hex(BYTES);
        vouch(BYTES, Box::leak(right.clone().into_boxed_str()));
        assert_eq!(digest_of(BYTES), right);
        // The same content elsewhere is hashed, and comes to the same.
        let copy = BYTES.to_vec();
        assert_eq!(digest_of(&copy), right);
        // A prefix at the same place is other bytes.
        assert_eq!(digest_of(&BYTES[..3]), sha256_hex(b"vou"));
    }

    #[test]
    fn sha256_matches_a_known_vector() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
