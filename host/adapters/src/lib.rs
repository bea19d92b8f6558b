//! LLM adapters as the rest of rawko uses them: named instances from `config.yaml`, opened with
//! their plugin, their network grant and their credential, and asked for completions and, where
//! the plugin provides them, embeddings.
//!
//! [`instance`] checks configuration and decides what an instance may have; [`Adapter`] holds
//! what one instance needs across calls (its compiled plugin, its HTTP client and connection
//! pool, its sequence number, an optional [`record::Recorder`]); each completion still runs in
//! a fresh sandbox (see [`rawko_runtime::adapter`]).

pub mod builtin;
pub mod check;
pub mod instance;
pub mod record;

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use rawko_plugin_sdk::embeddings::{EmbedRequest, Embeddings};
use rawko_plugin_sdk::llm::{AdapterError, Message, Request, Response, ToolSpec};

pub use instance::{
    AdapterInstance, AdapterOrigin, CredentialSpec, InstalledAdapters, PluginRef, ProviderFields,
    Trust,
};
pub use record::Recorder;

use rawko_capability::http::{
    Credential, HttpClient, HttpGrant, HttpPolicy, HttpStats, Redactor, Secret,
};
use rawko_capability::{Access, FsGrants};
use rawko_runtime::adapter::AdapterCallContext;
use rawko_runtime::progress::{NoProgress, ProgressSink};
use rawko_runtime::{AdapterCallError, AdapterPlugin, Budget, Runtime, RuntimeError};

/// Credentials shorter than this are sent but not treated as secrets to redact: a short value
/// (a local server's placeholder key such as `ollama`) would garble every reply it appears in.
const MIN_REDACTED_SECRET: usize = 8;

/// Why an adapter could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error(
        "adapter {adapter}: the environment variable {var} is not set; it holds the API key \
         (set it, or change `api_key_env` in the adapter's config)"
    )]
    MissingCredential { adapter: String, var: String },
    #[error("adapter {adapter}: the API key in {var} is {problem}")]
    BadCredential {
        adapter: String,
        var: String,
        problem: String,
    },
    #[error("adapter {adapter}: {reason}")]
    Withheld { adapter: String, reason: String },
    #[error("adapter {adapter}: {message}")]
    Setup { adapter: String, message: String },
    #[error(transparent)]
    Load(#[from] RuntimeError),
}

/// How an adapter is opened beyond its instance settings.
#[derive(Debug, Clone, Default)]
pub struct OpenOptions {
    /// Overrides the instance's HTTP policy (tests shorten backoffs and caps).
    pub policy: Option<HttpPolicy>,
    /// Fixed name resolutions, checked against the grant like DNS answers.
    pub fixed_hosts: HashMap<String, Vec<IpAddr>>,
}

/// An adapter instance, opened: ready for completions.
pub struct Adapter {
    instance: AdapterInstance,
    plugin: AdapterPlugin,
    http: Option<Arc<HttpClient>>,
    files: FsGrants,
    sequence: AtomicU32,
    recorder: Option<Arc<Recorder>>,
    redactor: Redactor,
}

impl std::fmt::Debug for Adapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Adapter")
            .field("name", &self.instance.name)
            .field("plugin", &self.plugin.name())
            .finish_non_exhaustive()
    }
}

