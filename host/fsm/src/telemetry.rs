//! The spans a task makes, named as OpenTelemetry's GenAI conventions name them: the task is
//! `invoke_workflow rawko-task`, each state `invoke_agent {agent}`, each model call
//! `chat {model}` and each tool call `execute_tool {tool}`, with rawko's own facts in `rawko.*`
//! attributes. They are `tracing` spans of the target [`TARGET`]: nothing subscribes to them
//! unless the user configured an exporter (the command line does so), and then they cost a
//! span each; otherwise their call sites are disabled once and cost nothing more.
//!
//! No span carries a prompt, a message, a tool's input or output: only names, ids, counts,
//! verdicts and outcomes.

use tracing::Span;
use tracing::field::Empty;

use crate::llm::{Completion, LlmError};
use rawko_agents::model::Agent;
use rawko_store::ModelCall;

/// What the assembly that exports traces tells the engine of them: a task's first traced run
/// is stored with it, and a later run's trace links to it.
pub trait TraceLinks {
    /// `span`'s W3C `traceparent`, when it is exported.
    fn traceparent(&self, span: &Span) -> Option<String>;
    /// Link `span` to `traceparent`, the trace of an earlier run of the task.
    fn link(&self, span: &Span, traceparent: &str);
    /// Whether the user opted in to content in spans (prompts, messages, tool input and
    /// output). Off unless the assembly says so.
    fn captures(&self) -> bool {
        false
    }
    /// `text` as a span may carry it: every secret known redacted, and cut to a bound.
    fn content(&self, text: &str) -> String {
        let _ = text;
        String::new()
    }
}

/// The target of every span here; an exporter subscribes to it alone.
pub const TARGET: &str = "gen_ai";

/// The target of the events that are metrics (`histogram.NAME` fields, as
/// `tracing-opentelemetry`'s metrics layer reads them), kept apart from the spans.
pub const METRICS: &str = "gen_ai::metrics";

/// The task, from its start (or resume) to where this run stops.
pub(crate) fn task(id: &str, resumed: bool) -> Span {
    tracing::info_span!(
        target: TARGET,
        "invoke_workflow",
        "otel.name" = "invoke_workflow rawko-task",
        "gen_ai.operation.name" = "invoke_workflow",
        "gen_ai.agent.name" = "rawko-task",
        "gen_ai.conversation.id" = id,
        "rawko.resumed" = resumed,
        "rawko.task.status" = Empty,
        "otel.status_code" = Empty,
        "error.type" = Empty,
    )
}

/// One agent's state (or an agent called as a tool, `depth` deep), with the kernel sandbox
/// mode its programs get and whether it runs untrusted.
pub(crate) fn agent(task: &str, agent: &Agent, depth: u32, sandbox: &str, untrusted: bool) -> Span {
    let name = agent.name.as_str();
    tracing::info_span!(
        target: TARGET,
        "invoke_agent",
        "otel.name" = format!("invoke_agent {name}"),
        "gen_ai.operation.name" = "invoke_agent",
        "gen_ai.agent.name" = name,
        "gen_ai.conversation.id" = task,
        "rawko.depth" = depth,
        "rawko.external" = agent.external.is_some(),
        "rawko.sandbox.mode" = sandbox,
        "rawko.untrusted" = untrusted,
        // What an external agent reported it used (its model calls are its own).
        "gen_ai.usage.input_tokens" = Empty,
        "gen_ai.usage.output_tokens" = Empty,
        "rawko.outcome" = Empty,
        "otel.status_code" = Empty,
        "error.type" = Empty,
    )
}

/// One model call; `retry` counts the calls of this step asked again before it.
pub(crate) fn chat(adapter: &str, model: &str, retry: usize) -> Span {
    tracing::info_span!(
        target: TARGET,
        "chat",
        "otel.name" = format!("chat {model}"),
        "otel.kind" = "client",
        "gen_ai.operation.name" = "chat",
        "gen_ai.provider.name" = adapter,
        "gen_ai.request.model" = model,
        "gen_ai.response.model" = Empty,
        "gen_ai.response.finish_reasons" = Empty,
        "gen_ai.usage.input_tokens" = Empty,
        "gen_ai.usage.output_tokens" = Empty,
        "gen_ai.usage.cache_read.input_tokens" = Empty,
        "gen_ai.usage.cache_creation.input_tokens" = Empty,
        "rawko.adapter" = adapter,
        "rawko.retry" = retry > 0,
        "rawko.retry.attempt" = retry,
        "gen_ai.system_instructions" = Empty,
        "gen_ai.input.messages" = Empty,
        "gen_ai.output.messages" = Empty,
        "otel.status_code" = Empty,
        "error.type" = Empty,
    )
}

