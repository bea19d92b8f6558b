//! `rawko plugin new`: a plugin crate of any kind (tool, adapter, bash filter) that builds and
//! installs as it is.
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
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../plugins/sdk")
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

/// Refuse a plugin name that is not lowercase letters, digits and `-`, starting with a letter.
fn check_name(name: &str) -> Result<(), ScaffoldError> {
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
    Ok(())
}

/// Write a new `kind` plugin crate called `name` into `dir` (which must not exist yet), using the
/// SDK at `sdk`. Returns the files written.
pub fn create(
    kind: Kind,
    name: &str,
    dir: &Path,
    sdk: &Path,
) -> Result<Vec<PathBuf>, ScaffoldError> {
    check_name(name)?;
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
    let files = files(kind, name, &toml_string(&sdk.to_string_lossy()));
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

/// Write a new tool plugin in Python called `name` into `dir` (which must not exist yet): its
/// `app.py`, its `rawko-plugin.yaml`, the `rawko:plugin` WIT (copied from `wit_dir`, a
/// `wit/since_vX.Y.Z` directory with its `deps/`), and a README with the commands that build
/// it with componentize-py, pack and install it. Returns the files written.
pub fn create_python(
    name: &str,
    dir: &Path,
    wit_dir: &Path,
) -> Result<Vec<PathBuf>, ScaffoldError> {
    create_script(Script::Python, name, dir, wit_dir)
}

/// The command that builds a JavaScript tool (in its project, the output file to follow): npx
/// fetches componentize-js itself, the version rawko is tested with, so it works pasted as it is
/// on a machine where it was never installed. (`npx componentize-js` alone would ask the
/// registry for a package of that name, which does not exist.)
pub const JS_BUILD: &str = "npx -y -p @bytecodealliance/componentize-js@0.23.0 componentize-js app.js --wit wit -n tool -o";

/// Write a new tool plugin in JavaScript called `name` into `dir`, as [`create_python`] does,
/// to be built with componentize-js.
pub fn create_js(name: &str, dir: &Path, wit_dir: &Path) -> Result<Vec<PathBuf>, ScaffoldError> {
    create_script(Script::Js, name, dir, wit_dir)
}

/// The languages whose tool plugins are one source file and the WIT.
#[derive(Clone, Copy)]
enum Script {
    Python,
    Js,
}

fn create_script(
    lang: Script,
    name: &str,
    dir: &Path,
    wit_dir: &Path,
) -> Result<Vec<PathBuf>, ScaffoldError> {
    check_name(name)?;
    if !wit_dir.join("worlds.wit").is_file() {
        return Err(ScaffoldError::Bad(format!(
            "the rawko:plugin WIT is not at {}; point --sdk (or RAWKO_SDK) at plugins/sdk in a rawko checkout",
            wit_dir.display()
        )));
    }
    if dir.exists() {
        return Err(ScaffoldError::Bad(format!(
            "{} already exists; choose another name or directory",
            dir.display()
        )));
    }
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ScaffoldError::Io { path, source }
    };
    let mut written = Vec::new();
    let tool = camel(name);
    let (source, app, readme, ignore, description, capabilities) = match lang {
        Script::Python => (
            "app.py",
            PY_APP,
            PY_README,
            "*.wasm\n__pycache__/\n",
            "Greets someone, optionally with the first line of a file.",
            "capabilities:\n  fs.read:\n    \".\": reads the file named in from_file\n",
        ),
        Script::Js => (
            "app.js",
            JS_APP,
            JS_README,
            "*.wasm\nnode_modules/\n",
            "Greets someone by name.",
            "",
        ),
    };
    let files = [
        (source, app.replace("{tool}", &tool)),
        (
            "rawko-plugin.yaml",
            format!(
                "name: {name}\nversion: 0.1.0\nkinds: [tool]\ndescription: {description}\n\
                 license: Apache-2.0\nwit: \"^0.1.0\"\n{capabilities}provides:\n  tools: [{tool}]\n"
            ),
        ),
        (
            "README.md",
            readme
                .replace("{build}", JS_BUILD)
                .replace("{name}", name)
                .replace("{tool}", &tool),
        ),
        (".gitignore", ignore.to_string()),
    ];
    for (rel, text) in &files {
        let path = dir.join(rel);
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        std::fs::write(&path, text).map_err(io(&path))?;
        written.push(path);
    }
    copy_tree(wit_dir, &dir.join("wit"), &mut written)?;
    Ok(written)
}

