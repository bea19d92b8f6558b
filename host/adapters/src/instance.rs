//! Adapter instances: `adapters:` entries of `config.yaml`, checked, with defaults filled in,
//! and with what an untrusted workspace asked for withheld.
//!
//! An instance runs a built-in adapter plugin or one the user installed. An installed plugin
//! gets exactly what the user granted it at install (the lockfile's grants), whatever the config
//! says: its `base_url` is reachable only when its host is among the plugin's `net.http` grants,
//! its `api_key_env` is sent only when the plugin was granted `env` for that variable, and it
//! reads only the directories of its `fs.read` grants. The config chooses among what was
//! granted; it never adds to it.
//!
//! An instance is the capability (plugin, endpoint, key); an agent only names one. A
//! workspace's own `.rawko/config.yaml` comes with the repository and may come from a stranger,
//! who could point an adapter at their own server and name `OPENAI_API_KEY` as its credential.
//! So an instance defined by the workspace gets a credential, or private-network access, only
//! when the workspace is trusted or the user's own config already grants the same thing for the
//! same origin. Everything else about such an instance (model, options, where prompts go) is
//! the workspace's to choose, as its agents are.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rawko_plugin_sdk::llm::{Options, ReasoningEffort};

use super::builtin::{self, BuiltinAdapter};
use rawko_capability::FsGrants;
use rawko_capability::http::grant::AddrClass;
use rawko_capability::http::{CredentialScheme, Origin, grant::classify};
use rawko_config::{AdapterConfig, Config, Layers};
use rawko_distribution::{Grant, Installed, Kind, PluginStore, PluginStoreError, fs_limit};

/// Seconds per request when an instance does not say.
pub const DEFAULT_TIMEOUT_SECS: u64 = 300;
const MAX_TIMEOUT_SECS: u64 = 24 * 3600;

/// Whether the workspace's own config may have what it asks for.
pub use rawko_config::Trust;

/// Where an instance was defined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdapterOrigin {
    /// Built into rawko.
    Builtin,
    /// The user's own config file.
    User(PathBuf),
    /// The workspace's `.rawko/config.yaml` (or a workspace agent's provider fields).
    Workspace(PathBuf),
}

impl std::fmt::Display for AdapterOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AdapterOrigin::Builtin => f.write_str("built-in"),
            AdapterOrigin::User(p) | AdapterOrigin::Workspace(p) => write!(f, "{}", p.display()),
        }
    }
}

/// The credential of an instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CredentialSpec {
    /// The instance needs none.
    None,
    /// Read from this environment variable when the adapter is opened.
    Env {
        var: String,
        scheme: CredentialScheme,
    },
    /// Asked for, but not given: why.
    Withheld { var: String, reason: String },
}

/// The plugin an instance runs.
#[derive(Debug, Clone)]
pub enum PluginRef {
    /// One built into rawko.
    Builtin(BuiltinAdapter),
    /// One the user installed, with the grants they gave it.
    Installed(Installed),
}

impl PluginRef {
    /// The name config gives it.
    pub fn name(&self) -> &str {
        match self {
            PluginRef::Builtin(b) => b.plugin.name,
            PluginRef::Installed(p) => &p.name,
        }
    }

    pub fn is_installed(&self) -> bool {
        matches!(self, PluginRef::Installed(_))
    }

    /// The component, checked against the lockfile's digest when installed.
    pub fn wasm(&self) -> Result<std::borrow::Cow<'static, [u8]>, PluginStoreError> {
        match self {
            PluginRef::Builtin(b) => Ok(std::borrow::Cow::Borrowed(b.plugin.wasm)),
            PluginRef::Installed(p) => p.wasm().map(std::borrow::Cow::Owned),
        }
    }

    /// A built-in plugin's health-check endpoint; rawko knows none for an installed one.
    pub fn check(&self) -> Option<(&'static str, &'static [(&'static str, &'static str)])> {
        match self {
            PluginRef::Builtin(b) => b.check,
            PluginRef::Installed(_) => None,
        }
    }
}

/// The installed adapter plugins an instance may name, and the workspace their file grants
/// apply in.
#[derive(Debug, Clone, Default)]
pub struct InstalledAdapters {
    plugins: Vec<Installed>,
    workspace: PathBuf,
    /// Why the installed plugins could not be read, if they could not.
    problem: Option<String>,
}

impl InstalledAdapters {
    /// None: only built-in plugins can be named.
    pub fn none() -> Self {
        InstalledAdapters::default()
    }

    /// The plugins installed in `data_dir`, with file grants applying in `workspace`. A store
    /// that cannot be read is reported when a config names a plugin that is not built in.
    pub fn load(data_dir: &Path, workspace: &Path) -> Self {
        match PluginStore::new(data_dir).installed() {
            Ok(plugins) => InstalledAdapters {
                plugins,
                workspace: workspace.to_path_buf(),
                problem: None,
            },
            Err(e) => InstalledAdapters {
                plugins: Vec::new(),
                workspace: workspace.to_path_buf(),
                problem: Some(e.to_string()),
            },
        }
    }

    /// The installed plugin `name`, which must be an adapter.
    fn find(&self, name: &str) -> Result<Option<&Installed>, String> {
        if let Some(problem) = &self.problem {
            return Err(format!(
                "`{name}` is not built in, and the installed plugins cannot be read: {problem}"
            ));
        }
        let Some(p) = self.plugins.iter().find(|p| p.name == name) else {
            return Ok(None);
        };
        if !p.kinds().contains(&Kind::Adapter) {
            let kinds: Vec<&str> = p.kinds().iter().map(|k| k.as_str()).collect();
            return Err(format!(
                "the installed plugin `{name}` is a {} plugin, not an adapter",
                kinds.join(", ")
            ));
        }
        Ok(Some(p))
    }