/// What a model call came to, on its span and in the conventions' two histograms: the
/// operation's duration (seconds) and the tokens it used, by type.
pub(crate) fn chat_ended(
    span: &Span,
    (adapter, model): (&str, &str),
    started: std::time::Instant,
    answered: &Option<Result<Result<Completion, LlmError>, tokio::time::error::Elapsed>>,
) {
    let error = match answered {
        Some(Ok(Ok(_))) => "",
        Some(Ok(Err(e))) => llm_error_type(e),
        Some(Err(_)) => "timeout",
        None => "cancelled",
    };
    let response = match answered {
        Some(Ok(Ok(c))) => c.model.as_str(),
        _ => "",
    };
    tracing::event!(
        target: METRICS,
        tracing::Level::INFO,
        "histogram.gen_ai.client.operation.duration" = started.elapsed().as_secs_f64(),
        "gen_ai.operation.name" = "chat",
        "gen_ai.provider.name" = adapter,
        "gen_ai.request.model" = model,
        "gen_ai.response.model" = response,
        "error.type" = error,
    );
    if let Some(Ok(Ok(c))) = answered {
        for (kind, n) in [
            ("input", c.usage.input_tokens),
            ("output", c.usage.output_tokens),
        ] {
            tracing::event!(
                target: METRICS,
                tracing::Level::INFO,
                "histogram.gen_ai.client.token.usage" = n.max(0) as u64,
                "gen_ai.token.type" = kind,
                "gen_ai.operation.name" = "chat",
                "gen_ai.provider.name" = adapter,
                "gen_ai.request.model" = model,
                "gen_ai.response.model" = response,
            );
        }
    }
    match answered {
        Some(Ok(Ok(c))) => {
            span.record("gen_ai.response.model", c.model.as_str());
            span.record(
                "gen_ai.response.finish_reasons",
                format!("[\"{}\"]", c.stop_reason.as_str()),
            );
            span.record("gen_ai.usage.input_tokens", c.usage.input_tokens);
            span.record("gen_ai.usage.output_tokens", c.usage.output_tokens);
            span.record("gen_ai.usage.cache_read.input_tokens", c.usage.cache_read);
            span.record(
                "gen_ai.usage.cache_creation.input_tokens",
                c.usage.cache_write,
            );
        }
        Some(Ok(Err(e))) => failed(span, llm_error_type(e)),
        Some(Err(_)) => failed(span, "timeout"),
        None => failed(span, "cancelled"),
    }
}

/// The store's record of a model call: what was asked, what answered, how it ended.
pub(crate) fn model_call(
    turn: i64,
    (adapter, model): (&str, &str),
    attempt: usize,
    started_at: i64,
    answered: &Option<Result<Result<Completion, LlmError>, tokio::time::error::Elapsed>>,
) -> ModelCall {
    let (outcome, response_model, finish_reason) = match answered {
        Some(Ok(Ok(c))) => (
            "ok",
            Some(c.model.clone()),
            Some(c.stop_reason.as_str().to_string()),
        ),
        Some(Ok(Err(e))) => (llm_error_type(e), None, None),
        Some(Err(_)) => ("timeout", None, None),
        None => ("cancelled", None, None),
    };
    ModelCall {
        turn_id: turn,
        adapter: adapter.to_string(),
        model: model.to_string(),
        response_model,
        finish_reason,
        attempt: attempt as i64,
        outcome: outcome.to_string(),
        started_at,
        ended_at: rawko_store::now_ms(),
    }
}

fn llm_error_type(e: &LlmError) -> &'static str {
    match e {
        LlmError::Transport(_) => "transport",
        LlmError::Status { .. } => "http_status",
        LlmError::Malformed(_) => "malformed_response",
        LlmError::Other(_) => "model_error",
    }
}

/// The arbiter choosing the state after `from`'s, which ended with `event`.
pub(crate) fn arbiter(from: &str, event: &str) -> Span {
    tracing::info_span!(
        target: TARGET,
        "arbiter",
        "otel.name" = "rawko.arbiter",
        "rawko.arbiter.from" = from,
        "rawko.arbiter.event" = event,
        "rawko.arbiter.choice" = Empty,
        "rawko.arbiter.mode" = Empty,
        "rawko.arbiter.fallback" = Empty,
    )
}

/// What the arbiter chose, and how (`fallback` when the model's answer was not taken).
pub(crate) fn arbiter_chose(span: &Span, choice: &str, mode: &str) {
    span.record("rawko.arbiter.choice", choice);
    span.record("rawko.arbiter.mode", mode);
    span.record("rawko.arbiter.fallback", mode == "fallback");
}

/// One tool call, as the model asked for it; an MCP server's tool names its server.
pub(crate) fn tool(name: &str, call_id: &str, agent_tool: bool) -> Span {
    let server = name
        .strip_prefix("mcp__")
        .and_then(|rest| rest.split("__").next());
    tracing::info_span!(
        target: TARGET,
        "execute_tool",
        "otel.name" = format!("execute_tool {name}"),
        "gen_ai.operation.name" = "execute_tool",
        "gen_ai.tool.name" = name,
        "gen_ai.tool.call.id" = call_id,
        "gen_ai.tool.type" = if agent_tool { "agent" } else { "function" },
        "rawko.mcp.server" = server,
        "gen_ai.tool.call.arguments" = Empty,
        "gen_ai.tool.call.result" = Empty,
        "rawko.verdict" = Empty,
        "otel.status_code" = Empty,
        "error.type" = Empty,
    )
}

/// Mark `span` failed, with the kind of failure (never its text, which may quote a prompt).
pub(crate) fn failed(span: &Span, kind: &str) {
    span.record("otel.status_code", "ERROR");
    span.record("error.type", kind);
}
