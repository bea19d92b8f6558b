//! rawko's own costs, each beside a native or subprocess reference measured in the same run,
//! with the ratio and the target it is held to.
//!
//! `rawko bench` runs the rows an installed binary can: it generates its inputs (a 10 MiB file,
//! a source tree) in a temporary directory and compares with programs found on `PATH`.
//! `cargo bench -p rawko --bench table` runs the same rows through this same code and adds the
//! ones that need a source checkout (test plugins, fixtures, a large tree of real sources).
//! A row that cannot run here (no `rg` installed) says why instead of a figure.

pub mod agent_files;
mod rows;

use std::cell::OnceCell;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::rc::Rc;
use std::time::{Duration, Instant};

use rawko_capability::{Access, FsGrants};
use rawko_runtime::tool::CallContext;
use rawko_runtime::{Budget, Runtime, RuntimeError, ToolPlugin};

pub use rows::{
    GROUPS, Inputs, call_row, cli_rows, discovery_rows, generate_tree, read_rows, rows,
    search_rows, verdict_rows,
};

/// What stops the benchmark from starting at all (a row that cannot run is a [`Skip`]).
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("cannot make a temporary directory for the benchmark's inputs: {0}")]
    TempDir(#[source] std::io::Error),
    #[error("cannot start the plugin runtime (cache {}): {source}", cache.display())]
    Runtime {
        cache: PathBuf,
        #[source]
        source: RuntimeError,
    },
    #[error("cannot load the built-in tools plugin: {0}")]
    Tools(#[source] RuntimeError),
}

/// Why a row has no figure, shown in its place.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct Skip(pub String);

impl Skip {
    /// A closure turning an error into a skip that says what was being done.
    pub fn doing<E: std::fmt::Display>(what: impl std::fmt::Display) -> impl FnOnce(E) -> Skip {
        move |e| Skip(format!("{what}: {e}"))
    }
}

/// How a row's two figures compare.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    /// Times: the ratio is rawko's time over the reference's (lower is better).
    Time,
    /// Throughput over this many bytes: the ratio is rawko's share of the reference's.
    Throughput(u64),
}

/// What a row must meet.
#[derive(Debug, Clone, Copy)]
pub enum Target {
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

impl Target {
    fn show(self) -> String {
        match self {
            Target::RatioAtMost(x) => format!("≤ {x:.1}x"),
            Target::Scale => "-".into(),
            Target::ShareAtLeast(s) => format!("≥ {:.0}%", s * 100.0),
            Target::Under(d) => format!("< {}", time(d)),
            Target::ExtraUnder(d) => format!("+ < {}", time(d)),
        }
    }
}

/// One figure beside its reference.
#[derive(Debug)]
pub struct Row {
    /// The group of rows it belongs to (`read`, `search`, ...).
    pub group: &'static str,
    pub figure: String,
    pub reference: String,
    pub kind: Kind,
    pub target: Target,
    /// rawko's time and the reference's, or why the row could not run.
    pub measured: Result<(Duration, Duration), String>,
}

impl Row {
    /// A row from its two measurements; either failing makes it a skipped row.
    pub fn new(
        group: &'static str,
        figure: impl Into<String>,
        reference: impl Into<String>,
        kind: Kind,
        target: Target,
        ours: Result<Duration, Skip>,
        theirs: Result<Duration, Skip>,
    ) -> Row {
        Row {
            group,
            figure: figure.into(),
            reference: reference.into(),
            kind,
            target,
            measured: ours.and_then(|o| Ok((o, theirs?))).map_err(|s| s.0),
        }
    }

    pub fn ratio(&self) -> Option<f64> {
        let (ours, theirs) = self.measured.as_ref().ok()?;
        let (ours, theirs) = (ours.as_secs_f64(), theirs.as_secs_f64());
        Some(match self.kind {
            Kind::Time => ours / theirs,
            Kind::Throughput(_) => theirs / ours,
        })
    }

