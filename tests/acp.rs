//! External agents over ACP, and `rawko acp`, through the real binary.
//!
//! The external agent is `tests/fixtures/acp/scripted_agent.py`, a scripted ACP agent that
//! reads, writes, runs terminals, asks permission, reports tool calls of its own and probes its
//! own sandbox, then reports everything it saw. The editor side is
//! `tests/fixtures/acp/client.py`, a scripted ACP client.

use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::run_scenarios::{scripted_call, show};
use crate::support::model_server::{ModelServer, openai};
use crate::support::{Run, TEST_KEY, Workspace, rawko};

/// Only rawko's own environment has it; no agent may see it.
const SECRET_ENV: &str = "acp-env-marker-77d1";
/// In the fake `~/.ssh/id_rsa`.
const SSH_SECRET: &str = "acp-ssh-marker-90b3";

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/acp")
        .join(name)
}

/// A workspace with the scripted agent in it, a fake home with a secret, a scripted model for
/// rawko's own agents, and the user's agents.
struct Setup {
    ws: Workspace,
    outside: tempfile::TempDir,
    server: ModelServer,
}

impl Setup {
    fn new() -> Setup {
        let ws = Workspace::new();
        std::fs::copy(
            fixture("scripted_agent.py"),
            ws.path().join("scripted_agent.py"),
        )
        .unwrap();
        ws.write("src/lib.txt", "the library\n");
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(outside.path().join("home/.ssh")).unwrap();
        std::fs::write(outside.path().join("home/.ssh/id_rsa"), SSH_SECRET).unwrap();
        std::fs::write(outside.path().join("outside.txt"), "outside the workspace").unwrap();
        let server = ModelServer::start();
        let cfg = ws.config_home().join("rawko");
        std::fs::create_dir_all(cfg.join("agents")).unwrap();
        std::fs::write(
            cfg.join("config.yaml"),
            format!(
                "adapters:\n  scripted:\n    plugin: openai\n    model: scripted-model\n    \
                 base_url: {}\n    api_key_env: TEST_KEY\n    allow_private_network: true\n    \
                 timeout: 30\ndefaults:\n  adapter: scripted\n",
                server.base_url()
            ),
        )
        .unwrap();
        Setup {
            ws,
            outside,
            server,
        }
    }

    /// Add a user agent file.
    fn agent(&self, name: &str, yaml: &str) {
        std::fs::write(
            self.ws
                .config_home()
                .join(format!("rawko/agents/{name}.yaml")),
            yaml,
        )
        .unwrap();
    }

    /// The scripted agent's script.
    fn script(&self, name: &str, script: Value) {
        self.ws.write(name, script.to_string());
    }

    fn home(&self) -> PathBuf {
        self.outside.path().join("home")
    }

    fn command(&self, args: &[&str]) -> std::process::Command {
        let mut cmd = rawko(&self.ws);
        cmd.args(args)
            .env("TEST_KEY", TEST_KEY)
            .env("NO_COLOR", "1")
            .env("HOME", self.home())
            .env("RAWKO_TEST_SECRET", SECRET_ENV)
            .env("PROBE_HOME", self.home())
            .stdin(Stdio::null());
        cmd
    }

    fn rawko(&self, args: &[&str]) -> Run {
        Run::of(self.command(args).output().unwrap())
    }

    /// `rawko run --json` of `task` starting at `agent`, and the task's record.
    fn run(&self, agent: &str, task: &str, extra: &[&str]) -> (Run, Value) {
        let mut args = vec!["run", "--json", "--no-stream", "--agent", agent];
        args.extend_from_slice(extra);
        args.push(task);
        let r = self.rawko(&args);
        let shown = show(&self.ws, &task_of(&r.stdout));
        (r, shown)
    }
}

/// The task a `rawko run --json` started, from its events.
fn task_of(events: &str) -> String {
    events
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|e| e["type"] == "task_started")
        .and_then(|e| e["task"].as_str().map(str::to_string))
        .unwrap_or_else(|| panic!("no task started:\n{events}"))
}

/// What the scripted agent saw, from the `RESULTS:` line of its report.
fn results(summary: &str) -> Vec<Value> {
    let line = summary
        .lines()
        .find_map(|l| l.strip_prefix("RESULTS: "))
        .unwrap_or_else(|| panic!("no RESULTS in {summary}"));
    serde_json::from_str(line).unwrap()
}

fn turn_summary(shown: &Value, agent: &str) -> String {
    shown["turns"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["agent"] == agent)
        .and_then(|t| t["summary"].as_str())
        .unwrap_or_else(|| panic!("no turn of {agent}: {shown:#}"))
        .to_string()
}

fn calls<'a>(shown: &'a Value, tool: &str) -> Vec<&'a Value> {
    shown["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["tool"] == tool)
        .collect()
}

fn decisions<'a>(shown: &'a Value, capability: &str, decision: &str) -> Vec<&'a Value> {
    shown["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["capability"] == capability && d["decision"] == decision)
        .collect()
}

const DEVELOPER: &str = "name: dev\nwhenToUse: An external coding agent.\nacp:\n  command: /usr/bin/python3\n  \
    args: [scripted_agent.py, dev.json]\ntools:\n  allowed: [Read, Write, Bash]\n  bashFilter:\n    \
    allowedCommands: [ls, cat, wc]\ntransitions: {onSuccess: reviewer, onFailure: failed}\n";

const REVIEWER: &str = "name: reviewer\nsystemPrompt: Review the change.\ntools:\n  allowed: [Read]\n\
    transitions: {onSuccess: done}\n";

