//! `rawko agents graph` and `rawko tasks show --format mermaid|dot` through the real binary: the
//! built-in agents, a workspace of kodelet and Claude Code agents, a scripted task that fails,
//! retries, is interrupted, resumed and escalated, and Graphviz reading every DOT text drawn.

use std::io::Write;
use std::process::{Command, Stdio};

use crate::support::model_server::{ModelServer, openai};
use crate::support::{Run, TEST_KEY, Workspace, rawko, run};

/// `rawko args...` in `ws`, which must succeed with nothing on stderr; its stdout.
fn graph(ws: &Workspace, args: &[&str]) -> String {
    let r = run(ws, args);
    assert_eq!(r.code, 0, "{args:?}: {r:?}");
    assert!(r.stderr.is_empty(), "{args:?}: {r:?}");
    r.stdout
}

/// Graphviz accepts `dot` and renders it to SVG, when it is installed. Without it the check is
/// skipped with a note, unless `CI` is set: CI machines must have it.
fn graphviz_renders(dot: &str) {
    let child = Command::new("dot")
        .arg("-Tsvg")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) if std::env::var_os("CI").is_none() => {
            eprintln!("skipped: Graphviz's `dot` cannot be run ({e}); install graphviz");
            return;
        }
        Err(e) => panic!("CI is set and Graphviz's `dot` cannot be run: {e}"),
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(dot.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "dot -Tsvg: {stderr}\n{dot}");
    assert!(
        stderr.trim().is_empty(),
        "dot -Tsvg warned: {stderr}\n{dot}"
    );
    let svg = String::from_utf8_lossy(&out.stdout);
    assert!(svg.contains("<svg") && svg.contains("</svg>"), "{svg}");
}

#[test]
fn agents_graph_draws_the_builtin_agents() {
    let ws = Workspace::new();
    let mermaid = graph(&ws, &["agents", "graph"]);
    insta::assert_snapshot!("agents_graph_builtin_mermaid", mermaid);
    let dot = graph(&ws, &["agents", "graph", "--format", "dot"]);
    insta::assert_snapshot!("agents_graph_builtin_dot", dot);
    graphviz_renders(&dot);
    // The default is Mermaid.
    assert_eq!(
        graph(&ws, &["agents", "graph", "--format", "mermaid"]),
        mermaid
    );

    // From the reviewer, the planner and those before it are out of reach.
    let from = graph(&ws, &["agents", "graph", "--agent", "reviewer"]);
    assert!(from.contains("[\"reviewer\"]") && from.contains("[\"tester\"]"));
    assert!(
        !from.contains("planner") && !from.contains("researcher"),
        "{from}"
    );

    // An llm arbiter may pick every target of an agent, on any event.
    let llm = graph(
        &ws,
        &["agents", "graph", "--arbiter", "llm", "--agent", "reviewer"],
    );
    insta::assert_snapshot!("agents_graph_builtin_reviewer_llm_mermaid", llm);
    let dot = graph(
        &ws,
        &[
            "agents",
            "graph",
            "--arbiter",
            "llm",
            "--format",
            "dot",
            "--agent",
            "reviewer",
        ],
    );
    assert!(dot.contains("style=dotted"), "{dot}");
    graphviz_renders(&dot);

    // The config says which arbiter runs use.
    ws.write(".test-config/rawko/config.yaml", "arbiter:\n  mode: llm\n");
    assert_eq!(graph(&ws, &["agents", "graph", "--agent", "reviewer"]), llm);
}

