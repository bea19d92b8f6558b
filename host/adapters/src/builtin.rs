//! The adapter plugins rawko ships, and what the host must know about each that the plugin
//! cannot be trusted to say: how its credential goes on a request, where it lives by default,
//! and which endpoint answers a health check.

use reqwest::header::HeaderName;

use rawko_builtins::Builtin;
use rawko_capability::http::CredentialScheme;

/// How the host treats one built-in adapter plugin.
#[derive(Debug, Clone)]
pub struct BuiltinAdapter {
    pub plugin: Builtin,
    /// The API root when an instance names none.
    pub default_base_url: Option<&'static str>,
    /// The model when an instance names none.
    pub default_model: Option<&'static str>,
    /// The credential variable of the built-in instance of this name.
    pub default_key_env: Option<&'static str>,
    /// How its credential is sent.
    pub credential: CredentialScheme,
    /// A cheap GET, relative to the base URL, that shows the endpoint is reachable and the key
    /// accepted, with the headers the API requires on it.
    pub check: Option<(&'static str, &'static [(&'static str, &'static str)])>,
    /// Plays a recording instead of reaching the network.
    pub plays_recording: bool,
    /// Model names agents use for this provider's models (Claude Code's `sonnet`, `opus`,
    /// `haiku`) and the model id each means; a config's `model_aliases` entry wins.
    pub model_aliases: &'static [(&'static str, &'static str)],
}

/// Every built-in adapter plugin.
pub fn all() -> Vec<BuiltinAdapter> {
    vec![
        BuiltinAdapter {
            plugin: rawko_builtins::OPENAI,
            default_base_url: Some("https://api.openai.com/v1"),
            default_model: Some("gpt-4.1"),
            default_key_env: Some("OPENAI_API_KEY"),
            credential: CredentialScheme::Bearer,
            check: Some(("models", &[])),
            plays_recording: false,
            model_aliases: &[],
        },
        BuiltinAdapter {
            plugin: rawko_builtins::ANTHROPIC,
            default_base_url: Some("https://api.anthropic.com/v1"),
            default_model: Some("claude-sonnet-4-5"),
            default_key_env: Some("ANTHROPIC_API_KEY"),
            credential: CredentialScheme::Header(HeaderName::from_static("x-api-key")),
            check: Some(("models", &[("anthropic-version", "2023-06-01")])),
            plays_recording: false,
            model_aliases: &[
                ("sonnet", "claude-sonnet-4-5"),
                ("opus", "claude-opus-4-1"),
                ("haiku", "claude-haiku-4-5"),
            ],
        },
        BuiltinAdapter {
            plugin: rawko_builtins::REPLAY,
            default_base_url: None,
            default_model: Some("replay"),
            default_key_env: None,
            credential: CredentialScheme::Bearer,
            check: None,
            plays_recording: true,
            model_aliases: &[],
        },
    ]
}

/// The built-in adapter plugin called `name`.
pub fn find(name: &str) -> Option<BuiltinAdapter> {
    all().into_iter().find(|b| b.plugin.name == name)
}

/// The names of the built-in adapter plugins, for messages.
pub fn names() -> String {
    all()
        .iter()
        .map(|b| b.plugin.name)
        .collect::<Vec<_>>()
        .join(", ")
}