#[test]
fn an_acp_developer_and_a_rawko_reviewer_share_a_task() {
    let s = Setup::new();
    s.agent("dev", DEVELOPER);
    s.agent("reviewer", REVIEWER);
    s.script(
        "dev.json",
        json!({"declared": true,
               "usage": {"totalTokens": 1500, "inputTokens": 1200, "outputTokens": 300},
               "steps": [
            {"plan": ["read the library", "write the notes"]},
            {"say": "Reading the library."},
            {"read": "src/lib.txt"},
            {"read": "src/lib.txt", "line": 1, "limit": 1},
            {"write": "src/notes.txt", "content": "notes by the external agent\n"},
            {"terminal": "wc -l src/notes.txt"},
            {"permission": "count the notes", "kind": "execute",
             "input": {"command": "wc -l src/notes.txt"}},
            {"permission": "browse the web", "kind": "fetch"},
            {"own_tool": "search for TODO", "kind": "search"},
        ]}),
    );
    s.server
        .push(scripted_call("Read", json!({"path": "src/notes.txt"}), 0));
    s.server.push(scripted_call(
        "finish",
        json!({"status": "success", "summary": "The notes look right."}),
        1,
    ));
    let (r, shown) = s.run("dev", "Write notes about the library.", &[]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(shown["task"]["status"], "done", "{shown:#}");
    let path: Vec<&str> = shown["transitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["to"].as_str().unwrap())
        .collect();
    assert_eq!(path, ["reviewer", "done"], "{shown:#}");

    let summary = turn_summary(&shown, "dev");
    // rawko declared what the state may do: reads, writes and a terminal.
    assert!(
        summary.contains(
            r#"DECLARED: {"fs": {"readTextFile": true, "writeTextFile": true}, "terminal": true"#
        ),
        "{summary}"
    );
    let seen = results(&summary);
    assert_eq!(seen[0]["answer"]["result"]["content"], "the library\n");
    assert_eq!(seen[1]["answer"]["result"]["content"], "the library\n");
    assert!(seen[2]["answer"]["result"].is_object(), "{:?}", seen[2]);
    assert_eq!(s.ws.read("src/notes.txt"), "notes by the external agent\n");
    assert_eq!(seen[3]["exit"]["result"]["exitCode"], 0, "{:?}", seen[3]);
    assert!(
        seen[3]["output"]["result"]["output"]
            .as_str()
            .unwrap()
            .contains("1 src/notes.txt"),
        "{:?}",
        seen[3]
    );
    // The command is one the state's shell policy allows; fetching is not decided by the
    // state's tools, and nobody is at a terminal to ask.
    assert_eq!(seen[4]["answer"]["result"]["outcome"]["optionId"], "yes");
    assert_eq!(seen[5]["answer"]["result"]["outcome"]["optionId"], "no");

    // Every request is a tool call with its verdict, in the store.
    assert_eq!(calls(&shown, "fs/read_text_file").len(), 2);
    assert_eq!(calls(&shown, "fs/write_text_file").len(), 1);
    let term = calls(&shown, "terminal");
    assert_eq!(term.len(), 1);
    assert!(
        term[0]["input"]
            .as_str()
            .unwrap()
            .contains("wc -l src/notes.txt")
    );
    assert_eq!(calls(&shown, "agent:search").len(), 1);
    assert_eq!(decisions(&shown, "permission", "allow").len(), 1);
    assert_eq!(decisions(&shown, "permission", "deny").len(), 1);
    // The agent's program ran in the kernel sandbox.
    let sandbox: Vec<&Value> = decisions(&shown, "sandbox", "allow")
        .into_iter()
        .filter(|d| {
            d["detail"]
                .as_str()
                .unwrap_or("")
                .contains("scripted_agent.py")
        })
        .collect();
    assert_eq!(sandbox.len(), 1, "{shown:#}");
    assert!(
        sandbox[0]["reason"]
            .as_str()
            .unwrap()
            .contains("workspace-write, network off"),
        "{sandbox:?}"
    );

    // The agent's token usage is the task's, beside the reviewer's.
    assert!(
        shown["usage"]["input_tokens"].as_i64().unwrap() >= 1200,
        "{:#}",
        shown["usage"]
    );
    // The reviewer read the external agent's report as data.
    let to_model: Vec<String> = s
        .server
        .received()
        .iter()
        .map(|r| r.json().to_string())
        .collect();
    assert!(to_model[0].contains("Reading the library."), "{to_model:?}");
    assert!(to_model[0].contains("untrusted-data"), "{to_model:?}");
    // Live progress in --json: the plan, the agent's text, each request.
    for want in [
        r#""type":"plan""#,
        r#""tool":"fs/write_text_file""#,
        "Reading the library.",
    ] {
        assert!(r.stdout.contains(want), "{want} in\n{}", r.stdout);
    }
}

#[test]
fn an_acp_agent_gets_nothing_outside_the_states_grants() {
    let s = Setup::new();
    s.agent("dev", DEVELOPER);
    s.agent("reviewer", REVIEWER);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let outside = s.outside.path();
    let ssh = s.home().join(".ssh/id_rsa");
    s.script(
        "dev.json",
        json!({"steps": [
            {"read": "../outside.txt"},
            {"read": outside.join("outside.txt")},
            {"read": "/etc/shadow"},
            {"read": ssh},
            {"write": outside.join("planted.txt"), "content": "x"},
            {"write": ".git/hooks/pre-commit", "content": "#!/bin/sh\necho owned\n"},
            {"terminal": format!("cat {}", ssh.display())},
            {"terminal": "curl http://example.com/"},
            {"terminal": "ls", "env": [{"name": "LD_PRELOAD", "value": outside.join("evil.so")}]},
            {"terminal": "ls", "cwd": outside},
            {"probe": "home", "path": ssh},
            {"probe": "socket", "port": port},
            {"probe": "write", "path": outside.join("written-by-agent")},
            {"probe": "env"},
        ]}),
    );
    let mut cmd = s.command(&[
        "run",
        "--json",
        "--no-stream",
        "--agent",
        "dev",
        "Try things.",
    ]);
    if std::env::var_os("ACP_ATTACK_UNSANDBOXED").is_some() {
        // To see this test fail: the same run without the kernel sandbox.
        cmd.arg("--no-sandbox");
    }
    s.server.push(scripted_call(
        "finish",
        json!({"status": "success", "summary": "ok"}),
        0,
    ));
    let r = Run::of(cmd.output().unwrap());
    assert!(
        !r.stdout.contains(SSH_SECRET) && !r.stdout.contains(SECRET_ENV),
        "{r:?}"
    );
    assert!(
        listener.accept().is_err(),
        "the agent reached a loopback listener"
    );
    assert!(!outside.join("planted.txt").exists());
    assert!(!outside.join("written-by-agent").exists());
    let shown = show(&s.ws, &task_of(&r.stdout));
    let seen = results(&turn_summary(&shown, "dev"));
    for (i, step) in seen.iter().enumerate().take(6) {
        assert!(
            step["answer"]["error"].is_object(),
            "step {i} was served: {step}"
        );
    }
    assert!(!s.ws.path().join(".git/hooks/pre-commit").exists());
    for i in [6, 7] {
        assert_ne!(seen[i]["exit"]["result"]["exitCode"], 0, "{}", seen[i]);
        let out = seen[i]["output"]["result"]["output"].as_str().unwrap();
        assert!(out.contains("denied"), "{out}");
    }
    // A terminal's own environment and another working directory are refused at creation.
    for (i, word) in [(8, "env"), (9, "cwd")] {
        let refused = seen[i]["create"]["error"]["message"].as_str();
        assert!(refused.is_some_and(|m| m.contains(word)), "{}", seen[i]);
    }
    for (i, want) in [
        (10, "refused"),
        (11, "refused"),
        (12, "refused"),
        (13, "secret: absent"),
    ] {
        let got = seen[i]["answer"].as_str().unwrap();
        assert!(got.starts_with(want), "probe {}: {got}", seen[i]["probe"]);
    }
    // The denials are in the audit log.
    let fs_denied = decisions(&shown, "fs.read", "deny");
    assert_eq!(fs_denied.len(), 4, "{shown:#}");
    assert!(fs_denied.iter().any(|d| d["detail"] == "/etc/shadow"));
    assert!(!decisions(&shown, "exec", "deny").is_empty(), "{shown:#}");
    let write_calls = calls(&shown, "fs/write_text_file");
    assert!(
        write_calls.iter().all(|c| c["is_error"] == true),
        "{write_calls:?}"
    );
}

#[test]
fn a_read_only_state_declares_no_writes_and_no_terminal() {
    let s = Setup::new();
    s.agent(
        "looker",
        "name: looker\nacp:\n  command: /usr/bin/python3\n  args: [scripted_agent.py, look.json]\ntools:\n  \
         allowed: [Read, Grep]\ntransitions: {onSuccess: done}\n",
    );
    s.script(
        "look.json",
        json!({"declared": true, "steps": [
            {"read": "src/lib.txt"},
            {"write": "src/lib.txt", "content": "changed"},
            {"terminal": "ls"},
            {"probe": "write", "path": s.ws.path().join("src/by-the-agent.txt")},
        ]}),
    );
    let (r, shown) = s.run("looker", "Look around.", &[]);
    assert_eq!(r.code, 0, "{r:?}");
    let summary = turn_summary(&shown, "looker");
    assert!(
        summary.contains(
            r#"DECLARED: {"fs": {"readTextFile": true, "writeTextFile": false}, "terminal": false"#
        ),
        "{summary}"
    );
    let seen = results(&summary);
    assert_eq!(seen[0]["answer"]["result"]["content"], "the library\n");
    assert_eq!(seen[1]["answer"]["error"]["code"], -32601, "{}", seen[1]);
    assert_eq!(seen[2]["create"]["error"]["code"], -32601, "{}", seen[2]);
    assert_eq!(s.ws.read("src/lib.txt"), "the library\n");
    // Its own process runs read-only.
    assert!(
        seen[3]["answer"].as_str().unwrap().starts_with("refused"),
        "{}",
        seen[3]
    );
    assert!(
        decisions(&shown, "sandbox", "allow")
            .iter()
            .any(|d| d["reason"].as_str().unwrap().starts_with("read-only")),
        "{shown:#}"
    );
}

#[test]
fn external_agents_that_misbehave_end_their_state_clearly_and_never_hang() {
    let s = Setup::new();
    let agent = |name: &str, script: &str, timeout_ms: u64| {
        s.agent(
            name,
            &format!(
                "name: {name}\nacp:\n  command: /usr/bin/python3\n  args: [scripted_agent.py, {script}]\n\
                 tools:\n  allowed: [Read]\nlimits: {{timeout: {timeout_ms}}}\n\
                 transitions: {{onSuccess: done, onFailure: failed}}\n"
            ),
        );
    };
    s.script("v2.json", json!({"version": 2, "steps": []}));
    s.script(
        "crash.json",
        json!({"steps": [{"say": "about to fail"}, {"crash": 3}]}),
    );
    s.script("flood.json", json!({"steps": [{"flood": 9_000_000}]}));
    s.script("hang.json", json!({"steps": [{"hang": true}]}));
    s.script("refuse.json", json!({"steps": [], "stop": "refusal"}));
    agent("v2", "v2.json", 20_000);
    agent("crash", "crash.json", 20_000);
    agent("flood", "flood.json", 20_000);
    agent("hang", "hang.json", 2_000);
    agent("refuse", "refuse.json", 20_000);
    for (name, want) in [
        ("v2", "another ACP protocol version"),
        ("crash", "connection ended"),
        ("flood", "longer than"),
        ("hang", "ran out of time"),
        ("refuse", "stopped: refusal"),
    ] {
        let started = Instant::now();
        let (r, shown) = s.run(name, "Do it.", &[]);
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{name} took too long"
        );
        assert_eq!(r.code, 1, "{name}: {r:?}");
        assert_eq!(shown["task"]["status"], "failed", "{name}: {shown:#}");
        let summary = turn_summary(&shown, name);
        assert!(summary.contains(want), "{name}: {summary}");
    }
}

#[test]
fn a_missing_program_is_a_validation_error_and_fails_its_state() {
    let s = Setup::new();
    s.agent(
        "ghost",
        "name: ghost\nacp:\n  command: no-such-acp-agent\ntransitions: {onSuccess: done}\n",
    );
    let r = s.rawko(&["agents", "validate"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stdout.contains("`no-such-acp-agent` is not installed"),
        "{r:?}"
    );
    let (r, shown) = s.run("ghost", "Do it.", &[]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        turn_summary(&shown, "ghost").contains("cannot start `no-such-acp-agent`"),
        "{shown:#}"
    );
    // Each attempt the arbiter makes is refused, and logged.
    assert!(!decisions(&shown, "exec", "deny").is_empty(), "{shown:#}");
}

#[test]
fn an_untrusted_workspaces_external_agent_does_not_run() {
    let s = Setup::new();
    s.ws.write(
        ".rawko/agents/dev.yaml",
        "name: dev\nacp:\n  command: /usr/bin/python3\n  args: [scripted_agent.py, dev.json]\n\
         transitions: {onSuccess: done}\n",
    );
    s.script("dev.json", json!({"steps": [{"probe": "env"}]}));
    let (r, shown) = s.run("dev", "Do it.", &[]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        turn_summary(&shown, "dev").contains("rawko trust"),
        "{shown:#}"
    );
    assert!(calls(&shown, "fs/read_text_file").is_empty());
}

#[test]
fn a_cli_agent_runs_in_the_sandbox_and_its_output_goes_through_the_extract_layer() {
    let s = Setup::new();
    s.ws.write(
        "cli_agent.py",
        "import os, sys\n\
         prompt = sys.argv[1] if len(sys.argv) > 1 else sys.stdin.read()\n\
         print('saw the task:', 'Summarise' in prompt)\n\
         try:\n    open(os.environ['PROBE_HOME'] + '/.ssh/id_rsa').read(); print('read the key')\n\
         except Exception as e:\n    print('no key:', type(e).__name__)\n\
         sys.exit(int(os.environ.get('CLI_EXIT', '0')))\n",
    );
    s.agent(
        "cli-arg",
        "name: cli-arg\ncli:\n  command: /usr/bin/python3\n  args: [cli_agent.py, \"{prompt}\"]\n  \
         env: [PROBE_HOME, CLI_EXIT]\ntransitions: {onSuccess: done, onFailure: failed}\n",
    );
    s.agent(
        "cli-stdin",
        "name: cli-stdin\ncli:\n  command: /usr/bin/python3\n  args: [cli_agent.py]\n  env: [PROBE_HOME]\n\
         adapter: scripted\noutputSchema:\n  type: object\n  properties: {verdict: {type: string}}\n  \
         required: [verdict]\ntransitions: {onSuccess: done, onFailure: failed}\n",
    );
    let (r, shown) = s.run("cli-arg", "Summarise the library.", &[]);
    assert_eq!(r.code, 0, "{r:?}");
    let summary = turn_summary(&shown, "cli-arg");
    assert!(summary.contains("saw the task: True"), "{summary}");
    assert!(summary.contains("no key:"), "{summary}");

    // Through the extract layer: the model turns the output into the typed outcome; its first
    // answer misses the schema and gets the one corrective retry.
    s.server.push(scripted_call(
        "finish",
        json!({"status": "success", "summary": "ok"}),
        0,
    ));
    s.server.push(scripted_call(
        "finish",
        json!({"status": "success", "summary": "It summarised.", "output": {"verdict": "fine"}}),
        1,
    ));
    let (r, shown) = s.run("cli-stdin", "Summarise the library.", &[]);
    assert_eq!(r.code, 0, "{r:?}");
    let turn = shown["turns"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["agent"] == "cli-stdin")
        .unwrap();
    assert_eq!(turn["summary"], "It summarised.");
    assert_eq!(turn["output"]["verdict"], "fine", "{turn:#}");
    assert!(
        s.server.received()[0]
            .json()
            .to_string()
            .contains("saw the task: True")
    );

    let mut cmd = s.command(&[
        "run",
        "--json",
        "--no-stream",
        "--agent",
        "cli-arg",
        "Fail.",
    ]);
    cmd.env("CLI_EXIT", "4");
    let r = Run::of(cmd.output().unwrap());
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stdout.contains("exit status 4"), "{r:?}");
}

/// Run the scripted editor against `rawko acp` with `plan`.
fn editor(s: &Setup, plan: Value, args: &[&str]) -> Value {
    editor_with(s, plan, args, &[])
}

/// [`editor`], with more variables in rawko's environment.
fn editor_with(s: &Setup, plan: Value, args: &[&str], env: &[(&str, &str)]) -> Value {
    s.ws.write("plan.json", plan.to_string());
    let mut cmd = std::process::Command::new("python3");
    cmd.arg(fixture("client.py"))
        .arg(s.ws.path().join("plan.json"))
        .arg("--")
        .arg(crate::support::rawko_bin())
        .arg("acp")
        .args(args)
        .current_dir(s.ws.path())
        .env("RAWKO_CACHE_DIR", crate::support::cache_dir())
        .env("RAWKO_DATA_DIR", s.ws.path().join(".test-data"))
        .env("XDG_CONFIG_HOME", s.ws.config_home())
        .env("TEST_KEY", TEST_KEY)
        .env("HOME", s.home())
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = cmd.stdout(Stdio::piped()).spawn().unwrap();
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(child.wait().unwrap().success(), "{out}\n{err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}\n{err}"))
}

