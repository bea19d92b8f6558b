//! Links rawko's binaries with packed relative relocations (`-z pack-relative-relocs`, DT_RELR)
//! where the toolchain and C library support them, and builds the sandbox helper that rawko
//! embeds, statically linked against musl ([`static_helper`]).
//!
//! A position-independent `rawko` carries about 105,000 relative relocations. As `R_*_RELATIVE`
//! entries they are 2.5 MB that the dynamic loader reads at every start, before `main`; packed,
//! they are about 30 KB. glibc reads the packed form since 2.36 and GNU ld writes it since 2.38,
//! and such a binary refuses to start on an older glibc (the linker records the need), so the
//! flag is used only where a test program linked with it here also runs here. Published binaries
//! (static musl) have no dynamic loader and are not affected.

use std::path::Path;
use std::process::Command;

include!("../../plugins/nested-cargo.rs");

const FLAG: &str = "-Wl,-z,pack-relative-relocs";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=RAWKO_NO_PACKED_RELOCS");
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    let native = var("HOST") == var("TARGET");
    static_helper(native);
    if var("CARGO_CFG_TARGET_OS") != "linux"
        || var("CARGO_CFG_TARGET_ENV") != "gnu"
        || !native
        || std::env::var_os("RAWKO_NO_PACKED_RELOCS").is_some()
    {
        return;
    }
    let out = std::path::PathBuf::from(var("OUT_DIR"));
    // The linker rustc will use: the one configured for the target, else `cc`.
    let linker = std::env::var("RUSTC_LINKER").unwrap_or_else(|_| "cc".into());
    if links_and_runs(&linker, &out) {
        println!("cargo:rustc-link-arg-bins={FLAG}");
    } else {
        println!(
            "cargo:warning=rawko: linking without packed relocations ({linker} or this glibc does not support {FLAG}); start-up is slower"
        );
    }
}

/// Whether a small position-independent program linked with [`FLAG`] builds and runs.
fn links_and_runs(linker: &str, out: &Path) -> bool {
    let src = out.join("relr-probe.c");
    let exe = out.join("relr-probe");
    // A pointer in initialised data gives the program a relative relocation to pack.
    let program = "static int x; int *p = &x; int main(void) { return p == &x ? 0 : 1; }\n";
    if std::fs::write(&src, program).is_err() {
        return false;
    }
    let linked = Command::new(linker)
        .args(["-fPIE", "-pie", FLAG, "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .is_ok_and(|o| o.status.success());
    linked && Command::new(&exe).status().is_ok_and(|s| s.success())
}

/// Build `rawko-sandbox-static` for `<arch>-unknown-linux-musl` and stage it in `OUT_DIR`, with
/// `rawko_static_helper` set for rawko to embed it.
///
/// Every native command rawko runs starts the sandbox helper first, so its start is paid once
/// per command. A program linked against glibc spends most of its start in the C library's own
/// set-up (the dynamic loader, and glibc reading the CPU's cache sizes with `cpuid`, which
/// traps to the hypervisor on a virtual machine: about 0.5 ms per start there); a static musl
/// one does neither. It is built by a nested cargo in its own target directory (as the plugins
/// are for wasm), where the musl target is installed or rustup can install it; elsewhere (or
/// with `RAWKO_NO_STATIC_HELPER` set) rawko uses the helper installed beside it, as before.
fn static_helper(native: bool) {
    println!("cargo:rustc-check-cfg=cfg(rawko_static_helper)");
    println!("cargo:rerun-if-env-changed=RAWKO_NO_STATIC_HELPER");
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    if var("CARGO_CFG_TARGET_OS") != "linux"
        || var("CARGO_CFG_TARGET_ENV") != "gnu"
        || !native
        || std::env::var_os("RAWKO_NO_STATIC_HELPER").is_some()
    {
        return;
    }
    let target = format!("{}-unknown-linux-musl", var("CARGO_CFG_TARGET_ARCH"));
    let manifest = std::path::PathBuf::from(var("CARGO_MANIFEST_DIR"));
    let root = manifest
        .ancestors()
        .nth(2)
        .expect("the workspace root, two levels above host/rawko")
        .to_path_buf();
    for watched in [
        "host/sandbox",
        "host/capability",
        "host/text",
        "host/rawko/src/bin/rawko-sandbox.rs",
        "Cargo.lock",
        "Cargo.toml",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(watched).display());
    }
    if !target_installed(&target) {
        let added = Command::new("rustup")
            .args(["target", "add", &target])
            .output()
            .is_ok_and(|o| o.status.success());
        if !added || !target_installed(&target) {
            println!(
                "cargo:warning=rawko: the {target} target is not installed (`rustup target add {target}`), so rawko uses the dynamically linked rawko-sandbox beside it, which starts slower"
            );
            return;
        }
    }
    let target_dir = root.join("target").join("static-helper");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(&cargo);
    cmd.current_dir(&root)
        .args([
            "build",
            "--package",
            "rawko-sandbox-static",
            "--target",
            &target,
        ])
        .args(["--profile", "static-helper", "--target-dir"])
        .arg(&target_dir);
    clear_outer_build(&mut cmd);
    let built = cmd.output();
    let exe = target_dir
        .join(&target)
        .join("static-helper")
        .join("rawko-sandbox-static");
    match built {
        Ok(o) if o.status.success() && exe.is_file() => {}
        Ok(o) => {
            let err = String::from_utf8_lossy(&o.stderr);
            let last = err.lines().rfind(|l| !l.trim().is_empty());
            println!(
                "cargo:warning=rawko: building the static sandbox helper for {target} failed ({}); rawko uses the rawko-sandbox beside it",
                last.unwrap_or("no output")
            );
            return;
        }
        Err(e) => {
            println!("cargo:warning=rawko: cannot run {cargo} for the static sandbox helper: {e}");
            return;
        }
    }
    let staged = std::path::PathBuf::from(var("OUT_DIR")).join("rawko-sandbox-static");
    std::fs::copy(&exe, &staged).expect("staging the static sandbox helper");
    println!("cargo:rustc-cfg=rawko_static_helper");
}
