//! The first-party adapters through the real HTTP capability against the scripted model
//! server: text, tool calls, multi-turn tool results, streaming, usage, malformed provider
//! output, the providers' documented reply shapes, recording then replaying, and embeddings.
//! Also an adapter built against `rawko:plugin@0.1.0`, before embeddings, still serving.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rawko_adapters::instance::{AdapterOrigin, InstalledAdapters, Trust, resolve};
use rawko_adapters::{Adapter, OpenOptions, Recorder};
use rawko_capability::FsGrants;
use rawko_capability::http::{HttpClient, HttpGrant, Origin};
use rawko_config::AdapterConfig;
use rawko_plugin_sdk::embeddings::{EmbedRequest, Embeddings};
use rawko_plugin_sdk::llm::{
    AdapterError, Content, Message, Request, Response, Role, StopReason, ToolCall, ToolResult,
    ToolSpec,
};
use rawko_runtime::adapter::AdapterCallContext;
use rawko_runtime::progress::{NoProgress, ProgressSink};
use rawko_runtime::{AdapterCallError, AdapterPlugin, Budget, Runtime};
use serde_json::json;

use crate::support::model_server::{ModelServer, Reply, anthropic, openai};
use crate::support::{TEST_KEY, Workspace, block_on, cache_dir, fast_policy, open_adapter};

fn runtime() -> Runtime {
    Runtime::new(Some(cache_dir())).expect("runtime")
}

fn tools() -> Vec<ToolSpec> {
    ["Read", "Bash", "get_weather"]
        .iter()
        .map(|n| ToolSpec {
            name: n.to_string(),
            description: format!("The {n} tool."),
            input_schema: json!({"type": "object"}),
        })
        .collect()
}

/// Collects what an adapter reports while streaming.
#[derive(Default)]
struct Collect(Mutex<Vec<String>>);

impl ProgressSink for Collect {
    fn text(&self, delta: &str) {
        self.0.lock().unwrap().push(delta.to_string());
    }
    fn thinking(&self, _: &str) {}
}

fn ask(
    rt: &Runtime,
    adapter: &Adapter,
    messages: Vec<Message>,
    stream: bool,
) -> Result<Response, AdapterCallError> {
    let mut req = adapter.request("You are terse.", messages, tools());
    req.stream = stream;
    block_on(adapter.complete(rt, req, Arc::new(NoProgress)))
}

fn assistant_called(call: &ToolCall) -> Message {
    Message {
        role: Role::Assistant,
        content: vec![Content::ToolCall(call.clone())],
    }
}

fn user_result(call_id: &str, content: &str) -> Message {
    Message {
        role: Role::User,
        content: vec![Content::ToolResult(ToolResult {
            call_id: call_id.into(),
            content: content.into(),
            is_error: false,
        })],
    }
}

#[test]
fn openai_text_reply_with_usage_and_the_key_injected() {
    let rt = runtime();
    let server = ModelServer::start();
    server.push(openai::text("Hello there.", 19, 3));
    let adapter = open_adapter(&rt, "openai", &server.base_url(), fast_policy());
    let r = ask(&rt, &adapter, vec![Message::user("Hi")], false).unwrap();
    assert_eq!(r.text(), "Hello there.");
    assert_eq!(r.stop_reason, StopReason::EndTurn);
    assert_eq!((r.usage.input_tokens, r.usage.output_tokens), (19, 3));
    assert_eq!(r.model, "gpt-4.1-2025-04-14");

    let req = &server.received()[0];
    assert_eq!(
        (req.method.as_str(), req.path.as_str()),
        ("POST", "/v1/chat/completions")
    );
    assert_eq!(
        req.header("authorization"),
        Some(&*format!("Bearer {TEST_KEY}"))
    );
    let body = req.json();
    assert_eq!(body["model"], "test-model");
    assert_eq!(
        body["messages"][0],
        json!({"role": "system", "content": "You are terse."})
    );
    assert_eq!(
        body["messages"][1],
        json!({"role": "user", "content": "Hi"})
    );
    assert_eq!(body["tools"][0]["function"]["name"], "Read");
    assert!(body.get("stream").is_none());
}

