//! The knowledge index on a tree of 10,000 source files (about 20 MB of Rust-like code and
//! Markdown): the first sync, a resync with nothing changed, a resync after ten edits, the
//! check before a query on a settled tree, and query latency, each beside its native reference (reading and hashing every file with no
//! index; a substring scan of every file for the query's rarest word).
//!
//! ```sh
//! cargo bench -p rawko-knowledge --bench knowledge
//! ```

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use rawko_knowledge::{Index, KnowledgeConfig, Quiet};
use sha2::{Digest, Sha256};

fn main() {
    divan::main();
}

const FILES: usize = 10_000;

const WORDS: &[&str] = &[
    "queue", "worker", "retry", "backoff", "parse", "config", "buffer", "socket", "render",
    "widget", "schema", "token", "stream", "cache", "index", "merge", "commit", "branch", "signal",
    "thread",
];

/// 10,000 files in 100 directories: nine in ten Rust sources, one in ten Markdown.
fn tree() -> &'static Path {
    static TREE: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    &TREE
        .get_or_init(|| {
            let dir = tempfile::tempdir().unwrap();
            let root = dir.path().canonicalize().unwrap();
            for i in 0..FILES {
                let d = root.join(format!("crate{:02}/src/m{:02}", i % 50, i % 100));
                std::fs::create_dir_all(&d).unwrap();
                let w = |k: usize| WORDS[(i * 7 + k * 13) % WORDS.len()];
                if i % 10 == 0 {
                    let mut body = format!("# Module {i}\n\n");
                    for s in 0..6 {
                        body.push_str(&format!(
                            "## The {} {}\n\nThis section explains how the {} talks to the {} \
                             when a {} arrives; see item{i}x{s}.\n\n",
                            w(s),
                            w(s + 1),
                            w(s + 2),
                            w(s + 3),
                            w(s + 4)
                        ));
                    }
                    std::fs::write(d.join(format!("doc{i:05}.md")), body).unwrap();
                } else {
                    let mut body = format!("//! Module {i}.\n\nuse std::io;\n\n");
                    for f in 0..12 {
                        body.push_str(&format!(
                            "/// Handle the {} for the {}.\npub fn {}_{}_{i}_{f}(input: &str) -> io::Result<usize> {{\n    let {} = input.len();\n    // {} {} {}\n    Ok({})\n}}\n\n",
                            w(f),
                            w(f + 1),
                            w(f + 2),
                            w(f + 3),
                            w(f + 4),
                            w(f + 5),
                            w(f + 6),
                            w(f + 7),
                            w(f + 4)
                        ));
                    }
                    std::fs::write(d.join(format!("f{i:05}.rs")), body).unwrap();
                }
            }
            (dir, root)
        })
        .1
}

/// A copy of the tree already indexed, for the resync and query benches.
fn synced() -> &'static Path {
    static DONE: OnceLock<()> = OnceLock::new();
    let root = tree();
    DONE.get_or_init(|| {
        let mut index = Index::open(root).unwrap();
        index
            .sync(&KnowledgeConfig::defaults(), None, &mut Quiet)
            .unwrap();
    });
    root
}

#[divan::bench(sample_count = 3, sample_size = 1)]
fn first_sync(bencher: divan::Bencher) {
    let root = tree();
    bencher
        .with_inputs(|| {
            let _ = std::fs::remove_dir_all(root.join(".rawko"));
        })
        .bench_local_values(|()| {
            let mut index = Index::open(root).unwrap();
            index
                .sync(&KnowledgeConfig::defaults(), None, &mut Quiet)
                .unwrap()
        });
}

/// The synced tree once its stamps are older than the file system's clock granularity, as a
/// repository is between edits.
fn settled() -> &'static Path {
    static DONE: OnceLock<()> = OnceLock::new();
    let root = synced();
    DONE.get_or_init(|| {
        std::thread::sleep(std::time::Duration::from_millis(2500));
        let mut index = Index::open(root).unwrap();
        index
            .refresh(&KnowledgeConfig::defaults(), &mut Quiet)
            .unwrap();
    });
    root
}