/// Copy the directory `from` to `to`, recursively (regular files and directories only).
fn copy_tree(from: &Path, to: &Path, written: &mut Vec<PathBuf>) -> Result<(), ScaffoldError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ScaffoldError::Io { path, source }
    };
    std::fs::create_dir_all(to).map_err(io(to))?;
    for entry in std::fs::read_dir(from).map_err(io(from))? {
        let entry = entry.map_err(io(from))?;
        let kind = entry.file_type().map_err(io(&entry.path()))?;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            copy_tree(&entry.path(), &target, written)?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &target).map_err(io(&target))?;
            written.push(target);
        }
    }
    Ok(())
}

const PY_APP: &str = r#""""A rawko tool plugin in Python: see README.md for how to build, pack and install it."""

import json

from componentize_py_types import Err
from wit_world import exports
from wit_world.exports import tools
from wit_world.imports.rawko_plugin_types import ToolSpec

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "Who to greet."},
        "from_file": {"type": "string", "description": "A file whose first line is added."},
    },
    "required": ["name"],
    "additionalProperties": False,
}


class Tools(exports.Tools):
    def list_tools(self) -> list[ToolSpec]:
        return [
            ToolSpec(
                name="{tool}",
                description="Greets someone by name, optionally with the first line of a file.",
                input_schema=json.dumps(SCHEMA),
            )
        ]

    def call(self, name: str, input: str, context: tools.CallContext) -> str:
        if name != "{tool}":
            raise Err(tools.ToolError_UnknownTool(name))
        args = json.loads(input)
        out = f"Hello, {args['name']}!"
        path = args.get("from_file")
        if path:
            if not path.startswith("/"):
                path = context.workspace + "/" + path
            try:
                with open(path) as f:
                    out += " " + f.readline().strip()
            except FileNotFoundError:
                raise Err(tools.ToolError_NotFound(path))
            except OSError as e:
                raise Err(tools.ToolError_Denied(f"{path}: {e}"))
        return out
"#;

const PY_README: &str = r#"# {name}

A rawko tool plugin in Python. `app.py` implements the `tools` interface of the `rawko:plugin`
WIT in `wit/`; `rawko-plugin.yaml` is its manifest.

Build it with componentize-py (`pip install componentize-py`), then embed the manifest and
install it:

```sh
componentize-py -d wit -w tool componentize app -o {name}.component.wasm
rawko plugin pack {name}.component.wasm --manifest rawko-plugin.yaml -o {name}.wasm && rawko plugin install {name}.wasm
```

Try it without installing: `rawko tool call {tool} --plugin {name}.wasm --read . --input '{"name": "world"}'`.
componentize-py imports `wasi:sockets` whatever the plugin does; rawko accepts that import and
denies every use of it, and `rawko plugin inspect {name}.wasm` lists it as denied.
"#;

const JS_APP: &str = r#"// A rawko tool plugin in JavaScript: see README.md for how to build, pack and install it.
const SCHEMA = {
  type: "object",
  properties: { name: { type: "string", description: "Who to greet." } },
  required: ["name"],
  additionalProperties: false,
};

