//! The Messages API wire format: the request body and headers, and the reply when it is not
//! streamed.

use rawko_plugin_sdk::llm::{
    AdapterError, Content, ReasoningEffort, Request, Response, Role, StopReason, Thinking,
    ToolCall, Usage,
};
use serde::Deserialize;
use serde_json::{Map, Value, json};

/// The output limit when the request gives none (the API requires one).
const DEFAULT_MAX_TOKENS: u32 = 8192;
/// The smallest thinking budget the API accepts.
const MIN_THINKING_BUDGET: u32 = 1024;
const DEFAULT_VERSION: &str = "2023-06-01";

/// The request body and the extra headers for `request`.
pub fn build(request: &Request) -> Result<(Value, Vec<(String, String)>), AdapterError> {
    let extra = Extra::from(request)?;
    let mut messages = Vec::new();
    for m in &request.messages {
        let blocks = blocks(&m.content);
        if blocks.is_empty() {
            continue;
        }
        let role = match m.role {
            Role::User => "user",
            Role::Assistant => "assistant",
        };
        messages.push(json!({"role": role, "content": blocks}));
    }
    let o = &request.options;
    let budget = o.thinking_budget.or(o.reasoning_effort.map(|e| match e {
        ReasoningEffort::Low => 2048,
        ReasoningEffort::Medium => 8192,
        ReasoningEffort::High => 24576,
    }));
    if let Some(b) = budget
        && b < MIN_THINKING_BUDGET
    {
        return Err(AdapterError::unsupported(format!(
            "a thinking budget of {b} tokens is below the API's minimum of {MIN_THINKING_BUDGET}"
        )));
    }
    let max_tokens = match (o.max_tokens, budget) {
        (Some(m), Some(b)) if m <= b => {
            return Err(AdapterError::unsupported(format!(
                "max_tokens ({m}) must be larger than the thinking budget ({b})"
            )));
        }
        (Some(m), _) => m,
        (None, Some(b)) => b + DEFAULT_MAX_TOKENS,
        (None, None) => DEFAULT_MAX_TOKENS,
    };
    let mut body = Map::new();
    body.insert("model".into(), json!(request.model));
    body.insert("max_tokens".into(), json!(max_tokens));
    if !request.system.is_empty() {
        body.insert("system".into(), json!(request.system));
    }
    body.insert("messages".into(), Value::Array(messages));
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.input_schema}))
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(t) = o.temperature {
        body.insert("temperature".into(), json!(t));
    }
    if let Some(b) = budget {
        body.insert(
            "thinking".into(),
            json!({"type": "enabled", "budget_tokens": b}),
        );
    }
    if request.stream {
        body.insert("stream".into(), json!(true));
    }
    for (k, v) in extra.body {
        body.insert(k, v);
    }
    let mut headers = vec![("anthropic-version".to_string(), extra.version)];
    if let Some(b) = extra.beta {
        headers.push(("anthropic-beta".into(), b));
    }
    Ok((Value::Object(body), headers))
}

struct Extra {
    version: String,
    beta: Option<String>,
    body: Map<String, Value>,
}

impl Extra {
    fn from(request: &Request) -> Result<Extra, AdapterError> {
        let mut extra = Extra {
            version: DEFAULT_VERSION.into(),
            beta: None,
            body: Map::new(),
        };
        for (k, v) in &request.options.extra_object()? {
            match (k.as_str(), v) {
                ("anthropic_version", Value::String(s)) => extra.version = s.clone(),
                ("beta", Value::String(s)) => extra.beta = Some(s.clone()),
                ("body", Value::Object(m)) => extra.body = m.clone(),
                _ => {
                    return Err(AdapterError::unsupported(format!(
                        "unknown or invalid adapter option `{k}`: {v} (the anthropic adapter takes \
                         anthropic_version: string, beta: string, body: object)"
                    )));
                }
            }
        }
        Ok(extra)
    }
}