#[test]
fn openai_tool_call_then_its_result_in_the_next_turn() {
    let rt = runtime();
    let server = ModelServer::start();
    server.push(openai::tool_call(
        "call_1",
        "get_weather",
        &json!({"city": "Paris"}),
    ));
    server.push(openai::text("It is sunny in Paris.", 60, 8));
    let adapter = open_adapter(&rt, "openai", &server.base_url(), fast_policy());

    let first = ask(
        &rt,
        &adapter,
        vec![Message::user("Weather in Paris?")],
        false,
    )
    .unwrap();
    assert_eq!(first.stop_reason, StopReason::ToolUse);
    let call = first.tool_calls().next().unwrap().clone();
    assert_eq!(
        (call.id.as_str(), call.name.as_str()),
        ("call_1", "get_weather")
    );
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&call.arguments).unwrap(),
        json!({"city": "Paris"})
    );

    let second = ask(
        &rt,
        &adapter,
        vec![
            Message::user("Weather in Paris?"),
            assistant_called(&call),
            user_result("call_1", "sunny, 24 C"),
        ],
        false,
    )
    .unwrap();
    assert_eq!(second.text(), "It is sunny in Paris.");
    let sent = server.received()[1].json();
    let m = sent["messages"].as_array().unwrap();
    assert_eq!(m[2]["tool_calls"][0]["id"], "call_1");
    assert_eq!(
        m[3],
        json!({"role": "tool", "tool_call_id": "call_1", "content": "sunny, 24 C"})
    );
}

#[test]
fn openai_streaming_reports_text_live_and_assembles_tool_calls() {
    let rt = runtime();
    let server = ModelServer::start();
    server.push(openai::stream_text(&["Hel", "lo, ", "world"], 12, 5));
    server.push(openai::stream_tool_call(
        "call_7",
        "Read",
        &["{\"pa", "th\": \"a.rs\"}"],
    ));
    let adapter = open_adapter(&rt, "openai", &server.base_url(), fast_policy());
    let seen = Arc::new(Collect::default());
    let mut req = adapter.request("", vec![Message::user("hi")], tools());
    req.stream = true;
    let r = block_on(adapter.complete(&rt, req.clone(), seen.clone())).unwrap();
    assert_eq!(r.text(), "Hello, world");
    assert_eq!(*seen.0.lock().unwrap(), ["Hel", "lo, ", "world"]);
    assert_eq!((r.usage.input_tokens, r.usage.output_tokens), (12, 5));
    let body = server.received()[0].json();
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"]["include_usage"], true);

    let r = block_on(adapter.complete(&rt, req, Arc::new(NoProgress))).unwrap();
    let call = r.tool_calls().next().unwrap();
    assert_eq!(
        (call.id.as_str(), call.arguments.as_str()),
        ("call_7", "{\"path\": \"a.rs\"}")
    );
    assert_eq!(r.stop_reason, StopReason::ToolUse);
}