export const tools = {
  listTools() {
    return [
      {
        name: "{tool}",
        description: "Greets someone by name.",
        inputSchema: JSON.stringify(SCHEMA),
      },
    ];
  },
  // Errors are the WIT's `tool-error` cases, thrown as { tag, val }.
  call(name, input, context) {
    if (name !== "{tool}") throw { tag: "unknown-tool", val: name };
    const args = JSON.parse(input);
    if (args.name.length === 0) throw { tag: "invalid-input", val: "a name is needed" };
    return `Hello, ${args.name}!`;
  },
};
"#;

const JS_README: &str = r#"# {name}

A rawko tool plugin in JavaScript. `app.js` exports the `tools` interface of the
`rawko:plugin` WIT in `wit/`; `rawko-plugin.yaml` is its manifest.

Build it with componentize-js (npx fetches `@bytecodealliance/componentize-js` the first time,
about a minute), then embed the manifest and install it:

```sh
{build} {name}.component.wasm
rawko plugin pack {name}.component.wasm --manifest rawko-plugin.yaml -o {name}.wasm && rawko plugin install {name}.wasm
```

Try it without installing: `rawko tool call {tool} --plugin {name}.wasm --input '{"name": "world"}'`.
The JavaScript runtime imports `wasi:http` whatever the plugin does; rawko accepts that import
and denies every use of it, and `rawko plugin inspect {name}.wasm` lists it as denied.
"#;

/// The files of a new `kind` plugin called `name` (relative path, content), with the SDK at
/// `sdk_path` (a TOML string).
fn files(kind: Kind, name: &str, sdk_path: &str) -> Vec<(&'static str, String)> {
    let camel = camel(name);
    let crate_name = name.replace('-', "_");
    let (feature, extra_deps) = match kind {
        Kind::Tool => (
            "tool",
            "serde = { version = \"1\", features = [\"derive\"] }\n\
             schemars = { version = \"1\", default-features = false, features = [\"derive\", \"std\"] }\n",
        ),
        Kind::Adapter => (
            "adapter",
            "serde = { version = \"1\", features = [\"derive\"] }\nserde_json = \"1\"\n",
        ),
        Kind::BashFilter => ("bash-filter", ""),
    };
    let cargo_toml = format!(
        r#"[package]
name = "{name}"
version = "0.1.0"
edition = "2024"
publish = false

[lib]
crate-type = ["cdylib"]

[dependencies]
# The guest SDK, from a rawko checkout (it finds the rawko:plugin WIT beside itself).
rawko-plugin-sdk = {{ path = {sdk_path}, features = ["{feature}"] }}
{extra_deps}
[profile.release]
lto = true
codegen-units = 1
strip = "debuginfo"

# A plugin is its own workspace, wherever it is created.
[workspace]
"#
    );
    let manifest_head = |description: &str| {
        format!(
            r#"# What rawko shows before installing this plugin; checked against the component itself.
name: {name}
version: 0.1.0
kinds: [{kind}]
description: "{description}"
# license: Apache-2.0
# publisher: Your Name <you@example.com>
# The rawko:plugin WIT versions this plugin works with.
wit: "^{wit}"
"#,
            wit = rawko_wit::VERSION
        )
    };
    let (manifest, lib, usage) = match kind {
        Kind::Tool => tool_files(name, &camel, &crate_name),
        Kind::Adapter => adapter_files(name, &camel),
        Kind::BashFilter => filter_files(name, &camel),
    };
    let readme = format!(
        r#"# {name}

A rawko {kind} plugin. Build it and install it:

```sh
cargo build --target wasm32-wasip2 --release
rawko plugin inspect target/wasm32-wasip2/release/{crate_name}.wasm
rawko plugin install target/wasm32-wasip2/release/{crate_name}.wasm
```

{usage}
`rawko-plugin.yaml` is the manifest rawko shows before installing (`rawko plugin inspect` reads
it from the built `.wasm`): declare every capability the plugin needs, with a reason. The user
grants some or all of them at install, and the plugin gets nothing else.
"#
    );
    vec![
        ("Cargo.toml", cargo_toml),
        (
            "rawko-plugin.yaml",
            manifest_head(&manifest.0) + &manifest.1,
        ),
        ("src/lib.rs", lib),
        ("README.md", readme),
    ]
}

