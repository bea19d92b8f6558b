//! End-to-end runs: each folder under `tests/scenarios/` is a task, the agents it uses, the
//! model's scripted replies and the expected outcome. The real `rawko run` binary takes the task
//! through its agents against the scripted model server on loopback, with the real tools, the
//! real sandbox and a real SQLite store; the test then reads the store through
//! `rawko tasks show --json` and checks what happened, down to the audit log.
//!
//! A scenario folder holds `scenario.yaml` and optionally `workspace/` (copied into the
//! workspace, `.rawko/` included) and `user_agents/` (the user's own agent files). With
//! `project: demo` the workspace starts as the demo's sample project.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::support::model_server::{ModelServer, Reply, openai};
use crate::support::{Run, TEST_KEY, Workspace, copy_dir, rawko};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Scenario {
    task: String,
    #[serde(default)]
    project: Option<String>,
    /// Extra arguments for `rawko run`.
    #[serde(default)]
    args: Vec<String>,
    /// Extra top-level settings for the user's config.yaml (the `scripted` adapter is always
    /// there and is the default).
    #[serde(default)]
    config: Option<String>,
    /// Trust the workspace before the run.
    #[serde(default)]
    trust: bool,
    /// Make the workspace a git repository, its files committed, before the run.
    #[serde(default)]
    git: bool,
    replies: Vec<Step>,
    expect: Expect,
}

