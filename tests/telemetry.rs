//! Traces over OTLP: a task's spans, named as the GenAI conventions name them, read back by a
//! receiver decoding OpenTelemetry's own protocol, match what the store holds, and carry no
//! prompt, message or tool text.

use serde_json::json;

use crate::support::model_server::{ModelServer, openai};
use crate::support::otlp::{Receiver, Span};
use crate::support::{Run, TEST_KEY, Workspace, rawko};

const PROMPT: &str = "Summarise notes.txt. PLANTED-PROMPT-TEXT";
const NOTES: &str = "PLANTED-FILE-CONTENT and an API key sk-live-0123456789abcdef";

/// A workspace whose user config talks to `server`, with a `worker` agent.
fn setup() -> (Workspace, ModelServer) {
    let (ws, server) = crate::support::scripted_worker("");
    ws.write("notes.txt", NOTES);
    (ws, server)
}

/// `rawko run --json` of `prompt` from the worker, with the adapter's key; traces go to
/// `receiver` when there is one.
fn worker(ws: &Workspace, receiver: Option<&Receiver>, prompt: &str) -> std::process::Command {
    let mut cmd = rawko(ws);
    cmd.env("TEST_KEY", TEST_KEY).args([
        "run",
        "--agent",
        "worker",
        "--json",
        "--no-stream",
        prompt,
    ]);
    if let Some(r) = receiver {
        cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", r.endpoint());
    }
    cmd
}

fn run(ws: &Workspace, receiver: &Receiver) -> Run {
    Run::of(worker(ws, Some(receiver), PROMPT).output().unwrap())
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn one<'a>(spans: &'a [Span], name: &str) -> &'a Span {
    let found: Vec<&Span> = spans.iter().filter(|s| s.name == name).collect();
    assert_eq!(found.len(), 1, "{name}: {spans:#?}");
    found[0]
}

