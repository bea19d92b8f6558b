//! rawko's own costs in one table: each figure beside its native or subprocess reference,
//! measured in the same run, with the ratio and the target it is held to.
//!
//! ```sh
//! cargo bench -p rawko --bench table
//! RAWKO_BENCH_TREE=/some/source/tree cargo bench -p rawko --bench table
//! cargo bench -p rawko --bench table -- read search   # only these groups of rows
//! ```
//!
//! The rows an installed binary can run are measured by the library's `rawko::bench`, the code
//! `rawko bench` runs too; this adds the rows that need a source checkout (the test plugins,
//! the ACP fixtures, a real source tree). The search rows walk `RAWKO_BENCH_TREE`, by default
//! the crate sources in `~/.cargo/registry/src`, and compare with ripgrep (`rg -j1`, one
//! thread, the same walk settings as Grep) when it is installed. Under `cargo test --benches`
//! (no `--bench` argument) every row runs on small inputs with a couple of samples; CI runs it
//! so, so the benchmark itself stays tested.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use rawko::bench::{self, Bench, Inputs, Kind, Row, Skip, Target, median, median_async};
use rawko_runtime::ToolPlugin;
use rawko_session::{SessionTools, tool_budget};
use rawko_toolset::ToolSet;
use rawko_toolset::chain::Chain;

#[path = "common/remote.rs"]
mod remote;
#[path = "common/steps.rs"]
mod steps;

/// The groups of rows, in the order they run.
const GROUPS: [&str; 10] = [
    "read",
    "search",
    "call",
    "step",
    "verdict",
    "discovery",
    "cli",
    "mcp",
    "acp",
    "remote",
];

fn main() {
    // Agents are read against the host's tools, as the binary reads them.
    rawko_toolset::host::install_catalogue();
    let full = std::env::args().any(|a| a == "--bench");
    // Words after `--` pick groups of rows by name (`cargo bench -p rawko --bench table -- read
    // search`); none picks every row.
    let picked: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    if let Some(unknown) = picked.iter().find(|p| !GROUPS.contains(&p.as_str())) {
        eprintln!(
            "no row group `{unknown}`; the groups are {}",
            GROUPS.join(", ")
        );
        std::process::exit(2);
    }
    let wanted = |group: &str| picked.is_empty() || picked.iter().any(|p| p == group);
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let cache = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("plugin-cache");
    let rows = tokio.block_on(async {
        let exe = PathBuf::from(env!("CARGO_BIN_EXE_rawko"));
        let b = Bench::new(exe, cache, !full).await.unwrap();
        let mut rows = Vec::new();
        for group in GROUPS.into_iter().filter(|g| wanted(g)) {
            rows.extend(match group {
                "read" => bench::read_rows(&b, Inputs::new(b.quick).read_bytes).await,
                "search" => {
                    let tree = search_tree(&b);
                    println!("search tree: {}", describe(&tree));
                    bench::search_rows(&b, &tree).await
                }
                "call" => call_rows(&b).await,
                "step" => step_rows(&b).await,
                "verdict" => bench::verdict_rows(&b).await,
                "discovery" => bench::discovery_rows(&b),
                "cli" => bench::cli_rows(&b),
                "mcp" => mcp_rows(&b).await,
                "acp" => acp_rows(&b),
                "remote" => remote_rows(&b).await,
                _ => unreachable!("every group has its rows"),
            });
        }
        rows
    });
    print!("{}", bench::table(&rows));
}

