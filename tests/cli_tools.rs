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
