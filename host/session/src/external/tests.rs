//! Tests of the external-agent state's own helpers: command lines, exit statuses and reports,
//! what a permission request names, the cap on a turn's events and read windows.

use super::passed::json_size;
use super::*;

#[test]
fn shell_wrappers_are_unwrapped_and_arguments_quoted() {
    assert_eq!(
        command_line("bash", &["-c".into(), "make test".into()]),
        "make test"
    );
    assert_eq!(command_line("/bin/sh", &["-c".into(), "ls".into()]), "ls");
    assert_eq!(command_line("ls -la", &[]), "ls -la");
    assert_eq!(
        command_line("echo", &["a b".into(), "it's".into(), "x".into()]),
        "echo 'a b' 'it'\\''s' x"
    );
}

#[test]
fn exit_status_is_read_from_the_bash_result_and_output_kept_from_the_end() {
    let o = ToolOutcome {
        output: "abcdef\n[exit status 3]".into(),
        is_error: true,
        verdict: String::new(),
        decisions: Vec::new(),
    };
    let t = terminal_state(&o, 4);
    assert_eq!(t.output, "cdef");
    assert!(t.truncated);
    assert_eq!(t.exit, Some((Some(3), None)));
    let ok = ToolOutcome {
        output: "fine\n".into(),
        is_error: false,
        ..o
    };
    assert_eq!(terminal_state(&ok, 100).exit, Some((Some(0), None)));
}

#[test]
fn a_long_report_keeps_its_end() {
    let text = format!("{}the conclusion", "é".repeat(100));
    let cut = cut_front(&text, 20);
    assert!(
        cut.starts_with("[…] ") && cut.ends_with("the conclusion"),
        "{cut}"
    );
    assert_eq!(cut_front("short", 20), "short");
    assert_eq!(last("aé", 1), "");
}

#[test]
fn a_permission_request_names_its_commands_and_paths_in_the_shapes_agents_use() {
    let asked = |input: serde_json::Value, locations: &[&str]| {
        let locations: Vec<std::path::PathBuf> = locations.iter().map(Into::into).collect();
        Asked::from_request(Some(&input), &locations)
    };
    let a = asked(json!({"command": "rm -rf victim"}), &[]);
    assert_eq!(a.commands, ["rm -rf victim"]);
    let a = asked(json!({"command": ["bash", "-lc", "rm -rf x"]}), &[]);
    assert_eq!(a.commands, ["rm -rf x"]);
    let a = asked(json!({"cmd": "rm", "args": ["-rf", "a b"]}), &[]);
    assert_eq!(a.commands, ["rm -rf 'a b'"]);
    // Arguments rawko cannot read leave the command unread, not shortened.
    let a = asked(json!({"command": "rm", "args": ["-rf", 7]}), &[]);
    assert!(a.commands.is_empty(), "{a:?}");
    let a = asked(json!({"command": "  ", "description": "tidy"}), &[]);
    assert!(a.commands.is_empty(), "{a:?}");
    let a = asked(
        json!({"file_path": ".git/config", "paths": ["a", "b"], "changes": {"c": {}}}),
        &["/ws/a", "b"],
    );
    let paths: Vec<String> = a.paths.iter().map(|p| p.display().to_string()).collect();
    assert_eq!(paths, ["/ws/a", "b", ".git/config", "a", "c"]);
    assert_eq!(Asked::from_request(None, &[]), Asked::default());
    assert_eq!(
        asked(json!({"command": "ls"}), &["x"]).shown(),
        " (`ls`; x)"
    );
}

#[test]
fn a_turn_passes_on_its_cap_then_says_once_that_the_rest_is_cut() {
    let sink = rawko_fsm::events::Recorder::default();
    let passed = Passed::new(&sink, "flooder");
    let text = |t: &str| RunEvent::Text {
        agent: "flooder".into(),
        text: t.into(),
    };
    passed.emit(&RunEvent::ToolCall {
        agent: "flooder".into(),
        tool: "terminal/create".into(),
        input: json!({"command": "ls"}),
    });
    let chunk = "é".repeat(32 << 10);
    for _ in 0..100 {
        passed.emit(&text(&chunk));
    }
    // The result of a call shown before the cut still comes; nothing else does.
    passed.emit(&RunEvent::ToolResult {
        agent: "flooder".into(),
        tool: "terminal/create".into(),
        ok: true,
        verdict: "allowed".into(),
        duration_ms: 1.0,
        preview: String::new(),
    });
    passed.emit(&text("more"));
    let events = sink.events.lock().unwrap();
    let bytes: usize = events.iter().map(json_size).sum();
    assert!(bytes <= MAX_TURN_TEXT + 2_000, "{bytes}");
    assert!(bytes >= MAX_TURN_TEXT - (64 << 10), "{bytes}");
    let warnings = events
        .iter()
        .filter(|e| matches!(e, RunEvent::Warning { message } if message.contains("cut")))
        .count();
    assert_eq!(warnings, 1);
    assert!(matches!(events.last(), Some(RunEvent::ToolResult { .. })));
    // The last text before the notice is the head of a chunk, cut on a character.
    let n = events.len();
    let RunEvent::Text { text: head, .. } = &events[n - 3] else {
        panic!("{:?}", &events[n - 3]);
    };
    assert!(!head.is_empty() && head.len() < chunk.len());
}

#[test]
fn a_read_window_counts_lines_from_one() {
    let t = "a\nb\nc\nd\n";
    assert_eq!(window(t, None, None), t);
    assert_eq!(window(t, Some(2), Some(2)), "b\nc\n");
    assert_eq!(window(t, Some(4), None), "d\n");
    assert_eq!(window(t, Some(9), None), "");
}