/// One scripted model reply.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
enum Step {
    /// Call one tool.
    Call(Call),
    /// Call several tools in one reply.
    Calls(Vec<Call>),
    /// Plain text, no tool call.
    Text(String),
    /// Call `finish`.
    Finish(Value),
    /// An HTTP error from the provider.
    Error { status: u16, message: String },
    /// A reply that takes this long (for timeouts): then text.
    Slow { ms: u64, text: String },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Call {
    name: String,
    #[serde(default)]
    input: Value,
    /// Arguments sent verbatim (not JSON-encoded from `input`), for malformed calls.
    #[serde(default)]
    raw: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Expect {
    exit: i32,
    status: String,
    /// The states the task went through: the first agent, then each transition's target.
    #[serde(default)]
    path: Vec<String>,
    /// Transitions that must appear, as `from -> to (mode)` substrings.
    #[serde(default)]
    transitions: Vec<String>,
    /// Audit entries that must exist (every given field equal; `detail`/`reason` contain).
    #[serde(default)]
    decisions: Vec<DecisionMatch>,
    /// Audit entries that must not exist.
    #[serde(default)]
    no_decisions: Vec<DecisionMatch>,
    /// Files in the workspace and text they must (not) contain.
    #[serde(default)]
    files: Vec<FileMatch>,
    /// Tool calls that must be in the store, with text their output contains.
    #[serde(default)]
    tool_calls: Vec<ToolMatch>,
    /// Text that must appear in the request the model server received (0-based) at index.
    #[serde(default)]
    requests: Vec<RequestMatch>,
    /// Every scripted reply must have been used.
    #[serde(default = "yes")]
    all_replies_used: bool,
    /// The summary contains.
    #[serde(default)]
    summary: Option<String>,
    /// Output tokens the task used, summed over every completion (each scripted tool-call reply
    /// reports 12).
    #[serde(default)]
    output_tokens: Option<i64>,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DecisionMatch {
    #[serde(default)]
    subject: Option<String>,
    #[serde(default)]
    capability: Option<String>,
    #[serde(default)]
    decision: Option<String>,
    #[serde(default)]
    detail: Option<String>,
    #[serde(default)]
    reason: Option<String>,
}

impl DecisionMatch {
    fn matches(&self, d: &Value) -> bool {
        let eq = |want: &Option<String>, key: &str| {
            want.as_ref()
                .is_none_or(|w| d[key].as_str() == Some(w.as_str()))
        };
        let has = |want: &Option<String>, key: &str| {
            want.as_ref()
                .is_none_or(|w| d[key].as_str().is_some_and(|v| v.contains(w.as_str())))
        };
        eq(&self.subject, "subject")
            && eq(&self.capability, "capability")
            && eq(&self.decision, "decision")
            && has(&self.detail, "detail")
            && has(&self.reason, "reason")
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileMatch {
    path: String,
    #[serde(default)]
    contains: Vec<String>,
    #[serde(default)]
    not_contains: Vec<String>,
    #[serde(default)]
    absent: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolMatch {
    tool: String,
    #[serde(default)]
    output_contains: Option<String>,
    #[serde(default)]
    verdict_contains: Option<String>,
    #[serde(default)]
    count: Option<usize>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RequestMatch {
    index: usize,
    contains: String,
}

fn scenarios_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/scenarios")
}

/// The model server's reply for one step. Call ids are numbered by reply.
fn reply(step: &Step, n: usize) -> Reply {
    match step {
        Step::Call(c) => calls_reply(std::slice::from_ref(c), n),
        Step::Calls(cs) => calls_reply(cs, n),
        Step::Text(t) => openai::text(t, 30, 10),
        Step::Finish(input) => calls_reply(
            &[Call {
                name: "finish".into(),
                input: input.clone(),
                raw: None,
            }],
            n,
        ),
        Step::Error { status, message } => openai::error(*status, message),
        Step::Slow { ms, text } => openai::text(text, 1, 1).delay(Duration::from_millis(*ms)),
    }
}

/// The scripted model's reply `n` calling one tool (`finish` included).
pub fn scripted_call(name: &str, input: Value, n: usize) -> Reply {
    calls_reply(
        &[Call {
            name: name.into(),
            input,
            raw: None,
        }],
        n,
    )
}

fn calls_reply(calls: &[Call], n: usize) -> Reply {
    let tool_calls: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, c)| {
            json!({
                "id": format!("call_{n}_{i}"),
                "type": "function",
                "function": {
                    "name": c.name,
                    "arguments": c.raw.clone().unwrap_or_else(|| c.input.to_string()),
                }
            })
        })
        .collect();
    Reply::json(
        200,
        &json!({
            "id": format!("chatcmpl-{n}"),
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": "scripted-model",
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": null, "tool_calls": tool_calls},
                "finish_reason": "tool_calls"
            }],
            "usage": {"prompt_tokens": 40, "completion_tokens": 12, "total_tokens": 52}
        }),
    )
}

/// A workspace set up for `scenario` in `dir`, with the scripted adapter in the user config.
pub struct Prepared {
    pub ws: Workspace,
    pub server: ModelServer,
}

fn prepare(dir: &Path, s: &Scenario) -> Prepared {
    let ws = Workspace::new();
    if let Some(p) = &s.project {
        assert_eq!(p, "demo", "unknown project {p}");
        copy_dir(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("demo/project"),
            ws.path(),
        );
    }
    if dir.join("workspace").is_dir() {
        copy_dir(&dir.join("workspace"), ws.path());
    }
    if s.git {
        let git = |args: &[&str]| {
            let out = std::process::Command::new("git")
                .args(["-c", "user.name=User", "-c", "user.email=user@example.com"])
                .args(args)
                .current_dir(ws.path())
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .output()
                .unwrap();
            assert!(out.status.success(), "git {args:?}: {out:?}");
        };
        git(&["init", "-q", "-b", "main"]);
        // The test's own config and data directories live in the workspace; git ignores them.
        std::fs::write(
            ws.path().join(".git/info/exclude"),
            ".test-config/\n.test-data/\ntarget/\n",
        )
        .unwrap();
        git(&["add", "-A"]);
        git(&["commit", "-q", "-m", "before the task"]);
    }
    let user = ws.config_home().join("rawko");
    std::fs::create_dir_all(&user).unwrap();
    if dir.join("user_agents").is_dir() {
        copy_dir(&dir.join("user_agents"), &user.join("agents"));
    }
    let server = ModelServer::start();
    for (n, step) in s.replies.iter().enumerate() {
        server.push(reply(step, n));
    }
    let mut config = format!(
        "adapters:\n  scripted:\n    plugin: openai\n    model: scripted-model\n    base_url: {}\n    \
         api_key_env: TEST_KEY\n    allow_private_network: true\n    timeout: 30\n",
        server.base_url()
    );
    config.push_str(
        s.config
            .as_deref()
            .unwrap_or("defaults:\n  adapter: scripted\n"),
    );
    std::fs::write(user.join("config.yaml"), config).unwrap();
    Prepared { ws, server }
}

fn rawko_run(p: &Prepared, s: &Scenario, extra: &[&str]) -> Run {
    let mut cmd = rawko(&p.ws);
    cmd.env("TEST_KEY", TEST_KEY).env("NO_COLOR", "1");
    cmd.arg("run").arg("--json").arg("--no-stream");
    if s.trust {
        cmd.arg("--trust");
    }
    cmd.args(&s.args).args(extra).arg(&s.task);
    Run::of(cmd.output().expect("run rawko"))
}

/// The JSON events of a `--json` run.
fn events(r: &Run) -> Vec<Value> {
    r.stdout
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}\n{r:?}")))
        .collect()
}

fn task_id(r: &Run) -> String {
    events(r)
        .iter()
        .find(|e| e["type"] == "task_started")
        .and_then(|e| e["task"].as_str())
        .unwrap_or_else(|| panic!("no task_started event\n{r:?}"))
        .to_string()
}

pub fn show(ws: &Workspace, id: &str) -> Value {
    let r = Run::of(
        rawko(ws)
            .args(["tasks", "show", id, "--json"])
            .output()
            .unwrap(),
    );
    assert_eq!(r.code, 0, "{r:?}");
    r.json()
}

fn check(name: &str, s: &Scenario, p: &Prepared, r: &Run) {
    let e = &s.expect;
    let ctx = |what: &str| format!("scenario {name}: {what}\n{r:?}");
    assert_eq!(r.code, e.exit, "{}", ctx("exit status"));
    let id = task_id(r);
    let shown = show(&p.ws, &id);
    assert_eq!(
        shown["task"]["status"],
        e.status.as_str(),
        "{}",
        ctx("status")
    );
    if let Some(want) = &e.summary {
        let got = shown["task"]["summary"].as_str().unwrap_or("");
        assert!(
            got.contains(want.as_str()),
            "{}",
            ctx(&format!("summary {got:?} lacks {want:?}"))
        );
    }
    if let Some(want) = e.output_tokens {
        assert_eq!(
            shown["usage"]["output_tokens"].as_i64(),
            Some(want),
            "{}",
            ctx("output tokens")
        );
    }
    let transitions = shown["transitions"].as_array().cloned().unwrap_or_default();
    if !e.path.is_empty() {
        let mut path: Vec<String> = Vec::new();
        if let Some(first) = transitions.first() {
            path.push(first["from"].as_str().unwrap_or("").to_string());
        }
        path.extend(
            transitions
                .iter()
                .map(|t| t["to"].as_str().unwrap_or("").to_string()),
        );
        assert_eq!(path, e.path, "{}", ctx("path"));
    }
    for want in &e.transitions {
        let found = transitions.iter().any(|t| {
            format!(
                "{} -> {} ({})",
                t["from"].as_str().unwrap_or(""),
                t["to"].as_str().unwrap_or(""),
                t["mode"].as_str().unwrap_or("")
            )
            .contains(want.as_str())
        });
        assert!(
            found,
            "{}",
            ctx(&format!("no transition {want:?} in {transitions:#?}"))
        );
    }
    let decisions = shown["decisions"].as_array().cloned().unwrap_or_default();
    for want in &e.decisions {
        assert!(
            decisions.iter().any(|d| want.matches(d)),
            "{}",
            ctx(&format!("no decision {want:?} in {decisions:#?}"))
        );
    }
    for unwanted in &e.no_decisions {
        let found: Vec<&Value> = decisions.iter().filter(|d| unwanted.matches(d)).collect();
        assert!(
            found.is_empty(),
            "{}",
            ctx(&format!("unexpected decisions {found:#?}"))
        );
    }
    for f in &e.files {
        let path = p.ws.path().join(&f.path);
        if f.absent {
            assert!(!path.exists(), "{}", ctx(&format!("{} exists", f.path)));
            continue;
        }
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|err| panic!("{}", ctx(&format!("{}: {err}", f.path))));
        for c in &f.contains {
            assert!(
                text.contains(c.as_str()),
                "{}",
                ctx(&format!("{} lacks {c:?}", f.path))
            );
        }
        for c in &f.not_contains {
            assert!(
                !text.contains(c.as_str()),
                "{}",
                ctx(&format!("{} has {c:?}", f.path))
            );
        }
    }
    let calls = shown["tool_calls"].as_array().cloned().unwrap_or_default();
    for want in &e.tool_calls {
        let matching: Vec<&Value> = calls
            .iter()
            .filter(|c| c["tool"] == want.tool.as_str())
            .filter(|c| {
                want.output_contains
                    .as_ref()
                    .is_none_or(|o| c["output"].as_str().unwrap_or("").contains(o.as_str()))
            })
            .filter(|c| {
                want.verdict_contains
                    .as_ref()
                    .is_none_or(|o| c["verdict"].as_str().unwrap_or("").contains(o.as_str()))
            })
            .collect();
        match want.count {
            Some(n) => assert_eq!(
                matching.len(),
                n,
                "{}",
                ctx(&format!("tool calls {want:?} in {calls:#?}"))
            ),
            None => assert!(
                !matching.is_empty(),
                "{}",
                ctx(&format!("no tool call {want:?} in {calls:#?}"))
            ),
        }
    }
    let received = p.server.received();
    for want in &e.requests {
        let body = received
            .get(want.index)
            .map(|r| String::from_utf8_lossy(&r.body).into_owned())
            .unwrap_or_default();
        assert!(
            body.contains(&want.contains),
            "{}",
            ctx(&format!(
                "request {} lacks {:?}: {body}",
                want.index, want.contains
            ))
        );
    }
    if e.all_replies_used {
        assert_eq!(p.server.left(), 0, "{}", ctx("replies left unused"));
    }
}