#[test]
fn anthropic_text_tool_use_and_tool_results() {
    let rt = runtime();
    let server = ModelServer::start();
    server.push(anthropic::tool_use(
        "toolu_1",
        "get_weather",
        &json!({"city": "Oslo"}),
    ));
    server.push(anthropic::text("Cold.", 90, 2));
    let adapter = open_adapter(&rt, "anthropic", &server.base_url(), fast_policy());
    let first = ask(
        &rt,
        &adapter,
        vec![Message::user("Weather in Oslo?")],
        false,
    )
    .unwrap();
    assert_eq!(first.stop_reason, StopReason::ToolUse);
    assert_eq!(first.text(), "I'll use a tool.");
    let call = first.tool_calls().next().unwrap().clone();
    assert_eq!(call.arguments, r#"{"city":"Oslo"}"#);
    assert_eq!(
        (first.usage.input_tokens, first.usage.output_tokens),
        (40, 20)
    );

    let second = ask(
        &rt,
        &adapter,
        vec![
            Message::user("Weather in Oslo?"),
            assistant_called(&call),
            user_result("toolu_1", "-5 C"),
        ],
        false,
    )
    .unwrap();
    assert_eq!(second.text(), "Cold.");

    let reqs = server.received();
    assert_eq!(reqs[0].path, "/v1/messages");
    assert_eq!(reqs[0].header("x-api-key"), Some(TEST_KEY));
    assert!(reqs[0].header("authorization").is_none());
    assert_eq!(reqs[0].header("anthropic-version"), Some("2023-06-01"));
    let body = reqs[1].json();
    assert_eq!(body["system"], "You are terse.");
    assert_eq!(body["max_tokens"], 8192);
    assert_eq!(body["messages"][1]["content"][0]["type"], "tool_use");
    assert_eq!(
        body["messages"][1]["content"][0]["input"],
        json!({"city": "Oslo"})
    );
    assert_eq!(
        body["messages"][2]["content"][0],
        json!({"type": "tool_result", "tool_use_id": "toolu_1", "content": "-5 C", "is_error": false})
    );
}

#[test]
fn anthropic_streaming_and_thinking_budget() {
    let rt = runtime();
    let server = ModelServer::start();
    server.push(anthropic::stream_text(&["Bon", "jour"], 25, 9));
    server.push(anthropic::stream_tool_use(
        "toolu_9",
        "Bash",
        &["{\"command\":", " \"ls\"}"],
    ));
    let adapter = open_adapter(&rt, "anthropic", &server.base_url(), fast_policy());
    let seen = Arc::new(Collect::default());
    let mut req = adapter.request("", vec![Message::user("hi")], tools());
    req.options.thinking_budget = Some(2048);
    let r = block_on(adapter.complete(&rt, req.clone(), seen.clone())).unwrap();
    assert_eq!(r.text(), "Bonjour");
    assert_eq!(*seen.0.lock().unwrap(), ["Bon", "jour"]);
    assert_eq!((r.usage.input_tokens, r.usage.output_tokens), (25, 9));
    let body = server.received()[0].json();
    assert_eq!(
        body["thinking"],
        json!({"type": "enabled", "budget_tokens": 2048})
    );
    assert_eq!(body["max_tokens"], 2048 + 8192);
    assert_eq!(body["stream"], true);

    let r = block_on(adapter.complete(&rt, req, Arc::new(NoProgress))).unwrap();
    assert_eq!(
        r.tool_calls().next().unwrap().arguments,
        r#"{"command":"ls"}"#
    );
}

fn expect_malformed(r: Result<Response, AdapterCallError>, what: &str) {
    match r {
        Err(AdapterCallError::Adapter(AdapterError::Malformed { message })) => {
            assert!(!message.is_empty(), "{what}")
        }
        other => panic!("{what}: expected a malformed-output error, got {other:?}"),
    }
}

#[test]
fn malformed_provider_output_is_a_structured_error() {
    let rt = runtime();
    let server = ModelServer::start();
    for plugin in ["openai", "anthropic"] {
        let adapter = open_adapter(&rt, plugin, &server.base_url(), fast_policy());
        let (empty, cut_events) = if plugin == "openai" {
            (
                openai::text("", 1, 0),
                openai::stream_text_events(&["Hel", "lo"], 1, 1)[..3].to_vec(),
            )
        } else {
            (
                anthropic::text("", 1, 0),
                anthropic::stream_text_events(&["Hel", "lo"], 1, 1)[..4].to_vec(),
            )
        };
        server.push(Reply::bytes(
            200,
            "application/json",
            b"{\"choices\": [".to_vec(),
        ));
        expect_malformed(
            ask(&rt, &adapter, vec![Message::user("x")], false),
            "bad JSON",
        );
        server.push(empty);
        expect_malformed(
            ask(&rt, &adapter, vec![Message::user("x")], false),
            "empty reply",
        );
        server.push(Reply::sse(cut_events));
        expect_malformed(
            ask(&rt, &adapter, vec![Message::user("x")], true),
            "truncated stream",
        );
        // A stream whose connection breaks mid-body is a transport error.
        let events = if plugin == "openai" {
            openai::stream_text_events(&["Hel", "lo"], 1, 1)[..2].to_vec()
        } else {
            anthropic::stream_text_events(&["Hel", "lo"], 1, 1)[..3].to_vec()
        };
        server.push(Reply::sse(events).cut());
        let r = ask(&rt, &adapter, vec![Message::user("x")], true);
        assert!(
            matches!(&r, Err(AdapterCallError::Adapter(AdapterError::Transport { message })) if message.contains("broke")),
            "{plugin}: {r:?}"
        );
    }
}

#[test]
fn bad_tool_calls_come_back_with_the_reply() {
    let rt = runtime();
    let server = ModelServer::start();
    let adapter = open_adapter(&rt, "openai", &server.base_url(), fast_policy());
    server.push(openai::tool_call("call_1", "rm_rf", &json!({})));
    match ask(&rt, &adapter, vec![Message::user("x")], false) {
        Err(AdapterCallError::InvalidToolCall {
            tool,
            message,
            response,
            ..
        }) => {
            assert_eq!(tool, "rm_rf");
            assert!(message.contains("no such tool"), "{message}");
            assert_eq!(response.tool_calls().count(), 1);
        }
        other => panic!("{other:?}"),
    }
    // Arguments that are not JSON, as some models write them.
    server.push(Reply::json(
        200,
        &json!({"model": "m", "choices": [{"message": {"content": null, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "Read", "arguments": "{path: a"}}]}, "finish_reason": "tool_calls"}]}),
    ));
    let r = ask(&rt, &adapter, vec![Message::user("x")], false);
    assert!(
        matches!(&r, Err(e @ AdapterCallError::InvalidToolCall { .. }) if e.to_string().contains("not valid JSON")),
        "{r:?}"
    );
    // And a provider error status is the provider's message.
    server.push(openai::error(400, "Invalid 'model': no such model"));
    let r = ask(&rt, &adapter, vec![Message::user("x")], false);
    assert!(
        matches!(&r, Err(AdapterCallError::Adapter(AdapterError::Status { status: 400, message })) if message.contains("no such model")),
        "{r:?}"
    );
}

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/adapters")
            .join(name),
    )
    .expect("fixture")
}