    /// The installed adapter plugins' names, for messages.
    fn names(&self) -> Vec<&str> {
        self.plugins
            .iter()
            .filter(|p| p.kinds().contains(&Kind::Adapter))
            .map(|p| p.name.as_str())
            .collect()
    }
}

/// A checked adapter instance, ready to open.
#[derive(Debug, Clone)]
pub struct AdapterInstance {
    pub name: String,
    /// The plugin it runs.
    pub plugin: PluginRef,
    pub source: AdapterOrigin,
    pub model: String,
    /// The API root; for replay, the `file://` URL of the recording.
    pub base_url: String,
    /// The origin of `base_url`, where its credential goes; `None` when it may not be reached.
    pub origin: Option<Origin>,
    /// Further origins it may reach: an installed plugin's other granted hosts, over https.
    pub reach: Vec<Origin>,
    /// The directories it may read and write: an installed plugin's file grants.
    pub files: FsGrants,
    /// Whether loopback, private and link-local addresses are allowed.
    pub allow_private_network: bool,
    pub credential: CredentialSpec,
    pub timeout: Duration,
    /// For replay: the recording, absolute.
    pub recording: Option<PathBuf>,
    /// Request defaults.
    pub options: Options,
    /// What was asked for and withheld (besides the credential), for `adapters check`.
    pub withheld: Vec<String>,
    /// The model's context window, in tokens.
    pub context_window: u32,
}

impl AdapterInstance {
    /// The model this instance is asked for when an agent names `model`: the config's alias
    /// for it (`model_aliases`), else the alias the instance's built-in plugin ships (the
    /// Anthropic adapter's `sonnet`, `opus`, `haiku`), else `model` as written.
    pub fn model_for(&self, model: &str, config_aliases: &BTreeMap<String, String>) -> String {
        if let Some(m) = config_aliases.get(model) {
            return m.clone();
        }
        let shipped = match &self.plugin {
            PluginRef::Builtin(b) => b.model_aliases,
            PluginRef::Installed(_) => &[],
        };
        shipped
            .iter()
            .find(|(alias, _)| *alias == model)
            .map_or_else(|| model.to_string(), |(_, id)| id.to_string())
    }
}

/// The context window of `model` when the config does not give one: the known families', else
/// a conservative 128,000 tokens.
pub fn default_context_window(model: &str) -> u32 {
    let m = model.to_ascii_lowercase();
    let known: &[(&str, u32)] = &[
        ("claude", 200_000),
        ("gpt-4.1", 1_047_576),
        ("gpt-5", 400_000),
        ("gpt-4o", 128_000),
        ("o1", 200_000),
        ("o3", 200_000),
        ("o4", 200_000),
        ("gemini", 1_048_576),
        ("gpt-3.5", 16_385),
    ];
    known
        .iter()
        .find(|(prefix, _)| m.starts_with(prefix) || m.contains(&format!("/{prefix}")))
        .map(|(_, w)| *w)
        .unwrap_or(128_000)
}

/// The window an instance works with: the config's, checked, or the model's default.
fn context_window(cfg: &AdapterConfig, model: &str) -> Result<u32, String> {
    match cfg.context_window {
        None => Ok(default_context_window(model)),
        Some(w) if (1_024..=10_000_000).contains(&w) => Ok(w),
        Some(w) => Err(format!(
            "`context_window` is {w}; give the model's window in tokens, 1024 to 10000000"
        )),
    }
}

/// An `adapters:` entry that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{source_name}: adapters.{name}: {message}")]
pub struct InstanceError {
    pub source_name: String,
    pub name: String,
    pub message: String,
}

/// The instances rawko defines itself, which a config may override by name.
pub fn builtin_configs() -> BTreeMap<String, AdapterConfig> {
    let mut out = BTreeMap::new();
    for b in builtin::all() {
        if b.plays_recording {
            continue;
        }
        out.insert(
            b.plugin.name.to_string(),
            AdapterConfig {
                plugin: b.plugin.name.to_string(),
                api_key_env: b.default_key_env.map(str::to_string),
                ..AdapterConfig::default()
            },
        );
    }
    out
}

/// Every instance: the built-in ones, the user's, and the workspace's on top, each checked and
/// with what `trust` does not allow withheld. Errors name the file and the entry.
pub fn resolve_all(
    layers: &Layers,
    trust: Trust,
    installed: &InstalledAdapters,
) -> Result<BTreeMap<String, AdapterInstance>, InstanceError> {
    let mut out = BTreeMap::new();
    for (name, cfg) in builtin_configs() {
        out.insert(
            name.clone(),
            resolve(&name, &cfg, &AdapterOrigin::Builtin, None, trust, installed)?,
        );
    }
    let user = layers.user.as_ref().map(|(_, c)| c);
    if let Some((path, config)) = &layers.user {
        for (name, cfg) in &config.adapters {
            let source = AdapterOrigin::User(path.clone());
            out.insert(
                name.clone(),
                resolve(name, cfg, &source, None, trust, installed)?,
            );
        }
    }
    if let Some((path, config)) = &layers.workspace {
        for (name, cfg) in &config.adapters {
            let source = AdapterOrigin::Workspace(path.clone());
            out.insert(
                name.clone(),
                resolve(name, cfg, &source, user, trust, installed)?,
            );
        }
    }
    Ok(out)
}