fn blocks(content: &[Content]) -> Vec<Value> {
    let mut out = Vec::new();
    for c in content {
        match c {
            // The API refuses empty text blocks.
            Content::Text { text } if text.is_empty() => {}
            Content::Text { text } => out.push(json!({"type": "text", "text": text})),
            // Thinking is sent back only with its signature, as the API requires.
            Content::Thinking(Thinking {
                text,
                signature: Some(sig),
            }) => out.push(json!({"type": "thinking", "thinking": text, "signature": sig})),
            Content::Thinking(_) => {}
            Content::ToolCall(t) => {
                // The model's arguments were checked by the host when it called the tool; an
                // input that was not a JSON object is sent back as an empty one.
                let input = serde_json::from_str::<Value>(&t.arguments)
                    .ok()
                    .filter(Value::is_object)
                    .unwrap_or_else(|| json!({}));
                out.push(json!({"type": "tool_use", "id": t.id, "name": t.name, "input": input}));
            }
            Content::ToolResult(r) => out.push(json!({
                "type": "tool_result",
                "tool_use_id": r.call_id,
                "content": r.content,
                "is_error": r.is_error,
            })),
        }
    }
    out
}

#[derive(Deserialize)]
struct Message {
    #[serde(rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    model: String,
    content: Option<Vec<Block>>,
    stop_reason: Option<String>,
    usage: Option<WireUsage>,
}

/// A content block, as the API sends it whole or opens it in a stream.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Block {
    Text {
        #[serde(default)]
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        #[serde(default)]
        input: Value,
    },
    Thinking {
        #[serde(default)]
        thinking: String,
        signature: Option<String>,
    },
    RedactedThinking {},
    #[serde(other)]
    Unknown,
}

/// Token counts as the Messages API reports them: already apart, as [`Usage`] wants them.
#[derive(Deserialize, Default, Clone, Copy)]
pub struct WireUsage {
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub cache_read_input_tokens: Option<u64>,
    pub cache_creation_input_tokens: Option<u64>,
}

impl WireUsage {
    /// Later counts (a stream's `message_delta`) replace earlier ones where given.
    pub fn update(&mut self, later: WireUsage) {
        self.input_tokens = later.input_tokens.or(self.input_tokens);
        self.output_tokens = later.output_tokens.or(self.output_tokens);
        self.cache_read_input_tokens = later
            .cache_read_input_tokens
            .or(self.cache_read_input_tokens);
        self.cache_creation_input_tokens = later
            .cache_creation_input_tokens
            .or(self.cache_creation_input_tokens);
    }

    pub fn into_usage(self) -> Usage {
        Usage {
            input_tokens: self.input_tokens.unwrap_or(0),
            output_tokens: self.output_tokens.unwrap_or(0),
            cache_read_tokens: self.cache_read_input_tokens.unwrap_or(0),
            cache_write_tokens: self.cache_creation_input_tokens.unwrap_or(0),
        }
    }
}

pub fn stop_reason(s: Option<&str>) -> StopReason {
    match s {
        Some("end_turn") => StopReason::EndTurn,
        Some("tool_use") => StopReason::ToolUse,
        Some("max_tokens") | Some("model_context_window_exceeded") => StopReason::MaxTokens,
        Some("stop_sequence") => StopReason::StopSequence,
        Some("refusal") => StopReason::Refusal,
        _ => StopReason::Other,
    }
}

/// A tool call from a whole `tool_use` block; its input must be a JSON object.
pub fn tool_call(id: String, name: String, input: &Value) -> Result<Content, AdapterError> {
    if name.is_empty() {
        return Err(AdapterError::malformed("a tool_use block has no name"));
    }
    Ok(Content::ToolCall(ToolCall {
        id,
        name,
        arguments: input.to_string(),
    }))
}