fn sse_fixture(name: &str) -> Reply {
    let text = String::from_utf8(fixture(name)).unwrap();
    // Served an event per write, as a provider flushes them.
    let events: Vec<String> = text.split_inclusive("\n\n").map(str::to_string).collect();
    Reply::sse(events)
}

#[test]
fn documented_provider_replies_parse() {
    let rt = runtime();
    let server = ModelServer::start();
    let openai_adapter = open_adapter(&rt, "openai", &server.base_url(), fast_policy());
    server.push(Reply::bytes(
        200,
        "application/json",
        fixture("openai-chat-completion-tool-calls.json"),
    ));
    let r = ask(&rt, &openai_adapter, vec![Message::user("x")], false).unwrap();
    assert_eq!(r.text(), "Let me look at both files.");
    let calls: Vec<_> = r.tool_calls().map(|c| c.id.as_str()).collect();
    assert_eq!(
        calls,
        [
            "call_Ws1n7hQpZ3kY8rVbTt2mXe9C",
            "call_Lq4c2GdN8yPa5uJf1oKi6RzB"
        ]
    );
    assert_eq!(
        (
            r.usage.input_tokens,
            r.usage.cache_read_tokens,
            r.usage.output_tokens
        ),
        (318, 1024, 58)
    );

    server.push(sse_fixture("openai-chat-completion-stream.sse"));
    let r = ask(&rt, &openai_adapter, vec![Message::user("x")], true).unwrap();
    assert_eq!(r.text(), "The build passes.");
    assert_eq!((r.usage.input_tokens, r.usage.output_tokens), (211, 4));

    let anthropic_adapter = open_adapter(&rt, "anthropic", &server.base_url(), fast_policy());
    server.push(Reply::bytes(
        200,
        "application/json",
        fixture("anthropic-message-tool-use.json"),
    ));
    let r = ask(&rt, &anthropic_adapter, vec![Message::user("x")], false).unwrap();
    assert!(
        matches!(&r.content[0], Content::Thinking(t) if t.signature.as_deref().is_some_and(|s| s.starts_with("EqQB")))
    );
    assert_eq!(
        r.tool_calls().next().unwrap().arguments,
        r#"{"offset":10,"path":"tests/parse.rs"}"#
    );
    assert_eq!(
        (
            r.usage.input_tokens,
            r.usage.cache_read_tokens,
            r.usage.output_tokens
        ),
        (472, 2048, 91)
    );

    server.push(sse_fixture("anthropic-messages-stream.sse"));
    let r = ask(&rt, &anthropic_adapter, vec![Message::user("x")], true).unwrap();
    assert_eq!(r.text(), "Running the tests now.");
    assert_eq!(
        r.tool_calls().next().unwrap().arguments,
        r#"{"command":"cargo test"}"#
    );
    assert_eq!((r.usage.input_tokens, r.usage.output_tokens), (318, 64));
}

