//! Plugin manifests: what a plugin says it is and needs, and whether the component agrees.
//!
//! The manifest travels inside the component as the `rawko-manifest` custom section (the guest
//! SDK's `manifest!` macro puts it there), so it can be read without running any of the plugin's
//! code. It is parsed strictly into a [`Manifest`], then held against what the component really
//! imports and exports: a plugin that imports more than its kinds and declared capabilities
//! allow, exports something it did not declare, or was built against a `rawko:plugin` version
//! this host does not implement is refused with the reason. The user's consent is asked for the
//! capabilities listed here and nothing else.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// Name of the custom section holding the manifest (the SDK's `manifest::SECTION`).
pub const SECTION: &str = "rawko-manifest";

/// Largest manifest accepted; a manifest is a page of YAML.
pub const MAX_MANIFEST_BYTES: usize = 64 * 1024;

/// Deepest nesting a manifest may have.
const MAX_MANIFEST_DEPTH: usize = 16;

/// The `rawko:plugin` WIT package versions this host implements.
pub const SUPPORTED_WIT: &[&str] = rawko_wit::SUPPORTED;

/// What one kind of plugin is: its world's extra imports and the interface it exports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    Tool,
    Adapter,
    BashFilter,
}

impl Kind {
    pub const ALL: [Kind; 3] = [Kind::Tool, Kind::Adapter, Kind::BashFilter];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Tool => "tool",
            Kind::Adapter => "adapter",
            Kind::BashFilter => "bash-filter",
        }
    }

    /// The `rawko:plugin` interface every plugin of the kind exports.
    pub fn export(self) -> &'static str {
        match self {
            Kind::Tool => "tools",
            Kind::Adapter => "llm",
            Kind::BashFilter => "filter",
        }
    }

    /// Every `rawko:plugin` interface the kind's world exports (`ns:pkg/interface`, no
    /// version), read from the WIT: [`Kind::export`], and what later versions added beside it,
    /// which plugins built against earlier ones lack (an adapter's `embeddings`).
    fn allowed_exports(self) -> &'static [&'static str] {
        rawko_wit::world(self.as_str()).map_or(&[], |w| w.exports)
    }

    /// What the kind's world allows a plugin to import (`ns:pkg/interface`, no version), read
    /// from the WIT this rawko was built with (its `include`s and the interfaces its interfaces
    /// `use` followed), so the check cannot drift from the contract.
    fn allowed_imports(self) -> &'static [&'static str] {
        rawko_wit::world(self.as_str()).map_or(&[], |w| w.imports)
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Kind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Kind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| {
                format!("unknown plugin kind `{s}` (expected tool, adapter or bash-filter)")
            })
    }
}

/// One capability a plugin may be granted. Written `fs.read=PATH`, `fs.write=PATH`,
/// `net.http=HOST[:PORT]`, `env=VAR` or `exec=COMMAND`, on the command line and in the lockfile.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Grant {
    /// Read files under a directory (relative to the workspace, or absolute).
    FsRead(String),
    /// Create, change and delete files under a directory.
    FsWrite(String),
    /// Send HTTP requests to a host, on the given port or, without one, on any port.
    NetHttp(String),
    /// Have the host inject the value of an environment variable (a credential) into requests.
    Env(String),
    /// Run a command through the host's shell tool and its filter chain.
    Exec(String),
}

