//! The Chat Completions wire format: the request body, and the reply when it is not streamed.

use rawko_plugin_sdk::llm::{
    AdapterError, Content, Request, Response, Role, StopReason, Thinking, ToolCall, Usage,
};
use serde::Deserialize;
use serde_json::{Map, Value, json};

/// The request body for `request`.
pub fn request_body(request: &Request) -> Result<Value, AdapterError> {
    let extra = Extra::from(request)?;
    let mut messages = Vec::new();
    if !request.system.is_empty() {
        messages.push(json!({"role": "system", "content": request.system}));
    }
    for m in &request.messages {
        match m.role {
            Role::User => user_messages(&m.content, &mut messages),
            Role::Assistant => messages.push(assistant_message(&m.content)),
        }
    }
    let mut body = Map::new();
    body.insert("model".into(), json!(request.model));
    body.insert("messages".into(), Value::Array(messages));
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| {
                json!({
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.input_schema,
                    }
                })
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    let o = &request.options;
    if let Some(n) = o.max_tokens {
        body.insert(extra.max_tokens_param(&request.base_url).into(), json!(n));
    }
    if let Some(t) = o.temperature {
        body.insert("temperature".into(), json!(t));
    }
    if let Some(e) = o.reasoning_effort {
        body.insert("reasoning_effort".into(), json!(e.as_str()));
    }
    if o.thinking_budget.is_some() && o.reasoning_effort.is_none() {
        return Err(AdapterError::unsupported(
            "Chat Completions has no thinking budget; set reasoning_effort (low, medium, high) instead",
        ));
    }
    if request.stream {
        body.insert("stream".into(), json!(true));
        if extra.stream_usage {
            body.insert("stream_options".into(), json!({"include_usage": true}));
        }
    }
    for (k, v) in extra.body {
        body.insert(k, v);
    }
    Ok(Value::Object(body))
}

/// The adapter options this plugin understands.
struct Extra {
    max_tokens_param: Option<String>,
    stream_usage: bool,
    body: Map<String, Value>,
}

impl Extra {
    fn from(request: &Request) -> Result<Extra, AdapterError> {
        let mut extra = Extra {
            max_tokens_param: None,
            stream_usage: true,
            body: Map::new(),
        };
        for (k, v) in &request.options.extra_object()? {
            match (k.as_str(), v) {
                ("max_tokens_param", Value::String(s))
                    if s == "max_tokens" || s == "max_completion_tokens" =>
                {
                    extra.max_tokens_param = Some(s.clone());
                }
                ("stream_usage", Value::Bool(b)) => extra.stream_usage = *b,
                ("body", Value::Object(m)) => extra.body = m.clone(),
                _ => {
                    return Err(AdapterError::unsupported(format!(
                        "unknown or invalid adapter option `{k}`: {v} (the openai adapter takes \
                         max_tokens_param: max_tokens | max_completion_tokens, stream_usage: bool, \
                         body: object)"
                    )));
                }
            }
        }
        Ok(extra)
    }

    fn max_tokens_param(&self, base_url: &str) -> &str {
        match &self.max_tokens_param {
            Some(p) => p,
            None if is_openai(base_url) => "max_completion_tokens",
            None => "max_tokens",
        }
    }
}

/// Whether `base_url` is OpenAI's own API rather than a compatible server.
fn is_openai(base_url: &str) -> bool {
    let rest = base_url
        .strip_prefix("https://")
        .or_else(|| base_url.strip_prefix("http://"))
        .unwrap_or(base_url);
    let host = rest.split(['/', ':']).next().unwrap_or("");
    host == "api.openai.com"
}

/// A user turn: tool results become `tool` messages (which must directly follow the assistant
/// message that called them), other text one `user` message after them.
fn user_messages(content: &[Content], out: &mut Vec<Value>) {
    let mut text = String::new();
    for c in content {
        match c {
            Content::ToolResult(r) => {
                let content = if r.is_error {
                    format!("Error: {}", r.content)
                } else {
                    r.content.clone()
                };
                out.push(json!({"role": "tool", "tool_call_id": r.call_id, "content": content}));
            }
            Content::Text { text: t } => push_paragraph(&mut text, t),
            // A user does not think or call tools; nothing to send.
            Content::Thinking(_) | Content::ToolCall(_) => {}
        }
    }
    if !text.is_empty() {
        out.push(json!({"role": "user", "content": text}));
    }
}