fn replay_adapter(rt: &Runtime, ws: &Workspace, recording: &str) -> Adapter {
    let cfg = AdapterConfig {
        plugin: "replay".into(),
        recording: Some(recording.into()),
        ..AdapterConfig::default()
    };
    let config_file = ws.path().join(".rawko/config.yaml");
    let instance = resolve(
        "demo",
        &cfg,
        &AdapterOrigin::Workspace(config_file),
        None,
        Trust::Untrusted,
        &InstalledAdapters::none(),
    )
    .unwrap();
    block_on(Adapter::open(
        rt,
        instance,
        &|_| None,
        OpenOptions::default(),
    ))
    .unwrap()
}

#[test]
fn a_recorded_conversation_replays_exactly_without_network() {
    let rt = runtime();
    let ws = Workspace::new();
    std::fs::create_dir_all(ws.path().join(".rawko")).unwrap();
    let path = ws.path().join(".rawko/session.jsonl");
    {
        let server = ModelServer::start();
        server.push(openai::tool_call(
            "call_1",
            "Read",
            &json!({"path": "a.rs"}),
        ));
        server.push(openai::text("Done.", 40, 2));
        let mut adapter = open_adapter(&rt, "openai", &server.base_url(), fast_policy());
        adapter.record_to(Arc::new(Recorder::create(&path).unwrap()));
        // The key typed into a prompt is redacted from the recording too.
        let first = ask(
            &rt,
            &adapter,
            vec![Message::user(format!("my key is {TEST_KEY}"))],
            false,
        )
        .unwrap();
        let call = first.tool_calls().next().unwrap().clone();
        let convo = vec![
            Message::user(format!("my key is {TEST_KEY}")),
            assistant_called(&call),
            user_result("call_1", "/tmp/run-1/a.rs: fn main() {}"),
        ];
        assert_eq!(ask(&rt, &adapter, convo, false).unwrap().text(), "Done.");
    }
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        !text.contains(TEST_KEY),
        "the key reached the recording:\n{text}"
    );
    assert_eq!(text.lines().count(), 3, "{text}");

    // The server is gone; the replay needs neither it nor a key.
    let replay = replay_adapter(&rt, &ws, "session.jsonl");
    let prompt = "my key is [redacted]".to_string();
    let first = ask(&rt, &replay, vec![Message::user(&prompt)], false).unwrap();
    let call = first.tool_calls().next().unwrap().clone();
    assert_eq!(call.name, "Read");
    // A tool result with another path is the same conversation.
    let convo = vec![
        Message::user(&prompt),
        assistant_called(&call),
        user_result("call_1", "/tmp/run-2/a.rs: fn main() {}"),
    ];
    let seen = Arc::new(Collect::default());
    let mut req = replay.request("", convo.clone(), tools());
    req.stream = true;
    let second = block_on(replay.complete(&rt, req, seen.clone())).unwrap();
    assert_eq!(second.text(), "Done.");
    assert_eq!(*seen.0.lock().unwrap(), ["Done."]);
    // One more completion than was recorded.
    let r = ask(&rt, &replay, convo, false);
    assert!(
        matches!(&r, Err(AdapterCallError::Adapter(AdapterError::Unsupported { message })) if message.contains("past the end")),
        "{r:?}"
    );

    // A conversation that went another way is refused, saying where.
    let replay = replay_adapter(&rt, &ws, "session.jsonl");
    let r = ask(&rt, &replay, vec![Message::user("something else")], false);
    match r {
        Err(AdapterCallError::Adapter(AdapterError::Unsupported { message })) => {
            assert!(
                message.contains("diverged") && message.contains("messages[0]"),
                "{message}"
            );
            assert!(message.contains("something else"), "{message}");
        }
        other => panic!("{other:?}"),
    }
}

fn embed(rt: &Runtime, adapter: &Adapter, inputs: &[&str]) -> Result<Embeddings, AdapterCallError> {
    let inputs = inputs.iter().map(|s| s.to_string()).collect();
    block_on(adapter.embed(rt, inputs))
}

