//! MCP servers as tools: `mcp__<server>__<tool>`.
//!
//! A server is a program spoken to over stdio, started in the kernel sandbox (read-only and no
//! network unless its config says otherwise, an environment of the sandbox's allow-list plus the
//! variables named), or a streamable HTTP endpoint reached through a client that refuses
//! loopback and private addresses unless granted. Whatever the server says is bounded: one
//! message from a stdio server is at most [`MAX_MESSAGE`] bytes, a list at most [`MAX_TOOLS`]
//! tools of [`MAX_DESCRIPTION`] characters, a result at most [`MAX_RESULT`] characters with
//! control characters escaped, and every request has a deadline. Arguments are checked against
//! the tool's input schema before they are sent.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use rawko_config::McpServerConfig;
use rawko_sandbox::Mode;
use rawko_sandbox::program::StderrTail;
use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ContentBlock, Implementation,
    InitializeRequestParams, PaginatedRequestParams, Tool,
};
use rmcp::service::{RoleClient, RunningService};
use tokio::io::{AsyncRead, ReadBuf};

use crate::consent::PrivateEndpoint;

/// Where the `traceparent` of the span a tool call runs in comes from, when traces are
/// exported: set once by the assembly that exports them.
static TRACE_CONTEXT: std::sync::OnceLock<Box<dyn Fn() -> Option<String> + Send + Sync>> =
    std::sync::OnceLock::new();

/// Say where the current span's W3C `traceparent` comes from, for the HTTP servers whose
/// config asks for it (`traceparent: true`). Only the first call takes effect.
pub fn set_trace_context(current: impl Fn() -> Option<String> + Send + Sync + 'static) {
    let _ = TRACE_CONTEXT.set(Box::new(current));
}

/// The prefix of every MCP tool's name.
pub const PREFIX: &str = "mcp__";
/// Tools one server may list.
pub const MAX_TOOLS: usize = 128;
/// Pages of a tool list read before the server is given up on.
const MAX_PAGES: usize = 16;
/// Characters of a tool's description kept.
pub const MAX_DESCRIPTION: usize = 2_000;
/// Bytes of a tool's input schema (as JSON) accepted.
pub const MAX_SCHEMA: usize = 64 << 10;
/// Characters of a result kept.
pub const MAX_RESULT: usize = 100_000;
/// Bytes of one message from a stdio server.
pub const MAX_MESSAGE: usize = 8 << 20;
/// Seconds per call when the config does not say.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// Time for a server to start and list its tools (or its own `timeout`, when shorter).
pub const START_TIMEOUT: Duration = Duration::from_secs(30);

/// A server as configured, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerSpec {
    pub name: String,
    pub transport: TransportSpec,
    /// Per call.
    pub timeout: Duration,
    pub source: Source,
    /// The loopback or private endpoint the user's consent admits this server at
    /// ([`ServerSpec::admit`]); its host name is pinned to those addresses.
    pub admitted: Option<PrivateEndpoint>,
}

/// Where a server is defined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The user's own config.
    User,
    /// A trusted workspace's `.rawko/config.yaml`.
    Workspace,
    /// A trusted workspace's `.mcp.json`.
    McpJson,
}

#[derive(Debug, Clone, PartialEq)]
pub enum TransportSpec {
    Stdio {
        command: String,
        args: Vec<String>,
        /// Variables passed on from rawko's environment, by name.
        env: Vec<String>,
        mode: Mode,
        network: bool,
    },
    Http {
        url: url::Url,
        /// Header values with `${VAR}` already filled in.
        headers: Vec<(String, String)>,
        allow_private_network: bool,
        /// Each call carries its span's `traceparent` ([`set_trace_context`]).
        traceparent: bool,
    },
}