impl Grant {
    pub fn kind(&self) -> &'static str {
        match self {
            Grant::FsRead(_) => "fs.read",
            Grant::FsWrite(_) => "fs.write",
            Grant::NetHttp(_) => "net.http",
            Grant::Env(_) => "env",
            Grant::Exec(_) => "exec",
        }
    }

    pub fn value(&self) -> &str {
        match self {
            Grant::FsRead(v)
            | Grant::FsWrite(v)
            | Grant::NetHttp(v)
            | Grant::Env(v)
            | Grant::Exec(v) => v,
        }
    }

    /// Build and check a grant of `kind` for `value`.
    pub fn new(kind: &str, value: &str) -> Result<Grant, GrantError> {
        let value = value.trim();
        let grant = match kind {
            "fs.read" => Grant::FsRead(check_path(value)?),
            "fs.write" => Grant::FsWrite(check_path(value)?),
            "net.http" => Grant::NetHttp(check_host(value)?),
            "env" => Grant::Env(check_env(value)?),
            "exec" => Grant::Exec(check_command(value)?),
            other => {
                return Err(format!(
                    "unknown capability `{other}` (expected fs.read, fs.write, net.http, env or exec)"
                )
                .into());
            }
        };
        Ok(grant)
    }

    /// What granting this means for the user, in plain words.
    pub fn risk(&self) -> String {
        match self {
            Grant::FsRead(p) if p == "." => {
                "can read every file in your workspace, including any secrets kept there".into()
            }
            Grant::FsRead(p) if p.starts_with('/') => {
                format!("can read every file under {p}, outside your workspace")
            }
            Grant::FsRead(p) => format!("can read every file under {p} in your workspace"),
            Grant::FsWrite(p) if p == "." => {
                "can create, change and delete any file in your workspace".into()
            }
            Grant::FsWrite(p) if p.starts_with('/') => {
                format!("can create, change and delete files under {p}, outside your workspace")
            }
            Grant::FsWrite(p) => {
                format!("can create, change and delete files under {p} in your workspace")
            }
            Grant::NetHttp(h) if h.contains(':') => {
                format!("can send requests to {h}: whatever it can read could be sent there")
            }
            Grant::NetHttp(h) => format!(
                "can send requests to {h}, on any port: whatever it can read could be sent there"
            ),
            Grant::Env(v) => format!(
                "can have rawko add the secret in ${v} to its requests to its granted hosts (it never sees the value itself)"
            ),
            Grant::Exec(c) => {
                format!("can run `{c}` through rawko's shell, subject to your bash filters")
            }
        }
    }
}

impl fmt::Display for Grant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.kind(), self.value())
    }
}

/// A capability that cannot be granted as written: what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct GrantError(pub String);

impl From<String> for GrantError {
    fn from(message: String) -> Self {
        GrantError(message)
    }
}

impl std::str::FromStr for Grant {
    type Err = GrantError;
    fn from_str(s: &str) -> Result<Grant, GrantError> {
        let (kind, value) = s.split_once('=').ok_or_else(|| {
            format!("`{s}` is not a capability: write KIND=VALUE, e.g. fs.read=. or net.http=api.example.com")
        })?;
        Grant::new(kind.trim(), value)
    }
}

impl Serialize for Grant {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Grant {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Grant, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

fn check_path(p: &str) -> Result<String, String> {
    if p.is_empty() {
        return Err("an empty path (use `.` for the workspace)".into());
    }
    if p.chars().any(char::is_control) {
        return Err(format!("path {p:?} contains control characters"));
    }
    let path = std::path::Path::new(p);
    if !path.is_absolute()
        && path
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return Err(format!(
            "path `{p}` climbs out of the workspace with `..`; use an absolute path to mean a place outside it"
        ));
    }
    let normal = crate::normalize_rel(p);
    Ok(normal)
}

fn check_host(h: &str) -> Result<String, String> {
    let lower = h.to_ascii_lowercase();
    let (host, port) = match lower.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') => (host.to_string(), Some(port.to_string())),
        _ => (lower.clone(), None),
    };
    let host_ok = !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        });
    if !host_ok {
        return Err(format!(
            "`{h}` is not a host name: give a host with an optional port (api.example.com or api.example.com:8443), no scheme, path or wildcard"
        ));
    }
    if let Some(port) = &port
        && port.parse::<u16>().map_or(true, |p| p == 0)
    {
        return Err(format!("`{h}`: `{port}` is not a port number"));
    }
    Ok(lower)
}

fn check_env(v: &str) -> Result<String, String> {
    let ok = rawko_config::is_env_var_name(v) && v.len() <= 128;
    if ok {
        Ok(v.to_string())
    } else {
        Err(format!(
            "`{v}` is not an environment variable name (letters, digits and `_`)"
        ))
    }
}

fn check_command(c: &str) -> Result<String, String> {
    if c.is_empty() || c.len() > 256 || c.chars().any(char::is_control) {
        return Err(format!("`{c}` is not a command pattern"));
    }
    Ok(c.to_string())
}

/// The manifest as written, before it is checked.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawManifest {
    name: String,
    version: String,
    kinds: Vec<String>,
    description: String,
    #[serde(default)]
    license: Option<String>,
    #[serde(default)]
    publisher: Option<String>,
    /// A semver requirement on the `rawko:plugin` WIT version, e.g. `^0.1.0`.
    wit: String,
    #[serde(default)]
    capabilities: RawCapabilities,
    #[serde(default)]
    provides: Provides,
}

