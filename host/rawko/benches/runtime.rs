//! Runtime benchmarks: what a sandboxed call costs, against doing the same work natively.
//!
//! ```sh
//! cargo bench -p rawko --bench runtime
//! RAWKO_BENCH_TREE=/some/big/tree cargo bench -p rawko --bench runtime -- grep
//! ```
//!
//! The Grep benchmarks search `RAWKO_BENCH_TREE`, by default the crates in
//! `~/.cargo/registry/src`; they are skipped when it does not exist.

use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use divan::Bencher;
use rawko_capability::{Access, FsGrants};
use rawko_runtime::tool::CallContext;
use rawko_runtime::{Budget, HostState, Runtime, ToolPlugin};

fn main() {
    divan::main();
}

/// A runtime with the first-party tools and the hostile test plugin (for its trivial `Noop`).
struct Fixture {
    rt: Runtime,
    tools: ToolPlugin,
    noop: ToolPlugin,
    tokio: tokio::runtime::Runtime,
    dir: tempfile::TempDir,
    root: PathBuf,
}

static FIXTURE: LazyLock<Fixture> = LazyLock::new(|| {
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let cache = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("plugin-cache");
    let rt = Runtime::new(Some(cache)).unwrap();
    let tools = tokio
        .block_on(ToolPlugin::load(
            &rt,
            rawko_builtins::TOOLS.name,
            rawko_builtins::TOOLS.wasm,
        ))
        .unwrap();
    let wasm = std::fs::read(rawko_test_artifacts::HOSTILE_TOOL).unwrap();
    let noop = tokio
        .block_on(ToolPlugin::load(&rt, "hostile", &wasm))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let small: String = (0..20)
        .map(|i| format!("line {i} of a small file\n"))
        .collect();
    std::fs::write(root.join("small.txt"), small).unwrap();
    // 10 MiB of 80-column lines.
    let line = format!("{}\n", "x".repeat(79));
    std::fs::write(root.join("big.txt"), line.repeat((10 << 20) / 80)).unwrap();
    Fixture {
        rt,
        tools,
        noop,
        tokio,
        dir,
        root,
    }
});

fn grants(root: &Path) -> FsGrants {
    let mut g = FsGrants::none();
    g.grant(root, root, Access::ReadOnly).unwrap();
    g
}

/// A call on an instance that already exists: the floor of any call.
#[divan::bench]
fn warm_call_noop(b: Bencher) {
    use rawko_runtime::bindings::tools::CallContext as WitCx;
    let f = &*FIXTURE;
    let state = HostState::new("bench".into(), &FsGrants::none(), &Budget::default()).unwrap();
    let mut store = wasmtime::Store::new(f.rt.engine(), state);
    store.set_epoch_deadline(u64::MAX / 2);
    let instance = f
        .tokio
        .block_on(f.noop.instance_pre().instantiate_async(&mut store))
        .unwrap();
    let cx = WitCx {
        workspace: "/".into(),
        grants: Vec::new(),
        max_output_bytes: 1 << 20,
    };
    let input = "{}".to_string();
    b.bench_local(|| {
        f.tokio
            .block_on(
                instance
                    .rawko_plugin_tools()
                    .call_call(&mut store, "Noop", &input, &cx),
            )
            .unwrap()
            .unwrap()
    });
}

/// The full path of a trivial call: schema check, fresh store and instance, call, teardown.
#[divan::bench]
fn fresh_instance_call_noop(b: Bencher) {
    let f = &*FIXTURE;
    let none = FsGrants::none();
    let cx = CallContext {
        workspace: &f.root,
        grants: &none,
        budget: Budget::default(),
    };
    b.bench_local(|| {
        f.tokio
            .block_on(f.noop.call(&f.rt, "Noop", "{}", &cx))
            .unwrap()
    });
}

