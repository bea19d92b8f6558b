//! The kernel sandbox from the attacker's side, through the real binary: an agent allowed to run
//! only `make` writes a Makefile that does what the command allow-list cannot see, and each
//! attempt must fail while the command itself runs.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::{Run, Workspace, cache_dir, processes_with};

/// A marker only rawko's own environment holds (the sandbox passes an allow-list on).
const ENV_MARKER: &str = "rawko-env-marker-5c1d";
/// What the fake `~/.ssh/id_rsa` holds.
const SECRET: &str = "ssh-secret-marker-9a7e";
/// The command line of the process the Makefile leaves behind.
const BACKGROUND: &str = "rawko-background-marker-3f2b";

/// A workspace with a git repository, and, outside it, a home directory with a secret and
/// rawko's own config and data directories, as a user has them.
struct Setup {
    ws: Workspace,
    outside: tempfile::TempDir,
}

impl Setup {
    fn new() -> Setup {
        let ws = Workspace::new();
        let outside = tempfile::tempdir().unwrap();
        let s = Setup { ws, outside };
        std::fs::create_dir_all(s.home().join(".ssh")).unwrap();
        std::fs::write(s.home().join(".ssh/id_rsa"), SECRET).unwrap();
        let agents = s.config().join("rawko/agents");
        std::fs::create_dir_all(&agents).unwrap();
        std::fs::write(
            agents.join("builder.yaml"),
            "name: builder\nsystemPrompt: Build.\ntools:\n  allowed: [Write, Bash]\n  \
             bashFilter:\n    allowedCommands: [make, git, npm, python3]\ntransitions: {onSuccess: done}\n",
        )
        .unwrap();
        std::fs::write(
            agents.join("looker.yaml"),
            "name: looker\nsystemPrompt: Look.\nsandbox: read-only\ntools:\n  allowed: [Read, Bash]\n  \
             bashFilter:\n    allowedCommands: [make]\ntransitions: {onSuccess: done}\n",
        )
        .unwrap();
        let git = Command::new("git")
            .args(["init", "-q"])
            .current_dir(s.ws.path())
            .status()
            .expect("git is installed");
        assert!(git.success());
        s
    }

    fn home(&self) -> PathBuf {
        self.outside.path().join("home")
    }

    fn config(&self) -> PathBuf {
        self.outside.path().join("config")
    }

    fn rawko(&self, args: &[&str]) -> Run {
        self.rawko_at_home(args, &self.home())
    }

    /// `rawko args...` with `home` as `$HOME` (the user's real one, for toolchains installed
    /// there).
    fn rawko_at_home(&self, args: &[&str], home: &Path) -> Run {
        let out = Command::new(env!("CARGO_BIN_EXE_rawko"))
            .current_dir(self.ws.path())
            .args(args)
            .env("HOME", home)
            .env("XDG_CONFIG_HOME", self.config())
            .env("RAWKO_DATA_DIR", self.outside.path().join("data"))
            .env("RAWKO_CACHE_DIR", cache_dir())
            .env("RAWKO_TEST_SECRET", ENV_MARKER)
            .env_remove("RAWKO_LOG")
            .output()
            .expect("run rawko");
        Run::of(out)
    }

    fn bash(&self, agent: &str, command: &str) -> Run {
        let input = serde_json::json!({ "command": command }).to_string();
        self.rawko(&["tool", "call", "Bash", "--agent", agent, "--input", &input])
    }

    /// A `Bash` call with the user's real home, where their toolchains are installed.
    fn bash_at_real_home(&self, agent: &str, command: &str) -> Run {
        let input = serde_json::json!({ "command": command }).to_string();
        let home = std::env::home_dir().expect("a home directory");
        self.rawko_at_home(
            &["tool", "call", "Bash", "--agent", agent, "--input", &input],
            &home,
        )
    }
}

