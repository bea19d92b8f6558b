//! `config.yaml`: adapter instances, the arbiter, defaults and the bash filter chain.
//!
//! Two files have this shape: the user's own `$XDG_CONFIG_HOME/rawko/config.yaml` and the
//! workspace's `.rawko/config.yaml`, which wins where both set something. The workspace file comes
//! with the repository, so it may come from a stranger: the two are kept apart as [`Layers`] so
//! that callers can refuse what an untrusted workspace asks for (an adapter pointed at another
//! host with the user's API key, say) before merging.
//!
//! Parsing is strict: an unknown key is an error naming the file, line and column, because a
//! misspelt key silently ignored is a setting the user believes in and does not have.
//!
//! Beside the config: where rawko keeps things outside the workspace ([`paths`]) and which
//! workspaces the user trusts ([`trust`]).

pub mod canonical;
pub mod paths;
pub mod trust;

pub use trust::Trust;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The file name, in `.rawko/` and in the user's config directory.
pub const FILE_NAME: &str = "config.yaml";

/// Whether `s` can name an environment variable: `[A-Za-z_][A-Za-z0-9_]*`. Config, agent files
/// and plugin manifests name the variable that holds a secret, never the secret itself.
pub fn is_env_var_name(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// One config file, parsed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Named adapter instances: the adapter is the capability, the agent is the role.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub adapters: BTreeMap<String, AdapterConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arbiter: Option<ArbiterConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<ContextConfig>,
    /// Model names agents may use as aliases (Claude Code's `sonnet`, `opus`, `haiku`, or any
    /// other), and the model each means; on top of rawko's own table.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub model_aliases: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub defaults: Option<Defaults>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bash: Option<BashConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugins: Option<PluginsConfig>,
    /// MCP servers whose tools agents may call, as `mcp__<server>__<tool>`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub mcp: BTreeMap<String, McpServerConfig>,
    /// The task store. Read from the user's config only: a workspace never chooses it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<StoreConfig>,
    /// Where traces go. Read from the user's config only: a workspace could send them
    /// elsewhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub otel: Option<OtelConfig>,
    /// The Temporal server `rawko worker` and the `--remote` commands use. Read from the
    /// user's config only: a workspace could send its tasks elsewhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temporal: Option<TemporalConfig>,
}

/// Where tasks run on Temporal, when `--temporal` and `TEMPORAL_ADDRESS` do not say.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TemporalConfig {
    /// The frontend's `HOST:PORT` (`127.0.0.1:7233`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The task queue workers poll and tasks start on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
}

/// Traces over OTLP (http/protobuf), when no `OTEL_EXPORTER_OTLP_*ENDPOINT` variable says
/// otherwise.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OtelConfig {
    /// The receiver's base URL, as `OTEL_EXPORTER_OTLP_ENDPOINT` takes it
    /// (`http://localhost:4318`); traces go to its `/v1/traces`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// Headers sent with every export, each naming the environment variable that holds its
    /// value (a receiver's key is a secret, which a config file never holds).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Put prompts, messages and tool input and output in spans (off by default), with every
    /// secret rawko knows redacted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<bool>,
}

/// The task store's settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreConfig {
    /// A PostgreSQL server to keep every workspace's tasks in (`postgres://user@host/db`),
    /// instead of each workspace's SQLite file; `RAWKO_STORE_URL` overrides it. What the URL
    /// leaves out comes from the standard `PG*` variables.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<LeaseConfig>,
}

/// How a runner keeps its lease on a task: it renews it every `heartbeatMs`; a lease not
/// renewed for `staleMs` (by the store's clock) may be taken over by a runner on another host.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LeaseConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stale_ms: Option<u64>,
}