fn load(name: &str) -> (PathBuf, Scenario) {
    let dir = scenarios_dir().join(name);
    let text = std::fs::read_to_string(dir.join("scenario.yaml"))
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    // Through JSON's data model, so enums are written as maps rather than YAML tags.
    let value: Value = yaml_serde::from_str(&text)
        .unwrap_or_else(|e| panic!("{}/scenario.yaml: {e}", dir.display()));
    let s: Scenario = serde_json::from_value(value)
        .unwrap_or_else(|e| panic!("{}/scenario.yaml: {e}", dir.display()));
    (dir, s)
}

fn scenario(name: &str) {
    let (dir, s) = load(name);
    let p = prepare(&dir, &s);
    let r = rawko_run(&p, &s, &[]);
    check(name, &s, &p, &r);
    // The store a finished run leaves is whole.
    let db = crate::support::store_path(&p.ws);
    let conn = rusqlite::Connection::open(&db).unwrap();
    let ok: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(ok, "ok");
}

macro_rules! scenarios {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                scenario(stringify!($name));
            }
        )*

        /// Every folder has its test, so a new scenario cannot be silently skipped.
        #[test]
        fn every_scenario_folder_is_run() {
            let listed = [$(stringify!($name)),*];
            for entry in std::fs::read_dir(scenarios_dir()).unwrap() {
                let name = entry.unwrap().file_name().to_string_lossy().into_owned();
                assert!(listed.contains(&name.as_str()), "scenario {name} has no test");
            }
        }
    };
}