fn assistant_message(content: &[Content]) -> Value {
    let mut text = String::new();
    let mut calls = Vec::new();
    for c in content {
        match c {
            Content::Text { text: t } => push_paragraph(&mut text, t),
            Content::ToolCall(t) => calls.push(json!({
                "id": t.id,
                "type": "function",
                "function": {"name": t.name, "arguments": t.arguments},
            })),
            // Chat Completions takes no reasoning back.
            Content::Thinking(_) | Content::ToolResult(_) => {}
        }
    }
    let mut m = Map::new();
    m.insert("role".into(), json!("assistant"));
    m.insert(
        "content".into(),
        if text.is_empty() {
            Value::Null
        } else {
            json!(text)
        },
    );
    if !calls.is_empty() {
        m.insert("tool_calls".into(), Value::Array(calls));
    }
    Value::Object(m)
}

fn push_paragraph(out: &mut String, t: &str) {
    if !out.is_empty() {
        out.push_str("\n\n");
    }
    out.push_str(t);
}

#[derive(Deserialize)]
struct Completion {
    #[serde(default)]
    model: String,
    #[serde(default)]
    choices: Vec<Choice>,
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct Choice {
    message: Option<WireMessage>,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct WireMessage {
    content: Option<String>,
    refusal: Option<String>,
    /// DeepSeek and vLLM call it this...
    reasoning_content: Option<String>,
    /// ...Ollama and OpenRouter this.
    reasoning: Option<String>,
    #[serde(default)]
    tool_calls: Vec<WireToolCall>,
}

#[derive(Deserialize)]
struct WireToolCall {
    id: Option<String>,
    function: Option<WireFunction>,
}

#[derive(Deserialize)]
struct WireFunction {
    name: Option<String>,
    arguments: Option<String>,
}

/// Token counts as Chat Completions reports them.
#[derive(Deserialize, Default)]
pub struct WireUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    prompt_tokens_details: Option<PromptDetails>,
}

#[derive(Deserialize, Default)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: u64,
}

impl WireUsage {
    /// Cached prompt tokens are part of `prompt_tokens` here, and apart in [`Usage`].
    pub fn into_usage(self) -> Usage {
        let cached = self.prompt_tokens_details.map_or(0, |d| d.cached_tokens);
        Usage {
            input_tokens: self.prompt_tokens.saturating_sub(cached),
            output_tokens: self.completion_tokens,
            cache_read_tokens: cached,
            cache_write_tokens: 0,
        }
    }
}

/// The stop reason for a `finish_reason`, given whether the reply called tools (some servers
/// say `stop` when they did).
pub fn stop_reason(finish_reason: Option<&str>, has_tool_calls: bool) -> StopReason {
    match finish_reason {
        _ if has_tool_calls => StopReason::ToolUse,
        Some("stop") => StopReason::EndTurn,
        Some("tool_calls") | Some("function_call") => StopReason::ToolUse,
        Some("length") => StopReason::MaxTokens,
        Some("content_filter") => StopReason::Refusal,
        _ => StopReason::Other,
    }
}