fn updates_of<'a>(prompt: &'a Value, kind: &str) -> Vec<&'a Value> {
    prompt["updates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|u| u["sessionUpdate"] == kind)
        .collect()
}

#[test]
fn rawko_acp_runs_tasks_for_an_editor_streams_progress_and_asks_it() {
    let s = Setup::new();
    std::fs::copy(
        rawko_test_artifacts::ASK_FILTER,
        s.ws.config_home().join("rawko/marker.wasm"),
    )
    .unwrap();
    let cfg = s.ws.config_home().join("rawko/config.yaml");
    let mut text = std::fs::read_to_string(&cfg).unwrap();
    text.push_str("bash:\n  filters: [marker.wasm]\n");
    std::fs::write(&cfg, text).unwrap();
    s.agent(
        "solo",
        "name: solo\nsystemPrompt: Work.\ntools:\n  allowed: [Read, Bash]\n  bashFilter:\n    \
         allowedCommands: [echo]\ntransitions: {onSuccess: done}\n",
    );
    // Prompt 1: a read, then a command the filter asks about (the editor allows it).
    s.server
        .push(scripted_call("Read", json!({"path": "src/lib.txt"}), 0));
    s.server.push(scripted_call(
        "Bash",
        json!({"command": "echo please-ask"}),
        1,
    ));
    s.server.push(scripted_call(
        "finish",
        json!({"status": "success", "summary": "Read and echoed."}),
        2,
    ));
    let got = editor(
        &s,
        json!({"cwd": s.ws.path(), "prompts": ["Read the library."], "permission": "allow"}),
        &["--agent", "solo"],
    );
    assert_eq!(got["initialize"]["result"]["protocolVersion"], 1, "{got:#}");
    assert_eq!(got["initialize"]["result"]["agentInfo"]["name"], "rawko");
    let p = &got["prompts"][0];
    assert_eq!(p["response"]["result"]["stopReason"], "end_turn", "{got:#}");
    let plan = updates_of(p, "plan");
    assert_eq!(plan[0]["entries"][0]["content"], "solo", "{p:#}");
    let started = updates_of(p, "tool_call");
    assert_eq!(started.len(), 2, "{p:#}");
    assert_eq!(started[0]["kind"], "read");
    assert_eq!(started[1]["kind"], "execute");
    let done = updates_of(p, "tool_call_update");
    assert!(done.iter().all(|u| u["status"] == "completed"), "{done:?}");
    // The filter's ask went to the editor, which allowed it.
    let asked = got["permissions"].as_array().unwrap();
    assert_eq!(asked.len(), 1, "{got:#}");
    assert!(
        asked[0]["toolCall"]["title"]
            .as_str()
            .unwrap()
            .contains("please-ask")
    );
    let said: String = updates_of(p, "agent_message_chunk")
        .iter()
        .map(|u| u["content"]["text"].as_str().unwrap())
        .collect();
    assert!(
        said.contains("is done.") && said.contains("Read and echoed."),
        "{said}"
    );

    // The same, refused by the editor: the command does not run.
    s.server.push(scripted_call(
        "Bash",
        json!({"command": "echo please-ask"}),
        0,
    ));
    s.server.push(scripted_call(
        "finish",
        json!({"status": "success", "summary": "Tried."}),
        1,
    ));
    let got = editor(
        &s,
        json!({"cwd": s.ws.path(), "prompts": ["Echo."], "permission": "reject"}),
        &["--agent", "solo"],
    );
    let done = updates_of(&got["prompts"][0], "tool_call_update");
    assert_eq!(done[0]["status"], "failed", "{got:#}");
}