scenarios!(
    happy_path,
    tester_failure_back_to_developer,
    tester_failure_to_debugger_and_back,
    max_iterations,
    timeout,
    blocked_tool,
    arbiter_non_allowed_target,
    prompt_injection,
    schema_invalid_then_corrected,
    schema_invalid_twice_fails,
    escalation,
    untrusted_workspace_agent,
    trusted_workspace_agent,
    agents_as_tools,
    untrusted_agent_calls_builtin,
    untrusted_agent_transitions_to_builtin,
    task_tmp,
    mcp_tool,
);

/// Writes `host/rawko/demo/recording.jsonl` from the happy-path scenario: run it when the built-in
/// agents, the engine's prompts or the demo's task change (`cargo test -p rawko --test
/// integration -- --ignored record_demo`).
#[test]
#[ignore]
fn record_demo() {
    let (dir, s) = load("happy_path");
    assert_eq!(
        s.task,
        rawko::demo::TASK,
        "the happy path must be the demo's task"
    );
    let p = prepare(&dir, &s);
    let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("demo/recording.jsonl");
    let r = rawko_run(&p, &s, &["--record", out.to_str().unwrap()]);
    check("happy_path", &s, &p, &r);
}

/// A run that cannot start (no adapter, an unknown agent, a missing key) is bad input, says
/// what to do, and leaves no task store behind.
#[test]
fn a_run_that_cannot_start_is_bad_input_and_leaves_nothing() {
    let ws = Workspace::new();
    for (args, says) in [
        (vec!["run", "x"], "pass --adapter NAME"),
        (
            vec!["run", "--agent", "nobody", "x"],
            "no agent named 'nobody'",
        ),
        (
            vec!["run", "--adapter", "anthropic", "x"],
            "ANTHROPIC_API_KEY",
        ),
        (vec!["run", "--max-steps", "0", "x"], "--max-steps"),
        (vec!["run", "  "], "the task is empty"),
    ] {
        let r = Run::of(
            rawko(&ws)
                .env_remove("ANTHROPIC_API_KEY")
                .args(&args)
                .output()
                .unwrap(),
        );
        assert_eq!(r.code, 2, "{args:?}: {r:?}");
        assert!(r.stderr.contains(says), "{args:?}: {r:?}");
        assert!(!ws.path().join(".rawko").exists(), "{args:?} left .rawko/");
    }
}

