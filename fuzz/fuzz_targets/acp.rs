//! What an external agent sends rawko over ACP, and what an editor sends when rawko serves it:
//! newline-delimited JSON-RPC read by rawko's framing, each message decoded into the types
//! rawko's handlers take, and handled by rawko's own functions (a `session/update` reduced to
//! what rawko shows and records, a permission request answered, an editor's prompt read as
//! text, a prompt turn's stop reason). Invariants: no panic; the framing hands on no line past
//! its bound and gives the same lines however the bytes arrive; a reduced update is no larger
//! than a bounded multiple of its message; a permission answer is an id under which every
//! option the agent offered is of the kind asked for (an agent reads an id as the first option
//! that has it), or a cancel when there is no such id.
#![no_main]

use std::sync::OnceLock;

use agent_client_protocol::v1::schema::{
    CreateTerminalRequest, InitializeResponse, PermissionOptionId, PermissionOptionKind,
    PromptRequest, PromptResponse, ReadTextFileRequest, RequestPermissionOutcome,
    RequestPermissionRequest, SessionNotification, TerminalOutputRequest, WriteTextFileRequest,
};
use libfuzzer_sys::fuzz_target;
use rawko_acp::client::{Stop, Update, permission_outcome, reduce};
use rawko_acp::lines::read_line;
use serde_json::Value;
use tokio::io::BufReader;

/// The framing's bound on one message here (rawko's is 8 MiB; libFuzzer's inputs are 16 KiB).
const MAX: usize = 4096;

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime")
    })
}

/// Every line rawko's framing reads from `data` with a buffer of `capacity` bytes, and whether
/// it ended in an error.
fn frame(data: &[u8], capacity: usize) -> (Vec<String>, bool) {
    runtime().block_on(async {
        let mut r = BufReader::with_capacity(capacity, data);
        let mut lines = Vec::new();
        loop {
            match read_line(&mut r, MAX).await {
                Ok(Some(line)) => lines.push(line),
                Ok(None) => return (lines, false),
                Err(_) => return (lines, true),
            }
        }
    })
}

/// How many bytes of text an update carries.
fn size(u: &Update) -> usize {
    match u {
        Update::Text(t) | Update::Thought(t) => t.len(),
        Update::ToolCall {
            id,
            title,
            kind,
            status,
            input,
        } => {
            id.len()
                + title.len()
                + kind.len()
                + status.len()
                + input.as_ref().map_or(0, |v| v.to_string().len())
        }
        Update::ToolCallUpdate {
            id,
            title,
            status,
            output,
        } => {
            id.len()
                + title.as_ref().map_or(0, String::len)
                + status.as_ref().map_or(0, String::len)
                + output.as_ref().map_or(0, String::len)
        }
        Update::Plan(entries) => entries.iter().map(|(c, s)| c.len() + s.len()).sum(),
        Update::Usage { .. } => 0,
    }
}

fn handle(line: &str) {
    let Ok(v) = serde_json::from_str::<Value>(line) else {
        return;
    };
    let params = v.get("params").cloned().unwrap_or(Value::Null);
    match v.get("method").and_then(Value::as_str) {
        Some("session/update") => {
            if let Ok(n) = serde_json::from_value::<SessionNotification>(params)
                && let Some(u) = reduce(n.update)
            {
                // Enum names are re-spelled (at most "other"-sized per field), numbers printed
                // again; nothing else is added.
                assert!(size(&u) <= 4 * line.len() + 1024, "{line:?} became {u:?}");
            }
        }
        Some("session/request_permission") => {
            if let Ok(r) = serde_json::from_value::<RequestPermissionRequest>(params) {
                for allow in [true, false] {
                    let kinds = if allow {
                        [
                            PermissionOptionKind::AllowOnce,
                            PermissionOptionKind::AllowAlways,
                        ]
                    } else {
                        [
                            PermissionOptionKind::RejectOnce,
                            PermissionOptionKind::RejectAlways,
                        ]
                    };
                    // An agent reads an id as the first option that has it: every option
                    // under the chosen id must be of the kind rawko means.
                    let unambiguous = |id: &PermissionOptionId| {
                        r.options
                            .iter()
                            .filter(|o| o.option_id == *id)
                            .all(|o| kinds.contains(&o.kind))
                    };
                    match permission_outcome(&r.options, allow) {
                        RequestPermissionOutcome::Selected(s) => {
                            assert!(unambiguous(&s.option_id), "{line:?}: allow={allow}");
                        }
                        _ => assert!(
                            !r.options
                                .iter()
                                .any(|o| kinds.contains(&o.kind) && unambiguous(&o.option_id)),
                            "{line:?}: cancelled with an option of the kind offered"
                        ),
                    }
                }
            }
        }
        // What an editor sends when rawko serves ACP.
        Some("session/prompt") => {
            if let Ok(r) = serde_json::from_value::<PromptRequest>(params) {
                let text = rawko_acp::serve::prompt_text(&r.prompt);
                assert!(text.len() <= line.len() + 64, "{line:?}");
            }
        }
        // The requests rawko hands to its tools: decoded here as the protocol layer does.
        Some("fs/read_text_file") => drop(serde_json::from_value::<ReadTextFileRequest>(params)),
        Some("fs/write_text_file") => drop(serde_json::from_value::<WriteTextFileRequest>(params)),
        Some("terminal/create") => drop(serde_json::from_value::<CreateTerminalRequest>(params)),
        Some(_) => drop(serde_json::from_value::<TerminalOutputRequest>(params)),
        // Answers to rawko's own requests.
        None => {
            let result = v.get("result").cloned().unwrap_or(Value::Null);
            if let Ok(r) = serde_json::from_value::<PromptResponse>(result.clone()) {
                let _ = Stop::from(r.stop_reason).as_str();
            }
            drop(serde_json::from_value::<InitializeResponse>(result));
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let (lines, failed) = frame(rest, 64 << 10);
    let small = usize::from(pick % 61) + 1;
    assert_eq!(
        (lines.clone(), failed),
        frame(rest, small),
        "the lines differ when read {small} bytes at a time"
    );
    for line in &lines {
        assert!(line.len() <= MAX, "a line of {} bytes passed", line.len());
        assert!(!line.ends_with(['\n', '\r']), "{line:?}");
        handle(line);
    }
});
