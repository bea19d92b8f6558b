//! `rawko bench`: rawko's own costs on this machine, each beside its reference, for a user with
//! an installed binary and no source tree (the measuring is [`crate::bench`]'s, shared with
//! `cargo bench --bench table`).

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Args;
use clap::builder::PossibleValuesParser;

use crate::bench::{self, Bench, GROUPS, Inputs};
use crate::cli::{Context, print_json, print_out};

/// Measure rawko's own costs against native and subprocess references
#[derive(Debug, Args)]
#[command(
    after_help = "Each row is a figure of rawko's (a tool call in a fresh sandbox, the bash \
    filter's verdict, Read of a large file, Grep and Glob over a source tree, agent discovery, \
    `rawko tools list`) beside a reference measured in the same run: the same tool code compiled \
    natively, a program such as `cat -n` or `rg` (a row whose program is not on PATH is skipped, \
    with the reason), or starting /bin/true. The ratio is rawko's time over the reference's, or \
    for throughputs rawko's share of the reference's. Inputs are generated in a temporary \
    directory and removed afterwards; the whole run takes some seconds. Other work on the \
    machine slows the figures down.\n\n\
    Examples:\n  rawko bench\n  rawko bench read search\n  rawko bench --quick --json"
)]
pub struct BenchCmd {
    /// Only these groups of rows [default: all]
    #[arg(value_name = "GROUP", value_parser = PossibleValuesParser::new(GROUPS))]
    groups: Vec<String>,
    /// A few iterations on small inputs: checks that every row runs, in seconds; the figures are
    /// not for comparing
    #[arg(long)]
    quick: bool,
    /// Print the rows as JSON: {"cores", "quick", "inputs", "rows": [{"group", "figure",
    /// "reference", "rawko_seconds", "reference_seconds", "ratio", "ratio_is", "target", "met"} or
    /// {"group", "figure", "reference", "target", "skipped"}]}
    #[arg(long)]
    json: bool,
}

impl BenchCmd {
    pub async fn execute(self, cx: &Context) -> anyhow::Result<ExitCode> {
        let exe = std::env::current_exe()
            .map_err(|e| anyhow::anyhow!("cannot find the rawko binary to measure: {e}"))?;
        let load = load_average();
        let b = Bench::new(exe, cx.dirs.cache.clone(), self.quick).await?;
        let inputs = Inputs::new(self.quick);
        let progress = std::io::stderr().is_terminal();
        let mut rows = Vec::new();
        for &group in GROUPS
            .iter()
            .filter(|g| self.groups.is_empty() || self.groups.iter().any(|w| w == *g))
        {
            if progress {
                eprintln!("measuring {group}…");
            }
            rows.extend(bench::rows(&b, &[group.to_string()]).await);
        }
        let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
        if self.json {
            print_json(&serde_json::json!({
                "cores": cores,
                "quick": self.quick,
                "load_average": load,
                "inputs": {
                    "read_bytes": inputs.read_bytes,
                    "tree_files": inputs.tree_files,
                },
                "rows": rows.iter().map(bench::Row::json).collect::<Vec<_>>(),
            }))?;
        } else {
            let mut text = format!(
                "inputs, generated: a {} MiB file of 80-byte lines, a tree of {} Rust files\n",
                inputs.read_bytes >> 20,
                inputs.tree_files
            );
            if let Some(load) = load {
                text.push_str(&format!(
                    "load average before the run: {load:.2} on {cores} cores\n"
                ));
            }
            if self.quick {
                text.push_str("--quick: a few iterations on small inputs; not for comparing\n");
            }
            text.push_str(&bench::table(&rows));
            print_out(&text)?;
        }
        Ok(ExitCode::SUCCESS)
    }
}

/// The one-minute load average, where the system says it: figures taken while other work runs
/// are slower.
fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}