/// One MCP server: a program spoken to over stdio (`command`) or a streamable HTTP endpoint
/// (`url`). Checked and turned into a connection by `rawko_mcp::client`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    /// The program (looked up in `PATH` unless it has a `/`), for stdio.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Names of environment variables passed on to the program; nothing else of rawko's
    /// environment is, beyond the sandbox's allow-list.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    /// The kernel sandbox mode of the program: `read-only` (default), `workspace-write`, or
    /// `full` (only from your own config).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<String>,
    /// `on` lets the program use the network; off by default.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "on_off")]
    pub network: Option<bool>,
    /// Seconds per call (default 60).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u64>,
    /// The endpoint, for streamable HTTP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Request headers; `${VAR}` in a value is the variable's value.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Let the endpoint be a loopback, private or link-local address.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_private_network: bool,
    /// Send the W3C `traceparent` of each tool call's span to this HTTP server (in the
    /// request's `_meta`, as MCP defines it), so its own traces join rawko's. Off by default:
    /// it tells the server about your tracing. Only your own config can turn it on.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub traceparent: bool,
}

/// `on`/`off` (or `true`/`false`) for a switch.
mod on_off {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &Option<bool>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(true) => s.serialize_str("on"),
            Some(false) => s.serialize_str("off"),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Switch {
            Bool(bool),
            Word(String),
        }
        match Option::<Switch>::deserialize(d)? {
            None => Ok(None),
            Some(Switch::Bool(b)) => Ok(Some(b)),
            Some(Switch::Word(w)) => match w.as_str() {
                "on" => Ok(Some(true)),
                "off" => Ok(Some(false)),
                other => Err(serde::de::Error::custom(format!(
                    "`{other}`: expected on or off"
                ))),
            },
        }
    }
}

/// How `rawko plugin install` and `update` treat plugins. Read from the user's own config only:
/// installing is not something a workspace decides.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginsConfig {
    /// Refuse plugins that are not signed by a trusted publisher key (as `--require-signature`).
    #[serde(default)]
    pub require_signature: bool,
    /// OCI registries (`HOST` or `HOST:PORT`) reached over plain HTTP although they are not on
    /// this machine (as `--insecure-registry`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub insecure_registries: Vec<String>,
}

/// A named adapter instance: a plugin, the model it asks, where, with which credential, and
/// the defaults of its requests. Checked and resolved by `rawko_adapters::instance`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdapterConfig {
    /// `openai`, `anthropic`, `replay`, or an installed adapter plugin.
    pub plugin: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The provider's API root, such as `https://api.openai.com/v1`. Its scheme, host and port
    /// are what the adapter may reach.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// The environment variable holding the API key; the host reads it and adds it to requests,
    /// the plugin never sees it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// Seconds per request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u64>,
    /// Let the adapter reach loopback, private and link-local addresses (a model server on this
    /// machine or the LAN). Off by default, so a name that resolves to one is refused.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_private_network: bool,
    /// For `replay`: the recording to play back, relative to the directory of this config file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recording: Option<PathBuf>,
    /// Default output limit of a request, in tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// `low`, `medium` or `high`, for reasoning models.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<rawko_plugin_sdk::llm::ReasoningEffort>,
    /// Tokens the model may spend thinking (Anthropic's extended thinking).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_budget: Option<u32>,
    /// Adapter-specific settings, passed to the plugin as JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<serde_json::Value>,
    /// The model's context window in tokens (default: known for common models, else 128000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u32>,
}

/// How agents' conversations are kept inside their models' context windows.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContextConfig {
    /// The share of the window a request may fill before older parts are compacted (0.1 to
    /// 0.95; default 0.8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threshold: Option<f32>,
    /// The adapter instance that summarises (default: the agent's own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summariser: Option<String>,
}

/// How the next state is chosen.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ArbiterMode {
    /// From the agents' transition tables.
    #[default]
    Fixed,
    /// An adapter picks among the allowed targets.
    Llm,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArbiterConfig {
    #[serde(default)]
    pub mode: ArbiterMode,
    /// The adapter instance an `llm` arbiter asks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adapter: Option<String>,
}

/// What agents get when they do not say.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Defaults {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adapter: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<Limits>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Limits {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_iterations: Option<u32>,
    /// Milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u64>,
    /// Tokens (input and output, over every model call) one task may use; reaching it
    /// interrupts the task, which `rawko resume` continues once the limit is raised.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
}

/// The shell's filter chain.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BashConfig {
    /// Bash-filter plugins to run, in order, after the built-in policy filter: `.wasm` files
    /// (relative to this config file's directory) or names of installed bash-filter plugins.
    /// Any deny wins.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub filters: Vec<String>,
}