#[test]
fn an_editor_cancels_a_task_and_the_next_prompt_resumes_it() {
    let s = Setup::new();
    s.agent(
        "solo",
        "name: solo\nsystemPrompt: Work.\ntools:\n  allowed: [Read]\ntransitions: {onSuccess: done}\n",
    );
    // The first answer is slow: the editor cancels while it is awaited.
    s.server
        .push(openai::text("too late", 1, 1).delay(Duration::from_secs(8)));
    s.server.push(scripted_call(
        "finish",
        json!({"status": "success", "summary": "Resumed and done."}),
        1,
    ));
    let started = Instant::now();
    let got = editor(
        &s,
        json!({"cwd": s.ws.path(), "prompts": ["Work slowly.", "Go on."], "cancel_after_update": 1}),
        &["--agent", "solo"],
    );
    assert!(started.elapsed() < Duration::from_secs(30));
    assert_eq!(
        got["prompts"][0]["response"]["result"]["stopReason"], "cancelled",
        "{got:#}"
    );
    assert_eq!(
        got["prompts"][1]["response"]["result"]["stopReason"], "end_turn",
        "{got:#}"
    );
    let said: String = updates_of(&got["prompts"][1], "agent_message_chunk")
        .iter()
        .map(|u| u["content"]["text"].as_str().unwrap())
        .collect();
    assert!(said.contains("Resumed and done."), "{said}");
    // One task, cancelled and then resumed to its end.
    let r = Run::of(
        rawko(&s.ws)
            .args(["tasks", "list", "--json"])
            .output()
            .unwrap(),
    );
    let tasks = r.json();
    let tasks = tasks
        .as_array()
        .unwrap_or_else(|| tasks["tasks"].as_array().unwrap());
    assert_eq!(tasks.len(), 1, "{r:?}");
    assert_eq!(tasks[0]["status"], "done");
}