/// Parse a non-streamed reply.
pub fn parse_response(body: &[u8]) -> Result<Response, AdapterError> {
    let c: Completion = serde_json::from_slice(body)
        .map_err(|e| AdapterError::malformed(format!("not a chat completion: {e}")))?;
    let Some(choice) = c.choices.into_iter().next() else {
        return Err(AdapterError::malformed("the reply has no choices"));
    };
    let Some(m) = choice.message else {
        return Err(AdapterError::malformed("the first choice has no message"));
    };
    let mut content = Vec::new();
    if let Some(r) = m
        .reasoning_content
        .or(m.reasoning)
        .filter(|r| !r.is_empty())
    {
        content.push(Content::Thinking(Thinking {
            text: r,
            signature: None,
        }));
    }
    let refused = m.refusal.as_ref().is_some_and(|r| !r.is_empty());
    if let Some(t) = m.content.filter(|t| !t.is_empty()) {
        content.push(Content::text(t));
    } else if let Some(r) = m.refusal.filter(|r| !r.is_empty()) {
        content.push(Content::text(r));
    }
    let has_tool_calls = !m.tool_calls.is_empty();
    for (i, t) in m.tool_calls.into_iter().enumerate() {
        let Some(f) = t.function else {
            return Err(AdapterError::malformed(format!(
                "tool call {i} has no function"
            )));
        };
        let Some(name) = f.name.filter(|n| !n.is_empty()) else {
            return Err(AdapterError::malformed(format!(
                "tool call {i} has no name"
            )));
        };
        content.push(Content::ToolCall(ToolCall {
            id: t
                .id
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| format!("call_{i}")),
            name,
            arguments: f.arguments.unwrap_or_default(),
        }));
    }
    let stop = if refused {
        StopReason::Refusal
    } else {
        stop_reason(choice.finish_reason.as_deref(), has_tool_calls)
    };
    Response {
        content,
        stop_reason: stop,
        usage: c.usage.unwrap_or_default().into_usage(),
        model: c.model,
    }
    .non_empty()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rawko_plugin_sdk::llm::{Message, Options, ReasoningEffort, ToolResult, ToolSpec};

    fn request() -> Request {
        Request {
            model: "gpt-4.1".into(),
            base_url: "https://api.openai.com/v1".into(),
            system: "be brief".into(),
            messages: vec![
                Message::user("weather?"),
                Message {
                    role: Role::Assistant,
                    content: vec![
                        Content::text("checking"),
                        Content::ToolCall(ToolCall {
                            id: "call_1".into(),
                            name: "get_weather".into(),
                            arguments: "{\"city\":\"Paris\"}".into(),
                        }),
                    ],
                },
                Message {
                    role: Role::User,
                    content: vec![
                        Content::ToolResult(ToolResult {
                            call_id: "call_1".into(),
                            content: "no such city".into(),
                            is_error: true,
                        }),
                        Content::text("try again"),
                    ],
                },
            ],
            tools: vec![ToolSpec {
                name: "get_weather".into(),
                description: "Weather".into(),
                input_schema: json!({"type": "object"}),
            }],
            options: Options {
                max_tokens: Some(100),
                reasoning_effort: Some(ReasoningEffort::High),
                ..Options::default()
            },
            stream: true,
            sequence: 0,
        }
    }

    #[test]
    fn a_conversation_becomes_chat_messages() {
        let body = request_body(&request()).unwrap();
        let m = body["messages"].as_array().unwrap();
        let roles: Vec<&str> = m.iter().map(|m| m["role"].as_str().unwrap()).collect();
        assert_eq!(roles, ["system", "user", "assistant", "tool", "user"]);
        assert_eq!(m[2]["tool_calls"][0]["function"]["name"], "get_weather");
        assert_eq!(m[3]["tool_call_id"], "call_1");
        assert_eq!(m[3]["content"], "Error: no such city");
        assert_eq!(body["tools"][0]["function"]["parameters"]["type"], "object");
        assert_eq!(body["max_completion_tokens"], 100);
        assert_eq!(body["reasoning_effort"], "high");
        assert_eq!(body["stream_options"]["include_usage"], true);
    }

    #[test]
    fn compatible_servers_get_max_tokens_and_options_are_strict() {
        let mut r = request();
        r.base_url = "http://127.0.0.1:11434/v1".into();
        r.options.extra = Some(json!({"body": {"seed": 7}, "stream_usage": false}));
        let body = request_body(&r).unwrap();
        assert_eq!(body["max_tokens"], 100);
        assert_eq!(body["seed"], 7);
        assert!(body.get("stream_options").is_none());
        r.options.extra = Some(json!({"max_token_param": "x"}));
        assert!(matches!(
            request_body(&r),
            Err(AdapterError::Unsupported { .. })
        ));
    }

    #[test]
    fn malformed_replies_are_errors() {
        for body in [
            "not json",
            "{\"choices\": []}",
            "{\"choices\": [{\"message\": {\"content\": \"\"}, \"finish_reason\": \"stop\"}]}",
            "{\"choices\": [{\"message\": {\"tool_calls\": [{\"id\": \"x\"}]}}]}",
        ] {
            let r = parse_response(body.as_bytes());
            assert!(
                matches!(r, Err(AdapterError::Malformed { .. })),
                "{body}: {r:?}"
            );
        }
    }

    #[test]
    fn tool_calls_with_stop_are_tool_use_and_cached_tokens_are_apart() {
        let r = parse_response(
            br#"{"model":"llama3","choices":[{"message":{"content":null,"tool_calls":[{"function":{"name":"f","arguments":"{}"}}]},"finish_reason":"stop"}],
                "usage":{"prompt_tokens":100,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":60}}}"#,
        )
        .unwrap();
        assert_eq!(r.stop_reason, StopReason::ToolUse);
        assert_eq!(r.tool_calls().next().unwrap().id, "call_0");
        assert_eq!((r.usage.input_tokens, r.usage.cache_read_tokens), (40, 60));
    }
}
