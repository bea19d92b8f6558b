//! Plugins from other languages, built with their real toolchains (installed by `.ci/run` into
//! `target/ci-tools`): a Python tool from `tests/fixtures/plugins/python-tool` built with
//! componentize-py, packed with its manifest, installed and called; and the Python project
//! `rawko plugin new --lang python` makes, built as its README says.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::{Workspace, run};

/// A program installed into the CI tools' virtualenv.
fn ci_tool(name: &str) -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/ci-tools/bin")
        .join(name);
    assert!(
        p.exists(),
        "{} is missing: `.ci/run` installs it (target/ci-tools/bin/pip install componentize-py)",
        p.display()
    );
    p
}

/// `componentize-py -d WIT -w tool componentize app -o OUT`, in `dir` (where `app.py` is).
fn componentize_py(dir: &Path, wit: &Path, out: &Path) {
    let r = Command::new(ci_tool("componentize-py"))
        .arg("-d")
        .arg(wit)
        .args(["-w", "tool", "componentize", "-p"])
        .arg(dir)
        .arg("app")
        .arg("-o")
        .arg(out)
        .output()
        .unwrap();
    assert!(
        r.status.success(),
        "componentize-py failed: {}",
        String::from_utf8_lossy(&r.stderr)
    );
}

fn wit_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../wit")
        .join(format!("since_v{}", rawko_wit::VERSION))
}

#[test]
fn a_python_tool_is_built_packed_installed_and_called() {
    let ws = Workspace::new();
    ws.write("note.txt", "hello from python\n");
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/plugins/python-tool");
    let component = ws.path().join("shout.component.wasm");
    componentize_py(&fixture, &wit_dir(), &component);

    // As componentize-py builds it, it carries no manifest: install says how to add one.
    let r = run(&ws, &["plugin", "install", "shout.component.wasm", "--yes"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("rawko plugin pack"), "{r:?}");

    let manifest = fixture.join("rawko-plugin.yaml");
    let r = run(
        &ws,
        &[
            "plugin",
            "pack",
            "shout.component.wasm",
            "--manifest",
            manifest.to_str().unwrap(),
            "-o",
            "shout.wasm",
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    // componentize-py imports wasi:sockets whatever the plugin does: accepted, and denied.
    let r = run(&ws, &["plugin", "install", "shout.wasm", "--yes"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stderr.contains("wasi:sockets/tcp@") && r.stderr.contains("denied"),
        "{r:?}"
    );
    let shout = |path: &str| {
        let input = serde_json::json!({ "path": path }).to_string();
        run(
            &ws,
            &["tool", "call", "Shout", "--read", ".", "--input", &input],
        )
    };
    let r = shout("note.txt");
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.stdout.trim(), "HELLO FROM PYTHON!");
    // Its grants hold: nothing outside the workspace.
    let r = shout("/etc/hostname");
    assert_eq!(r.code, 1, "{r:?}");
}

#[test]
fn the_python_project_template_builds_on_the_first_try() {
    let ws = Workspace::new();
    let r = run(
        &ws,
        &["plugin", "new", "tool", "hello-py", "--lang", "python"],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let dir = ws.path().join("hello-py");
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    assert!(
        readme.contains("componentize-py -d wit -w tool componentize app"),
        "{readme}"
    );
    let component = dir.join("hello-py.component.wasm");
    componentize_py(&dir, &dir.join("wit"), &component);
    let r = run(
        &ws,
        &[
            "plugin",
            "pack",
            "hello-py/hello-py.component.wasm",
            "--manifest",
            "hello-py/rawko-plugin.yaml",
            "-o",
            "hello-py/hello-py.wasm",
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let r = run(&ws, &["plugin", "inspect", "hello-py/hello-py.wasm"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(!r.stdout.contains("REFUSED"), "{r:?}");
    assert!(r.stdout.contains("hello-py 0.1.0 (tool)"), "{r:?}");
    // Other languages and kinds are refused with what there is.
    let r = run(&ws, &["plugin", "new", "adapter", "x", "--lang", "python"]);
    assert_eq!(r.code, 2, "{r:?}");
    let r = run(&ws, &["plugin", "new", "tool", "x", "--lang", "cobol"]);
    assert_eq!(r.code, 2, "{r:?}");
}