#[test]
fn a_session_outside_the_workspace_is_refused() {
    let s = Setup::new();
    let got = editor(&s, json!({"cwd": s.outside.path(), "prompts": []}), &[]);
    assert!(
        got["session"]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("is not inside it"),
        "{got:#}"
    );
}

/// A real ACP agent from crates.io: `elizacp --deterministic acp` (`cargo install elizacp`), as
/// a state. Not installed by `.ci/run` (it builds 200 crates); run with `--ignored` where it is.
#[test]
#[ignore = "needs elizacp on PATH (cargo install elizacp)"]
fn elizacp_from_crates_io_runs_as_a_state() {
    let s = Setup::new();
    s.agent(
        "eliza",
        "name: eliza\nacp:\n  command: elizacp\n  args: [--deterministic, acp]\ntools:\n  \
         allowed: [Read]\ntransitions: {onSuccess: done}\n",
    );
    let (r, shown) = s.run("eliza", "I am worried about my tests.", &[]);
    assert_eq!(r.code, 0, "{r:?}");
    let summary = turn_summary(&shown, "eliza");
    assert!(summary.contains("your tests"), "{summary}");
}

#[test]
fn ctrl_c_cancels_the_agents_turn_and_stops_its_process() {
    use std::io::BufRead;
    let s = Setup::new();
    // A name no other test's agent has, to find its process by.
    s.ws.write(
        "hang-ctrl-c.json",
        json!({"steps": [{"say": "waiting"}, {"hang": true}]}).to_string(),
    );
    s.agent(
        "hanger",
        "name: hanger\nacp:\n  command: /usr/bin/python3\n  args: [scripted_agent.py, hang-ctrl-c.json]\n\
         tools:\n  allowed: [Read]\ntransitions: {onSuccess: done}\n",
    );
    let mut child = s
        .command(&["run", "--json", "--no-stream", "--agent", "hanger", "Wait."])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut seen = String::new();
    while !seen.contains("waiting") {
        let mut line = String::new();
        assert!(out.read_line(&mut line).unwrap() > 0, "{seen}");
        seen.push_str(&line);
    }
    let me = s.ws.path().join("hang-ctrl-c.json");
    assert!(!crate::support::processes_with("hang-ctrl-c.json").is_empty());
    // SAFETY: kill(2) on our own child's pid.
    let sent = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    assert_eq!(sent, 0);
    let started = Instant::now();
    let status = child.wait().unwrap();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(status.code(), Some(130), "{seen}");
    assert!(
        crate::support::processes_with("hang-ctrl-c.json").is_empty(),
        "the agent outlived the run ({})",
        me.display()
    );
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    let shown = show(&s.ws, &task_of(&seen));
    assert_eq!(shown["task"]["status"], "cancelled", "{shown:#}");
}

/// The Python in which `.ci/run` installs the official ACP SDK (`agent-client-protocol`).
fn sdk_python() -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/ci-tools/bin/python");
    let ok = std::process::Command::new(&p)
        .args(["-c", "import acp"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "{} with the `agent-client-protocol` package is missing: `.ci/run` installs it \
         (target/ci-tools/bin/pip install agent-client-protocol)",
        p.display()
    );
    p
}