/// Capabilities as written: for each kind, value -> reason.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCapabilities {
    #[serde(default, rename = "fs.read")]
    fs_read: BTreeMap<String, String>,
    #[serde(default, rename = "fs.write")]
    fs_write: BTreeMap<String, String>,
    #[serde(default, rename = "net.http")]
    net_http: BTreeMap<String, String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    exec: BTreeMap<String, String>,
}

/// What a plugin provides, by name, for each kind.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Provides {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub adapters: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub filters: Vec<String>,
}

/// One requested capability and the plugin's reason for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Capability {
    pub grant: Grant,
    pub reason: String,
}

/// A checked manifest.
#[derive(Debug, Clone, Serialize)]
pub struct Manifest {
    pub name: String,
    #[serde(serialize_with = "serialize_display")]
    pub version: semver::Version,
    pub kinds: Vec<Kind>,
    pub description: String,
    pub license: Option<String>,
    pub publisher: Option<String>,
    /// The `rawko:plugin` versions the plugin says it works with.
    #[serde(serialize_with = "serialize_display")]
    pub wit: semver::VersionReq,
    pub capabilities: Vec<Capability>,
    pub provides: Provides,
}

fn serialize_display<S: serde::Serializer, T: fmt::Display>(
    v: &T,
    s: S,
) -> Result<S::Ok, S::Error> {
    s.collect_str(v)
}

/// Why a plugin's manifest or component was refused.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("not a WebAssembly file: {0}")]
    NotWasm(String),
    #[error(
        "this is a core WebAssembly module, not a component; build the plugin for wasm32-wasip2 (cargo build --target wasm32-wasip2)"
    )]
    CoreModule,
    #[error(
        "the component carries no rawko manifest (custom section `{SECTION}`): for a Rust plugin, add `rawko_plugin_sdk::manifest!();` and a rawko-plugin.yaml to the crate; for a component from any other toolchain (componentize-py, jco, ...), embed one with `rawko plugin pack COMPONENT.wasm --manifest rawko-plugin.yaml -o PLUGIN.wasm`"
    )]
    Missing,
    #[error(
        "the component carries {0} rawko manifests; a plugin has exactly one (pack a component as its toolchain built it)"
    )]
    Duplicate(usize),
    #[error("manifest: {0}")]
    Invalid(String),
    #[error("{0}")]
    Mismatch(String),
}

impl Manifest {
    /// Parse and check manifest text (YAML; JSON is YAML too).
    pub fn parse(bytes: &[u8]) -> Result<Manifest, ManifestError> {
        let invalid = |m: String| ManifestError::Invalid(m);
        if bytes.len() > MAX_MANIFEST_BYTES {
            return Err(invalid(format!(
                "{} bytes; a manifest may be at most {MAX_MANIFEST_BYTES}",
                bytes.len()
            )));
        }
        let text = std::str::from_utf8(bytes).map_err(|_| invalid("not UTF-8 text".into()))?;
        // A manifest needs four levels; the deserializer's cost grows with the square of the
        // depth, so deeper text is refused before it sees it.
        if let Some((line, column)) = rawko_config::yaml_too_deep(text, MAX_MANIFEST_DEPTH) {
            return Err(invalid(format!(
                "line {line}, column {column}: nested more than {MAX_MANIFEST_DEPTH} levels deep"
            )));
        }
        let raw: RawManifest = yaml_serde::from_str(text).map_err(|e| {
            let at = e
                .location()
                .map(|l| format!("line {}, column {}: ", l.line(), l.column()))
                .unwrap_or_default();
            invalid(format!("{at}{e}"))
        })?;
        Manifest::check(raw).map_err(invalid)
    }

