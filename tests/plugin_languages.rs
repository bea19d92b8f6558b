//! Plugins from other languages, built with their real toolchains (installed by `.ci/run` into
//! `target/ci-tools`): a Python tool (`tests/fixtures/plugins/python-tool`, componentize-py) and
//! a JavaScript tool (`tests/fixtures/plugins/js-tool`, componentize-js), each packed with its
//! manifest, installed and called; and the projects `rawko plugin new --lang python|js` makes,
//! built as their READMEs say.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::plugin_install::pack;
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

/// `componentize-js app.js --wit wit -n tool -o OUT`, in `dir` (with `app.js` and `wit/`).
fn componentize_js(dir: &Path, out: &str) {
    let bin = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/ci-tools/node/node_modules/.bin/componentize-js");
    assert!(
        bin.exists(),
        "{} is missing: `.ci/run` installs it (npm install --prefix target/ci-tools/node @bytecodealliance/componentize-js)",
        bin.display()
    );
    let r = Command::new(bin)
        .current_dir(dir)
        .args(["app.js", "--wit", "wit", "-n", "tool", "-o", out])
        .output()
        .unwrap();
    assert!(
        r.status.success(),
        "componentize-js failed: {}{}",
        String::from_utf8_lossy(&r.stdout),
        String::from_utf8_lossy(&r.stderr)
    );
}