#[test]
fn the_official_python_sdk_interoperates_both_ways() {
    let s = Setup::new();
    let python = sdk_python();
    std::fs::copy(fixture("sdk_peers.py"), s.ws.path().join("sdk_peers.py")).unwrap();
    // An agent written with the SDK, as a state. It is the user's own agent and runs without
    // the kernel sandbox (`full`), since its Python environment is outside the workspace; what
    // it asks rawko for is still served under the state's grants.
    s.agent(
        "sdk",
        &format!(
            "name: sdk\nacp:\n  command: {}\n  args: [sdk_peers.py, agent]\nsandbox: full\n\
             tools:\n  allowed: [Read, Write, Bash]\n  bashFilter: {{allowedCommands: [ls]}}\n\
             transitions: {{onSuccess: done}}\n",
            python.display()
        ),
    );
    let (r, shown) = s.run("sdk", "Go.", &[]);
    assert_eq!(r.code, 0, "{r:?}");
    let summary = turn_summary(&shown, "sdk");
    let got: Value = serde_json::from_str(summary.strip_prefix("SDK: ").unwrap()).unwrap();
    assert_eq!(got["caps"]["fs"]["writeTextFile"], true, "{got:#}");
    assert_eq!(got["read"], "the library\n");
    assert_eq!(got["exit"], 0);
    assert!(got["ls"].as_str().unwrap().contains("sdk.txt"), "{got:#}");
    assert_eq!(got["permission"]["optionId"], "ok");
    assert_eq!(s.ws.read("src/sdk.txt"), "written through the SDK\n");

    // The SDK's client driving `rawko acp`, whose first agent is the same SDK agent.
    let out = std::process::Command::new(&python)
        .arg(fixture("sdk_peers.py"))
        .args(["client"])
        .arg(s.ws.path())
        .arg("Go again.")
        .arg("--")
        .arg(crate::support::rawko_bin())
        .args(["acp", "--agent", "sdk"])
        .current_dir(s.ws.path())
        .env("RAWKO_CACHE_DIR", crate::support::cache_dir())
        .env("RAWKO_DATA_DIR", s.ws.path().join(".test-data"))
        .env("XDG_CONFIG_HOME", s.ws.config_home())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let r = Run::of(out);
    assert_eq!(r.code, 0, "{r:?}");
    let got = r.json();
    assert_eq!(got["agent"]["name"], "rawko");
    assert_eq!(got["protocol"], 1);
    assert_eq!(got["stop"], "end_turn", "{got:#}");
    let kinds: Vec<&str> = got["updates"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|u| u["sessionUpdate"].as_str())
        .collect();
    for want in [
        "plan",
        "tool_call",
        "tool_call_update",
        "agent_message_chunk",
    ] {
        assert!(kinds.contains(&want), "{want} in {kinds:?}");
    }
}

#[test]
fn an_agent_that_floods_updates_is_held_back_and_its_report_bounded() {
    let s = Setup::new();
    s.agent(
        "chatty",
        "name: chatty\nacp:\n  command: /usr/bin/python3\n  args: [scripted_agent.py, chatty.json]\n\
         tools:\n  allowed: [Read]\ntransitions: {onSuccess: done}\n",
    );
    // 10 MB of message chunks, then garbage between them and the end of the turn.
    s.script(
        "chatty.json",
        json!({"steps": [{"spam": 10_000}, {"babble": "not json-rpc"}, {"say": "the end"}]}),
    );
    let (r, shown) = s.run("chatty", "Talk.", &[]);
    assert_eq!(r.code, 0, "{}", &r.stderr);
    let summary = turn_summary(&shown, "chatty");
    assert!(summary.len() <= 41_000, "{} characters kept", summary.len());
    assert!(
        summary.contains("the end"),
        "{}",
        &summary[summary.len() - 200..]
    );
}

#[test]
fn terminals_are_bounded_and_stopped_when_killed_or_when_the_state_ends() {
    let s = Setup::new();
    // A duration no other process has on its command line.
    let marker = format!("sleep 28.{}", std::process::id());
    s.agent(
        "spawner",
        "name: spawner\nacp:\n  command: /usr/bin/python3\n  args: [scripted_agent.py, spawn.json]\n\
         tools:\n  allowed: [Read, Bash]\n  bashFilter: {allowedCommands: [sleep]}\n\
         transitions: {onSuccess: reviewer}\n",
    );
    s.agent("reviewer", REVIEWER);
    s.script(
        "spawn.json",
        json!({"steps": [{"spawn_terminals": 17, "command": marker}]}),
    );
    // When the next state asks its model, the external agent's state has ended: its commands
    // are being stopped (each executor notices within 50 ms, then gives the group 200 ms), and
    // must be gone within a second, not run on for their 28 s.
    let seen_running = std::sync::Arc::new(std::sync::Mutex::new(None));
    {
        let seen_running = seen_running.clone();
        let marker = marker.clone();
        s.server.respond_with(move |_| {
            let mut seen = seen_running.lock().unwrap();
            if seen.is_none() {
                let until = Instant::now() + Duration::from_secs(1);
                let mut left = crate::support::processes_with(&marker).len();
                while left > 0 && Instant::now() < until {
                    std::thread::sleep(Duration::from_millis(20));
                    left = crate::support::processes_with(&marker).len();
                }
                *seen = Some(left);
            }
            scripted_call("finish", json!({"status": "success", "summary": "ok"}), 0)
        });
    }
    let (r, shown) = s.run("spawner", "Start things.", &[]);
    assert_eq!(r.code, 0, "{r:?}");
    let seen = results(&turn_summary(&shown, "spawner"));
    assert_eq!(seen[0]["created"], 16, "{}", seen[0]);
    let refused = seen[0]["refused"][0]["message"].as_str().unwrap();
    assert!(refused.contains("at most 16 terminals"), "{refused}");
    for exit in seen[0]["exits"].as_array().unwrap() {
        assert_eq!(exit["result"]["signal"], "SIGKILL", "{exit}");
    }
    assert_eq!(
        *seen_running.lock().unwrap(),
        Some(0),
        "commands of the ended state were still running"
    );
    let stopped = calls(&shown, "terminal")
        .iter()
        .filter(|c| {
            c["verdict"]
                .as_str()
                .unwrap()
                .contains("stopped by the agent")
        })
        .count();
    assert_eq!(stopped, 8, "{shown:#}");
}

/// An agent that asks before it acts with tools of its own, unconfined (`sandbox: full`, as a
/// user may run Claude Code or Codex): rawko's answer to its permission requests is all that
/// stands between it and the workspace. Its shell policy allows `ls` and `rm` but blocks
/// `rm -rf`.
const ASKER: &str = "name: asker\nacp:\n  command: /usr/bin/python3\n  args: [scripted_agent.py, ask.json]\n\
    sandbox: full\ntools:\n  allowed: [Read, Write, Bash]\n  bashFilter:\n    allowedCommands: [ls, rm]\n    \
    blockedPatterns: [\"rm -rf\"]\ntransitions: {onSuccess: done, onFailure: failed}\n";