impl Adapter {
    /// Open `instance`: read its credential with `env` (the process environment, normally),
    /// load its plugin, and build its HTTP client. A missing or withheld credential is an error
    /// here, before anything is sent.
    pub async fn open(
        rt: &Runtime,
        instance: AdapterInstance,
        env: &dyn Fn(&str) -> Option<String>,
        options: OpenOptions,
    ) -> Result<Adapter, OpenError> {
        let adapter = instance.name.clone();
        let mut credentials = Vec::new();
        match &instance.credential {
            CredentialSpec::None => {}
            CredentialSpec::Withheld { reason, .. } => {
                return Err(OpenError::Withheld {
                    adapter,
                    reason: reason.clone(),
                });
            }
            CredentialSpec::Env { var, scheme } => {
                let value = env(var).unwrap_or_default();
                let value = value.trim();
                if value.is_empty() {
                    return Err(OpenError::MissingCredential {
                        adapter,
                        var: var.clone(),
                    });
                }
                if value.chars().any(|c| c.is_control() || c.is_whitespace()) {
                    return Err(OpenError::BadCredential {
                        adapter,
                        var: var.clone(),
                        problem:
                            "not a valid header value (it contains spaces or control characters)"
                                .into(),
                    });
                }
                // `origin` is set for every instance with a credential.
                if let Some(origin) = &instance.origin {
                    credentials.push(Credential {
                        origin: origin.clone(),
                        scheme: scheme.clone(),
                        secret: Secret::new(value.to_string()),
                    });
                }
            }
        }
        let mut grant = HttpGrant::none();
        if let Some(origin) = &instance.origin {
            grant.allow(origin.clone(), instance.allow_private_network);
        }
        for origin in &instance.reach {
            grant.allow(origin.clone(), false);
        }
        let http = if grant.is_empty() {
            None
        } else {
            let policy = options.policy.clone().unwrap_or(HttpPolicy {
                timeout: instance.timeout,
                ..HttpPolicy::default()
            });
            let client = HttpClient::new(grant, credentials.clone(), policy, options.fixed_hosts)
                .map_err(|e| OpenError::Setup {
                adapter: adapter.clone(),
                message: e.to_string(),
            })?;
            Some(Arc::new(client))
        };
        let mut files = instance.files.clone();
        if let Some(rec) = &instance.recording {
            let dir = rec.parent().unwrap_or(std::path::Path::new("/"));
            files
                .grant(dir, dir, Access::ReadOnly)
                .map_err(|e| OpenError::Setup {
                    adapter: adapter.clone(),
                    message: format!("the recording {}: {e}", rec.display()),
                })?;
        }
        let wasm = instance.plugin.wasm().map_err(|e| OpenError::Setup {
            adapter: adapter.clone(),
            message: e.to_string(),
        })?;
        let plugin = AdapterPlugin::load(rt, instance.plugin.name(), &wasm).await?;
        let redactor = Redactor::new(
            credentials
                .iter()
                .map(|c| &c.secret)
                .filter(|s| s.expose().len() >= MIN_REDACTED_SECRET),
        );
        Ok(Adapter {
            instance,
            plugin,
            http,
            files,
            sequence: AtomicU32::new(0),
            recorder: None,
            redactor,
        })
    }

    /// Write every exchange of this adapter to `recorder`.
    pub fn record_to(&mut self, recorder: Arc<Recorder>) {
        self.recorder = Some(recorder);
    }

    /// Number the next completion `n`: a resumed task has already kept `n` completions of this
    /// instance, and a replay instance must pick up at the exchange after them.
    pub fn continue_from(&self, n: u32) {
        self.sequence.store(n, Ordering::Relaxed);
    }

    pub fn instance(&self) -> &AdapterInstance {
        &self.instance
    }

    pub fn name(&self) -> &str {
        &self.instance.name
    }

    /// The HTTP client, for health checks; `None` for an adapter without network.
    pub fn http(&self) -> Option<&Arc<HttpClient>> {
        self.http.as_ref()
    }

    /// What the network did over this adapter's life.
    pub fn http_stats(&self) -> HttpStats {
        self.http.as_ref().map(|h| h.stats()).unwrap_or_default()
    }

    /// A request to this instance's model with its defaults: everything but the conversation.
    pub fn request(&self, system: &str, messages: Vec<Message>, tools: Vec<ToolSpec>) -> Request {
        Request {
            model: self.instance.model.clone(),
            base_url: self.instance.base_url.clone(),
            system: system.to_string(),
            messages,
            tools,
            options: self.instance.options.clone(),
            stream: true,
            sequence: 0,
        }
    }

