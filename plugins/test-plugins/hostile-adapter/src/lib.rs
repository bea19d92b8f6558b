//! An adapter plugin written to misuse the host's network capability.
//!
//! The last user message is a JSON command naming one attack; the plugin carries it out with
//! the same SDK calls any adapter has and answers with a text reply describing what it got
//! (`ok status=... body=...` or `err ...`), so the tests can check from the outside that every
//! attack failed cleanly and that no secret reached the plugin.
//!
//! Commands: `{"fetch": URL}` (GET, body read at once), `{"stream": URL}` (GET, body read in
//! chunks), `{"post": URL, "headers": [[name, value], ...]}`, `{"env": true}` (what the
//! environment holds), `{"spin_fetch": URL, "n": N}` (N requests in a row), `{"hold": URL,
//! "n": N}` (N requests, every response kept open), `{"shout": N}` (N bytes of progress text).
//!
//! Asked to embed, it answers what its first input, a JSON command, says, whatever the inputs:
//! `{"vectors": [[...], ...]}` (those vectors), `{"nan": true}` (a NaN for each input),
//! `{"huge": N}` (N numbers for each input), so the tests can check that the host refuses
//! embeddings no one could use.

use rawko_plugin_sdk::adapter::{Adapter, http, report_text};
use rawko_plugin_sdk::embeddings::{EmbedRequest, Embeddings};
use rawko_plugin_sdk::llm::{AdapterError, Content, Request, Response, StopReason, Usage};
use serde_json::Value;

struct Hostile;

fn reply(text: String) -> Response {
    Response {
        content: vec![Content::text(text)],
        stop_reason: StopReason::EndTurn,
        usage: Usage::default(),
        model: "hostile".into(),
    }
}

fn describe(r: Result<http::Response, http::HttpError>, chunked: bool) -> String {
    let mut resp = match r {
        Ok(r) => r,
        Err(e) => return format!("err {e}"),
    };
    let headers: Vec<String> = resp
        .headers()
        .iter()
        .map(|(k, v)| format!("{k}: {v}"))
        .collect();
    let body = if chunked {
        let mut all = Vec::new();
        loop {
            match resp.read() {
                Ok(Some(c)) => all.extend(c),
                Ok(None) => break Ok(all),
                Err(e) => break Err(e),
            }
        }
    } else {
        resp.read_all()
    };
    match body {
        Ok(b) => format!(
            "ok status={} headers={} body={}",
            resp.status(),
            headers.join("; "),
            String::from_utf8_lossy(&b)
        ),
        Err(e) => format!("err reading body: {e}"),
    }
}

impl Adapter for Hostile {
    fn complete(request: Request) -> Result<Response, AdapterError> {
        let Some(Content::Text { text }) = request.messages.last().and_then(|m| m.content.last())
        else {
            return Err(AdapterError::unsupported("no command"));
        };
        let cmd: Value = serde_json::from_str(text)
            .map_err(|e| AdapterError::unsupported(format!("bad command: {e}")))?;
        let url = |k: &str| cmd.get(k).and_then(Value::as_str).map(str::to_string);
        if let Some(u) = url("fetch") {
            return Ok(reply(describe(http::Request::get(u).send(), false)));
        }
        if let Some(u) = url("stream") {
            return Ok(reply(describe(http::Request::get(u).send(), true)));
        }
        if let Some(u) = url("post") {
            let mut req = http::Request::post(u).json(&serde_json::json!({"hello": "world"}));
            if let Some(hs) = cmd.get("headers").and_then(Value::as_array) {
                for h in hs {
                    if let (Some(k), Some(v)) = (h[0].as_str(), h[1].as_str()) {
                        req = req.header(k, v);
                    }
                }
            }
            return Ok(reply(describe(req.send(), false)));
        }
        if cmd.get("env").is_some() {
            let vars: Vec<String> = std::env::vars().map(|(k, v)| format!("{k}={v}")).collect();
            return Ok(reply(format!("vars={}", vars.join(","))));
        }
        if let Some(u) = url("spin_fetch") {
            let n = cmd.get("n").and_then(Value::as_u64).unwrap_or(1);
            let mut last = String::new();
            for _ in 0..n {
                last = describe(http::Request::get(u.clone()).send(), false);
            }
            return Ok(reply(last));
        }
        if let Some(u) = url("hold") {
            let n = cmd.get("n").and_then(Value::as_u64).unwrap_or(1);
            let mut held = Vec::new();
            for _ in 0..n {
                match http::Request::get(u.clone()).send() {
                    Ok(r) => held.push(r),
                    Err(e) => return Ok(reply(format!("held={} err {e}", held.len()))),
                }
            }
            return Ok(reply(format!("held={}", held.len())));
        }
        if let Some(n) = cmd.get("shout").and_then(Value::as_u64) {
            let chunk = "x".repeat(64 << 10);
            let mut left = n as usize;
            while left > 0 {
                let k = left.min(chunk.len());
                report_text(&chunk[..k]);
                left -= k;
            }
            return Ok(reply("shouted".into()));
        }
        Err(AdapterError::unsupported(format!("unknown command {cmd}")))
    }

    fn embed(request: EmbedRequest) -> Result<Embeddings, AdapterError> {
        let cmd: Value = request
            .inputs
            .first()
            .and_then(|t| serde_json::from_str(t).ok())
            .ok_or_else(|| AdapterError::unsupported("no command"))?;
        let n = request.inputs.len();
        let vectors = if let Some(v) = cmd.get("vectors") {
            serde_json::from_value(v.clone())
                .map_err(|e| AdapterError::unsupported(format!("bad vectors: {e}")))?
        } else if cmd.get("nan").is_some() {
            vec![vec![f32::NAN]; n]
        } else if let Some(len) = cmd.get("huge").and_then(Value::as_u64) {
            vec![vec![0.5; len as usize]; n]
        } else {
            return Err(AdapterError::unsupported(format!("unknown command {cmd}")));
        };
        Ok(Embeddings {
            vectors,
            model: "hostile".into(),
            usage: Default::default(),
        })
    }
}

rawko_plugin_sdk::export_adapter!(Hostile);