/// Copy the directory `from` into `to`.
fn copy_wit(to: &Path) {
    crate::support::copy_dir(&wit_dir(), to);
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
    let r = pack(
        &ws,
        "shout.component.wasm",
        manifest.to_str().unwrap(),
        "shout.wasm",
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
    let r = pack(
        &ws,
        "hello-py/hello-py.component.wasm",
        "hello-py/rawko-plugin.yaml",
        "hello-py/hello-py.wasm",
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

#[test]
fn a_javascript_tool_is_built_packed_installed_and_called() {
    let ws = Workspace::new();
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/plugins/js-tool");
    for f in ["app.js", "rawko-plugin.yaml"] {
        std::fs::copy(fixture.join(f), ws.path().join(f)).unwrap();
    }
    copy_wit(&ws.path().join("wit"));
    componentize_js(ws.path(), "whisper.component.wasm");
    let r = pack(
        &ws,
        "whisper.component.wasm",
        "rawko-plugin.yaml",
        "whisper.wasm",
    );
    assert_eq!(r.code, 0, "{r:?}");
    // The JavaScript runtime imports wasi:http whatever the plugin does: accepted, and denied.
    let r = run(&ws, &["plugin", "install", "whisper.wasm", "--yes"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stderr.contains("wasi:http/outgoing-handler@") && r.stderr.contains("denied"),
        "{r:?}"
    );
    let r = run(
        &ws,
        &[
            "tool",
            "call",
            "Whisper",
            "--input",
            r#"{"text": "HELLO JS"}"#,
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.stdout.trim(), "hello js...");
    // A tool error thrown in JavaScript reaches the caller as the tool's error.
    let r = run(
        &ws,
        &["tool", "call", "Whisper", "--input", r#"{"text": ""}"#],
    );
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("nothing to whisper"), "{r:?}");
}

#[test]
fn the_javascript_project_template_builds_on_the_first_try() {
    let ws = Workspace::new();
    let r = run(&ws, &["plugin", "new", "tool", "hello-js", "--lang", "js"]);
    assert_eq!(r.code, 0, "{r:?}");
    let dir = ws.path().join("hello-js");
    componentize_js(&dir, "hello-js.component.wasm");
    let r = pack(
        &ws,
        "hello-js/hello-js.component.wasm",
        "hello-js/rawko-plugin.yaml",
        "hello-js/hello-js.wasm",
    );
    assert_eq!(r.code, 0, "{r:?}");
    let r = run(
        &ws,
        &[
            "tool",
            "call",
            "HelloJs",
            "--plugin",
            "hello-js/hello-js.wasm",
            "--input",
            r#"{"name": "world"}"#,
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.stdout.trim(), "Hello, world!");
}

/// The componentize-js version `.ci/run` installs, which every build command must pin.
fn pinned_componentize_js() -> String {
    let ci = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.ci/run"))
        .unwrap();
    let at = "@bytecodealliance/componentize-js@";
    let start = ci.find(at).expect("`.ci/run` installs componentize-js") + at.len();
    ci[start..]
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '.' || c == '-'))
        .next()
        .unwrap()
        .to_string()
}

/// Run `script` (shell lines exactly as a reader would paste them) in `dir`, `sh -e`, as on a
/// machine where nothing of JavaScript's is installed but node and npm: npm's cache and its
/// global prefix are new empty directories, and no directory on `PATH` has a `componentize-js`.
/// `rawko` is the binary under test, with the workspace's private directories.
fn run_as_written(ws: &Workspace, dir: &Path, script: &str) -> crate::support::Run {
    let npm = tempfile::tempdir().unwrap();
    let rawko = crate::support::rawko(ws);
    let mut sh = Command::new("sh");
    sh.arg("-ec").arg(script).current_dir(dir);
    for (k, v) in rawko.get_envs() {
        match v {
            Some(v) => sh.env(k, v),
            None => sh.env_remove(k),
        };
    }
    let rawko = crate::support::rawko_bin();
    let bin = rawko.parent().unwrap();
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs = std::iter::once(bin.to_path_buf())
        .chain(std::env::split_paths(&path).filter(|d| !d.join("componentize-js").exists()));
    sh.env("PATH", std::env::join_paths(dirs).unwrap())
        .env("npm_config_cache", npm.path().join("cache"))
        .env("npm_config_prefix", npm.path().join("global"))
        .env("npm_config_update_notifier", "false")
        .stdin(std::process::Stdio::null());
    crate::support::Run::of(sh.output().unwrap())
}

/// The first fenced ```sh block of `markdown`.
fn sh_block(markdown: &str) -> &str {
    let start = markdown.find("```sh\n").expect("a ```sh block") + "```sh\n".len();
    let len = markdown[start..].find("```").expect("the block's end");
    &markdown[start..start + len]
}

/// Every place that tells how to build a JavaScript tool (the hint `rawko plugin new --lang js`
/// prints, the project's README, the JavaScript part of README's "Writing a plugin") gives
/// commands that work when pasted as they are on a machine where componentize-js was never
/// installed and npm's cache is empty: the block installs what it needs, pinned to the version
/// CI tests with, builds, packs and installs the plugin, which then answers.
#[test]
fn the_javascript_build_commands_work_as_written_from_nothing() {
    let version = pinned_componentize_js();
    let check = |ws: &Workspace, what: &str, dir: &Path, block: &str, tool: &str| {
        let r = run_as_written(ws, dir, block);
        assert_eq!(r.code, 0, "{what}, run as written:\n{block}\n{r:?}");
        let r = run(
            ws,
            &["tool", "call", tool, "--input", r#"{"name": "world"}"#],
        );
        assert_eq!(r.code, 0, "{what}: {r:?}");
        assert_eq!(r.stdout.trim(), "Hello, world!", "{what}");
        assert!(
            block.contains(&format!("@bytecodealliance/componentize-js@{version}")),
            "{what} does not pin componentize-js {version} as .ci/run does:\n{block}"
        );
    };
    std::thread::scope(|s| {
        // The hint: the indented lines after the first blank one, run where rawko was.
        s.spawn(|| {
            let ws = Workspace::new();
            let r = run(&ws, &["plugin", "new", "tool", "hint-js", "--lang", "js"]);
            assert_eq!(r.code, 0, "{r:?}");
            let (_, hint) = r.stdout.split_once("\n\n").expect("the hint's commands");
            let block: String = hint.lines().map(|l| format!("{}\n", l.trim())).collect();
            check(&ws, "the hint", ws.path(), &block, "HintJs");
        });
        // The project's README, in the project.
        s.spawn(|| {
            let ws = Workspace::new();
            let r = run(&ws, &["plugin", "new", "tool", "readme-js", "--lang", "js"]);
            assert_eq!(r.code, 0, "{r:?}");
            let dir = ws.path().join("readme-js");
            let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
            check(
                &ws,
                "the project's README",
                &dir,
                sh_block(&readme),
                "ReadmeJs",
            );
        });
        // rawko's README: the paragraph of the "Writing a plugin" block that makes a
        // JavaScript project, from where the reader stands.
        s.spawn(|| {
            let ws = Workspace::new();
            let readme = std::fs::read_to_string(
                Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md"),
            )
            .unwrap();
            let section = &readme[readme.find("\n## Writing a plugin").unwrap()..];
            let block = section
                .split("```sh\n")
                .skip(1)
                .map(|b| &b[..b.find("```").unwrap()])
                .flat_map(|b| b.split("\n\n"))
                .find(|p| p.contains("--lang js"))
                .expect("a JavaScript block in \"Writing a plugin\"");
            check(
                &ws,
                "README's \"Writing a plugin\"",
                ws.path(),
                block,
                "Greet",
            );
        });
    });
}