#[test]
fn openai_embeddings_send_the_inputs_and_come_back_in_input_order() {
    let rt = runtime();
    let server = ModelServer::start();
    let adapter = open_adapter(&rt, "openai", &server.base_url(), fast_policy());
    assert!(adapter.exports_embeddings());
    // Listed out of order: the indexes say where each vector goes.
    server.push(openai::embeddings_data(
        vec![
            json!({"object": "embedding", "index": 1, "embedding": [0.0, 1.0, -0.5]}),
            json!({"object": "embedding", "index": 0, "embedding": [0.25, 0.5, 0.75]}),
        ],
        9,
    ));
    let e = embed(&rt, &adapter, &["fn main() {}", "the second chunk"]).unwrap();
    assert_eq!(e.vectors, [[0.25, 0.5, 0.75], [0.0, 1.0, -0.5]]);
    assert_eq!(e.dimensions(), 3);
    assert_eq!(e.model, "text-embedding-3-small");
    assert_eq!(e.usage.input_tokens, 9);

    let req = &server.received()[0];
    assert_eq!(
        (req.method.as_str(), req.path.as_str()),
        ("POST", "/v1/embeddings")
    );
    assert_eq!(
        req.header("authorization"),
        Some(&*format!("Bearer {TEST_KEY}"))
    );
    assert_eq!(
        req.json(),
        json!({"model": "test-model", "input": ["fn main() {}", "the second chunk"]})
    );

    // Nothing to embed: nothing sent.
    assert!(embed(&rt, &adapter, &[]).unwrap().vectors.is_empty());
    assert_eq!(server.hits(), 1);
}

#[test]
fn malformed_embeddings_are_a_structured_error() {
    let rt = runtime();
    let server = ModelServer::start();
    let adapter = open_adapter(&rt, "openai", &server.base_url(), fast_policy());
    let item = |i: usize, v: serde_json::Value| json!({"index": i, "embedding": v});
    let cases = [
        (
            openai::embeddings(&[&[1.0, 2.0]], 1),
            "one vector for two inputs",
        ),
        (
            openai::embeddings(&[&[1.0, 2.0], &[1.0, 2.0], &[3.0, 4.0]], 1),
            "three vectors for two inputs",
        ),
        (
            openai::embeddings(&[&[1.0, 2.0], &[1.0]], 1),
            "ragged vectors",
        ),
        (openai::embeddings(&[&[], &[]], 1), "empty vectors"),
        (
            openai::embeddings_data(vec![item(0, json!([1.0])), item(1, json!(["NaN"]))], 1),
            "a string for a number",
        ),
        (
            openai::embeddings_data(vec![item(0, json!([1.0])), item(1, json!([1e39]))], 1),
            "a number too large for f32",
        ),
        (
            openai::embeddings_data(vec![item(0, json!([1.0])), item(0, json!([2.0]))], 1),
            "two vectors for one input",
        ),
        (
            openai::embeddings_data(vec![item(0, json!([1.0])), item(5, json!([2.0]))], 1),
            "an index past the inputs",
        ),
        (
            Reply::json(200, &json!({"object": "list", "model": "m"})),
            "no data",
        ),
        (
            Reply::bytes(200, "application/json", b"{\"data\": [".to_vec()),
            "bad JSON",
        ),
    ];
    for (reply, what) in cases {
        server.push(reply);
        match embed(&rt, &adapter, &["a", "b"]) {
            Err(AdapterCallError::Adapter(AdapterError::Malformed { message })) => {
                assert!(!message.is_empty(), "{what}")
            }
            other => panic!("{what}: expected a malformed-output error, got {other:?}"),
        }
    }
}

#[test]
fn embeddings_status_errors_map_as_for_completions() {
    let rt = runtime();
    let server = ModelServer::start();
    let adapter = open_adapter(&rt, "openai", &server.base_url(), fast_policy());
    // A provider that echoes the key back has it redacted before anyone sees it.
    server.push(openai::error(
        401,
        &format!("Incorrect API key: {TEST_KEY}"),
    ));
    let r = embed(&rt, &adapter, &["a"]);
    match &r {
        Err(AdapterCallError::Adapter(AdapterError::Status { status, message })) => {
            assert_eq!(*status, 401);
            assert!(message.starts_with("Incorrect API key"), "{message}");
            assert!(!message.contains(TEST_KEY), "{message}");
        }
        other => panic!("{other:?}"),
    }
    server.push(openai::error(
        404,
        "The model `test-model` does not exist or you do not have access to it.",
    ));
    let r = embed(&rt, &adapter, &["a"]);
    assert!(
        matches!(&r, Err(AdapterCallError::Adapter(AdapterError::Status { status: 404, message })) if message.contains("does not exist")),
        "{r:?}"
    );
    assert_eq!(r.unwrap_err().code(), "status");
}

