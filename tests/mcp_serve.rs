//! `rawko mcp serve` driven by a real MCP client: the Python `mcp` package's own (installed by
//! `.ci/run` into `target/ci-tools`), over stdio and over streamable HTTP. The client is the
//! attacker here too: what it asks for outside the agent's grants must fail.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

use crate::support::{Workspace, rawko, store_path};

/// A secret beside the workspace, which no call may read.
const SECRET: &str = "mcp-secret-marker-71d2";

/// The Python that has the `mcp` package.
fn python() -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/ci-tools/bin/python");
    assert!(
        p.exists(),
        "{} is missing: `.ci/run` installs the Python `mcp` client there \
         (python3 -m venv target/ci-tools && target/ci-tools/bin/pip install mcp)",
        p.display()
    );
    p
}

fn client_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/mcp/client.py")
}

/// A workspace with a file to read, a secret outside it, and a user agent with Bash.
fn setup() -> (Workspace, tempfile::TempDir) {
    let ws = Workspace::new();
    ws.write("notes/hello.txt", "hello from the workspace\n");
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), SECRET).unwrap();
    let agents = ws.config_home().join("rawko/agents");
    std::fs::create_dir_all(&agents).unwrap();
    std::fs::write(
        agents.join("builder.yaml"),
        "name: builder\nsystemPrompt: Build.\ntools:\n  allowed: [Read, Write, Bash]\n  \
         bashFilter:\n    allowedCommands: [\"cat *\", \"python3 *\"]\ntransitions: {onSuccess: done}\n",
    )
    .unwrap();
    (ws, outside)
}

/// Run the client against `rawko mcp serve ARGS` over stdio, with `calls`.
fn over_stdio(ws: &Workspace, args: &[&str], calls: Value) -> Value {
    over_stdio_with(ws, args, &[], calls)
}

/// [`over_stdio`], with more variables in the server's environment.
fn over_stdio_with(ws: &Workspace, args: &[&str], env: &[(&str, &str)], calls: Value) -> Value {
    // The client starts the server itself, as an editor would: with rawko's test environment.
    let wrapper = ws.path().join(".test-rawko.sh");
    let mut base = rawko(ws);
    base.envs(env.iter().copied());
    let mut script = String::from("#!/bin/sh\n");
    for (k, v) in base.get_envs() {
        if let Some(v) = v {
            script.push_str(&format!(
                "export {}='{}'\n",
                k.to_string_lossy(),
                v.to_string_lossy()
            ));
        }
    }
    script.push_str(&format!(
        "cd '{}' && exec '{}' \"$@\"\n",
        ws.path().display(),
        crate::support::rawko_bin().display()
    ));
    std::fs::write(&wrapper, script).unwrap();
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let mut cmd = Command::new(python());
    cmd.arg(client_script()).arg("stdio").arg(&wrapper);
    cmd.args(["mcp", "serve"]).args(args);
    cmd.arg("--").arg(calls.to_string());
    client_output(cmd)
}

