//! rawko's own costs in one table: each figure beside its native or subprocess reference,
//! measured in the same run, with the ratio and the target it is held to.
//!
//! ```sh
//! cargo bench -p rawko --bench table
//! RAWKO_BENCH_TREE=/some/source/tree cargo bench -p rawko --bench table
//! cargo bench -p rawko --bench table -- read search   # only these groups of rows
//! ```
//!
//! The search rows walk `RAWKO_BENCH_TREE`, by default the crate sources in
//! `~/.cargo/registry/src`, and compare with ripgrep (`rg -j1`, one thread, the same walk
//! settings as Grep) when it is installed. Under `cargo test --benches` (no `--bench` argument)
//! every row runs once on small inputs; CI runs it so, so the benchmark itself stays tested.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rawko_agents::registry::{Registry, SearchPath};
use rawko_capability::{Access, FsGrants};
use rawko_fsm::session::{SessionTools, tool_budget};
use rawko_runtime::tool::CallContext;
use rawko_runtime::{Budget, Runtime, ToolPlugin};
use rawko_shell::verdict::Decision;
use rawko_shell::{Policy, Resolver};
use rawko_toolset::ToolSet;
use rawko_toolset::chain::Chain;

#[path = "common/agent_files.rs"]
mod agent_files;
#[path = "common/steps.rs"]
mod steps;

/// How a row's two figures compare.
#[derive(Clone, Copy)]
enum Kind {
    /// Times: the ratio is rawko's time over the reference's (lower is better).
    Time,
    /// Throughput over this many bytes: the ratio is rawko's share of the reference's.
    Throughput(u64),
}

/// What a row must meet.
#[derive(Clone, Copy)]
enum Target {
    /// rawko's time at most this many times the reference's.
    RatioAtMost(f64),
    /// rawko's throughput at least this share of the reference's.
    ShareAtLeast(f64),
    /// rawko's time under this, whatever the reference.
    Under(Duration),
    /// rawko's time beyond the reference's under this.
    ExtraUnder(Duration),
    /// None: the row is for scale.
    Scale,
}

struct Row {
    figure: String,
    ours: Duration,
    reference: String,
    theirs: Option<Duration>,
    kind: Kind,
    target: Target,
}

impl Row {
    fn ratio(&self) -> Option<f64> {
        let theirs = self.theirs?.as_secs_f64();
        let ours = self.ours.as_secs_f64();
        Some(match self.kind {
            Kind::Time => ours / theirs,
            Kind::Throughput(_) => theirs / ours,
        })
    }

    fn met(&self) -> Option<bool> {
        Some(match self.target {
            Target::RatioAtMost(r) => self.ratio()? <= r,
            Target::ShareAtLeast(s) => self.ratio()? >= s,
            Target::Under(d) => self.ours < d,
            Target::ExtraUnder(d) => self.ours.saturating_sub(self.theirs?) < d,
            Target::Scale => return None,
        })
    }

    fn show(&self, d: Duration) -> String {
        match self.kind {
            Kind::Time => time(d),
            Kind::Throughput(bytes) => {
                format!("{:.0} MB/s", bytes as f64 / d.as_secs_f64() / 1e6)
            }
        }
    }
}

fn time(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 1.0 {
        format!("{s:.2} s")
    } else if s >= 1e-3 {
        format!("{:.2} ms", s * 1e3)
    } else {
        format!("{:.1} µs", s * 1e6)
    }
}

/// The median of `samples` runs of `f`, after one run to warm caches.
fn median(samples: usize, mut f: impl FnMut()) -> Duration {
    f();
    let mut d: Vec<Duration> = (0..samples.max(1))
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    d.sort();
    d[d.len() / 2]
}

