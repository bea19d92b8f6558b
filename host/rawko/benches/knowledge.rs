//! `rawko knowledge query` as a user runs it, on a generated repository of 10,000 files: the
//! wall time of the whole command (start, the check that the index is fresh, the search,
//! printing), its median over many runs, beside the binary doing nothing. The check is part of
//! every query, so each figure includes it; one row edits a file before every query.
//!
//! ```sh
//! cargo bench -p rawko --bench knowledge
//! RAWKO_BENCH_BIN=/path/to/another/rawko cargo bench -p rawko --bench knowledge
//! ```
//!
//! `RAWKO_BENCH_BIN` measures another build of rawko on the same repository (an older one, to
//! compare); `RAWKO_BENCH_REPO` writes the repository there and keeps it, to profile a query by
//! hand. Beside each median, the CPU time (user and system, over all threads) a run took on
//! average, which other work on the machine disturbs less than wall time. Under `cargo test
//! --benches` every row runs once on 300 files.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let files = if full { 10_000 } else { 300 };
    let samples = if full { 31 } else { 1 };
    let bin = std::env::var_os("RAWKO_BENCH_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_rawko")));
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    // RAWKO_BENCH_REPO: the repository is written there and kept, to profile one query.
    let repo = std::env::var_os("RAWKO_BENCH_REPO")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("repo"));
    let bytes = generate(&repo, files);
    let rawko = |args: &[&str]| {
        let mut c = Command::new(&bin);
        c.args(args)
            .current_dir(&repo)
            .env("RAWKO_DATA_DIR", root.join("data"))
            .env("RAWKO_CACHE_DIR", root.join("cache"))
            .env("XDG_CONFIG_HOME", root.join("config"))
            .env_remove("RAWKO_LOG")
            .stdin(Stdio::null());
        c
    };
    let started = Instant::now();
    spawn(&mut rawko(&["knowledge", "sync"]));
    let first_sync = started.elapsed();
    // Stamps are trusted once older than the file system's clock granularity: measure the
    // steady state, a repository not written in the last seconds.
    if full {
        std::thread::sleep(Duration::from_millis(2500));
    }
    let query = |q: &str| {
        let mut c = rawko(&["knowledge", "query", "--json", "-k", "8", q]);
        move || {
            let out = spawn(&mut c);
            assert!(out.contains("\"hits\""), "{out}");
        }
    };
    let planted = "reconcile ledger drift nightly snapshot";
    let top = spawn(&mut rawko(&[
        "knowledge",
        "query",
        "--json",
        "-k",
        "3",
        planted,
    ]));
    let top: serde_json::Value = serde_json::from_str(&top).unwrap();
    let ledger_first = top["hits"][0]["path"] == "src/billing/ledger.rs";

    let mut rows: Vec<(String, (Duration, Duration))> = Vec::new();
    for q in [planted, "worker retry backoff", "parseConfigToken"] {
        rows.push((format!("query {q:?}"), median(samples, query(q))));
    }
    let edited = repo.join("docs/d0000.md");
    let mut round = 0usize;
    let mut edit_then_query = query("worker retry backoff");
    rows.push((
        "query after an edit of one file".into(),
        median(samples, || {
            round += 1;
            std::fs::write(&edited, format!("# Edited {round}\n\nworker notes\n")).unwrap();
            edit_then_query();
        }),
    ));
    let tool_input = serde_json::json!({"query": planted, "k": 3}).to_string();
    rows.push((
        "tool call Knowledge (planner)".into(),
        median(samples, || {
            spawn(&mut rawko(&[
                "tool",
                "call",
                "Knowledge",
                "--agent",
                "planner",
                "--input",
                &tool_input,
            ]));
        }),
    ));
    rows.push((
        "rawko --version (the process alone)".into(),
        median(samples, || {
            spawn(&mut rawko(&["--version"]));
        }),
    ));

    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "rawko knowledge on {files} files ({} MB), {} ({cores} cores), median of {samples}",
        bytes / 1_000_000,
        bin.display()
    );
    println!("first sync: {}", ms(first_sync));
    println!(
        "{planted:?}: src/billing/ledger.rs {}",
        if ledger_first { "first" } else { "NOT first" }
    );
    println!(
        "| {:<46} | {:>9} | {:>9} |",
        "figure (whole command)", "wall p50", "CPU mean"
    );
    println!("|{:-<48}|{:->11}|{:->11}|", "", "", "");
    for (what, (wall, cpu)) in &rows {
        println!("| {what:<46} | {:>9} | {:>9} |", ms(*wall), ms(*cpu));
    }
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