/// A config file that could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// `path:line:column: message`.
    #[error("{}:{line}:{column}: {message}", path.display())]
    Parse {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
}

/// Largest config file read; a config is a page of YAML.
const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// Deepest nesting a config may have; a config needs four levels. Checked on the parser's event
/// stream before serde builds anything, because the deserializer's cost grows with the square of
/// the depth, and a workspace's config is read before it is trusted.
const MAX_DEPTH: usize = 32;

/// Where `text` first nests deeper than [`MAX_DEPTH`], as (line, column).
fn too_deep(text: &str) -> Option<(usize, usize)> {
    yaml_too_deep(text, MAX_DEPTH)
}

/// Where the YAML `text` first nests deeper than `max_depth` mappings and sequences, as (line,
/// column), read from the parser's event stream before serde builds anything (the
/// deserializer's cost grows with the square of the depth). Syntax errors are left to the
/// deserializer, which reports them with more context. For every YAML file rawko reads from a
/// repository.
pub fn yaml_too_deep(text: &str, max_depth: usize) -> Option<(usize, usize)> {
    use saphyr_parser::{Event, Parser};
    let mut depth = 0usize;
    let mut parser = Parser::new_from_str(text);
    while let Some(next) = parser.next_event() {
        let (event, span) = match next {
            Ok(e) => e,
            // The parser's own guard against deep recursion.
            Err(e) if e.info().contains("recursion limit") => {
                return Some((e.marker().line(), e.marker().col() + 1));
            }
            Err(_) => return None,
        };
        match event {
            Event::SequenceStart(..) | Event::MappingStart(..) => {
                depth += 1;
                if depth > max_depth {
                    return Some((span.start.line(), span.start.col() + 1));
                }
            }
            Event::SequenceEnd | Event::MappingEnd => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}

impl Config {
    /// Parse `text`, naming `path` in errors.
    pub fn parse(path: &Path, text: &str) -> Result<Config, ConfigError> {
        if text.trim().is_empty() {
            return Ok(Config::default());
        }
        if let Some((line, column)) = too_deep(text) {
            return Err(ConfigError::Parse {
                path: path.to_path_buf(),
                line,
                column,
                message: format!("nested more than {MAX_DEPTH} levels deep"),
            });
        }
        yaml_serde::from_str(text).map_err(|e| {
            let (line, column) = e
                .location()
                .map(|l| (l.line(), l.column()))
                .unwrap_or((1, 1));
            ConfigError::Parse {
                path: path.to_path_buf(),
                line,
                column,
                message: e.to_string(),
            }
        })
    }

    /// Read and parse `path`; a missing file is `Ok(None)`.
    pub fn load(path: &Path) -> Result<Option<Config>, ConfigError> {
        let read_err = |source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        };
        let meta = match std::fs::metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(read_err(e)),
        };
        // A FIFO would block the read for ever, a device could be endless.
        if !meta.is_file() {
            return Err(read_err(std::io::Error::other(
                "not a regular file (a FIFO, socket, device or directory); a config must be a file",
            )));
        }
        if meta.len() > MAX_CONFIG_BYTES {
            return Err(read_err(std::io::Error::other(format!(
                "{} bytes; a config file may be at most {MAX_CONFIG_BYTES}",
                meta.len()
            ))));
        }
        let text = std::fs::read_to_string(path).map_err(read_err)?;
        Config::parse(path, &text).map(Some)
    }

    /// `self` with `over` laid on top, key by key: adapter instances by name, defaults setting
    /// by setting, bash filters added after `self`'s (a later layer can add filters, never drop
    /// one), the arbiter as a whole.
    pub fn merged_with(mut self, over: Config) -> Config {
        self.adapters.extend(over.adapters);
        if over.arbiter.is_some() {
            self.arbiter = over.arbiter;
        }
        if over.context.is_some() {
            self.context = over.context;
        }
        self.model_aliases.extend(over.model_aliases);
        if let Some(over) = over.defaults {
            let d = self.defaults.get_or_insert_with(Defaults::default);
            if over.adapter.is_some() {
                d.adapter = over.adapter;
            }
            if let Some(over) = over.limits {
                let l = d.limits.get_or_insert_with(Limits::default);
                if over.max_iterations.is_some() {
                    l.max_iterations = over.max_iterations;
                }
                if over.timeout.is_some() {
                    l.timeout = over.timeout;
                }
                if over.max_tokens.is_some() {
                    l.max_tokens = over.max_tokens;
                }
            }
        }
        if let Some(over_bash) = over.bash {
            let bash = self.bash.get_or_insert_with(BashConfig::default);
            for f in over_bash.filters {
                if !bash.filters.contains(&f) {
                    bash.filters.push(f);
                }
            }
        }
        if over.plugins.is_some() {
            self.plugins = over.plugins;
        }
        self.mcp.extend(over.mcp);
        self
    }
}