    fn check(raw: RawManifest) -> Result<Manifest, String> {
        let name_ok = !raw.name.is_empty()
            && raw.name.len() <= 64
            && raw.name.starts_with(|c: char| c.is_ascii_lowercase())
            && raw
                .name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        if !name_ok {
            return Err(format!(
                "name `{}` is not allowed: lowercase letters, digits and `-`, starting with a letter, at most 64",
                raw.name
            ));
        }
        let version = semver::Version::parse(&raw.version)
            .map_err(|e| format!("version `{}` is not a semantic version: {e}", raw.version))?;
        if raw.kinds.is_empty() {
            return Err(
                "kinds is empty: name the kind of plugin (tool, adapter or bash-filter)".into(),
            );
        }
        let mut kinds = Vec::new();
        for k in &raw.kinds {
            let kind: Kind = k.parse()?;
            if kinds.contains(&kind) {
                return Err(format!("kind `{kind}` is listed twice"));
            }
            kinds.push(kind);
        }
        kinds.sort();
        let wit = semver::VersionReq::parse(&raw.wit).map_err(|e| {
            format!(
                "wit `{}` is not a version requirement (e.g. ^0.1.0): {e}",
                raw.wit
            )
        })?;
        // What the user reads before consenting must be plain text: no terminal escapes, and no
        // line breaks outside the description (which is shown indented), so a plugin cannot
        // draw fake lines into the consent screen.
        let oneline = |field: &str, s: &str, max: usize| -> Result<(), String> {
            let multiline = field == "description";
            if s.len() > max
                || s.chars()
                    .any(|c| c.is_control() && !(multiline && c == '\n'))
            {
                Err(format!(
                    "{field} is longer than {max} bytes or holds control characters{}",
                    if multiline {
                        ""
                    } else {
                        " (line breaks included)"
                    }
                ))
            } else {
                Ok(())
            }
        };
        oneline("description", &raw.description, 1000)?;
        if raw.description.trim().is_empty() {
            return Err("description is empty: say what the plugin does".into());
        }
        for (field, v) in [("license", &raw.license), ("publisher", &raw.publisher)] {
            if let Some(v) = v {
                oneline(field, v, 200)?;
            }
        }

        let mut capabilities = Vec::new();
        let c = &raw.capabilities;
        for (kind, map) in [
            ("fs.read", &c.fs_read),
            ("fs.write", &c.fs_write),
            ("net.http", &c.net_http),
            ("env", &c.env),
            ("exec", &c.exec),
        ] {
            for (value, reason) in map {
                let grant =
                    Grant::new(kind, value).map_err(|e| format!("capabilities.{kind}: {e}"))?;
                if reason.trim().is_empty() {
                    return Err(format!(
                        "capabilities.{kind}: `{value}` has no reason; say why the plugin needs it"
                    ));
                }
                oneline("a capability's reason", reason, 500)?;
                if !capabilities.iter().any(|c: &Capability| c.grant == grant) {
                    capabilities.push(Capability {
                        grant,
                        reason: reason.trim().to_string(),
                    });
                }
            }
        }
        for (names, kind, what) in [
            (&raw.provides.tools, Kind::Tool, "tools"),
            (&raw.provides.adapters, Kind::Adapter, "adapters"),
            (&raw.provides.filters, Kind::BashFilter, "filters"),
        ] {
            if !names.is_empty() && !kinds.contains(&kind) {
                return Err(format!(
                    "provides.{what} is set, but kinds does not include {kind}"
                ));
            }
        }
        Ok(Manifest {
            name: raw.name,
            version,
            kinds,
            description: raw.description.trim().to_string(),
            license: raw.license,
            publisher: raw.publisher,
            wit,
            capabilities,
            provides: raw.provides,
        })
    }

    /// Every capability the plugin asks for.
    pub fn requested(&self) -> Vec<Grant> {
        self.capabilities.iter().map(|c| c.grant.clone()).collect()
    }
}

/// What a component imports and exports, and the manifest it carries, read without running it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ComponentInfo {
    pub imports: Vec<String>,
    pub exports: Vec<String>,
    #[serde(skip)]
    pub manifest: Option<Vec<u8>>,
}

/// The smallest component carrying `manifest` as its manifest section: the preamble and one
/// custom section. For tests and fuzz targets that attack the manifest reader.
#[doc(hidden)]
pub fn bare_component(manifest: &[u8]) -> Vec<u8> {
    let mut payload = vec![SECTION.len() as u8];
    payload.extend_from_slice(SECTION.as_bytes());
    payload.extend_from_slice(manifest);
    let mut wasm = b"\0asm\x0d\x00\x01\x00\x00".to_vec();
    // The section's size, as unsigned LEB128.
    let mut n = payload.len();
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            wasm.push(byte);
            break;
        }
        wasm.push(byte | 0x80);
    }
    wasm.extend_from_slice(&payload);
    wasm
}

