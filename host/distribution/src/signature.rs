//! Publisher signatures: minisign (Ed25519) signatures over a plugin's bytes, and the publisher
//! keys the user trusts.
//!
//! Trusted keys are minisign public key files kept in `<data>/keys/`, one per key, named by key
//! ID; `rawko plugin keys add|list|remove` manages them and `--trusted-key FILE` adds one for a
//! single command. A signature is checked against the trusted key with its key ID: a signature by
//! a key the user does not trust proves nothing and counts as no signature, while a signature
//! that does not verify under a trusted key means the bytes were changed and is always refused.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Largest `.minisig` or `.pub` file read.
pub const MAX_KEY_FILE: usize = 16 * 1024;

/// Who signed an installed plugin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Signer {
    /// The minisign key ID in uppercase hex, as minisign prints it.
    pub key_id: String,
    /// The signature's trusted comment (signed along with the file).
    pub trusted_comment: String,
}

/// A public key the user trusts.
#[derive(Debug, Clone)]
pub struct TrustedKey {
    pub key_id: String,
    /// The key file's untrusted comment, for listing.
    pub comment: String,
    key: minisign_verify::PublicKey,
    /// The key's base64 line.
    b64: String,
    /// The key file, if it is one kept in the data directory.
    pub path: Option<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum SignatureError {
    #[error("{what} is not a minisign {kind}: {message}")]
    Malformed {
        what: String,
        kind: &'static str,
        message: String,
    },
    #[error(
        "the signature by trusted key {key_id} does not match the plugin's bytes: the file was changed after it was signed, or the signature is for another file"
    )]
    Invalid { key_id: String },
    #[error("{0}")]
    Io(String),
}

/// A parsed signature and the key ID it names.
#[derive(Clone)]
pub struct Signature {
    pub key_id: String,
    sig: minisign_verify::Signature,
}

impl std::fmt::Debug for Signature {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signature")
            .field("key_id", &self.key_id)
            .finish()
    }
}

impl Signature {
    /// Parse the text of a `.minisig` file; `what` names it in errors.
    pub fn parse(text: &str, what: &str) -> Result<Signature, SignatureError> {
        let malformed = |message: String| SignatureError::Malformed {
            what: what.to_string(),
            kind: "signature",
            message,
        };
        if text.len() > MAX_KEY_FILE {
            return Err(malformed("too large".into()));
        }
        let sig = minisign_verify::Signature::decode(text).map_err(|e| malformed(e.to_string()))?;
        let line = text.lines().nth(1).unwrap_or_default();
        let key_id = key_id_of(line).ok_or_else(|| malformed("no key ID".into()))?;
        Ok(Signature { key_id, sig })
    }
}

impl TrustedKey {
    /// Parse the text of a minisign public key file (`minisign.pub`), or a bare base64 key.
    pub fn parse(text: &str, what: &str) -> Result<TrustedKey, SignatureError> {
        let malformed = |message: String| SignatureError::Malformed {
            what: what.to_string(),
            kind: "public key",
            message,
        };
        if text.len() > MAX_KEY_FILE {
            return Err(malformed("too large".into()));
        }
        let lines: Vec<&str> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        let (comment, b64) = match lines.as_slice() {
            [b64] => ("", *b64),
            [comment, b64, ..] => (
                comment
                    .strip_prefix("untrusted comment:")
                    .unwrap_or(comment)
                    .trim(),
                *b64,
            ),
            [] => return Err(malformed("empty".into())),
        };
        let key =
            minisign_verify::PublicKey::from_base64(b64).map_err(|e| malformed(e.to_string()))?;
        let key_id = key_id_of(b64).ok_or_else(|| malformed("no key ID".into()))?;
        Ok(TrustedKey {
            key_id,
            comment: comment.to_string(),
            key,
            b64: b64.to_string(),
            path: None,
        })
    }

    /// Read a key file.
    pub fn read(path: &Path) -> Result<TrustedKey, SignatureError> {
        let text = read_small(path)?;
        let mut key = TrustedKey::parse(&text, &path.display().to_string())?;
        key.path = Some(path.to_path_buf());
        Ok(key)
    }

    /// The key file text to store.
    fn file_text(&self) -> String {
        let comment = if self.comment.is_empty() {
            format!("minisign public key {}", self.key_id)
        } else {
            self.comment.clone()
        };
        format!("untrusted comment: {comment}\n{}\n", self.b64)
    }
}

/// Read a small text file (a key or a signature).
pub fn read_small(path: &Path) -> Result<String, SignatureError> {
    let meta = std::fs::metadata(path)
        .map_err(|e| SignatureError::Io(format!("{}: {e}", path.display())))?;
    if meta.len() > MAX_KEY_FILE as u64 {
        return Err(SignatureError::Io(format!(
            "{}: {} bytes is too large for a minisign file",
            path.display(),
            meta.len()
        )));
    }
    std::fs::read_to_string(path)
        .map_err(|e| SignatureError::Io(format!("{}: {e}", path.display())))
}