/// A workspace for [`ASKER`]: a directory to delete, a git config to rewrite, and a secret
/// beside the workspace. Returns the secret's path relative to the workspace (`../…`).
fn asker_setup(s: &Setup) -> String {
    s.agent("asker", ASKER);
    s.ws.write("victim/keep.txt", "still here\n");
    s.ws.write(".git/config", "[core]\n\tbare = false\n");
    std::fs::create_dir_all(s.outside.path().join("outside")).unwrap();
    std::fs::write(s.outside.path().join("outside/secret.txt"), "the secret\n").unwrap();
    assert_eq!(s.outside.path().parent(), s.ws.path().parent());
    format!(
        "../{}/outside/secret.txt",
        s.outside.path().file_name().unwrap().to_str().unwrap()
    )
}

/// The option the agent's permission request was answered with.
fn chosen(step: &Value) -> &str {
    step["answer"]["result"]["outcome"]["optionId"]
        .as_str()
        .unwrap_or_else(|| panic!("no option chosen: {step}"))
}

/// The permission decision whose detail names `title`.
fn permission_row<'a>(shown: &'a Value, title: &str) -> &'a Value {
    shown["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["capability"] == "permission" && d["detail"].as_str().unwrap().contains(title))
        .unwrap_or_else(|| panic!("no permission row for {title}: {shown:#}"))
}

#[test]
fn permission_requests_are_judged_by_what_they_ask_not_by_their_kind() {
    let s = Setup::new();
    let secret = asker_setup(&s);
    s.script(
        "ask.json",
        json!({"steps": [
            {"permission": "Delete the victim", "kind": "execute",
             "input": {"command": "rm -rf victim"}, "then": {"run": "rm -rf victim"}},
            {"permission": "Edit the secret", "kind": "edit",
             "input": {"path": secret, "content": "owned\n"}, "locations": [secret],
             "then": {"write": secret, "content": "owned\n"}},
            {"permission": "Edit the git config", "kind": "edit",
             "input": {"file_path": ".git/config"}, "locations": [s.ws.path().join(".git/config")],
             "then": {"write": ".git/config", "content": "[core]\n\thooksPath = /tmp/evil\n"}},
            {"permission": "Tidy up", "kind": "execute", "input": {"description": "tidy the tree"},
             "then": {"run": "rm -r victim"}},
            {"permission": "Delete it the Codex way", "kind": "execute",
             "input": {"command": ["bash", "-lc", "rm -rf victim"]},
             "then": {"run": "rm -rf victim"}},
            {"permission": "Write the notes", "kind": "edit",
             "input": {"file_path": "src/notes.txt"}, "locations": ["src/notes.txt"],
             "then": {"write": "src/notes.txt", "content": "notes\n"}},
            {"permission": "List the sources", "kind": "execute", "input": {"command": "ls src"}},
        ]}),
    );
    let (r, shown) = s.run("asker", "Clean up.", &[]);
    assert_eq!(r.code, 0, "{r:?}");
    let seen = results(&turn_summary(&shown, "asker"));
    let answers: Vec<&str> = seen.iter().map(chosen).collect();
    assert_eq!(
        answers,
        ["no", "no", "no", "no", "no", "yes", "yes"],
        "{seen:#?}"
    );
    // Nothing refused happened.
    assert_eq!(s.ws.read("victim/keep.txt"), "still here\n");
    assert_eq!(s.ws.read(".git/config"), "[core]\n\tbare = false\n");
    assert_eq!(
        std::fs::read_to_string(s.outside.path().join("outside/secret.txt")).unwrap(),
        "the secret\n"
    );
    // What was allowed did.
    assert_eq!(s.ws.read("src/notes.txt"), "notes\n");
    // Each answer is an audit row naming the rule that decided it.
    for (title, decision, rule) in [
        ("Delete the victim", "deny", "blockedPatterns: rm -rf"),
        ("Edit the secret", "deny", "outside the workspace"),
        ("Edit the git config", "deny", ".git"),
        ("Tidy up", "deny", "names no command"),
        ("Delete it the Codex way", "deny", "blockedPatterns: rm -rf"),
        ("Write the notes", "allow", "write grant"),
        ("List the sources", "allow", "allowedCommands: ls"),
    ] {
        let row = permission_row(&shown, title);
        assert_eq!(row["decision"], decision, "{row}");
        let reason = row["reason"].as_str().unwrap();
        assert!(reason.contains(rule), "{title}: {reason}");
    }
}

#[test]
fn permission_requests_under_rawko_acp_refuse_what_the_policy_denies_and_ask_the_editor() {
    let s = Setup::new();
    asker_setup(&s);
    s.script(
        "ask.json",
        json!({"steps": [
            {"permission": "Delete the victim", "kind": "execute",
             "input": {"command": "rm -rf victim"}, "then": {"run": "rm -rf victim"}},
            {"permission": "Tidy up", "kind": "execute", "input": {"description": "tidy the tree"}},
            {"permission": "List the sources", "kind": "execute", "input": {"command": "ls src"}},
        ]}),
    );
    // The editor allows whatever it is asked.
    let got = editor(
        &s,
        json!({"cwd": s.ws.path(), "prompts": ["Clean up."], "permission": "allow"}),
        &["--agent", "asker"],
    );
    assert_eq!(
        got["prompts"][0]["response"]["result"]["stopReason"], "end_turn",
        "{got:#}"
    );
    assert_eq!(s.ws.read("victim/keep.txt"), "still here\n");
    // Only the request rawko could not judge went to the editor.
    let asked = got["permissions"].as_array().unwrap();
    assert_eq!(asked.len(), 1, "{got:#}");
    assert!(
        asked[0]["toolCall"]["title"]
            .as_str()
            .unwrap()
            .contains("Tidy up"),
        "{asked:?}"
    );
    let r = Run::of(
        rawko(&s.ws)
            .args(["tasks", "list", "--json"])
            .output()
            .unwrap(),
    );
    let tasks = r.json();
    let tasks = tasks
        .as_array()
        .unwrap_or_else(|| tasks["tasks"].as_array().unwrap());
    let shown = show(&s.ws, tasks[0]["id"].as_str().unwrap());
    let seen = results(&turn_summary(&shown, "asker"));
    let answers: Vec<&str> = seen.iter().map(chosen).collect();
    assert_eq!(answers, ["no", "yes", "yes"], "{seen:#?}");
    let row = permission_row(&shown, "Delete the victim");
    assert!(
        row["reason"]
            .as_str()
            .unwrap()
            .contains("blockedPatterns: rm -rf"),
        "{row}"
    );
    let row = permission_row(&shown, "Tidy up");
    assert_eq!(row["decision"], "allow", "{row}");
    assert!(
        row["reason"].as_str().unwrap().contains("the user agreed"),
        "{row}"
    );
}