impl ComponentInfo {
    /// Read a component's outer imports and exports and its manifest section.
    pub fn read(wasm: &[u8]) -> Result<ComponentInfo, ManifestError> {
        use wasmparser::{Encoding, Parser, Payload};
        let mut info = ComponentInfo::default();
        let mut manifests = Vec::new();
        // Depth 1 is the outer component; nested modules and components go deeper.
        let mut depth = 0usize;
        for payload in Parser::new(0).parse_all(wasm) {
            let payload = payload.map_err(|e| ManifestError::NotWasm(e.to_string()))?;
            match payload {
                Payload::Version { encoding, .. } => {
                    if depth == 0 && encoding == Encoding::Module {
                        return Err(ManifestError::CoreModule);
                    }
                    depth += 1;
                }
                Payload::End(_) => depth = depth.saturating_sub(1),
                Payload::ComponentImportSection(reader) if depth == 1 => {
                    for import in reader {
                        let import = import.map_err(|e| ManifestError::NotWasm(e.to_string()))?;
                        info.imports.push(import.name.name.to_string());
                    }
                }
                Payload::ComponentExportSection(reader) if depth == 1 => {
                    for export in reader {
                        let export = export.map_err(|e| ManifestError::NotWasm(e.to_string()))?;
                        info.exports.push(export.name.name.to_string());
                    }
                }
                Payload::CustomSection(section) if section.name() == SECTION => {
                    manifests.push(section.data().to_vec());
                }
                _ => {}
            }
        }
        match manifests.len() {
            0 => {}
            1 => info.manifest = manifests.pop(),
            n => return Err(ManifestError::Duplicate(n)),
        }
        Ok(info)
    }

    /// The manifest the component carries, parsed and checked.
    pub fn manifest(&self) -> Result<Manifest, ManifestError> {
        Manifest::parse(self.manifest.as_deref().ok_or(ManifestError::Missing)?)
    }

    /// Hold the component's imports and exports against `manifest` and this host's WIT versions.
    /// Returns the `rawko:plugin` version the component was built against.
    pub fn check(&self, manifest: &Manifest) -> Result<semver::Version, ManifestError> {
        let mismatch = |m: String| ManifestError::Mismatch(m);
        // The rawko:plugin version, which every rawko interface must agree on.
        let mut wit: Option<semver::Version> = None;
        for name in self.imports.iter().chain(&self.exports) {
            let Some(iface) = Interface::parse(name) else {
                continue;
            };
            if iface.package != "rawko:plugin" {
                continue;
            }
            let Some(v) = iface.version else {
                return Err(mismatch(format!("`{name}` has no version")));
            };
            match &wit {
                Some(w) if *w != v => {
                    return Err(mismatch(format!(
                        "the component mixes rawko:plugin versions {w} and {v}"
                    )));
                }
                _ => wit = Some(v),
            }
        }
        let Some(wit) = wit else {
            return Err(mismatch(
                "the component neither imports nor exports any rawko:plugin interface; it is not a rawko plugin".into(),
            ));
        };
        if !wit_supported(&wit) {
            return Err(mismatch(format!(
                "built against rawko:plugin@{wit}, which this rawko does not support (it implements {}); \
                 rebuild the plugin against a supported version, or update rawko",
                SUPPORTED_WIT.join(", ")
            )));
        }
        if !manifest.wit.matches(&wit) {
            return Err(mismatch(format!(
                "the manifest says the plugin works with rawko:plugin {}, but the component was built against {wit}",
                manifest.wit
            )));
        }

        let kinds = &manifest.kinds;
        for name in &self.imports {
            if is_denied_import(name) {
                continue;
            }
            let allowed = Interface::parse(name).is_some_and(|i| {
                let base = format!("{}/{}", i.package, i.name);
                let version_ok = match i.package.split(':').next() {
                    Some("wasi") => i
                        .version
                        .as_ref()
                        .is_some_and(|v| v.major == 0 && v.minor == 2),
                    _ => true,
                };
                version_ok
                    && kinds
                        .iter()
                        .any(|k| k.allowed_imports().contains(&base.as_str()))
            });
            if !allowed {
                let kinds_text = kinds
                    .iter()
                    .map(|k| k.as_str())
                    .collect::<Vec<_>>()
                    .join(", ");
                return Err(mismatch(format!(
                    "imports `{name}`, which is beyond what a {kinds_text} plugin may use; \
                     rawko refuses plugins that ask for more than their manifest declares"
                )));
            }
            if name.starts_with("rawko:plugin/http@")
                && !manifest
                    .capabilities
                    .iter()
                    .any(|c| matches!(c.grant, Grant::NetHttp(_)))
            {
                return Err(mismatch(format!(
                    "imports `{name}` but declares no net.http capability; list the hosts it contacts under capabilities.net.http"
                )));
            }
        }

        let mut exported = Vec::new();
        for name in &self.exports {
            // Exports beyond the plugin worlds (a toolchain's own interfaces) are never
            // called: ignored, and listed by [`ComponentInfo::foreign_exports`].
            if Interface::parse(name).is_none_or(|i| i.package != "rawko:plugin") {
                continue;
            }
            let iface = Interface::parse(name).filter(|i| i.package == "rawko:plugin");
            let kind = iface.as_ref().and_then(|i| {
                let base = format!("{}/{}", i.package, i.name);
                Kind::ALL
                    .into_iter()
                    .find(|k| k.allowed_exports().contains(&base.as_str()))
            });
            match kind {
                Some(k) if kinds.contains(&k) => {
                    if iface.is_some_and(|i| i.name == k.export()) {
                        exported.push(k);
                    }
                }
                Some(k) => {
                    return Err(mismatch(format!(
                        "exports `{name}` (a {k} plugin), but the manifest does not list {k} among its kinds"
                    )));
                }
                None => {
                    return Err(mismatch(format!(
                        "exports `{name}`, which is not part of any rawko plugin world"
                    )));
                }
            }
        }
        for k in kinds {
            if !exported.contains(k) {
                return Err(mismatch(format!(
                    "the manifest says it is a {k} plugin, but the component does not export rawko:plugin/{}",
                    k.export()
                )));
            }
        }
        Ok(wit)
    }
}

