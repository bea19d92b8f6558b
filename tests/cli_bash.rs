//! `rawko bash check` and the `Bash` tool through the real binary: verdicts and exit codes, and
//! what running a command does (pipes, lists, redirections, globs) and does not do (start a
//! denied command, outlive its timeout, flood the output, see rawko's environment, write
//! outside its grants).

use crate::support::{Run, Workspace, processes_with, rawko, run};

fn bash(ws: &Workspace, extra: &[&str], command: &str) -> Run {
    let input = serde_json::json!({ "command": command }).to_string();
    let mut args = vec!["tool", "call", "Bash"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--input", &input]);
    run(ws, &args)
}

/// `rawko bash check` with `extra` flags on `command`.
fn bash_check(ws: &Workspace, extra: &[&str], command: &str) -> Run {
    let mut args = vec!["bash", "check"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--", command]);
    run(ws, &args)
}

#[test]
fn bash_check_reports_each_command_and_exits_by_verdict() {
    let ws = Workspace::new();
    ws.write("src/main.rs", "fn main() {}\n");
    let r = bash_check(
        &ws,
        &["--read", ".", "--allow", "ls", "--allow", "head"],
        "ls -la src | head -5",
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.starts_with("allow"), "{r:?}");

    let r = bash_check(
        &ws,
        &["--read", ".", "--allow", "git status", "--json"],
        "git status && \\rm -rf x",
    );
    assert_eq!(r.code, 1, "{r:?}");
    let v = r.json();
    assert_eq!(v["decision"], "deny");
    assert_eq!(v["decided_by"], "rawko-policy");
    let cmds = v["commands"].as_array().unwrap();
    assert_eq!(cmds.len(), 2);
    assert_eq!(cmds[0]["decision"], "allow");
    assert_eq!(cmds[0]["rule"], "allowedCommands: git status");
    assert_eq!(cmds[1]["program"], "rm");
    assert_eq!(cmds[1]["decision"], "deny");
    assert_eq!(cmds[1]["filter"], "rawko-policy");
    assert!(
        cmds[1]["reason"]
            .as_str()
            .unwrap()
            .contains("is not allowed"),
        "{v}"
    );

    // Allowed by the policy, but not something rawko's executor runs.
    let r = bash_check(&ws, &["--read", ".", "--allow", "ls"], "ls &");
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stdout.contains("decided by executor"), "{r:?}");

    // Bad input is exit status 2.
    let r = bash_check(&ws, &["--block", "("], "ls");
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("not a valid regular expression"), "{r:?}");
    assert_eq!(run(&ws, &["bash", "check", "--allow", "ls"]).code, 2);
}

#[test]
fn bash_is_a_host_tool_and_runs_what_was_checked() {
    let ws = Workspace::new();
    ws.write("src/a.rs", "one\ntwo\nthree\n");
    ws.write("src/b.rs", "four\n");
    let r = run(&ws, &["tools", "list", "--json"]);
    let tools = r.json();
    let b = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "Bash")
        .unwrap_or_else(|| panic!("no Bash: {r:?}"));
    assert_eq!(b["plugin"], "host");
    assert_eq!(b["input_schema"]["required"][0], "command");

    let allow = [
        "--read", ".", "--write", ".", "--allow", "cat", "--allow", "wc", "--allow", "grep",
        "--allow", "ls", "--allow", "false", "--allow", "echo", "--allow", "sort",
    ];
    let r = bash(
        &ws,
        &allow,
        "cat src/*.rs | grep -v two | wc -l > count.txt && cd src && ls; false || echo 'after || ok'",
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(ws.read("count.txt").trim(), "3");
    assert_eq!(r.stdout, "a.rs\nb.rs\nafter || ok\n", "{r:?}");

    // Quotes stay one word; stderr is captured; the exit status is reported.
    let r = bash(
        &ws,
        &allow,
        "echo \"a && rm -rf x\"; ls missing-file 2>&1 | sort",
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.starts_with("a && rm -rf x\n"), "{r:?}");
    assert!(r.stdout.contains("missing-file"), "{r:?}");
    let r = bash(&ws, &allow, "ls missing-file");
    assert!(r.stdout.contains("[exit status 2]"), "{r:?}");

    // Here-documents and here-strings feed stdin.
    let r = bash(
        &ws,
        &allow,
        "cat <<'EOF'\n$HOME stays text\nEOF\nwc -c <<< abc",
    );
    assert_eq!(r.stdout, "$HOME stays text\n4\n", "{r:?}");
}

