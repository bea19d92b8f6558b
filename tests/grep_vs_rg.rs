//! The sandboxed `Grep` tool against ripgrep on the same tree: for literals, classes, anchors,
//! case-insensitive and Unicode patterns, the same files and the same lines in every output mode.
//!
//! ripgrep runs with the settings that match Grep's walk: hidden files searched, `.gitignore`
//! honoured without a git repository, `.git` skipped, no global or exclude files.

use std::collections::BTreeSet;
use std::process::Command;

use crate::support::{Workspace, run};

/// A small source tree with what a walk and a search trip over.
fn tree() -> Workspace {
    let ws = Workspace::new();
    ws.write(
        "src/main.rs",
        "use std::io;\n\nfn main() {\n    let total = add(2, 40);\n    println!(\"{total}\");\n}\n\
         \nfn add(a: u32, b: u32) -> u32 {\n    a + b // TODO: overflow\n}\n",
    );
    ws.write(
        "src/lib/parse.rs",
        "pub fn parse_unchecked(s: &str) -> u64 {\n    s.parse().unwrap()\n}\n\
         // todo: errors\npub const LIMIT: u64 = 4096;\nfn  spaced  ( ) {}\n",
    );
    ws.write(
        "src/lib/crlf.txt",
        "first line\r\nError: second\r\nthird 123\r\n",
    );
    ws.write(
        "docs/guide.md",
        "# Guide\n\nRun `cargo test`.\n\n## Errors\n\nAn ERROR is logged; error codes are 3 digits: 404, 500.\n\
         Café, ÉTÉ, été, Ωmega and straße.\nno newline at the end",
    );
    ws.write("docs/empty.md", "");
    ws.write(
        "notes/fix.txt",
        "FIXME( first\nfixme without a parenthesis\n  FixMe(later) x\nxx fIXme(\n\
         STRASSE, STRAẞE and Straße\nthe \u{212A}elvin sign and kelvin\n",
    );
    ws.write(".hidden/config.toml", "token = \"TODO\"\nlimit = 10\n");
    ws.write(".gitignore", "target/\n*.log\n");
    ws.write("target/debug/out.rs", "fn main() { TODO }\n");
    ws.write("build.log", "error: TODO in log\n");
    ws.write("nested/.gitignore", "skip.txt\n");
    ws.write("nested/skip.txt", "TODO skipped by a nested ignore file\n");
    ws.write("nested/keep.txt", "TODO kept\n  indented TODO\ttab\n");
    ws.write(".git/config", "[core]\n\tTODO = true\n");
    ws.write("bin/blob.dat", b"\0\0TODO binary\nmore TODO\n");
    let long = format!("{}TODO{}\n", "x".repeat(5000), "y".repeat(5000));
    ws.write("long.txt", long);
    let many: String = (1..=600)
        .map(|i| format!("row {i}: value {}\n", i * 7))
        .collect();
    ws.write("data/many.txt", many);
    // One literal at every offset from a line's start, among decoys that hold its rarest bytes
    // but not the rest of it, and cut off at the end of the file.
    let places: String = (0..200)
        .map(|i| {
            let pad = "k".repeat(i % 131);
            match i % 3 {
                0 => format!("{pad}get_unchecked {i}\n"),
                1 => format!("{pad}fn  step_{i}_unchecked(x)\n"),
                _ => format!("{pad}gxt_unchecked kqg k g_unchecked {i}\n"),
            }
        })
        .collect();
    ws.write("src/places.rs", places + "get_uncheck");
    ws
}

/// Output lines as a set: Grep sorts its walk, ripgrep with `-j1` does not.
fn lines(s: &str) -> BTreeSet<String> {
    s.lines().map(str::to_string).collect()
}

fn rg(ws: &Workspace, args: &[&str]) -> String {
    let out = Command::new("rg")
        .args([
            "--no-config",
            "-j1",
            "--hidden",
            "--no-require-git",
            "--no-ignore-global",
            "--no-ignore-exclude",
            "--glob",
            "!.git",
            "--color",
            "never",
        ])
        .args(args)
        .current_dir(ws.path())
        .output()
        .expect("ripgrep (`rg`) is needed for this test; .ci/run installs it");
    assert!(
        out.status.code().is_some_and(|c| c <= 1),
        "rg failed: {out:?}"
    );
    String::from_utf8(out.stdout).unwrap()
}