#[test]
fn adapters_without_embeddings_say_unsupported() {
    let rt = runtime();
    let server = ModelServer::start();
    let anthropic = open_adapter(&rt, "anthropic", &server.base_url(), fast_policy());
    let ws = Workspace::new();
    std::fs::create_dir_all(ws.path().join(".rawko")).unwrap();
    std::fs::write(ws.path().join(".rawko/session.jsonl"), "").unwrap();
    let replay = replay_adapter(&rt, &ws, "session.jsonl");
    for adapter in [&anthropic, &replay] {
        // They export the interface (the SDK's default answers it) and send nothing.
        assert!(adapter.exports_embeddings());
        let r = embed(&rt, adapter, &["a"]);
        assert!(
            matches!(&r, Err(AdapterCallError::Adapter(AdapterError::Unsupported { message })) if message.contains("no embeddings")),
            "{}: {r:?}",
            adapter.name()
        );
    }
    assert_eq!(server.hits(), 0);
}

/// `tests/fixtures/plugins/adapter-wit-0.1.0.wasm`: an adapter built against the frozen
/// `rawko:plugin@0.1.0`, before `embeddings` (see the README beside it).
fn adapter_wit_0_1_0() -> Vec<u8> {
    std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures/plugins/adapter-wit-0.1.0.wasm"),
    )
    .expect("fixture")
}

#[test]
fn an_adapter_built_against_wit_0_1_0_loads_completes_and_has_no_embeddings() {
    let wasm = adapter_wit_0_1_0();
    // Installing it is checked as before: built against 0.1.0, which this rawko implements.
    let info = rawko_distribution::ComponentInfo::read(&wasm).unwrap();
    assert_eq!(info.exports, ["rawko:plugin/llm@0.1.0"]);
    let manifest = info.manifest().unwrap();
    assert_eq!(
        info.check(&manifest).unwrap(),
        semver::Version::new(0, 1, 0)
    );

    let rt = runtime();
    let plugin = block_on(AdapterPlugin::load(&rt, "adapter-wit-0.1.0", &wasm)).expect("load");
    assert!(!plugin.exports_embeddings());
    let server = ModelServer::start();
    let mut grant = HttpGrant::none();
    grant.allow(Origin::parse(&server.url()).unwrap(), true);
    let http = HttpClient::new(grant, vec![], fast_policy(), Default::default()).unwrap();
    let files = FsGrants::none();
    let seen = Arc::new(Collect::default());
    let cx = AdapterCallContext {
        http: Some(Arc::new(http)),
        files: &files,
        progress: seen.clone(),
        budget: Budget {
            timeout: Duration::from_secs(20),
            ..Budget::default()
        },
    };
    let request = Request {
        model: "old-model".into(),
        base_url: server.base_url(),
        system: String::new(),
        messages: vec![Message::user("hello, old adapter")],
        tools: vec![],
        options: Default::default(),
        stream: true,
        sequence: 0,
    };
    // Its `http`, `progress` and `log` imports are the host's 0.1.1 ones.
    server.push(Reply::bytes(
        200,
        "text/plain",
        b"hello from 0.1.0".to_vec(),
    ));
    let r = block_on(plugin.complete(&rt, &request, &cx)).unwrap();
    assert_eq!(r.text(), "hello from 0.1.0");
    assert_eq!(
        (r.model.as_str(), r.stop_reason),
        ("old-model", StopReason::EndTurn)
    );
    assert_eq!(*seen.0.lock().unwrap(), ["hello from 0.1.0"]);
    let req = &server.received()[0];
    assert_eq!(
        (req.method.as_str(), req.path.as_str()),
        ("POST", "/v1/echo")
    );
    assert_eq!(req.body, b"hello, old adapter");

    // Asked to embed, it is not run at all: the host answers for it.
    let embed = EmbedRequest {
        model: "old-model".into(),
        base_url: server.base_url(),
        inputs: vec!["a".into()],
        dimensions: None,
    };
    let r = block_on(plugin.embed(&rt, &embed, &cx));
    match &r {
        Err(AdapterCallError::Adapter(AdapterError::Unsupported { message })) => {
            assert!(message.contains("rawko:plugin/embeddings"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(server.hits(), 1);

    // And it serves again after that, in a fresh sandbox.
    server.push(Reply::bytes(200, "text/plain", b"again".to_vec()));
    let r = block_on(plugin.complete(&rt, &request, &cx)).unwrap();
    assert_eq!(r.text(), "again");
}