#[test]
fn a_task_is_traced_as_the_store_records_it() {
    let (ws, server) = setup();
    server.push(openai::tool_call(
        "c1",
        "Read",
        &json!({"path": "notes.txt"}),
    ));
    server.push(openai::tool_call(
        "c2",
        "finish",
        &json!({"status": "success", "summary": "Read it."}),
    ));
    let receiver = Receiver::start();
    let r = run(&ws, &receiver);
    assert_eq!(r.code, 0, "{r:?}");
    let id = r
        .stdout
        .lines()
        .find_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).ok()?;
            v["task"].as_str().map(String::from)
        })
        .unwrap();

    // Everything is sent by the time rawko exits.
    let spans = receiver.spans();
    let task = one(&spans, "invoke_workflow rawko-task");
    assert!(task.parent.is_empty(), "{task:?}");
    assert_eq!(task.attr("gen_ai.operation.name"), Some("invoke_workflow"));
    assert_eq!(task.attr("gen_ai.conversation.id"), Some(id.as_str()));
    assert_eq!(task.attr("rawko.task.status"), Some("done"));
    assert_eq!(
        receiver.services(),
        vec!["rawko".to_string(); receiver.services().len()]
    );

    let agent = one(&spans, "invoke_agent worker");
    assert_eq!(agent.parent, task.span_id);
    assert_eq!(agent.attr("gen_ai.agent.name"), Some("worker"));
    assert_eq!(agent.attr("rawko.outcome"), Some("succeeded"));
    assert_eq!(agent.attr("rawko.sandbox.mode"), Some("workspace-write"));
    assert_eq!(agent.attr("rawko.untrusted"), Some("false"));
    // The arbiter's choice after the state, under the task.
    let arbiter = one(&spans, "rawko.arbiter");
    assert_eq!(arbiter.parent, task.span_id);
    assert_eq!(
        (
            arbiter.attr("rawko.arbiter.from"),
            arbiter.attr("rawko.arbiter.choice"),
            arbiter.attr("rawko.arbiter.mode"),
            arbiter.attr("rawko.arbiter.fallback"),
        ),
        (Some("worker"), Some("done"), Some("fixed"), Some("false"))
    );

    // One chat per model call, one execute_tool per tool call, in order, under the state.
    let chats: Vec<&Span> = spans.iter().filter(|s| s.name == "chat m").collect();
    assert_eq!(chats.len(), 2, "{spans:#?}");
    for c in &chats {
        assert_eq!(c.parent, agent.span_id);
        assert_eq!(c.trace_id, task.trace_id);
        assert_eq!(c.kind, 3, "client: {c:?}");
        assert_eq!(c.attr("gen_ai.request.model"), Some("m"));
        assert_eq!(c.attr("gen_ai.provider.name"), Some("scripted"));
        assert_eq!(c.attr("rawko.retry"), Some("false"));
    }
    assert_eq!(
        chats[0].attr("gen_ai.response.finish_reasons"),
        Some(r#"["tool_use"]"#)
    );
    let tool = one(&spans, "execute_tool Read");
    assert_eq!(tool.parent, agent.span_id);
    assert_eq!(tool.attr("gen_ai.tool.name"), Some("Read"));
    assert_eq!(tool.attr("gen_ai.tool.type"), Some("function"));
    assert!(
        tool.attr("gen_ai.tool.call.id")
            .is_some_and(|c| c.ends_with("c1")),
        "{tool:?}"
    );
    assert_eq!(tool.attr("rawko.verdict"), Some("allowed"));
    assert!(chats[0].start < tool.start && tool.start < chats[1].start);

    // The tokens add up to what `tasks show` says.
    let shown = Run::of(
        rawko(&ws)
            .args(["tasks", "show", "--json", &id])
            .output()
            .unwrap(),
    )
    .json();
    let sum = |key: &str| -> i64 {
        chats
            .iter()
            .map(|c| c.attr(key).unwrap().parse::<i64>().unwrap())
            .sum()
    };
    assert_eq!(
        sum("gen_ai.usage.input_tokens"),
        shown["usage"]["input_tokens"]
    );
    assert_eq!(
        sum("gen_ai.usage.output_tokens"),
        shown["usage"]["output_tokens"]
    );
    // The store keeps each model call and the run, as the spans tell them.
    let calls = shown["model_calls"].as_array().unwrap();
    assert_eq!(calls.len(), chats.len(), "{shown:#}");
    assert_eq!(
        (
            &calls[0]["outcome"],
            &calls[0]["finish_reason"],
            &calls[0]["attempt"]
        ),
        (&json!("ok"), &json!("tool_use"), &json!(0))
    );
    let runs = shown["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1, "{shown:#}");
    assert_eq!(runs[0]["status"], "done");
    assert!(
        runs[0]["trace"]
            .as_str()
            .is_some_and(|t| t.contains(&hex(&task.trace_id))),
        "{shown:#}"
    );

    // The conventions' histograms: the tokens by type, and one duration per model call.
    let points = receiver.points();
    let tokens = |kind: &str| -> f64 {
        points
            .iter()
            .filter(|p| {
                p.metric == "gen_ai.client.token.usage" && p.attr("gen_ai.token.type") == Some(kind)
            })
            .map(|p| p.sum)
            .sum()
    };
    assert_eq!(
        tokens("input") as i64,
        shown["usage"]["input_tokens"],
        "{points:#?}"
    );
    assert_eq!(
        tokens("output") as i64,
        shown["usage"]["output_tokens"],
        "{points:#?}"
    );
    let calls: u64 = points
        .iter()
        .filter(|p| p.metric == "gen_ai.client.operation.duration")
        .inspect(|p| assert_eq!(p.attr("gen_ai.request.model"), Some("m")))
        .map(|p| p.count)
        .sum();
    assert_eq!(calls, 2, "{points:#?}");

    // No prompt, file content or secret in anything sent.
    for body in receiver.bodies() {
        for planted in [
            "PLANTED-PROMPT-TEXT",
            "PLANTED-FILE-CONTENT",
            "sk-live-",
            "You work.",
        ] {
            assert!(
                !body.windows(planted.len()).any(|w| w == planted.as_bytes()),
                "{planted} was exported"
            );
        }
    }
}

/// With nothing configured, or the SDK disabled, nothing is sent.
#[test]
fn nothing_is_sent_unless_configured() {
    let (ws, server) = setup();
    server.push(openai::tool_call(
        "c1",
        "finish",
        &json!({"status": "success", "summary": "Done."}),
    ));
    let receiver = Receiver::start();
    let r = Run::of(
        worker(&ws, Some(&receiver), PROMPT)
            .env("OTEL_SDK_DISABLED", "true")
            .output()
            .unwrap(),
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert!(receiver.bodies().is_empty());
}

/// The trace of a task's first run is stored with it and shown by `tasks show`; a run that
/// resumes it after a kill links to that trace, and has no span for what the first run
/// committed.
#[test]
fn a_resumed_task_links_to_its_first_trace() {
    let (ws, server) = setup();
    server.push(openai::tool_call(
        "c1",
        "Read",
        &json!({"path": "notes.txt"}),
    ));
    server.push(
        openai::tool_call(
            "c2",
            "finish",
            &json!({"status": "success", "summary": "Late."}),
        )
        .delay(std::time::Duration::from_secs(30)),
    );
    server.push(openai::tool_call(
        "c3",
        "finish",
        &json!({"status": "success", "summary": "Resumed."}),
    ));
    let first_receiver = Receiver::start();
    let mut first = worker(&ws, Some(&first_receiver), PROMPT)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let id = crate::support::first_task_id(&mut first);
    let show = || {
        Run::of(
            rawko(&ws)
                .args(["tasks", "show", "--json", &id])
                .output()
                .unwrap(),
        )
        .json()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while show()["tool_calls"].as_array().is_none_or(|c| c.is_empty()) {
        assert!(
            std::time::Instant::now() < deadline,
            "the Read call was not committed"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // Killed while its model answers: nothing it buffered was sent.
    first.kill().unwrap();
    let _ = first.wait();
    let stored = show()["task"]["trace"].as_str().unwrap().to_string();
    let parts: Vec<&str> = stored.split('-').collect();
    assert_eq!((parts.len(), parts[0]), (4, "00"), "{stored}");
    let text = Run::of(rawko(&ws).args(["tasks", "show", &id]).output().unwrap());
    assert!(
        text.stdout.contains(&format!("\ntrace: {}\n", parts[1])),
        "{text:?}"
    );

    let receiver = Receiver::start();
    let r = Run::of(
        rawko(&ws)
            .env("TEST_KEY", TEST_KEY)
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint())
            .args(["resume", "--json", &id])
            .output()
            .unwrap(),
    );
    assert_eq!(r.code, 0, "{r:?}");
    let spans = receiver.spans();
    let task = one(&spans, "invoke_workflow rawko-task");
    assert_eq!(task.attr("rawko.resumed"), Some("true"));
    assert_ne!(hex(&task.trace_id), parts[1], "a trace of its own");
    assert_eq!(
        task.links
            .iter()
            .map(|(t, s)| (hex(t), hex(s)))
            .collect::<Vec<_>>(),
        [(parts[1].to_string(), parts[2].to_string())]
    );
    // The Read call committed before the kill is not reported again; the model is asked once.
    assert!(
        !spans.iter().any(|s| s.name.starts_with("execute_tool")),
        "{spans:#?}"
    );
    assert_eq!(
        spans.iter().filter(|s| s.name == "chat m").count(),
        1,
        "{spans:#?}"
    );
    // The stored trace stays the first run's; the store has both runs, the first never ended
    // (it was killed), the second with its own trace.
    let shown = show();
    assert_eq!(shown["task"]["trace"], stored.as_str());
    let runs = shown["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "{shown:#}");
    assert_eq!(
        (&runs[0]["ended_at"], &runs[0]["trace"]),
        (&json!(null), &json!(stored))
    );
    assert_eq!(runs[1]["status"], "done");
    assert!(
        runs[1]["trace"]
            .as_str()
            .is_some_and(|t| t.contains(&hex(&task.trace_id))),
        "{shown:#}"
    );
}

/// The user's own config may say where traces go, with a header whose value it names by
/// variable; a workspace's config may not, trusted or not.
#[test]
fn traces_go_where_the_users_config_says_and_never_where_a_workspace_says() {
    let (ws, server) = setup();
    for _ in 0..2 {
        server.push(openai::tool_call(
            "c1",
            "finish",
            &json!({"status": "success", "summary": "Done."}),
        ));
    }
    let users = Receiver::start();
    let config = ws.config_home().join("rawko/config.yaml");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        format!(
            "{text}otel:\n  endpoint: {}\n  headers:\n    x-team-key: TEAM_KEY\n",
            users.endpoint()
        ),
    )
    .unwrap();
    let r = Run::of(
        worker(&ws, None, PROMPT)
            .env("TEAM_KEY", "team-secret-7")
            .output()
            .unwrap(),
    );
    assert_eq!(r.code, 0, "{r:?}");
    one(&users.spans(), "invoke_workflow rawko-task");
    assert!(
        users
            .headers()
            .iter()
            .any(|h| h == "x-team-key: team-secret-7"),
        "{:?}",
        users.headers()
    );

    // A trusted workspace naming another receiver: dropped with a warning, nothing sent there.
    std::fs::write(&config, text).unwrap();
    let theirs = Receiver::start();
    ws.write(
        ".rawko/config.yaml",
        format!("otel:\n  endpoint: {}\n", theirs.endpoint()),
    );
    let r = Run::of(
        rawko(&ws)
            .env("TEST_KEY", TEST_KEY)
            .args([
                "run",
                "--trust",
                "--agent",
                "worker",
                "--json",
                "--no-stream",
                PROMPT,
            ])
            .output()
            .unwrap(),
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stderr
            .contains("only your own config decides where traces are sent"),
        "{r:?}"
    );
    assert!(theirs.bodies().is_empty());
}

/// With content opted in, spans carry the prompt, messages and tool input and output, and still
/// none of the secrets rawko knows, in any encoding: here the adapter's key, planted in the
/// prompt and in a file the agent reads.
#[test]
fn content_is_exported_only_on_opt_in_and_never_a_secret() {
    let (ws, server) = setup();
    ws.write("notes.txt", format!("PLANTED-FILE-CONTENT {TEST_KEY}"));
    server.push(openai::tool_call(
        "c1",
        "Read",
        &json!({"path": "notes.txt"}),
    ));
    server.push(openai::tool_call(
        "c2",
        "finish",
        &json!({"status": "success", "summary": format!("It says {TEST_KEY}.")}),
    ));
    let receiver = Receiver::start();
    let prompt = format!("{PROMPT} and the key {TEST_KEY}");
    let r = Run::of(
        worker(&ws, Some(&receiver), &prompt)
            .env("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
            .output()
            .unwrap(),
    );
    assert_eq!(r.code, 0, "{r:?}");
    let spans = receiver.spans();
    let chat = spans.iter().find(|s| s.name == "chat m").unwrap();
    assert!(
        chat.attr("gen_ai.input.messages")
            .is_some_and(|m| m.contains("PLANTED-PROMPT-TEXT")),
        "{chat:?}"
    );
    assert_eq!(chat.attr("gen_ai.system_instructions"), Some("You work."));
    let tool = one(&spans, "execute_tool Read");
    assert!(
        tool.attr("gen_ai.tool.call.result")
            .is_some_and(|o| o.contains("PLANTED-FILE-CONTENT")),
        "{tool:?}"
    );
    use base64::Engine as _;
    let encodings = [
        TEST_KEY.to_string(),
        base64::engine::general_purpose::STANDARD.encode(TEST_KEY),
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(TEST_KEY),
    ];
    for body in receiver.bodies() {
        for planted in &encodings {
            assert!(
                !body.windows(planted.len()).any(|w| w == planted.as_bytes()),
                "{planted} was exported"
            );
        }
    }
}

/// `rawko doctor` says where traces go, without the credentials an endpoint may hold.
#[test]
fn doctor_says_where_traces_go() {
    let ws = Workspace::new();
    let r = Run::of(rawko(&ws).arg("doctor").output().unwrap());
    assert!(r.stdout.contains("\ntraces: off "), "{r:?}");
    let r = Run::of(
        rawko(&ws)
            .arg("doctor")
            .env(
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                "http://user:hunter22@127.0.0.1:9",
            )
            .output()
            .unwrap(),
    );
    assert!(
        r.stdout.contains(
            "\ntraces: sent to http://127.0.0.1:9 (OTLP http/protobuf), without content\n"
        ),
        "{r:?}"
    );
    assert!(!format!("{r:?}").contains("hunter22"), "{r:?}");
}

/// An HTTP MCP server gets each call's place in the trace (`_meta.traceparent`, the span of
/// the call) only when the user's config asks for it; never from a workspace's config.
#[test]
fn an_mcp_server_gets_the_traceparent_only_when_the_users_config_asks() {
    for asked in [true, false] {
        let spy = crate::support::mcp_http::McpHttp::start();
        let (ws, server) = crate::support::scripted_worker(&format!(
            "mcp:\n  spy:\n    url: {}\n    allow_private_network: true\n{}",
            spy.url(),
            if asked { "    traceparent: true\n" } else { "" }
        ));
        std::fs::write(
            ws.config_home().join("rawko/agents/worker.yaml"),
            "name: worker\nwhenToUse: Does the work.\nsystemPrompt: You work.\n\
             tools:\n  allowed: [mcp__spy]\ntransitions:\n  onSuccess: done\n  onFailure: failed\n",
        )
        .unwrap();
        server.push(openai::tool_call(
            "c1",
            "mcp__spy__echo",
            &json!({"text": "hi"}),
        ));
        server.push(openai::tool_call(
            "c2",
            "finish",
            &json!({"status": "success", "summary": "Done."}),
        ));
        let receiver = Receiver::start();
        let r = Run::of(
            worker(&ws, Some(&receiver), PROMPT)
                .arg("--yes")
                .output()
                .unwrap(),
        );
        assert_eq!(r.code, 0, "{r:?}");
        let calls = spy.calls();
        assert_eq!(calls.len(), 1, "{calls:?} {r:?}");
        let sent = calls[0]["_meta"]["traceparent"].as_str();
        if !asked {
            assert_eq!(sent, None, "{calls:?}");
            continue;
        }
        let spans = receiver.spans();
        let tool = one(&spans, "execute_tool mcp__spy__echo");
        assert_eq!(
            sent,
            Some(format!("00-{}-{}-01", hex(&tool.trace_id), hex(&tool.span_id)).as_str()),
            "{calls:?}"
        );
    }

    // A workspace's config cannot turn it on for its own server.
    let spy = crate::support::mcp_http::McpHttp::start();
    let (ws, _server) = crate::support::scripted_worker("");
    ws.write(
        ".rawko/config.yaml",
        format!(
            "mcp:\n  spy:\n    url: {}\n    allow_private_network: true\n    traceparent: true\n",
            spy.url()
        ),
    );
    assert_eq!(Run::of(rawko(&ws).arg("trust").output().unwrap()).code, 0);
    let r = Run::of(rawko(&ws).args(["tools", "list"]).output().unwrap());
    assert!(
        r.stderr
            .contains("mcp.spy.traceparent: only your own config"),
        "{r:?}"
    );
    assert!(spy.calls().is_empty());
}

/// A receiver that is down, that refuses, or that takes the connection and never answers costs
/// the task nothing but a warning: the run succeeds, and ends at most 2 s later than without
/// export.
#[test]
fn a_receiver_that_is_down_refuses_or_is_silent_costs_only_a_warning() {
    use std::io::Write as _;
    let timed = |endpoint: Option<&str>| {
        let (ws, server) = setup();
        server.push(openai::tool_call(
            "c1",
            "finish",
            &json!({"status": "success", "summary": "Done."}),
        ));
        let mut cmd = worker(&ws, None, PROMPT);
        if let Some(e) = endpoint {
            cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", e)
                .env("OTEL_METRICS_EXPORTER", "none");
        }
        let started = std::time::Instant::now();
        let r = Run::of(cmd.output().unwrap());
        (started.elapsed(), r)
    };
    let (plain, r) = timed(None);
    assert_eq!(r.code, 0, "{r:?}");

    // Down: nothing listens on the port.
    let down = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let down_port = down.local_addr().unwrap().port();
    drop(down);
    // Refusing: every request gets 503.
    let refusing = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let refusing_port = refusing.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in refusing.incoming().flatten() {
            let mut s = s;
            let _ = s.write_all(b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n");
        }
    });
    // Silent: takes the connection, reads, never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_port = silent.local_addr().unwrap().port();
    let held = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let keep = held.clone();
    std::thread::spawn(move || {
        for s in silent.incoming().flatten() {
            keep.lock().unwrap().push(s);
        }
    });

    for (what, port) in [
        ("down", down_port),
        ("refusing", refusing_port),
        ("silent", silent_port),
    ] {
        let endpoint = format!("http://127.0.0.1:{port}");
        let (took, r) = timed(Some(&endpoint));
        assert_eq!(r.code, 0, "{what}: {r:?}");
        assert!(
            r.stderr
                .contains(&format!("warning: not every trace was sent to {endpoint}")),
            "{what}: {r:?}"
        );
        assert!(
            took < plain + std::time::Duration::from_secs(2),
            "{what}: {took:?} against {plain:?} without export"
        );
    }
    drop(held);
}
