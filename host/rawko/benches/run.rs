//! Host overhead per agent step: one model reply with a tool call, the tool run, and everything
//! committed to the SQLite store, over a 1,000-step scripted task. The model answers instantly
//! from memory, and the time it takes is subtracted, so what is left is rawko's own cost.
//!
//! `cargo bench -p rawko --bench run` prints a table: the engine and store with an in-memory tool,
//! and the same with the real sandboxed `LS` tool (a fresh wasm instance per call).

use std::rc::Rc;
use std::time::Duration;

use rawko_runtime::Runtime;
use rawko_session::{SessionTools, tool_budget};
use rawko_toolset::ToolSet;
use rawko_toolset::chain::Chain;

#[path = "common/steps.rs"]
mod steps;
use steps::{MemoryTools, STEPS};

fn table_row(name: &str, mut d: Vec<Duration>) {
    d.sort();
    let q = |p: f64| d[((d.len() as f64 - 1.0) * p).round() as usize];
    let mean = d.iter().sum::<Duration>() / d.len() as u32;
    println!(
        "| {name:<44} | {:>5} | {:>9.1} | {:>9.1} | {:>9.1} | {:>9.1} |",
        d.len(),
        q(0.5).as_secs_f64() * 1e6,
        q(0.9).as_secs_f64() * 1e6,
        q(0.99).as_secs_f64() * 1e6,
        mean.as_secs_f64() * 1e6,
    );
}

fn main() {
    // Agents are read against the host's tools, as the binary reads them.
    rawko_toolset::host::install_catalogue();
    // `cargo test --benches` runs this too: one short pass is enough there.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("ws");
    std::fs::create_dir_all(workspace.join("src")).unwrap();
    std::fs::write(workspace.join("Cargo.toml"), "[package]\n").unwrap();
    let workspace = workspace.canonicalize().unwrap();

    println!("host time per agent step ({STEPS} steps, model time excluded), µs");
    println!(
        "| {:<44} | {:>5} | {:>9} | {:>9} | {:>9} | {:>9} |",
        "step", "n", "median", "p90", "p99", "mean"
    );
    println!(
        "|{:-<46}|{:-<7}|{:-<11}|{:-<11}|{:-<11}|{:-<11}|",
        "", "", "", "", "", ""
    );

    let memory = rt.block_on(steps::steps(
        &MemoryTools,
        &dir.path().join("a").tap_mkdir(),
        STEPS,
    ));
    table_row("engine + SQLite store, in-memory tool", memory);

    let runtime = Rc::new(Runtime::new(Some(dir.path().join("cache"))).unwrap());
    let tools = rt.block_on(async {
        SessionTools::new(
            runtime.clone(),
            workspace.clone(),
            ToolSet::builtin(&runtime).await.unwrap(),
            Chain::load(&runtime, &[]).await.unwrap(),
            rawko_config::Trust::Trusted,
            tool_budget(),
            rawko_shell::exec::Launch::Unconfined { reaper: None },
        )
        .unwrap()
    });
    let sandboxed = rt.block_on(steps::steps(
        &tools,
        &dir.path().join("b").tap_mkdir(),
        STEPS,
    ));
    table_row("engine + SQLite store + sandboxed wasm LS", sandboxed);
}

trait TapMkdir {
    fn tap_mkdir(self) -> Self;
}

impl TapMkdir for std::path::PathBuf {
    fn tap_mkdir(self) -> Self {
        std::fs::create_dir_all(&self).unwrap();
        self
    }
}
