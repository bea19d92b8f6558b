//! A streamed Messages API reply, assembled from its events.
//!
//! `message_start` carries the model and the input usage; each content block is opened by
//! `content_block_start`, grown by `content_block_delta` (text, a fragment of a tool's JSON
//! input, thinking, or its signature) and closed by `content_block_stop`; `message_delta`
//! brings the stop reason and the output usage, and `message_stop` ends the reply. An `error`
//! event ends it with the provider's error; a stream that ends before `message_stop` was cut off.

use rawko_plugin_sdk::adapter::{Delta, StreamParser};
use rawko_plugin_sdk::llm::{AdapterError, Content, Response, Thinking};
use rawko_plugin_sdk::sse;
use serde::Deserialize;
use serde_json::Value;

use crate::wire::{Block, WireUsage, stop_reason, tool_call};

#[derive(Default)]
pub struct Accumulator {
    model: String,
    blocks: Vec<Partial>,
    stop_reason: Option<String>,
    usage: WireUsage,
    started: bool,
    done: bool,
}

enum Partial {
    Text(String),
    ToolUse {
        id: String,
        name: String,
        json: String,
        /// The input as given whole in `content_block_start`, used when no fragments follow.
        start: Value,
    },
    Thinking {
        text: String,
        signature: Option<String>,
    },
    Skipped,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Event {
    MessageStart {
        message: StartMessage,
    },
    ContentBlockStart {
        index: usize,
        content_block: Block,
    },
    ContentBlockDelta {
        index: usize,
        delta: BlockDelta,
    },
    ContentBlockStop {},
    MessageDelta {
        delta: MessageDeltaBody,
        usage: Option<WireUsage>,
    },
    MessageStop {},
    Ping {},
    Error {
        error: Value,
    },
    #[serde(other)]
    Unknown,
}

#[derive(Deserialize)]
struct StartMessage {
    #[serde(default)]
    model: String,
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum BlockDelta {
    TextDelta {
        text: String,
    },
    InputJsonDelta {
        partial_json: String,
    },
    ThinkingDelta {
        thinking: String,
    },
    SignatureDelta {
        signature: String,
    },
    #[serde(other)]
    Unknown,
}

#[derive(Deserialize)]
struct MessageDeltaBody {
    stop_reason: Option<String>,
}

/// More content blocks than any reply has; an index past it is garbage.
const MAX_BLOCKS: usize = 4096;

impl StreamParser for Accumulator {
    fn feed(
        &mut self,
        event: &sse::Event,
        show: &mut dyn FnMut(Delta<'_>),
    ) -> Result<bool, AdapterError> {
        self.feed_data(&event.data, show)
    }

    fn finish(self) -> Result<Response, AdapterError> {
        self.assemble()
    }
}

impl Accumulator {
    /// Take one event's data (its type is in the data as well as in its name; the data is
    /// what counts). Returns `true` at `message_stop`.
    pub fn feed_data(
        &mut self,
        data: &str,
        show: &mut dyn FnMut(Delta<'_>),
    ) -> Result<bool, AdapterError> {
        let event: Event = serde_json::from_str(data).map_err(|e| {
            AdapterError::malformed(format!("a stream event is not a Messages API event: {e}"))
        })?;
        match event {
            Event::MessageStart { message } => {
                self.started = true;
                self.model = message.model;
                if let Some(u) = message.usage {
                    self.usage.update(u);
                }
            }
            Event::ContentBlockStart {
                index,
                content_block,
            } => {
                let slot = self.slot(index)?;
                *slot = match content_block {
                    Block::Text { text } => {
                        show(Delta::Text(&text));
                        Partial::Text(text)
                    }
                    Block::ToolUse { id, name, input } => Partial::ToolUse {
                        id,
                        name,
                        json: String::new(),
                        start: input,
                    },
                    Block::Thinking {
                        thinking,
                        signature,
                    } => {
                        show(Delta::Thinking(&thinking));
                        Partial::Thinking {
                            text: thinking,
                            signature,
                        }
                    }
                    Block::RedactedThinking {} | Block::Unknown => Partial::Skipped,
                };
            }
            Event::ContentBlockDelta { index, delta } => {
                let slot = self.slot(index)?;
                match (slot, delta) {
                    (Partial::Text(t), BlockDelta::TextDelta { text }) => {
                        show(Delta::Text(&text));
                        t.push_str(&text);
                    }
                    (
                        Partial::ToolUse { json, .. },
                        BlockDelta::InputJsonDelta { partial_json },
                    ) => {
                        json.push_str(&partial_json);
                    }
                    (Partial::Thinking { text, .. }, BlockDelta::ThinkingDelta { thinking }) => {
                        show(Delta::Thinking(&thinking));
                        text.push_str(&thinking);
                    }
                    (
                        Partial::Thinking { signature, .. },
                        BlockDelta::SignatureDelta { signature: s },
                    ) => {
                        signature.get_or_insert_with(String::new).push_str(&s);
                    }
                    (Partial::Skipped, _) | (_, BlockDelta::Unknown) => {}
                    _ => {
                        return Err(AdapterError::malformed(format!(
                            "a delta for content block {index} does not match the block's type"
                        )));
                    }
                }
            }
            Event::MessageDelta { delta, usage } => {
                if delta.stop_reason.is_some() {
                    self.stop_reason = delta.stop_reason;
                }
                if let Some(u) = usage {
                    self.usage.update(u);
                }
            }
            Event::MessageStop {} => {
                self.done = true;
                return Ok(true);
            }
            Event::Error { error } => {
                let kind = error.get("type").and_then(Value::as_str).unwrap_or("error");
                let message = error.get("message").and_then(Value::as_str).unwrap_or("");
                return Err(AdapterError::transport(format!(
                    "the provider stopped the stream with an error: {kind}: {message}"
                )));
            }
            Event::ContentBlockStop {} | Event::Ping {} | Event::Unknown => {}
        }
        Ok(false)
    }

    fn slot(&mut self, index: usize) -> Result<&mut Partial, AdapterError> {
        if !self.started {
            return Err(AdapterError::malformed(
                "content arrived before message_start",
            ));
        }
        if index >= MAX_BLOCKS {
            return Err(AdapterError::malformed(format!(
                "content block index {index} in a stream event"
            )));
        }
        if self.blocks.len() <= index {
            self.blocks.resize_with(index + 1, || Partial::Skipped);
        }
        Ok(&mut self.blocks[index])
    }

    /// The reply, once the stream has ended.
    fn assemble(self) -> Result<Response, AdapterError> {
        if !self.done {
            return Err(AdapterError::malformed(
                "the stream ended before the reply was complete (no message_stop)",
            ));
        }
        let mut content = Vec::new();
        for b in self.blocks {
            match b {
                Partial::Text(t) => content.push(Content::text(t)),
                Partial::ToolUse {
                    id,
                    name,
                    json,
                    start,
                } => {
                    let input = if json.trim().is_empty() {
                        start
                    } else {
                        serde_json::from_str(&json).map_err(|e| {
                            AdapterError::malformed(format!(
                                "the streamed input of tool call {name} is not JSON: {e}"
                            ))
                        })?
                    };
                    let input = if input.is_null() {
                        Value::Object(Default::default())
                    } else {
                        input
                    };
                    content.push(tool_call(id, name, &input)?);
                }
                Partial::Thinking { text, signature } => {
                    content.push(Content::Thinking(Thinking { text, signature }))
                }
                Partial::Skipped => {}
            }
        }
        Response {
            content,
            stop_reason: stop_reason(self.stop_reason.as_deref()),
            usage: self.usage.into_usage(),
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
            match acc.feed_data(e, &mut |d| {
                if let Delta::Text(t) = d {
                    shown.push_str(t)
                }
            }) {
                Ok(true) => break,
                Ok(false) => {}
                Err(e) => return (Err(e), shown),
            }
        }
        (acc.assemble(), shown)
    }

    const START: &str = r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"usage":{"input_tokens":25,"output_tokens":1}}}"#;

