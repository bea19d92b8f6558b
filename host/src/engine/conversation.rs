//! The provider-neutral conversation an agent has with its model, as the engine stores it.
//!
//! These mirror the `llm` interface of the WIT package; the store keeps each message as JSON in
//! this shape, so a task can be resumed, inspected and replayed whatever adapter produced it.

use serde::{Deserialize, Serialize};

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Assistant,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

/// One part of a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Content {
    Text {
        text: String,
    },
    Thinking {
        text: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
    ToolCall {
        id: String,
        name: String,
        /// As the model wrote it: possibly not JSON.
        arguments: String,
    },
    ToolResult {
        call_id: String,
        content: String,
        is_error: bool,
    },
}

/// One message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    pub content: Vec<Content>,
}

impl Message {
    pub fn user_text(text: impl Into<String>) -> Message {
        Message {
            role: Role::User,
            content: vec![Content::Text { text: text.into() }],
        }
    }

    /// The tool calls in this message, in order.
    pub fn tool_calls(&self) -> impl Iterator<Item = (&str, &str, &str)> {
        self.content.iter().filter_map(|c| match c {
            Content::ToolCall {
                id,
                name,
                arguments,
            } => Some((id.as_str(), name.as_str(), arguments.as_str())),
            _ => None,
        })
    }

    /// All visible text in this message, joined.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for c in &self.content {
            if let Content::Text { text } = c {
                if !out.is_empty() {
                    out.push('\n');
                }
                out.push_str(text);
            }
        }
        out
    }
}

/// Why the model stopped: the WIT package's reason, as adapters report it.
pub use rawko_plugin_sdk::llm::StopReason;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_through_json() {
        let m = Message {
            role: Role::Assistant,
            content: vec![
                Content::Text { text: "ok".into() },
                Content::ToolCall {
                    id: "c1".into(),
                    name: "Read".into(),
                    arguments: "{\"path\":\"a\"}".into(),
                },
            ],
        };
        let json = serde_json::to_value(&m).unwrap();
        assert_eq!(json["content"][1]["type"], "tool_call");
        let back: Message = serde_json::from_value(json).unwrap();
        assert_eq!(back, m);
        assert_eq!(back.tool_calls().count(), 1);
    }
}