    /// The sandbox budget of one completion: the request's own time, the retries' waits, and
    /// room for a second request.
    fn budget(&self) -> Budget {
        let policy = self
            .http
            .as_ref()
            .map(|h| h.policy().clone())
            .unwrap_or_default();
        Budget {
            timeout: policy.timeout * 2 + policy.retry_window + Duration::from_secs(5),
            output: policy.max_body,
            ..Budget::default()
        }
    }

    /// Ask for the model's next message. The request's sequence number is this adapter's
    /// count of completions; the exchange is recorded when a recorder is set.
    pub async fn complete(
        &self,
        rt: &Runtime,
        mut request: Request,
        progress: Arc<dyn ProgressSink>,
    ) -> Result<Response, AdapterCallError> {
        request.sequence = self.sequence.fetch_add(1, Ordering::Relaxed);
        let cx = AdapterCallContext {
            http: self.http.clone(),
            files: &self.files,
            progress,
            budget: self.budget(),
        };
        let result = self.plugin.complete(rt, &request, &cx).await;
        if let Some(rec) = &self.recorder {
            let recorded_error;
            let outcome = match &result {
                Ok(r) => Ok(r),
                // The reply was real; the agent loop answers the bad call.
                Err(AdapterCallError::InvalidToolCall { response, .. }) => Ok(&**response),
                Err(e) => {
                    recorded_error = e.as_adapter_error();
                    Err(&recorded_error)
                }
            };
            if let Err(e) = rec.record(self.name(), &request, outcome, &self.redactor) {
                tracing::warn!("cannot write the recording {}: {e}", rec.path().display());
            }
        }
        result.map_err(|e| self.redact_error(e))
    }

    /// Embed `inputs` with this instance's model at its base URL, through its network grant
    /// and with its credential, as [`Adapter::complete`] asks for completions: one vector per
    /// input, in order, all of one length (checked by the runtime). The caller keeps `inputs`
    /// within the provider's limits, batching where there are many.
    ///
    /// A plugin without embeddings (one built against `rawko:plugin@0.1.0`, or whose provider
    /// or model has none) answers [`AdapterError::Unsupported`]; a provider's error status is
    /// [`AdapterError::Status`] and an answer that is not one finite vector per input is
    /// [`AdapterError::Malformed`], as for completions. Embeddings are not recorded, and do
    /// not count as completions for the sequence numbers.
    pub async fn embed(
        &self,
        rt: &Runtime,
        inputs: Vec<String>,
    ) -> Result<Embeddings, AdapterCallError> {
        let request = EmbedRequest {
            model: self.instance.model.clone(),
            base_url: self.instance.base_url.clone(),
            inputs,
            dimensions: None,
        };
        let cx = AdapterCallContext {
            http: self.http.clone(),
            files: &self.files,
            progress: Arc::new(NoProgress),
            budget: self.budget(),
        };
        self.plugin
            .embed(rt, &request, &cx)
            .await
            .map_err(|e| self.redact_error(e))
    }

    /// Whether this instance's plugin exports embeddings at all (see
    /// [`AdapterPlugin::exports_embeddings`]).
    pub fn exports_embeddings(&self) -> bool {
        self.plugin.exports_embeddings()
    }

    /// Errors are shown and logged; they hold no secret.
    fn redact_error(&self, e: AdapterCallError) -> AdapterCallError {
        if self.redactor.is_empty() {
            return e;
        }
        let r = |s: &str| self.redactor.text(s).into_owned();
        match e {
            AdapterCallError::Adapter(a) => AdapterCallError::Adapter(match a {
                AdapterError::Transport { message } => AdapterError::Transport {
                    message: r(&message),
                },
                AdapterError::Status { status, message } => AdapterError::Status {
                    status,
                    message: r(&message),
                },
                AdapterError::Malformed { message } => AdapterError::Malformed {
                    message: r(&message),
                },
                AdapterError::Unsupported { message } => AdapterError::Unsupported {
                    message: r(&message),
                },
            }),
            AdapterCallError::Trap { message } => AdapterCallError::Trap {
                message: r(&message),
            },
            other => other,
        }
    }
}