/// Packages whose imports rawko accepts and denies: toolchains such as componentize-py import
/// them whether the plugin uses them or not. `wasi:sockets` is linked to WASI with no network
/// (every socket, connection and name lookup refused) and `wasi:http` to stubs that trap.
pub const DENIED_PACKAGES: [&str; 2] = ["wasi:sockets", "wasi:http"];

/// Whether `name` is an import of a [`DENIED_PACKAGES`] package at WASI 0.2.
pub fn is_denied_import(name: &str) -> bool {
    Interface::parse(name).is_some_and(|i| {
        DENIED_PACKAGES.contains(&i.package)
            && i.version.is_some_and(|v| v.major == 0 && v.minor == 2)
    })
}

impl ComponentInfo {
    /// The imports rawko accepts and denies ([`DENIED_PACKAGES`]).
    pub fn denied_imports(&self) -> Vec<&str> {
        self.imports
            .iter()
            .map(String::as_str)
            .filter(|n| is_denied_import(n))
            .collect()
    }

    /// The exports beyond any rawko plugin world, which rawko never calls.
    pub fn foreign_exports(&self) -> Vec<&str> {
        self.exports
            .iter()
            .map(String::as_str)
            .filter(|n| Interface::parse(n).is_none_or(|i| i.package != "rawko:plugin"))
            .collect()
    }
}

/// Whether this host implements `rawko:plugin@v`: a supported version that is semver-compatible
/// and at least as new.
pub fn wit_supported(v: &semver::Version) -> bool {
    SUPPORTED_WIT.iter().any(|s| {
        let s = semver::Version::parse(s).expect("SUPPORTED_WIT holds valid versions");
        let compatible = if s.major == 0 {
            s.minor == v.minor && v.major == 0
        } else {
            s.major == v.major
        };
        compatible && s >= *v
    })
}

/// `ns:pkg/name@version`, split.
#[derive(Debug, PartialEq)]
struct Interface<'a> {
    package: &'a str,
    name: &'a str,
    version: Option<semver::Version>,
}

