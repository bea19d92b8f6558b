//! Helpers shared by the integration tests.

#![allow(dead_code)]

pub mod mcp_http;
pub mod model_server;
pub mod otlp;
pub mod services;
pub mod store;
pub mod temporal;
pub mod tls;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use rawko_adapters::instance::{AdapterOrigin, InstalledAdapters, Trust, resolve};
use rawko_adapters::{Adapter, OpenOptions};
use rawko_capability::http::HttpPolicy;
use rawko_config::AdapterConfig;
use rawko_runtime::Runtime;

/// Compiled plugins, shared by every test (and every test run) so each component is compiled
/// once rather than once per test.
pub fn cache_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("plugin-cache")
}

/// A current-thread async runtime with timers and network I/O, as the CLI uses.
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
        .block_on(f)
}

/// A temporary workspace directory, removed on drop.
pub struct Workspace {
    /// Its database, when the tests run on PostgreSQL ([`store`]); dropped before the folder.
    pg: Option<store::PgDb>,
    dir: tempfile::TempDir,
    root: PathBuf,
}

impl Workspace {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().canonicalize().expect("canonical tempdir");
        let pg = store::on_postgres()
            .then(store::server_url)
            .flatten()
            .map(|url| store::PgDb::new(&url));
        Workspace { pg, dir, root }
    }

    /// The workspace's database, when the tests run on PostgreSQL.
    pub fn pg(&self) -> Option<&store::PgDb> {
        self.pg.as_ref()
    }

    /// The workspace root, canonical.
    pub fn path(&self) -> &Path {
        &self.root
    }

    /// Write `content` to `rel`, creating parent directories.
    pub fn write(&self, rel: &str, content: impl AsRef<[u8]>) -> PathBuf {
        let p = self.root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, content).unwrap();
        p
    }

    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.root.join(rel)).unwrap()
    }

    /// What the binary gets as `$XDG_CONFIG_HOME`: the user's agents are in
    /// `<config_home>/rawko/agents`.
    pub fn config_home(&self) -> PathBuf {
        self.root.join(".test-config")
    }
}

/// The agent files used as reference examples, one per dialect.
pub fn agent_fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/agents")
}

/// Copy a directory tree (fixtures into a workspace).
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// The `rawko` binary the tests run: this build's, or the one `RAWKO_TEST_BIN` names, so that
/// the same tests (the kernel sandbox's attacks among them) can be run against a published build,
/// such as the static musl binary with its `rawko-sandbox` beside it.
pub fn rawko_bin() -> std::path::PathBuf {
    std::env::var_os("RAWKO_TEST_BIN")
        .map_or_else(|| env!("CARGO_BIN_EXE_rawko").into(), Into::into)
}

/// The `rawko` binary, run in `ws` with private data and config directories (so the user's own
/// agents and config never leak in) and the shared plugin cache.
pub fn rawko(ws: &Workspace) -> Command {
    let mut cmd = Command::new(rawko_bin());
    cmd.current_dir(ws.path())
        .env("RAWKO_CACHE_DIR", cache_dir())
        .env("RAWKO_DATA_DIR", ws.path().join(".test-data"))
        .env("XDG_CONFIG_HOME", ws.config_home())
        .env_remove("RAWKO_LOG")
        .env_remove("RAWKO_STORE_URL");
    if let Some(db) = ws.pg() {
        cmd.env("RAWKO_STORE_URL", db.url());
    }
    cmd
}

/// Where the binary run by [`rawko`] keeps `ws`'s task store: the state directory under the
/// private data directory.
pub fn store_path(ws: &Workspace) -> PathBuf {
    rawko_store::path_for(&ws.path().join(".test-data/state"), ws.path())
}

/// The result of running the binary, with readable accessors.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn of(out: Output) -> Run {
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}):\n{}\nstderr:\n{}",
                self.stdout, self.stderr
            )
        })
    }
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {}\n--- stdout\n{}\n--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// The task id in the first event a `rawko run --json` started as `child` (stdout piped)
/// prints: the task it started, known before it ends.
pub fn first_task_id(child: &mut std::process::Child) -> String {
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.as_mut().expect("stdout piped")),
        &mut line,
    )
    .expect("read the first event");
    let event: serde_json::Value =
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
    event["task"].as_str().expect("a task id").to_string()
}

/// `cmd` (the binary, with its environment) running `rawko run --agent worker --json
/// --no-stream ARGS...` with the adapter's key, stdin closed and its output piped, and the
/// task's id from its first event.
pub fn start_worker(mut cmd: Command, args: &[&str]) -> (std::process::Child, String) {
    let mut child = cmd
        .env("TEST_KEY", TEST_KEY)
        .args(["run", "--agent", "worker", "--json", "--no-stream"])
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run rawko");
    let id = first_task_id(&mut child);
    (child, id)
}

/// Run `rawko args...` in `ws`.
pub fn run(ws: &Workspace, args: &[&str]) -> Run {
    Run::of(rawko(ws).args(args).output().expect("run rawko"))
}

/// The API key the adapter tests use; it must never show up anywhere but the model server.
pub const TEST_KEY: &str = "sk-test-4f1c9e0b7a2d4c68";