fn client_output(mut cmd: Command) -> Value {
    let out = cmd.output().expect("run the MCP client");
    assert!(
        out.status.success(),
        "the MCP client failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "client output is not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

fn call(out: &Value, i: usize) -> &Value {
    &out["calls"][i]
}

#[test]
fn a_real_mcp_client_lists_and_calls_the_planners_tools_and_cannot_read_outside() {
    let (ws, outside) = setup();
    let secret = outside.path().join("secret.txt");
    let rel_secret = pathdiff(&secret, ws.path());
    let out = over_stdio(
        &ws,
        &[],
        json!([
            ["Read", {"path": "notes/hello.txt"}],
            ["Read", {"path": secret}],
            ["Read", {"path": rel_secret}],
            ["Grep", {"pattern": "hello", "output_mode": "content"}],
            ["Write", {"path": "x.txt", "content": "no"}],
            ["Read", {"path": 5}],
        ]),
    );
    assert_eq!(out["server"], "rawko");
    // The planner's tools: read-only, no shell, no writes.
    let tools: Vec<&str> = out["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for t in ["Read", "Grep", "Glob", "LS"] {
        assert!(tools.contains(&t), "{tools:?}");
    }
    for t in ["Write", "Edit", "Bash"] {
        assert!(!tools.contains(&t), "{tools:?}");
    }
    assert_eq!(out["schemas"]["Read"]["required"], json!(["path"]));

    assert_eq!(call(&out, 0)["is_error"], false, "{out}");
    assert!(
        call(&out, 0)["text"]
            .as_str()
            .unwrap()
            .contains("hello from the workspace")
    );
    for i in [1, 2] {
        let c = call(&out, i);
        assert_eq!(c["is_error"], true, "{c}");
        assert!(!c.to_string().contains(SECRET), "{c}");
        assert!(
            c["text"].as_str().unwrap().contains("outside the granted"),
            "{c}"
        );
    }
    assert!(
        call(&out, 3)["text"]
            .as_str()
            .unwrap()
            .contains("notes/hello.txt:1:hello from the workspace"),
        "{out}"
    );
    // A tool the agent may not call is not there at all.
    assert!(
        call(&out, 4)["protocol_error"]
            .as_str()
            .unwrap()
            .contains("no tool named `Write`"),
        "{out}"
    );
    assert!(!ws.path().join("x.txt").exists());
    // Bad arguments are the tool's error, told to the client.
    assert_eq!(call(&out, 5)["is_error"], true);
    assert!(
        call(&out, 5)["text"]
            .as_str()
            .unwrap()
            .contains("invalid input for Read")
    );

    // Every call is in the audit log, with what was decided.
    let store = rawko_store::TaskStore::open(&store_path(&ws)).unwrap();
    let tasks = store.tasks().unwrap();
    assert_eq!(tasks.len(), 1);
    let calls = store.tool_calls(&tasks[0].id).unwrap();
    let tools: Vec<&str> = calls.iter().map(|c| c.tool.as_str()).collect();
    assert_eq!(tools, ["Read", "Read", "Read", "Grep", "Read"]);
    assert!(calls[1].verdict.starts_with("denied"), "{:?}", calls[1]);
    let decisions = store.decisions(&tasks[0].id).unwrap();
    assert_eq!(decisions.len(), 5, "{decisions:?}");
    assert!(
        decisions
            .iter()
            .all(|d| d.subject == "planner" && d.capability == "fs.read"),
        "{decisions:?}"
    );
    assert!(!tasks[0].status.is_resumable(), "{:?}", tasks[0].status);
}

#[test]
fn an_agents_bash_over_mcp_runs_in_the_kernel_sandbox() {
    let (ws, outside) = setup();
    let secret = outside.path().join("secret.txt");
    let out = over_stdio(
        &ws,
        &["--agent", "builder"],
        json!([
            ["Write", {"path": "made.txt", "content": "made over MCP\n"}],
            ["Bash", {"command": "cat made.txt"}],
            ["Bash", {"command": format!("cat {}", secret.display())}],
            ["Bash", {"command": format!(
                "python3 -c \"open('{}/escaped.txt', 'w').write('x')\"",
                outside.path().display()
            )}],
            ["Bash", {"command": "rm -rf /"}],
        ]),
    );
    assert_eq!(call(&out, 0)["is_error"], false, "{out}");
    assert_eq!(ws.read("made.txt"), "made over MCP\n");
    assert!(
        call(&out, 1)["text"]
            .as_str()
            .unwrap()
            .contains("made over MCP"),
        "{out}"
    );
    assert!(!out.to_string().contains(SECRET), "{out}");
    assert!(!outside.path().join("escaped.txt").exists(), "{out}");
    // Not allowed by the agent's filter: denied before anything runs.
    assert_eq!(call(&out, 4)["is_error"], true, "{out}");
    assert!(
        call(&out, 4)["text"].as_str().unwrap().contains("denied"),
        "{out}"
    );
}

/// `rawko mcp serve --http ADDR` in the background, with the address it bound.
struct HttpServer {
    child: Child,
    url: String,
    /// What the server wrote to stderr after its first line, as it comes.
    log: std::sync::Arc<std::sync::Mutex<String>>,
}

impl HttpServer {
    fn start(ws: &Workspace, addr: &str, token: Option<&str>) -> HttpServer {
        let mut cmd = rawko(ws);
        cmd.args(["mcp", "serve", "--http", addr])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some(t) = token {
            cmd.env("RAWKO_MCP_TOKEN", t);
        }
        let mut child = cmd.spawn().unwrap();
        let mut line = String::new();
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        stderr.read_line(&mut line).unwrap();
        let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let sink = log.clone();
        std::thread::spawn(move || {
            for l in stderr.lines().map_while(Result::ok) {
                sink.lock().unwrap().push_str(&(l + "\n"));
            }
        });
        let url = line
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .unwrap_or_else(|| panic!("no address in {line:?}"))
            .trim_end_matches([';', ','])
            .to_string();
        HttpServer { child, url, log }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn over_http(url: &str, token: Option<&str>, calls: Value) -> std::process::Output {
    let mut cmd = Command::new(python());
    cmd.arg(client_script()).arg("http").arg(url);
    if let Some(t) = token {
        cmd.arg(t);
    }
    cmd.arg("--").arg(calls.to_string());
    cmd.output().unwrap()
}

#[test]
fn streamable_http_serves_the_same_tools_and_a_token_when_set_is_required() {
    let (ws, outside) = setup();
    let server = HttpServer::start(&ws, "127.0.0.1:0", None);
    let out = over_http(
        &server.url,
        None,
        json!([
            ["Read", {"path": "notes/hello.txt"}],
            ["Read", {"path": outside.path().join("secret.txt")}],
        ]),
    );
    assert!(out.status.success(), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        call(&v, 0)["text"]
            .as_str()
            .unwrap()
            .contains("hello from the workspace")
    );
    assert_eq!(call(&v, 1)["is_error"], true);
    assert!(!v.to_string().contains(SECRET));
    drop(server);

    let server = HttpServer::start(&ws, "127.0.0.1:0", Some("tok-3b9a"));
    for wrong in [None, Some("tok-3b9b")] {
        let out = over_http(&server.url, wrong, json!([["LS", {}]]));
        assert!(!out.status.success(), "{wrong:?}: {out:?}");
    }
    let refused = server
        .log
        .lock()
        .unwrap()
        .matches("no valid bearer token")
        .count();
    assert!(refused >= 2, "{}", server.log.lock().unwrap());
    let out = over_http(&server.url, Some("tok-3b9a"), json!([["LS", {}]]));
    assert!(out.status.success(), "{out:?}");
    // Only the call with the token ran.
    let store = rawko_store::TaskStore::open(&store_path(&ws)).unwrap();
    let ran: usize = store
        .tasks()
        .unwrap()
        .iter()
        .map(|t| store.tool_calls(&t.id).unwrap().len())
        .sum();
    assert_eq!(ran, 3);
}

#[test]
fn serving_beyond_loopback_needs_a_token() {
    let (ws, _outside) = setup();
    let out = rawko(&ws)
        .args(["mcp", "serve", "--http", "0.0.0.0:0"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("RAWKO_MCP_TOKEN"));
}

/// `to` relative to `from` (both absolute), with `..` as needed.
fn pathdiff(to: &Path, from: &Path) -> PathBuf {
    let up = from.components().count() - 1;
    let mut p = PathBuf::new();
    for _ in 0..up {
        p.push("..");
    }
    p.join(to.strip_prefix("/").unwrap())
}

/// `--agents`: an agent served as a tool. Its query starts a task of its own (in the store like
/// any other) with the agent's adapter, tools and grants, and its own answer comes back.
#[test]
fn an_agent_served_as_a_tool_answers_a_query() {
    use crate::run_scenarios::scripted_call;
    use crate::support::TEST_KEY;
    use crate::support::model_server::ModelServer;

    let (ws, outside) = setup();
    let server = ModelServer::start();
    server.push(scripted_call("Read", json!({"path": "notes/hello.txt"}), 0));
    server.push(scripted_call(
        "Read",
        json!({"path": outside.path().join("secret.txt")}),
        1,
    ));
    server.push(scripted_call(
        "finish",
        json!({"status": "success", "summary": "The note says hello from the workspace."}),
        2,
    ));
    let cfg = ws.config_home().join("rawko");
    std::fs::write(
        cfg.join("config.yaml"),
        format!(
            "adapters:\n  scripted:\n    plugin: openai\n    model: scripted-model\n    base_url: {}\n    \
             api_key_env: TEST_KEY\n    allow_private_network: true\ndefaults:\n  adapter: scripted\n",
            server.base_url()
        ),
    )
    .unwrap();
    std::fs::write(
        cfg.join("agents/reader.yaml"),
        "name: reader\nwhenToUse: Answers questions about the workspace.\nsystemPrompt: Answer.\n\
         tools:\n  allowed: [Read]\ntransitions: {onSuccess: done}\n",
    )
    .unwrap();
    let out = over_stdio_with(
        &ws,
        &["--agents", "reader"],
        &[("TEST_KEY", TEST_KEY)],
        json!([["reader", {"query": "What does the note say?"}], ["reader", {}]]),
    );
    assert!(
        out["tools"].as_array().unwrap().contains(&json!("reader")),
        "{out}"
    );
    let answer = call(&out, 0);
    assert_eq!(answer["is_error"], false, "{out}");
    assert!(
        answer["text"]
            .as_str()
            .unwrap()
            .contains("The note says hello from the workspace."),
        "{out}"
    );
    assert!(!out.to_string().contains(SECRET), "{out}");
    assert_eq!(call(&out, 1)["is_error"], true, "{out}");
    // The query was a task of its own, with the agent's calls in the audit log.
    let store = rawko_store::TaskStore::open(&store_path(&ws)).unwrap();
    let asked = store
        .tasks()
        .unwrap()
        .into_iter()
        .find(|t| t.prompt == "What does the note say?")
        .expect("a task for the query");
    let calls = store.tool_calls(&asked.id).unwrap();
    let tools: Vec<&str> = calls.iter().map(|c| c.tool.as_str()).collect();
    assert_eq!(tools, ["Read", "Read", "finish"], "{calls:?}");
    assert!(
        calls[1].is_error && calls[1].verdict.starts_with("denied"),
        "{calls:?}"
    );
}

/// The test-only host tool `HostProbe` is served like every other host tool: listed with its
/// schema, called under the agent's grants, and audited as a run's call is.
#[test]
fn a_registered_host_tool_is_served_over_mcp() {
    let (ws, _outside) = setup();
    std::fs::write(
        ws.config_home().join("rawko/agents/prober.yaml"),
        "name: prober\nsystemPrompt: Probe.\ntools:\n  allowed: [Read, HostProbe]\n\
         transitions: {onSuccess: done}\n",
    )
    .unwrap();
    let out = over_stdio_with(
        &ws,
        &["--agent", "prober"],
        &[("RAWKO_TEST_HOST_TOOLS", "1")],
        json!([["HostProbe", {"text": "over mcp"}], ["HostProbe", {"text": 5}]]),
    );
    let tools: Vec<&str> = out["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(tools, ["HostProbe", "Read"], "{out}");
    assert_eq!(out["schemas"]["HostProbe"]["required"], json!(["text"]));
    assert_eq!(call(&out, 0)["is_error"], false, "{out}");
    assert_eq!(call(&out, 0)["text"], "probe: over mcp (fs.read)", "{out}");
    assert_eq!(call(&out, 1)["is_error"], true, "{out}");
    assert!(
        call(&out, 1)["text"]
            .as_str()
            .unwrap()
            .contains("invalid input for HostProbe"),
        "{out}"
    );

    let store = rawko_store::TaskStore::open(&store_path(&ws)).unwrap();
    let tasks = store.tasks().unwrap();
    let calls = store.tool_calls(&tasks[0].id).unwrap();
    let tools: Vec<&str> = calls.iter().map(|c| c.tool.as_str()).collect();
    assert_eq!(tools, ["HostProbe", "HostProbe"]);
    let decisions = store.decisions(&tasks[0].id).unwrap();
    assert!(
        decisions.iter().any(|d| d.subject == "prober"
            && d.capability == "fs.read"
            && d.reason.contains("HostProbe")),
        "{decisions:?}"
    );
}