/// Parse a non-streamed reply.
pub fn parse_response(body: &[u8]) -> Result<Response, AdapterError> {
    let m: Message = serde_json::from_slice(body)
        .map_err(|e| AdapterError::malformed(format!("not a Messages API message: {e}")))?;
    if m.kind.as_deref().is_some_and(|k| k != "message") {
        return Err(AdapterError::malformed(format!(
            "expected a message, got a {}",
            m.kind.unwrap_or_default()
        )));
    }
    let Some(blocks) = m.content else {
        return Err(AdapterError::malformed("the message has no content"));
    };
    let mut content = Vec::new();
    for b in blocks {
        match b {
            Block::Text { text } => content.push(Content::text(text)),
            Block::ToolUse { id, name, input } => content.push(tool_call(id, name, &input)?),
            Block::Thinking {
                thinking,
                signature,
            } => content.push(Content::Thinking(Thinking {
                text: thinking,
                signature,
            })),
            // Encrypted reasoning has no place in the neutral model; it is dropped.
            Block::RedactedThinking {} | Block::Unknown => {}
        }
    }
    Response {
        content,
        stop_reason: stop_reason(m.stop_reason.as_deref()),
        usage: m.usage.unwrap_or_default().into_usage(),
        model: m.model,
    }
    .non_empty()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rawko_plugin_sdk::llm::{Message as Msg, Options, ToolResult, ToolSpec};

    fn request() -> Request {
        Request {
            model: "claude-sonnet-4-5".into(),
            base_url: "https://api.anthropic.com/v1".into(),
            system: "be brief".into(),
            messages: vec![
                Msg::user("weather?"),
                Msg {
                    role: Role::Assistant,
                    content: vec![
                        Content::Thinking(Thinking {
                            text: "hmm".into(),
                            signature: Some("sig".into()),
                        }),
                        Content::ToolCall(ToolCall {
                            id: "toolu_1".into(),
                            name: "get_weather".into(),
                            arguments: "{\"city\":\"Paris\"}".into(),
                        }),
                    ],
                },
                Msg {
                    role: Role::User,
                    content: vec![Content::ToolResult(ToolResult {
                        call_id: "toolu_1".into(),
                        content: "sunny".into(),
                        is_error: false,
                    })],
                },
            ],
            tools: vec![ToolSpec {
                name: "get_weather".into(),
                description: "Weather".into(),
                input_schema: json!({"type": "object"}),
            }],
            options: Options {
                thinking_budget: Some(2000),
                ..Options::default()
            },
            stream: false,
            sequence: 0,
        }
    }

    #[test]
    fn a_conversation_becomes_content_blocks() {
        let (body, headers) = build(&request()).unwrap();
        assert_eq!(body["system"], "be brief");
        assert_eq!(body["max_tokens"], 2000 + DEFAULT_MAX_TOKENS);
        assert_eq!(
            body["thinking"],
            json!({"type": "enabled", "budget_tokens": 2000})
        );
        let m = &body["messages"];
        assert_eq!(m[1]["content"][0]["type"], "thinking");
        assert_eq!(m[1]["content"][1]["input"]["city"], "Paris");
        assert_eq!(m[2]["content"][0]["tool_use_id"], "toolu_1");
        assert_eq!(
            headers[0],
            ("anthropic-version".into(), "2023-06-01".into())
        );
    }

    #[test]
    fn impossible_limits_are_refused() {
        let mut r = request();
        r.options.max_tokens = Some(1000);
        assert!(matches!(build(&r), Err(AdapterError::Unsupported { .. })));
        r.options.thinking_budget = Some(10);
        r.options.max_tokens = None;
        assert!(matches!(build(&r), Err(AdapterError::Unsupported { .. })));
    }

    #[test]
    fn malformed_replies_are_errors() {
        for body in [
            "[]",
            r#"{"type":"message","content":[]}"#,
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
            r#"{"type":"message","content":[{"type":"tool_use","id":"t","name":"","input":{}}],"stop_reason":"tool_use"}"#,
        ] {
            let r = parse_response(body.as_bytes());
            assert!(
                matches!(r, Err(AdapterError::Malformed { .. })),
                "{body}: {r:?}"
            );
        }
    }
}
