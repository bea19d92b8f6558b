//! Plugins in OCI registries: the part of the distribution API rawko needs, and the CNCF wasm
//! artifact layout.
//!
//! A plugin is pushed as an OCI image manifest with a config of type
//! `application/vnd.wasm.config.v0+json` and exactly one `application/wasm` layer, the component,
//! as other wasm tooling does, so either side can pull what the other pushed. A minisign
//! signature, when there is one, is published as an OCI 1.1 referrer of that manifest (artifact
//! type [`SIGNATURE_ARTIFACT_TYPE`], the `.minisig` text as its one layer), found through the
//! referrers API or, on registries without it, the fallback tag `sha256-<hex>`. A signature an
//! earlier rawko put in the manifest annotation [`SIGNATURE_ANNOTATION`] is still read.
//!
//! Registries that ask for authentication get it: a `Bearer` challenge is answered by fetching a
//! token from the realm it names (anonymously, or with `RAWKO_REGISTRY_USERNAME` /
//! `RAWKO_REGISTRY_PASSWORD`), a `Basic` one with those credentials. The credentials are the
//! registry's named by `RAWKO_REGISTRY_HOST` and go to that registry only (and to its token
//! realm when the realm is on the same site), never to another registry a reference names. Every manifest and blob is
//! checked against its digest; a tag is resolved to a manifest digest once and everything after
//! that is fetched by digest.
//!
//! This is rawko's own client rather than the `oci-client` crate because every request must go
//! through [`fetch`]'s hardened HTTP client, and `oci-client` builds its own: it follows redirects
//! from HTTPS to plain HTTP (reqwest's default policy), reads manifests, token responses and
//! error bodies without a size cap, and sends the registry credentials to whatever token realm a
//! registry names. None of these can be changed from outside that crate.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[cfg(feature = "net")]
mod client;
#[cfg(feature = "net")]
pub use client::{Artifact, Client, Pulled};

pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
pub const WASM_MEDIA_TYPE: &str = "application/wasm";
/// Layer type some older wasm tooling pushes; accepted when pulling.
const LEGACY_WASM_MEDIA_TYPE: &str = "application/vnd.wasm.content.layer.v1+wasm";
/// Layer type runwasi (containerd's wasm shims) pushes; accepted when pulling. wkg pushes
/// [`WASM_MEDIA_TYPE`]. Whatever the layer's type, only a component installs.
const RUNWASI_WASM_MEDIA_TYPE: &str =
    "application/vnd.bytecodealliance.wasm.component.layer.v0+wasm";
/// Manifest annotation holding the `.minisig` text (how earlier rawkos published signatures;
/// still read).
pub const SIGNATURE_ANNOTATION: &str = "dev.rawko.plugin.minisig";
/// The artifact type of a signature published as an OCI 1.1 referrer of the plugin's manifest:
/// one layer, the `.minisig` text.
pub const SIGNATURE_ARTIFACT_TYPE: &str = "application/vnd.dev.rawko.plugin.signature.v1+minisig";
/// The media type of that layer.
pub const SIGNATURE_LAYER_MEDIA_TYPE: &str = "application/vnd.dev.rawko.minisig.v1";
/// An image index (the referrers API's answer, and the fallback tag's content).
pub const INDEX_MEDIA_TYPE: &str = "application/vnd.oci.image.index.v1+json";
/// The empty config of an artifact that needs none.
pub const EMPTY_CONFIG_MEDIA_TYPE: &str = "application/vnd.oci.empty.v1+json";

/// The host of `registry` (`HOST`, `HOST:PORT`, `[V6]` or `[V6]:PORT`), without the port.
pub fn host_of_registry(registry: &str) -> &str {
    if registry.starts_with('[') {
        return registry.split_inclusive(']').next().unwrap_or(registry);
    }
    registry.split(':').next().unwrap_or(registry)
}

