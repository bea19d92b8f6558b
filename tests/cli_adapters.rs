//! `rawko adapters` and `rawko ask` through the real binary, against the scripted model
//! server, with the user's config in a private XDG config directory.

use std::process::Command;

use serde_json::json;

use crate::support::model_server::{ModelServer, Reply, openai};
use crate::support::{Run, TEST_KEY, Workspace, rawko};

/// `rawko` in `ws` with `user_config` as the user's own config.yaml and `TEST_KEY` set.
fn cmd(ws: &Workspace, user_config: &str) -> Command {
    let xdg = ws.path().join(".xdg");
    std::fs::create_dir_all(xdg.join("rawko")).unwrap();
    std::fs::write(xdg.join("rawko/config.yaml"), user_config).unwrap();
    let mut c = rawko(ws);
    c.env("XDG_CONFIG_HOME", &xdg).env("TEST_KEY", TEST_KEY);
    c
}

fn run(mut c: Command, args: &[&str]) -> Run {
    let r = Run::of(c.args(args).output().expect("run rawko"));
    assert!(
        !r.stdout.contains(TEST_KEY) && !r.stderr.contains(TEST_KEY),
        "the key was printed: {r:?}"
    );
    r
}

fn local(server: &ModelServer) -> String {
    format!(
        "adapters:\n  local:\n    plugin: openai\n    model: test-model\n    base_url: {}\n    api_key_env: TEST_KEY\n    allow_private_network: true\n    timeout: 20\n",
        server.base_url()
    )
}

