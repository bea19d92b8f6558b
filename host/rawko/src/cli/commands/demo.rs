//! `rawko demo`: a whole run, offline and without a key, on a small project with a failing test.
//!
//! The sample project and a recording of the model's side of the conversation are compiled into
//! the binary. The demo copies the project into a temporary workspace and runs planner ->
//! developer -> tester -> reviewer on it with the `replay` adapter: the model's replies come
//! from the recording, everything else is real. The tools read and edit the files in their
//! sandbox, the tester runs the project's tests through the `Bash` tool, and every step lands
//! in the workspace's task store. It ends with the summary and the diff of what changed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::Args;

use crate::cli::{BadInput, Context, print_out};
use crate::demo::{PROJECT, RECORDING, TASK};
use rawko_adapters::instance::{InstalledAdapters, resolve};
use rawko_adapters::{AdapterOrigin, Trust};
use rawko_config::AdapterConfig;
use rawko_store::TaskStatus;

use crate::cli::setup::{OutputFlags, Setup, Start, exit_code, open_sqlite};
use rawko_session::run::RunOptions;

/// The adapter instance the demo's agents use.
const ADAPTER: &str = "demo";

/// Run the whole pipeline offline on a sample project, with recorded model replies
#[derive(Debug, Args)]
#[command(
    after_help = "The demo needs no API key and no network: the model's replies are \
    played back from a recording shipped in rawko, while the tools, the sandbox, the shell \
    filter and the task store are the real ones. The tester runs `cargo test` on the sample \
    project, so cargo must be on PATH.\n\n\
    Example:\n  rawko demo --keep"
)]
pub struct DemoCmd {
    /// Keep the demo workspace (and its tasks) instead of deleting it, and print where
    #[arg(long)]
    keep: bool,
    #[command(flatten)]
    output: OutputFlags,
}

impl DemoCmd {
    pub async fn execute(self, cx: &Context) -> anyhow::Result<ExitCode> {
        let started = Instant::now();
        let root = tempfile::Builder::new()
            .prefix("rawko-demo-")
            .tempdir()
            .map_err(|e| anyhow::anyhow!("cannot create a temporary directory: {e}"))?;
        let workspace = root.path().join("wordstats");
        write_project(&workspace)?;
        // A symlinked temp directory (macOS /tmp) must not make paths differ from grants.
        let workspace = workspace.canonicalize()?;
        let recording = root.path().join("recording.jsonl");
        std::fs::write(&recording, RECORDING)?;
        // No user config or user agents: the demo shows the built-in agents, whatever the
        // user has customised.
        let config_dir = root.path().join("config");
        std::fs::create_dir_all(&config_dir)?;

        let cfg = AdapterConfig {
            plugin: "replay".into(),
            recording: Some(recording),
            ..AdapterConfig::default()
        };
        let none_installed = InstalledAdapters::load(&root.path().join("data"), &workspace);
        let instance = resolve(
            ADAPTER,
            &cfg,
            &AdapterOrigin::Builtin,
            None,
            Trust::Trusted,
            &none_installed,
        )
        .map_err(|e| anyhow::anyhow!("the demo's adapter: {}", e.message))?;
        let mut instances = BTreeMap::new();
        instances.insert(ADAPTER.to_string(), instance);

        // A kept demo's tasks are in the user's state directory, where `rawko tasks` looks;
        // otherwise they go with the demo.
        let store = if !self.keep {
            open_sqlite(&rawko_store::path_for(
                &root.path().join("state"),
                &workspace,
            ))?
        } else if cx.store_location()?.is_shared() {
            cx.open_store().await?
        } else {
            open_sqlite(&rawko_store::path_for(&cx.dirs.state, &workspace))?
        };
        let mut run = RunOptions::new(
            workspace.clone(),
            [root.path().join("data"), config_dir, cx.dirs.cache.clone()],
            // The demo's workspace is rawko's own sample, made just now.
            Trust::Trusted,
            cx.launch()?,
        );
        run.adapter = Some(ADAPTER.into());
        run.instances = Some(instances);
        run.max_steps = 20;
        run.stream = !self.output.no_stream;
        run.traces = crate::cli::telemetry::links();
        // The demo is offline and self-contained: no MCP servers (`run.mcp` stays empty).
        let setup = Setup {
            run,
            output: self.output.clone(),
            // The demo workspace is deleted (or, kept, printed with its own hint below).
            timeline_hint: false,
            sink: None,
        };
        let options = serde_json::json!({ "adapter": ADAPTER, "max_steps": 20, "demo": true });
        let start = Start::New {
            prompt: TASK,
            agent: "planner",
            options,
        };
        let (id, end) = setup.run(start, &store).await?;
        if !self.output.json {
            let diff = project_diff(&workspace)?;
            if self.output.quiet {
                print_out(&diff)?;
            } else {
                print_out(&format!("\nWhat changed:\n{diff}"))?;
                print_out(&format!(
                    "demo finished in {:.1} s",
                    started.elapsed().as_secs_f64()
                ))?;
            }
        }
        if self.keep {
            let kept = root.keep();
            eprintln!(
                "the demo workspace is kept at {} (try `rawko --workspace {} tasks show {id}`)",
                kept.join("wordstats").display(),
                kept.join("wordstats").display()
            );
        }
        if end.status != TaskStatus::Done && !self.output.quiet && !self.output.json {
            eprintln!(
                "the demo did not finish as recorded ({}); rerun with --keep and -v to see why",
                end.status.as_str()
            );
        }
        Ok(exit_code(&end))
    }
}

/// Write the sample project into `dir`.
pub fn write_project(dir: &Path) -> anyhow::Result<()> {
    for (rel, text) in PROJECT {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, text)
            .map_err(|e| BadInput::new(format!("cannot write {}: {e}", path.display())))?;
    }
    Ok(())
}

/// A unified diff of the sample project's files as shipped against `workspace`, plus any file
/// the run added (build output and rawko's own state excepted).
pub fn project_diff(workspace: &Path) -> anyhow::Result<String> {
    let mut out = String::new();
    let mut shipped: Vec<PathBuf> = Vec::new();
    for (rel, before) in PROJECT {
        shipped.push(PathBuf::from(rel));
        let after = std::fs::read_to_string(workspace.join(rel)).unwrap_or_default();
        if after == *before {
            continue;
        }
        let diff = similar::TextDiff::from_lines(*before, after.as_str());
        out.push_str(
            &diff
                .unified_diff()
                .context_radius(3)
                .header(&format!("a/{rel}"), &format!("b/{rel}"))
                .to_string(),
        );
    }
    for entry in walk(workspace) {
        let rel = entry
            .strip_prefix(workspace)
            .unwrap_or(&entry)
            .to_path_buf();
        if shipped.contains(&rel) {
            continue;
        }
        let after = std::fs::read_to_string(&entry).unwrap_or_default();
        let diff = similar::TextDiff::from_lines("", after.as_str());
        let name = rel.display().to_string();
        out.push_str(
            &diff
                .unified_diff()
                .header("/dev/null", &format!("b/{name}"))
                .to_string(),
        );
    }
    if out.is_empty() {
        out.push_str("(no changes)\n");
    }
    Ok(out)
}

/// Files under `dir`, without build output, rawko's state and lock files.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        if matches!(name.as_ref(), "target" | ".rawko" | "Cargo.lock" | ".git") {
            continue;
        }
        let path = e.path();
        match e.file_type() {
            Ok(t) if t.is_dir() => out.extend(walk(&path)),
            Ok(t) if t.is_file() => out.push(path),
            _ => {}
        }
    }
    out.sort();
    out
}