impl<'a> Interface<'a> {
    fn parse(s: &'a str) -> Option<Interface<'a>> {
        let (path, version) = match s.split_once('@') {
            Some((p, v)) => (p, Some(semver::Version::parse(v).ok()?)),
            None => (s, None),
        };
        let (package, name) = path.split_once('/')?;
        package.contains(':').then_some(Interface {
            package,
            name,
            version,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regression_deeply_nested_manifest_is_refused_at_once() {
        // A plugin's manifest is a stranger's YAML; nesting costs the deserializer the square
        // of its depth.
        let text = format!("name: {}", "[".repeat(MAX_MANIFEST_BYTES - 16));
        let started = std::time::Instant::now();
        let e = Manifest::parse(text.as_bytes()).unwrap_err().to_string();
        assert!(e.contains("nested more than"), "{e}");
        assert!(
            started.elapsed() < std::time::Duration::from_millis(500),
            "{:?}",
            started.elapsed()
        );
    }

    const GOOD: &str = r#"
name: hello
version: 1.2.3
kinds: [tool]
description: Says hello.
license: MIT
wit: "^0.1.0"
capabilities:
  fs.read: { ".": reads the files it greets }
  net.http: { "api.example.com": fetches greetings }
provides: { tools: [Hello] }
"#;

    fn info(imports: &[&str], exports: &[&str]) -> ComponentInfo {
        ComponentInfo {
            imports: imports.iter().map(|s| s.to_string()).collect(),
            exports: exports.iter().map(|s| s.to_string()).collect(),
            manifest: None,
        }
    }

    #[test]
    fn a_good_manifest_parses() {
        let m = Manifest::parse(GOOD.as_bytes()).unwrap();
        assert_eq!(m.name, "hello");
        assert_eq!(m.kinds, vec![Kind::Tool]);
        assert_eq!(
            m.requested(),
            vec![
                Grant::FsRead(".".into()),
                Grant::NetHttp("api.example.com".into())
            ]
        );
    }

    #[test]
    fn bad_manifests_say_what_is_wrong() {
        let cases = [
            (GOOD.replace("name: hello", "name: Hello"), "name `Hello`"),
            (
                GOOD.replace("license: MIT", "licence: MIT"),
                "unknown field `licence`",
            ),
            (GOOD.replace("^0.1.0", "zero"), "not a version requirement"),
            (
                GOOD.replace("[tool]", "[toll]"),
                "unknown plugin kind `toll`",
            ),
            (
                GOOD.replace("\".\": reads", "\"../..\": reads"),
                "climbs out of the workspace",
            ),
            (
                GOOD.replace("api.example.com\"", "*.example.com\""),
                "not a host name",
            ),
            (GOOD.replace("fetches greetings", "\"  \""), "has no reason"),
            // Terminal escapes and line breaks could forge lines on the consent screen.
            (
                GOOD.replace("fetches greetings", "\"fine\\u001b[2K\""),
                "control characters",
            ),
            (
                GOOD.replace("fetches greetings", "\"fine\\nIt asks for nothing\""),
                "line breaks",
            ),
        ];
        for (text, expected) in cases {
            let e = Manifest::parse(text.as_bytes()).unwrap_err().to_string();
            assert!(e.contains(expected), "{e} should contain {expected}");
        }
    }

    #[test]
    fn grants_round_trip_through_text() {
        for s in [
            "fs.read=.",
            "fs.write=/tmp/x",
            "net.http=api.example.com:8443",
            "env=API_KEY",
            "exec=git *",
        ] {
            assert_eq!(s.parse::<Grant>().unwrap().to_string(), s);
        }
        assert_eq!(
            "fs.read=./src/".parse::<Grant>().unwrap().to_string(),
            "fs.read=src"
        );
        assert!("net.http=https://x".parse::<Grant>().is_err());
        assert!("net.http=x:0".parse::<Grant>().is_err());
        assert!("env=A-B".parse::<Grant>().is_err());
        assert!("disk=.".parse::<Grant>().is_err());
    }

    #[test]
    fn imports_beyond_the_kind_are_refused() {
        let m = Manifest::parse(GOOD.as_bytes()).unwrap();
        let ok = info(
            &[
                "rawko:plugin/log@0.1.0",
                "wasi:io/streams@0.2.6",
                "rawko:plugin/types@0.1.0",
            ],
            &["rawko:plugin/tools@0.1.0"],
        );
        assert_eq!(ok.check(&m).unwrap(), semver::Version::new(0, 1, 0));

        let other = info(
            &["wasi:keyvalue/store@0.2.0"],
            &["rawko:plugin/tools@0.1.0"],
        );
        let e = other.check(&m).unwrap_err().to_string();
        assert!(e.contains("imports `wasi:keyvalue/store@0.2.0`"), "{e}");

        // What toolchains import anyway is accepted, and denied: listed as such.
        let sockets = info(
            &[
                "wasi:sockets/tcp@0.2.0",
                "wasi:http/types@0.2.3",
                "rawko:plugin/types@0.1.0",
            ],
            &[
                "rawko:plugin/tools@0.1.0",
                "componentize-py:init/init@0.1.0",
            ],
        );
        assert!(sockets.check(&m).is_ok());
        assert_eq!(
            sockets.denied_imports(),
            ["wasi:sockets/tcp@0.2.0", "wasi:http/types@0.2.3"]
        );
        assert_eq!(
            sockets.foreign_exports(),
            ["componentize-py:init/init@0.1.0"]
        );
        // Only at WASI 0.2, and a foreign export does not stand in for the plugin's own.
        let later = info(&["wasi:sockets/tcp@0.3.0"], &["rawko:plugin/tools@0.1.0"]);
        assert!(later.check(&m).is_err());
        let only_foreign = info(
            &[],
            &[
                "componentize-py:init/init@0.1.0",
                "rawko:plugin/tools@0.1.0",
            ],
        );
        assert!(only_foreign.check(&m).is_ok());
        let none = info(
            &["rawko:plugin/types@0.1.0"],
            &["componentize-py:init/init@0.1.0"],
        );
        assert!(none.check(&m).is_err());

        let http = info(&["rawko:plugin/http@0.1.0"], &["rawko:plugin/tools@0.1.0"]);
        assert!(
            http.check(&m)
                .unwrap_err()
                .to_string()
                .contains("rawko:plugin/http")
        );

        let wasi3 = info(&["wasi:io/streams@0.3.0"], &["rawko:plugin/tools@0.1.0"]);
        assert!(wasi3.check(&m).is_err());
    }

    #[test]
    fn exports_and_versions_must_match_the_manifest() {
        let m = Manifest::parse(GOOD.as_bytes()).unwrap();
        let e = info(&[], &["rawko:plugin/tools@0.9.0"])
            .check(&m)
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("rawko:plugin@0.9.0, which this rawko does not support"),
            "{e}"
        );
        let e = info(&[], &["rawko:plugin/filter@0.1.0"])
            .check(&m)
            .unwrap_err();
        assert!(e.to_string().contains("does not list bash-filter"), "{e}");
        let e = info(&[], &["wasi:cli/run@0.2.0"]).check(&m).unwrap_err();
        assert!(e.to_string().contains("not a rawko plugin"), "{e}");
        let older = Manifest::parse(GOOD.replace("^0.1.0", "^0.2.0").as_bytes()).unwrap();
        let e = info(&[], &["rawko:plugin/tools@0.1.0"])
            .check(&older)
            .unwrap_err();
        assert!(e.to_string().contains("the manifest says"), "{e}");
    }

    /// An adapter exports `llm`, and since 0.1.1 `embeddings` beside it; `embeddings` alone
    /// does not make an adapter, and no other kind may export it.
    #[test]
    fn adapters_may_export_embeddings_beside_llm() {
        let adapter = Manifest::parse(
            GOOD.replace("kinds: [tool]", "kinds: [adapter]")
                .replace(
                    "provides: { tools: [Hello] }",
                    "provides: { adapters: [hello] }",
                )
                .as_bytes(),
        )
        .unwrap();
        let http = "rawko:plugin/http@0.1.1";
        let new = info(
            &[http],
            &["rawko:plugin/llm@0.1.1", "rawko:plugin/embeddings@0.1.1"],
        );
        assert_eq!(new.check(&adapter).unwrap(), semver::Version::new(0, 1, 1));
        let old = info(&["rawko:plugin/http@0.1.0"], &["rawko:plugin/llm@0.1.0"]);
        assert_eq!(old.check(&adapter).unwrap(), semver::Version::new(0, 1, 0));
        let e = info(&[http], &["rawko:plugin/embeddings@0.1.1"])
            .check(&adapter)
            .unwrap_err();
        assert!(
            e.to_string().contains("does not export rawko:plugin/llm"),
            "{e}"
        );
        let tool = Manifest::parse(GOOD.as_bytes()).unwrap();
        let e = info(
            &[],
            &["rawko:plugin/tools@0.1.1", "rawko:plugin/embeddings@0.1.1"],
        )
        .check(&tool)
        .unwrap_err();
        assert!(e.to_string().contains("does not list adapter"), "{e}");
    }

    /// The allowed imports come from the WIT itself.
    #[test]
    fn allowed_imports_are_read_from_the_worlds() {
        let tool = Kind::Tool.allowed_imports();
        for i in [
            "rawko:plugin/types",
            "rawko:plugin/log",
            "wasi:filesystem/preopens",
            "wasi:cli/stderr",
        ] {
            assert!(tool.contains(&i), "{i} missing from {tool:?}");
        }
        assert!(
            !tool.iter().any(|t| t.starts_with("wasi:sockets")),
            "{tool:?}"
        );
        assert!(!tool.contains(&"rawko:plugin/http"), "{tool:?}");
        let adapter = Kind::Adapter.allowed_imports();
        assert!(adapter.contains(&"rawko:plugin/http"), "{adapter:?}");
    }
}