#[test]
fn a_denied_command_never_starts_a_process() {
    let ws = Workspace::new();
    let r = bash(
        &ws,
        &["--read", ".", "--write", ".", "--allow", "touch"],
        "touch started.marker && rm -rf src",
    );
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("denied by rawko-policy"), "{r:?}");
    assert!(r.stderr.contains("`rm -rf src` is not allowed"), "{r:?}");
    assert!(!ws.path().join("started.marker").exists());
    // An allowed command that the executor cannot run does not start either.
    let r = bash(
        &ws,
        &[
            "--read", ".", "--write", ".", "--allow", "touch", "--allow", "echo",
        ],
        "touch started.marker; echo $HOME",
    );
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr.contains("parameter expansion is not supported"),
        "{r:?}"
    );
    assert!(!ws.path().join("started.marker").exists());
}

#[test]
fn a_timeout_kills_the_command_and_everything_it_started() {
    let ws = Workspace::new();
    let input = serde_json::json!({
        "command": "echo 47.25 47.25 | xargs -n1 -P2 sleep; echo never",
        "timeout": 1000
    })
    .to_string();
    let started = std::time::Instant::now();
    let r = run(
        &ws,
        &[
            "tool", "call", "Bash", "--read", ".", "--allow", "sleep", "--allow", "echo",
            "--allow", "xargs *", "--input", &input,
        ],
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "{r:?}"
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("timed out after 1 s"), "{r:?}");
    assert!(!r.stdout.contains("never"), "{r:?}");
    let left = processes_with("sleep 47.25");
    assert!(left.is_empty(), "still running: {left:?}");
}

#[test]
fn output_is_capped_with_a_notice() {
    let ws = Workspace::new();
    let big: String = (0..50_000).map(|i| format!("line {i}\n")).collect();
    ws.write("big.txt", &big);
    let r = bash(&ws, &["--read", ".", "--allow", "cat"], "cat big.txt");
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.starts_with("line 0\nline 1\n"),
        "{}",
        &r.stdout[..100]
    );
    assert!(r.stdout.trim_end().ends_with("line 49999"), "tail missing");
    assert!(r.stdout.contains("output truncated"), "no notice");
    assert!(
        r.stdout.chars().count() < 30_500,
        "{} chars",
        r.stdout.chars().count()
    );
}

#[test]
fn the_environment_is_scrubbed() {
    let ws = Workspace::new();
    let input = serde_json::json!({ "command": "env" }).to_string();
    let out = rawko(&ws)
        .env("RAWKO_TEST_SECRET_TOKEN", "sk-do-not-leak")
        .env("LD_PRELOAD", "")
        .args([
            "tool", "call", "Bash", "--read", ".", "--allow", "env", "--input", &input,
        ])
        .output()
        .unwrap();
    let r = Run::of(out);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(!r.stdout.contains("sk-do-not-leak"), "{r:?}");
    assert!(!r.stdout.contains("LD_PRELOAD"), "{r:?}");
    assert!(r.stdout.contains("PATH="), "{r:?}");
    assert!(r.stdout.contains("TERM=dumb"), "{r:?}");
}