/// The outcome of checking a plugin's signature against the trusted keys.
#[derive(Debug)]
pub enum Verdict {
    /// Signed by a trusted key, and the signature holds.
    Verified(Signer),
    /// Signed, but by a key the user has not said to trust.
    UntrustedKey(String),
    /// No signature came with the plugin.
    Unsigned,
}

/// Check `sig` over `bytes` against `keys`.
pub fn verify(
    bytes: &[u8],
    sig: Option<&Signature>,
    keys: &[TrustedKey],
) -> Result<Verdict, SignatureError> {
    let Some(sig) = sig else {
        return Ok(Verdict::Unsigned);
    };
    let Some(key) = keys.iter().find(|k| k.key_id == sig.key_id) else {
        return Ok(Verdict::UntrustedKey(sig.key_id.clone()));
    };
    // Legacy (non-prehashed) signatures are refused: current minisign never makes them.
    key.key
        .verify(bytes, &sig.sig, false)
        .map_err(|_| SignatureError::Invalid {
            key_id: key.key_id.clone(),
        })?;
    Ok(Verdict::Verified(Signer {
        key_id: key.key_id.clone(),
        trusted_comment: sig.sig.trusted_comment().to_string(),
    }))
}

/// The keys kept in `<data>/keys`.
#[derive(Debug, Clone)]
pub struct KeyRing {
    dir: PathBuf,
}

impl KeyRing {
    pub fn new(data_dir: &Path) -> KeyRing {
        KeyRing {
            dir: data_dir.join("keys"),
        }
    }

    /// Every trusted key; an unreadable key file is reported and skipped.
    pub fn keys(&self) -> Vec<TrustedKey> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut keys: Vec<TrustedKey> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "pub"))
            .filter_map(|p| match TrustedKey::read(&p) {
                Ok(k) => Some(k),
                Err(e) => {
                    tracing::warn!("ignoring trusted key file: {e}");
                    None
                }
            })
            .collect();
        keys.sort_by(|a, b| a.key_id.cmp(&b.key_id));
        keys
    }

    /// Trust the key in `text` (a minisign public key file); returns it.
    pub fn add(&self, text: &str, what: &str) -> Result<TrustedKey, SignatureError> {
        let mut key = TrustedKey::parse(text, what)?;
        let io = |e: std::io::Error| SignatureError::Io(format!("{}: {e}", self.dir.display()));
        std::fs::create_dir_all(&self.dir).map_err(io)?;
        let path = self.dir.join(format!("{}.pub", key.key_id));
        let mut tmp = tempfile::NamedTempFile::new_in(&self.dir).map_err(io)?;
        let stored = key.file_text();
        tmp.write_all(stored.as_bytes()).map_err(io)?;
        tmp.as_file().sync_all().map_err(io)?;
        tmp.persist(&path).map_err(|e| io(e.error))?;
        key.path = Some(path);
        Ok(key)
    }

    /// Stop trusting the key with ID `key_id` (case-insensitive); false if there was none.
    pub fn remove(&self, key_id: &str) -> Result<bool, SignatureError> {
        let id = match u64::from_str_radix(key_id.trim(), 16) {
            Ok(n) if !key_id.trim().starts_with('+') => format!("{n:X}"),
            _ => {
                return Err(SignatureError::Io(format!(
                    "`{key_id}` is not a key ID (up to 16 hex digits, as `rawko plugin keys list` shows)"
                )));
            }
        };
        match std::fs::remove_file(self.dir.join(format!("{id}.pub"))) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(SignatureError::Io(e.to_string())),
        }
    }
}

/// The key ID in a base64 minisign key or signature line: bytes 2..10, shown as minisign shows it
/// (a little-endian 64-bit number in uppercase hex, without leading zeros).
fn key_id_of(b64: &str) -> Option<String> {
    let bin = base64_decode(b64.trim())?;
    let id: [u8; 8] = bin.get(2..10)?.try_into().ok()?;
    Some(format!("{:X}", u64::from_le_bytes(id)))
}

/// Standard base64 with padding; `None` on anything else.
pub(crate) fn base64_decode(s: &str) -> Option<Vec<u8>> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.decode(s).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_decodes_known_vectors() {
        assert_eq!(base64_decode("Zm9vYmFy").unwrap(), b"foobar");
        assert_eq!(base64_decode("Zm9vYg==").unwrap(), b"foob");
        assert_eq!(base64_decode("").unwrap(), b"");
        assert!(base64_decode("a*b").is_none());
    }
}