/// `oci://registry[:port]/repository[:tag][@sha256:digest]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    pub registry: String,
    pub repository: String,
    pub tag: Option<String>,
    pub digest: Option<String>,
    /// Reach the registry over plain HTTP although it is not on this machine
    /// (`--insecure-registry`). Registries on this machine always are.
    pub insecure: bool,
}

/// A text that is not an OCI reference, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{reference}` is not an OCI reference ({why}); write oci://registry/repository:tag or oci://registry/repository@sha256:DIGEST"
)]
pub struct ReferenceError {
    pub reference: String,
    pub why: &'static str,
}

impl Reference {
    /// Mark the reference insecure when its registry is one of `registries` (`HOST` or
    /// `HOST:PORT`, as written after `oci://`); whether it now is.
    pub fn allow_insecure(&mut self, registries: &[String]) -> bool {
        let host = host_of_registry(&self.registry);
        if registries
            .iter()
            .any(|r| r.eq_ignore_ascii_case(&self.registry) || r.eq_ignore_ascii_case(host))
        {
            self.insecure = true;
        }
        self.insecure
    }

    pub fn parse(s: &str) -> Result<Reference, ReferenceError> {
        let bad = |why: &'static str| ReferenceError {
            reference: s.to_string(),
            why,
        };
        let rest = s
            .strip_prefix("oci://")
            .ok_or_else(|| bad("no oci:// prefix"))?;
        let (registry, path) = rest.split_once('/').ok_or_else(|| bad("no repository"))?;
        if registry.is_empty() || registry.contains(['@', '?', '#']) {
            return Err(bad("no registry host"));
        }
        let (path, digest) = match path.split_once('@') {
            Some((p, d)) => (p, Some(d.to_string())),
            None => (path, None),
        };
        // A tag follows the last `:` after the last `/`.
        let (repository, tag) = match path.rsplit_once(':') {
            Some((r, t)) if !t.contains('/') => (r, Some(t.to_string())),
            _ => (path, None),
        };
        let repo_ok = !repository.is_empty()
            && repository.split('/').all(|c| {
                !c.is_empty()
                    && c.chars().all(|ch| {
                        ch.is_ascii_lowercase() || ch.is_ascii_digit() || "._-".contains(ch)
                    })
            });
        if !repo_ok {
            return Err(bad(
                "the repository must be lowercase letters, digits, `.`, `_`, `-` and `/`",
            ));
        }
        if let Some(t) = &tag {
            let ok = !t.is_empty()
                && t.len() <= 128
                && t.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
            if !ok {
                return Err(bad("a tag is letters, digits, `.`, `_` and `-`"));
            }
        }
        if let Some(d) = &digest
            && !is_sha256_digest(d)
        {
            return Err(bad("a digest is sha256: and 64 lowercase hex digits"));
        }
        if tag.is_none() && digest.is_none() {
            return Err(bad("no tag or digest"));
        }
        Ok(Reference {
            registry: registry.to_ascii_lowercase(),
            repository: repository.to_string(),
            tag,
            digest,
            insecure: false,
        })
    }

    /// This reference pinned to a manifest digest.
    pub fn pinned(&self, digest: &str) -> String {
        format!("oci://{}/{}@{digest}", self.registry, self.repository)
    }
}

impl std::fmt::Display for Reference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "oci://{}/{}", self.registry, self.repository)?;
        if let Some(t) = &self.tag {
            write!(f, ":{t}")?;
        }
        if let Some(d) = &self.digest {
            write!(f, "@{d}")?;
        }
        Ok(())
    }
}

pub fn is_sha256_digest(d: &str) -> bool {
    d.strip_prefix("sha256:")
        .is_some_and(|h| h.len() == 64 && h.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f')))
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Descriptor {
    pub(crate) media_type: String,
    pub(crate) digest: String,
    pub(crate) size: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) artifact_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) annotations: Option<BTreeMap<String, String>>,
}

/// An OCI image index: the referrers of a manifest.
#[cfg(feature = "net")]
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ImageIndex {
    pub(crate) schema_version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) media_type: Option<String>,
    #[serde(default)]
    pub(crate) manifests: Vec<Descriptor>,
}