/// A command whose reader goes away ends by SIGPIPE, as it does in a shell: the program starts
/// with every signal at its default, confined or not (the helper and the reaper are Rust
/// programs, whose runtime ignores SIGPIPE, and that was passed on through exec).
#[test]
fn a_command_starts_with_sigpipe_at_its_default() {
    let ws = Workspace::new();
    for extra in [&[][..], &["--no-sandbox"][..]] {
        let mut args = extra.to_vec();
        args.extend_from_slice(&["--read", ".", "--read", "/proc", "--allow", "yes"]);
        args.extend_from_slice(&["--allow", "head *", "--allow", "grep *"]);
        let r = bash(&ws, &args, "grep SigIgn /proc/self/status; yes | head -n 1");
        assert_eq!(r.code, 0, "{extra:?}: {r:?}");
        assert!(r.stdout.contains("\ny\n"), "{extra:?}: {r:?}");
        assert!(!r.stdout.contains("Broken pipe"), "{extra:?}: {r:?}");
        // SIGPIPE is signal 13: bit 12 of the mask of ignored signals.
        let ignored = r
            .stdout
            .lines()
            .find_map(|l| l.strip_prefix("SigIgn:"))
            .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
            .unwrap_or_else(|| panic!("{extra:?}: {r:?}"));
        assert_eq!(
            ignored & (1 << 12),
            0,
            "{extra:?}: SIGPIPE is ignored: {r:?}"
        );
    }
}

/// `python3` writing `path` under a policy that allows any python3 and a workspace grant.
fn python_writes(ws: &Workspace, path: &std::path::Path) -> Run {
    let script = format!("open('{}', 'w').write('x'); print('wrote')", path.display());
    let input = serde_json::json!({ "command": format!("python3 -c \"{script}\"") }).to_string();
    run(
        ws,
        &[
            "-v",
            "tool",
            "call",
            "Bash",
            "--read",
            ".",
            "--write",
            ".",
            "--allow",
            "python3 *",
            "--input",
            &input,
        ],
    )
}

#[test]
fn writes_outside_the_grants_are_refused_by_the_kernel() {
    // python3 writes where the policy cannot see; landlock has the last word.
    let ws = Workspace::new();
    let outside = std::env::temp_dir().join(format!("rawko-landlock-{}", std::process::id()));
    let r = python_writes(&ws, &outside);
    assert!(!outside.exists(), "landlock did not stop the write: {r:?}");
    if r.stderr.contains("landlock is not available") {
        // An old kernel: the write failed for another reason, and rawko said so.
        return;
    }
    assert!(r.stdout.contains("Permission denied"), "{r:?}");
    assert!(!r.stdout.contains("wrote"), "{r:?}");
    // Inside the workspace the same program may write.
    let inside = ws.path().join("in.txt");
    let r = python_writes(&ws, &inside);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("wrote") && inside.exists(), "{r:?}");
}

#[test]
fn ask_is_denied_when_nobody_is_at_a_terminal() {
    let ws = Workspace::new();
    let filter = std::fs::read(rawko_test_artifacts::ASK_FILTER).unwrap();
    ws.write(".rawko/marker.wasm", filter);
    ws.write(".rawko/config.yaml", "bash:\n  filters: [marker.wasm]\n");
    let r = bash(&ws, &["--read", ".", "--allow", "echo"], "echo please-ask");
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("nobody is at a terminal"), "{r:?}");
    let r = bash_check(&ws, &["--read", ".", "--allow", "echo"], "echo please-ask");
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stdout.starts_with("ask"), "{r:?}");
    let r = bash(&ws, &["--read", ".", "--allow", "echo"], "echo fine");
    assert_eq!((r.code, r.stdout.as_str()), (0, "fine\n"), "{r:?}");
    // A filter that is named but missing is an error, not a silently shorter chain.
    ws.write(".rawko/config.yaml", "bash:\n  filters: [missing.wasm]\n");
    let r = bash(&ws, &["--read", ".", "--allow", "echo"], "echo fine");
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("missing.wasm"), "{r:?}");
}

