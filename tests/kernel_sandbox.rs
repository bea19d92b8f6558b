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
        let out = Command::new(crate::support::rawko_bin())
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
    // The kernel scopes abstract sockets (ABI 6), so the commands share their namespaces.
    let shared = v["landlock_abi"].as_i64().unwrap_or(0) >= 6;
    assert_eq!(v["shared_namespaces"], shared, "{v}");
    let r = s.rawko(&["doctor"]);
    assert!(r.stdout.contains("sandbox helper: works"), "{r:?}");
    let said = if shared {
        "namespaces: one user"
    } else {
        "namespaces: made for each"
    };
    assert!(r.stdout.contains(said), "{r:?}");
    // The helper that runs each command's sandbox is the static one built into rawko wherever
    // the build could make it (the musl target installed), and is named.
    let builtin = "the static one built into rawko";
    assert_eq!(
        v["helper_program"] == builtin,
        cfg!(rawko_static_helper),
        "{v}"
    );
    assert!(r.stdout.contains("sandbox helper: works ("), "{r:?}");
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

/// A Makefile that forks until the kernel says no (or 3,000 times, so a missing limit cannot
/// take the machine down), each child a `sleep` that ends by itself, and prints how many it held.
const FORK_BOMB: &str = "all:\n\tpython3 bomb.py\n";
const FORK_BOMB_PY: &str = r#"import os, signal
kids = []
try:
    for _ in range(3000):
        pid = os.fork()
        if pid == 0:
            try:
                os.execv("/bin/sleep", ["sleep", "60"])
            finally:
                os._exit(1)
        kids.append(pid)
except OSError as e:
    print("fork refused:", e.strerror)
print("held", len(kids), flush=True)
for k in kids:
    os.kill(k, signal.SIGKILL)
for k in kids:
    os.waitpid(k, 0)
"#;