impl ServerSpec {
    /// Check one server's config, from `source` (only the user's own config may ask for
    /// `sandbox: full`).
    pub fn from_config(
        name: &str,
        cfg: &McpServerConfig,
        source: Source,
    ) -> Result<ServerSpec, ConfigError> {
        let user_config = source == Source::User;
        if name.is_empty()
            || name.len() > 64
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            || name.contains("__")
        {
            return Err(format!(
                "MCP server name `{}`: use letters, digits, `-` and single `_` (at most 64)",
                rawko_text::line(name, 64)
            )
            .into());
        }
        let timeout = match cfg.timeout {
            Some(0) => return Err(format!("mcp.{name}.timeout must be at least 1 second").into()),
            Some(s) => Duration::from_secs(s.min(3_600)),
            None => DEFAULT_TIMEOUT,
        };
        let transport = match (&cfg.command, &cfg.url) {
            (Some(command), None) => {
                if command.trim().is_empty() {
                    return Err(format!("mcp.{name}.command is empty").into());
                }
                for var in &cfg.env {
                    if !rawko_config::is_env_var_name(var) {
                        return Err(format!(
                            "mcp.{name}.env: `{}` is not a variable name (list names; their values come from your environment)",
                            rawko_text::line(var, 64)
                        ).into());
                    }
                }
                let mode = match cfg.sandbox.as_deref() {
                    None => Mode::ReadOnly,
                    Some(m) => m
                        .parse::<Mode>()
                        .map_err(|e| format!("mcp.{name}.sandbox: {e}"))?,
                };
                if mode == Mode::Full && !user_config {
                    return Err(format!(
                        "mcp.{name}.sandbox: `full` is only honoured in your own config, not a workspace's"
                    ).into());
                }
                TransportSpec::Stdio {
                    command: command.clone(),
                    args: cfg.args.clone(),
                    env: cfg.env.clone(),
                    mode,
                    network: cfg.network.unwrap_or(false),
                }
            }
            (None, Some(url)) => {
                let url = url::Url::parse(url).map_err(|e| format!("mcp.{name}.url: {e}"))?;
                if !matches!(url.scheme(), "http" | "https") {
                    return Err(format!("mcp.{name}.url: only http and https").into());
                }
                if cfg.traceparent && !user_config {
                    return Err(format!(
                        "mcp.{name}.traceparent: only your own config may send your trace \
                         context to a server, not a workspace's"
                    )
                    .into());
                }
                if !cfg.args.is_empty() || !cfg.env.is_empty() || cfg.sandbox.is_some() {
                    return Err(format!(
                        "mcp.{name}: args, env and sandbox are for servers started with `command`"
                    )
                    .into());
                }
                let mut headers = Vec::new();
                for (k, v) in &cfg.headers {
                    headers.push((
                        k.clone(),
                        expand_vars(v).map_err(|e| format!("mcp.{name}.headers.{k}: {e}"))?,
                    ));
                }
                TransportSpec::Http {
                    url,
                    headers,
                    allow_private_network: cfg.allow_private_network,
                    traceparent: cfg.traceparent,
                }
            }
            (Some(_), Some(_)) => {
                return Err(format!("mcp.{name}: give either `command` or `url`, not both").into());
            }
            (None, None) => {
                return Err(format!(
                    "mcp.{name}: give `command` (a program spoken to over stdio) or `url` (streamable HTTP)"
                ).into());
            }
        };
        Ok(ServerSpec {
            name: name.to_string(),
            transport,
            timeout,
            source,
            admitted: None,
        })
    }

    /// Where an HTTP server's URL leads when that is loopback, private or link-local addresses
    /// only, and its config does not allow them: what the user must decide on before rawko
    /// reaches it. None for a stdio server, one allowed, one with a public address (only that
    /// is used), or one whose name does not resolve (connecting says why).
    pub async fn private_endpoint(&self) -> Option<PrivateEndpoint> {
        use rawko_capability::http::grant::{AddrClass, classify};
        let TransportSpec::Http {
            url,
            allow_private_network: false,
            ..
        } = &self.transport
        else {
            return None;
        };
        let origin = rawko_capability::http::Origin::of(url).ok()?;
        let found: Vec<IpAddr> = match origin.ip() {
            Some(ip) => vec![ip],
            None => tokio::time::timeout(
                Duration::from_secs(10),
                tokio::net::lookup_host((origin.host(), origin.port())),
            )
            .await
            .ok()?
            .ok()?
            .map(|a| a.ip())
            .collect(),
        };
        let mut addresses: Vec<IpAddr> = Vec::new();
        for ip in found {
            match classify(ip) {
                AddrClass::Public => return None,
                // Never an MCP server's, whatever anyone says: connecting refuses them.
                AddrClass::Reserved => {}
                AddrClass::Loopback | AddrClass::Private | AddrClass::LinkLocal => {
                    if !addresses.contains(&ip) {
                        addresses.push(ip);
                    }
                }
            }
        }
        (!addresses.is_empty()).then(|| PrivateEndpoint {
            url: url.to_string(),
            addresses,
        })
    }

    /// Reach this server at `endpoint` (the user consented to it there): its private addresses
    /// are admitted, and its host name leads to those addresses alone.
    pub fn admit(&mut self, endpoint: PrivateEndpoint) {
        self.admitted = Some(endpoint);
    }

    /// What the server is, for the consent record and messages: its command line or its URL
    /// (never a header value).
    pub fn identity(&self) -> String {
        match &self.transport {
            TransportSpec::Stdio {
                command,
                args,
                env,
                mode,
                network,
            } => format!(
                "stdio: {command} {} (sandbox {mode}, network {}, env [{}])",
                args.join(" "),
                if *network { "on" } else { "off" },
                env.join(", ")
            ),
            TransportSpec::Http { url, .. } => format!("http: {url}"),
        }
    }
}

/// Whether `cfg`, a server entry of the user's config, only adjusts the server of that name a
/// trusted workspace's `.mcp.json` defines: no `command` or `url`, only `allow_private_network`
/// and `timeout`. So the user can allow a repository's server on loopback without copying its
/// definition. An entry with neither that tries to set more is an error.
pub fn is_adjustment(name: &str, cfg: &McpServerConfig) -> Result<bool, ConfigError> {
    if cfg.command.is_some() || cfg.url.is_some() {
        return Ok(false);
    }
    let bare = McpServerConfig {
        allow_private_network: cfg.allow_private_network,
        timeout: cfg.timeout,
        ..McpServerConfig::default()
    };
    if *cfg == McpServerConfig::default() {
        // Nothing at all: checked as a definition, which says what is missing.
        return Ok(false);
    }
    if *cfg != bare {
        return Err(format!(
            "mcp.{name}: an entry without `command` or `url` only adjusts the server of that name \
             in a trusted workspace's .mcp.json (allow_private_network, timeout); give `command` \
             or `url` to define a server here"
        )
        .into());
    }
    Ok(true)
}

