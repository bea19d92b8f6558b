//! A streamed Chat Completions reply, assembled from its `chat.completion.chunk` events.
//!
//! Text and reasoning arrive as deltas (reported live as they come); tool calls arrive in
//! pieces keyed by their index, the name first and the arguments a fragment at a time; the
//! finish reason comes in the last chunk with choices, the usage in a chunk of its own, and
//! `[DONE]` ends the stream. A stream that stops before any finish reason was cut off.

use rawko_plugin_sdk::adapter::{Delta, StreamParser};
use rawko_plugin_sdk::llm::{AdapterError, Content, Response, Thinking, ToolCall};
use rawko_plugin_sdk::sse::Event;
use serde::Deserialize;

use crate::wire::{WireUsage, stop_reason};

#[derive(Default)]
pub struct Accumulator {
    model: String,
    thinking: String,
    text: String,
    calls: Vec<PartialCall>,
    finish_reason: Option<String>,
    usage: Option<WireUsage>,
    done: bool,
}

#[derive(Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    model: String,
    #[serde(default)]
    choices: Vec<ChunkChoice>,
    usage: Option<WireUsage>,
    error: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct ChunkChoice {
    delta: Option<ChunkDelta>,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct ChunkDelta {
    content: Option<String>,
    refusal: Option<String>,
    reasoning_content: Option<String>,
    reasoning: Option<String>,
    #[serde(default)]
    tool_calls: Vec<ChunkToolCall>,
}

#[derive(Deserialize)]
struct ChunkToolCall {
    #[serde(default)]
    index: usize,
    id: Option<String>,
    function: Option<ChunkFunction>,
}

#[derive(Deserialize)]
struct ChunkFunction {
    name: Option<String>,
    arguments: Option<String>,
}

/// More tool calls than any model makes in one reply; an index past it is garbage.
const MAX_CALLS: usize = 1024;

impl StreamParser for Accumulator {
    fn feed(
        &mut self,
        event: &Event,
        show: &mut dyn FnMut(Delta<'_>),
    ) -> Result<bool, AdapterError> {
        self.feed_data(&event.data, show)
    }

    fn finish(self) -> Result<Response, AdapterError> {
        self.assemble()
    }
}

impl Accumulator {
    /// Take one event's data. Returns `true` at `[DONE]`.
    pub fn feed_data(
        &mut self,
        data: &str,
        show: &mut dyn FnMut(Delta<'_>),
    ) -> Result<bool, AdapterError> {
        let data = data.trim();
        if data == "[DONE]" {
            self.done = true;
            return Ok(true);
        }
        if data.is_empty() {
            return Ok(false);
        }
        let chunk: Chunk = serde_json::from_str(data).map_err(|e| {
            AdapterError::malformed(format!("a stream chunk is not a completion chunk: {e}"))
        })?;
        if let Some(e) = chunk.error {
            let message = e
                .get("message")
                .and_then(|m| m.as_str())
                .map(str::to_string)
                .unwrap_or_else(|| e.to_string());
            return Err(AdapterError::transport(format!(
                "the provider stopped the stream with an error: {message}"
            )));
        }
        if !chunk.model.is_empty() {
            self.model = chunk.model;
        }
        if chunk.usage.is_some() {
            self.usage = chunk.usage;
        }
        for choice in chunk.choices.into_iter().take(1) {
            if let Some(d) = choice.delta {
                if let Some(r) = d.reasoning_content.or(d.reasoning) {
                    show(Delta::Thinking(&r));
                    self.thinking.push_str(&r);
                }
                for t in [d.content, d.refusal].into_iter().flatten() {
                    show(Delta::Text(&t));
                    self.text.push_str(&t);
                }
                for t in d.tool_calls {
                    if t.index >= MAX_CALLS {
                        return Err(AdapterError::malformed(format!(
                            "tool call index {} in a stream chunk",
                            t.index
                        )));
                    }
                    if self.calls.len() <= t.index {
                        self.calls.resize_with(t.index + 1, PartialCall::default);
                    }
                    let call = &mut self.calls[t.index];
                    if let Some(id) = t.id {
                        call.id = id;
                    }
                    if let Some(f) = t.function {
                        if let Some(n) = f.name {
                            call.name.push_str(&n);
                        }
                        if let Some(a) = f.arguments {
                            call.arguments.push_str(&a);
                        }
                    }
                }
            }
            if choice.finish_reason.is_some() {
                self.finish_reason = choice.finish_reason;
            }
        }
        Ok(false)
    }

    /// The reply, once the stream has ended.
    fn assemble(self) -> Result<Response, AdapterError> {
        if !self.done && self.finish_reason.is_none() {
            return Err(AdapterError::malformed(
                "the stream ended before the reply was complete (no finish reason, no [DONE])",
            ));
        }
        let mut content = Vec::new();
        if !self.thinking.is_empty() {
            content.push(Content::Thinking(Thinking {
                text: self.thinking,
                signature: None,
            }));
        }
        if !self.text.is_empty() {
            content.push(Content::text(self.text));
        }
        let has_tool_calls = !self.calls.is_empty();
        for (i, c) in self.calls.into_iter().enumerate() {
            if c.name.is_empty() {
                return Err(AdapterError::malformed(format!(
                    "streamed tool call {i} has no name"
                )));
            }
            content.push(Content::ToolCall(ToolCall {
                id: if c.id.is_empty() {
                    format!("call_{i}")
                } else {
                    c.id
                },
                name: c.name,
                arguments: c.arguments,
            }));
        }
        Response {
            content,
            stop_reason: stop_reason(self.finish_reason.as_deref(), has_tool_calls),
            usage: self.usage.unwrap_or_default().into_usage(),
            model: self.model,
        }
        .non_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rawko_plugin_sdk::llm::StopReason;

    fn run(events: &[&str]) -> (Result<Response, AdapterError>, String) {
        let mut acc = Accumulator::default();
        let mut shown = String::new();
        for e in events {
            let r = acc.feed_data(e, &mut |d| {
                if let Delta::Text(t) = d {
                    shown.push_str(t)
                }
            });
            match r {
                Ok(true) => break,
                Ok(false) => {}
                Err(e) => return (Err(e), shown),
            }
        }
        (acc.assemble(), shown)
    }

    #[test]
    fn text_and_tool_calls_assemble_from_deltas() {
        let (r, shown) = run(&[
            r#"{"model":"gpt-4.1","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"lo"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_9","type":"function","function":{"name":"get_weather","arguments":""}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19}}"#,
            "[DONE]",
        ]);
        let r = r.unwrap();
        assert_eq!(shown, "Hello");
        assert_eq!(r.text(), "Hello");
        let call = r.tool_calls().next().unwrap();
        assert_eq!(
            (call.id.as_str(), call.arguments.as_str()),
            ("call_9", "{\"city\":\"Paris\"}")
        );
        assert_eq!(r.stop_reason, StopReason::ToolUse);
        assert_eq!((r.usage.input_tokens, r.usage.output_tokens), (12, 7));
        assert_eq!(r.model, "gpt-4.1");
    }

    #[test]
    fn a_cut_stream_and_an_error_event_are_errors() {
        let (r, _) = run(&[r#"{"choices":[{"index":0,"delta":{"content":"Hel"}}]}"#]);
        assert!(matches!(r, Err(AdapterError::Malformed { .. })), "{r:?}");
        let (r, _) = run(&[r#"{"error":{"message":"overloaded"}}"#]);
        assert!(
            matches!(&r, Err(AdapterError::Transport { message }) if message.contains("overloaded")),
            "{r:?}"
        );
        let (r, _) = run(&["{not json"]);
        assert!(matches!(r, Err(AdapterError::Malformed { .. })), "{r:?}");
    }
}