/// The hostile Makefile: every target tries one thing, `make -k` goes on after each failure.
fn makefile(outside: &Path, port: u16) -> String {
    let recipes = [
        "cat $(HOME)/.ssh/id_rsa".into(),
        "echo planted > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit".into(),
        "echo '[core] fsmonitor = touch pwned' >> .git/config".into(),
        format!("echo escaped > {}/escaped.txt", outside.display()),
        format!(
            "python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), 3); print('conn' + 'ected-ok')\""
        ),
        "cat /proc/*/environ | tr '\\0' '\\n' | grep -h rawko-env-marker || true".into(),
        format!("setsid python3 -c 'import time; time.sleep(300)' {BACKGROUND} &"),
        "echo built > built.txt".into(),
    ];
    let names: Vec<String> = (0..recipes.len()).map(|i| format!("t{i}")).collect();
    let mut text = format!("all: {}\n", names.join(" "));
    for (name, recipe) in names.iter().zip(recipes) {
        text.push_str(&format!("{name}:\n\t{recipe}\n"));
    }
    text
}

#[test]
fn a_makefile_cannot_reach_past_the_sandbox_and_the_build_goes_on() {
    let s = Setup::new();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let config_before = s.ws.read(".git/config");

    // The agent writes the Makefile with its Write tool, then runs the one command it may.
    let input =
        serde_json::json!({"path": "Makefile", "content": makefile(s.outside.path(), port)})
            .to_string();
    let r = s.rawko(&[
        "tool", "call", "Write", "--agent", "builder", "--input", &input,
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    let r = s.bash("builder", "make -k");
    assert_eq!(r.code, 0, "the tool call itself succeeds: {r:?}");
    let out = format!("{}{}", r.stdout, r.stderr);

    assert!(!out.contains(SECRET), "read ~/.ssh: {out}");
    assert!(!s.ws.path().join(".git/hooks/pre-commit").exists(), "{out}");
    assert_eq!(s.ws.read(".git/config"), config_before, "{out}");
    assert!(!s.outside.path().join("escaped.txt").exists(), "{out}");
    assert!(!out.contains("connected-ok"), "{out}");
    assert!(
        listener.accept().is_err(),
        "a connection reached the loopback server: {out}"
    );
    assert!(!out.contains(ENV_MARKER), "read rawko's environment: {out}");
    assert!(
        processes_with(BACKGROUND).is_empty(),
        "a process outlived the command: {:?}",
        processes_with(BACKGROUND)
    );
    // What the agent may do still works.
    assert_eq!(s.ws.read("built.txt"), "built\n", "{out}");
}

#[test]
fn a_read_only_agent_writes_nowhere_even_through_a_shipped_makefile() {
    let s = Setup::new();
    // The repository came with the Makefile; the agent may only read and run `make`.
    s.ws.write(
        "Makefile",
        format!(
            "all: a b c\na:\n\techo x > inside.txt\nb:\n\techo x > {}/escaped.txt\nc:\n\tcat $(HOME)/.ssh/id_rsa\n",
            s.outside.path().display()
        ),
    );
    let r = s.bash("looker", "make -k");
    assert_eq!(r.code, 0, "{r:?}");
    let out = format!("{}{}", r.stdout, r.stderr);
    assert!(!s.ws.path().join("inside.txt").exists(), "{out}");
    assert!(!s.outside.path().join("escaped.txt").exists(), "{out}");
    assert!(!out.contains(SECRET), "{out}");
}

/// The review's repro: a repository whose `.git/config` names programs (an fsmonitor, hooks, an
/// external diff, a pager) got them run by an agent's `git status`, `git diff` and `git commit`.
#[test]
fn git_runs_no_program_the_repository_config_names() {
    let s = Setup::new();
    let marker = |name: &str| format!("touch {}/{name}", s.ws.path().display());
    s.ws.write(
        "hooks/pre-commit",
        format!("#!/bin/sh\n{}\n", marker("hook-ran")),
    );
    std::fs::set_permissions(
        s.ws.path().join("hooks/pre-commit"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let config = format!(
        "[core]\n\tfsmonitor = {}\n\thooksPath = hooks\n\tpager = {}\n[diff]\n\texternal = {}\n\
         [user]\n\tname = t\n\temail = t@example.com\n",
        marker("fsmonitor-ran"),
        marker("pager-ran"),
        marker("diff-ran"),
    );
    let git_config = s.ws.path().join(".git/config");
    let mut text = std::fs::read_to_string(&git_config).unwrap();
    text.push_str(&config);
    std::fs::write(&git_config, text).unwrap();
    s.ws.write("a.txt", "one\n");

    for command in [
        "git status",
        "git add a.txt",
        "git commit -q -m first",
        "git diff HEAD",
        "git log -p",
    ] {
        s.ws.write("a.txt", format!("{command}\n"));
        let r = s.bash("builder", command);
        assert_eq!(r.code, 0, "{command}: {r:?}");
    }
    for m in ["hook-ran", "fsmonitor-ran", "pager-ran", "diff-ran"] {
        assert!(!s.ws.path().join(m).exists(), "{m}");
    }
}

#[test]
fn no_sandbox_is_loud() {
    let s = Setup::new();
    let input = serde_json::json!({ "command": "make -v" }).to_string();
    let r = s.rawko(&[
        "tool",
        "call",
        "Bash",
        "--agent",
        "builder",
        "--no-sandbox",
        "--input",
        &input,
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stderr.contains("--no-sandbox"), "{r:?}");
    assert!(r.stderr.contains("without the kernel sandbox"), "{r:?}");
}

/// Work the sandbox must not break: a JavaScript and a Python project's tests, with their
/// toolchains reading their own installs and caches (the user's real home). `cargo test` runs
/// the same way in the demo's tester step (`demo::the_demo_runs_offline_without_a_key`).
#[test]
fn npm_test_and_pytest_run_in_workspace_write() {
    let s = Setup::new();
    s.ws.write(
        "package.json",
        r#"{"name": "sample", "version": "1.0.0", "scripts": {"test": "node --test"}}"#,
    );
    s.ws.write(
        "add.test.js",
        "const test = require('node:test');\nconst assert = require('node:assert');\n\
         test('adds', () => assert.strictEqual(1 + 1, 2));\n",
    );
    s.ws.write("calc.py", "def add(a, b):\n    return a + b\n");
    s.ws.write(
        "test_calc.py",
        "from calc import add\n\ndef test_add():\n    assert add(1, 2) == 3\n",
    );
    for (command, passed) in [
        ("npm test", "# pass 1"),
        ("python3 -m pytest -q", "1 passed"),
    ] {
        let r = s.bash_at_real_home("builder", command);
        assert_eq!(r.code, 0, "{command}: {r:?}");
        assert!(r.stdout.contains(passed), "{command}: {r:?}");
        assert!(!r.stdout.contains("[exit status"), "{command}: {r:?}");
    }
}

/// `rawko doctor` reports what this kernel offers; CI's kernel runs every mode.
#[test]
fn doctor_reports_the_kernel_and_the_modes() {
    let s = Setup::new();
    let r = s.rawko(&["doctor", "--json"]);
    assert_eq!(r.code, 0, "{r:?}");
    let v = r.json();
    assert!(v["landlock_abi"].as_i64().unwrap_or(0) >= 1, "{v}");
    assert!(v["helper"].is_null(), "{v}");
    let modes = v["modes"].as_array().unwrap();
    let names: Vec<&str> = modes.iter().filter_map(|m| m["mode"].as_str()).collect();
    assert_eq!(names, ["read-only", "workspace-write", "full"]);
    assert!(modes.iter().all(|m| m["enforced"] == true), "{v}");
    let r = s.rawko(&["doctor"]);
    assert!(r.stdout.contains("sandbox helper: works"), "{r:?}");
}

/// The resource limits hold for what a command starts: 10 GiB of memory (past the 8 GiB limit;
/// untouched pages, so the attempt costs nothing if the limit were missing) and a 5 GiB file
/// (past the 4 GiB limit; sparse).
#[test]
fn resource_limits_hold() {
    let s = Setup::new();
    let r = s.bash_at_real_home(
        "builder",
        "python3 -c \"b = bytearray(10 * 2**30); print('allocated', len(b))\"",
    );
    assert!(r.stdout.contains("MemoryError"), "{r:?}");
    assert!(!r.stdout.contains("allocated"), "{r:?}");
    let r = s.bash_at_real_home(
        "builder",
        "python3 -c \"f = open('big', 'wb'); f.truncate(5 * 2**30); print('grown')\"",
    );
    assert!(!r.stdout.contains("grown"), "{r:?}");
    let size = std::fs::metadata(s.ws.path().join("big")).map_or(0, |m| m.len());
    assert!(size < 5 << 30, "the file grew to {size} bytes");
}

/// Shared memory works in the sandbox (Python's multiprocessing, test runners need it) on a
/// private `/dev/shm`: nothing written there reaches the host's.
#[test]
fn shared_memory_is_private_to_the_sandbox() {
    let s = Setup::new();
    let name = format!("rawko-shm-test-{}", std::process::id());
    let r = s.bash_at_real_home(
        "builder",
        &format!(
            "python3 -c \"open('/dev/shm/{name}', 'w').write('x'); \
             import os; print('shm-ok', len(os.listdir('/dev/shm')))\""
        ),
    );
    assert!(r.stdout.contains("shm-ok 1"), "{r:?}");
    assert!(
        !std::path::Path::new(&format!("/dev/shm/{name}")).exists(),
        "the write reached the host's /dev/shm"
    );
}

/// Where a workspace has no repository (or no rawko configuration), there is nothing to mount
/// read-only over: a command that creates one, with a config naming programs for the user's
/// next `git status` to run, or agents of its own, has it removed when it ends. The build goes
/// on, and the agent is told.
#[test]
fn a_command_cannot_leave_a_repository_or_rawko_config_where_there_was_none() {
    let s = Setup::new();
    std::fs::remove_dir_all(s.ws.path().join(".git")).unwrap();
    s.ws.write(
        "Makefile",
        "all: a b c d\n\
         a:\n\tmkdir -p .git/hooks && printf '#!/bin/sh\\ntouch pwned\\n' > .git/hooks/pre-commit\n\
         b:\n\tprintf '[core]\\n\\tfsmonitor = touch pwned\\n' > .git/config\n\
         c:\n\tmkdir -p .rawko/agents && printf 'name: evil\\nsandbox: full\\n' > .rawko/agents/evil.yaml\n\
         d:\n\techo built > built.txt\n",
    );
    let r = s.bash("builder", "make -k");
    assert_eq!(r.code, 0, "{r:?}");
    assert!(!s.ws.path().join(".git").exists(), "{r:?}");
    assert!(!s.ws.path().join(".rawko").exists(), "{r:?}");
    assert_eq!(s.ws.read("built.txt"), "built\n", "{r:?}");
    assert!(
        r.stdout
            .contains("created .git, which commands may not create")
            && r.stdout.contains("created .rawko"),
        "{r:?}"
    );
    // The same for a repository made with git itself, and a `.git` file pointing elsewhere.
    for command in [
        "git init -q",
        "python3 -c \"open('.git', 'w').write('gitdir: elsewhere')\"",
    ] {
        let r = s.bash("builder", command);
        assert!(!s.ws.path().join(".git").exists(), "{command}: {r:?}");
    }
}

/// A repository without `.git/hooks` (git does not need one): a command cannot add a hook there.
#[test]
fn a_command_cannot_add_git_hooks_where_the_repository_had_none() {
    let s = Setup::new();
    std::fs::remove_dir_all(s.ws.path().join(".git/hooks")).unwrap();
    let _ = std::fs::remove_dir_all(s.ws.path().join(".git/info"));
    let config = s.ws.read(".git/config");
    s.ws.write(
        "Makefile",
        "all:\n\tmkdir -p .git/hooks .git/info && printf '#!/bin/sh\\ntouch pwned\\n' > .git/hooks/pre-commit && echo '*' > .git/info/attributes\n",
    );
    let r = s.bash("builder", "make");
    assert_eq!(r.code, 0, "{r:?}");
    assert!(!s.ws.path().join(".git/hooks").exists(), "{r:?}");
    assert!(!s.ws.path().join(".git/info").exists(), "{r:?}");
    assert_eq!(s.ws.read(".git/config"), config);
    assert!(r.stdout.contains("created .git/hooks"), "{r:?}");
}