/// Run a command to the end, its output read and dropped; panics when it fails (exit 1 is
/// ripgrep's "no match").
fn spawn(cmd: &mut Command) {
    let out = cmd.stdin(Stdio::null()).output().expect("spawn");
    assert!(
        out.status.code().is_some_and(|c| c <= 1),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

struct Bench {
    full: bool,
    tokio: tokio::runtime::Runtime,
    rt: std::rc::Rc<Runtime>,
    tools: ToolPlugin,
    dir: tempfile::TempDir,
    rows: Vec<Row>,
    /// Starting `/bin/true`: the subprocess reference of several rows, measured once.
    spawn_true: Duration,
}

impl Bench {
    /// Samples for a row: many for quick figures, few for slow ones, one under `cargo test`.
    fn samples(&self, full: usize) -> usize {
        if self.full { full } else { 1 }
    }

    fn call(&self, tool: &ToolPlugin, name: &str, input: &str, root: &Path, output: u64) {
        let mut g = FsGrants::none();
        g.grant(root, root, Access::ReadOnly).unwrap();
        let cx = CallContext {
            workspace: root,
            grants: &g,
            budget: Budget {
                output,
                timeout: Duration::from_secs(600),
                ..Budget::default()
            },
        };
        let out = self
            .tokio
            .block_on(tool.call(&self.rt, name, input, &cx))
            .unwrap()
            .content;
        // The notice of a cut comes last; looking for it in the whole output would time the
        // bench, not the tool.
        let end = &out[out.floor_char_boundary(out.len().saturating_sub(512))..];
        assert!(
            !end.contains("[results cut") && !end.contains("[showing"),
            "{name} was cut short, so it did less than its reference: pick a rarer pattern"
        );
    }
}

fn native_cx(root: &Path, output: u64) -> rawko_tools::Context {
    rawko_tools::Context::new(
        root,
        vec![rawko_tools::Grant {
            path: root.to_path_buf(),
            access: rawko_tools::Access::ReadOnly,
        }],
        output as usize,
    )
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    // Words after `--` pick groups of rows by name (`cargo bench -p rawko --bench table -- read
    // search`); none picks every row.
    let picked: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let wanted = |group: &str| picked.is_empty() || picked.iter().any(|p| p == group);
    let groups: [(&str, Rows); 9] = [
        ("read", |b, _| read_rows(b)),
        ("search", |b, _| search_rows(b)),
        ("call", |b, _| call_rows(b)),
        ("step", |b, _| step_rows(b)),
        ("verdict", |b, _| verdict_rows(b)),
        ("discovery", |b, _| discovery_rows(b)),
        ("cli", cli_rows),
        ("mcp", mcp_rows),
        ("acp", acp_rows),
    ];
    if let Some(unknown) = picked
        .iter()
        .find(|p| !groups.iter().any(|(name, _)| name == p))
    {
        let names: Vec<&str> = groups.iter().map(|(name, _)| *name).collect();
        eprintln!(
            "no row group `{unknown}`; the groups are {}",
            names.join(", ")
        );
        std::process::exit(2);
    }
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let cache = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("plugin-cache");
    let rt = std::rc::Rc::new(Runtime::new(Some(cache.clone())).unwrap());
    let tools = tokio
        .block_on(ToolPlugin::load(
            &rt,
            rawko_builtins::TOOLS.name,
            rawko_builtins::TOOLS.wasm,
        ))
        .unwrap();
    let mut b = Bench {
        full,
        tokio,
        rt,
        tools,
        dir: tempfile::tempdir().unwrap(),
        rows: Vec::new(),
        spawn_true: Duration::ZERO,
    };
    b.spawn_true = median(b.samples(200), || spawn(&mut Command::new("/bin/true")));

    for (name, rows) in groups {
        if wanted(name) {
            rows(&mut b, &cache);
        }
    }
    print(&b.rows);
}

/// A group of rows: what it measures, given the plugin cache.
type Rows = fn(&mut Bench, &Path);

/// `Read` of a large file, every line numbered, against the same code compiled natively.
fn read_rows(b: &mut Bench) {
    let root = b.dir.path().join("read").canonicalize_mkdir();
    let size: u64 = if b.full { 10 << 20 } else { 1 << 20 };
    let line = format!("{}\n", "x".repeat(79));
    std::fs::write(root.join("big.txt"), line.repeat((size / 80) as usize)).unwrap();
    let input = r#"{"path":"big.txt","limit":100000000}"#;
    let output = 64 << 20;
    let ours = median(b.samples(20), || {
        b.call(&b.tools, "Read", input, &root, output)
    });
    let cx = native_cx(&root, output);
    let parsed: rawko_tools::read::ReadInput = serde_json::from_str(input).unwrap();
    let native = median(b.samples(20), || {
        rawko_tools::read::read(&parsed, &cx).unwrap();
    });
    let mib = size >> 20;
    b.rows.push(Row {
        figure: format!("Read, {mib} MiB file, all lines (throughput)"),
        ours,
        reference: "same Read code, native".into(),
        theirs: Some(native),
        kind: Kind::Throughput(size),
        target: Target::ShareAtLeast(0.5),
    });
    let path = root.join("big.txt");
    let plain = median(b.samples(20), || {
        std::fs::read(&path).unwrap();
    });
    b.rows.push(Row {
        figure: format!("Read, {mib} MiB file, all lines (throughput)"),
        ours,
        reference: "std::fs::read, no numbering".into(),
        theirs: Some(plain),
        kind: Kind::Throughput(size),
        target: Target::Scale,
    });
}

/// The tree the search rows walk.
fn search_tree(b: &Bench) -> PathBuf {
    if b.full {
        let tree = match std::env::var_os("RAWKO_BENCH_TREE") {
            Some(p) => Some(PathBuf::from(p)),
            None => std::env::home_dir().map(|h| h.join(".cargo/registry/src")),
        };
        if let Some(t) = tree.and_then(|t| t.canonicalize().ok()) {
            return t;
        }
    }
    // A small generated tree: enough to run every row.
    let root = b.dir.path().join("tree").canonicalize_mkdir();
    for i in 0..200 {
        let dir = root.join(format!("m{}", i % 10));
        std::fs::create_dir_all(&dir).unwrap();
        let body: String = (0..100)
            .map(|l| format!("fn f{i}_{l}(x: u32) -> u32 {{ x + {l} }} // todo\n"))
            .collect();
        std::fs::write(dir.join(format!("f{i}.rs")), body).unwrap();
    }
    std::fs::write(
        root.join("m1/extra_unchecked.rs"),
        "fn get_unchecked() {}\n",
    )
    .unwrap();
    std::fs::write(root.join("m2/build.rs"), "fn main() {}\n").unwrap();
    std::fs::write(root.join("m3/notes.md"), "FixMe(later): one\n").unwrap();
    root
}

/// What a tree holds, for the table's heading.
fn describe(tree: &Path) -> String {
    let (mut files, mut bytes) = (0u64, 0u64);
    for e in ignore::WalkBuilder::new(tree)
        .hidden(false)
        .require_git(false)
        .build()
        .flatten()
    {
        if e.file_type().is_some_and(|t| t.is_file()) {
            files += 1;
            bytes += e.metadata().map(|m| m.len()).unwrap_or(0);
        }
    }
    format!(
        "{} ({files} files, {} MB searched)",
        tree.display(),
        bytes / 1_000_000
    )
}

/// Grep and Glob over a source tree, against ripgrep and against the same code natively.
fn search_rows(b: &mut Bench) {
    let tree = search_tree(b);
    println!("search tree: {}", describe(&tree));
    let rg_available = Command::new("rg").arg("--version").output().is_ok();
    let cases: [(&str, &str, &[&str]); 3] = [
        (
            "literal, files",
            r#"{"pattern":"get_unchecked","output_mode":"files_with_matches"}"#,
            &["-l", "get_unchecked"],
        ),
        (
            "regex, counts",
            r#"{"pattern":"fn\\s+[a-z_]+_unchecked","output_mode":"count"}"#,
            &["-c", r"fn\s+[a-z_]+_unchecked"],
        ),
        (
            "case-insensitive, lines",
            r#"{"pattern":"fixme\\(","output_mode":"content","case_insensitive":true}"#,
            &["-n", "-i", r"fixme\("],
        ),
    ];
    let output = 16 << 20;
    for (what, input, rg_args) in cases {
        let ours = median(b.samples(5), || {
            b.call(&b.tools, "Grep", input, &tree, output)
        });
        let rg = rg_available.then(|| {
            median(b.samples(5), || {
                spawn(
                    Command::new("rg")
                        .args([
                            "--no-config",
                            "-j1",
                            "--hidden",
                            "--no-require-git",
                            "--no-ignore-global",
                            "--no-ignore-exclude",
                            "--glob",
                            "!.git",
                            "--no-heading",
                            "--with-filename",
                            "--color",
                            "never",
                        ])
                        .args(rg_args)
                        .current_dir(&tree),
                )
            })
        });
        b.rows.push(Row {
            figure: format!("Grep, {what}"),
            ours,
            reference: if rg_available {
                "rg -j1, subprocess".into()
            } else {
                "rg -j1 (not installed)".into()
            },
            theirs: rg,
            kind: Kind::Time,
            target: Target::RatioAtMost(2.0),
        });
        let cx = native_cx(&tree, output);
        let parsed: rawko_tools::grep::GrepInput = serde_json::from_str(input).unwrap();
        let native = median(b.samples(5), || {
            rawko_tools::grep::grep(&parsed, &cx).unwrap();
        });
        b.rows.push(Row {
            figure: format!("Grep, {what}"),
            ours,
            reference: "same Grep code, native".into(),
            theirs: Some(native),
            kind: Kind::Time,
            target: Target::RatioAtMost(1.5),
        });
    }

    let input = r#"{"pattern":"**/build.rs"}"#;
    let ours = median(b.samples(5), || {
        b.call(&b.tools, "Glob", input, &tree, output)
    });
    let cx = native_cx(&tree, output);
    let parsed: rawko_tools::glob::GlobInput = serde_json::from_str(input).unwrap();
    let native = median(b.samples(5), || {
        rawko_tools::glob::glob(&parsed, &cx).unwrap();
    });
    b.rows.push(Row {
        figure: "Glob, **/build.rs".into(),
        ours,
        reference: "same Glob code, native".into(),
        theirs: Some(native),
        kind: Kind::Time,
        target: Target::RatioAtMost(1.5),
    });
}

/// A trivial tool call in a fresh sandbox against starting a process.
fn call_rows(b: &mut Bench) {
    let wasm = std::fs::read(rawko_test_artifacts::HOSTILE_TOOL).unwrap();
    let noop = b
        .tokio
        .block_on(ToolPlugin::load(&b.rt, "hostile", &wasm))
        .unwrap();
    let root = b.dir.path().canonicalize().unwrap();
    let ours = median(b.samples(2000), || {
        b.call(&noop, "Noop", "{}", &root, 1 << 20)
    });
    b.rows.push(Row {
        figure: "tool call, fresh wasm instance".into(),
        ours,
        reference: "spawn /bin/true".into(),
        theirs: Some(b.spawn_true),
        kind: Kind::Time,
        target: Target::RatioAtMost(1.0),
    });
}

/// Host time per agent step with everything committed to SQLite, model time excluded.
fn step_rows(b: &mut Bench) {
    let ws = b.dir.path().join("steps-ws").canonicalize_mkdir();
    std::fs::write(ws.join("Cargo.toml"), "[package]\n").unwrap();
    let n = if b.full { steps::STEPS } else { 10 };
    let tools = b.tokio.block_on(async {
        SessionTools::new(
            b.rt.clone(),
            ws.clone(),
            ToolSet::builtin(&b.rt).await.unwrap(),
            Chain::load(&b.rt, &[]).await.unwrap(),
            true,
            tool_budget(),
            rawko_shell::exec::Launch::Unconfined { reaper: None },
        )
        .unwrap()
    });
    let store_dir = b.dir.path().join("steps-store").canonicalize_mkdir();
    let mut d = b.tokio.block_on(steps::steps(&tools, &store_dir, n));
    d.sort();
    let ours = d[d.len() / 2];
    b.rows.push(Row {
        figure: "agent step, sandboxed LS + SQLite (median)".into(),
        ours,
        reference: "spawn /bin/true".into(),
        theirs: Some(b.spawn_true),
        kind: Kind::Time,
        target: Target::Under(Duration::from_millis(1)),
    });
}

/// The Bash tool's whole check of a command line: parse, resolve, the policy plugin's verdict.
fn verdict_rows(b: &mut Bench) {
    let root = b.dir.path().join("verdict").canonicalize_mkdir();
    std::fs::create_dir(root.join("src")).unwrap();
    let chain = b.tokio.block_on(Chain::load(&b.rt, &[])).unwrap();
    let mut grants = FsGrants::none();
    grants.grant(&root, &root, Access::ReadOnly).unwrap();
    let policy = Policy::new(
        &root,
        &grants,
        ["git *", "grep", "head"].map(String::from).to_vec(),
        vec![r"rm\s+-rf\s+/".into()],
    )
    .unwrap();
    let resolver = Resolver::from_env(&[&root]);
    let line = "git log --oneline -20 | grep -v wip | head -5";
    let ours = median(b.samples(2000), || {
        let r = b
            .tokio
            .block_on(chain.check(&b.rt, line, &policy, &resolver));
        assert_eq!(r.decision, Decision::Allow);
    });
    b.rows.push(Row {
        figure: "bash filter verdict, 3-stage pipeline".into(),
        ours,
        reference: "spawn /bin/true".into(),
        theirs: Some(b.spawn_true),
        kind: Kind::Time,
        target: Target::Under(Duration::from_micros(100)),
    });
}

/// Discovering, parsing and validating 1,000 agent files against only reading them.
fn discovery_rows(b: &mut Bench) {
    let root = b.dir.path().join("agents").canonicalize_mkdir();
    agent_files::write(&root);
    let search = SearchPath::standard(&root, &root.join("no-user-config"));
    let ours = median(b.samples(20), || {
        let r = Registry::load(&search);
        assert!(!r.has_errors());
    });
    let agents = root.join(".rawko/agents");
    let native = median(b.samples(20), || {
        fn read_all(dir: &Path) {
            for e in std::fs::read_dir(dir).unwrap().flatten() {
                let p = e.path();
                if e.file_type().unwrap().is_dir() {
                    read_all(&p);
                } else {
                    std::fs::read(&p).unwrap();
                }
            }
        }
        read_all(&agents);
    });
    b.rows.push(Row {
        figure: format!("agent discovery, {} files", agent_files::FILES),
        ours,
        reference: "read the same files".into(),
        theirs: Some(native),
        kind: Kind::Time,
        target: Target::Under(Duration::from_millis(200)),
    });
}

/// `rawko tools list` as a user runs it, components cached, against the binary doing nothing.
fn cli_rows(b: &mut Bench, cache: &Path) {
    let root = b.dir.path().join("cli").canonicalize_mkdir();
    let rawko = |args: &[&str]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_rawko"));
        c.args(args)
            .current_dir(&root)
            .env("RAWKO_CACHE_DIR", cache)
            .env("RAWKO_DATA_DIR", root.join("data"))
            .env("XDG_CONFIG_HOME", root.join("config"));
        c
    };
    let ours = median(b.samples(20), || spawn(&mut rawko(&["tools", "list"])));
    let version = median(b.samples(20), || spawn(&mut rawko(&["--version"])));
    b.rows.push(Row {
        figure: "rawko tools list, warm cache (wall)".into(),
        ours,
        reference: "rawko --version".into(),
        theirs: Some(version),
        kind: Kind::Time,
        target: Target::Under(Duration::from_millis(30)),
    });
}

/// One tool call through `rawko mcp serve` over stdio, as an MCP client makes it (a JSON-RPC
/// round trip through the pipes), against the same call made in process.
fn mcp_rows(b: &mut Bench, cache: &Path) {
    use std::io::{BufRead, BufReader, Write};
    let root = b.dir.path().join("mcp").canonicalize_mkdir();
    std::fs::write(root.join("a.txt"), "a\n").unwrap();
    let mut server = Command::new(env!("CARGO_BIN_EXE_rawko"))
        .args(["mcp", "serve"])
        .current_dir(&root)
        .env("RAWKO_CACHE_DIR", cache)
        .env("RAWKO_DATA_DIR", root.join("data"))
        .env("XDG_CONFIG_HOME", root.join("config"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut to = server.stdin.take().unwrap();
    let mut from = BufReader::new(server.stdout.take().unwrap());
    let mut id = 0;
    let mut request = |method: &str, params: serde_json::Value| -> serde_json::Value {
        if method.starts_with("notifications/") {
            let msg = serde_json::json!({"jsonrpc": "2.0", "method": method});
            writeln!(to, "{msg}").unwrap();
            return serde_json::Value::Null;
        }
        id += 1;
        let msg =
            serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(to, "{msg}").unwrap();
        let mut line = String::new();
        loop {
            line.clear();
            assert!(from.read_line(&mut line).unwrap() > 0, "the server quit");
            let v: serde_json::Value = serde_json::from_str(&line).unwrap();
            if v["id"] == id {
                return v;
            }
        }
    };
    request(
        "initialize",
        serde_json::json!({"protocolVersion": "2025-06-18", "capabilities": {},
                           "clientInfo": {"name": "bench", "version": "1"}}),
    );
    request("notifications/initialized", serde_json::Value::Null);
    let params = serde_json::json!({"name": "LS", "arguments": {}});
    let ours = median(b.samples(500), || {
        let r = request("tools/call", params.clone());
        assert!(
            r["result"]["content"][0]["text"]
                .as_str()
                .is_some_and(|t| t.contains("a.txt")),
            "{r}"
        );
    });
    let _ = server.kill();
    let _ = server.wait();
    let theirs = median(b.samples(500), || {
        b.call(&b.tools, "LS", "{}", &root, 1 << 20)
    });
    b.rows.push(Row {
        figure: "LS via rawko mcp serve (stdio round trip)".into(),
        ours,
        reference: "the same LS call in process".into(),
        theirs: Some(theirs),
        kind: Kind::Time,
        target: Target::ExtraUnder(Duration::from_millis(1)),
    });
}

/// An external ACP agent's `fs/read_text_file` of a small file, served by `rawko run` through the
/// agent's read grant: the round trip as the agent times it (a Python script, so its own JSON
/// work is in the figure), against reading the file directly.
fn acp_rows(b: &mut Bench, cache: &Path) {
    let root = b.dir.path().join("acp").canonicalize_mkdir();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/acp");
    std::fs::copy(fixtures.join("scripted_agent.py"), root.join("agent.py")).unwrap();
    let small = "one line of a small file\n".repeat(40);
    std::fs::write(root.join("small.txt"), &small).unwrap();
    let n = b.samples(2000);
    std::fs::write(
        root.join("script.json"),
        serde_json::json!({"steps": [{"time_reads": "small.txt", "n": n}]}).to_string(),
    )
    .unwrap();
    let agents = root.join("config/rawko/agents");
    std::fs::create_dir_all(&agents).unwrap();
    std::fs::write(
        agents.join("reader.yaml"),
        "name: reader\nacp:\n  command: /usr/bin/python3\n  args: [agent.py, script.json]\n\
         tools:\n  allowed: [Read]\ntransitions: {onSuccess: done}\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_rawko"))
        .args(["run", "--json", "--no-stream", "--agent", "reader", "Read."])
        .current_dir(&root)
        .env("RAWKO_CACHE_DIR", cache)
        .env("RAWKO_DATA_DIR", root.join("data"))
        .env("XDG_CONFIG_HOME", root.join("config"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let summary = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|e| e["type"] == "state_ended")
        .and_then(|e| e["summary"].as_str().map(str::to_string))
        .unwrap_or_else(|| panic!("the ACP run did not end its state: {stdout}"));
    let results: serde_json::Value = summary
        .lines()
        .find_map(|l| l.strip_prefix("RESULTS: "))
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("no timings in {summary}"));
    let us = |k: &str| Duration::from_secs_f64(results[0][k].as_f64().unwrap() / 1e6);
    eprintln!(
        "ACP fs/read_text_file: median {}, p90 {} over {n} round trips",
        time(us("median_us")),
        time(us("p90_us"))
    );
    let theirs = median(b.samples(2000), || {
        std::hint::black_box(std::fs::read(root.join("small.txt")).unwrap());
    });
    b.rows.push(Row {
        figure: "ACP fs/read_text_file, 1 KB file".into(),
        ours: us("median_us"),
        reference: "reading the file directly".into(),
        theirs: Some(theirs),
        kind: Kind::Time,
        target: Target::Under(Duration::from_millis(1)),
    });
}

fn print(rows: &[Row]) {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!("rawko's costs against their references ({cores} cores)");
    println!(
        "| {:<44} | {:>10} | {:<30} | {:>10} | {:>7} | {:<12} | {:<4} |",
        "figure", "rawko", "reference", "reference", "ratio", "target", "met"
    );
    println!(
        "|{:-<46}|{:->12}|{:-<32}|{:->12}|{:->9}|{:-<14}|{:-<6}|",
        "", "", "", "", "", "", ""
    );
    for r in rows {
        let target = match r.target {
            Target::RatioAtMost(x) => format!("≤ {x:.1}x"),
            Target::Scale => "-".into(),
            Target::ShareAtLeast(s) => format!("≥ {:.0}%", s * 100.0),
            Target::Under(d) => format!("< {}", time(d)),
            Target::ExtraUnder(d) => format!("+ < {}", time(d)),
        };
        let ratio = match (r.ratio(), r.kind) {
            (None, _) => "-".into(),
            (Some(x), Kind::Time) => format!("{x:.2}x"),
            (Some(x), Kind::Throughput(_)) => format!("{:.0}%", x * 100.0),
        };
        let met = match (r.target, r.met()) {
            (Target::Scale, _) => "",
            (_, Some(true)) => "yes",
            (_, Some(false)) => "NO",
            (_, None) => "?",
        };
        println!(
            "| {:<44} | {:>10} | {:<30} | {:>10} | {:>7} | {:<12} | {:<4} |",
            r.figure,
            r.show(r.ours),
            r.reference,
            r.theirs.map_or("-".into(), |d| r.show(d)),
            ratio,
            target,
            met
        );
    }
}

trait CanonicalizeMkdir {
    fn canonicalize_mkdir(self) -> PathBuf;
}

impl CanonicalizeMkdir for PathBuf {
    fn canonicalize_mkdir(self) -> PathBuf {
        std::fs::create_dir_all(&self).unwrap();
        self.canonicalize().unwrap()
    }
}
