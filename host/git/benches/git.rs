//! The Git tool against the `git` command on a repository of 10,000 files with ten of them
//! changed: `status` and `diff` (each call opens the repository, confines its thread and
//! renders the text a model gets, as a tool call does).
//!
//! ```sh
//! cargo bench -p rawko-git --bench git
//! ```

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use rawko_git::{Identity, Options, Request};

fn main() {
    divan::main();
}

const FILES: usize = 10_000;

fn git(dir: &Path, args: &[&str]) -> Vec<u8> {
    let out = Command::new("git")
        .args(["-c", "user.name=B", "-c", "user.email=b@example.com"])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}");
    out.stdout
}

/// 10,000 files in 100 directories, committed, then ten of them changed.
fn repo() -> &'static Path {
    static REPO: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    &REPO
        .get_or_init(|| {
            let dir = tempfile::tempdir().unwrap();
            let root = dir.path().canonicalize().unwrap();
            for i in 0..FILES {
                let d = root.join(format!("dir{:03}", i % 100));
                std::fs::create_dir_all(&d).unwrap();
                let body: String = (0..20).map(|l| format!("file {i} line {l}\n")).collect();
                std::fs::write(d.join(format!("file{i:05}.txt")), body).unwrap();
            }
            git(&root, &["init", "-q", "-b", "main"]);
            git(&root, &["add", "-A"]);
            git(&root, &["commit", "-q", "-m", "10k files"]);
            for i in (0..FILES).step_by(FILES / 10) {
                let p = root.join(format!("dir{:03}/file{i:05}.txt", i % 100));
                std::fs::write(&p, format!("changed {i}\n")).unwrap();
            }
            // Both sides start from a refreshed index, as a repository in use has.
            git(&root, &["status", "--porcelain"]);
            (dir, root)
        })
        .1
}

fn tool(op: &str) -> String {
    let request: Request = serde_json::from_value(serde_json::json!({ "op": op })).unwrap();
    let opts = Options {
        write: false,
        identity: Identity::default(),
    };
    rawko_git::run(repo(), request, &opts).unwrap()
}

#[divan::bench(sample_count = 30)]
fn status_git_tool() -> String {
    tool("status")
}

#[divan::bench(sample_count = 30)]
fn status_git_command() -> Vec<u8> {
    git(repo(), &["status", "--porcelain"])
}

#[divan::bench(sample_count = 30)]
fn diff_git_tool() -> String {
    tool("diff")
}

#[divan::bench(sample_count = 30)]
fn diff_git_command() -> Vec<u8> {
    git(repo(), &["diff", "--stat", "--patch"])
}
