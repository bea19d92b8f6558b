//! Agent loading benchmarks: reading, parsing and validating a directory of 1,000 agent files
//! in all five dialects, as `rawko agents validate` and every reload do.
//!
//! ```sh
//! cargo bench -p rawko --bench agents
//! ```

use std::path::Path;
use std::sync::LazyLock;

use divan::Bencher;
use rawko_agents::registry::{Loader, Registry, Scan, SearchPath};
use rawko_agents::{AgentOrigin, FileInfo, load_text};

fn main() {
    divan::main();
}

const FILES: usize = 1000;

/// One agent file per dialect; each copy gets its own name.
fn file(i: usize) -> (String, String) {
    match i % 5 {
        0 => (
            format!("a{i}.yaml"),
            format!(
                "name: a{i}\ndisplayName: Agent {i}\nwhenToUse: Benchmark agent {i}.\nsystemPrompt: |\n  You are agent {i}.\n  Read the code, then finish.\ntools:\n  allowed: [Read, Glob, Grep, LS, Bash]\n  blocked: [Write]\n  bashFilter:\n    allowedCommands: [\"git status\", \"cargo test *\"]\n    blockedPatterns: ['\\bgit\\s+push{i}\\b', '\\brm\\s+-rf{i}']\ntransitions:\n  onSuccess: {next}\n  onFailure: failed\n  onMaxIterations: escalated\nlimits:\n  maxIterations: 20\n  timeout: 600000\n",
                next = if i + 5 < FILES {
                    format!("a{}", i + 5)
                } else {
                    "done".into()
                }
            ),
        ),
        1 => (
            format!("a{i}.md"),
            format!(
                "---\nname: a{i}\nwhenToUse: Benchmark agent {i}.\ntools:\n  allowed: [Read, Grep]\ntransitions:\n  onSuccess: done\n---\n# Agent {i}\n\n## System Prompt\nYou are agent {i}. Read and report.\n\n## Notes\nNot part of the prompt.\n"
            ),
        ),
        2 => (
            format!("a{i}.md"),
            format!(
                "---\nname: a{i}\ndescription: Reviews pull requests.\nprovider: openai\nmodel: o3\nreasoning_effort: high\nmax_tokens: 16000\nallowed_tools: [file_read, grep_tool, bash]\nallowed_commands: [\"git *\", \"npm test\"]\n---\nYou review pull request {i}.\n"
            ),
        ),
        3 => (
            format!("d{i}/agent.agent.yaml"),
            format!(
                "apiVersion: docloom.io/v1alpha1\nkind: Agent\nmetadata:\n  name: a{i}\n  description: Analyzes repositories.\nspec:\n  tools:\n    - name: list_projects\n      description: Lists projects.\n      command: analyzer\n      args: [list_projects, \"${{SOURCE_PATH}}\"]\n    - name: get_file\n      description: Reads one file.\n      command: analyzer\n      args: [get_file, \"${{FILE_PATH}}\"]\n  parameters:\n    - name: file_path\n      type: string\n      required: false\n      description: A file.\n"
            ),
        ),
        _ => (
            format!("a{i}.md"),
            format!(
                "---\nname: a{i}\ndescription: Finds code.\ntools: Read, Grep, Glob\nmodel: sonnet\n---\nYou find code for task {i}.\n"
            ),
        ),
    }
}

struct Fixture {
    _dir: tempfile::TempDir,
    search: SearchPath,
    texts: Vec<(String, String)>,
}

static FIXTURE: LazyLock<Fixture> = LazyLock::new(|| {
    let dir = tempfile::tempdir().unwrap();
    let agents = dir.path().join(".rawko/agents");
    let texts: Vec<_> = (0..FILES).map(file).collect();
    for (rel, text) in &texts {
        let p = agents.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    let search = SearchPath::standard(dir.path(), &dir.path().join("no-user-config"));
    let r = Registry::load(&search);
    assert!(
        !r.has_errors(),
        "{:#?}",
        &r.diagnostics()[..r.diagnostics().len().min(5)]
    );
    assert_eq!(r.agents().count(), FILES + 5);
    Fixture {
        _dir: dir,
        search,
        texts,
    }
});

/// The whole search path from disk: discover, read, parse, validate, cross-check.
#[divan::bench(sample_count = 20)]
fn load_and_validate_1000_files(b: Bencher) {
    let f = &*FIXTURE;
    b.bench(|| Registry::load(&f.search));
}

/// A reload after a change event when nothing changed: every file is read and hashed, none
/// is parsed again, no registry is built.
#[divan::bench(sample_count = 20)]
fn reload_unchanged_1000_files(b: Bencher) {
    let f = &*FIXTURE;
    let mut loader = Loader::new(f.search.clone());
    let current = loader.load(None);
    b.bench_local(|| {
        assert!(loader.reload(Some(&current), Scan::Full).is_none());
    });
}

/// The watcher's periodic check with nothing changed: file stamps only.
#[divan::bench(sample_count = 20)]
fn quick_check_unchanged_1000_files(b: Bencher) {
    let f = &*FIXTURE;
    let mut loader = Loader::new(f.search.clone());
    let current = loader.load(None);
    b.bench_local(|| {
        assert!(loader.reload(Some(&current), Scan::Quick).is_none());
    });
}

/// Parsing and validating one file from memory, per dialect.
#[divan::bench(args = [0, 1, 2, 3, 4])]
fn parse_one(b: Bencher, dialect: usize) {
    let (rel, text) = &FIXTURE.texts[dialect];
    let path = Path::new(rel);
    b.bench(|| {
        load_text(
            text,
            FileInfo {
                path,
                display: rel,
                origin: AgentOrigin::File,
            },
        )
    });
}