/// A workspace with a shell-using agent and a read-only one.
fn agents_workspace() -> Workspace {
    let ws = Workspace::new();
    ws.write("src/main.rs", "fn main() {}\n");
    ws.write(
        ".rawko/agents/runner.yaml",
        "name: runner\nsystemPrompt: Run things.\ntools:\n  allowed: [Read, Bash]\n  \
         bashFilter:\n    allowedCommands: [ls, 'git status', echo]\n    \
         blockedPatterns: ['secret']\ntransitions: {onSuccess: done}\n",
    );
    ws.write(
        ".rawko/agents/reader.yaml",
        "name: reader\nsystemPrompt: Read things.\ntools:\n  allowed: [Read, Grep]\n\
         transitions: {onSuccess: done}\n",
    );
    ws
}

#[test]
fn bash_check_takes_the_policy_from_the_named_agent() {
    let ws = agents_workspace();
    let check = |agent: &str, cmd: &str| bash_check(&ws, &["--agent", agent, "--json"], cmd);
    let r = check("runner", "ls -la src && git status");
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.json()["decision"], "allow");

    let r = check("runner", "git status && rm -rf src");
    assert_eq!(r.code, 1, "{r:?}");
    let v = r.json();
    assert_eq!(v["commands"][1]["program"], "rm");
    assert_eq!(v["commands"][1]["decision"], "deny");

    // The agent's blocked patterns, and its write access (it may call Bash, so it may write).
    let r = check("runner", "ls secret");
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stdout.contains("blocked pattern"), "{r:?}");
    let r = check("runner", "echo hi > notes.txt");
    assert_eq!(r.code, 0, "{r:?}");

    // An agent that may not call Bash is denied everything, by the agent's own tool list.
    let r = check("reader", "ls");
    assert_eq!(r.code, 1, "{r:?}");
    let v = r.json();
    assert_eq!(v["decision"], "deny");
    assert_eq!(v["decided_by"], "agent");
    assert!(v["reason"].as_str().unwrap().contains("Bash"), "{v}");
}

#[test]
fn bash_check_with_an_unknown_agent_is_bad_input() {
    let ws = agents_workspace();
    let r = bash_check(&ws, &["--agent", "runer"], "ls");
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("no agent named 'runer'"), "{r:?}");
    assert!(r.stderr.contains("did you mean 'runner'"), "{r:?}");
    // The agent's policy is the policy: flags that would change it are refused.
    let r = bash_check(&ws, &["--agent", "runner", "--allow", "rm"], "rm x");
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stdout.is_empty(), "{r:?}");
}

#[test]
fn redirections_never_write_into_git_or_rawko() {
    let ws = Workspace::new();
    ws.write(".git/hooks/pre-commit", "#!/bin/sh\nexit 0\n");
    ws.write(".rawko/agents/x.yaml", "name: x\n");
    std::os::unix::fs::symlink(ws.path().join(".git/hooks"), ws.path().join("hooks")).unwrap();
    let grants = [
        "--read", ".", "--write", ".", "--allow", "echo", "--allow", "ln",
    ];
    // Seen by the policy: the target, or the symlink it goes through, is under .git.
    for cmd in [
        "echo x > .git/hooks/post-checkout",
        "echo x >> .git/hooks/pre-commit",
        "echo x > hooks/pre-commit",
        "echo 'tools: {allowed: [Bash]}' >> .rawko/agents/x.yaml",
    ] {
        let r = bash(&ws, &grants, cmd);
        assert_eq!(r.code, 1, "{cmd}: {r:?}");
        assert!(
            r.stderr.contains(".git") || r.stderr.contains(".rawko"),
            "{r:?}"
        );
    }
    // Not visible when judged: the link is made by the command line itself. The executor checks
    // where the file it opens really is.
    for cmd in [
        "ln -s .git/hooks/post-checkout h1 && echo pwned > h1",
        "ln -s .git/hooks/pre-commit h2 && echo pwned > h2",
        "ln -s .rawko/agents h3 && echo pwned >> h3/x.yaml",
    ] {
        let r = bash(&ws, &grants, cmd);
        assert_eq!(r.code, 0, "{cmd}: {r:?}");
        assert!(r.stdout.contains("refused"), "{cmd}: {r:?}");
        assert!(!r.stdout.contains("pwned"), "{r:?}");
    }
    assert_eq!(ws.read(".git/hooks/pre-commit"), "#!/bin/sh\nexit 0\n");
    assert_eq!(ws.read(".rawko/agents/x.yaml"), "name: x\n");
    assert!(!ws.path().join(".git/hooks/post-checkout").exists());
    // Elsewhere the same redirection writes.
    let r = bash(&ws, &grants, "echo fine > notes.txt");
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(ws.read("notes.txt"), "fine\n");
}