/// `cfg`, from a `.mcp.json`, with the user's adjustment `by` ([`is_adjustment`]) applied.
pub fn adjusted(mut cfg: McpServerConfig, by: &McpServerConfig) -> McpServerConfig {
    cfg.allow_private_network |= by.allow_private_network;
    if by.timeout.is_some() {
        cfg.timeout = by.timeout;
    }
    cfg
}

/// `${VAR}` in `text` replaced by the variable's value; a variable that is not set is an
/// error (a header sent without its secret would fail less clearly later).
pub fn expand_vars(text: &str) -> Result<String, ConfigError> {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            return Err("an unclosed `${`".into());
        };
        let (name, default) = match after[..end].split_once(":-") {
            Some((n, d)) => (n, Some(d)),
            None => (&after[..end], None),
        };
        if !rawko_config::is_env_var_name(name) {
            return Err(format!("`${{{}}}` is not a variable", rawko_text::line(name, 64)).into());
        }
        match (std::env::var(name), default) {
            (Ok(v), _) => out.push_str(&v),
            (Err(_), Some(d)) => out.push_str(d),
            (Err(_), None) => return Err(format!("${{{name}}} is not set").into()),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The servers of Claude Code's `.mcp.json` (`{"mcpServers": {NAME: {...}}}`), as rawko's own
/// config: `command`/`args`/`env` (values `${VAR}` name the variables passed on), or
/// `type: http` with `url` and `headers`. Their sandbox is the default (read-only, no
/// network).
pub fn from_mcp_json(text: &str) -> Result<BTreeMap<String, McpServerConfig>, ConfigError> {
    #[derive(serde::Deserialize)]
    struct File {
        #[serde(rename = "mcpServers", default)]
        servers: BTreeMap<String, Entry>,
    }
    #[derive(serde::Deserialize)]
    struct Entry {
        #[serde(rename = "type")]
        kind: Option<String>,
        command: Option<String>,
        #[serde(default)]
        args: Vec<String>,
        #[serde(default)]
        env: BTreeMap<String, String>,
        url: Option<String>,
        #[serde(default)]
        headers: BTreeMap<String, String>,
    }
    let file: File = serde_json::from_str(text).map_err(ConfigError::Json)?;
    let mut out = BTreeMap::new();
    for (name, e) in file.servers {
        // Claude Code fills `${VAR}` (and `${VAR:-default}`) in these from the environment.
        let shown = rawko_text::line(&name, 64).into_owned();
        let fill =
            |v: String| expand_vars(&v).map_err(|e| format!(".mcp.json: server `{shown}`: {e}"));
        let mut cfg = McpServerConfig {
            command: e.command.map(fill).transpose()?,
            args: e.args.into_iter().map(fill).collect::<Result<_, _>>()?,
            url: e.url.map(fill).transpose()?,
            headers: e.headers,
            ..McpServerConfig::default()
        };
        match e.kind.as_deref() {
            None | Some("stdio") | Some("http") | Some("streamable-http") => {}
            Some(other) => {
                return Err(format!(
                    ".mcp.json: server `{}`: transport `{}` is not supported (stdio or http)",
                    rawko_text::line(&name, 64),
                    rawko_text::line(other, 32)
                )
                .into());
            }
        }
        // `"env": {"TOKEN": "${TOKEN}"}` passes the user's TOKEN on; a literal value cannot be
        // given to a sandboxed program through rawko's allow-list, and is refused.
        for (k, v) in e.env {
            if v == format!("${{{k}}}") || v.is_empty() {
                cfg.env.push(k);
            } else {
                return Err(format!(
                    ".mcp.json: server `{}`: env `{}` must be \"${{{}}}\" (rawko passes variables from your environment by name)",
                    rawko_text::line(&name, 64),
                    rawko_text::line(&k, 64),
                    rawko_text::line(&k, 64)
                ).into());
            }
        }
        out.insert(name, cfg);
    }
    Ok(out)
}

/// A server entry (of rawko's config or a `.mcp.json`) that cannot be used as written: what is
/// wrong and where, with what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{0}")]
    Invalid(String),
    #[error(".mcp.json: {0}")]
    Json(#[source] serde_json::Error),
}

impl From<String> for ConfigError {
    fn from(message: String) -> Self {
        ConfigError::Invalid(message)
    }
}

impl From<&str> for ConfigError {
    fn from(message: &str) -> Self {
        ConfigError::Invalid(message.to_string())
    }
}

/// Why a server or a call failed.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    #[error("MCP server `{server}` could not start: {message}")]
    Start { server: String, message: String },
    #[error("MCP server `{server}`: {message}")]
    Protocol { server: String, message: String },
    #[error("MCP server `{server}` did not answer within {secs} s")]
    Timeout { server: String, secs: u64 },
    #[error("{0}")]
    BadInput(String),
}