/// A kind's manifest (description, the rest), `src/lib.rs`, and how to use it once installed.
type KindFiles = ((String, String), String, String);

fn tool_files(name: &str, tool: &str, crate_name: &str) -> KindFiles {
    let manifest = format!(
        r#"# Every capability needs a reason; the user sees it before granting. For example:
# capabilities:
#   fs.read:
#     ".": "reads the files an agent asks about"
#   fs.write:
#     "out": "writes its reports to out/"
capabilities: {{}}
provides:
  tools: [{tool}]
"#
    );
    let lib = format!(
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
    );
    let usage = format!(
        r#"Try it before installing, then call it as an agent would:

```sh
rawko tool call {tool} --plugin target/wasm32-wasip2/release/{crate_name}.wasm --input '{{"name": "world"}}'
rawko tool call {tool} --input '{{"name": "world"}}'
```
"#
    );
    ((format!("{tool} greets someone."), manifest), lib, usage)
}

fn adapter_files(name: &str, adapter: &str) -> KindFiles {
    let manifest = format!(
        r#"# Every capability needs a reason; the user sees it before granting. An adapter reaches the
# network only through rawko, and only the hosts granted here (a host without a port admits
# any port on it). rawko adds the API key from a granted variable to the requests itself.
capabilities:
  net.http:
    "api.example.com": "sends the conversation to the model's API"
  env:
    "EXAMPLE_API_KEY": "rawko adds this API key to the requests (the plugin never sees it)"
provides:
  adapters: [{name}]
"#
    );
    let lib = format!(
        r#"//! {name}: a rawko adapter plugin, a client for one model provider's API.
//!
//! It sends the conversation as JSON to `POST {{base_url}}/complete` and expects
//! `{{"text": "..."}}` back. Change `complete` to speak your provider's API: rawko sends the
//! request only to hosts the user granted, and adds the API key itself. If the provider has
//! embeddings, implement `Adapter::embed` as well; left out, it answers that there are none.

use rawko_plugin_sdk::adapter::{{Adapter, http}};
use rawko_plugin_sdk::llm::{{AdapterError, Content, Request, Response, StopReason, Usage}};

/// What the provider answers.
#[derive(serde::Deserialize)]
struct Reply {{
    text: String,
}}

pub struct {adapter};

impl Adapter for {adapter} {{
    fn complete(request: Request) -> Result<Response, AdapterError> {{
        let body = serde_json::json!({{
            "model": request.model,
            "system": request.system,
            "messages": request.messages,
        }});
        let url = format!("{{}}/complete", request.base_url.trim_end_matches('/'));
        let mut reply = http::Request::post(url).json(&body).send()?;
        if !reply.is_success() {{
            return Err(reply.error());
        }}
        let reply: Reply = serde_json::from_slice(&reply.read_all()?).map_err(|e| {{
            AdapterError::malformed(format!("the reply is not {{{{\"text\": ...}}}}: {{e}}"))
        }})?;
        Ok(Response {{
            content: vec![Content::text(reply.text)],
            stop_reason: StopReason::EndTurn,
            usage: Usage::default(),
            model: request.model,
        }})
    }}
}}

rawko_plugin_sdk::export_adapter!({adapter});
rawko_plugin_sdk::manifest!();
"#
    );
    let usage = format!(
        r#"Name it in an adapter instance of `config.yaml`, then ask it something:

```yaml
adapters:
  mine:
    plugin: {name}
    model: some-model
    base_url: https://api.example.com/v1
    api_key_env: EXAMPLE_API_KEY
```

```sh
rawko adapters check mine
rawko ask --adapter mine 'Say hello'
```
"#
    );
    (
        (format!("{adapter} talks to a model's API."), manifest),
        lib,
        usage,
    )
}

