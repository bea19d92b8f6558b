//! Links rawko's binaries with packed relative relocations (`-z pack-relative-relocs`, DT_RELR)
//! where the toolchain and C library support them.
//!
//! A position-independent `rawko` carries about 105,000 relative relocations. As `R_*_RELATIVE`
//! entries they are 2.5 MB that the dynamic loader reads at every start, before `main`; packed,
//! they are about 30 KB. glibc reads the packed form since 2.36 and GNU ld writes it since 2.38,
//! and such a binary refuses to start on an older glibc (the linker records the need), so the
//! flag is used only where a test program linked with it here also runs here. Published binaries
//! (static musl) have no dynamic loader and are not affected.

use std::path::Path;
use std::process::Command;

const FLAG: &str = "-Wl,-z,pack-relative-relocs";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=RAWKO_NO_PACKED_RELOCS");
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    let native = var("HOST") == var("TARGET");
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