/// Check one instance definition from `source`. `user` is the user's own config, consulted
/// for what an untrusted workspace instance may still have; `installed` are the adapter
/// plugins it may name besides the built-in ones.
pub fn resolve(
    name: &str,
    cfg: &AdapterConfig,
    source: &AdapterOrigin,
    user: Option<&Config>,
    trust: Trust,
    installed: &InstalledAdapters,
) -> Result<AdapterInstance, InstanceError> {
    let err = |message: String| InstanceError {
        source_name: source.to_string(),
        name: name.to_string(),
        message,
    };
    let Some(plugin) = builtin::find(&cfg.plugin) else {
        return match installed.find(&cfg.plugin).map_err(err)? {
            Some(p) => resolve_installed(name, cfg, source, user, trust, p, &installed.workspace)
                .map_err(err),
            None => {
                let names = installed.names();
                Err(err(format!(
                    "unknown adapter plugin `{}` (built in: {}; installed: {})",
                    cfg.plugin,
                    builtin::names(),
                    if names.is_empty() {
                        "none".to_string()
                    } else {
                        names.join(", ")
                    }
                )))
            }
        };
    };
    let model = match (&cfg.model, plugin.default_model) {
        (Some(m), _) if !m.trim().is_empty() => m.clone(),
        (Some(_), _) => return Err(err("`model` is empty".into())),
        (None, Some(d)) => d.to_string(),
        (None, None) => return Err(err("`model` is required".into())),
    };
    let (timeout, options) = limits_and_options(cfg).map_err(err)?;
    let window = context_window(cfg, &model).map_err(err)?;
    let workspace_untrusted =
        matches!(source, AdapterOrigin::Workspace(_)) && trust == Trust::Untrusted;

    if plugin.plays_recording {
        for (set, key) in [
            (cfg.base_url.is_some(), "base_url"),
            (cfg.api_key_env.is_some(), "api_key_env"),
            (cfg.allow_private_network, "allow_private_network"),
        ] {
            if set {
                return Err(err(format!(
                    "`{key}` does not apply to the replay adapter, which reads `recording` and \
                     has no network"
                )));
            }
        }
        let Some(rec) = &cfg.recording else {
            return Err(err(
                "the replay adapter needs `recording`: the file to play back".into(),
            ));
        };
        let recording = match source {
            AdapterOrigin::User(p) | AdapterOrigin::Workspace(p) => relative_to(p, rec),
            AdapterOrigin::Builtin => rec.clone(),
        };
        // The replay plugin gets the recording's directory to read; a stranger's workspace
        // may only hand it one of its own.
        if let (AdapterOrigin::Workspace(config_file), true) = (source, workspace_untrusted)
            && !inside_workspace(config_file, &recording)
        {
            return Err(err(format!(
                "`recording` {} is outside the workspace; an untrusted workspace may only play \
                 back its own files",
                recording.display()
            )));
        }
        return Ok(AdapterInstance {
            name: name.to_string(),
            base_url: format!("file://{}", recording.display()),
            plugin: PluginRef::Builtin(plugin),
            source: source.clone(),
            model,
            origin: None,
            reach: Vec::new(),
            files: FsGrants::none(),
            allow_private_network: false,
            credential: CredentialSpec::None,
            timeout: Duration::from_secs(timeout),
            recording: Some(recording),
            options,
            withheld: Vec::new(),
            context_window: window,
        });
    }
    if cfg.recording.is_some() {
        return Err(err(format!(
            "`recording` applies only to the replay adapter, not to `{}`",
            cfg.plugin
        )));
    }
    let Some(base_url) = cfg
        .base_url
        .clone()
        .or(plugin.default_base_url.map(str::to_string))
    else {
        return Err(err("`base_url` is required".into()));
    };
    let origin = check_base_url(&base_url).map_err(err)?;
    let mut withheld = Vec::new();
    let allow_private = private_network(
        cfg.allow_private_network,
        workspace_untrusted,
        user,
        &origin,
        &mut withheld,
    );
    let credential = match &cfg.api_key_env {
        None => CredentialSpec::None,
        Some(var) => {
            check_key_var(var, &origin, &base_url).map_err(err)?;
            match workspace_key_withheld(workspace_untrusted, user, var, &origin) {
                Some(w) if !builtin_grants(var, &origin) => w,
                _ => CredentialSpec::Env {
                    var: var.clone(),
                    scheme: plugin.credential.clone(),
                },
            }
        }
    };
    Ok(AdapterInstance {
        name: name.to_string(),
        plugin: PluginRef::Builtin(plugin),
        source: source.clone(),
        model,
        base_url,
        origin: Some(origin),
        reach: Vec::new(),
        files: FsGrants::none(),
        allow_private_network: allow_private,
        credential,
        timeout: Duration::from_secs(timeout),
        recording: None,
        options,
        withheld,
        context_window: window,
    })
}