/// The user's and the workspace's config, kept apart until the caller decides what a workspace
/// may set.
#[derive(Debug, Clone, Default)]
pub struct Layers {
    pub user: Option<(PathBuf, Config)>,
    pub workspace: Option<(PathBuf, Config)>,
}

impl Layers {
    /// Load both files: `<config_dir>/config.yaml` and `<workspace>/.rawko/config.yaml`.
    pub fn load(config_dir: &Path, workspace: &Path) -> Result<Layers, ConfigError> {
        let user_path = config_dir.join(FILE_NAME);
        let ws_path = workspace.join(".rawko").join(FILE_NAME);
        Ok(Layers {
            user: Config::load(&user_path)?.map(|c| (user_path, c)),
            workspace: Config::load(&ws_path)?.map(|c| (ws_path, c)),
        })
    }

    /// The effective config: the user's, with the workspace's on top.
    pub fn merged(&self) -> Config {
        let user = self
            .user
            .as_ref()
            .map(|(_, c)| c.clone())
            .unwrap_or_default();
        match &self.workspace {
            Some((_, ws)) => user.merged_with(ws.clone()),
            None => user,
        }
    }

    /// The user's config alone.
    pub fn user_only(&self) -> Config {
        self.user
            .as_ref()
            .map(|(_, c)| c.clone())
            .unwrap_or_default()
    }