    #[test]
    fn text_thinking_and_tool_use_assemble() {
        let (r, shown) = run(&[
            START,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Let me see."}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQB"}}"#,
            r#"{"type":"content_block_stop","index":0}"#,
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}"#,
            r#"{"type":"ping"}"#,
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Checking"}}"#,
            r#"{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{}}}"#,
            r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"city\": \"Pa"}}"#,
            r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"ris\"}"}}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":89}}"#,
            r#"{"type":"message_stop"}"#,
        ]);
        let r = r.unwrap();
        assert_eq!(shown, "Checking");
        assert!(
            matches!(&r.content[0], Content::Thinking(t) if t.signature.as_deref() == Some("EqQB"))
        );
        let call = r.tool_calls().next().unwrap();
        assert_eq!(call.arguments, r#"{"city":"Paris"}"#);
        assert_eq!(r.stop_reason, StopReason::ToolUse);
        assert_eq!((r.usage.input_tokens, r.usage.output_tokens), (25, 89));
    }

    #[test]
    fn cut_streams_bad_json_and_error_events_are_errors() {
        let (r, _) = run(&[
            START,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":"Hi"}}"#,
        ]);
        assert!(matches!(r, Err(AdapterError::Malformed { .. })), "{r:?}");
        let (r, _) = run(&[
            START,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"f","input":{}}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}}"#,
            r#"{"type":"message_stop"}"#,
        ]);
        assert!(matches!(r, Err(AdapterError::Malformed { .. })), "{r:?}");
        let (r, _) = run(&[
            START,
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        ]);
        assert!(
            matches!(&r, Err(AdapterError::Transport { message }) if message.contains("Overloaded")),
            "{r:?}"
        );
    }
}
