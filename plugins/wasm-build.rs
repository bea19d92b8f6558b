// Shared by the build scripts that compile plugin crates to WebAssembly components
// (`host/builtins/build.rs` for the plugins embedded in rawko, `plugins/test-plugins/artifacts/build.rs`
// for the ones tests use). Included with `include!`, so it is plain items, no module.
//
// Each plugin is built by a nested `cargo build --target wasm32-wasip2` in its own target
// directory (`target/wasm` at the workspace root): the outer build holds the lock on the main
// target directory, and keeping one wasm directory shared by every profile means debug, release,
// test and clippy builds compile the plugins once between them.

include!("nested-cargo.rs");

use std::path::{Path, PathBuf};
use std::process::Command;

const WASM_TARGET: &str = "wasm32-wasip2";
const WASM_PROFILE: &str = "wasm-plugin";

/// The workspace root, two levels up from a crate at `<root>/<dir>` or `<root>/<dir>/<dir>`.
fn workspace_root() -> PathBuf {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    manifest
        .ancestors()
        .find(|p| p.join("Cargo.lock").exists() || p.join("rust-toolchain.toml").exists())
        .expect("the workspace root (with rust-toolchain.toml) above this crate")
        .to_path_buf()
}

/// Make sure the standard library for `wasm32-wasip2` is installed, installing it with rustup
/// when it is not, and fail with instructions when that is impossible.
fn ensure_wasm_target() {
    if target_installed(WASM_TARGET) {
        return;
    }
    println!("cargo:warning=installing the {WASM_TARGET} target with rustup (rawko's plugins are built for it)");
    let status = Command::new("rustup")
        .args(["target", "add", WASM_TARGET])
        .status();
    if !matches!(status, Ok(s) if s.success()) || !target_installed(WASM_TARGET) {
        panic!(
            "\n\nrawko builds its plugins for {WASM_TARGET}, and that target is not installed.\n\
             Install it with:\n\n    rustup target add {WASM_TARGET}\n\n"
        );
    }
}

/// Build the named plugin packages for `wasm32-wasip2`, one cargo invocation each (so that each
/// gets exactly the guest SDK features it asks for), and return the path of each `.wasm`.
fn build_plugins(packages: &[&str]) -> Vec<PathBuf> {
    ensure_wasm_target();
    let root = workspace_root();
    let target_dir = root.join("target").join("wasm");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());

    for watched in ["plugins", "wit", "Cargo.lock", "Cargo.toml"] {
        println!("cargo:rerun-if-changed={}", root.join(watched).display());
    }

    let mut out = Vec::new();
    for package in packages {
        let mut cmd = Command::new(&cargo);
        cmd.current_dir(&root)
            .args(["build", "--package", package, "--target", WASM_TARGET, "--profile", WASM_PROFILE])
            .arg("--target-dir")
            .arg(&target_dir);
        // The outer build's settings are for the host, not for wasm.
        clear_outer_build(&mut cmd);
        let status = cmd
            .status()
            .unwrap_or_else(|e| panic!("could not run {cargo} to build plugin {package}: {e}"));
        if !status.success() {
            panic!("building plugin {package} for {WASM_TARGET} failed ({status}); see the errors above");
        }
        let file = format!("{}.wasm", package.replace('-', "_"));
        let path = target_dir.join(WASM_TARGET).join(WASM_PROFILE).join(file);
        assert!(path.exists(), "built plugin {package}, but {} is missing", path.display());
        out.push(path);
    }
    out
}

/// Copy `from` into `OUT_DIR` as `name`, so the crate can embed or name it.
#[allow(dead_code)]
fn stage(from: &Path, name: &str) -> PathBuf {
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR")).join(name);
    std::fs::copy(from, &out)
        .unwrap_or_else(|e| panic!("copying {} to {}: {e}", from.display(), out.display()));
    out
}