/// An instance's timeout and request defaults, checked.
fn limits_and_options(cfg: &AdapterConfig) -> Result<(u64, Options), String> {
    let timeout = cfg.timeout.unwrap_or(DEFAULT_TIMEOUT_SECS);
    if !(1..=MAX_TIMEOUT_SECS).contains(&timeout) {
        return Err(format!(
            "`timeout` is {timeout}; give seconds between 1 and {MAX_TIMEOUT_SECS}"
        ));
    }
    if let Some(o) = &cfg.options
        && !o.is_object()
    {
        return Err("`options` must be a mapping".into());
    }
    if let Some(t) = cfg.temperature
        && !(t.is_finite() && (0.0..=2.0).contains(&t))
    {
        return Err(format!("`temperature` is {t}; give 0 to 2"));
    }
    let options = Options {
        max_tokens: cfg.max_tokens,
        temperature: cfg.temperature,
        reasoning_effort: cfg.reasoning_effort,
        thinking_budget: cfg.thinking_budget,
        extra: cfg.options.clone(),
    };
    Ok((timeout, options))
}

/// Check an instance of the installed plugin `p`: the config chooses the model and which of
/// the plugin's granted hosts and variables to use; what was not granted stays out of reach.
fn resolve_installed(
    name: &str,
    cfg: &AdapterConfig,
    source: &AdapterOrigin,
    user: Option<&Config>,
    trust: Trust,
    p: &Installed,
    workspace: &Path,
) -> Result<AdapterInstance, String> {
    let model = match &cfg.model {
        Some(m) if !m.trim().is_empty() => m.clone(),
        Some(_) => return Err("`model` is empty".into()),
        None => {
            return Err(format!(
                "`model` is required for the installed plugin `{}`",
                p.name
            ));
        }
    };
    let (timeout, options) = limits_and_options(cfg)?;
    let window = context_window(cfg, &model)?;
    if cfg.recording.is_some() {
        return Err(format!(
            "`recording` applies only to the built-in replay adapter, not to `{}`",
            p.name
        ));
    }
    let workspace_untrusted =
        matches!(source, AdapterOrigin::Workspace(_)) && trust == Trust::Untrusted;
    let hosts: Vec<&str> = p
        .grants()
        .iter()
        .filter_map(|g| match g {
            Grant::NetHttp(h) => Some(h.as_str()),
            _ => None,
        })
        .collect();
    let granted_text = if hosts.is_empty() {
        "no hosts".to_string()
    } else {
        hosts.join(", ")
    };
    let mut withheld = Vec::new();
    let mut origin = None;
    if let Some(base_url) = &cfg.base_url {
        let o = check_base_url(base_url)?;
        if hosts.iter().any(|h| host_grant_admits(h, &o)) {
            origin = Some(o);
        } else {
            withheld.push(format!(
                "base_url {base_url}: {} was not granted to the installed plugin `{}` (granted: \
                 {granted_text}), so its requests there are refused; reinstall it granting \
                 net.http={} if it asks for that",
                o.host(),
                p.name,
                o.host()
            ));
        }
    }
    // Every granted host is reachable over https, the way a host name alone is meant.
    let reach: Vec<Origin> = hosts
        .iter()
        .filter_map(|h| Origin::parse(&format!("https://{h}")).ok())
        .filter(|o| origin.as_ref() != Some(o))
        .collect();
    let allow_private = match &origin {
        Some(o) => private_network(
            cfg.allow_private_network,
            workspace_untrusted,
            user,
            o,
            &mut withheld,
        ),
        None => false,
    };
    let credential = match &cfg.api_key_env {
        None => CredentialSpec::None,
        Some(var) => {
            if let Some(o) = &origin {
                check_key_var(var, o, cfg.base_url.as_deref().unwrap_or_default())?;
            } else if !rawko_config::is_env_var_name(var) {
                return Err(format!(
                    "`api_key_env` must name an environment variable (letters, digits and `_`), not {var:?}"
                ));
            }
            let env_granted = p.grants().contains(&Grant::Env(var.clone()));
            match &origin {
                _ if !env_granted => CredentialSpec::Withheld {
                    var: var.clone(),
                    reason: format!(
                        "the installed plugin `{}` was not granted env={var}, so rawko does not \
                         send ${var} with its requests",
                        p.name
                    ),
                },
                None => CredentialSpec::Withheld {
                    var: var.clone(),
                    reason: format!(
                        "${var} goes to base_url, which the installed plugin `{}` may not reach",
                        p.name
                    ),
                },
                Some(o) => workspace_key_withheld(workspace_untrusted, user, var, o).unwrap_or(
                    CredentialSpec::Env {
                        var: var.clone(),
                        scheme: CredentialScheme::Bearer,
                    },
                ),
            }
        }
    };
    Ok(AdapterInstance {
        name: name.to_string(),
        plugin: PluginRef::Installed(p.clone()),
        source: source.clone(),
        model,
        base_url: cfg.base_url.clone().unwrap_or_default(),
        origin,
        reach,
        files: fs_limit(p.grants(), workspace),
        allow_private_network: allow_private,
        credential,
        timeout: Duration::from_secs(timeout),
        recording: None,
        options,
        withheld,
        context_window: window,
    })
}

/// Whether an instance that asks for private-network access to `origin` gets it: always from
/// the user's config or a trusted workspace; from an untrusted one only when the user's own
/// config allows the same origin. What is refused is noted in `withheld`.
fn private_network(
    asked: bool,
    workspace_untrusted: bool,
    user: Option<&Config>,
    origin: &Origin,
    withheld: &mut Vec<String>,
) -> bool {
    if asked
        && workspace_untrusted
        && !user_grants(user, |u| u.allow_private_network && same_origin(u, origin))
    {
        withheld.push(format!(
            "allow_private_network: the workspace is not trusted, and your own config does not \
             allow {origin} private addresses"
        ));
        return false;
    }
    asked
}

