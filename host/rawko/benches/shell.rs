//! Shell benchmarks: what judging a command line costs before it runs.
//!
//! ```sh
//! cargo bench -p rawko --bench shell
//! ```
//!
//! `verdict_typical_pipeline` is the whole check the `Bash` tool makes: parse with
//! brush-parser, resolve programs, then the built-in policy plugin in a fresh wasm instance
//! (pre-linked, from the pooling allocator), which asks the host to match the blocked patterns
//! compiled once with the policy. Program lookups on `PATH` are remembered for two seconds, as in
//! a session, so repeated iterations measure the warm path.

use std::path::PathBuf;
use std::sync::LazyLock;

use divan::Bencher;
use rawko_capability::{Access, FsGrants};
use rawko_runtime::Runtime;
use rawko_shell::verdict::Decision;
use rawko_shell::{ParseOptions, Policy, Resolver, parse};
use rawko_toolset::chain::Chain;

fn main() {
    divan::main();
}

const TYPICAL: &str = "git log --oneline -20 | grep -v wip | head -5";
const HOSTILE: &str = "timeout 5 env LC_ALL=C bash -c 'git status && ls src' | grep -v x; \
                       find . -name '*.rs' -exec grep -l main {} + 2>/dev/null";

struct Fixture {
    rt: Runtime,
    chain: Chain,
    policy: Policy,
    resolver: Resolver,
    tokio: tokio::runtime::Runtime,
    _dir: tempfile::TempDir,
}

static FIXTURE: LazyLock<Fixture> = LazyLock::new(|| {
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let cache = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("plugin-cache");
    let rt = Runtime::new(Some(cache)).unwrap();
    let chain = tokio.block_on(Chain::load(&rt, &[])).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::create_dir(root.join("src")).unwrap();
    let mut grants = FsGrants::none();
    grants.grant(&root, &root, Access::ReadOnly).unwrap();
    let policy = Policy::new(
        &root,
        &grants,
        ["git *", "grep", "head", "ls", "find *"]
            .map(String::from)
            .to_vec(),
        vec![r"rm\s+-rf\s+/".into()],
    )
    .unwrap();
    let resolver = Resolver::from_env(&[&root]);
    Fixture {
        rt,
        chain,
        policy,
        resolver,
        tokio,
        _dir: dir,
    }
});

/// Parse, resolve, and the built-in policy plugin's verdict: the full check.
#[divan::bench]
fn verdict_typical_pipeline(b: Bencher) {
    let f = &*FIXTURE;
    b.bench_local(|| {
        let r = f
            .tokio
            .block_on(f.chain.check(&f.rt, TYPICAL, &f.policy, &f.resolver));
        assert_eq!(r.decision, Decision::Allow);
        r
    });
}

/// The same for a command line full of wrappers, which the plugin opens with host calls.
#[divan::bench]
fn verdict_wrappers(b: Bencher) {
    let f = &*FIXTURE;
    b.bench_local(|| {
        let r = f
            .tokio
            .block_on(f.chain.check(&f.rt, HOSTILE, &f.policy, &f.resolver));
        assert_eq!(r.decision, Decision::Allow, "{r:#?}");
        r
    });
}

/// Parsing and resolving alone, no filter.
#[divan::bench]
fn parse_typical_pipeline(b: Bencher) {
    let f = &*FIXTURE;
    let opts = ParseOptions {
        resolver: &f.resolver,
        workspace: &f.policy.workspace,
        expand_globs: true,
    };
    b.bench_local(|| parse(TYPICAL, &f.policy.workspace, &opts).unwrap());
}

/// A command with substitutions: its parse runs under the time budget, on the parse worker.
const EXPANDING: &str = "echo \"$(git rev-parse HEAD) $HOME\" | grep -v x";

/// Parsing a command whose parse is budgeted (the thread hop included).
#[divan::bench]
fn parse_with_expansions(b: Bencher) {
    let f = &*FIXTURE;
    let opts = ParseOptions {
        resolver: &f.resolver,
        workspace: &f.policy.workspace,
        expand_globs: true,
    };
    b.bench_local(|| parse(EXPANDING, &f.policy.workspace, &opts).unwrap());
}
