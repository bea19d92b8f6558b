//! Plugin distribution: installing plugins written by strangers without trusting them.
//!
//! A plugin arrives from a file, an HTTPS URL or an OCI registry ([`Source`]); its bytes are
//! checked against the digest the user or the lockfile pins, its signature against the publisher
//! keys the user trusts ([`signature`]), and its manifest against what the component really
//! imports and exports ([`manifest`]). The user then grants some or all of the capabilities it
//! asks for, and the plugin is committed to the [`store`] atomically. From then on it runs with
//! exactly those grants, intersected with what each call is given.

#[cfg(feature = "net")]
pub mod fetch;
pub mod manifest;
pub mod oci;
pub mod scaffold;
pub mod signature;
pub mod store;

use std::path::{Path, PathBuf};

#[cfg(feature = "net")]
use reqwest::Url;

pub use manifest::{ComponentInfo, Grant, Kind, Manifest, ManifestError, SECTION};
pub use store::{Entry, Installed, PluginStore, PluginStoreError};

#[cfg(feature = "net")]
use fetch::FetchError;
use rawko_capability::{Access, FsGrants};

/// The largest plugin accepted, from anywhere. The first-party tools are about 1 MiB.
pub const MAX_PLUGIN_BYTES: u64 = 256 << 20;

/// The largest small document accepted from a server: an OCI manifest or config, a signature,
/// a token response.
pub const MAX_DOC_BYTES: u64 = 4 << 20;

#[cfg(feature = "net")]
/// Where a plugin comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A `.wasm` file, absolute.
    File(PathBuf),
    /// An `https://` URL (or `http://` to this machine).
    Url(Url),
    /// An OCI reference.
    Oci(oci::Reference),
}

/// A SOURCE argument that names no plugin rawko can fetch.
#[cfg(feature = "net")]
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error(transparent)]
    Reference(#[from] oci::ReferenceError),
    #[error("`{text}` is not a URL: {source}")]
    NotUrl {
        text: String,
        #[source]
        source: url::ParseError,
    },
    #[error(transparent)]
    Insecure(#[from] FetchError),
    #[error(
        "`{0}://` sources are not supported: give a .wasm file, an https:// URL or an oci:// reference"
    )]
    Scheme(String),
}

#[cfg(feature = "net")]
impl Source {
    /// Parse a SOURCE argument; relative paths are relative to `cwd`.
    pub fn parse(s: &str, cwd: &Path) -> Result<Source, SourceError> {
        if s.starts_with("oci://") {
            return Ok(Source::Oci(oci::Reference::parse(s)?));
        }
        if s.starts_with("https://") || s.starts_with("http://") {
            let url = Url::parse(s).map_err(|source| SourceError::NotUrl {
                text: s.to_string(),
                source,
            })?;
            fetch::check_scheme(&url)?;
            return Ok(Source::Url(url));
        }
        if let Some((scheme, _)) = s.split_once("://") {
            return Err(SourceError::Scheme(scheme.to_string()));
        }
        let path = cwd.join(s);
        Ok(Source::File(path))
    }
}

#[cfg(feature = "net")]
impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::File(p) => write!(f, "{}", p.display()),
            Source::Url(u) => write!(f, "{u}"),
            Source::Oci(r) => write!(f, "{r}"),
        }
    }
}

#[cfg(feature = "net")]
/// A plugin's bytes and whatever came with them.
#[derive(Debug)]
pub struct Fetched {
    pub wasm: Vec<u8>,
    /// The `.minisig` text found beside the plugin, if any.
    pub signature: Option<String>,
    /// Where the signature came from, for messages.
    pub signature_origin: Option<String>,
    /// The manifest digest an OCI tag resolved to.
    pub resolved: Option<String>,
}