#[test]
fn ask_prints_the_reply_and_json_has_the_usage() {
    let ws = Workspace::new();
    let server = ModelServer::start();
    server.push(openai::stream_text(&["Four", "."], 14, 2));
    let r = run(
        cmd(&ws, &local(&server)),
        &["ask", "--adapter", "local", "What is 2+2?"],
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.stdout, "Four.\n");
    let req = &server.received()[0];
    assert_eq!(
        req.header("authorization"),
        Some(&*format!("Bearer {TEST_KEY}"))
    );
    assert_eq!(req.json()["stream"], true);

    server.push(openai::text("Four.", 14, 2));
    let r = run(
        cmd(&ws, &local(&server)),
        &[
            "ask",
            "--adapter",
            "local",
            "--no-stream",
            "--json",
            "What is 2+2?",
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let j = r.json();
    assert_eq!(j["text"], "Four.");
    assert_eq!(j["stop_reason"], "end_turn");
    assert_eq!(j["usage"]["input_tokens"], 14);
    assert_eq!(j["http"]["attempts"], 1);
    assert!(server.received()[1].json().get("stream").is_none());
}

#[test]
fn ask_fails_clearly_on_a_provider_error_and_on_a_missing_key() {
    let ws = Workspace::new();
    let server = ModelServer::start();
    server.push(openai::error(401, "Incorrect API key provided"));
    let r = run(
        cmd(&ws, &local(&server)),
        &["ask", "--adapter", "local", "hi"],
    );
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr.contains("status 401") && r.stderr.contains("Incorrect API key"),
        "{r:?}"
    );

    let mut c = cmd(&ws, &local(&server));
    c.env_remove("TEST_KEY");
    let r = run(c, &["ask", "--adapter", "local", "hi"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("TEST_KEY is not set"), "{r:?}");
    assert_eq!(server.hits(), 1, "nothing was sent without the key");

    let r = run(
        cmd(&ws, &local(&server)),
        &["ask", "--adapter", "nope", "hi"],
    );
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("no adapter named `nope`") && r.stderr.contains("local"),
        "{r:?}"
    );
}

#[test]
fn a_workspace_config_cannot_send_the_users_key() {
    let ws = Workspace::new();
    let server = ModelServer::start();
    ws.write(
        ".rawko/config.yaml",
        format!(
            "adapters:\n  grab:\n    plugin: openai\n    base_url: {}\n    api_key_env: TEST_KEY\n    allow_private_network: true\n",
            server.base_url()
        ),
    );
    let r = run(cmd(&ws, ""), &["ask", "--adapter", "grab", "hi"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr
            .contains("adapters.grab (the workspace is not trusted"),
        "{r:?}"
    );
    assert_eq!(server.hits(), 0);
    let r = run(cmd(&ws, ""), &["adapters", "list", "--json"]);
    assert!(!r.json().to_string().contains("\"grab\""), "{r:?}");
}

#[test]
fn adapters_list_and_check() {
    let ws = Workspace::new();
    let server = ModelServer::start();
    let r = run(cmd(&ws, &local(&server)), &["adapters", "list"]);
    assert_eq!(r.code, 0, "{r:?}");
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert!(lines[0].starts_with("NAME"), "{}", r.stdout);
    for name in ["anthropic", "local", "openai"] {
        assert!(
            lines.iter().any(|l| l.starts_with(name)),
            "{name}: {}",
            r.stdout
        );
    }

    server.push(Reply::json(200, &json!({"object": "list", "data": []})));
    let r = run(cmd(&ws, &local(&server)), &["adapters", "check", "local"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.starts_with("local: ok"), "{r:?}");
    let req = &server.received()[0];
    assert_eq!(
        (req.method.as_str(), req.path.as_str()),
        ("GET", "/v1/models")
    );
    assert_eq!(
        req.header("authorization"),
        Some(&*format!("Bearer {TEST_KEY}"))
    );

    server.push(openai::error(401, "bad key"));
    let r = run(
        cmd(&ws, &local(&server)),
        &["adapters", "check", "local", "--json"],
    );
    assert_eq!(r.code, 1, "{r:?}");
    let j = r.json();
    let endpoint = j[0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["what"] == "endpoint")
        .unwrap()
        .clone();
    assert_eq!(endpoint["ok"], false);
    assert!(
        endpoint["message"]
            .as_str()
            .unwrap()
            .contains("refused the credential"),
        "{j}"
    );

    // Unreachable: nothing listens on the port any more.
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://127.0.0.1:{}/v1", l.local_addr().unwrap().port())
    };
    let cfg = format!(
        "adapters:\n  gone:\n    plugin: openai\n    base_url: {dead}\n    allow_private_network: true\n"
    );
    let r = run(cmd(&ws, &cfg), &["adapters", "check", "gone"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stdout.contains("FAIL endpoint") && r.stdout.contains("cannot connect"),
        "{r:?}"
    );
    // Offline, only what can be known without the network is checked.
    let r = run(cmd(&ws, &cfg), &["adapters", "check", "gone", "--offline"]);
    assert_eq!(r.code, 0, "{r:?}");

    let mut c = cmd(&ws, &local(&server));
    c.env_remove("TEST_KEY");
    let r = run(c, &["adapters", "check"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stdout.contains("FAIL credential: $TEST_KEY is not set"),
        "{r:?}"
    );

    let r = run(
        cmd(&ws, "adapters:\n  x:\n    plugin: openai\n    modle: y\n"),
        &["adapters", "list"],
    );
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("config.yaml:4:") && r.stderr.contains("modle"),
        "{r:?}"
    );
}

#[test]
fn record_with_ask_then_replay_it_offline() {
    let ws = Workspace::new();
    let server = ModelServer::start();
    server.push(openai::text("Paris.", 20, 2));
    let rec = ws.path().join("capital.jsonl");
    let r = run(
        cmd(&ws, &local(&server)),
        &[
            "ask",
            "--adapter",
            "local",
            "--record",
            rec.to_str().unwrap(),
            "Capital of France?",
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    drop(server);
    ws.write(
        ".rawko/config.yaml",
        "adapters:\n  demo:\n    plugin: replay\n    recording: ../capital.jsonl\n",
    );
    // The workspace's own adapters take effect once it is trusted.
    assert_eq!(run(cmd(&ws, ""), &["trust"]).code, 0);
    let r = run(
        cmd(&ws, ""),
        &["ask", "--adapter", "demo", "Capital of France?"],
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.stdout, "Paris.\n");
    let r = run(
        cmd(&ws, ""),
        &["ask", "--adapter", "demo", "Capital of Spain?"],
    );
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("diverged"), "{r:?}");
    let r = run(cmd(&ws, ""), &["adapters", "check", "demo"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("1 exchanges"), "{r:?}");
}