/// A tool a server offers, as rawko offers it.
#[derive(Debug, Clone)]
pub struct RemoteTool {
    /// `mcp__<server>__<tool>`.
    pub name: String,
    /// The server's own name for it.
    pub remote: String,
    pub description: String,
    pub input_schema: serde_json::Value,
    validator: Arc<jsonschema::Validator>,
}

impl RemoteTool {
    /// A call's arguments (`input`, JSON text from the model; empty is `{}`) checked against the
    /// tool's input schema, as the object the server is sent.
    pub fn arguments(
        &self,
        input: &str,
    ) -> Result<serde_json::Map<String, serde_json::Value>, McpError> {
        let args: serde_json::Value =
            serde_json::from_str(if input.trim().is_empty() { "{}" } else { input }).map_err(
                |e| McpError::BadInput(format!("invalid input for {}: not JSON: {e}", self.name)),
            )?;
        if let Some(e) = self.validator.iter_errors(&args).next() {
            let at = e.instance_path().to_string();
            return Err(McpError::BadInput(format!(
                "invalid input for {}: {}{}",
                self.name,
                if at.is_empty() {
                    String::new()
                } else {
                    format!("at {at}: ")
                },
                rawko_text::line(&e.to_string(), 300)
            )));
        }
        // Every MCP input schema is an object schema, but the server's may not say so.
        let serde_json::Value::Object(map) = args else {
            return Err(McpError::BadInput(format!(
                "invalid input for {}: arguments must be a JSON object",
                self.name
            )));
        };
        Ok(map)
    }
}

/// How stdio servers are started.
#[derive(Debug, Clone)]
pub struct Launch {
    /// The `rawko` binary: the sandbox helper and the reaper.
    pub launcher: PathBuf,
    /// Without the kernel sandbox (`--no-sandbox`): under the reaper only.
    pub unconfined: bool,
    pub workspace: PathBuf,
    /// The directories of `PATH`.
    pub path_dirs: Vec<PathBuf>,
}

/// A connected server and its tools.
pub struct Connection {
    pub spec: ServerSpec,
    service: RunningService<RoleClient, InitializeRequestParams>,
    pub tools: Vec<RemoteTool>,
    /// Why some of the listed tools were left out.
    pub dropped: Vec<String>,
    stderr: StderrTail,
    _child: Option<tokio::process::Child>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("server", &self.spec.name)
            .field("tools", &self.tools.len())
            .finish()
    }
}

fn client_info() -> InitializeRequestParams {
    InitializeRequestParams::new(
        ClientCapabilities::default(),
        Implementation::new("rawko", env!("CARGO_PKG_VERSION")),
    )
}

/// The tools of a server's list (`tools/list`, every page, as the server sent them) rawko offers,
/// and why each other one is left out: a name that is empty, long or not `[A-Za-z0-9_.-]`, a
/// name listed twice, an input schema over [`MAX_SCHEMA`] bytes or that is no usable JSON Schema.
/// Descriptions are cut to [`MAX_DESCRIPTION`] bytes with control characters escaped.
pub fn admit_tools(server: &str, listed: Vec<Tool>) -> (Vec<RemoteTool>, Vec<String>) {
    let (mut tools, mut dropped) = (Vec::new(), Vec::new());
    let mut seen = std::collections::HashSet::new();
    for t in listed {
        let remote = t.name.to_string();
        let shown = rawko_text::line(&remote, 64).into_owned();
        if remote.is_empty()
            || remote.len() > 64
            || !remote
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        {
            dropped.push(format!("`{shown}`: not a usable tool name"));
            continue;
        }
        if !seen.insert(remote.clone()) {
            dropped.push(format!("`{shown}`: listed twice"));
            continue;
        }
        let schema = serde_json::Value::Object((*t.input_schema).clone());
        if schema.to_string().len() > MAX_SCHEMA {
            dropped.push(format!(
                "`{shown}`: its input schema is over {MAX_SCHEMA} bytes"
            ));
            continue;
        }
        let validator = match jsonschema::validator_for(&schema) {
            Ok(v) => v,
            Err(e) => {
                dropped.push(format!(
                    "`{shown}`: its input schema is not a usable JSON Schema ({})",
                    rawko_text::line(&e.to_string(), 200)
                ));
                continue;
            }
        };
        let description = t.description.as_deref().unwrap_or("");
        tools.push(RemoteTool {
            name: format!("{PREFIX}{server}__{remote}"),
            remote,
            description: rawko_text::block(description, MAX_DESCRIPTION).into_owned(),
            input_schema: schema,
            validator: Arc::new(validator),
        });
    }
    (tools, dropped)
}