#[test]
fn agents_graph_of_an_unknown_agent_is_bad_input() {
    let ws = Workspace::new();
    let r = run(&ws, &["agents", "graph", "--agent", "reviwer"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("did you mean 'reviewer'?"), "{r:?}");
    assert!(r.stdout.is_empty(), "{r:?}");
    let r = run(&ws, &["agents", "graph", "--format", "svg"]);
    assert_eq!(r.code, 2, "{r:?}");
}

/// A workspace's lead agent, written in rawko YAML, hands over to a kodelet subagent and a
/// Claude Code subagent and may call both as tools.
pub(crate) fn foreign_workspace() -> Workspace {
    let ws = Workspace::new();
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures");
    let copy = |from: &str, to: &str| {
        ws.write(to, std::fs::read(fixtures.join(from)).unwrap());
    };
    copy(
        "foreign/kodelet/pr-reviewer.md",
        ".rawko/agents/pr-reviewer.md",
    );
    copy("agents/code-finder.md", ".claude/agents/code-finder.md");
    ws.write(
        ".rawko/agents/lead.yaml",
        "name: lead\nsystemPrompt: Lead.\ntools:\n  allowed: [Read, code-finder, pr-reviewer]\n\
         transitions:\n  onSuccess: pr-reviewer\n  onFailure: code-finder\n",
    );
    ws
}

#[test]
fn agents_graph_draws_kodelet_and_claude_code_agents_and_marks_them_untrusted() {
    let ws = foreign_workspace();
    let list = run(&ws, &["agents", "list"]);
    assert!(
        list.stdout
            .lines()
            .any(|l| l.starts_with("pr-reviewer") && l.contains("kodelet"))
            && list
                .stdout
                .lines()
                .any(|l| l.starts_with("code-finder") && l.contains("claude-code")),
        "{list:?}"
    );
    let mermaid = graph(&ws, &["agents", "graph", "--agent", "lead"]);
    insta::assert_snapshot!("agents_graph_foreign_mermaid", mermaid);
    let dot = graph(
        &ws,
        &["agents", "graph", "--agent", "lead", "--format", "dot"],
    );
    insta::assert_snapshot!("agents_graph_foreign_dot", dot);
    graphviz_renders(&dot);
    // The whole graph has the built-ins beside them, unmarked.
    let whole = graph(&ws, &["agents", "graph", "--format", "dot"]);
    graphviz_renders(&whole);
    assert!(whole.contains("[label=\"planner\"];"), "{whole}");

    // Once the workspace is trusted, its agents are drawn as any other.
    assert_eq!(run(&ws, &["trust"]).code, 0);
    let trusted = graph(&ws, &["agents", "graph", "--agent", "lead"]);
    assert!(!trusted.contains("untrusted"), "{trusted}");
    assert!(trusted.contains("[\"lead<br/>workspace\"]"), "{trusted}");
}

/// An agent file whose name tries to break out of its label is refused by validation, and the
/// graph is drawn without it (its escaping of whatever names do reach it is unit-tested).
#[test]
fn agents_graph_leaves_out_an_agent_with_a_hostile_name() {
    let ws = Workspace::new();
    ws.write(
        ".rawko/agents/evil.yaml",
        "name: \"x\\\"] --> y[\\\"<script>alert(1)</script>\\n```\"\nsystemPrompt: p\n\
         transitions:\n  onSuccess: done\n",
    );
    for format in ["mermaid", "dot"] {
        let r = run(&ws, &["agents", "graph", "--format", format]);
        assert_eq!(r.code, 0, "{r:?}");
        assert!(
            !r.stdout.contains("script") && !r.stdout.contains('`'),
            "{r:?}"
        );
        assert!(r.stderr.contains("error(s) in agent files"), "{r:?}");
        if format == "dot" {
            graphviz_renders(&r.stdout);
        }
    }
}

/// A scripted task: `alpha` asks `gamma` as a tool and hands to `beta`, which fails, is retried
/// (it has no onFailure), fails again, is interrupted by the task's token budget, is resumed,
/// and fails a third time, which escalates the task.
#[test]
fn tasks_show_draws_the_path_a_task_took() {
    let ws = Workspace::new();
    ws.write("a.txt", "hello\n");
    let server = ModelServer::start();
    let finish =
        |status: &str, summary: &str| serde_json::json!({"status": status, "summary": summary});
    server.push(openai::tool_call(
        "c0",
        "gamma",
        &serde_json::json!({"query": "What is in a.txt?"}),
    ));
    server.push(openai::tool_call(
        "c1",
        "finish",
        &finish("success", "hello"),
    ));
    server.push(openai::tool_call(
        "c2",
        "finish",
        &finish("success", "Planned."),
    ));
    server.push(openai::tool_call(
        "c3",
        "finish",
        &finish("failure", "Broke."),
    ));
    server.push(openai::tool_call(
        "c4",
        "finish",
        &finish("failure", "Broke again."),
    ));
    server.push(openai::tool_call(
        "c5",
        "Read",
        &serde_json::json!({"path": "a.txt"}),
    ));
    server.push(openai::tool_call(
        "c6",
        "finish",
        &finish("failure", "Still broken."),
    ));
    let user = ws.config_home().join("rawko");
    let agent = |name: &str, tools: &str, transitions: &str| {
        ws.write(
            &format!(".test-config/rawko/agents/{name}.yaml"),
            format!(
                "name: {name}\nsystemPrompt: You are {name}.\ntools:\n  allowed: [{tools}]\n\
                 transitions:\n{transitions}"
            ),
        );
    };
    agent(
        "alpha",
        "Read, gamma",
        "  onSuccess: beta\n  onFailure: escalated\n",
    );
    agent("beta", "Read", "  onSuccess: done\n");
    agent("gamma", "Read", "  onSuccess: done\n");
    let config = |budget: u32| {
        std::fs::write(
            user.join("config.yaml"),
            format!(
                "adapters:\n  scripted:\n    plugin: openai\n    model: scripted-model\n    \
                 base_url: {}\n    api_key_env: TEST_KEY\n    allow_private_network: true\n\
                 defaults:\n  adapter: scripted\n  limits:\n    maxTokens: {budget}\n",
                server.base_url()
            ),
        )
        .unwrap();
    };
    // Each scripted reply counts 30 tokens: the budget stops the task before a seventh request.
    config(160);
    let rawko_run = |args: &[&str]| {
        Run::of(
            rawko(&ws)
                .env("TEST_KEY", TEST_KEY)
                .args(args)
                .output()
                .unwrap(),
        )
    };
    let r = rawko_run(&["run", "--no-stream", "--agent", "alpha", "Do it."]);
    assert_eq!(r.code, 75, "{r:?}");
    let tasks = run(&ws, &["tasks", "list", "--json"]).json();
    let id = tasks[0]["id"].as_str().unwrap().to_string();
    config(100_000);
    let r = rawko_run(&["resume", &id, "--no-stream"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert_eq!(server.left(), 0);

    let mermaid = graph(&ws, &["tasks", "show", &id, "--format", "mermaid"]);
    insta::assert_snapshot!("tasks_show_mermaid", mermaid);
    for step in [
        "s0 -->|\"1: start\"|",
        "|\"2: succeeded\"|",
        "|\"3: failed, retry\"|",
        "|\"4: failed, retry\"|",
        "|\"5: failed, escalation\"|",
        "==>|\"asked once\"|",
        ">\"run 2: resumed here\"]",
    ] {
        assert!(mermaid.contains(step), "{step}: {mermaid}");
    }
    let dot = graph(&ws, &["tasks", "show", &id, "--format", "dot"]);
    insta::assert_snapshot!("tasks_show_dot", dot);
    graphviz_renders(&dot);

    // The text and JSON views are as they were.
    let text = graph(&ws, &["tasks", "show", &id]);
    assert!(text.starts_with(&format!("task {id}  escalated")), "{text}");
    assert!(
        text.contains("beta -> escalated  on failed (escalation:"),
        "{text}"
    );
    let json = run(&ws, &["tasks", "show", &id, "--json"]).json();
    assert_eq!(json["task"]["status"], "escalated");
    let r = run(
        &ws,
        &["tasks", "show", &id, "--json", "--format", "mermaid"],
    );
    assert_eq!(r.code, 2, "--json and --format conflict: {r:?}");
}

/// A task still running when it is shown is marked where it stands; an interrupted one says so.
#[test]
fn tasks_show_marks_where_an_interrupted_task_stopped() {
    let ws = Workspace::new();
    let server = ModelServer::start();
    server.push(openai::tool_call("c0", "LS", &serde_json::json!({})));
    ws.write(
        ".test-config/rawko/agents/solo.yaml",
        "name: solo\nsystemPrompt: Solo.\ntools:\n  allowed: [LS]\ntransitions:\n  onSuccess: done\n",
    );
    ws.write(
        ".test-config/rawko/config.yaml",
        format!(
            "adapters:\n  scripted:\n    plugin: openai\n    model: scripted-model\n    \
             base_url: {}\n    api_key_env: TEST_KEY\n    allow_private_network: true\n\
             defaults:\n  adapter: scripted\n  limits:\n    maxTokens: 10\n",
            server.base_url()
        ),
    );
    let r = Run::of(
        rawko(&ws)
            .env("TEST_KEY", TEST_KEY)
            .args(["run", "--no-stream", "--agent", "solo", "Look."])
            .output()
            .unwrap(),
    );
    assert_eq!(r.code, 75, "{r:?}");
    let id = run(&ws, &["tasks", "list", "--json"]).json()[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let mermaid = graph(&ws, &["tasks", "show", &id, "--format", "mermaid"]);
    assert!(mermaid.contains("s0 -->|\"1: start\"| n0"), "{mermaid}");
    assert!(mermaid.contains(">\"interrupted here\"]"), "{mermaid}");
    let dot = graph(&ws, &["tasks", "show", &id, "--format", "dot"]);
    graphviz_renders(&dot);
}