#[test]
fn no_shell_ever_reads_a_command_line_again() {
    // A policy that allows everything: what stops these is the executor, which never hands
    // text to a shell, however the command gets there.
    let ws = Workspace::new();
    let grants = ["--read", ".", "--write", ".", "--allow", "*"];
    for (cmd, made) in [
        ("bash -c 'touch by-bash'", "by-bash"),
        ("sh -ec 'touch by-sh'", "by-sh"),
        ("timeout 5 bash -c 'touch by-timeout'", "by-timeout"),
        ("nice -n 1 dash -c 'touch by-dash'", "by-dash"),
        (
            "find . -maxdepth 0 -exec sh -c 'touch by-find' \\;",
            "by-find",
        ),
        ("watch -n 1 touch by-watch", "by-watch"),
    ] {
        let r = bash(&ws, &grants, cmd);
        assert_eq!(r.code, 1, "{cmd}: {r:?}");
        assert!(
            r.stderr.contains("does not run this command")
                && r.stderr.contains("run the commands directly"),
            "{cmd}: {r:?}"
        );
        assert!(!ws.path().join(made).exists(), "{cmd} ran");
        let r = bash_check(&ws, &grants, cmd);
        assert_eq!(r.code, 1, "{cmd}: {r:?}");
        assert!(r.stdout.contains("decided by executor"), "{cmd}: {r:?}");
    }
    // The same commands, run directly, do run.
    let r = bash(
        &ws,
        &grants,
        "touch direct && find . -maxdepth 1 -name direct",
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert!(ws.path().join("direct").exists(), "{r:?}");
}

#[test]
fn a_skipped_cd_stops_the_run_instead_of_running_where_nothing_was_judged() {
    // The filters judged `touch` as running in src; `true ||` skips the cd, so it would run in
    // the workspace root instead. The executor stops before starting it.
    let ws = Workspace::new();
    ws.write("src/keep.txt", "x");
    let grants = [
        "--read", ".", "--write", ".", "--allow", "touch", "--allow", "true",
    ];
    let r = bash(&ws, &grants, "true || cd src; touch made-here");
    assert!(r.stdout.contains("a `cd` did not run"), "{r:?}");
    assert!(r.stdout.contains("[exit status 1]"), "{r:?}");
    assert!(!ws.path().join("made-here").exists(), "{r:?}");
    assert!(!ws.path().join("src/made-here").exists(), "{r:?}");
    // When the cd does run, the command runs where it was judged.
    let r = bash(&ws, &grants, "true && cd src; touch made-here");
    assert_eq!(r.code, 0, "{r:?}");
    assert!(ws.path().join("src/made-here").exists(), "{r:?}");
}

/// A file-descriptor number too large for 32 bits made the shell parser (brush-parser) panic
/// and took the whole process down; a model could send it as a Bash command. It must be denied
/// with a reason, and the Bash tool must report it as a refused call.
#[test]
fn regression_fd_number_over_32_bits_panicked_the_parser() {
    let ws = Workspace::new();
    for command in ["4294967296>", "echo hi 99999999999>&1"] {
        let r = bash_check(&ws, &["--agent", "developer", "--json"], command);
        assert_eq!(r.code, 1, "{command}: {r:?}");
        let v = r.json();
        assert_eq!(v["decision"], "deny", "{command}: {v}");
        assert_eq!(v["decided_by"], "parser", "{command}: {v}");
        let r = bash(&ws, &["--agent", "developer", "--json"], command);
        assert_ne!(r.code, 101, "{command}: the Bash tool panicked: {r:?}");
        assert!(r.stdout.contains("parser"), "{command}: {r:?}");
    }
}

/// `rawko args...` with backtraces asked for, so that any panic message would be loud.
fn with_backtraces(ws: &Workspace, args: &[&str]) -> Run {
    let out = rawko(ws).args(args).env("RUST_BACKTRACE", "1").output();
    Run::of(out.expect("run rawko"))
}

/// The parser's panics on numbers too large for it were caught and turned into a deny, but the
/// panic message and a backtrace still reached the terminal first, as if rawko had crashed. They
/// are refused before the parser sees them, quietly, naming the number; wherever the number
/// sits (a command, a substitution the parser reads on its worker thread, an assignment).
#[test]
fn regression_caught_parser_panics_printed_a_crash_report() {
    let ws = Workspace::new();
    for (command, names) in [
        ("4294967296>", "file-descriptor number"),
        ("2147483648<&-", "file-descriptor number"),
        ("9999999999999999999999999<(", "file-descriptor number"),
        ("echo $(4294967296>x)", "file-descriptor number"),
        (" ~9999999999999999999999999", "directory-stack"),
        ("a=~-99999999999999999999", "directory-stack"),
        ("echo ${x:-~+99999999999999999999}", "directory-stack"),
    ] {
        for json in [true, false] {
            let mut flags = vec!["--agent", "developer"];
            if json {
                flags.push("--json");
            }
            let r = with_backtraces(
                &ws,
                &[&["bash", "check"][..], &flags, &["--", command]].concat(),
            );
            assert!(!r.stderr.contains("panicked"), "{command}: {r:?}");
            assert!(!r.stderr.contains("backtrace"), "{command}: {r:?}");
            assert_eq!(r.code, 1, "{command}: {r:?}");
            if json {
                let v = r.json();
                assert_eq!(v["decision"], "deny", "{command}: {v}");
                assert_eq!(v["decided_by"], "parser", "{command}: {v}");
                let reason = v["reason"].as_str().unwrap_or_default();
                assert!(reason.contains(names), "{command}: {v}");
            } else {
                assert!(r.stdout.starts_with("deny: "), "{command}: {r:?}");
                assert!(r.stdout.contains(names), "{command}: {r:?}");
            }
        }
        let input = serde_json::json!({ "command": command }).to_string();
        let r = with_backtraces(
            &ws,
            &[
                "tool",
                "call",
                "Bash",
                "--agent",
                "developer",
                "--input",
                &input,
            ],
        );
        assert!(!r.stderr.contains("panicked"), "{command}: {r:?}");
        assert_eq!(r.code, 1, "{command}: {r:?}");
        assert!(r.stderr.contains("denied by parser"), "{command}: {r:?}");
        assert!(r.stderr.contains(names), "{command}: {r:?}");
    }
    // Numbers a shell reads as words, not as descriptors or stack indexes, still parse.
    for command in [
        "echo 4294967296 > out",
        "echo x4294967296>out",
        "echo a:~99999999999999999999",
        "echo '~99999999999999999999'",
    ] {
        let r = bash_check(
            &ws,
            &["--allow", "echo *", "--write", ".", "--json"],
            command,
        );
        assert!(!r.stderr.contains("panicked"), "{command}: {r:?}");
        assert_eq!(r.json()["decision"], "allow", "{command}: {r:?}");
    }
}

/// Found by the `shell` fuzz target: a short command full of unclosed `(` kept the parser busy
/// for seconds (and, a few `(` more, for hours), and a here-document with an empty delimiter
/// made it allocate until rawko died. Both are denied by the parser's bounds at once.
#[test]
fn regression_fuzz_shell_stall_and_memory_exhaustion_are_denied_at_once() {
    let ws = Workspace::new();
    let broken_run = "((((((||((s((a(t(||(((((||((s((a(t(||((((a((((at";
    let run = format!("cat $<{} - ((<EO", "(".repeat(24));
    // And 13 bytes that sent the tokenizer into an endless loop allocating gigabytes.
    let nested = format!("echo {}1{}", "${a[".repeat(6), "]}".repeat(6));
    // And 166 bytes no guard in front of the parser catches: refused when the parse overruns
    // its time budget.
    let overrun = "ru;or[aammX[for =2m${a[rrrrrrrrr[aammX[=2m${a[E((*$}$$dfor $xargt$func[for =2m${a[rrrrrrrrr[aammX[=2m${a[E((*$}$$dfor $xargt$function }$$$tion }$$$7fo% $xargdo ?-r$$$";
    for command in [
        overrun,
        broken_run,
        run.as_str(),
        "a <<'' <<<#",
        "bahhf\x0c<<\x0c<<<#",
        nested.as_str(),
    ] {
        let r = bash_check(&ws, &["--agent", "developer", "--json"], command);
        assert_eq!(r.code, 1, "{command}: {r:?}");
        let v = r.json();
        assert_eq!(v["decision"], "deny", "{command}: {v}");
        assert_eq!(v["decided_by"], "parser", "{command}: {v}");
    }
}

/// Found while fuzzing: a here-document body with `$((` and `$(` left unclosed took the word
/// parser half a minute (ten `$((` took minutes). Through the binary, with `cat` allowed: denied
/// at once, naming the here-document.
#[test]
fn regression_fuzz_here_document_with_unclosed_substitutions_stalled_the_verdict() {
    let ws = Workspace::new();
    for body in [
        "$((".repeat(10),
        "$(".repeat(16),
        "$(\")\"".repeat(16),
        "$[".repeat(12),
    ] {
        let command = format!("cat <<EOF\n{body}\nEOF");
        let started = std::time::Instant::now();
        let r = bash_check(&ws, &["--allow", "cat *", "--json"], &command);
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "{command}"
        );
        assert_eq!(r.code, 1, "{command}: {r:?}");
        let v = r.json();
        assert_eq!(v["decision"], "deny", "{command}: {v}");
        assert!(v.to_string().contains("here-document"), "{command}: {v}");
    }
    // Quoting the delimiter keeps the text as it is, and is allowed.
    let r = bash_check(
        &ws,
        &["--allow", "cat *", "--json"],
        "cat <<'EOF'\n$(($((\nEOF",
    );
    assert_eq!(r.json()["decision"], "allow", "{r:?}");
}