/// The tree the search rows walk: a real one for figures, a small generated one under test.
fn search_tree(b: &Bench) -> PathBuf {
    if !b.quick {
        let tree = match std::env::var_os("RAWKO_BENCH_TREE") {
            Some(p) => Some(PathBuf::from(p)),
            None => std::env::home_dir().map(|h| h.join(".cargo/registry/src")),
        };
        if let Some(t) = tree.and_then(|t| t.canonicalize().ok()) {
            return t;
        }
    }
    bench::generate_tree(b, Inputs::new(true).tree_files).unwrap()
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

/// A trivial tool call (the hostile test plugin's `Noop`) in a fresh sandbox against starting a
/// process.
async fn call_rows(b: &Bench) -> Vec<Row> {
    let wasm = std::fs::read(rawko_test_artifacts::HOSTILE_TOOL).unwrap();
    let noop = ToolPlugin::load(&b.rt, "hostile", &wasm).await.unwrap();
    bench::call_row(b, &noop, "Noop", "{}", "tool call, fresh wasm instance").await
}

/// Host time per agent step with everything committed to SQLite, model time excluded.
async fn step_rows(b: &Bench) -> Vec<Row> {
    let ws = b.subdir("steps-ws").unwrap();
    std::fs::write(ws.join("Cargo.toml"), "[package]\n").unwrap();
    let n = if b.quick { 10 } else { steps::STEPS };
    let tools = SessionTools::new(
        b.rt.clone(),
        ws.clone(),
        ToolSet::builtin(&b.rt).await.unwrap(),
        Chain::load(&b.rt, &[]).await.unwrap(),
        rawko_config::Trust::Trusted,
        tool_budget(),
        rawko_shell::exec::Launch::Unconfined { reaper: None },
    )
    .unwrap();
    let store_dir = b.subdir("steps-store").unwrap();
    let mut d = steps::steps(&tools, &store_dir, n).await;
    d.sort();
    let off = d[d.len() / 2];
    // The same steps with their spans made and handed to a batch exporter (one that drops what
    // it is given, so no receiver's speed is in the figure).
    let traced_dir = b.subdir("steps-store-traced").unwrap();
    let (provider, subscriber) = exported_spans();
    let mut t = {
        use tracing::instrument::WithSubscriber as _;
        steps::steps(&tools, &traced_dir, n)
            .with_subscriber(subscriber)
            .await
    };
    let _ = provider.shutdown();
    t.sort();
    let on_postgres = pg_steps(&tools, n).await.map(|mut p| {
        p.sort();
        p[p.len() / 2]
    });
    vec![
        Row::new(
            "step",
            "agent step, sandboxed LS + SQLite (median)",
            "spawn /bin/true",
            Kind::Time,
            Target::Under(Duration::from_millis(1)),
            Ok(off),
            b.spawn_true(),
        ),
        Row::new(
            "step",
            "agent step, its spans exported (median)",
            "the same step, not exported",
            Kind::Time,
            Target::ExtraUnder(Duration::from_micros(100)),
            Ok(t[t.len() / 2]),
            Ok(off),
        ),
        Row::new(
            "step",
            "agent step, sandboxed LS + PostgreSQL (median)",
            "the same step on SQLite",
            Kind::Time,
            Target::Under(Duration::from_millis(1)),
            on_postgres,
            Ok(off),
        ),
    ]
}

/// The steps committed to PostgreSQL: a database made for them on the server
/// `RAWKO_TEST_PG_URL` names (its user may create databases), dropped after.
async fn pg_steps(tools: &SessionTools, n: usize) -> Result<Vec<Duration>, Skip> {
    let url = std::env::var("RAWKO_TEST_PG_URL")
        .ok()
        .filter(|u| !u.is_empty())
        .ok_or_else(|| Skip("no PostgreSQL server (set RAWKO_TEST_PG_URL)".into()))?;
    let server = rawko_store::pg::PgConfig::from_url(&url).map_err(Skip::doing("the server"))?;
    let name = format!("rawko_bench_{}", std::process::id());
    let admin = |config: &rawko_store::pg::PgConfig| {
        let config = config.tokio_config().clone();
        async move {
            let (client, connection) = config.connect(tokio_postgres::NoTls).await?;
            tokio::spawn(connection);
            Ok::<_, tokio_postgres::Error>(client)
        }
    };
    let c = admin(&server).await.map_err(Skip::doing("connecting"))?;
    for sql in [
        format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
        format!("CREATE DATABASE {name}"),
    ] {
        c.batch_execute(&sql)
            .await
            .map_err(|e| Skip(format!("making the bench's database: {e:?}")))?;
    }
    let result = async {
        let store = rawko_store::pg::PgStore::open(&server.clone().with_dbname(&name))
            .await
            .map_err(Skip::doing("opening the store"))?;
        Ok(steps::steps_in(tools, &rawko_store::AnyStore::Pg(store), n).await)
    }
    .await;
    let _ = c
        .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        .await;
    result
}

/// A subscriber that turns the engine's spans into OpenTelemetry spans, as `rawko` does when
/// an endpoint is configured, batched to an exporter that drops them.
fn exported_spans() -> (
    opentelemetry_sdk::trace::SdkTracerProvider,
    impl tracing::Subscriber + Send + Sync,
) {
    use opentelemetry::trace::TracerProvider as _;
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;

    #[derive(Debug)]
    struct Dropped;
    impl opentelemetry_sdk::trace::SpanExporter for Dropped {
        async fn export(
            &self,
            _batch: Vec<opentelemetry_sdk::trace::SpanData>,
        ) -> opentelemetry_sdk::error::OTelSdkResult {
            Ok(())
        }
    }
    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
        .with_batch_exporter(Dropped)
        .build();
    let layer = tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("bench"))
        .with_filter(
            tracing_subscriber::filter::Targets::new()
                .with_target(rawko_fsm::telemetry::TARGET, tracing::Level::INFO),
        );
    (provider, tracing_subscriber::registry().with(layer))
}

