//! What an MCP server sends rawko: JSON-RPC lines read through rawko's capped reader and decoded
//! as rmcp decodes them, then the results rawko reads itself: a tool list (which tools are
//! admitted, their input schemas compiled), a model's input checked against those schemas, and
//! a call's result turned into text. Invariants: no panic and no stall (libFuzzer's timeout,
//! which a server's schema could otherwise cause when compiled or used); the reader hands on no
//! line past its bound; every listed tool is admitted or dropped with a reason; an admitted
//! tool has a usable name and a description and schema within their bounds; a result's text is
//! within its bound.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use rawko_mcp::client::{
    Capped, MAX_DESCRIPTION, MAX_RESULT, MAX_SCHEMA, PREFIX, admit_tools, result_text,
};
use rmcp::model::{
    CallToolResult, JsonRpcMessage, ListToolsResult, ServerJsonRpcMessage, ServerResult,
};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};

/// The reader's bound on one message here (rawko's is 8 MiB; libFuzzer's inputs are 16 KiB).
const MAX: usize = 4096;

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime")
    })
}

/// The complete lines read from `data` through rawko's capped reader, `capacity` bytes at a
/// time, up to the end or the first error.
fn frame(data: &[u8], capacity: usize) -> Vec<Vec<u8>> {
    runtime().block_on(async {
        let mut r = BufReader::with_capacity(capacity, Capped::new(data, MAX));
        let mut lines = Vec::new();
        loop {
            let mut line = Vec::new();
            match r.read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => return lines,
                Ok(_) if line.ends_with(b"\n") => lines.push(line),
                // The end of the stream: rmcp takes a last line without its newline too.
                Ok(_) => {
                    lines.push(line);
                    return lines;
                }
            }
        }
    })
}

fn tools(list: ListToolsResult, inputs: &[String]) {
    let listed = list.tools.len();
    let (admitted, dropped) = admit_tools("fuzz", list.tools);
    assert_eq!(admitted.len() + dropped.len(), listed);
    for t in &admitted {
        assert!(
            !t.remote.is_empty()
                && t.remote.len() <= 64
                && t.remote
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b)),
            "{:?}",
            t.remote
        );
        assert_eq!(t.name, format!("{PREFIX}fuzz__{}", t.remote));
        assert!(t.description.chars().count() <= MAX_DESCRIPTION + 1);
        assert!(t.input_schema.to_string().len() <= MAX_SCHEMA);
        // A model's input, checked against the server's schema before it is sent.
        for input in inputs {
            if let Ok(map) = t.arguments(input) {
                assert!(serde_json::to_string(&map).is_ok());
            }
        }
    }
}

fn result(r: &CallToolResult) {
    let (text, _) = result_text(r);
    assert!(
        text.chars().count() <= MAX_RESULT + 1,
        "{} chars",
        text.chars().count()
    );
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let lines = frame(rest, 64 << 10);
    let small = usize::from(pick % 61) + 1;
    assert_eq!(
        lines,
        frame(rest, small),
        "the lines differ when read {small} bytes at a time"
    );
    // The model's inputs: the empty one (`{}`), and each line's own params.
    let mut inputs = vec![String::new()];
    for line in &lines {
        assert!(
            line.len() <= MAX + 1,
            "a line of {} bytes passed",
            line.len()
        );
        if let Ok(v) = serde_json::from_slice::<Value>(line)
            && let Some(p) = v.get("params")
        {
            inputs.push(p.to_string());
        }
    }
    for line in &lines {
        // As rmcp reads a server's message: a response's result is one of its result types.
        if let Ok(JsonRpcMessage::Response(r)) =
            serde_json::from_slice::<ServerJsonRpcMessage>(line)
        {
            match r.result {
                ServerResult::ListToolsResult(l) => tools(l, &inputs),
                ServerResult::CallToolResult(c) => result(&c),
                _ => {}
            }
        }
        // And as the answer to rawko's own `tools/list` or `tools/call`, whatever else it
        // could also be read as.
        let Ok(v) = serde_json::from_slice::<Value>(line) else {
            continue;
        };
        let Some(r) = v.get("result") else {
            continue;
        };
        if let Ok(l) = serde_json::from_value::<ListToolsResult>(r.clone()) {
            tools(l, &inputs);
        }
        if let Ok(c) = serde_json::from_value::<CallToolResult>(r.clone()) {
            result(&c);
        }
    }
});