#[cfg(feature = "net")]
/// Fetch a plugin. A signature is looked for beside it: `FILE.minisig`, `URL.minisig`, or the
/// OCI manifest's signature annotation.
pub async fn fetch(source: &Source) -> Result<Fetched, FetchError> {
    match source {
        Source::File(path) => {
            let wasm = read_limited(path, MAX_PLUGIN_BYTES)?;
            let sig_path = with_suffix(path, ".minisig");
            let signature = match rawko_capability::fs::read_regular(&sig_path, 64 << 10) {
                Ok(s) => Some(String::from_utf8_lossy(&s).into_owned()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(e) => return Err(FetchError::Other(format!("{}: {e}", sig_path.display()))),
            };
            Ok(Fetched {
                wasm,
                signature_origin: signature.as_ref().map(|_| sig_path.display().to_string()),
                signature,
                resolved: None,
            })
        }
        Source::Url(url) => {
            let client = fetch::client()?;
            let wasm = fetch::get(&client, url, MAX_PLUGIN_BYTES, Some("downloading"), false)
                .await?
                .unwrap_or_default();
            let sig_url = Url::parse(&format!("{url}.minisig"))
                .map_err(|e| FetchError::Other(format!("{url}.minisig: {e}")))?;
            let signature = fetch::get(&client, &sig_url, MAX_DOC_BYTES, None, true)
                .await?
                .map(|b| String::from_utf8_lossy(&b).into_owned());
            Ok(Fetched {
                wasm,
                signature_origin: signature.as_ref().map(|_| sig_url.to_string()),
                signature,
                resolved: None,
            })
        }
        Source::Oci(reference) => {
            let mut client = oci::Client::new(reference)?;
            let pulled = client.pull(reference).await?;
            Ok(Fetched {
                wasm: pulled.wasm,
                signature_origin: pulled
                    .signature
                    .as_ref()
                    .map(|_| format!("{reference} (manifest annotation)")),
                signature: pulled.signature,
                resolved: Some(reference.pinned(&pulled.manifest_digest)),
            })
        }
    }
}

#[cfg(feature = "net")]
fn read_limited(path: &Path, limit: u64) -> Result<Vec<u8>, FetchError> {
    let err = |e: std::io::Error| FetchError::Other(format!("{}: {e}", path.display()));
    let meta = std::fs::metadata(path).map_err(err)?;
    if meta.len() > limit {
        return Err(FetchError::TooLarge {
            url: path.display().to_string(),
            limit,
        });
    }
    rawko_capability::fs::read_regular(path, limit).map_err(err)
}

/// `path` with `suffix` appended to its file name.
pub fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_os_string();
    s.push(suffix);
    PathBuf::from(s)
}

/// A fetched component, read and checked: its manifest agrees with its imports and exports.
#[derive(Debug)]
pub struct Examined {
    pub info: ComponentInfo,
    pub manifest: Manifest,
    /// The `rawko:plugin` version it was built against.
    pub wit: semver::Version,
    /// `sha256:<hex>`.
    pub digest: String,
}

/// Read `wasm`'s manifest and hold it against the component.
pub fn examine(wasm: &[u8]) -> Result<Examined, ManifestError> {
    let info = ComponentInfo::read(wasm)?;
    let manifest = info.manifest()?;
    let wit = info.check(&manifest)?;
    Ok(Examined {
        info,
        manifest,
        wit,
        digest: format!("sha256:{}", sha256_hex(wasm)),
    })
}

/// `component` with `manifest` (the text of a `rawko-plugin.yaml`) embedded as its `rawko-manifest`
/// custom section: what `rawko_plugin_sdk::manifest!` does for Rust plugins, for a component
/// from any toolchain (componentize-py, jco, wit-bindgen for C or Go). The manifest is checked
/// and held against the component's imports and exports first; a component that already
/// carries one is refused (pack the component as its toolchain built it).
pub fn pack(component: &[u8], manifest: &[u8]) -> Result<Vec<u8>, ManifestError> {
    let mut info = ComponentInfo::read(component)?;
    if info.manifest.is_some() {
        return Err(ManifestError::Duplicate(2));
    }
    let parsed = Manifest::parse(manifest)?;
    info.check(&parsed)?;
    info.manifest = Some(manifest.to_vec());
    let mut out = component.to_vec();
    let mut body = Vec::new();
    leb128(&mut body, SECTION.len());
    body.extend_from_slice(SECTION.as_bytes());
    body.extend_from_slice(manifest);
    out.push(0); // a custom section
    leb128(&mut out, body.len());
    out.extend_from_slice(&body);
    // What install will read back.
    examine(&out)?;
    Ok(out)
}