/// A tool call's result (`tools/call`, as the server sent it) as rawko hands it on: its content
/// blocks as text (text as it is, other blocks named), or its structured content when there is
/// no text, cut to [`MAX_RESULT`] bytes with control characters escaped; and whether the server
/// says it is an error.
pub fn result_text(result: &CallToolResult) -> (String, bool) {
    let mut text = String::new();
    for block in &result.content {
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        match block {
            ContentBlock::Text(t) => text.push_str(&t.text),
            ContentBlock::Image(i) => text.push_str(&format!(
                "[image, {}, not shown]",
                rawko_text::line(&i.mime_type, 64)
            )),
            ContentBlock::Audio(a) => text.push_str(&format!(
                "[audio, {}, not shown]",
                rawko_text::line(&a.mime_type, 64)
            )),
            ContentBlock::ResourceLink(l) => {
                text.push_str(&format!("[resource {}]", rawko_text::line(&l.uri, 500)))
            }
            other => text.push_str(&format!(
                "[{} content, not shown]",
                serde_json::to_value(other)
                    .ok()
                    .and_then(|v| v.get("type").and_then(|t| t.as_str()).map(str::to_string))
                    .unwrap_or_else(|| "other".into())
            )),
        }
    }
    if text.is_empty()
        && let Some(s) = &result.structured_content
    {
        text = s.to_string();
    }
    let capped = rawko_text::block(&text, MAX_RESULT).into_owned();
    (capped, result.is_error.unwrap_or(false))
}

impl Connection {
    /// Start or reach the server, complete the handshake and read its tools, within
    /// [`START_TIMEOUT`].
    /// `tmp` is the server's private temporary directory (stdio servers).
    pub async fn connect(
        spec: &ServerSpec,
        launch: &Launch,
        tmp: &Path,
    ) -> Result<Connection, McpError> {
        let start = |message: String| McpError::Start {
            server: spec.name.clone(),
            message,
        };
        let stderr = StderrTail::default();
        let deadline = spec.timeout.min(START_TIMEOUT);
        let late = || McpError::Timeout {
            server: spec.name.clone(),
            secs: deadline.as_secs(),
        };
        let (service, child) = match &spec.transport {
            TransportSpec::Stdio { .. } => {
                let mut child = spawn(spec, launch, tmp).map_err(start)?;
                let stdout = child.stdout.take().expect("piped");
                let stdin = child.stdin.take().expect("piped");
                if let Some(err) = child.stderr.take() {
                    tokio::spawn(stderr.clone().keep(err));
                }
                let transport = (Capped::new(stdout, MAX_MESSAGE), stdin);
                let service = tokio::time::timeout(deadline, client_info().serve(transport))
                    .await
                    .map_err(|_| late())?
                    .map_err(|e| start(stderr.with(e.to_string())))?;
                (service, Some(child))
            }
            TransportSpec::Http {
                url,
                headers,
                allow_private_network,
                ..
            } => {
                let transport =
                    http_transport(url, headers, *allow_private_network, spec.admitted.as_ref())
                        .map_err(start)?;
                let service = tokio::time::timeout(deadline, client_info().serve(transport))
                    .await
                    .map_err(|_| late())?
                    .map_err(|e| {
                        start(match untrusted_certificate(&e) {
                            Some(why) => format!(
                                "{}:{}: the server's certificate is not trusted: {why}",
                                url.host_str().unwrap_or_default(),
                                url.port_or_known_default().unwrap_or(443)
                            ),
                            None => e.to_string(),
                        })
                    })?;
                (service, None)
            }
        };
        let mut c = Connection {
            spec: spec.clone(),
            service,
            tools: Vec::new(),
            dropped: Vec::new(),
            stderr,
            _child: child,
        };
        tokio::time::timeout(deadline, c.list())
            .await
            .map_err(|_| late())??;
        Ok(c)
    }

    /// Read the server's tool list, page by page, within the limits.
    async fn list(&mut self) -> Result<(), McpError> {
        let server = self.spec.name.clone();
        let protocol = |message: String| McpError::Protocol {
            server: server.clone(),
            message,
        };
        let mut listed = Vec::new();
        let mut cursor: Option<String> = None;
        for page in 0.. {
            if page == MAX_PAGES {
                return Err(protocol(format!(
                    "its tool list goes on past {MAX_PAGES} pages"
                )));
            }
            let params = cursor
                .take()
                .map(|c| PaginatedRequestParams::default().with_cursor(Some(c)));
            let r = self
                .service
                .peer()
                .list_tools(params)
                .await
                .map_err(|e| protocol(self.stderr.with(format!("tools/list: {e}"))))?;
            listed.extend(r.tools);
            if listed.len() > MAX_TOOLS {
                return Err(protocol(format!(
                    "it lists more than {MAX_TOOLS} tools; rawko takes at most {MAX_TOOLS} from one server"
                )));
            }
            match r.next_cursor {
                Some(c) => cursor = Some(c.to_string()),
                None => break,
            }
        }
        let (tools, dropped) = admit_tools(&self.spec.name, listed);
        self.tools.extend(tools);
        self.dropped.extend(dropped);
        for d in &self.dropped {
            tracing::warn!("MCP server `{}`: left out {d}", self.spec.name);
        }
        Ok(())
    }

