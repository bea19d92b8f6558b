//! The provider-neutral conversation model: what an adapter is asked and what it answers.
//!
//! These are the `rawko:plugin/llm` WIT types as plain Rust values with a stable JSON form. The
//! guest SDK hands them to adapter authors, the host uses the same types for its own API, and
//! recordings (see [`crate::recording`]) store them, so one definition fixes the shape everywhere.

use serde::{Deserialize, Serialize};

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    User,
    Assistant,
}

/// A model asking for a tool to be run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    /// Identifies the call so that its result can be matched to it.
    pub id: String,
    /// The tool's name, as the request's tool list gives it.
    pub name: String,
    /// The input as the model wrote it; not necessarily valid JSON.
    pub arguments: String,
}

/// The outcome of a tool call, sent back to the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolResult {
    /// The [`ToolCall::id`] this answers.
    pub call_id: String,
    pub content: String,
    #[serde(default)]
    pub is_error: bool,
}

/// Reasoning text, with the provider's signature where it must be sent back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Thinking {
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

/// One part of a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Content {
    Text { text: String },
    Thinking(Thinking),
    ToolCall(ToolCall),
    ToolResult(ToolResult),
}

impl Content {
    /// A text part.
    pub fn text(text: impl Into<String>) -> Self {
        Content::Text { text: text.into() }
    }
}

/// One turn of the conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Message {
    pub role: Role,
    pub content: Vec<Content>,
}

impl Message {
    /// A user message holding one text part.
    pub fn user(text: impl Into<String>) -> Self {
        Message {
            role: Role::User,
            content: vec![Content::text(text)],
        }
    }

    /// An assistant message holding one text part.
    pub fn assistant(text: impl Into<String>) -> Self {
        Message {
            role: Role::Assistant,
            content: vec![Content::text(text)],
        }
    }

    /// The text parts, joined.
    pub fn text(&self) -> String {
        text_of(&self.content)
    }

    /// The tool calls, in order.
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCall> {
        tool_calls_of(&self.content)
    }
}

fn text_of(content: &[Content]) -> String {
    let mut out = String::new();
    for c in content {
        if let Content::Text { text } = c {
            out.push_str(text);
        }
    }
    out
}

fn tool_calls_of(content: &[Content]) -> impl Iterator<Item = &ToolCall> {
    content.iter().filter_map(|c| match c {
        Content::ToolCall(t) => Some(t),
        _ => None,
    })
}

/// One tool as the model sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the tool's input, a JSON object.
    pub input_schema: serde_json::Value,
}

/// How hard a reasoning model should think.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasoningEffort {
    Low,
    Medium,
    High,
}

impl ReasoningEffort {
    /// The word providers use for it.
    pub fn as_str(self) -> &'static str {
        match self {
            ReasoningEffort::Low => "low",
            ReasoningEffort::Medium => "medium",
            ReasoningEffort::High => "high",
        }
    }
}

/// Generation settings; `None` leaves the provider's default.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Options {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<ReasoningEffort>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_budget: Option<u32>,
    /// Adapter-specific settings from the adapter instance's configuration, a JSON object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra: Option<serde_json::Value>,
}

impl Options {
    /// The adapter-specific settings as the JSON object they must be; empty when there are
    /// none. An adapter should refuse keys it does not know, so a misspelt one is not ignored.
    pub fn extra_object(&self) -> Result<serde_json::Map<String, serde_json::Value>, AdapterError> {
        match &self.extra {
            None => Ok(serde_json::Map::new()),
            Some(serde_json::Value::Object(m)) => Ok(m.clone()),
            Some(_) => Err(AdapterError::unsupported(
                "adapter options must be a JSON object",
            )),
        }
    }
}

/// A request for the model's next message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    pub model: String,
    /// Where the provider is (or, for replay, the `file://` URL of the recording).
    #[serde(default)]
    pub base_url: String,
    #[serde(default)]
    pub system: String,
    pub messages: Vec<Message>,
    #[serde(default)]
    pub tools: Vec<ToolSpec>,
    #[serde(default)]
    pub options: Options,
    /// Whether the reply is streamed and reported as it arrives.
    #[serde(default)]
    pub stream: bool,
    /// How many completions the adapter instance served before this one, from 0.
    #[serde(default)]
    pub sequence: u32,
}

/// Why the model stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    EndTurn,
    ToolUse,
    MaxTokens,
    StopSequence,
    Refusal,
    Other,
}

