//! Inputs that once crashed or stalled rawko, each through the real binary, named after the bug.
//! A workspace's files need no trust to be read, so each of these is an attack by a repository.

use crate::support::{Workspace, run};

/// Widest line a table may print with these inputs: five columns of at most 80 characters.
const MAX_LINE_CHARS: usize = 5 * 80 + 4 * 2;

fn assert_bounded(out: &str) {
    for line in out.lines() {
        assert!(
            line.chars().count() <= MAX_LINE_CHARS,
            "a line of {} characters",
            line.chars().count()
        );
    }
}

/// A workspace agent with a 100,000-character name panicked `rawko agents list` ("Formatting
/// argument out of range": a column wider than 65,535).
#[test]
fn regression_long_agent_name_panicked_agents_list() {
    let ws = Workspace::new();
    let name = "a".repeat(100_000);
    ws.write(
        ".rawko/agents/long.yaml",
        format!("name: {name}\nsystemPrompt: p\ntransitions: {{onSuccess: done}}\n"),
    );
    let r = run(&ws, &["agents", "list"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
    assert!(r.stdout.contains("aaaa…"), "the name is shown cut short");
    assert_bounded(&r.stdout);
}

/// A workspace config whose `api_key_env` is 100,000 characters long panicked
/// `rawko adapters list` the same way.
#[test]
fn regression_long_api_key_env_panicked_adapters_list() {
    let ws = Workspace::new();
    let var = "A".repeat(100_000);
    ws.write(
        ".rawko/config.yaml",
        format!("adapters:\n  big:\n    plugin: openai\n    api_key_env: {var}\n"),
    );
    let r = run(&ws, &["adapters", "list"]);
    assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
    assert_ne!(r.code, 101);
    assert_bounded(&r.stdout);
    assert_bounded(&r.stderr);
}

/// A config of `x: ` and 70,000 `[` took seconds of CPU (growing with the square of the depth)
/// in the YAML deserializer, and a workspace's config is read before it is trusted.
#[test]
fn regression_deeply_nested_config_stalled_the_loader() {
    let ws = Workspace::new();
    ws.write(".rawko/config.yaml", format!("x: {}", "[".repeat(70_000)));
    let r = run(&ws, &["adapters", "list"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("nested more than"), "{}", r.stderr);
    assert!(r.stderr.contains("config.yaml:1:"), "{}", r.stderr);
}

/// A plugin whose embedded manifest nests 65,000 YAML sequences deep stalled `rawko plugin
/// inspect` (and install) for seconds: the deserializer's cost grows with the square of the depth.
#[test]
fn regression_deeply_nested_plugin_manifest_stalled_inspect() {
    let ws = Workspace::new();
    let manifest = format!("name: {}", "[".repeat(65_000));
    let wasm = rawko_distribution::manifest::bare_component(manifest.as_bytes());
    ws.write("deep.wasm", &wasm);
    for args in [
        &["plugin", "inspect", "deep.wasm"][..],
        &["plugin", "install", "deep.wasm", "--yes"][..],
    ] {
        let started = std::time::Instant::now();
        let r = run(&ws, args);
        assert!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "{args:?}: {:?}",
            started.elapsed()
        );
        // `inspect` reports what it found; `install` refuses.
        assert_eq!(r.code, if args[1] == "inspect" { 0 } else { 1 }, "{r:?}");
        assert!(
            format!("{}{}", r.stdout, r.stderr).contains("nested more than 16 levels deep"),
            "{r:?}"
        );
    }
}