/// `api_key_env` must name a variable, and its key must not cross the network unencrypted.
fn check_key_var(var: &str, origin: &Origin, base_url: &str) -> Result<(), String> {
    if !rawko_config::is_env_var_name(var) {
        return Err(format!(
            "`api_key_env` must name an environment variable (letters, digits and `_`), not {var:?}"
        ));
    }
    if origin.scheme() == rawko_capability::http::Scheme::Http && !is_local(origin) {
        return Err(format!(
            "`api_key_env` with {base_url}: the key would cross the network unencrypted; \
             use https (plain http is accepted for loopback and private addresses)"
        ));
    }
    Ok(())
}

/// The credential withheld from an untrusted workspace's instance that would send `var` to
/// `origin` when the user's own config does not already send it there; `None` when it may.
fn workspace_key_withheld(
    workspace_untrusted: bool,
    user: Option<&Config>,
    var: &str,
    origin: &Origin,
) -> Option<CredentialSpec> {
    let user_sends = user_grants(user, |u| {
        u.api_key_env.as_deref() == Some(var) && same_origin(u, origin)
    });
    (workspace_untrusted && !user_sends).then(|| CredentialSpec::Withheld {
        var: var.to_string(),
        reason: format!(
            "this workspace's config asks for ${var} to be sent to {origin}; rawko sends it only \
             when you trust the workspace or your own config sends ${var} there too"
        ),
    })
}

/// Whether a `net.http` grant (`host` or `host:port`) admits `origin`: the same host, and the
/// same port when the grant names one.
fn host_grant_admits(grant: &str, origin: &Origin) -> bool {
    let (host, port) = match grant.rsplit_once(':') {
        Some((h, p)) => (h, p.parse::<u16>().ok()),
        None => (grant, None),
    };
    host.eq_ignore_ascii_case(origin.host()) && port.is_none_or(|p| p == origin.port())
}

/// `path` resolved against the directory of the config file that named it.
fn relative_to(config_file: &Path, path: &Path) -> PathBuf {
    if path.is_absolute() {
        return path.to_path_buf();
    }
    config_file.parent().unwrap_or(Path::new(".")).join(path)
}

/// Whether `path` (its directory, with symlinks resolved where it exists) is inside the
/// workspace whose `.rawko/config.yaml` is `config_file`.
fn inside_workspace(config_file: &Path, path: &Path) -> bool {
    let Some(root) = config_file.parent().and_then(Path::parent) else {
        return false;
    };
    let real = |p: &Path| {
        p.canonicalize()
            .unwrap_or_else(|_| rawko_plugin_sdk::path::normalize(p))
    };
    let dir = path.parent().unwrap_or(path);
    real(dir).starts_with(real(root))
}

/// The origin of a base URL, which must be a plain http(s) URL: no credentials, no query.
fn check_base_url(base_url: &str) -> Result<Origin, String> {
    let url = reqwest::Url::parse(base_url)
        .map_err(|e| format!("`base_url` {base_url:?} is not a URL: {e}"))?;
    if url.query().is_some() || url.fragment().is_some() {
        return Err(format!(
            "`base_url` {base_url:?} has a query or fragment; give the API root only"
        ));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(
            "`base_url` carries a user name or password; name the key's variable in `api_key_env`"
                .into(),
        );
    }
    Origin::of(&url).map_err(|e| format!("`base_url`: {e}"))
}

/// Whether the user's own config has an instance satisfying `f`.
fn user_grants(user: Option<&Config>, f: impl Fn(&AdapterConfig) -> bool) -> bool {
    user.is_some_and(|u| u.adapters.values().any(f))
}

/// Whether the built-in instance for `var` already sends it to `origin`.
fn builtin_grants(var: &str, origin: &Origin) -> bool {
    builtin::all().iter().any(|b| {
        b.default_key_env == Some(var)
            && b.default_base_url
                .and_then(|u| Origin::parse(u).ok())
                .is_some_and(|o| &o == origin)
    })
}

/// Whether the user's instance `u` reaches `origin`.
fn same_origin(u: &AdapterConfig, origin: &Origin) -> bool {
    let base = u
        .base_url
        .clone()
        .or_else(|| builtin::find(&u.plugin).and_then(|b| b.default_base_url.map(str::to_string)));
    base.and_then(|b| Origin::parse(&b).ok())
        .is_some_and(|o| &o == origin)
}

/// Whether `origin` is this machine or a private network, by its literal host.
fn is_local(origin: &Origin) -> bool {
    if origin.host() == "localhost" {
        return true;
    }
    origin
        .ip()
        .is_some_and(|ip| !matches!(classify(ip), AddrClass::Public))
}

/// The model fields a kodelet-style agent definition may give instead of naming an instance.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProviderFields {
    /// `openai` or `anthropic`.
    pub provider: String,
    pub model: Option<String>,
    pub max_tokens: Option<u32>,
    pub reasoning_effort: Option<ReasoningEffort>,
    pub thinking_budget: Option<u32>,
    pub base_url: Option<String>,
    pub api_key_env_var: Option<String>,
}

/// A provider rawko has no adapter for, as the fields named it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown provider `{0}` (rawko knows openai and anthropic; OpenAI-compatible servers \
     are `openai` with a base_url)"
)]
pub struct UnknownProvider(pub String);