    /// A digest of what the user consents to: the server's identity and its tools as listed,
    /// schemas in canonical form, so the same server gives the same fingerprint from every
    /// build of rawko.
    pub fn fingerprint(&self) -> String {
        use sha2::Digest;
        let mut h = sha2::Sha256::new();
        h.update(self.spec.identity().as_bytes());
        for t in &self.tools {
            h.update(b"\0");
            h.update(t.remote.as_bytes());
            h.update(b"\0");
            h.update(t.description.as_bytes());
            h.update(b"\0");
            h.update(rawko_config::canonical::to_string(&t.input_schema).as_bytes());
        }
        format!("{:x}", h.finalize())
    }

    /// Call `tool` (the full name) with `input` (JSON text) within `timeout`: the result's text
    /// capped and with control characters escaped, or why not. `Ok((text, is_error))`.
    pub async fn call(
        &self,
        tool: &str,
        input: &str,
        timeout: Option<Duration>,
    ) -> Result<(String, bool), McpError> {
        let Some(t) = self.tools.iter().find(|t| t.name == tool) else {
            return Err(McpError::BadInput(format!("no tool named `{tool}`")));
        };
        let map = t.arguments(input)?;
        let timeout = timeout.unwrap_or(self.spec.timeout);
        let mut params = CallToolRequestParams::new(t.remote.clone()).with_arguments(map);
        if let TransportSpec::Http {
            traceparent: true, ..
        } = &self.spec.transport
            && let Some(value) = TRACE_CONTEXT.get().and_then(|current| current())
        {
            let mut meta = rmcp::model::MetaObject::new();
            meta.set_traceparent(value);
            params.meta = Some(meta.into());
        }
        let result = tokio::time::timeout(timeout, self.service.peer().call_tool(params))
            .await
            .map_err(|_| McpError::Timeout {
                server: self.spec.name.clone(),
                secs: timeout.as_secs(),
            })?
            .map_err(|e| McpError::Protocol {
                server: self.spec.name.clone(),
                message: self.stderr.with(format!("tools/call {}: {e}", t.remote)),
            })?;
        Ok(result_text(&result))
    }

    /// Close the session and stop the server (its whole sandbox).
    pub async fn close(self) {
        let _ = self.service.cancel().await;
    }
}

/// The servers a session uses, connected, and those that could not be.
#[derive(Debug, Default)]
pub struct Servers {
    pub connected: Vec<Connection>,
    /// Servers left out, with why (failed to start, not approved).
    pub failed: Vec<(String, String)>,
    /// The servers' private temporary directory, removed with them.
    tmp: Option<rawko_shell::exec::TaskTmp>,
}

impl Servers {
    /// Connect to each of `specs` in turn; one that fails is listed in `failed`, not fatal.
    pub async fn connect(specs: &[ServerSpec], launch: &Launch) -> Servers {
        let mut s = Servers::default();
        if specs.is_empty() {
            return s;
        }
        let tmp = match rawko_shell::exec::TaskTmp::new() {
            Ok(t) => t,
            Err(e) => {
                for spec in specs {
                    s.failed.push((
                        spec.name.clone(),
                        format!("cannot make its temporary directory: {e}"),
                    ));
                }
                return s;
            }
        };
        for spec in specs {
            match Connection::connect(spec, launch, tmp.path()).await {
                Ok(c) => s.connected.push(c),
                Err(e) => s.failed.push((spec.name.clone(), e.to_string())),
            }
        }
        s.tmp = Some(tmp);
        s
    }

    /// Leave out the server `name` (not approved): its session closed, `why` recorded.
    pub async fn drop_server(&mut self, name: &str, why: String) {
        if let Some(i) = self.connected.iter().position(|c| c.spec.name == name) {
            self.connected.remove(i).close().await;
        }
        self.failed.push((name.to_string(), why));
    }

    /// Every tool of every connected server.
    pub fn tools(&self) -> impl Iterator<Item = (&Connection, &RemoteTool)> {
        self.connected
            .iter()
            .flat_map(|c| c.tools.iter().map(move |t| (c, t)))
    }

    /// The server and tool `name` (`mcp__<server>__<tool>`) stands for.
    pub fn find(&self, name: &str) -> Option<(&Connection, &RemoteTool)> {
        self.tools().find(|(_, t)| t.name == name)
    }

    /// Close every session and stop every server.
    pub async fn close(self) {
        for c in self.connected {
            c.close().await;
        }
    }
}

/// Start a stdio server's program: in the kernel sandbox with its mode, or (`--no-sandbox`,
/// mode `full`) under the reaper, with the allow-listed environment and the named variables.
fn spawn(spec: &ServerSpec, launch: &Launch, tmp: &Path) -> Result<tokio::process::Child, String> {
    let TransportSpec::Stdio {
        command,
        args,
        env,
        mode,
        network,
    } = &spec.transport
    else {
        unreachable!("stdio only")
    };
    let std_cmd = rawko_sandbox::program::Program {
        launcher: &launch.launcher,
        command,
        args,
        pass_env: env,
        mode: *mode,
        network: *network,
        unconfined: launch.unconfined,
        workspace: &launch.workspace,
        tmp,
        path_dirs: &launch.path_dirs,
        processes: None,
    }
    .command()
    .map_err(|e| e.to_string())?;
    let mut cmd = tokio::process::Command::from(std_cmd);
    cmd.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    cmd.spawn().map_err(|e| format!("{command}: {e}"))
}