impl StopReason {
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::EndTurn => "end_turn",
            StopReason::ToolUse => "tool_use",
            StopReason::MaxTokens => "max_tokens",
            StopReason::StopSequence => "stop_sequence",
            StopReason::Refusal => "refusal",
            StopReason::Other => "other",
        }
    }
}

/// Tokens one request used. The three input counts do not overlap.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Usage {
    #[serde(default)]
    pub input_tokens: u64,
    #[serde(default)]
    pub output_tokens: u64,
    #[serde(default)]
    pub cache_read_tokens: u64,
    #[serde(default)]
    pub cache_write_tokens: u64,
}

impl Usage {
    /// Every input token, cached or not.
    pub fn total_input(&self) -> u64 {
        self.input_tokens + self.cache_read_tokens + self.cache_write_tokens
    }
}

/// The model's reply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Response {
    pub content: Vec<Content>,
    pub stop_reason: StopReason,
    #[serde(default)]
    pub usage: Usage,
    /// The model that answered, as the provider named it.
    #[serde(default)]
    pub model: String,
}

impl Response {
    /// The text parts, joined.
    pub fn text(&self) -> String {
        text_of(&self.content)
    }

    /// Whether the reply gives the caller anything to act on: text or a tool call. A reply cut
    /// short by the token limit or refused may be empty; any other empty reply is malformed.
    pub fn is_empty(&self) -> bool {
        let said = self.content.iter().any(|c| match c {
            Content::Text { text } => !text.is_empty(),
            Content::ToolCall(_) => true,
            Content::Thinking(_) | Content::ToolResult(_) => false,
        });
        !said
            && !matches!(
                self.stop_reason,
                StopReason::MaxTokens | StopReason::Refusal
            )
    }

    /// The reply, unless [`Response::is_empty`]: what an adapter returns once it has put a
    /// reply together, so an empty one is an error it reports rather than an answer.
    pub fn non_empty(self) -> Result<Response, AdapterError> {
        if self.is_empty() {
            return Err(AdapterError::malformed(
                "the reply has neither text nor tool calls",
            ));
        }
        Ok(self)
    }

    /// The tool calls, in order.
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCall> {
        tool_calls_of(&self.content)
    }
}

/// Why a completion failed, as the adapter reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum AdapterError {
    /// The request could not be delivered: denied, unreachable or timed out.
    Transport { message: String },
    /// The provider answered with an error status.
    Status { status: u16, message: String },
    /// The provider's answer could not be understood.
    Malformed { message: String },
    /// The request asks for something the adapter or model does not support.
    Unsupported { message: String },
}

impl AdapterError {
    pub fn transport(m: impl Into<String>) -> Self {
        AdapterError::Transport { message: m.into() }
    }

    pub fn malformed(m: impl Into<String>) -> Self {
        AdapterError::Malformed { message: m.into() }
    }

    pub fn unsupported(m: impl Into<String>) -> Self {
        AdapterError::Unsupported { message: m.into() }
    }
}

impl std::fmt::Display for AdapterError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AdapterError::Transport { message } => {
                write!(f, "cannot reach the provider: {message}")
            }
            AdapterError::Status { status, message } if message.is_empty() => {
                write!(f, "the provider answered with status {status}")
            }
            AdapterError::Status { status, message } => {
                write!(f, "the provider answered with status {status}: {message}")
            }
            AdapterError::Malformed { message } => {
                write!(f, "the provider's answer is malformed: {message}")
            }
            AdapterError::Unsupported { message } => write!(f, "unsupported: {message}"),
        }
    }
}

impl std::error::Error for AdapterError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_has_a_tagged_json_form() {
        let c = Content::ToolCall(ToolCall {
            id: "c1".into(),
            name: "Read".into(),
            arguments: "{\"path\":\"a\"}".into(),
        });
        let json = serde_json::to_value(&c).unwrap();
        assert_eq!(json["type"], "tool_call");
        assert_eq!(json["name"], "Read");
        assert_eq!(serde_json::from_value::<Content>(json).unwrap(), c);
        let t: Content = serde_json::from_str(r#"{"type":"text","text":"hi"}"#).unwrap();
        assert_eq!(t, Content::text("hi"));
    }

    #[test]
    fn usage_totals_do_not_double_count() {
        let u = Usage {
            input_tokens: 10,
            output_tokens: 5,
            cache_read_tokens: 100,
            cache_write_tokens: 1,
        };
        assert_eq!(u.total_input(), 111);
    }
}