fn call(ws: &Workspace, input: &str) -> crate::support::Run {
    run(
        ws,
        &["tool", "call", "Grep", "--read", ".", "--input", input],
    )
}

fn grep(ws: &Workspace, input: serde_json::Value) -> String {
    let r = call(ws, &input.to_string());
    assert_eq!(r.code, 0, "{r:?}");
    if r.stdout.starts_with("No matches") {
        String::new()
    } else {
        r.stdout
    }
}

const PATTERNS: &[(&str, bool)] = &[
    ("TODO", false),
    ("todo", true),
    ("parse_unchecked", false),
    ("[0-9]{3}", false),
    (r"\d+", false),
    ("^fn ", false),
    (r"\)$", false),
    ("^$", false),
    (r"^\s+\w", false),
    (r"\bmain\b", false),
    ("error|warn", true),
    ("été", true),
    (r"\p{Greek}", false),
    ("[[:upper:]]{3,}", false),
    (r"fn\s+\w+\s*\(", false),
    ("x+TODOy", false),
    ("row 2..: value", false),
    ("a.c", false),
    ("nothing matches this", false),
    // Patterns that start with one of several literals, found by their rarest byte.
    (r"fixme\(", true),
    ("straße", true),
    ("todo|fixme", true),
    ("kelvin", true),
    ("ÉTÉ", true),
    ("(?i)x{2}", false),
    // Patterns that start or end with one literal, searched for whole.
    ("get_unchecked", false),
    (r"fn\s+[a-z_0-9]+_unchecked", false),
    (r"\w+_unchecked\b", false),
];

#[test]
fn grep_matches_ripgrep_on_a_fixture_tree() {
    let ws = tree();
    for &(pattern, ci) in PATTERNS {
        let mut flags: Vec<&str> = Vec::new();
        if ci {
            flags.push("-i");
        }
        let base = serde_json::json!({"pattern": pattern, "case_insensitive": ci});

        let mut input = base.clone();
        input["output_mode"] = "content".into();
        let ours = grep(&ws, input);
        let mut args = flags.clone();
        args.extend(["-n", "--no-heading", "--with-filename", "-e", pattern]);
        let theirs = rg(&ws, &args);
        // Grep shows a line without its `\r`; ripgrep prints it as it is.
        let theirs = theirs.replace("\r\n", "\n");
        assert_eq!(lines(&ours), lines(&theirs), "content of {pattern:?}");

        let ours = grep(&ws, base.clone());
        let mut args = flags.clone();
        args.extend(["-l", "-e", pattern]);
        assert_eq!(lines(&ours), lines(&rg(&ws, &args)), "files of {pattern:?}");

        let mut input = base.clone();
        input["output_mode"] = "count".into();
        let ours = grep(&ws, input);
        let mut args = flags.clone();
        args.extend(["-c", "--with-filename", "-e", pattern]);
        assert_eq!(
            lines(&ours),
            lines(&rg(&ws, &args)),
            "counts of {pattern:?}"
        );
    }
}

#[test]
fn grep_context_and_globs_match_ripgrep() {
    let ws = tree();
    let input = serde_json::json!({
        "pattern": "value 7[0-9]{1,2}\\b",
        "output_mode": "content",
        "context": 2,
        "glob": "*.txt",
    });
    let ours = grep(&ws, input);
    let theirs = rg(
        &ws,
        &[
            "-n",
            "--no-heading",
            "--with-filename",
            "-C",
            "2",
            "--glob",
            "*.txt",
            "-e",
            r"value 7[0-9]{1,2}\b",
        ],
    );
    // Same lines in the same order within the one file, separators included.
    assert_eq!(ours, theirs);
    assert!(ours.contains("--\n"), "{ours}");
}

#[test]
fn a_pattern_never_matches_across_lines() {
    let ws = Workspace::new();
    ws.write("a.rs", "fn\nmain() {}\n");
    let ours = grep(&ws, serde_json::json!({"pattern": r"fn\s+main"}));
    assert_eq!(ours, "", "a match spanning lines");
    let r = call(&ws, r#"{"pattern":"fn\\nmain"}"#);
    assert_ne!(r.code, 0, "{r:?}");
    assert!(r.stderr.contains("bad regular expression"), "{r:?}");
}