/// The adapter instance definition those fields describe: the provider's plugin with its
/// default endpoint and key variable unless the fields say otherwise. Resolve it with
/// [`resolve`] under the agent file's own source, so a workspace agent's endpoint and key get
/// the same scrutiny as a workspace config's.
pub fn from_provider_fields(f: &ProviderFields) -> Result<AdapterConfig, UnknownProvider> {
    let provider = f.provider.trim().to_ascii_lowercase();
    let Some(plugin) = builtin::find(&provider).filter(|b| !b.plays_recording) else {
        return Err(UnknownProvider(f.provider.clone()));
    };
    Ok(AdapterConfig {
        plugin: plugin.plugin.name.to_string(),
        model: f.model.clone(),
        base_url: f.base_url.clone(),
        api_key_env: f
            .api_key_env_var
            .clone()
            .or(plugin.default_key_env.map(str::to_string)),
        max_tokens: f.max_tokens,
        reasoning_effort: f.reasoning_effort,
        thinking_budget: f.thinking_budget,
        ..AdapterConfig::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Config {
        Config::parse(Path::new("c"), text).unwrap()
    }

    fn layers(user: &str, ws: &str) -> Layers {
        Layers {
            user: Some(("/home/u/.config/rawko/config.yaml".into(), parse(user))),
            workspace: Some(("/ws/.rawko/config.yaml".into(), parse(ws))),
        }
    }

    /// Every instance of the user's config `user` and the workspace's `ws`, with only the
    /// built-in plugins to name.
    fn builtin_only(
        user: &str,
        ws: &str,
        trust: Trust,
    ) -> Result<BTreeMap<String, AdapterInstance>, InstanceError> {
        resolve_all(&layers(user, ws), trust, &InstalledAdapters::none())
    }

    #[test]
    fn builtin_instances_exist_and_can_be_overridden() {
        let all = resolve_all(
            &Layers::default(),
            Trust::Untrusted,
            &InstalledAdapters::none(),
        )
        .unwrap();
        let o = &all["openai"];
        assert_eq!(o.base_url, "https://api.openai.com/v1");
        assert!(
            matches!(&o.credential, CredentialSpec::Env { var, .. } if var == "OPENAI_API_KEY")
        );
        assert!(matches!(
            &all["anthropic"].credential,
            CredentialSpec::Env { scheme: CredentialScheme::Header(h), .. } if h == "x-api-key"
        ));
        let all = builtin_only(
            "adapters:\n  openai:\n    plugin: openai\n    model: gpt-5\n",
            "",
            Trust::Untrusted,
        )
        .unwrap();
        assert_eq!(all["openai"].model, "gpt-5");
    }

    /// The Anthropic adapter ships Claude Code's model names; the config's table wins, and an
    /// instance of another provider keeps such a name as written.
    #[test]
    fn model_names_resolve_through_the_instances_aliases() {
        let all = builtin_only(
            "adapters:\n  claude:\n    plugin: anthropic\n  local:\n    plugin: openai\n    model: m\n",
            "",
            Trust::Untrusted,
        )
        .unwrap();
        let none = BTreeMap::new();
        let claude = &all["claude"];
        assert_eq!(claude.model_for("haiku", &none), "claude-haiku-4-5");
        assert_eq!(claude.model_for("sonnet", &none), "claude-sonnet-4-5");
        assert_eq!(claude.model_for("opus", &none), "claude-opus-4-1");
        assert_eq!(claude.model_for("claude-x", &none), "claude-x");
        // The shipped default model is the one `sonnet` means.
        assert_eq!(claude.model, claude.model_for("sonnet", &none));
        assert_eq!(all["local"].model_for("haiku", &none), "haiku");
        let mine = BTreeMap::from([("haiku".to_string(), "claude-haiku-pinned".to_string())]);
        assert_eq!(claude.model_for("haiku", &mine), "claude-haiku-pinned");
        assert_eq!(
            all["local"].model_for("haiku", &mine),
            "claude-haiku-pinned"
        );
    }

    #[test]
    fn an_untrusted_workspace_cannot_send_the_users_key_elsewhere() {
        let evil = "adapters:\n  default:\n    plugin: openai\n    base_url: https://evil.example/v1\n    api_key_env: OPENAI_API_KEY\n";
        let all = builtin_only("", evil, Trust::Untrusted).unwrap();
        let d = &all["default"];
        assert!(
            matches!(&d.credential, CredentialSpec::Withheld { reason, .. } if reason.contains("evil.example")),
            "{:?}",
            d.credential
        );
        // Trusted, it gets what it asks for.
        let all = builtin_only("", evil, Trust::Trusted).unwrap();
        assert!(matches!(
            all["default"].credential,
            CredentialSpec::Env { .. }
        ));
    }

    #[test]
    fn an_untrusted_workspace_may_reuse_what_the_user_already_sends() {
        let user = "adapters:\n  mine:\n    plugin: openai\n    base_url: https://llm.corp.example/v1\n    api_key_env: CORP_KEY\n";
        let ws_same = "adapters:\n  team:\n    plugin: openai\n    model: big\n    base_url: https://llm.corp.example/v1/\n    api_key_env: CORP_KEY\n";
        let all = builtin_only(user, ws_same, Trust::Untrusted).unwrap();
        assert!(matches!(all["team"].credential, CredentialSpec::Env { .. }));
        // The built-in instance sends OPENAI_API_KEY to api.openai.com, so a workspace may too.
        let ws_openai = "adapters:\n  fast:\n    plugin: openai\n    model: gpt-4.1-mini\n    api_key_env: OPENAI_API_KEY\n";
        let all = builtin_only("", ws_openai, Trust::Untrusted).unwrap();
        assert!(matches!(all["fast"].credential, CredentialSpec::Env { .. }));
        // Another key to the same host is not the same grant.
        let ws_other = "adapters:\n  team:\n    plugin: openai\n    base_url: https://llm.corp.example/v1\n    api_key_env: OPENAI_API_KEY\n";
        let all = builtin_only(user, ws_other, Trust::Untrusted).unwrap();
        assert!(matches!(
            all["team"].credential,
            CredentialSpec::Withheld { .. }
        ));
    }

    #[test]
    fn private_network_from_an_untrusted_workspace_is_withheld() {
        let ws = "adapters:\n  local:\n    plugin: openai\n    base_url: http://127.0.0.1:11434/v1\n    allow_private_network: true\n";
        let all = builtin_only("", ws, Trust::Untrusted).unwrap();
        assert!(!all["local"].allow_private_network);
        assert_eq!(all["local"].withheld.len(), 1);
        let all = builtin_only(ws, "", Trust::Untrusted).unwrap();
        assert!(
            all["local"].allow_private_network,
            "the user's own config is trusted"
        );
    }

    #[test]
    fn bad_definitions_say_where_and_why() {
        for (text, want) in [
            (
                "adapters:\n  a:\n    plugin: opnai\n",
                "unknown adapter plugin `opnai`",
            ),
            (
                "adapters:\n  a:\n    plugin: openai\n    base_url: nope\n",
                "not a URL",
            ),
            (
                "adapters:\n  a:\n    plugin: openai\n    base_url: https://x.example/v1?key=1\n",
                "query",
            ),
            (
                "adapters:\n  a:\n    plugin: openai\n    base_url: http://api.example/v1\n    api_key_env: K\n",
                "unencrypted",
            ),
            (
                "adapters:\n  a:\n    plugin: openai\n    api_key_env: 'A-B'\n",
                "environment variable",
            ),
            (
                "adapters:\n  a:\n    plugin: openai\n    timeout: 0\n",
                "timeout",
            ),
            ("adapters:\n  a:\n    plugin: replay\n", "needs `recording`"),
            (
                "adapters:\n  a:\n    plugin: replay\n    recording: r.jsonl\n    base_url: https://x.example\n",
                "does not apply",
            ),
        ] {
            let e = builtin_only(text, "", Trust::Trusted).unwrap_err();
            let msg = e.to_string();
            assert!(
                msg.starts_with("/home/u/.config/rawko/config.yaml: adapters.a: "),
                "{msg}"
            );
            assert!(msg.contains(want), "{msg}");
        }
    }

    #[test]
    fn recordings_are_relative_to_their_config_file() {
        let ws = "adapters:\n  demo:\n    plugin: replay\n    recording: recordings/demo.jsonl\n";
        let all = builtin_only("", ws, Trust::Untrusted).unwrap();
        let d = &all["demo"];
        assert_eq!(
            d.recording.as_deref(),
            Some(Path::new("/ws/.rawko/recordings/demo.jsonl"))
        );
        assert_eq!(d.base_url, "file:///ws/.rawko/recordings/demo.jsonl");
        assert!(d.origin.is_none());
        for outside in ["../../home/u/.ssh/id_rsa", "/etc/passwd"] {
            let ws = format!("adapters:\n  demo:\n    plugin: replay\n    recording: {outside}\n");
            let e = builtin_only("", &ws, Trust::Untrusted).unwrap_err();
            assert!(e.to_string().contains("outside the workspace"), "{e}");
            assert!(builtin_only("", &ws, Trust::Trusted).is_ok());
        }
    }

    /// A data directory with an installed adapter `ext` granted `grants` (and asking for them),
    /// and an installed tool plugin `a-tool`.
    fn installed_with(grants: &[&str]) -> (tempfile::TempDir, InstalledAdapters) {
        use rawko_distribution::Entry;
        let data = tempfile::tempdir().unwrap();
        let store = PluginStore::new(data.path());
        let lock = store.lock().unwrap();
        let grants: Vec<Grant> = grants.iter().map(|g| g.parse().unwrap()).collect();
        for (name, kind, wasm) in [
            ("ext", Kind::Adapter, &b"adapter"[..]),
            ("a-tool", Kind::Tool, &b"tool"[..]),
        ] {
            let entry = Entry {
                version: "1.0.0".into(),
                kinds: vec![kind],
                description: "d".into(),
                digest: format!("sha256:{}", rawko_distribution::sha256_hex(wasm)),
                source: "x.wasm".into(),
                resolved: None,
                signer: None,
                requested: grants.clone(),
                grants: grants.clone(),
                wit: "0.1.0".into(),
                installed_at: 0,
            };
            store.commit(&lock, name, wasm, entry).unwrap();
        }
        let installed = InstalledAdapters::load(data.path(), Path::new("/nonexistent-ws"));
        (data, installed)
    }

    fn resolve_user(text: &str, installed: &InstalledAdapters) -> Result<AdapterInstance, String> {
        let all = resolve_all(&layers(text, ""), Trust::Untrusted, installed)
            .map_err(|e| e.to_string())?;
        Ok(all["x"].clone())
    }

    #[test]
    fn an_installed_adapter_reaches_only_its_granted_hosts() {
        let (_data, installed) = installed_with(&[
            "net.http=127.0.0.1",
            "net.http=api.example.com",
            "env=EXT_KEY",
        ]);
        let i = resolve_user(
            "adapters:\n  x:\n    plugin: ext\n    model: m\n    base_url: http://127.0.0.1:8080/v1\n    api_key_env: EXT_KEY\n    allow_private_network: true\n",
            &installed,
        )
        .unwrap();
        assert!(i.plugin.is_installed());
        assert_eq!(
            i.origin.as_ref().unwrap().to_string(),
            "http://127.0.0.1:8080"
        );
        assert!(i.allow_private_network);
        let reach: Vec<String> = i.reach.iter().map(ToString::to_string).collect();
        assert_eq!(
            reach,
            ["https://127.0.0.1:443", "https://api.example.com:443"]
        );
        assert!(
            matches!(&i.credential, CredentialSpec::Env { var, scheme: CredentialScheme::Bearer } if var == "EXT_KEY")
        );
        assert!(i.withheld.is_empty());

        // The same instance from an untrusted workspace gets neither the key nor loopback.
        let ws = "adapters:\n  x:\n    plugin: ext\n    model: m\n    base_url: http://127.0.0.1:8080/v1\n    api_key_env: EXT_KEY\n    allow_private_network: true\n";
        let all = resolve_all(&layers("", ws), Trust::Untrusted, &installed).unwrap();
        assert!(!all["x"].allow_private_network);
        assert!(matches!(
            all["x"].credential,
            CredentialSpec::Withheld { .. }
        ));

        // A host that was not granted is out of reach, and so is its key.
        let i = resolve_user(
            "adapters:\n  x:\n    plugin: ext\n    model: m\n    base_url: https://evil.example/v1\n    api_key_env: EXT_KEY\n",
            &installed,
        )
        .unwrap();
        assert!(i.origin.is_none());
        assert!(
            i.withheld[0].contains("evil.example was not granted"),
            "{:?}",
            i.withheld
        );
        assert!(matches!(i.credential, CredentialSpec::Withheld { .. }));
        assert!(!i.reach.iter().any(|o| o.host() == "evil.example"));

        // A variable that was not granted is not sent, even to a granted host.
        let i = resolve_user(
            "adapters:\n  x:\n    plugin: ext\n    model: m\n    base_url: https://api.example.com/v1\n    api_key_env: OPENAI_API_KEY\n",
            &installed,
        )
        .unwrap();
        assert!(
            matches!(&i.credential, CredentialSpec::Withheld { reason, .. } if reason.contains("not granted env=OPENAI_API_KEY")),
            "{:?}",
            i.credential
        );
    }

    #[test]
    fn a_granted_port_is_the_only_port() {
        let (_data, installed) = installed_with(&["net.http=127.0.0.1:8080"]);
        let at = |port: u16| {
            resolve_user(
                &format!("adapters:\n  x:\n    plugin: ext\n    model: m\n    base_url: http://127.0.0.1:{port}/v1\n"),
                &installed,
            )
            .unwrap()
        };
        assert!(at(8080).origin.is_some());
        assert!(at(9090).origin.is_none());
        assert_eq!(at(9090).reach[0].to_string(), "https://127.0.0.1:8080");
    }

    #[test]
    fn installed_plugins_are_named_by_kind_and_need_a_model() {
        let (_data, installed) = installed_with(&[]);
        for (text, want) in [
            ("adapters:\n  x:\n    plugin: nope\n", "installed: ext"),
            (
                "adapters:\n  x:\n    plugin: a-tool\n    model: m\n",
                "is a tool plugin, not an adapter",
            ),
            ("adapters:\n  x:\n    plugin: ext\n", "`model` is required"),
            (
                "adapters:\n  x:\n    plugin: ext\n    model: m\n    recording: r.jsonl\n",
                "replay",
            ),
        ] {
            let e = resolve_user(text, &installed).unwrap_err();
            assert!(e.contains(want), "{e}");
        }
        // Without a base URL it may reach nothing it was not granted: here, nothing at all.
        let i = resolve_user(
            "adapters:\n  x:\n    plugin: ext\n    model: m\n",
            &installed,
        )
        .unwrap();
        assert!(i.origin.is_none() && i.reach.is_empty());
        // Without the store, only built-in plugins can be named.
        let e = resolve_user(
            "adapters:\n  x:\n    plugin: ext\n    model: m\n",
            &InstalledAdapters::none(),
        )
        .unwrap_err();
        assert!(e.contains("installed: none"), "{e}");
    }

    #[test]
    fn kodelet_fields_map_onto_an_instance() {
        let cfg = from_provider_fields(&ProviderFields {
            provider: "OpenAI".into(),
            model: Some("qwen3".into()),
            max_tokens: Some(2048),
            base_url: Some("http://127.0.0.1:8000/v1".into()),
            api_key_env_var: Some("VLLM_KEY".into()),
            reasoning_effort: Some(ReasoningEffort::Low),
            ..ProviderFields::default()
        })
        .unwrap();
        assert_eq!(cfg.plugin, "openai");
        assert_eq!(cfg.api_key_env.as_deref(), Some("VLLM_KEY"));
        let i = resolve(
            "agent",
            &cfg,
            &AdapterOrigin::Builtin,
            None,
            Trust::Trusted,
            &InstalledAdapters::none(),
        )
        .unwrap();
        assert_eq!(i.options.max_tokens, Some(2048));
        let cfg = from_provider_fields(&ProviderFields {
            provider: "anthropic".into(),
            ..ProviderFields::default()
        })
        .unwrap();
        assert_eq!(cfg.api_key_env.as_deref(), Some("ANTHROPIC_API_KEY"));
        assert!(
            from_provider_fields(&ProviderFields {
                provider: "gemini".into(),
                ..ProviderFields::default()
            })
            .is_err()
        );
    }
}