/// A retry policy for tests: the same rules, millisecond backoffs.
pub fn fast_policy() -> HttpPolicy {
    HttpPolicy {
        backoff_base: std::time::Duration::from_millis(5),
        backoff_max: std::time::Duration::from_millis(20),
        timeout: std::time::Duration::from_secs(10),
        ..HttpPolicy::default()
    }
}

/// Open built-in adapter `plugin` against `base_url` (a loopback server, so private addresses
/// are allowed), with `TEST_KEY` as its credential.
pub fn open_adapter(rt: &Runtime, plugin: &str, base_url: &str, policy: HttpPolicy) -> Adapter {
    let cfg = AdapterConfig {
        plugin: plugin.into(),
        model: Some("test-model".into()),
        base_url: Some(base_url.into()),
        api_key_env: Some("TEST_KEY".into()),
        allow_private_network: true,
        ..AdapterConfig::default()
    };
    let instance = resolve(
        "test",
        &cfg,
        &AdapterOrigin::Builtin,
        None,
        Trust::Trusted,
        &InstalledAdapters::none(),
    )
    .expect("instance");
    let env = |k: &str| (k == "TEST_KEY").then(|| TEST_KEY.to_string());
    let options = OpenOptions {
        policy: Some(policy),
        ..OpenOptions::default()
    };
    block_on(Adapter::open(rt, instance, &env, options)).expect("open adapter")
}

/// Processes whose command line contains `needle`.
pub fn processes_with(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(cmdline) = std::fs::read(e.path().join("cmdline")) {
            let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if text.contains(needle) {
                found.push(text);
            }
        }
    }
    found
}

/// An agent `worker` that works in steps with `Bash` only, allowed `echo` and `sleep`.
pub const STEP_AGENT: &str = "name: worker
whenToUse: Does the work in steps.
systemPrompt: You work in steps.
tools:
  allowed: [Bash]
  bashFilter:
    allowedCommands: [\"echo *\", \"sleep *\"]
transitions:
  onSuccess: done
  onFailure: failed
";

/// A user config whose default adapter is a `scripted` instance of the OpenAI adapter talking
/// to the model server at `base_url`, its key in `TEST_KEY`.
pub fn scripted_config(base_url: &str) -> String {
    format!(
        "adapters:\n  scripted:\n    plugin: openai\n    model: m\n    base_url: {base_url}\n    \
         api_key_env: TEST_KEY\n    allow_private_network: true\n    timeout: 60\n\
         defaults:\n  adapter: scripted\n"
    )
}

/// A workspace whose user config has a `worker` agent (done on success, failed on failure) and a
/// `scripted` adapter instance talking to a new scripted model server, with `extra` appended to
/// the config; the key is read from `TEST_KEY`.
pub fn scripted_worker(extra: &str) -> (Workspace, model_server::ModelServer) {
    let ws = Workspace::new();
    let user = ws.config_home().join("rawko");
    std::fs::create_dir_all(user.join("agents")).unwrap();
    std::fs::write(
        user.join("agents/worker.yaml"),
        "name: worker\nwhenToUse: Does the work.\nsystemPrompt: You work.\n\
         transitions:\n  onSuccess: done\n  onFailure: failed\n",
    )
    .unwrap();
    let server = model_server::ModelServer::start();
    std::fs::write(
        user.join("config.yaml"),
        scripted_config(&server.base_url()) + extra,
    )
    .unwrap();
    (ws, server)
}

/// A task that reads a file, then waits `finish_after` for the model's last answer: its
/// workspace, the model server, the running `rawko run` and the task's id.
pub fn running_task(
    finish_after: std::time::Duration,
) -> (
    Workspace,
    model_server::ModelServer,
    std::process::Child,
    String,
) {
    let (ws, server) = scripted_worker("");
    ws.write("a.txt", "hello\n");
    server.push(model_server::openai::tool_call(
        "c0",
        "Read",
        &serde_json::json!({"path": "a.txt"}),
    ));
    server.push(
        model_server::openai::tool_call(
            "c1",
            "finish",
            &serde_json::json!({"status": "success", "summary": "read it"}),
        )
        .delay(finish_after),
    );
    let (run, id) = start_worker(rawko(&ws), &["read a.txt"]);
    (ws, server, run, id)
}

/// The demo's task, kept in a workspace of its own; removed when dropped.
pub struct DemoTask {
    pub workspace: std::path::PathBuf,
    pub id: String,
}

impl Drop for DemoTask {
    fn drop(&mut self) {
        if let Some(dir) = self.workspace.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// `rawko demo --keep` run with `data`'s directories: the demo's task, in the store those name.
pub fn demo_task(data: &Workspace) -> DemoTask {
    let r = Run::of(rawko(data).args(["demo", "--keep", "-q"]).output().unwrap());
    assert_eq!(r.code, 0, "{r:?}");
    // "the demo workspace is kept at DIR (try `rawko --workspace DIR tasks show ID`)"
    let line = r
        .stdout
        .lines()
        .chain(r.stderr.lines())
        .find(|l| l.starts_with("the demo workspace is kept at "))
        .unwrap_or_else(|| panic!("{r:?}"));
    let workspace = line["the demo workspace is kept at ".len()..]
        .split(" (")
        .next()
        .unwrap()
        .into();
    let id = line
        .rsplit("tasks show ")
        .next()
        .unwrap()
        .trim_end_matches(['`', ')'])
        .to_string();
    DemoTask { workspace, id }
}