    /// Whether the row meets its target; `None` for rows kept for scale and skipped rows.
    pub fn met(&self) -> Option<bool> {
        let (ours, theirs) = *self.measured.as_ref().ok()?;
        Some(match self.target {
            Target::RatioAtMost(r) => self.ratio()? <= r,
            Target::ShareAtLeast(s) => self.ratio()? >= s,
            Target::Under(d) => ours < d,
            Target::ExtraUnder(d) => ours.saturating_sub(theirs) < d,
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

    fn show_ratio(&self) -> String {
        match (self.ratio(), self.kind) {
            (None, _) => "-".into(),
            (Some(x), Kind::Time) => format!("{x:.2}x"),
            (Some(x), Kind::Throughput(_)) => format!("{:.0}%", x * 100.0),
        }
    }

    /// The row as JSON: seconds as numbers, and the same text the table shows.
    pub fn json(&self) -> serde_json::Value {
        let mut v = serde_json::json!({
            "group": self.group,
            "figure": self.figure,
            "reference": self.reference,
            "target": self.target.show(),
        });
        match &self.measured {
            Ok((ours, theirs)) => {
                v["rawko_seconds"] = ours.as_secs_f64().into();
                v["reference_seconds"] = theirs.as_secs_f64().into();
                v["rawko"] = self.show(*ours).into();
                v["reference_figure"] = self.show(*theirs).into();
                v["ratio"] = self.ratio().into();
                v["ratio_is"] = match self.kind {
                    Kind::Time => "rawko's time over the reference's",
                    Kind::Throughput(_) => "rawko's throughput as a share of the reference's",
                }
                .into();
                v["met"] = self.met().into();
            }
            Err(why) => v["skipped"] = why.clone().into(),
        }
        if let Kind::Throughput(bytes) = self.kind {
            v["bytes"] = bytes.into();
        }
        v
    }
}

/// A duration as people read it: µs, ms or s.
pub fn time(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 1.0 {
        format!("{s:.2} s")
    } else if s >= 1e-3 {
        format!("{:.2} ms", s * 1e3)
    } else {
        format!("{:.1} µs", s * 1e6)
    }
}

/// The median of `samples` runs of `f`, after one run to warm caches; the first failure ends
/// the measurement.
pub fn median(samples: usize, mut f: impl FnMut() -> Result<(), Skip>) -> Result<Duration, Skip> {
    f()?;
    let mut d = Vec::with_capacity(samples.max(1));
    for _ in 0..samples.max(1) {
        let t = Instant::now();
        f()?;
        d.push(t.elapsed());
    }
    d.sort();
    Ok(d[d.len() / 2])
}

/// [`median`] of an async measurement.
pub async fn median_async(
    samples: usize,
    mut f: impl AsyncFnMut() -> Result<(), Skip>,
) -> Result<Duration, Skip> {
    f().await?;
    let mut d = Vec::with_capacity(samples.max(1));
    for _ in 0..samples.max(1) {
        let t = Instant::now();
        f().await?;
        d.push(t.elapsed());
    }
    d.sort();
    Ok(d[d.len() / 2])
}

/// Run a command to the end, its output read and dropped. Exit status 1 counts as success
/// (ripgrep's and grep's "no match").
pub fn spawn(cmd: &mut Command) -> Result<(), Skip> {
    let program = cmd.get_program().to_string_lossy().into_owned();
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(Skip::doing(format!("cannot run {program}")))?;
    if out.status.code().is_some_and(|c| c <= 1) {
        Ok(())
    } else {
        let stderr = String::from_utf8_lossy(&out.stderr);
        Err(Skip(format!(
            "{program} failed ({}): {}",
            out.status,
            stderr.trim()
        )))
    }
}

/// Whether `program` can be started from `PATH`.
pub fn on_path(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

/// What every row measures with: the plugin runtime, the built-in tools, a temporary directory
/// for inputs, and the `rawko` binary for the rows that run it as a user would.
pub struct Bench {
    /// Few samples and small inputs: every row runs, the figures are not for comparing.
    pub quick: bool,
    pub rt: Rc<Runtime>,
    /// The built-in tools plugin, loaded once.
    pub tools: ToolPlugin,
    /// Where inputs are generated; removed with the bench.
    pub dir: tempfile::TempDir,
    /// The `rawko` binary the command-line rows run.
    pub exe: PathBuf,
    /// The compiled-plugin cache, shared with that binary so its start is a warm one.
    pub cache: PathBuf,
    spawn_true: OnceCell<Result<Duration, String>>,
}

impl std::fmt::Debug for Bench {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bench")
            .field("quick", &self.quick)
            .field("dir", &self.dir.path())
            .field("exe", &self.exe)
            .field("cache", &self.cache)
            .finish_non_exhaustive()
    }
}

impl Bench {
    /// A bench whose plugin runtime caches compiled plugins in `cache`, running `exe` for the
    /// command-line rows.
    pub async fn new(exe: PathBuf, cache: PathBuf, quick: bool) -> Result<Bench, BenchError> {
        let rt = Runtime::new(Some(cache.clone())).map_err(|source| BenchError::Runtime {
            cache: cache.clone(),
            source,
        })?;
        let tools = ToolPlugin::load(&rt, rawko_builtins::TOOLS.name, rawko_builtins::TOOLS.wasm)
            .await
            .map_err(BenchError::Tools)?;
        Ok(Bench {
            quick,
            rt: Rc::new(rt),
            tools,
            dir: tempfile::tempdir().map_err(BenchError::TempDir)?,
            exe,
            cache,
            spawn_true: OnceCell::new(),
        })
    }

    /// Samples for a row: `full` normally, a couple when quick.
    pub fn samples(&self, full: usize) -> usize {
        if self.quick { full.min(2) } else { full }
    }

    /// A new directory `name` in the bench's temporary directory, as a canonical path (the
    /// tools see granted paths resolved).
    pub fn subdir(&self, name: &str) -> Result<PathBuf, Skip> {
        let p = self.dir.path().join(name);
        std::fs::create_dir_all(&p)
            .and_then(|()| p.canonicalize())
            .map_err(Skip::doing(format!("cannot make {}", p.display())))
    }

    /// Starting `/bin/true` and waiting for it: the subprocess reference of several rows,
    /// measured once.
    pub fn spawn_true(&self) -> Result<Duration, Skip> {
        self.spawn_true
            .get_or_init(|| {
                median(self.samples(200), || spawn(&mut Command::new("/bin/true"))).map_err(|s| s.0)
            })
            .clone()
            .map_err(Skip)
    }

    /// Call `name` of `tool` on `input` in a fresh sandbox that may read `root`; a result cut
    /// short (the reference did more work) is a skip.
    pub async fn call(
        &self,
        tool: &ToolPlugin,
        name: &str,
        input: &str,
        root: &Path,
        output: u64,
    ) -> Result<(), Skip> {
        let mut g = FsGrants::none();
        g.grant(root, root, Access::ReadOnly)
            .map_err(Skip::doing(format!("cannot grant {}", root.display())))?;
        let cx = CallContext {
            workspace: root,
            grants: &g,
            budget: Budget {
                output,
                timeout: Duration::from_secs(600),
                ..Budget::default()
            },
        };
        let out = tool
            .call(&self.rt, name, input, &cx)
            .await
            .map_err(Skip::doing(format!("{name} failed")))?
            .content;
        // The notice of a cut comes last; looking for it in the whole output would time the
        // bench, not the tool.
        let end = &out[out.floor_char_boundary(out.len().saturating_sub(512))..];
        if end.contains("[results cut") || end.contains("[showing") {
            return Err(Skip(format!(
                "{name} was cut short, so it did less than its reference"
            )));
        }
        Ok(())
    }

    /// The `rawko` binary with `args`, run in `dir` as a fresh user there: the bench's plugin
    /// cache, and data and config directories of its own.
    pub fn rawko(&self, dir: &Path, args: &[&str]) -> Command {
        let mut c = Command::new(&self.exe);
        c.args(args)
            .current_dir(dir)
            .env("RAWKO_CACHE_DIR", &self.cache)
            .env("RAWKO_DATA_DIR", dir.join("data"))
            .env("XDG_CONFIG_HOME", dir.join("config"))
            .env_remove("RAWKO_STATE_DIR");
        c
    }
}

/// The rows as a table for a terminal: each figure, its reference, the ratio, the target and
/// whether it is met; skipped rows say why under the table.
pub fn table(rows: &[Row]) -> String {
    use std::fmt::Write;
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mut out = format!("rawko's costs against their references ({cores} cores)\n");
    let line = |out: &mut String, cells: [&str; 7]| {
        let _ = writeln!(
            out,
            "| {:<44} | {:>10} | {:<30} | {:>10} | {:>7} | {:<12} | {:<4} |",
            cells[0], cells[1], cells[2], cells[3], cells[4], cells[5], cells[6]
        );
    };
    line(
        &mut out,
        [
            "figure",
            "rawko",
            "reference",
            "reference",
            "ratio",
            "target",
            "met",
        ],
    );
    let _ = writeln!(
        out,
        "|{:-<46}|{:->12}|{:-<32}|{:->12}|{:->9}|{:-<14}|{:-<6}|",
        "", "", "", "", "", "", ""
    );
    let mut skipped = Vec::new();
    for r in rows {
        let (ours, theirs) = match &r.measured {
            Ok((o, t)) => (r.show(*o), r.show(*t)),
            Err(why) => {
                skipped.push(format!("{} against {}: {why}", r.figure, r.reference));
                ("-".into(), "-".into())
            }
        };
        let met = match (r.target, r.met(), &r.measured) {
            (_, _, Err(_)) => "skip",
            (Target::Scale, ..) => "",
            (_, Some(true), _) => "yes",
            (_, Some(false), _) => "NO",
            (_, None, _) => "?",
        };
        line(
            &mut out,
            [
                &r.figure,
                &ours,
                &r.reference,
                &theirs,
                &r.show_ratio(),
                &r.target.show(),
                met,
            ],
        );
    }
    for s in skipped {
        let _ = writeln!(out, "skipped: {s}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(measured: Result<(Duration, Duration), String>, kind: Kind, target: Target) -> Row {
        Row {
            group: "g",
            figure: "f".into(),
            reference: "r".into(),
            kind,
            target,
            measured,
        }
    }

    #[test]
    fn ratios_read_the_same_way_for_times_and_throughputs() {
        let ms = Duration::from_millis;
        let t = row(Ok((ms(3), ms(2))), Kind::Time, Target::RatioAtMost(1.0));
        assert_eq!(t.ratio(), Some(1.5));
        assert_eq!(t.met(), Some(false));
        // Taking twice as long is half the throughput.
        let b = row(
            Ok((ms(4), ms(2))),
            Kind::Throughput(1 << 20),
            Target::ShareAtLeast(0.5),
        );
        assert_eq!(b.ratio(), Some(0.5));
        assert_eq!(b.met(), Some(true));
        let v = b.json();
        assert_eq!(v["ratio"], 0.5);
        assert_eq!(v["bytes"], 1 << 20);
    }

    #[test]
    fn a_skipped_row_says_why_in_the_table_and_the_json() {
        let r = row(
            Err("rg is not on PATH".into()),
            Kind::Time,
            Target::RatioAtMost(2.0),
        );
        assert_eq!(r.ratio(), None);
        assert_eq!(r.json()["skipped"], "rg is not on PATH");
        let t = table(&[r]);
        assert!(t.contains("| skip |"), "{t}");
        assert!(t.contains("skipped: f against r: rg is not on PATH"), "{t}");
    }
}