/// The tag the referrers of `digest` are listed under on a registry without the referrers API
/// (OCI 1.1's fallback: `sha256-<hex>`).
pub fn referrers_tag(digest: &str) -> String {
    digest.replacen(':', "-", 1)
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ImageManifest {
    pub(crate) schema_version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) media_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) artifact_type: Option<String>,
    pub(crate) config: Descriptor,
    pub(crate) layers: Vec<Descriptor>,
    /// The manifest this one refers to (a signature's plugin).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) subject: Option<Descriptor>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) annotations: Option<BTreeMap<String, String>>,
}

/// What a pulled manifest says to fetch: its one wasm layer, and the signature it carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chosen {
    /// `sha256:` digest of the layer, checked to be one.
    pub layer_digest: String,
    /// The size the manifest gives it.
    pub layer_size: u64,
    /// The minisign signature annotation, if any.
    pub signature: Option<String>,
}

/// Why a manifest's wasm layer could not be chosen.
#[derive(Debug, thiserror::Error)]
pub enum LayerError {
    #[error("{reference}: not an OCI image manifest: {source}")]
    NotManifest {
        reference: String,
        #[source]
        source: serde_json::Error,
    },
    /// Not a plugin artifact as rawko reads one: what is wrong with it.
    #[error("{0}")]
    Unusable(String),
}

impl From<String> for LayerError {
    fn from(message: String) -> Self {
        LayerError::Unusable(message)
    }
}

/// Read a manifest a registry sent for `reference` (shown in errors) and choose the wasm layer
/// it names: exactly one layer of a wasm media type, with a sha256 digest.
pub fn choose_layer(reference: &str, body: &[u8]) -> Result<Chosen, LayerError> {
    let manifest: ImageManifest =
        serde_json::from_slice(body).map_err(|source| LayerError::NotManifest {
            reference: reference.to_string(),
            source,
        })?;
    let wasm_layers: Vec<&Descriptor> = manifest
        .layers
        .iter()
        .filter(|l| {
            [
                WASM_MEDIA_TYPE,
                LEGACY_WASM_MEDIA_TYPE,
                RUNWASI_WASM_MEDIA_TYPE,
            ]
            .contains(&l.media_type.as_str())
        })
        .collect();
    let layer = match wasm_layers.as_slice() {
        [one] => *one,
        [] => {
            return Err(format!(
                "{reference}: not a wasm artifact (no `{WASM_MEDIA_TYPE}` layer; config type `{}`)",
                manifest.config.media_type
            )
            .into());
        }
        many => {
            return Err(format!(
                "{reference}: {} wasm layers; a plugin artifact has exactly one",
                many.len()
            )
            .into());
        }
    };
    if !is_sha256_digest(&layer.digest) {
        return Err(format!(
            "{reference}: layer digest `{}` is not a sha256 digest",
            layer.digest
        )
        .into());
    }
    Ok(Chosen {
        layer_digest: layer.digest.clone(),
        layer_size: layer.size,
        signature: manifest
            .annotations
            .as_ref()
            .and_then(|a| a.get(SIGNATURE_ANNOTATION))
            .cloned(),
    })
}