/// The private temporary directories of rawkos that are gone (killed before they could clean up)
/// are removed by the next one; a live rawko's are left alone.
#[test]
fn temporary_directories_of_dead_runs_do_not_pile_up() {
    let ws = Workspace::new();
    let tmp = tempfile::tempdir().unwrap();
    let dead = tmp.path().join(format!("rawko-exec-{}-abc", i32::MAX));
    let live = tmp
        .path()
        .join(format!("rawko-exec-{}-def", std::process::id()));
    for d in [&dead, &live] {
        std::fs::create_dir_all(d.join("left/behind")).unwrap();
    }
    let input = serde_json::json!({ "command": "echo hi" }).to_string();
    let r = Run::of(
        crate::support::rawko(&ws)
            .env("TMPDIR", tmp.path())
            .args(["tool", "call", "Bash", "--read", ".", "--allow", "echo *"])
            .args(["--input", &input])
            .output()
            .unwrap(),
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert!(!dead.exists(), "a dead run's directory is still there");
    assert!(live.exists(), "a live run's directory was removed");
    // And this run's own is gone when it ends.
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(left.len(), 1, "{left:?}");
}

/// rawko killed while a command runs: the command dies with it, in the kernel sandbox and
/// without it.
#[test]
fn a_command_does_not_outlive_a_killed_rawko() {
    for (sandbox, seconds) in [(true, "53.75"), (false, "54.75")] {
        let ws = Workspace::new();
        let input = serde_json::json!({ "command": format!("sleep {seconds}") }).to_string();
        let mut c = rawko(&ws);
        if !sandbox {
            c.arg("--no-sandbox");
        }
        let mut child = c
            .args(["tool", "call", "Bash", "--read", ".", "--allow", "sleep *"])
            .args(["--input", &input])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // The program itself, not rawko (whose arguments hold the same text).
        let needle = format!("sleep {seconds}");
        let running = || -> Vec<String> {
            processes_with(&needle)
                .into_iter()
                .filter(|p| p.starts_with(&needle))
                .collect()
        };
        let started = std::time::Instant::now();
        while running().is_empty() {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(20),
                "never started"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        child.kill().unwrap(); // SIGKILL: no chance to clean up
        child.wait().unwrap();
        let started = std::time::Instant::now();
        while !running().is_empty() {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(5),
                "sandbox {sandbox}: the command outlived rawko: {:?}",
                running()
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
}

/// A program that daemonizes (a new session, then a fork) leaves the command's process group,
/// so killing the group misses it. Without the kernel sandbox's PID namespace (`--no-sandbox`,
/// mode `full`), rawko's reaper still takes it down: when the command ends, and when rawko is
/// killed while it runs.
#[test]
fn a_daemon_does_not_outlive_an_unconfined_command_or_a_killed_rawko() {
    // The programs themselves, not rawko or its reaper (whose arguments hold the same text).
    let running = |needle: &str| -> Vec<String> {
        processes_with(needle)
            .into_iter()
            .filter(|p| !p.contains("rawko"))
            .collect()
    };
    let gone_soon = |needle: &str, what: &str| {
        let started = std::time::Instant::now();
        while !running(needle).is_empty() {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(5),
                "{what}: {:?}",
                running(needle)
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    };
    let ws = Workspace::new();
    let bash = |command: &str| {
        let input = serde_json::json!({ "command": command }).to_string();
        let mut c = rawko(&ws);
        c.args(["--no-sandbox", "tool", "call", "Bash", "--read", "."])
            .args(["--allow", "setsid *", "--allow", "sleep *"])
            .args(["--input", &input]);
        c
    };

    // The command ends; its daemon goes with it.
    let r = Run::of(bash("setsid -f sleep 61.25").output().unwrap());
    assert_eq!(r.code, 0, "{r:?}");
    gone_soon("sleep 61.25", "the daemon outlived its command");

    // The command overruns its deadline: stopped, with its daemon.
    let input = serde_json::json!({
        "command": "python3 -c \"import os, time; os.system('setsid -f sleep 64.25'); time.sleep(65.25)\"",
        "timeout": 1500,
    })
    .to_string();
    let r = Run::of(
        rawko(&ws)
            .args(["--no-sandbox", "tool", "call", "Bash", "--read", "."])
            .args([
                "--allow",
                "python3 *",
                "--allow",
                "setsid *",
                "--allow",
                "sleep *",
            ])
            .args(["--input", &input])
            .output()
            .unwrap(),
    );
    assert!(
        format!("{}{}", r.stdout, r.stderr).contains("timed out"),
        "{r:?}"
    );
    gone_soon("time.sleep(65.25)", "the program outlived its deadline");
    gone_soon("sleep 64.25", "the daemon outlived its command's deadline");

    // rawko is killed while a program that started a daemon runs; both go with it.
    let program = "time.sleep(63.25)";
    let mut child = bash(
        "python3 -c \"import os, time; os.system('setsid -f sleep 62.25'); time.sleep(63.25)\"",
    )
    .args(["--allow", "python3 *"])
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null())
    .spawn()
    .unwrap();
    let started = std::time::Instant::now();
    while running("sleep 62.25").is_empty() {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(
        !running(program).is_empty(),
        "the program is not running: {:?}",
        processes_with("63.25")
    );
    child.kill().unwrap(); // SIGKILL: no chance to clean up
    child.wait().unwrap();
    gone_soon(program, "the program outlived rawko");
    gone_soon("sleep 62.25", "the daemon outlived rawko");
}