/// What every query does first: open the index and check it is fresh. Nothing changed, so no
/// directory is read and no file either, only stat'ed.
#[divan::bench(sample_count = 20, sample_size = 1)]
fn refresh_unchanged(bencher: divan::Bencher) {
    let root = settled();
    let config = KnowledgeConfig::defaults();
    bencher.bench_local(|| {
        let mut index = Index::open(root).unwrap();
        let r = index.refresh(&config, &mut Quiet).unwrap();
        assert!(!r.walked && r.new + r.changed + r.removed == 0);
        r
    });
}

/// The native floor of that check: a stat of every file, one thread.
#[divan::bench(sample_count = 20, sample_size = 1)]
fn reference_stat_every_file(bencher: divan::Bencher) {
    let files: Vec<PathBuf> = ignore::WalkBuilder::new(tree())
        .build()
        .flatten()
        .filter(|e| e.file_type().is_some_and(|t| t.is_file()))
        .map(|e| e.into_path())
        .collect();
    bencher.bench_local(|| {
        files
            .iter()
            .filter(|p| std::fs::symlink_metadata(p).is_ok())
            .count()
    });
}

#[divan::bench(sample_count = 5, sample_size = 1)]
fn resync_unchanged(bencher: divan::Bencher) {
    let root = synced();
    let config = KnowledgeConfig::defaults();
    bencher.bench_local(|| {
        let mut index = Index::open(root).unwrap();
        let r = index.sync(&config, None, &mut Quiet).unwrap();
        assert_eq!(r.new + r.changed, 0);
        r
    });
}

#[divan::bench(sample_count = 5, sample_size = 1)]
fn resync_ten_edits(bencher: divan::Bencher) {
    let root = synced();
    let config = KnowledgeConfig::defaults();
    let mut round = 0usize;
    bencher
        .with_inputs(|| {
            round += 1;
            for i in (1..FILES).step_by(FILES / 10) {
                let p = root.join(format!("crate{:02}/src/m{:02}/f{i:05}.rs", i % 50, i % 100));
                std::fs::write(p, format!("pub fn edited_{round}_{i}() {{}}\n")).unwrap();
            }
        })
        .bench_local_values(|()| {
            let mut index = Index::open(root).unwrap();
            let r = index.sync(&config, None, &mut Quiet).unwrap();
            assert_eq!(r.changed, 10);
            r
        });
}

/// Read every file of the tree into one reused buffer, handing each to `f`.
fn each_file(mut f: impl FnMut(&[u8])) {
    let mut buf = Vec::new();
    for entry in ignore::WalkBuilder::new(tree()).build().flatten() {
        if entry.file_type().is_some_and(|t| t.is_file()) {
            buf.clear();
            std::fs::File::open(entry.path())
                .unwrap()
                .read_to_end(&mut buf)
                .unwrap();
            f(&buf);
        }
    }
}

/// The native floor of a resync: open, read and hash every file, with no index at all.
#[divan::bench(sample_count = 5, sample_size = 1)]
fn reference_read_and_hash_every_file() -> usize {
    let mut n = 0;
    each_file(|b| n += Sha256::digest(b)[0] as usize);
    n
}

const QUERIES: &[&str] = &[
    "how does the worker retry with backoff",
    "socket buffer",
    "item4230x3",
    "parse config schema token",
];

#[divan::bench(args = QUERIES, sample_count = 50)]
fn query(bencher: divan::Bencher, q: &str) {
    let index = Index::open(synced()).unwrap();
    bencher.bench_local(|| index.query(q, 8, None).unwrap());
}

/// The native reference of a query: scan every file for its rarest word (the whole corpus
/// read from the page cache, no ranking).
#[divan::bench(sample_count = 5, sample_size = 1)]
fn reference_scan_every_file() -> usize {
    let finder = memchr::memmem::Finder::new("item4230x3");
    let mut n = 0;
    each_file(|b| n += usize::from(finder.find(b).is_some()));
    n
}