/// Append `n` as an unsigned LEB128 number, as the binary format writes sizes.
fn leb128(out: &mut Vec<u8>, mut n: usize) {
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// A text given as a digest that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a SHA-256 digest (64 hex digits, optionally after `sha256:`)")]
pub struct DigestError(pub String);

/// Normalize a digest given by a user: `sha256:HEX` or bare `HEX`, any case.
pub fn parse_digest(s: &str) -> Result<String, DigestError> {
    let hex = s
        .trim()
        .strip_prefix("sha256:")
        .unwrap_or(s.trim())
        .to_ascii_lowercase();
    if hex.len() == 64 && hex.chars().all(|c| c.is_ascii_hexdigit()) {
        Ok(format!("sha256:{hex}"))
    } else {
        Err(DigestError(s.to_string()))
    }
}

/// A granted path in its plain form: `.` and `..` resolved lexically, no trailing `/`; `.` for
/// the workspace (the one lexical normaliser, shared with the guest SDK and the shell resolver).
pub fn normalize_rel(p: &str) -> String {
    rawko_plugin_sdk::path::normalize(Path::new(p))
        .to_string_lossy()
        .into_owned()
}

/// The filesystem an installed plugin may ever reach in `workspace`: its `fs.read` and
/// `fs.write` grants as directories. Granted paths that do not exist there are left out.
pub fn fs_limit(grants: &[Grant], workspace: &Path) -> FsGrants {
    let mut limit = FsGrants::none();
    for g in grants {
        let (path, access) = match g {
            Grant::FsRead(p) => (p, Access::ReadOnly),
            Grant::FsWrite(p) => (p, Access::ReadWrite),
            _ => continue,
        };
        if let Err(e) = limit.grant(workspace, Path::new(path), access) {
            tracing::debug!("grant {g} does not apply here: {e}");
        }
    }
    limit
}

/// The lowercase hex SHA-256 of `bytes`: how plugins, lockfile entries and OCI blobs are named.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    format!("{:x}", Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    #[test]
    fn sizes_are_written_as_leb128() {
        for (n, bytes) in [
            (0usize, vec![0u8]),
            (127, vec![0x7f]),
            (128, vec![0x80, 0x01]),
            (624_485, vec![0xe5, 0x8e, 0x26]),
        ] {
            let mut out = Vec::new();
            super::leb128(&mut out, n);
            assert_eq!(out, bytes, "{n}");
        }
    }

    #[test]
    fn a_core_module_or_junk_cannot_be_packed() {
        assert!(super::pack(b"not wasm", b"name: x").is_err());
        // `(module)`: a core module, not a component.
        let module = [0, b'a', b's', b'm', 1, 0, 0, 0];
        assert!(matches!(
            super::pack(&module, b"name: x"),
            Err(ManifestError::CoreModule)
        ));
    }

    use super::*;

    #[test]
    fn sources_parse() {
        let cwd = Path::new("/w");
        assert_eq!(
            Source::parse("p.wasm", cwd).unwrap(),
            Source::File("/w/p.wasm".into())
        );
        assert!(matches!(
            Source::parse("https://example.com/p.wasm", cwd).unwrap(),
            Source::Url(_)
        ));
        assert!(Source::parse("http://example.com/p.wasm", cwd).is_err());
        assert!(Source::parse("http://127.0.0.1:8080/p.wasm", cwd).is_ok());
        assert!(Source::parse("ftp://example.com/p.wasm", cwd).is_err());
        assert!(matches!(
            Source::parse("oci://127.0.0.1:5000/a/b:1", cwd).unwrap(),
            Source::Oci(_)
        ));
    }

    #[test]
    fn digests_and_paths_normalize() {
        let hex = "AB".repeat(32);
        assert_eq!(
            parse_digest(&format!("sha256:{hex}")).unwrap(),
            format!("sha256:{}", hex.to_lowercase())
        );
        assert!(parse_digest("abc").is_err());
        assert_eq!(normalize_rel("./"), ".");
        assert_eq!(normalize_rel("./src/"), "src");
        assert_eq!(normalize_rel("/abs/./x"), "/abs/x");
    }

    #[test]
    fn the_fs_limit_holds_only_fs_grants_that_exist() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        std::fs::create_dir(ws.join("src")).unwrap();
        let limit = fs_limit(
            &[
                Grant::FsRead(".".into()),
                Grant::FsWrite("src".into()),
                Grant::FsWrite("missing".into()),
                Grant::NetHttp("example.com".into()),
            ],
            &ws,
        );
        assert_eq!(limit.access(&ws.join("a")), Some(Access::ReadOnly));
        assert_eq!(limit.access(&ws.join("src/a")), Some(Access::ReadWrite));
        assert_eq!(limit.iter().count(), 2);
    }
}