/// `Read` of a 20-line file, end to end, with the workspace preopened.
#[divan::bench]
fn read_small_file(b: Bencher) {
    let f = &*FIXTURE;
    let g = grants(&f.root);
    let cx = CallContext {
        workspace: &f.root,
        grants: &g,
        budget: Budget::default(),
    };
    b.bench_local(|| {
        f.tokio
            .block_on(f.tools.call(&f.rt, "Read", r#"{"path":"small.txt"}"#, &cx))
            .unwrap()
    });
}

mod read_10mb {
    use super::*;

    fn budget() -> Budget {
        Budget {
            output: 64 << 20,
            ..Budget::default()
        }
    }

    const INPUT: &str = r#"{"path":"big.txt","limit":1000000}"#;

    /// The sandboxed `Read` tool, every line numbered, result handed to the host.
    #[divan::bench(sample_count = 20, bytes_count = 10u64 << 20)]
    fn sandboxed_read_tool(b: Bencher) {
        let f = &*FIXTURE;
        let g = grants(&f.root);
        let cx = CallContext {
            workspace: &f.root,
            grants: &g,
            budget: budget(),
        };
        b.bench_local(|| {
            f.tokio
                .block_on(f.tools.call(&f.rt, "Read", INPUT, &cx))
                .unwrap()
        });
    }

    /// The same `Read` code compiled natively, no sandbox.
    #[divan::bench(sample_count = 20, bytes_count = 10u64 << 20)]
    fn native_read_tool(b: Bencher) {
        let f = &*FIXTURE;
        let cx = rawko_tools::Context::new(
            &f.root,
            vec![rawko_tools::Grant {
                path: f.root.clone(),
                access: rawko_tools::Access::ReadOnly,
            }],
            64 << 20,
        );
        let input: rawko_tools::read::ReadInput = serde_json::from_str(INPUT).unwrap();
        b.bench_local(|| rawko_tools::read::read(&input, &cx).unwrap());
    }

    /// Just `std::fs::read` of the file.
    #[divan::bench(sample_count = 20, bytes_count = 10u64 << 20)]
    fn std_fs_read(b: Bencher) {
        let path = FIXTURE.root.join("big.txt");
        b.bench_local(|| std::fs::read(&path).unwrap());
    }
}

mod grep_tree {
    use super::*;

    /// The tree to search, if there is one.
    fn tree() -> Option<PathBuf> {
        let p = match std::env::var_os("RAWKO_BENCH_TREE") {
            Some(p) => PathBuf::from(p),
            None => std::env::home_dir()?.join(".cargo/registry/src"),
        };
        p.canonicalize().ok()
    }

    const INPUT: &str = r#"{"pattern":"fn\\s+[a-z_]+_unchecked","output_mode":"count"}"#;

    #[divan::bench(sample_count = 5, sample_size = 1)]
    fn sandboxed_grep_tool(b: Bencher) {
        let Some(tree) = tree() else { return };
        let f = &*FIXTURE;
        let g = grants(&tree);
        let cx = CallContext {
            workspace: &tree,
            grants: &g,
            budget: Budget {
                timeout: std::time::Duration::from_secs(600),
                ..Budget::default()
            },
        };
        b.bench_local(|| {
            f.tokio
                .block_on(f.tools.call(&f.rt, "Grep", INPUT, &cx))
                .unwrap()
        });
    }

    #[divan::bench(sample_count = 5, sample_size = 1)]
    fn native_grep_tool(b: Bencher) {
        let Some(tree) = tree() else { return };
        let cx = rawko_tools::Context::new(
            &tree,
            vec![rawko_tools::Grant {
                path: tree.clone(),
                access: rawko_tools::Access::ReadOnly,
            }],
            1 << 20,
        );
        let input: rawko_tools::grep::GrepInput = serde_json::from_str(INPUT).unwrap();
        b.bench_local(|| rawko_tools::grep::grep(&input, &cx).unwrap());
    }
}

/// For scale: starting a process, which is what a native tool call would cost.
#[divan::bench(sample_count = 50)]
fn spawn_bin_echo(b: Bencher) {
    b.bench_local(|| {
        std::process::Command::new("/bin/echo")
            .arg("hi")
            .output()
            .unwrap()
    });
}

/// `rawko tools list` as a user runs it, once the plugins are compiled and cached.
#[divan::bench(sample_count = 20)]
fn cli_tools_list(b: Bencher) {
    let f = &*FIXTURE;
    let cache = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("plugin-cache");
    let run = || {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_rawko"))
            .args(["tools", "list"])
            .current_dir(&f.root)
            .env("RAWKO_CACHE_DIR", &cache)
            .env("RAWKO_DATA_DIR", f.dir.path().join("data"))
            .output()
            .unwrap();
        assert!(out.status.success());
    };
    run();
    b.bench_local(run);
}