/// The streamable HTTP transport: a client whose name lookups are checked against a grant of
/// the endpoint's origin alone (private addresses only when allowed, or at the `admitted`
/// endpoint's addresses alone), with no proxy and no redirects.
fn http_transport(
    url: &url::Url,
    headers: &[(String, String)],
    allow_private: bool,
    admitted: Option<&PrivateEndpoint>,
) -> Result<rmcp::transport::StreamableHttpClientTransport<reqwest::Client>, String> {
    use rawko_capability::http::grant::Denied;
    use rawko_capability::http::{HttpGrant, Origin};
    let origin = Origin::of(url).map_err(|e| e.to_string())?;
    let admitted = admitted.filter(|a| a.url == url.as_str());
    let private = allow_private || admitted.is_some();
    if let Some(ip) = origin.ip() {
        rawko_capability::http::grant::check_addr(origin.host(), ip, private).map_err(
            |e| match e {
                Denied::Address { host, addr, class } => format!(
                    "{host} is {class} address {addr}, which rawko reaches only when your \
                     config says allow_private_network or you approved the server there"
                ),
                other => other.to_string(),
            },
        )?;
    }
    let mut pinned = HashMap::new();
    if let Some(a) = admitted
        && origin.ip().is_none()
    {
        pinned.insert(origin.host().to_ascii_lowercase(), a.addresses.clone());
    }
    let mut grant = HttpGrant::none();
    grant.allow(origin, private);
    rawko_capability::tls::install_provider();
    let client = reqwest::Client::builder()
        .dns_resolver(rawko_capability::http::resolve::CheckedResolver::new(
            Arc::new(grant),
            pinned,
        ))
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .connect_timeout(Duration::from_secs(10))
        .user_agent(concat!("rawko/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| format!("cannot set up the HTTP client: {e}"))?;
    let mut custom = HashMap::new();
    for (k, v) in headers {
        let name = reqwest::header::HeaderName::from_bytes(k.as_bytes())
            .map_err(|e| format!("header `{}`: {e}", rawko_text::line(k, 64)))?;
        let value = reqwest::header::HeaderValue::from_str(v)
            .map_err(|e| format!("header `{}`: {e}", rawko_text::line(k, 64)))?;
        custom.insert(name, value);
    }
    let config =
        rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
            url.as_str().to_string(),
        )
        .custom_headers(custom);
    Ok(rmcp::transport::StreamableHttpClientTransport::with_client(
        client, config,
    ))
}

/// Why the server's certificate was not trusted, when that is why the handshake failed. The
/// transport's errors do not name their causes, so they are opened here.
fn untrusted_certificate(e: &rmcp::service::ClientInitializeError) -> Option<String> {
    use rmcp::service::ClientInitializeError as Init;
    use rmcp::transport::streamable_http_client::StreamableHttpError;
    match e {
        Init::TransportError { error, .. } => {
            let inner: &(dyn std::error::Error + 'static) = &*error.error;
            match inner.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
                Some(StreamableHttpError::Client(e)) => {
                    rawko_capability::tls::untrusted_certificate(e)
                }
                _ => rawko_capability::tls::untrusted_certificate(inner),
            }
        }
        Init::LegacyFallbackFailed { discover, fallback } => {
            untrusted_certificate(discover).or_else(|| untrusted_certificate(fallback))
        }
        _ => None,
    }
}

/// A reader that fails once a line runs past `max` bytes, so a server that never ends its
/// message cannot make rawko buffer without bound. Every byte a stdio server sends is read
/// through it.
pub struct Capped<R> {
    inner: R,
    max: usize,
    line: usize,
}

impl<R> Capped<R> {
    pub fn new(inner: R, max: usize) -> Self {
        Capped {
            inner,
            max,
            line: 0,
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Capped<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                let mut over = false;
                for &b in &buf.filled()[before..] {
                    if b == b'\n' {
                        this.line = 0;
                    } else {
                        this.line += 1;
                        over |= this.line > this.max;
                    }
                }
                if over {
                    // A failed read hands back nothing.
                    buf.set_filled(before);
                    return Poll::Ready(Err(std::io::Error::other(format!(
                        "a message longer than {} bytes",
                        this.max
                    ))));
                }
                Poll::Ready(Ok(()))
            }
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(yaml: &str) -> McpServerConfig {
        yaml_serde::from_str(yaml).unwrap()
    }

    #[test]
    fn a_server_is_a_command_or_a_url_with_sane_settings() {
        let s = ServerSpec::from_config(
            "fs",
            &cfg("command: npx\nargs: [-y, x]\n"),
            Source::Workspace,
        )
        .unwrap();
        assert!(matches!(
            s.transport,
            TransportSpec::Stdio {
                mode: Mode::ReadOnly,
                network: false,
                ..
            }
        ));
        assert_eq!(s.timeout, DEFAULT_TIMEOUT);
        for (yaml, why) in [
            ("{}", "give `command`"),
            ("command: a\nurl: http://x/", "not both"),
            (
                "command: a\nsandbox: full\n",
                "only honoured in your own config",
            ),
            ("command: a\nsandbox: wide\n", "unknown sandbox mode"),
            ("command: a\nenv: [\"A=B\"]\n", "not a variable name"),
            ("url: ftp://x/\n", "only http and https"),
            ("command: a\ntimeout: 0\n", "at least 1 second"),
        ] {
            let e = ServerSpec::from_config("s", &cfg(yaml), Source::McpJson)
                .unwrap_err()
                .to_string();
            assert!(e.contains(why), "{yaml}: {e}");
        }
        assert!(
            ServerSpec::from_config("s", &cfg("command: a\nsandbox: full\n"), Source::User).is_ok()
        );
        for bad in ["", "a b", "x__y", "é"] {
            assert!(
                ServerSpec::from_config(bad, &cfg("command: a"), Source::User).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_users_entry_without_command_or_url_only_adjusts_a_workspaces_server() {
        let by = cfg("allow_private_network: true\ntimeout: 9\n");
        assert_eq!(is_adjustment("web", &by).ok(), Some(true));
        let theirs = cfg("url: http://127.0.0.1:9/mcp\n");
        let both = adjusted(theirs.clone(), &by);
        assert!(both.allow_private_network);
        assert_eq!((&both.url, both.timeout), (&theirs.url, Some(9)));
        assert_eq!(is_adjustment("web", &theirs).ok(), Some(false));
        assert_eq!(is_adjustment("web", &cfg("{}")).ok(), Some(false));
        let more = is_adjustment("web", &cfg("allow_private_network: true\nargs: [x]\n"));
        assert!(more.unwrap_err().to_string().contains("only adjusts"));
    }

    #[tokio::test]
    async fn only_an_http_server_on_private_addresses_alone_needs_a_decision() {
        let spec =
            |yaml: &str| ServerSpec::from_config("web", &cfg(yaml), Source::McpJson).unwrap();
        let found = spec("url: http://127.0.0.1:8123/mcp\n")
            .private_endpoint()
            .await
            .unwrap();
        assert_eq!(found.url, "http://127.0.0.1:8123/mcp");
        assert_eq!(found.addresses, ["127.0.0.1".parse::<IpAddr>().unwrap()]);
        let by_name = spec("url: http://localhost:8123/mcp\n")
            .private_endpoint()
            .await
            .unwrap();
        assert!(
            by_name.addresses.iter().all(|a| a.is_loopback()),
            "{by_name:?}"
        );
        for decided in [
            "url: http://127.0.0.1:8123/mcp\nallow_private_network: true\n",
            "url: http://93.184.216.34/mcp\n",
            "url: http://0.0.0.0/mcp\n",
            "command: a\n",
        ] {
            assert_eq!(spec(decided).private_endpoint().await, None, "{decided}");
        }
    }

    #[test]
    fn variables_fill_header_values_and_a_missing_one_is_an_error() {
        // SAFETY: tests in this module do not read this variable concurrently.
        unsafe { std::env::set_var("RAWKO_MCP_TEST_TOKEN", "s3") };
        assert_eq!(
            expand_vars("Bearer ${RAWKO_MCP_TEST_TOKEN}").unwrap(),
            "Bearer s3"
        );
        assert_eq!(expand_vars("${RAWKO_MCP_UNSET_X:-d}").unwrap(), "d");
        assert!(
            expand_vars("${RAWKO_MCP_UNSET_X}")
                .unwrap_err()
                .to_string()
                .contains("not set")
        );
        assert!(expand_vars("${oops").is_err());
    }

    #[test]
    fn claude_codes_mcp_json_is_read_as_it_is() {
        let text = r#"{"mcpServers": {
            "everything": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-everything"], "env": {"TOKEN": "${TOKEN}"}},
            "docs": {"type": "http", "url": "https://docs.example/mcp", "headers": {"Authorization": "Bearer ${DOCS}"}}
        }}"#;
        let servers = from_mcp_json(text).unwrap();
        assert_eq!(servers["everything"].env, ["TOKEN"]);
        assert_eq!(
            servers["docs"].url.as_deref(),
            Some("https://docs.example/mcp")
        );
        let literal = r#"{"mcpServers": {"x": {"command": "a", "env": {"TOKEN": "abc"}}}}"#;
        assert!(
            from_mcp_json(literal)
                .unwrap_err()
                .to_string()
                .contains("must be")
        );
        let sse = r#"{"mcpServers": {"x": {"type": "sse", "url": "http://x/"}}}"#;
        assert!(
            from_mcp_json(sse)
                .unwrap_err()
                .to_string()
                .contains("not supported")
        );
    }

    #[tokio::test]
    async fn a_line_past_the_cap_is_an_error_and_shorter_ones_pass() {
        use tokio::io::AsyncReadExt;
        let data = b"short\nline\n".to_vec();
        let mut r = Capped::new(&data[..], 8);
        let mut out = Vec::new();
        r.read_to_end(&mut out).await.unwrap();
        assert_eq!(out, data);
        let long = [b'x'; 100];
        let mut r = Capped::new(&long[..], 8);
        let e = r.read_to_end(&mut Vec::new()).await.unwrap_err();
        assert!(e.to_string().contains("longer than 8 bytes"));
    }
}