fn filter_files(name: &str, filter: &str) -> KindFiles {
    let manifest = format!(
        r#"# A bash filter gets no files, network or secrets; it only judges commands.
provides:
  filters: [{name}]
"#
    );
    let lib = format!(
        r#"//! {name}: a rawko bash-filter plugin. rawko asks every filter in the chain before it runs a
//! shell command; any deny wins.

use rawko_plugin_sdk::bash_filter::{{Command, CommandVerdict, Decision, Filter, Policy, Verdict}};

/// Programs this filter denies wherever they appear in a command line.
const DENIED: &[&str] = &["curl", "wget"];

pub struct {filter};

impl Filter for {filter} {{
    fn check(command: &Command, _policy: &Policy) -> Verdict {{
        // The host denies what no filter can judge; so does this one.
        if let Some(what) = command.unsupported.first() {{
            return Verdict::deny(format!("the command contains {{what}}"));
        }}
        let verdicts = command
            .commands
            .iter()
            .enumerate()
            .map(|(i, c)| {{
                let program = c.program.name.as_str();
                let denied = DENIED.contains(&program);
                CommandVerdict {{
                    index: i as u32,
                    decision: if denied {{ Decision::Deny }} else {{ Decision::Allow }},
                    rule: "{name}".into(),
                    reason: if denied {{
                        format!("{{program}} can reach the network")
                    }} else {{
                        "not on the list".into()
                    }},
                }}
            }})
            .collect();
        Verdict::from_commands(verdicts)
    }}
}}

rawko_plugin_sdk::export_filter!({filter});
rawko_plugin_sdk::manifest!();
"#
    );
    let usage = format!(
        r#"Name it in `config.yaml`, and every shell command is put to it:

```yaml
bash:
  filters: [{name}]
```

```sh
rawko bash check --read . --allow 'curl *' -- curl https://example.com
```
"#
    );
    (
        (format!("{filter} denies curl and wget."), manifest),
        lib,
        usage,
    )
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

    /// Every kind gets a crate enabling exactly its SDK feature, exporting its interface, and
    /// carrying a manifest that parses and names what it provides.
    #[test]
    fn every_kind_scaffolds_its_own_plugin() {
        let dir = tempfile::tempdir().unwrap();
        for (kind, export, provides) in [
            (Kind::Tool, "export_tools!(WordCount)", "WordCount"),
            (Kind::Adapter, "export_adapter!(WordCount)", "word-count"),
            (Kind::BashFilter, "export_filter!(WordCount)", "word-count"),
        ] {
            let out = dir.path().join(kind.as_str());
            let written = create(kind, "word-count", &out, &default_sdk()).unwrap();
            assert!(written.contains(&out.join("Cargo.lock")), "{written:?}");
            let read = |f: &str| std::fs::read_to_string(out.join(f)).unwrap();
            let cargo = read("Cargo.toml");
            assert!(
                cargo.contains(&format!("features = [\"{kind}\"]")),
                "{kind}: {cargo}"
            );
            let lib = read("src/lib.rs");
            assert!(lib.contains(export), "{kind}: {lib}");
            assert!(lib.contains("rawko_plugin_sdk::manifest!();"), "{kind}");
            let m = super::super::Manifest::parse(read("rawko-plugin.yaml").as_bytes())
                .unwrap_or_else(|e| panic!("{kind}: {e}"));
            assert_eq!(m.kinds, vec![kind]);
            let listed = match kind {
                Kind::Tool => &m.provides.tools,
                Kind::Adapter => &m.provides.adapters,
                Kind::BashFilter => &m.provides.filters,
            };
            assert_eq!(listed, &vec![provides.to_string()]);
            // An adapter's network import must be declared, or the install is refused.
            assert_eq!(
                m.requested()
                    .iter()
                    .any(|g| matches!(g, super::super::Grant::NetHttp(_))),
                kind == Kind::Adapter,
                "{kind}"
            );
            assert!(read("README.md").contains("rawko plugin install"), "{kind}");
        }
    }
}
