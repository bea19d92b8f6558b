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

use rawko::bench::agent_files::{self, FILES};

fn main() {
    // Agents are read against the host's tools, as the binary reads them.
    rawko_toolset::host::install_catalogue();
    divan::main();
}

struct Fixture {
    _dir: tempfile::TempDir,
    search: SearchPath,
    texts: Vec<(String, String)>,
}

static FIXTURE: LazyLock<Fixture> = LazyLock::new(|| {
    let dir = tempfile::tempdir().unwrap();
    let texts = agent_files::write(dir.path()).unwrap();
    let search = SearchPath::standard(dir.path(), &dir.path().join("no-user-config"));
    let r = Registry::load(&search);
    assert!(
        !r.has_errors(),
        "{:#?}",
        &r.diagnostics()[..r.diagnostics().len().min(5)]
    );
    assert_eq!(
        r.agents().count(),
        FILES + rawko_agents::builtin::AGENTS.len()
    );
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
