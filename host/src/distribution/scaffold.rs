//! `rawko plugin new`: a plugin crate that builds and installs as it is.
//!
//! The new crate depends on the guest SDK by path (the SDK finds the `rawko:plugin` WIT next to
//! itself), so it needs a rawko checkout: by default the one this rawko was built from, else the
//! SDK directory given with `--sdk` or `RAWKO_SDK`. The checkout's `Cargo.lock` and
//! `rust-toolchain.toml` are copied in so the plugin builds with the same toolchain and the same
//! dependency versions rawko is tested with.

use std::path::{Path, PathBuf};

use super::manifest::Kind;

/// The SDK directory in the checkout this binary was built from.
pub fn default_sdk() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../plugins/sdk")
}

#[derive(Debug, thiserror::Error)]
pub enum ScaffoldError {
    #[error("{0}")]
    Bad(String),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Write a new `kind` plugin crate called `name` into `dir` (which must not exist yet), using the
/// SDK at `sdk`. Returns the files written.
pub fn create(
    kind: Kind,
    name: &str,
    dir: &Path,
    sdk: &Path,
) -> Result<Vec<PathBuf>, ScaffoldError> {
    let name_ok = !name.is_empty()
        && name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !name_ok {
        return Err(ScaffoldError::Bad(format!(
            "`{name}` is not a plugin name: lowercase letters, digits and `-`, starting with a letter"
        )));
    }
    if kind != Kind::Tool {
        return Err(ScaffoldError::Bad(format!(
            "`rawko plugin new` scaffolds tool plugins; for a {kind} plugin start from a tool scaffold and the SDK's `{kind}` feature"
        )));
    }
    let sdk = sdk.canonicalize().map_err(|e| {
        ScaffoldError::Bad(format!(
            "the guest SDK is not at {} ({e}); point --sdk (or RAWKO_SDK) at plugins/sdk in a rawko checkout",
            sdk.display()
        ))
    })?;
    if !sdk.join("Cargo.toml").is_file() || !sdk.join("../../wit").is_dir() {
        return Err(ScaffoldError::Bad(format!(
            "{} is not the rawko guest SDK (plugins/sdk in a rawko checkout, with wit/ two levels up)",
            sdk.display()
        )));
    }
    if dir.exists() {
        return Err(ScaffoldError::Bad(format!(
            "{} already exists; choose another name or directory",
            dir.display()
        )));
    }
    let tool = camel(name);
    let crate_name = name.replace('-', "_");
    let sdk_path = toml_string(&sdk.to_string_lossy());
    let files: Vec<(&str, String)> = vec![
        (
            "Cargo.toml",
            format!(
                r#"[package]
name = "{name}"
version = "0.1.0"
edition = "2024"
publish = false

[lib]
crate-type = ["cdylib"]

[dependencies]
# The guest SDK, from a rawko checkout (it finds the rawko:plugin WIT beside itself).
rawko-plugin-sdk = {{ path = {sdk_path}, features = ["tool"] }}
serde = {{ version = "1", features = ["derive"] }}
schemars = {{ version = "1", default-features = false, features = ["derive", "std"] }}

[profile.release]
lto = true
codegen-units = 1
strip = "debuginfo"

# A plugin is its own workspace, wherever it is created.
[workspace]
"#
            ),
        ),
        (
            "rawko-plugin.yaml",
            format!(
                r#"# What rawko shows before installing this plugin; checked against the component itself.
name: {name}
version: 0.1.0
kinds: [tool]
description: "{tool} greets someone."
# license: Apache-2.0
# publisher: Your Name <you@example.com>
# The rawko:plugin WIT versions this plugin works with.
wit: "^0.1.0"
# Every capability needs a reason; the user sees it before granting. For example:
# capabilities:
#   fs.read:
#     ".": "reads the files an agent asks about"
#   fs.write:
#     "out": "writes its reports to out/"
capabilities: {{}}
provides:
  tools: [{tool}]
"#
            ),
        ),
        (
            "src/lib.rs",
            format!(
                r#"//! {name}: a rawko tool plugin.

use rawko_plugin_sdk::tool::{{Context, Tool, ToolError}};

/// The tool's input; its JSON Schema is derived from this type.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct {tool}Input {{
    /// Who to greet.
    pub name: String,
}}

pub struct {tool};

impl Tool for {tool} {{
    const NAME: &'static str = "{tool}";
    const DESCRIPTION: &'static str = "Greets someone by name.";
    type Input = {tool}Input;

    fn call(input: {tool}Input, _cx: &Context) -> Result<String, ToolError> {{
        if input.name.trim().is_empty() {{
            return Err(ToolError::InvalidInput("name is empty".into()));
        }}
        Ok(format!("Hello, {{}}!", input.name))
    }}
}}

rawko_plugin_sdk::export_tools!({tool});
rawko_plugin_sdk::manifest!();
"#
            ),
        ),
        (
            "README.md",
            format!(
                r#"# {name}

A rawko tool plugin. Build it, try it, install it:

```sh
cargo build --target wasm32-wasip2 --release
rawko tool call {tool} --plugin target/wasm32-wasip2/release/{crate_name}.wasm --input '{{"name": "world"}}'
rawko plugin install target/wasm32-wasip2/release/{crate_name}.wasm
rawko tool call {tool} --input '{{"name": "world"}}'
```

`rawko-plugin.yaml` is the manifest rawko shows before installing (`rawko plugin inspect` reads
it from the built `.wasm`): declare every capability the plugin needs, with a reason.
"#
            ),
        ),
    ];

    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ScaffoldError::Io { path, source }
    };
    let mut written = Vec::new();
    for (rel, text) in &files {
        let path = dir.join(rel);
        std::fs::create_dir_all(path.parent().unwrap_or(dir)).map_err(io(&path))?;
        std::fs::write(&path, text).map_err(io(&path))?;
        written.push(path);
    }
    // The checkout's toolchain and dependency versions, so the plugin builds as rawko's do.
    let checkout = sdk.join("../..");
    for file in ["rust-toolchain.toml", "Cargo.lock"] {
        let from = checkout.join(file);
        if from.is_file() {
            let to = dir.join(file);
            std::fs::copy(&from, &to).map_err(io(&to))?;
            written.push(to);
        }
    }
    Ok(written)
}

/// `hello-world` -> `HelloWorld`.
fn camel(name: &str) -> String {
    name.split('-')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let mut c = p.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

/// A TOML basic string.
fn toml_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_become_tool_names() {
        assert_eq!(camel("hello"), "Hello");
        assert_eq!(camel("word-count2"), "WordCount2");
        assert_eq!(toml_string(r#"a"b\c"#), r#""a\"b\\c""#);
    }

    #[test]
    fn the_scaffold_manifest_is_valid() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("hello");
        create(Kind::Tool, "hello", &out, &default_sdk()).unwrap();
        let yaml = std::fs::read(out.join("rawko-plugin.yaml")).unwrap();
        let m = super::super::Manifest::parse(&yaml).unwrap();
        assert_eq!(m.provides.tools, vec!["Hello".to_string()]);
        assert!(create(Kind::Tool, "hello", &out, &default_sdk()).is_err());
        assert!(create(Kind::Tool, "Bad", &dir.path().join("b"), &default_sdk()).is_err());
    }
}