/// The median wall time of `samples` runs of `f` (after one run to warm caches), and the mean
/// CPU time of the processes they ran.
fn median(samples: usize, mut f: impl FnMut()) -> (Duration, Duration) {
    f();
    let samples = samples.max(1);
    let cpu = children_cpu();
    let mut d: Vec<Duration> = (0..samples)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    let cpu = children_cpu().saturating_sub(cpu) / samples as u32;
    d.sort();
    (d[d.len() / 2], cpu)
}

/// User and system time of this process's finished children, from `/proc/self/stat` (in
/// ticks of 10 ms: meaningful as a sum over many runs); zero where there is no such file.
fn children_cpu() -> Duration {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return Duration::ZERO;
    };
    // Fields after the command name (which may hold spaces), from the state on: the 14th and
    // 15th of those are cutime and cstime.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<u64> = rest
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    let ticks = fields.get(12).copied().unwrap_or(0) + fields.get(13).copied().unwrap_or(0);
    Duration::from_millis(ticks * 10)
}

/// Run a command to the end; its stdout, or a panic when it fails.
fn spawn(cmd: &mut Command) -> String {
    let out = cmd.output().expect("spawn rawko");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A deterministic stream of numbers.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) as usize
    }

    /// An index below `n`, small ones far more often (a rough Zipf).
    fn skewed(&mut self, n: usize) -> usize {
        let u = (self.next() % 1_000_000) as f64 / 1_000_000.0;
        ((u * u * u) * n as f64) as usize
    }
}

/// A vocabulary of made-up words, a few real ones first (the most frequent).
fn vocabulary() -> Vec<String> {
    let mut words: Vec<String> = [
        "worker",
        "queue",
        "retry",
        "backoff",
        "parse",
        "config",
        "token",
        "buffer",
        "socket",
        "render",
        "schema",
        "stream",
        "cache",
        "index",
        "merge",
        "commit",
        "branch",
        "signal",
        "thread",
        "nightly",
        "drift",
        "reconcile",
        "snapshot",
        "ledger",
    ]
    .iter()
    .map(|w| w.to_string())
    .collect();
    let syllables = [
        "ka", "lo", "mi", "ne", "ru", "ta", "vo", "zi", "pe", "do", "sa", "fu", "gri", "bel",
        "tor", "wen",
    ];
    for a in syllables {
        for b in syllables {
            for c in ["", "x", "an", "el"] {
                words.push(format!("{a}{b}{c}"));
            }
        }
    }
    words
}

/// Nine in ten files Rust sources with doc comments, one in ten Markdown, in 100 directories;
/// one function documents every word of the planted query. The size in bytes.
fn generate(root: &Path, files: usize) -> u64 {
    let words = vocabulary();
    let mut rng = Lcg(7);
    let mut bytes = 0u64;
    let word = |rng: &mut Lcg| words[rng.skewed(words.len())].clone();
    let mut write = |rel: &str, text: &str| {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
        bytes += text.len() as u64;
    };
    for i in 0..files {
        if i % 10 == 0 {
            let mut page = format!("# Notes {i}\n\n");
            for s in 0..5 {
                page.push_str(&format!("## {} {}\n\n", word(&mut rng), s));
                let line: Vec<String> = (0..40).map(|_| word(&mut rng)).collect();
                page.push_str(&line.join(" "));
                page.push_str(".\n\n");
            }
            write(&format!("docs/d{i:04}.md"), &page);
            continue;
        }
        let mut body = format!(
            "//! Module {i}: the {} {}.\n\nuse std::io;\n\n",
            word(&mut rng),
            word(&mut rng)
        );
        for f in 0..6 {
            let doc: Vec<String> = (0..12).map(|_| word(&mut rng)).collect();
            let (a, b, c) = (word(&mut rng), word(&mut rng), word(&mut rng));
            body.push_str(&format!(
                "/// {}\n/// {}.\npub fn {a}_{b}_{i}_{f}(input: &str) -> io::Result<usize> {{\n    \
                 let {c}Count = input.len();\n\n    // {} {}\n    Ok({c}Count)\n}}\n\n",
                doc[..6].join(" "),
                doc[6..].join(" "),
                word(&mut rng),
                word(&mut rng),
            ));
        }
        write(&format!("src/m{:02}/f{i:05}.rs", i % 100), &body);
    }
    write(
        "src/billing/ledger.rs",
        "//! The ledger.\n\n/// Reconcile the ledger against the bank's nightly snapshot: any drift\n\
         /// becomes an adjusting entry.\npub fn reconcile_ledger_drift(entries: &[i64]) -> i64 {\n    \
         entries.iter().sum()\n}\n",
    );
    write(
        "src/config/token.rs",
        "/// Read a token from the config.\npub fn parseConfigToken(text: &str) -> &str {\n    text\n}\n",
    );
    bytes
}