/// One tool call through `rawko mcp serve` over stdio, as an MCP client makes it (a JSON-RPC
/// round trip through the pipes), against the same call made in process.
async fn mcp_rows(b: &Bench) -> Vec<Row> {
    use std::io::{BufRead, BufReader, Write};
    let root = b.subdir("mcp").unwrap();
    std::fs::write(root.join("a.txt"), "a\n").unwrap();
    let mut server = b
        .rawko(&root, &["mcp", "serve"])
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
        match r["result"]["content"][0]["text"].as_str() {
            Some(t) if t.contains("a.txt") => Ok(()),
            _ => Err(Skip(format!("LS did not list a.txt: {r}"))),
        }
    });
    let _ = server.kill();
    let _ = server.wait();
    let theirs = median_async(b.samples(500), async || {
        b.call(&b.tools, "LS", "{}", &root, 1 << 20).await
    })
    .await;
    vec![Row::new(
        "mcp",
        "LS via rawko mcp serve (stdio round trip)",
        "the same LS call in process",
        Kind::Time,
        Target::ExtraUnder(Duration::from_millis(1)),
        ours,
        theirs,
    )]
}

/// An external ACP agent's `fs/read_text_file` of a small file, served by `rawko run` through the
/// agent's read grant: the round trip as the agent times it (a Python script, so its own JSON
/// work is in the figure), against reading the file directly.
fn acp_rows(b: &Bench) -> Vec<Row> {
    let root = b.subdir("acp").unwrap();
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
    let out = b
        .rawko(
            &root,
            &["run", "--json", "--no-stream", "--agent", "reader", "Read."],
        )
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
        bench::time(us("median_us")),
        bench::time(us("p90_us"))
    );
    let theirs = median(b.samples(2000), || {
        std::hint::black_box(std::fs::read(root.join("small.txt")).unwrap());
        Ok(())
    });
    vec![Row::new(
        "acp",
        "ACP fs/read_text_file, 1 KB file",
        "reading the file directly",
        Kind::Time,
        Target::Under(Duration::from_millis(1)),
        Ok(us("median_us")),
        theirs,
    )]
}

/// The demo task on a Temporal worker against the same task run here: the whole run's time
/// (start-up, the four states, the closing report), and from it the cost each state adds.
async fn remote_rows(b: &Bench) -> Vec<Row> {
    let n = b.samples(3);
    let (remote, local) = match remote::remote_and_local(b, n).await {
        Ok((r, l)) => (Ok(r), Ok(l)),
        Err(skip) => (Err(skip.clone()), Err(skip)),
    };
    if let (Ok(r), Ok(l)) = (&remote, &local) {
        eprintln!(
            "remote demo: {} per state over a local run's (medians of {n})",
            bench::time(r.saturating_sub(*l) / remote::STATES)
        );
    }
    vec![Row::new(
        "remote",
        "demo task, rawko run --remote on a worker",
        "the same task by rawko run here",
        Kind::Time,
        Target::RatioAtMost(3.0),
        remote,
        local,
    )]
}