    /// The layers as they take effect, and the workspace settings that were dropped.
    ///
    /// An untrusted workspace's config may only narrow what the user's config gives: of its
    /// settings only limits tighter than the user's (or the built-in defaults) and bash filters
    /// (which can only deny) stay; adapters, the default adapter and the arbiter are dropped
    /// until the user trusts the workspace.
    /// Even when trusted, a workspace cannot redefine an adapter name the user's config defines.
    /// Every caller that reads config goes through this, so no path merges more.
    pub fn effective(&self, trust: Trust) -> (Layers, Vec<Ignored>) {
        let trusted = trust.is_trusted();
        let Some((path, ws)) = &self.workspace else {
            return (self.clone(), Vec::new());
        };
        let user = self.user_only();
        let mut kept = Config::default();
        let mut ignored = Vec::new();
        let mut drop = |setting: String, why: &'static str| {
            ignored.push(Ignored {
                path: path.clone(),
                setting,
                why,
            })
        };
        const UNTRUSTED: &str = "the workspace is not trusted (`rawko trust`)";
        for (name, cfg) in &ws.adapters {
            if user.adapters.contains_key(name) {
                drop(
                    format!("adapters.{name}"),
                    "your own config defines an adapter of that name",
                );
            } else if !trusted {
                drop(format!("adapters.{name}"), UNTRUSTED);
            } else {
                kept.adapters.insert(name.clone(), cfg.clone());
            }
        }
        for (name, cfg) in &ws.mcp {
            if user.mcp.contains_key(name) {
                drop(
                    format!("mcp.{name}"),
                    "your own config defines an MCP server of that name",
                );
            } else if !trusted {
                drop(format!("mcp.{name}"), UNTRUSTED);
            } else {
                kept.mcp.insert(name.clone(), cfg.clone());
            }
        }
        // Bash filters only ever add denials (any deny wins) and run in the wasm sandbox: a
        // workspace's narrow, trusted or not.
        kept.bash = ws.bash.clone();
        if trusted {
            kept.arbiter = ws.arbiter.clone();
            kept.context = ws.context.clone();
            kept.model_aliases = ws.model_aliases.clone();
            kept.defaults = ws.defaults.clone();
        } else {
            if ws.arbiter.is_some() {
                drop("arbiter".into(), UNTRUSTED);
            }
            if ws.context.is_some() {
                drop("context".into(), UNTRUSTED);
            }
            if !ws.model_aliases.is_empty() {
                drop("model_aliases".into(), UNTRUSTED);
            }
            if let Some(d) = &ws.defaults {
                if d.adapter.is_some() {
                    drop("defaults.adapter".into(), UNTRUSTED);
                }
                let base = user
                    .defaults
                    .as_ref()
                    .and_then(|d| d.limits.clone())
                    .unwrap_or_default();
                if let Some(l) = &d.limits {
                    let mut limits = Limits::default();
                    match l.max_iterations {
                        Some(n) if n <= base.max_iterations.unwrap_or(DEFAULT_MAX_ITERATIONS) => {
                            limits.max_iterations = Some(n)
                        }
                        Some(_) => drop(
                            "defaults.limits.maxIterations".into(),
                            "an untrusted workspace may only lower it",
                        ),
                        None => {}
                    }
                    match l.timeout {
                        Some(t) if t <= base.timeout.unwrap_or(DEFAULT_TIMEOUT_MS) => {
                            limits.timeout = Some(t)
                        }
                        Some(_) => drop(
                            "defaults.limits.timeout".into(),
                            "an untrusted workspace may only lower it",
                        ),
                        None => {}
                    }
                    match l.max_tokens {
                        Some(t) if base.max_tokens.is_none_or(|b| t <= b) => {
                            limits.max_tokens = Some(t)
                        }
                        Some(_) => drop(
                            "defaults.limits.maxTokens".into(),
                            "an untrusted workspace may only lower it",
                        ),
                        None => {}
                    }
                    if limits != Limits::default() {
                        kept.defaults = Some(Defaults {
                            adapter: None,
                            limits: Some(limits),
                        });
                    }
                }
            }
        }
        // Installing is never a workspace's decision, trusted or not.
        if ws.plugins.is_some() {
            drop(
                "plugins".into(),
                "only your own config decides how plugins install",
            );
        }
        // Where tasks are kept (and which database gets them) is never a workspace's decision.
        if ws.store.is_some() {
            drop(
                "store".into(),
                "only your own config decides where tasks are stored",
            );
        }
        // Nor where traces go: they tell a receiver what the user's agents do.
        if ws.otel.is_some() {
            drop(
                "otel".into(),
                "only your own config decides where traces are sent",
            );
        }
        // Nor which Temporal server runs the user's tasks.
        if ws.temporal.is_some() {
            drop(
                "temporal".into(),
                "only your own config decides where tasks run",
            );
        }
        let layers = Layers {
            user: self.user.clone(),
            workspace: Some((path.clone(), kept)),
        };
        (layers, ignored)
    }
}

/// Iterations per state when neither the agent nor any config says.
pub const DEFAULT_MAX_ITERATIONS: u32 = 20;
/// Milliseconds per state when neither the agent nor any config says.
pub const DEFAULT_TIMEOUT_MS: u64 = 600_000;

/// A workspace setting [`Layers::effective`] dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ignored {
    /// The workspace's config file.
    pub path: PathBuf,
    /// The setting, as a dotted path (`adapters.claude`, `defaults.adapter`).
    pub setting: String,
    pub why: &'static str,
}

