//! Adapter plugins: loading one, and asking it for a completion or for embeddings in a fresh
//! sandbox with the network its instance was granted.
//!
//! The runtime's part is the sandbox and the translation between the WIT types and the
//! provider-neutral ones in [`rawko_plugin_sdk::llm`] and [`rawko_plugin_sdk::embeddings`]. It
//! also checks every reply before anyone acts on it: a tool call must name a tool from the
//! request and carry a JSON object, a reply must say something, and embeddings must be one
//! finite vector per input, all of one length. Which grant, credential and timeout a call gets
//! is decided by the adapter instance (see the `rawko-adapters` crate).
//!
//! `llm` is every adapter's export; `embeddings` came with `rawko:plugin@0.1.1`, so an adapter
//! built against 0.1.0 loads without it and is answered `unsupported` when asked to embed.

use std::sync::Arc;
use std::time::Instant;

use rawko_plugin_sdk::embeddings::{EmbedRequest, EmbedUsage, Embeddings};
use rawko_plugin_sdk::llm::{
    AdapterError, Content, ReasoningEffort, Request, Response, Role, StopReason, Thinking,
    ToolCall, ToolResult, Usage,
};
use wasmtime::component::InstancePre;

use crate::bindings::embeddings as wit_embed;
use crate::bindings::llm as wit;
use crate::bindings::types::ToolSpec as WitToolSpec;
use crate::http::HttpCtx;
use crate::limits::{Budget, BudgetKind};
use crate::progress::{ProgressCtx, ProgressSink};
use crate::runtime::{Runtime, RuntimeError};
use crate::sandbox::{Failure, Sandbox};
use crate::state::HostState;
use rawko_capability::FsGrants;
use rawko_capability::http::HttpClient;

/// A loaded adapter plugin: compiled and linked, its exports found.
pub struct AdapterPlugin {
    name: Arc<str>,
    digest: String,
    pre: InstancePre<HostState>,
    llm: wit::GuestIndices,
    /// `None` for a plugin without the `embeddings` export (one built against 0.1.0).
    embeddings: Option<wit_embed::GuestIndices>,
}

impl std::fmt::Debug for AdapterPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdapterPlugin")
            .field("name", &self.name)
            .field("digest", &self.digest)
            .finish_non_exhaustive()
    }
}

/// What one completion may use.
#[derive(Clone)]
pub struct AdapterCallContext<'a> {
    /// The network, or `None` for none at all.
    pub http: Option<Arc<HttpClient>>,
    /// Files the plugin may read (the replay adapter's recording).
    pub files: &'a FsGrants,
    pub progress: Arc<dyn ProgressSink>,
    pub budget: Budget,
}

/// Why a completion failed. None of them stops the host.
#[derive(Debug, Clone, thiserror::Error)]
pub enum AdapterCallError {
    /// The adapter reported it: transport, provider status, malformed output, unsupported.
    #[error("{0}")]
    Adapter(AdapterError),
    /// The reply asks for a tool that does not exist or gives it input that is not a JSON
    /// object. The reply is kept, so the agent loop can tell the model what was wrong.
    #[error("the model called tool `{tool}` ({call_id}) wrongly: {message}")]
    InvalidToolCall {
        call_id: String,
        tool: String,
        message: String,
        response: Box<Response>,
    },
    #[error("the adapter was stopped: it exceeded its {kind} budget ({limit})")]
    Budget { kind: BudgetKind, limit: String },
    #[error("the adapter crashed: {message}")]
    Trap { message: String },
    #[error("cannot set up the sandbox for the adapter: {message}")]
    Sandbox { message: String },
}

impl AdapterCallError {
    /// A stable machine-readable code, for `--json` output and the audit log.
    pub fn code(&self) -> &'static str {
        match self {
            AdapterCallError::Adapter(e) => match e {
                AdapterError::Transport { .. } => "transport",
                AdapterError::Status { .. } => "status",
                AdapterError::Malformed { .. } => "malformed",
                AdapterError::Unsupported { .. } => "unsupported",
            },
            AdapterCallError::InvalidToolCall { .. } => "invalid_tool_call",
            AdapterCallError::Budget { kind, .. } => kind.code(),
            AdapterCallError::Trap { .. } => "trap",
            AdapterCallError::Sandbox { .. } => "sandbox",
        }
    }

    /// What a recording keeps of this failure.
    pub fn as_adapter_error(&self) -> AdapterError {
        match self {
            AdapterCallError::Adapter(e) => e.clone(),
            other => AdapterError::malformed(other.to_string()),
        }
    }
}

