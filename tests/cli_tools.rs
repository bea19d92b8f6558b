//! The first-party tools through the real `rawko` binary: `rawko tools list` and
//! `rawko tool call`, good inputs and bad.

use crate::support::{Workspace, run};

fn call(ws: &Workspace, tool: &str, grant: &str, input: &str) -> crate::support::Run {
    run(ws, &["tool", "call", tool, grant, ".", "--input", input])
}

#[test]
fn tools_list_names_every_first_party_tool() {
    let ws = Workspace::new();
    let r = run(&ws, &["tools", "list"]);
    assert_eq!(r.code, 0, "{r:?}");
    for tool in ["Read", "Write", "Edit", "Glob", "Grep", "LS"] {
        assert!(
            r.stdout.lines().any(|l| l.starts_with(tool)),
            "{tool} missing: {r:?}"
        );
    }
    let r = run(&ws, &["tools", "list", "--json"]);
    let tools = r.json();
    let read = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "Read")
        .unwrap();
    assert_eq!(read["plugin"], "rawko-tools");
    assert_eq!(read["input_schema"]["required"][0], "path");
}

#[test]
fn read_windows_and_refusals() {
    let ws = Workspace::new();
    let big: String = (1..=200_000).map(|i| format!("line {i}\n")).collect();
    ws.write("big.txt", &big);
    ws.write("empty.txt", "");
    ws.write("latin1.txt", b"caf\xe9\n");
    ws.write("bin.dat", b"\x00\x01\x02");

    let r = call(
        &ws,
        "Read",
        "--read",
        r#"{"path":"big.txt","offset":150000,"limit":2}"#,
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout
            .starts_with("150000\tline 150000\n150001\tline 150001\n"),
        "{r:?}"
    );
    assert!(r.stdout.contains("of 200000"), "{r:?}");

    // Without a limit, the default window and the output budget both hold.
    let r = run(
        &ws,
        &[
            "tool",
            "call",
            "Read",
            "--read",
            ".",
            "--max-output",
            "10000",
            "--input",
            r#"{"path":"big.txt","limit":100000}"#,
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.len() <= 10_001, "{} bytes", r.stdout.len());
    assert!(r.stdout.contains("output size limit reached"), "{r:?}");

    let r = call(&ws, "Read", "--read", r#"{"path":"empty.txt"}"#);
    assert_eq!(
        (r.code, r.stdout.as_str()),
        (0, "(empty.txt is empty)\n"),
        "{r:?}"
    );

    let r = call(&ws, "Read", "--read", r#"{"path":"latin1.txt"}"#);
    assert!(r.code == 0 && r.stdout.contains("caf\u{FFFD}"), "{r:?}");

    let r = call(&ws, "Read", "--read", r#"{"path":"bin.dat"}"#);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("binary"), "{r:?}");

    let r = call(&ws, "Read", "--read", r#"{"path":"missing.txt"}"#);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("no such file"), "{r:?}");
}

#[test]
fn bad_inputs_exit_2_with_the_reason() {
    let ws = Workspace::new();
    for (input, why) in [
        (r#"{}"#, "\"path\" is a required property"),
        (r#"{"path": 7}"#, "is not of type \"string\""),
        (r#"{"path": "a", "extra": 1}"#, "extra"),
        (r#"not json"#, "not valid JSON"),
    ] {
        let r = call(&ws, "Read", "--read", input);
        assert_eq!(r.code, 2, "{input}: {r:?}");
        assert!(r.stderr.contains(why), "{input}: {r:?}");
    }
    let r = call(&ws, "Nope", "--read", "{}");
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("no tool named `Nope`"), "{r:?}");
    let r = run(
        &ws,
        &[
            "tool",
            "call",
            "Read",
            "--read",
            "does-not-exist",
            "--input",
            "{}",
        ],
    );
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("cannot grant"), "{r:?}");
    let r = run(&ws, &["tool", "call", "Read"]);
    assert_eq!(r.code, 2, "missing --input is a usage error: {r:?}");
}

#[test]
fn write_edit_and_their_grants() {
    let ws = Workspace::new();
    let r = call(
        &ws,
        "Write",
        "--write",
        r#"{"path":"src/lib.rs","content":"fn a() {}\nfn a() {}\n"}"#,
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(ws.read("src/lib.rs"), "fn a() {}\nfn a() {}\n");

    // Only a read grant: refused, nothing written.
    let r = call(&ws, "Write", "--read", r#"{"path":"x.txt","content":"x"}"#);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("read-only"), "{r:?}");
    assert!(!ws.path().join("x.txt").exists());

    // Ambiguous edit refused, then made unique.
    let r = call(
        &ws,
        "Edit",
        "--write",
        r#"{"path":"src/lib.rs","old_string":"fn a()","new_string":"fn b()"}"#,
    );
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("occurs 2 times"), "{r:?}");
    let r = call(
        &ws,
        "Edit",
        "--write",
        r#"{"path":"src/lib.rs","old_string":"fn a()","new_string":"fn b()","replace_all":true}"#,
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(ws.read("src/lib.rs"), "fn b() {}\nfn b() {}\n");

    // Writing outside the grant, by any spelling, is refused.
    for path in ["../escape.txt", "/tmp/rawko-escape.txt"] {
        let input = format!(r#"{{"path":"{path}","content":"x"}}"#);
        let r = call(&ws, "Write", "--write", &input);
        assert_eq!(r.code, 1, "{path}: {r:?}");
        assert!(r.stderr.contains("outside the granted paths"), "{r:?}");
    }
    assert!(!ws.path().parent().unwrap().join("escape.txt").exists());
}

#[test]
fn glob_grep_and_ls() {
    let ws = Workspace::new();
    ws.write("src/main.rs", "fn main() {\n    // TODO: more\n}\n");
    ws.write("src/util/mod.rs", "// TODO later\n");
    ws.write("target/debug/gen.rs", "// TODO generated\n");
    ws.write(".gitignore", "target/\n");
    ws.write("README.md", "# todo list\n");

    let r = call(&ws, "Glob", "--read", r#"{"pattern":"**/*.rs"}"#);
    assert_eq!(r.stdout, "src/main.rs\nsrc/util/mod.rs\n", "{r:?}");

    let r = call(
        &ws,
        "Grep",
        "--read",
        r#"{"pattern":"TODO","output_mode":"content","glob":"*.rs"}"#,
    );
    assert_eq!(
        r.stdout, "src/main.rs:2:    // TODO: more\nsrc/util/mod.rs:1:// TODO later\n",
        "{r:?}"
    );

    let r = call(
        &ws,
        "Grep",
        "--read",
        r#"{"pattern":"todo","case_insensitive":true,"output_mode":"count"}"#,
    );
    assert_eq!(
        r.stdout, "README.md:1\nsrc/main.rs:1\nsrc/util/mod.rs:1\n",
        "{r:?}"
    );

    let r = call(&ws, "Grep", "--read", r#"{"pattern":"(unclosed"}"#);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("bad regular expression"), "{r:?}");

    let r = call(&ws, "LS", "--read", r#"{"path":"src"}"#);
    assert_eq!(r.stdout, "main.rs  (32 bytes)\nutil/\n", "{r:?}");
}

#[test]
fn json_output_reports_success_and_failure() {
    let ws = Workspace::new();
    ws.write("a.txt", "alpha\n");
    let r = run(
        &ws,
        &[
            "tool",
            "call",
            "Read",
            "--read",
            ".",
            "--json",
            "--input",
            r#"{"path":"a.txt"}"#,
        ],
    );
    let v = r.json();
    assert_eq!(v["ok"], true);
    assert_eq!(v["output"], "     1\talpha\n");
    assert!(v["duration_ms"].as_f64().unwrap() > 0.0);

    let r = run(
        &ws,
        &[
            "tool",
            "call",
            "Read",
            "--json",
            "--input",
            r#"{"path":"a.txt"}"#,
        ],
    );
    assert_eq!(r.code, 1, "{r:?}");
    let v = r.json();
    assert_eq!(v["ok"], false);
    assert_eq!(v["error"]["code"], "denied");
    // As the help promises, an error says how long it took too.
    assert!(v["duration_ms"].as_f64().is_some(), "{v}");
}

#[test]
fn help_and_version() {
    let ws = Workspace::new();
    let r = run(&ws, &["--help"]);
    assert_eq!(r.code, 0);
    assert!(r.stdout.contains("Usage: rawko"), "{r:?}");
    assert!(r.stdout.contains("tool"), "{r:?}");
    let r = run(&ws, &["--version"]);
    assert_eq!(
        r.stdout.trim(),
        format!("rawko {}", env!("CARGO_PKG_VERSION"))
    );
    let r = run(&ws, &["tool", "call", "--help"]);
    assert!(
        r.stdout.contains("--read <DIR>") && r.stdout.contains("Examples:"),
        "{r:?}"
    );
}

/// A Read result of several megabytes with terminal sequences, C1 controls, bidirectional
/// overrides and carriage returns spread through it, some across the printer's buffer and
/// chunk boundaries: what `rawko tool call` prints is exactly the sanitiser's view of the
/// result `--json` gives, and nothing a terminal would obey gets through.
#[test]
fn a_large_result_is_printed_exactly_as_the_sanitiser_shows_it() {
    let ws = Workspace::new();
    let hostile = [
        "\u{1b}[2J",
        "\u{1b}]0;pwned\u{7}",
        "\u{9b}31m",
        "\u{202e}",
        "\u{2066}",
        "\u{feff}",
        "\r",
        "\u{7f}",
    ];
    let mut text = String::new();
    let mut i = 0usize;
    while text.len() < 3 << 20 {
        // Mostly plain lines, some with a non-ASCII character, every 997th with an attack;
        // lengths vary so the attacks land at every offset of a chunk.
        text.push_str(&"x".repeat(i % 131));
        if i.is_multiple_of(7) {
            text.push_str(" é ✓");
        }
        if i.is_multiple_of(997) {
            text.push_str(hostile[(i / 997) % hostile.len()]);
            text.push_str("tail");
        }
        text.push('\n');
        i += 1;
    }
    ws.write("big.txt", &text);
    let args = |json: bool| {
        let mut a = vec![
            "tool",
            "call",
            "Read",
            "--read",
            ".",
            "--max-output",
            "67108864",
            "--input",
            r#"{"path":"big.txt","limit":100000000}"#,
        ];
        if json {
            a.push("--json");
        }
        a
    };
    let r = run(&ws, &args(true));
    assert_eq!(r.code, 0, "{:.300}", r.stderr);
    let output = r.json()["output"].as_str().unwrap().to_string();
    assert!(output.contains("\u{1b}[2J") && output.len() > 3 << 20);

    let r = run(&ws, &args(false));
    assert_eq!(r.code, 0, "{:.300}", r.stderr);
    let mut expected = rawko_text::block(&output, usize::MAX).into_owned();
    if !expected.ends_with('\n') {
        expected.push('\n');
    }
    assert!(
        r.stdout == expected,
        "the printed result differs from the sanitiser's"
    );
    for obeyed in [
        '\u{1b}', '\u{9b}', '\u{202e}', '\u{2066}', '\u{feff}', '\r', '\u{7f}',
    ] {
        assert!(!r.stdout.contains(obeyed), "{obeyed:?} was printed raw");
    }
    assert!(r.stdout.contains("\\u{1b}[2J") && r.stdout.contains("\\u{202e}tail"));
}

/// A plugin that hands its result over in pieces is printed as it goes, and still cannot print
/// more than the call's output budget: past it the call fails with the budget named, and the
/// user is told that what was printed is only the start.
#[test]
fn a_plugin_handing_over_more_than_its_budget_prints_no_more_than_it() {
    let ws = Workspace::new();
    // `rawko tool call HandOver` with n pieces, the default budget of 1 MiB, and `extra` flags.
    let call = |n: &str, extra: &[&str]| {
        let input = format!(r#"{{"n":{n}}}"#);
        let mut args = vec![
            "tool",
            "call",
            "HandOver",
            "--plugin",
            rawko_test_artifacts::HOSTILE_TOOL,
            "--input",
            &input,
        ];
        args.extend_from_slice(extra);
        run(&ws, &args)
    };
    // Within the budget: every piece, then the returned end, and one newline.
    let r = call("3", &[]);
    assert_eq!(r.code, 0, "{:.300}", r.stderr);
    assert_eq!(r.stdout.len(), 3 * 65536 + "end\n".len());
    assert!(r.stdout.ends_with("yyyend\n"));

    // 10,000 pieces of 64 KiB (625 MiB) against a budget of 1 MiB.
    let r = call("10000", &["--max-output", "1048576"]);
    assert_eq!(r.code, 1, "{:.300}", r.stderr);
    assert!(
        r.stdout.len() <= (1 << 20) + 1,
        "{} bytes printed past a budget of 1 MiB",
        r.stdout.len()
    );
    assert!(r.stderr.contains("output size budget"), "{}", r.stderr);
    assert!(
        r.stderr.contains("only the start of the tool's output"),
        "{}",
        r.stderr
    );
    // As JSON nothing is printed but the error.
    let r = call("10000", &["--json"]);
    assert_eq!(r.code, 1, "{:.300}", r.stderr);
    assert_eq!(r.json()["error"]["code"], "budget_output", "{r:?}");
}

/// A reader that stops early (`| head -1`) is not an error, now that results are written
/// through a buffer.
#[test]
fn a_closed_pipe_ends_a_large_result_quietly() {
    use std::io::{BufRead, BufReader};
    let ws = Workspace::new();
    ws.write("big.txt", "a line of the file\n".repeat(200_000));
    let mut child = crate::support::rawko(&ws)
        .args([
            "tool",
            "call",
            "Read",
            "--read",
            ".",
            "--max-output",
            "67108864",
            "--input",
            r#"{"path":"big.txt","limit":100000000}"#,
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert_eq!(first, "     1\ta line of the file\n");
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `rawko bench --quick --json` through the real binary: every group's rows, each with a
/// figure, a reference and a ratio, or the reason it was skipped.
#[test]
fn bench_gives_every_row_a_ratio_or_a_reason() {
    let ws = Workspace::new();
    let r = run(&ws, &["bench", "--quick", "--json"]);
    assert_eq!(r.code, 0, "{r:?}");
    let v = r.json();
    assert_eq!(v["quick"], true);
    let rows = v["rows"].as_array().unwrap();
    for group in ["call", "verdict", "read", "search", "discovery", "cli"] {
        assert!(
            rows.iter().any(|row| row["group"] == group),
            "no {group} rows: {v:#}"
        );
    }
    for row in rows {
        assert!(
            row["figure"].as_str().is_some_and(|s| !s.is_empty()),
            "{row}"
        );
        assert!(
            row["reference"].as_str().is_some_and(|s| !s.is_empty()),
            "{row}"
        );
        match row["skipped"].as_str() {
            Some(why) => assert!(!why.is_empty(), "{row}"),
            None => {
                assert!(row["ratio"].as_f64().is_some_and(|x| x > 0.0), "{row}");
                assert!(
                    row["rawko_seconds"].as_f64().is_some_and(|x| x > 0.0),
                    "{row}"
                );
                assert!(row["reference_seconds"].as_f64().is_some(), "{row}");
            }
        }
    }
    // The rows a source checkout alone can give are not here, and the sandboxed Read has its
    // native reference in the binary.
    assert!(rows.iter().all(|row| row["group"] != "acp"));
    assert!(
        rows.iter()
            .any(|row| row["reference"] == "same Read code, native" && row["ratio"].is_number()),
        "{v:#}"
    );

    // The table says the same in words.
    let r = run(&ws, &["bench", "--quick", "discovery"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("agent discovery, 1000 files"), "{r:?}");
    assert!(r.stdout.contains("read the same files"), "{r:?}");
}

/// Without ripgrep on `PATH` its rows are skipped with the reason; the native rows still run.
#[test]
fn bench_without_rg_says_so() {
    let ws = Workspace::new();
    let empty = ws.path().join("empty-path");
    std::fs::create_dir_all(&empty).unwrap();
    let out = crate::support::rawko(&ws)
        .args(["bench", "--quick", "--json", "search"])
        .env("PATH", &empty)
        .output()
        .unwrap();
    let r = crate::support::Run::of(out);
    assert_eq!(r.code, 0, "{r:?}");
    let v = r.json();
    let rows = v["rows"].as_array().unwrap();
    let rg: Vec<_> = rows
        .iter()
        .filter(|row| row["reference"] == "rg -j1, subprocess")
        .collect();
    assert_eq!(rg.len(), 3, "{v:#}");
    for row in rg {
        assert_eq!(row["skipped"], "rg is not on PATH", "{row}");
    }
    assert!(
        rows.iter()
            .filter(|row| row["reference"] == "same Grep code, native")
            .all(|row| row["ratio"].is_number()),
        "{v:#}"
    );
}

/// A host tool is a module and a line in the host's registry: the test-only `HostProbe`
/// (registered in debug builds when `RAWKO_TEST_HOST_TOOLS=1`) is listed and called like the
/// built-in ones, by the host and through the same routing, and is absent otherwise.
#[test]
fn a_registered_host_tool_is_listed_and_called() {
    let ws = Workspace::new();
    let with_probe = |args: &[&str]| {
        crate::support::Run::of(
            crate::support::rawko(&ws)
                .args(args)
                .env("RAWKO_TEST_HOST_TOOLS", "1")
                .output()
                .unwrap(),
        )
    };
    let r = with_probe(&["tools", "list", "--json"]);
    assert_eq!(r.code, 0, "{r:?}");
    let tools = r.json();
    let probe = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "HostProbe")
        .unwrap_or_else(|| panic!("HostProbe is not listed: {r:?}"));
    assert_eq!(probe["plugin"], "host");
    assert_eq!(probe["input_schema"]["required"][0], "text");
    let r = with_probe(&["tools", "list"]);
    assert!(
        r.stdout.lines().any(|l| l.starts_with("HostProbe")),
        "{r:?}"
    );

    let r = with_probe(&[
        "tool",
        "call",
        "HostProbe",
        "--read",
        ".",
        "--input",
        r#"{"text":"hello"}"#,
    ]);
    assert_eq!(
        (r.code, r.stdout.trim_end()),
        (0, "probe: hello (fs.read)"),
        "{r:?}"
    );
    let r = with_probe(&[
        "tool",
        "call",
        "HostProbe",
        "--write",
        ".",
        "--json",
        "--input",
        r#"{"text":"hello"}"#,
    ]);
    let out = r.json();
    assert_eq!(out["ok"], true, "{r:?}");
    assert_eq!(out["plugin"], "host");
    assert_eq!(out["output"], "probe: hello (fs.write)");
    // Its input is checked against its schema, as every host tool's is.
    let r = with_probe(&[
        "tool",
        "call",
        "HostProbe",
        "--read",
        ".",
        "--input",
        r#"{"command":"touch ran"}"#,
    ]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("invalid input for HostProbe"), "{r:?}");
    assert!(!ws.path().join("ran").exists());

    // Agents are read against what the tool says of itself: naming it in an agent file is no
    // warning, and an agent allowed only it is judged read-only by the class the tool gives.
    let agent = ws.write(
        ".test-config/rawko/agents/prober.md",
        "---\nname: prober\ndescription: Probes.\ntools: HostProbe\n---\nProbe.\n",
    );
    let agent = agent.to_str().unwrap();
    let r = with_probe(&["agents", "validate", agent]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        !format!("{}{}", r.stdout, r.stderr).contains("'HostProbe'"),
        "{r:?}"
    );
    let r = with_probe(&["agents", "show", "prober", "--json"]);
    assert_eq!(r.json()["sandbox"], "read-only", "{r:?}");
    let r = run(&ws, &["agents", "validate", agent]);
    assert!(
        r.stdout.contains("'HostProbe' is not a rawko tool"),
        "{r:?}"
    );

    // Without the variable there is no such tool, and nothing else answers for it.
    let r = run(&ws, &["tools", "list"]);
    assert!(!r.stdout.contains("HostProbe"), "{r:?}");
    let r = call(&ws, "HostProbe", "--read", r#"{"text":"hello"}"#);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("no tool named `HostProbe`"), "{r:?}");
}