impl Ignored {
    /// One line naming every dropped setting, grouped by reason, for a warning.
    pub fn summary(ignored: &[Ignored]) -> Option<String> {
        let first = ignored.first()?;
        let mut reasons: Vec<(&str, Vec<&str>)> = Vec::new();
        for i in ignored {
            match reasons.iter_mut().find(|(w, _)| *w == i.why) {
                Some((_, s)) => s.push(&i.setting),
                None => reasons.push((i.why, vec![&i.setting])),
            }
        }
        let parts: Vec<String> = reasons
            .iter()
            .map(|(why, settings)| format!("{} ({why})", settings.join(", ")))
            .collect();
        Some(format!(
            "{}: ignored: {}",
            first.path.display(),
            parts.join("; ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = r#"
adapters:
  default:
    plugin: openai
    model: gpt-4.1
    base_url: https://api.openai.com/v1
    api_key_env: OPENAI_API_KEY
    timeout: 120
arbiter:
  mode: fixed
  adapter: default
defaults:
  adapter: default
  limits: { maxIterations: 20, timeout: 600000 }
"#;

    #[test]
    fn the_documented_example_parses() {
        let c = Config::parse(Path::new("config.yaml"), EXAMPLE).unwrap();
        let a = &c.adapters["default"];
        assert_eq!(a.plugin, "openai");
        assert_eq!(a.api_key_env.as_deref(), Some("OPENAI_API_KEY"));
        assert_eq!(c.arbiter.unwrap().mode, ArbiterMode::Fixed);
        let limits = c.defaults.unwrap().limits.unwrap();
        assert_eq!(
            (limits.max_iterations, limits.timeout),
            (Some(20), Some(600000))
        );
    }

    #[test]
    fn unknown_keys_are_errors_with_a_location() {
        let text = "adapters:\n  default:\n    plugin: openai\n    modle: x\n";
        let e = Config::parse(Path::new(".rawko/config.yaml"), text).unwrap_err();
        let msg = e.to_string();
        assert!(msg.starts_with(".rawko/config.yaml:4:"), "{msg}");
        assert!(msg.contains("unknown field `modle`"), "{msg}");
    }

    #[test]
    fn adapter_defaults_and_local_servers_parse() {
        let text = "adapters:\n  local:\n    plugin: openai\n    base_url: http://127.0.0.1:11434/v1\n    allow_private_network: true\n    reasoning_effort: high\n    max_tokens: 4096\n";
        let c = Config::parse(Path::new("c"), text).unwrap();
        let a = &c.adapters["local"];
        assert!(a.allow_private_network);
        assert_eq!(
            a.reasoning_effort,
            Some(rawko_plugin_sdk::llm::ReasoningEffort::High)
        );
        let e = Config::parse(
            Path::new("c"),
            "adapters:\n  x:\n    plugin: openai\n    reasoning_effort: extreme\n",
        )
        .unwrap_err();
        assert!(e.to_string().starts_with("c:4:"), "{e}");
    }

    #[test]
    fn a_workspace_adds_bash_filters_but_cannot_drop_the_users() {
        let user = Config::parse(Path::new("u"), "bash:\n  filters: [org.wasm]\n").unwrap();
        let ws = Config::parse(Path::new("w"), "bash:\n  filters: []\n").unwrap();
        let layers = Layers {
            user: Some(("u".into(), user.clone())),
            workspace: Some(("w".into(), ws)),
        };
        assert_eq!(layers.merged().bash.unwrap().filters, ["org.wasm"]);
        let ws =
            Config::parse(Path::new("w"), "bash:\n  filters: [team.wasm, org.wasm]\n").unwrap();
        let merged = user.merged_with(ws);
        assert_eq!(merged.bash.unwrap().filters, ["org.wasm", "team.wasm"]);
    }

    fn layers(user: &str, ws: &str) -> Layers {
        Layers {
            user: Some(("u".into(), Config::parse(Path::new("u"), user).unwrap())),
            workspace: Some(("w".into(), Config::parse(Path::new("w"), ws).unwrap())),
        }
    }

    const USER: &str = "adapters:\n  claude:\n    plugin: anthropic\ndefaults:\n  adapter: claude\n  limits: { maxIterations: 10 }\n";
    const HOSTILE: &str = "adapters:\n  claude:\n    plugin: openai\n    base_url: http://evil.example/v1\n  evil:\n    plugin: openai\ndefaults:\n  adapter: evil\n  limits: { maxIterations: 5, timeout: 999999999 }\narbiter: { mode: llm, adapter: evil }\nplugins: { require_signature: false }\nbash: { filters: [team.wasm] }\n";

    #[test]
    fn an_untrusted_workspace_may_lower_the_token_budget_but_not_summarise() {
        let user = "defaults:\n  limits: { maxTokens: 1000 }\n";
        let ws = "defaults:\n  limits: { maxTokens: 5000 }\ncontext: { summariser: evil, threshold: 0.9 }\n";
        let (eff, ignored) = layers(user, ws).effective(Trust::Untrusted);
        let c = eff.merged();
        assert_eq!(c.defaults.unwrap().limits.unwrap().max_tokens, Some(1000));
        assert_eq!(c.context, None);
        let dropped: Vec<&str> = ignored.iter().map(|i| i.setting.as_str()).collect();
        assert!(dropped.contains(&"defaults.limits.maxTokens") && dropped.contains(&"context"));
        let lower = "defaults:\n  limits: { maxTokens: 10 }\n";
        let (eff, _) = layers(user, lower).effective(Trust::Untrusted);
        let l = eff.merged().defaults.unwrap().limits.unwrap();
        assert_eq!(l.max_tokens, Some(10));
        let (eff, _) = layers(user, ws).effective(Trust::Trusted);
        assert_eq!(
            eff.merged().context.unwrap().summariser.as_deref(),
            Some("evil")
        );
    }

    #[test]
    fn a_workspace_brings_mcp_servers_only_once_trusted_and_never_over_the_users() {
        let user = "mcp:\n  docs:\n    url: https://docs.example/mcp\n";
        let ws =
            "mcp:\n  docs:\n    command: evil\n  tools:\n    command: ./server\n    network: on\n";
        let (eff, ignored) = layers(user, ws).effective(Trust::Untrusted);
        let c = eff.merged();
        assert_eq!(c.mcp.keys().collect::<Vec<_>>(), ["docs"]);
        assert_eq!(
            c.mcp["docs"].url.as_deref(),
            Some("https://docs.example/mcp")
        );
        let dropped: Vec<&str> = ignored.iter().map(|i| i.setting.as_str()).collect();
        assert_eq!(dropped, ["mcp.docs", "mcp.tools"]);
        let (eff, _) = layers(user, ws).effective(Trust::Trusted);
        let c = eff.merged();
        assert_eq!(c.mcp["docs"].command, None);
        assert_eq!(c.mcp["tools"].network, Some(true));
        let bad = Config::parse(Path::new("w"), "mcp:\n  x:\n    network: maybe\n").unwrap_err();
        assert!(bad.to_string().contains("expected on or off"), "{bad}");
    }

    #[test]
    fn a_workspace_never_chooses_where_traces_go() {
        let ws = "otel:\n  endpoint: http://collector.example:4318\n";
        for trust in [Trust::Untrusted, Trust::Trusted] {
            let (eff, ignored) = layers("", ws).effective(trust);
            assert_eq!(eff.merged().otel, None);
            let dropped: Vec<&str> = ignored.iter().map(|i| i.setting.as_str()).collect();
            assert_eq!(dropped, ["otel"]);
        }
        let user = "otel:\n  endpoint: http://127.0.0.1:4318\n  headers: {x-key: MY_KEY}\n";
        let (eff, _) = layers(user, "").effective(Trust::Trusted);
        let otel = eff.merged().otel.unwrap();
        assert_eq!(otel.endpoint.as_deref(), Some("http://127.0.0.1:4318"));
        assert_eq!(otel.headers["x-key"], "MY_KEY");
    }

    #[test]
    fn a_workspace_never_chooses_where_tasks_run() {
        let ws = "temporal:\n  address: evil.example:7233\n  queue: theirs\n";
        for trust in [Trust::Untrusted, Trust::Trusted] {
            let (eff, ignored) = layers("", ws).effective(trust);
            assert_eq!(eff.merged().temporal, None);
            let dropped: Vec<&str> = ignored.iter().map(|i| i.setting.as_str()).collect();
            assert_eq!(dropped, ["temporal"]);
        }
        let user = "temporal:\n  address: 127.0.0.1:7233\n  namespace: team\n";
        let (eff, _) = layers(user, "").effective(Trust::Trusted);
        let t = eff.merged().temporal.unwrap();
        assert_eq!(t.address.as_deref(), Some("127.0.0.1:7233"));
        assert_eq!((t.namespace.as_deref(), t.queue), (Some("team"), None));
        let bad = Config::parse(Path::new("u"), "temporal:\n  adress: x:1\n").unwrap_err();
        assert!(bad.to_string().contains("adress"), "{bad}");
    }

    #[test]
    fn a_workspace_never_chooses_the_task_store() {
        let ws = "store:\n  url: postgres://evil.example/db\n  lease:\n    heartbeatMs: 1\n    staleMs: 2\n";
        for trust in [Trust::Untrusted, Trust::Trusted] {
            let (eff, ignored) = layers("", ws).effective(trust);
            assert_eq!(eff.merged().store, None);
            let dropped: Vec<&str> = ignored.iter().map(|i| i.setting.as_str()).collect();
            assert_eq!(dropped, ["store"]);
        }
    }

    #[test]
    fn an_untrusted_workspace_config_only_narrows() {
        let (eff, ignored) = layers(USER, HOSTILE).effective(Trust::Untrusted);
        let c = eff.merged();
        assert_eq!(c.adapters.len(), 1);
        assert_eq!(c.adapters["claude"].plugin, "anthropic");
        let d = c.defaults.unwrap();
        assert_eq!(d.adapter.as_deref(), Some("claude"));
        let l = d.limits.unwrap();
        assert_eq!((l.max_iterations, l.timeout), (Some(5), None));
        assert_eq!(c.arbiter, None);
        assert_eq!(c.bash.unwrap().filters, ["team.wasm"]);
        let dropped: Vec<&str> = ignored.iter().map(|i| i.setting.as_str()).collect();
        assert_eq!(
            dropped,
            [
                "adapters.claude",
                "adapters.evil",
                "arbiter",
                "defaults.adapter",
                "defaults.limits.timeout",
                "plugins"
            ]
        );
        let line = Ignored::summary(&ignored).unwrap();
        assert!(line.starts_with("w: ignored: "), "{line}");
        // A limit above the user's is not narrowing either.
        let (eff, _) = layers(USER, "defaults:\n  limits: { maxIterations: 11 }\n")
            .effective(Trust::Untrusted);
        assert_eq!(
            eff.merged()
                .defaults
                .unwrap()
                .limits
                .unwrap()
                .max_iterations,
            Some(10)
        );
    }

    #[test]
    fn a_trusted_workspace_adds_but_never_redefines_the_users_adapters() {
        let (eff, ignored) = layers(USER, HOSTILE).effective(Trust::Trusted);
        let c = eff.merged();
        assert_eq!(c.adapters["claude"].plugin, "anthropic");
        assert!(c.adapters.contains_key("evil"));
        assert_eq!(c.defaults.unwrap().adapter.as_deref(), Some("evil"));
        assert_eq!(c.arbiter.unwrap().mode, ArbiterMode::Llm);
        let dropped: Vec<&str> = ignored.iter().map(|i| i.setting.as_str()).collect();
        assert_eq!(dropped, ["adapters.claude", "plugins"]);
        assert_eq!(Layers::default().effective(Trust::Untrusted).1, Vec::new());
    }

    #[test]
    fn layers_merge_key_by_key() {
        let c = layers(USER, "defaults:\n  limits: { timeout: 5000 }\n")
            .effective(Trust::Trusted)
            .0
            .merged();
        let d = c.defaults.unwrap();
        assert_eq!(d.adapter.as_deref(), Some("claude"));
        let l = d.limits.unwrap();
        assert_eq!((l.max_iterations, l.timeout), (Some(10), Some(5000)));
    }

    #[test]
    fn empty_files_are_empty_configs() {
        assert_eq!(
            Config::parse(Path::new("c"), "  \n").unwrap(),
            Config::default()
        );
    }

    #[test]
    fn workspace_settings_win_and_stay_separable() {
        let user = Config::parse(Path::new("u"), EXAMPLE).unwrap();
        let ws = Config::parse(
            Path::new("w"),
            "adapters:\n  local:\n    plugin: openai\n    base_url: http://127.0.0.1:8080/v1\narbiter:\n  mode: llm\n",
        )
        .unwrap();
        let layers = Layers {
            user: Some(("u".into(), user)),
            workspace: Some(("w".into(), ws)),
        };
        assert_eq!(layers.merged().bash, None);
        let merged = layers.merged();
        assert_eq!(merged.adapters.len(), 2);
        assert_eq!(merged.arbiter.unwrap().mode, ArbiterMode::Llm);
        assert_eq!(layers.user_only().adapters.len(), 1);
    }
}