/// A turn's flood: 1,024 message chunks of 64 KiB (64 MiB) in lines of 80 bytes, then the end.
fn flooder(s: &Setup) {
    s.agent(
        "flooder",
        "name: flooder\nacp:\n  command: /usr/bin/python3\n  args: [scripted_agent.py, flood.json]\n\
         tools:\n  allowed: [Read]\ntransitions: {onSuccess: done}\n",
    );
    s.script(
        "flood.json",
        json!({"steps": [{"spam": 1024, "size": 65_536, "lines": true}, {"say": "the end"}]}),
    );
}

/// What one turn may pass on (1 MiB of text), and room for the events around it.
const PASSED_ON: usize = (1 << 20) + (64 << 10);

#[test]
fn a_flood_of_message_chunks_passes_on_one_turns_worth_and_says_it_was_cut() {
    let s = Setup::new();
    flooder(&s);
    let r = s.rawko(&["run", "--json", "--agent", "flooder", "Talk."]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.len() <= PASSED_ON,
        "{} bytes passed on to stdout",
        r.stdout.len()
    );
    let notices = r
        .stdout
        .lines()
        .filter(|l| l.contains(r#""type":"warning""#) && l.contains("cut"))
        .count();
    assert_eq!(
        notices,
        1,
        "{}",
        &r.stdout[r.stdout.len().saturating_sub(2_000)..]
    );
    // The store keeps the end of the report, as before.
    let shown = show(&s.ws, &task_of(&r.stdout));
    assert!(turn_summary(&shown, "flooder").contains("the end"));

    // The person watching sees as much, and the same notice once.
    let r = s.rawko(&["run", "--agent", "flooder", "Talk."]);
    assert_eq!(
        r.code,
        0,
        "{}",
        &r.stderr[r.stderr.len().saturating_sub(2_000)..]
    );
    assert!(
        r.stderr.len() <= PASSED_ON + PASSED_ON / 8,
        "{} bytes passed on to stderr",
        r.stderr.len()
    );
    assert_eq!(
        r.stderr.matches("the rest of this turn is cut").count(),
        1,
        "{}",
        &r.stderr[r.stderr.len().saturating_sub(2_000)..]
    );
}

#[test]
fn a_flood_of_message_chunks_reaches_the_editor_cut_to_one_turns_worth() {
    let s = Setup::new();
    flooder(&s);
    let got = editor(
        &s,
        json!({"cwd": s.ws.path(), "prompts": ["Talk."]}),
        &["--agent", "flooder"],
    );
    let p = &got["prompts"][0];
    assert_eq!(p["response"]["result"]["stopReason"], "end_turn");
    let text: usize = updates_of(p, "agent_message_chunk")
        .iter()
        .map(|u| u["content"]["text"].as_str().unwrap().len())
        .sum();
    assert!(
        text <= PASSED_ON,
        "{text} bytes of text passed on to the editor"
    );
    let notices = updates_of(p, "agent_thought_chunk")
        .iter()
        .filter(|u| {
            u["content"]["text"]
                .as_str()
                .unwrap()
                .contains("the rest of this turn is cut")
        })
        .count();
    assert_eq!(notices, 1);
}

/// An external agent's state is an `invoke_agent` span with the tokens the agent reported.
#[test]
fn an_external_agents_state_is_traced_with_its_tokens() {
    let s = Setup::new();
    s.agent("dev", DEVELOPER);
    s.agent("reviewer", REVIEWER);
    s.script(
        "dev.json",
        json!({"usage": {"totalTokens": 1500, "inputTokens": 1200, "outputTokens": 300},
               "steps": [{"say": "Done."}]}),
    );
    s.server.push(scripted_call(
        "finish",
        json!({"status": "success", "summary": "Fine."}),
        0,
    ));
    let receiver = crate::support::otlp::Receiver::start();
    let r = Run::of(
        s.command(&["run", "--json", "--no-stream", "--agent", "dev", "Do it."])
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint())
            .output()
            .unwrap(),
    );
    assert_eq!(r.code, 0, "{r:?}");
    let spans = receiver.spans();
    let dev = spans
        .iter()
        .find(|sp| sp.name == "invoke_agent dev")
        .unwrap_or_else(|| panic!("{spans:#?}"));
    assert_eq!(dev.attr("rawko.external"), Some("true"));
    assert_eq!(dev.attr("gen_ai.usage.input_tokens"), Some("1200"));
    assert_eq!(dev.attr("gen_ai.usage.output_tokens"), Some("300"));
    assert!(spans.iter().any(|sp| sp.name == "invoke_agent reviewer"));
}

/// The test-only host tool `HostProbe` reaches an editor like every other tool: a run under
/// `rawko acp` calls it, and the editor is shown the call with the kind the tool gives itself.
#[test]
fn a_registered_host_tool_is_offered_to_an_editor() {
    let s = Setup::new();
    s.agent(
        "prober",
        "name: prober\nsystemPrompt: Probe.\ntools:\n  allowed: [Read, HostProbe]\n\
         transitions: {onSuccess: done}\n",
    );
    s.server.push(scripted_call(
        "HostProbe",
        json!({"text": "from the editor"}),
        0,
    ));
    s.server.push(scripted_call(
        "finish",
        json!({"status": "success", "summary": "Probed."}),
        1,
    ));
    let got = editor_with(
        &s,
        json!({"cwd": s.ws.path(), "prompts": ["Probe."], "permission": "allow"}),
        &["--agent", "prober"],
        &[("RAWKO_TEST_HOST_TOOLS", "1")],
    );
    let p = &got["prompts"][0];
    assert_eq!(p["response"]["result"]["stopReason"], "end_turn", "{got:#}");
    let started = updates_of(p, "tool_call");
    assert_eq!(started.len(), 1, "{p:#}");
    assert_eq!(started[0]["kind"], "think", "{p:#}");
    assert!(
        started[0]["title"].as_str().unwrap().contains("HostProbe"),
        "{p:#}"
    );
    let done = updates_of(p, "tool_call_update");
    assert_eq!(done[0]["status"], "completed", "{p:#}");
    assert!(
        done[0]
            .to_string()
            .contains("probe: from the editor (fs.read)"),
        "{p:#}"
    );
    // The model was offered the tool, and got its answer.
    let asked = s.server.received();
    let first = asked[0].json();
    assert!(
        first["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["function"]["name"] == "HostProbe"),
        "{first:#}"
    );
}