impl AdapterPlugin {
    /// Compile (or load from the cache) and link an adapter plugin.
    pub async fn load(
        rt: &Runtime,
        name: &str,
        wasm: &[u8],
    ) -> Result<AdapterPlugin, RuntimeError> {
        let fail = |message: String| RuntimeError::Load {
            plugin: name.to_string(),
            message,
        };
        let (compiled, pre) = rt.link(name, wasm, rt.adapter_linker())?;
        let llm = wit::GuestIndices::new(&pre).map_err(|e| {
            fail(format!(
                "is not an adapter plugin (no `rawko:plugin/llm@{}` export): {e:#}",
                rawko_wit::VERSION
            ))
        })?;
        let embeddings = match wit_embed::GuestIndices::new(&pre) {
            Ok(indices) => Some(indices),
            Err(e) => {
                tracing::debug!(plugin = name, "the adapter has no embeddings: {e:#}");
                None
            }
        };
        Ok(AdapterPlugin {
            name: name.into(),
            digest: compiled.digest,
            pre,
            llm,
            embeddings,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// SHA-256 of the component's bytes.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// Whether the plugin exports `embeddings` at all. One that does may still answer
    /// `unsupported` for its provider or model; one that does not always gets that answer from
    /// [`AdapterPlugin::embed`].
    pub fn exports_embeddings(&self) -> bool {
        self.embeddings.is_some()
    }

    /// A fresh sandbox for one call, with the files, network and progress sink `cx` gives.
    fn sandbox(
        &self,
        rt: &Runtime,
        cx: &AdapterCallContext<'_>,
        budget: Budget,
    ) -> Result<Sandbox, AdapterCallError> {
        let mut sandbox = Sandbox::new(rt, &self.name, cx.files, budget).map_err(|e| {
            AdapterCallError::Sandbox {
                message: e.to_string(),
            }
        })?;
        let state = sandbox.state_mut();
        state.http = cx.http.clone().map(HttpCtx::new).unwrap_or_default();
        state.progress = ProgressCtx::new(cx.progress.clone());
        Ok(sandbox)
    }

    /// Ask for the model's next message, in a fresh sandbox built from `cx`.
    pub async fn complete(
        &self,
        rt: &Runtime,
        request: &Request,
        cx: &AdapterCallContext<'_>,
    ) -> Result<Response, AdapterCallError> {
        let span = tracing::info_span!(
            "adapter_call",
            plugin = &*self.name,
            model = request.model.as_str(),
            duration_us = tracing::field::Empty,
            outcome = tracing::field::Empty,
        );
        let _enter = span.enter();
        let started = Instant::now();
        let result = self.complete_inner(rt, request, cx).await;
        span.record("duration_us", started.elapsed().as_micros() as u64);
        match &result {
            Ok(_) => span.record("outcome", "ok"),
            Err(e) => span.record("outcome", e.code()),
        };
        tracing::debug!("adapter call finished");
        result
    }

    async fn complete_inner(
        &self,
        rt: &Runtime,
        request: &Request,
        cx: &AdapterCallContext<'_>,
    ) -> Result<Response, AdapterCallError> {
        let budget = cx.budget.clamped();
        let wit_request = to_wit(request);
        let mut sandbox = self.sandbox(rt, cx, budget)?;
        let (pre, llm) = (&self.pre, &self.llm);
        let outcome = sandbox
            .run(async |store| {
                let instance = pre.instantiate_async(&mut *store).await?;
                llm.load(&mut *store, &instance)?
                    .call_complete(&mut *store, &wit_request)
                    .await
            })
            .await;
        let reply = settle(outcome, &mut sandbox, &budget)?;
        if reply_size(&reply) > budget.output {
            return Err(output_exceeded(&budget));
        }
        check(request, from_wit(reply))
    }

    /// Embed the request's inputs, in a fresh sandbox built from `cx` with the same budgets as
    /// a completion. The vectors are checked ([`Embeddings::checked`]) before they are returned:
    /// anything but one finite vector per input, all of one length, is
    /// [`AdapterError::Malformed`]. A plugin without the `embeddings` export is
    /// [`AdapterError::Unsupported`], without running it.
    pub async fn embed(
        &self,
        rt: &Runtime,
        request: &EmbedRequest,
        cx: &AdapterCallContext<'_>,
    ) -> Result<Embeddings, AdapterCallError> {
        let span = tracing::info_span!(
            "adapter_embed",
            plugin = &*self.name,
            model = request.model.as_str(),
            inputs = request.inputs.len(),
            duration_us = tracing::field::Empty,
            outcome = tracing::field::Empty,
        );
        let _enter = span.enter();
        let started = Instant::now();
        let result = self.embed_inner(rt, request, cx).await;
        span.record("duration_us", started.elapsed().as_micros() as u64);
        match &result {
            Ok(_) => span.record("outcome", "ok"),
            Err(e) => span.record("outcome", e.code()),
        };
        tracing::debug!("adapter embed call finished");
        result
    }

    async fn embed_inner(
        &self,
        rt: &Runtime,
        request: &EmbedRequest,
        cx: &AdapterCallContext<'_>,
    ) -> Result<Embeddings, AdapterCallError> {
        let Some(embeddings) = &self.embeddings else {
            let message = format!(
                "the adapter plugin {} has no embeddings: it does not export \
                 rawko:plugin/embeddings (added in rawko:plugin@0.1.1)",
                self.name
            );
            return Err(AdapterCallError::Adapter(AdapterError::unsupported(
                message,
            )));
        };
        let budget = cx.budget.clamped();
        let wit_request = wit_embed::EmbedRequest {
            model: request.model.clone(),
            base_url: request.base_url.clone(),
            inputs: request.inputs.clone(),
            dimensions: request.dimensions,
        };
        let mut sandbox = self.sandbox(rt, cx, budget)?;
        let pre = &self.pre;
        let outcome = sandbox
            .run(async |store| {
                let instance = pre.instantiate_async(&mut *store).await?;
                embeddings
                    .load(&mut *store, &instance)?
                    .call_embed(&mut *store, &wit_request)
                    .await
            })
            .await;
        let reply = settle(outcome, &mut sandbox, &budget)?;
        let size = reply.model.len() as u64
            + reply
                .vectors
                .iter()
                .map(|v| (v.len() * size_of::<f32>()) as u64)
                .sum::<u64>();
        if size > budget.output {
            return Err(output_exceeded(&budget));
        }
        Embeddings {
            vectors: reply.vectors,
            model: reply.model,
            usage: EmbedUsage {
                input_tokens: reply.usage.input_tokens,
            },
        }
        .checked(request.inputs.len())
        .map_err(AdapterCallError::Adapter)
    }
}

/// A sandboxed call's outcome as the caller sees it: the plugin's answer, its own error, or the
/// budget it broke or the trap it hit.
fn settle<T>(
    outcome: Result<Result<T, wit::AdapterError>, Failure>,
    sandbox: &mut Sandbox,
    budget: &Budget,
) -> Result<T, AdapterCallError> {
    match outcome {
        Ok(Ok(r)) => Ok(r),
        Ok(Err(e)) => Err(AdapterCallError::Adapter(from_wit_error(e))),
        Err(Failure::Budget(kind)) => Err(AdapterCallError::Budget {
            kind,
            limit: kind.limit(budget),
        }),
        Err(Failure::Trap(message)) => Err(AdapterCallError::Trap {
            message: Failure::with_stderr(message, &sandbox.stderr_tail()),
        }),
    }
}

fn output_exceeded(budget: &Budget) -> AdapterCallError {
    AdapterCallError::Budget {
        kind: BudgetKind::Output,
        limit: BudgetKind::Output.limit(budget),
    }
}

/// Bytes of text in a reply, for the output budget.
fn reply_size(r: &wit::Response) -> u64 {
    let mut n = r.model.len();
    for c in &r.content {
        n += match c {
            wit::Content::Text(t) => t.len(),
            wit::Content::Thinking(t) => t.text.len() + t.signature.as_ref().map_or(0, String::len),
            wit::Content::ToolCall(t) => t.id.len() + t.name.len() + t.arguments.len(),
            wit::Content::ToolResult(t) => t.call_id.len() + t.content.len(),
        };
    }
    n as u64
}

/// Refuse a reply no one could act on, and flag tool calls the agent loop must not run.
pub fn check(request: &Request, response: Response) -> Result<Response, AdapterCallError> {
    let malformed = |m: &str| Err(AdapterCallError::Adapter(AdapterError::malformed(m)));
    let mut ids = std::collections::HashSet::new();
    let mut problem = None;
    for c in &response.content {
        match c {
            Content::Text { .. } | Content::Thinking(_) => {}
            Content::ToolResult(_) => return malformed("the reply contains a tool result"),
            Content::ToolCall(t) => {
                if t.id.is_empty() || !ids.insert(t.id.as_str()) {
                    return malformed(&format!(
                        "tool call ids must be present and unique; got {:?}",
                        t.id
                    ));
                }
                if problem.is_none() {
                    problem = tool_call_problem(request, t).map(|m| (t.clone(), m));
                }
            }
        }
    }
    if response.is_empty() {
        return malformed("the reply is empty: no text and no tool calls");
    }
    if let Some((call, message)) = problem {
        return Err(AdapterCallError::InvalidToolCall {
            call_id: call.id,
            tool: call.name,
            message,
            response: Box::new(response),
        });
    }
    Ok(response)
}

fn tool_call_problem(request: &Request, call: &ToolCall) -> Option<String> {
    if !request.tools.iter().any(|t| t.name == call.name) {
        let available: Vec<&str> = request.tools.iter().map(|t| t.name.as_str()).collect();
        return Some(if available.is_empty() {
            "no tools are available in this conversation".into()
        } else {
            format!("no such tool (available: {})", available.join(", "))
        });
    }
    match serde_json::from_str::<serde_json::Value>(&call.arguments) {
        Ok(v) if v.is_object() => None,
        Ok(_) => Some("the arguments are not a JSON object".into()),
        Err(e) => Some(format!("the arguments are not valid JSON: {e}")),
    }
}

fn to_wit(r: &Request) -> wit::Request {
    wit::Request {
        model: r.model.clone(),
        base_url: r.base_url.clone(),
        system: r.system.clone(),
        messages: r
            .messages
            .iter()
            .map(|m| wit::Message {
                role: match m.role {
                    Role::User => wit::Role::User,
                    Role::Assistant => wit::Role::Assistant,
                },
                content: m.content.iter().map(content_to_wit).collect(),
            })
            .collect(),
        tools: r
            .tools
            .iter()
            .map(|t| WitToolSpec {
                name: t.name.clone(),
                description: t.description.clone(),
                input_schema: t.input_schema.to_string(),
            })
            .collect(),
        options: wit::Options {
            max_tokens: r.options.max_tokens,
            temperature: r.options.temperature,
            reasoning_effort: r.options.reasoning_effort.map(|e| match e {
                ReasoningEffort::Low => wit::ReasoningEffort::Low,
                ReasoningEffort::Medium => wit::ReasoningEffort::Medium,
                ReasoningEffort::High => wit::ReasoningEffort::High,
            }),
            thinking_budget: r.options.thinking_budget,
            extra: r.options.extra.as_ref().map(|v| v.to_string()),
        },
        stream: r.stream,
        sequence: r.sequence,
    }
}

fn content_to_wit(c: &Content) -> wit::Content {
    match c {
        Content::Text { text } => wit::Content::Text(text.clone()),
        Content::Thinking(t) => wit::Content::Thinking(wit::Thinking {
            text: t.text.clone(),
            signature: t.signature.clone(),
        }),
        Content::ToolCall(t) => wit::Content::ToolCall(wit::ToolCall {
            id: t.id.clone(),
            name: t.name.clone(),
            arguments: t.arguments.clone(),
        }),
        Content::ToolResult(t) => wit::Content::ToolResult(wit::ToolResult {
            call_id: t.call_id.clone(),
            content: t.content.clone(),
            is_error: t.is_error,
        }),
    }
}

fn from_wit(r: wit::Response) -> Response {
    Response {
        content: r
            .content
            .into_iter()
            .map(|c| match c {
                wit::Content::Text(text) => Content::Text { text },
                wit::Content::Thinking(t) => Content::Thinking(Thinking {
                    text: t.text,
                    signature: t.signature,
                }),
                wit::Content::ToolCall(t) => Content::ToolCall(ToolCall {
                    id: t.id,
                    name: t.name,
                    arguments: t.arguments,
                }),
                wit::Content::ToolResult(t) => Content::ToolResult(ToolResult {
                    call_id: t.call_id,
                    content: t.content,
                    is_error: t.is_error,
                }),
            })
            .collect(),
        stop_reason: match r.stop_reason {
            wit::StopReason::EndTurn => StopReason::EndTurn,
            wit::StopReason::ToolUse => StopReason::ToolUse,
            wit::StopReason::MaxTokens => StopReason::MaxTokens,
            wit::StopReason::StopSequence => StopReason::StopSequence,
            wit::StopReason::Refusal => StopReason::Refusal,
            wit::StopReason::Other => StopReason::Other,
        },
        usage: Usage {
            input_tokens: r.usage.input_tokens,
            output_tokens: r.usage.output_tokens,
            cache_read_tokens: r.usage.cache_read_tokens,
            cache_write_tokens: r.usage.cache_write_tokens,
        },
        model: r.model,
    }
}

fn from_wit_error(e: wit::AdapterError) -> AdapterError {
    match e {
        wit::AdapterError::Transport(message) => AdapterError::Transport { message },
        wit::AdapterError::Status(s) => AdapterError::Status {
            status: s.status,
            message: s.message,
        },
        wit::AdapterError::Malformed(message) => AdapterError::Malformed { message },
        wit::AdapterError::Unsupported(message) => AdapterError::Unsupported { message },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rawko_plugin_sdk::llm::{Message, ToolSpec};

    fn request() -> Request {
        Request {
            model: "m".into(),
            base_url: String::new(),
            system: String::new(),
            messages: vec![Message::user("hi")],
            tools: vec![ToolSpec {
                name: "Read".into(),
                description: "reads".into(),
                input_schema: serde_json::json!({"type": "object"}),
            }],
            options: Default::default(),
            stream: false,
            sequence: 0,
        }
    }

    fn reply(content: Vec<Content>, stop: StopReason) -> Response {
        Response {
            content,
            stop_reason: stop,
            usage: Usage::default(),
            model: "m".into(),
        }
    }

    fn call(id: &str, name: &str, args: &str) -> Content {
        Content::ToolCall(ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: args.into(),
        })
    }

    #[test]
    fn good_replies_pass() {
        assert!(
            check(
                &request(),
                reply(vec![Content::text("hello")], StopReason::EndTurn)
            )
            .is_ok()
        );
        assert!(
            check(
                &request(),
                reply(vec![call("1", "Read", "{}")], StopReason::ToolUse)
            )
            .is_ok()
        );
        // Out of tokens while thinking is not malformed.
        assert!(check(&request(), reply(vec![], StopReason::MaxTokens)).is_ok());
    }

    #[test]
    fn bad_tool_calls_keep_the_reply_for_the_model() {
        for (args, name, want) in [
            ("{}", "Delete", "no such tool"),
            ("not json", "Read", "not valid JSON"),
            ("[1]", "Read", "not a JSON object"),
        ] {
            let r = check(
                &request(),
                reply(vec![call("c", name, args)], StopReason::ToolUse),
            );
            match r {
                Err(AdapterCallError::InvalidToolCall {
                    message, response, ..
                }) => {
                    assert!(message.contains(want), "{message}");
                    assert_eq!(response.tool_calls().count(), 1);
                }
                other => panic!("{args}: {other:?}"),
            }
        }
    }

    #[test]
    fn empty_replies_and_duplicate_ids_are_malformed() {
        for r in [
            reply(vec![], StopReason::EndTurn),
            reply(vec![Content::text("")], StopReason::ToolUse),
            reply(
                vec![call("1", "Read", "{}"), call("1", "Read", "{}")],
                StopReason::ToolUse,
            ),
        ] {
            let e = check(&request(), r).unwrap_err();
            assert_eq!(e.code(), "malformed", "{e}");
        }
    }
}