/// Every text in a task store may be model output:
/// `rawko tasks list` and `tasks show` must not let escape sequences in it reach the terminal.
#[test]
fn a_hostile_task_store_cannot_write_escape_sequences_to_the_terminal() {
    let ws = Workspace::new();
    let evil = "fix it\u{1b}]0;pwned\u{7}\u{1b}[2J\u{1b}[31mALL TESTS PASSED";
    {
        let store = rawko_store::TaskStore::open(&crate::support::store_path(&ws)).unwrap();
        let id = store.create_task(evil, "planner", &json!({})).unwrap();
        let turn = store.start_turn(&id, "planner", None).unwrap();
        store.end_turn(turn, "succeeded", evil, None).unwrap();
        store
            .finish_task(&id, rawko_store::TaskStatus::Done, evil)
            .unwrap();
    }
    let list = Run::of(rawko(&ws).args(["tasks", "list"]).output().unwrap());
    assert_eq!(list.code, 0, "{list:?}");
    let id = list
        .stdout
        .lines()
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    let show = Run::of(rawko(&ws).args(["tasks", "show", &id]).output().unwrap());
    assert_eq!(show.code, 0, "{show:?}");
    for r in [&list, &show] {
        assert!(
            !r.stdout.contains('\u{1b}') && !r.stdout.contains('\u{7}'),
            "{r:?}"
        );
        assert!(r.stdout.contains("\\u{1b}"), "shown escaped: {r:?}");
    }
}