/// `Bearer realm="...",service="...",scope="..."` -> ("Bearer", params).
pub fn parse_challenge(header: &str) -> (String, BTreeMap<String, String>) {
    let header = header.trim();
    let (scheme, rest) = header.split_once(' ').unwrap_or((header, ""));
    let mut params = BTreeMap::new();
    let mut rest = rest.trim();
    while !rest.is_empty() {
        let Some((key, after)) = rest.split_once('=') else {
            break;
        };
        let key = key
            .trim()
            .trim_start_matches(',')
            .trim()
            .to_ascii_lowercase();
        let after = after.trim_start();
        let (value, next) = if let Some(quoted) = after.strip_prefix('"') {
            match quoted.find('"') {
                Some(end) => (&quoted[..end], &quoted[end + 1..]),
                None => (quoted, ""),
            }
        } else {
            match after.find(',') {
                Some(end) => (&after[..end], &after[end..]),
                None => (after, ""),
            }
        };
        params.insert(key, value.to_string());
        rest = next.trim_start().trim_start_matches(',').trim_start();
    }
    (scheme.to_string(), params)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_parse() {
        let r = Reference::parse("oci://127.0.0.1:5000/rawko/hello:1.0").unwrap();
        assert_eq!(r.registry, "127.0.0.1:5000");
        assert_eq!(r.repository, "rawko/hello");
        assert_eq!(r.tag.as_deref(), Some("1.0"));
        let d = format!("sha256:{}", "a".repeat(64));
        let r = Reference::parse(&format!("oci://ghcr.io/o/p@{d}")).unwrap();
        assert_eq!((r.tag, r.digest.as_deref()), (None, Some(d.as_str())));
        for bad in [
            "ghcr.io/o/p:1",
            "oci://ghcr.io/o/p",
            "oci://ghcr.io/O/p:1",
            "oci://ghcr.io/o/p@sha256:abc",
            "oci:///p:1",
        ] {
            assert!(Reference::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn challenges_parse() {
        let (s, p) = parse_challenge(
            r#"Bearer realm="https://auth.example.com/token",service="registry.example.com",scope="repository:a/b:pull""#,
        );
        assert_eq!(s, "Bearer");
        assert_eq!(p["realm"], "https://auth.example.com/token");
        assert_eq!(p["service"], "registry.example.com");
        assert_eq!(p["scope"], "repository:a/b:pull");
        let (s, p) = parse_challenge(r#"Basic realm="Registry Realm""#);
        assert_eq!(
            (s.as_str(), p["realm"].as_str()),
            ("Basic", "Registry Realm")
        );
    }

    #[test]
    fn a_manifest_names_exactly_one_wasm_layer() {
        let d = format!("sha256:{}", "b".repeat(64));
        let m = |layers: &str| {
            format!(
                r#"{{"schemaVersion":2,"config":{{"mediaType":"{CONFIG_MEDIA_TYPE}","digest":"{d}","size":2}},"layers":[{layers}],"annotations":{{"{SIGNATURE_ANNOTATION}":"sig"}}}}"#
            )
        };
        let layer = |t: &str, digest: &str| {
            format!(r#"{{"mediaType":"{t}","digest":"{digest}","size":7}}"#)
        };
        let one = choose_layer("r", m(&layer(WASM_MEDIA_TYPE, &d)).as_bytes()).unwrap();
        assert_eq!((one.layer_size, one.signature.as_deref()), (7, Some("sig")));
        // What runwasi and older tooling push is a wasm layer too.
        for t in [RUNWASI_WASM_MEDIA_TYPE, LEGACY_WASM_MEDIA_TYPE] {
            assert!(
                choose_layer("r", m(&layer(t, &d)).as_bytes()).is_ok(),
                "{t}"
            );
        }
        let tarball = layer("application/vnd.oci.image.layer.v1.tar+gzip", &d);
        assert!(choose_layer("r", m(&tarball).as_bytes()).is_err());
        let two = format!(
            "{},{}",
            layer(WASM_MEDIA_TYPE, &d),
            layer(LEGACY_WASM_MEDIA_TYPE, &d)
        );
        assert!(
            choose_layer("r", m(&two).as_bytes())
                .unwrap_err()
                .to_string()
                .contains("2 wasm layers")
        );
        assert!(
            choose_layer("r", m("").as_bytes())
                .unwrap_err()
                .to_string()
                .contains("not a wasm artifact")
        );
        let bad = layer(WASM_MEDIA_TYPE, "sha256:../../etc");
        assert!(
            choose_layer("r", m(&bad).as_bytes())
                .unwrap_err()
                .to_string()
                .contains("not a sha256")
        );
        assert!(
            choose_layer("r", b"{")
                .unwrap_err()
                .to_string()
                .contains("not an OCI image manifest")
        );
    }
}
