//! rawko's replay adapter: plays back a recording (see `rawko_plugin_sdk::recording`), so a
//! session runs again exactly, with no network and no API key.
//!
//! The host grants the recording read-only and passes its `file://` URL as the base URL, with
//! the completion's sequence number. The n-th completion gets the n-th recorded exchange, once
//! [`recording::diverges`] agrees that the conversation is still the recorded one; otherwise the
//! call fails saying where the two part. A plugin keeps nothing between calls, so the file is
//! read each time (recordings are small; a completion costs far more).

use rawko_plugin_sdk::adapter::{Adapter, report_text, report_thinking};
use rawko_plugin_sdk::llm::{AdapterError, Content, Request, Response};
use rawko_plugin_sdk::recording;

struct Replay;

impl Adapter for Replay {
    fn complete(request: Request) -> Result<Response, AdapterError> {
        let Some(path) = request.base_url.strip_prefix("file://") else {
            return Err(AdapterError::unsupported(format!(
                "the replay adapter plays a recording file; its base URL must be a file:// URL, not {:?}",
                request.base_url
            )));
        };
        let text = std::fs::read_to_string(path).map_err(|e| {
            AdapterError::transport(format!("cannot read the recording {path}: {e}"))
        })?;
        let exchanges = recording::parse(&text)
            .map_err(|e| AdapterError::malformed(format!("recording {path}: {e}")))?;
        let n = request.sequence as usize;
        let Some(exchange) = exchanges.get(n) else {
            return Err(AdapterError::unsupported(format!(
                "the recording {path} has {} exchanges and this is completion {}: the run went \
                 past the end of the recording",
                exchanges.len(),
                n + 1
            )));
        };
        if let Some(d) = recording::diverges(&exchange.request, &request) {
            return Err(AdapterError::unsupported(format!(
                "the conversation diverged from the recording {path} at exchange {n}: {d}"
            )));
        }
        let outcome = exchange.outcome();
        if request.stream
            && let Ok(r) = &outcome
        {
            for c in &r.content {
                match c {
                    Content::Text { text } => report_text(text),
                    Content::Thinking(t) => report_thinking(&t.text),
                    Content::ToolCall(_) | Content::ToolResult(_) => {}
                }
            }
        }
        outcome
    }
}

rawko_plugin_sdk::export_adapter!(Replay);
rawko_plugin_sdk::manifest!();
