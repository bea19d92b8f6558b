// Shared by the build scripts that run a nested `cargo build` for another target
// (`plugins/wasm-build.rs` for the plugins, `host/rawko/build.rs` for the static sandbox helper):
// what the outer build's environment must not pass on, and whether a target is installed.
// Included with `include!`, so it is plain items, no module.

/// Clear what the outer build set for its own target and profile from a nested cargo's
/// environment; clippy's wrapper would lint the nested crates a second time.
fn clear_outer_build(cmd: &mut std::process::Command) {
    for var in [
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_LLVM_COV",
        "CARGO_LLVM_COV_TARGET_DIR",
        "__CARGO_FIX_PLZ",
    ] {
        cmd.env_remove(var);
    }
}

/// Whether the standard library for `target` is installed for the compiler building us.
fn target_installed(target: &str) -> bool {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    std::process::Command::new(rustc)
        .args(["--print", "target-libdir", "--target", target])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| std::path::PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
        .and_then(|d| std::fs::read_dir(d).ok())
        .is_some_and(|mut entries| entries.next().is_some())
}