/// How many processes the bomb held, from its output.
fn held(r: &Run) -> usize {
    r.stdout
        .lines()
        .find_map(|l| l.strip_prefix("held "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("the bomb did not report: {r:?}"))
}

/// An agent allowed only `make` held 2,000 processes at once as root, where `RLIMIT_NPROC`
/// binds nobody: a command tree is held to 512 processes (its group's limit) in both modes.
#[test]
fn a_fork_bomb_is_held_to_the_process_limit_as_root_too() {
    let s = Setup::new();
    s.ws.write("Makefile", FORK_BOMB);
    s.ws.write("bomb.py", FORK_BOMB_PY);
    for agent in ["builder", "looker"] {
        let r = s.bash_at_real_home(agent, "make");
        let n = held(&r);
        eprintln!("{agent}: the bomb held {n} processes");
        assert!(n <= 512, "{agent}: the command held {n} processes: {r:?}");
        assert!(r.stdout.contains("fork refused"), "{agent}: {r:?}");
        assert!(
            n >= 400,
            "{agent}: the limit is far below its setting ({n}): {r:?}"
        );
    }
}

/// An agent's own `limits.processes` narrows its commands further.
#[test]
fn an_agent_sets_its_own_process_limit() {
    let s = Setup::new();
    std::fs::write(
        s.config().join("rawko/agents/frugal.yaml"),
        "name: frugal\nsystemPrompt: Build.\ntools:\n  allowed: [Bash]\n  \
         bashFilter:\n    allowedCommands: [make]\nlimits: {processes: 64}\ntransitions: {onSuccess: done}\n",
    )
    .unwrap();
    s.ws.write("Makefile", FORK_BOMB);
    s.ws.write("bomb.py", FORK_BOMB_PY);
    let r = s.bash_at_real_home("frugal", "make");
    let n = held(&r);
    assert!(n <= 64, "the command held {n} processes: {r:?}");
    assert!(n >= 40, "{n}: {r:?}");
}

/// `make -j` (no job limit) of a real C project: 64 compilations at once, each a few
/// processes, pass at the default limit.
#[test]
fn make_j_of_a_real_project_passes_at_the_default_limit() {
    let s = Setup::new();
    let mut objects = Vec::new();
    let mut main = String::new();
    for i in 0..64 {
        s.ws.write(
            &format!("src/f{i}.c"),
            format!("int f{i}(int x) {{ return x + {i}; }}\n"),
        );
        objects.push(format!("src/f{i}.o"));
        main.push_str(&format!("int f{i}(int);\n"));
    }
    main.push_str("int main(void) { return f0(0) + f63(-63); }\n");
    s.ws.write("src/main.c", &main);
    objects.push("src/main.o".into());
    s.ws.write(
        "Makefile",
        format!(
            "app: {objs}\n\tcc -o app {objs}\n%.o: %.c\n\tcc -c -o $@ $<\n",
            objs = objects.join(" ")
        ),
    );
    let r = s.bash_at_real_home("builder", "make -j");
    assert_eq!(r.code, 0, "{r:?}");
    assert!(s.ws.path().join("app").exists(), "{r:?}");
}

/// Where rawko bounds processes with cgroups, the groups it made are gone once it is killed with
/// SIGKILL in the middle of a command (nothing of its own can run then).
#[test]
fn no_process_group_is_left_behind_when_rawko_is_killed() {
    let s = Setup::new();
    let doctor = s.rawko(&["doctor", "--json"]).json();
    let limit = &doctor["process_limit"];
    let Some(root) = limit["groups"].as_str() else {
        assert_ne!(
            unsafe { libc::geteuid() },
            0,
            "root, yet no cgroup for the process limit: {doctor}"
        );
        eprintln!("no cgroup here ({limit}); nothing to leave behind");
        return;
    };
    s.ws.write("Makefile", "all:\n\tsleep 37\n");
    let input = serde_json::json!({ "command": "make" }).to_string();
    let mut child = Command::new(crate::support::rawko_bin())
        .current_dir(s.ws.path())
        .args([
            "tool", "call", "Bash", "--agent", "builder", "--input", &input,
        ])
        .env("HOME", s.home())
        .env("XDG_CONFIG_HOME", s.config())
        .env("RAWKO_DATA_DIR", s.outside.path().join("data"))
        .env("RAWKO_CACHE_DIR", cache_dir())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let group = Path::new(root).join(format!("rawko-{}", child.id()));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !group.join("pids.max").exists() && !group.join("cgroup.procs").exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "{} never appeared",
            group.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // The command is running inside it.
    while processes_with("sleep 37").is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the command never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // The small helper beside the binary set it up, not a second copy of rawko.
    assert!(
        !processes_with("rawko-sandbox __sandbox").is_empty(),
        "no rawko-sandbox helper is running the command"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while group.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "{} is still there 5 s after rawko was killed",
            group.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A repository's own drivers, named per repository where no fixed override list reaches them:
/// `.gitattributes` names `filter=tidy`, `diff=tidy` and `merge=tidy`, and `.git/config` (and a
/// file it includes) defines programs for them, for signing, and a shell alias. An agent allowed
/// only `git` ran them with `git status`; none of them may run, whatever git command it uses.
#[test]
fn a_repositorys_git_drivers_and_aliases_do_not_run_under_an_agents_git() {
    let s = Setup::new();
    let ws = s.ws.path();
    let marker = ws.join("marker.sh");
    std::fs::write(&marker, "mkdir -p markers; touch \"markers/$1\"; cat\n").unwrap();
    let run = |what: &str| format!("sh {} {what}", marker.display());
    let config = format!(
        "[filter \"tidy\"]\n\tclean = {}\n\tsmudge = {}\n\trequired = true\n\
         [filter \"proc\"]\n\tprocess = {}\n\
         [diff \"tidy\"]\n\ttextconv = {}\n\tcommand = {}\n\
         [merge \"tidy\"]\n\tdriver = {}\n\
         [gpg]\n\tprogram = {}\n[gpg \"ssh\"]\n\tprogram = {}\n\tdefaultKeyCommand = {}\n\
         [gpg \"x509\"]\n\tprogram = {}\n\
         [log]\n\tshowSignature = true\n[commit]\n\tgpgSign = true\n\
         [alias]\n\tst = !{}\n\tlg = log -p\n\
         [include]\n\tpath = more.config\n\
         [user]\n\tname = t\n\temail = t@example.com\n",
        run("filter-clean"),
        run("filter-smudge"),
        run("filter-process"),
        run("textconv"),
        run("diff-command"),
        run("merge-driver"),
        run("gpg"),
        run("gpg-ssh"),
        run("gpg-ssh-key"),
        run("gpg-x509"),
        run("alias"),
    );
    let git_config = ws.join(".git/config");
    let mut text = std::fs::read_to_string(&git_config).unwrap();
    text.push_str(&config);
    std::fs::write(&git_config, text).unwrap();
    std::fs::write(
        ws.join(".git/more.config"),
        format!(
            "[filter.old]\n\tclean = {}\n[diff \"other\"]\n\ttextconv = {}\n",
            run("included-filter"),
            run("included-textconv")
        ),
    )
    .unwrap();
    s.ws.write(
        ".gitattributes",
        "*.txt filter=tidy diff=tidy merge=tidy\n*.md filter=old diff=other\n*.dat filter=proc\n",
    );
    s.ws.write("a.txt", "one\n");
    s.ws.write("b.md", "# one\n");
    s.ws.write("c.dat", "data\n");
    let commands = [
        "git status",
        "git add .",
        "git commit -q -m first",
        "git checkout -q -b side",
        "git log --show-signature -p",
        "git show",
    ];
    for command in commands {
        let r = s.bash("builder", command);
        assert_eq!(r.code, 0, "{command}: {r:?}");
    }
    // A change on each branch, then a merge that needs the merge driver, and the rest.
    s.ws.write("a.txt", "side\n");
    s.ws.write("b.md", "# side\n");
    for command in [
        "git diff",
        "git commit -q -am side",
        "git checkout -q -",
        "git stash list",
    ] {
        let r = s.bash("builder", command);
        assert_eq!(r.code, 0, "{command}: {r:?}");
    }
    s.ws.write("a.txt", "main\n");
    for command in [
        "git stash",
        "git stash pop",
        "git commit -q -am main",
        "git merge side",
        "git diff HEAD~1",
        // Denied by the filter already (an alias could run anything); the override holds
        // where a filter lets it through.
        "git st",
    ] {
        let _ = s.bash("builder", command);
    }
    let ran: Vec<String> = std::fs::read_dir(ws.join("markers"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    assert!(ran.is_empty(), "the repository's programs ran: {ran:?}");
    // The work itself went on: the merge ran git's own three-way merge.
    let log = s.bash("builder", "git log --oneline");
    assert!(log.stdout.contains("first"), "{log:?}");
}

/// The same bomb from a user who may make no cgroup, where the bound is `RLIMIT_NPROC`: it counts
/// every process of the user, so the command may start 512 more than the user already has.
/// Runs as `nobody` when the tests run as root.
#[test]
fn a_fork_bomb_is_held_to_the_process_limit_as_a_user_without_cgroups() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    // SAFETY: geteuid(2) cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("not root: the bomb as this user is the root test's job elsewhere");
        return;
    }
    const NOBODY: u32 = 65534;
    let top = tempfile::tempdir().unwrap();
    std::fs::set_permissions(top.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let dir = |name: &str| {
        let d = top.path().join(name);
        std::fs::create_dir_all(&d).unwrap();
        std::os::unix::fs::chown(&d, Some(NOBODY), Some(NOBODY)).unwrap();
        d
    };
    let (ws, home, config, data, cache) = (
        dir("ws"),
        dir("home"),
        dir("config"),
        dir("data"),
        dir("cache"),
    );
    let agents = config.join("rawko/agents");
    std::fs::create_dir_all(&agents).unwrap();
    std::fs::write(
        agents.join("builder.yaml"),
        "name: builder\nsystemPrompt: Build.\ntools:\n  allowed: [Bash]\n  \
         bashFilter:\n    allowedCommands: [make]\ntransitions: {onSuccess: done}\n",
    )
    .unwrap();
    std::os::unix::fs::chown(config.join("rawko"), Some(NOBODY), Some(NOBODY)).unwrap();
    std::os::unix::fs::chown(&agents, Some(NOBODY), Some(NOBODY)).unwrap();
    std::fs::write(ws.join("Makefile"), "all:\n\t/usr/bin/python3 bomb.py\n").unwrap();
    std::fs::write(ws.join("bomb.py"), FORK_BOMB_PY).unwrap();
    let input = serde_json::json!({ "command": "make" }).to_string();
    let out = Command::new(crate::support::rawko_bin())
        .current_dir(&ws)
        .args([
            "tool", "call", "Bash", "--agent", "builder", "--input", &input,
        ])
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", &home)
        .env("XDG_CONFIG_HOME", &config)
        .env("RAWKO_DATA_DIR", &data)
        .env("RAWKO_CACHE_DIR", &cache)
        .uid(NOBODY)
        .gid(NOBODY)
        .output()
        .unwrap();
    let r = Run::of(out);
    let n = held(&r);
    eprintln!("as nobody, the bomb held {n} processes");
    assert!(n <= 512, "the command held {n} processes: {r:?}");
    assert!(r.stdout.contains("fork refused"), "{r:?}");
    let doctor = Command::new(crate::support::rawko_bin())
        .current_dir(&ws)
        .args(["doctor", "--json"])
        .env_clear()
        .env("HOME", &home)
        .env("RAWKO_DATA_DIR", &data)
        .env("RAWKO_CACHE_DIR", &cache)
        .uid(NOBODY)
        .gid(NOBODY)
        .output()
        .unwrap();
    let v = Run::of(doctor).json();
    assert_eq!(v["process_limit"]["mechanism"], "rlimit", "{v}");
}

/// The commands of one rawko process share one empty network namespace (making one for each
/// command was a third of what the sandbox cost): none of them may change it, even as root
/// with the capabilities a user namespace gives, and none may reach another through it.
#[test]
fn commands_cannot_change_or_talk_through_the_network_namespace_they_share() {
    let s = Setup::new();
    std::fs::write(
        s.config().join("rawko/agents/netter.yaml"),
        "name: netter\nsystemPrompt: Net.\ntools:\n  allowed: [Bash]\n  \
         bashFilter:\n    allowedCommands: [ip, python3]\ntransitions: {onSuccess: done}\n",
    )
    .unwrap();
    // No capability, root's included: none now, none that an exec could give back.
    let r = s.bash_at_real_home(
        "netter",
        "python3 -c \"print(open('/proc/self/status').read())\"",
    );
    let caps: Vec<&str> = r.stdout.lines().filter(|l| l.starts_with("Cap")).collect();
    assert_eq!(caps.len(), 5, "{r:?}");
    assert!(
        caps.iter().all(|l| l.ends_with("\t0000000000000000")),
        "{r:?}"
    );
    // The loopback device brought up by one command, looked at by the next: it stays down, so
    // nothing can be sent over it from one command to another.
    let r = s.bash("netter", "ip link set lo up; ip -o link show lo");
    assert!(r.stdout.contains("<LOOPBACK>"), "{r:?}");
    assert!(!r.stdout.contains("LOWER_UP"), "{r:?}");
    // An abstract Unix socket (which lives in the network namespace, not in the filesystem)
    // bound by one side of a pipeline and connected to by the other.
    let listen = "import socket,sys,time; s=socket.socket(socket.AF_UNIX); \
                  s.bind('\\0rawko-shared-netns-probe'); s.listen(1); print('listening', flush=True); \
                  s.settimeout(2); c=s.accept()[0]; c.sendall(b'hello')";
    let connect = "import socket,sys; sys.stdin.readline(); s=socket.socket(socket.AF_UNIX)\n\
                   try:\n s.connect('\\0rawko-shared-netns-probe'); print('reached', s.recv(5))\n\
                   except OSError as e:\n print('refused', e)";
    let r = s.bash_at_real_home(
        "netter",
        &format!("python3 -c \"{listen}\" | python3 -c \"{connect}\""),
    );
    assert!(r.stdout.contains("refused"), "{r:?}");
    assert!(!r.stdout.contains("reached"), "{r:?}");
}

/// `/etc` is readable in the sandbox, its secrets are not: the password hashes and the host's
/// ssh keys read as root, from the program's side.
#[test]
fn the_secrets_of_etc_stay_unreadable() {
    let s = Setup::new();
    let probe = "import os\n\
                 def show(p):\n try:\n  print(p, 'listed' if os.path.isdir(p) else 'read', \
                 os.listdir(p) if os.path.isdir(p) else repr(open(p).read()[:40]))\n \
                 except OSError as e:\n  print(p, 'refused', e.errno)\n\
                 for p in ['/etc/hostname', '/etc/shadow', '/etc/gshadow', '/etc/ssh']: show(p)";
    let r = s.bash_at_real_home("builder", &format!("python3 -c \"{probe}\""));
    assert_eq!(r.code, 0, "{r:?}");
    let line = |p: &str| {
        r.stdout
            .lines()
            .find(|l| l.starts_with(&format!("{p} ")))
            .unwrap_or_else(|| panic!("no line for {p}: {r:?}"))
            .to_string()
    };
    let hostname = std::fs::read_to_string("/etc/hostname").unwrap_or_default();
    if !hostname.is_empty() {
        assert!(line("/etc/hostname").contains(hostname.trim()), "{r:?}");
    }
    for secret in ["/etc/shadow", "/etc/gshadow"] {
        if std::path::Path::new(secret).exists() {
            let l = line(secret);
            assert!(l.contains("refused") || l.ends_with("read ''"), "{l}");
        }
    }
    if std::path::Path::new("/etc/ssh").is_dir() {
        let l = line("/etc/ssh");
        assert!(l.contains("refused") || l.ends_with("listed []"), "{l}");
    }
}

/// A descriptor rawko itself inherited, open on a file outside every grant, does not reach a
/// sandboxed program: the helper marks everything past the standard three close-on-exec.
#[test]
fn a_descriptor_rawko_inherited_does_not_reach_the_program() {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let s = Setup::new();
    let secret = std::fs::File::open(s.home().join(".ssh/id_rsa")).unwrap();
    let fd = secret.as_raw_fd();
    let input = serde_json::json!({
        "command": "python3 -c \"import os\ntry:\n print('read', os.read(7, 100))\nexcept OSError as e:\n print('refused', e.errno)\""
    })
    .to_string();
    let home = std::env::home_dir().expect("a home directory");
    let mut c = Command::new(crate::support::rawko_bin());
    c.current_dir(s.ws.path())
        .args([
            "tool", "call", "Bash", "--agent", "builder", "--input", &input,
        ])
        .env("HOME", &home)
        .env("XDG_CONFIG_HOME", s.config())
        .env("RAWKO_DATA_DIR", s.outside.path().join("data"))
        .env("RAWKO_CACHE_DIR", cache_dir())
        .env_remove("RAWKO_LOG");
    // SAFETY: between fork and exec, dup2(2) only (async-signal-safe): the file as fd 7,
    // without close-on-exec, as a careless parent of rawko would leave it.
    unsafe {
        c.pre_exec(move || {
            if libc::dup2(fd, 7) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let r = Run::of(c.output().expect("run rawko"));
    assert!(r.stdout.contains("refused 9"), "{r:?}");
    assert!(!r.stdout.contains(SECRET), "{r:?}");
}
