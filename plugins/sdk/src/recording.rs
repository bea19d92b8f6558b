//! Recordings: a conversation with a model, written down so it can be played back exactly.
//!
//! `rawko ask --record FILE` (and any run given a recorder) writes every exchange with an
//! adapter as it happens; the `replay` adapter plays such a file back with no network and no key,
//! which is how the demo and the end-to-end tests run. The file is JSON Lines, so an exchange is
//! on disk as soon as it is complete and a crash loses at most the one in flight:
//!
//! ```text
//! {"rawko_recording":1}
//! {"sequence":0,"adapter":"default","request":{...},"response":{...}}
//! {"sequence":1,"adapter":"default","request":{...},"error":{"kind":"status","status":429,"message":"..."}}
//! ```
//!
//! Playback is in order: the n-th completion asked of a replay adapter gets the n-th exchange,
//! after a check that the conversation is still the recorded one (see [`diverges`]). Secrets
//! never reach a recording: the host redacts the credentials it holds before writing.

use serde::{Deserialize, Serialize};

use crate::llm::{AdapterError, Content, Request, Response};

/// The format version this crate reads and writes.
pub const VERSION: u32 = 1;

/// The first line of a recording.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Header {
    pub rawko_recording: u32,
}

/// One completion: what was asked, and what came back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Exchange {
    /// Its place in the recording, from 0.
    pub sequence: u32,
    /// The adapter instance that served it, for readers of the file.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub adapter: String,
    pub request: Request,
    /// The reply, when there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<Response>,
    /// The adapter's error, when there was no reply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<AdapterError>,
}

impl Exchange {
    /// What playing this exchange back returns.
    pub fn outcome(&self) -> Result<Response, AdapterError> {
        match (&self.response, &self.error) {
            (Some(r), _) => Ok(r.clone()),
            (None, Some(e)) => Err(e.clone()),
            (None, None) => Err(AdapterError::malformed(format!(
                "recorded exchange {} has neither a response nor an error",
                self.sequence
            ))),
        }
    }
}

/// A recording that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormatError {
    /// 1-based line number.
    pub line: usize,
    pub message: String,
}

impl std::fmt::Display for FormatError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for FormatError {}

/// The header line, without its newline.
pub fn header_line() -> String {
    format!("{{\"rawko_recording\":{VERSION}}}")
}

/// One exchange as a line, without its newline.
pub fn exchange_line(e: &Exchange) -> String {
    // Serializing plain data with string keys cannot fail.
    serde_json::to_string(e).unwrap_or_default()
}

/// Parse a whole recording. Blank lines are ignored; sequence numbers must count up from 0.
pub fn parse(text: &str) -> Result<Vec<Exchange>, FormatError> {
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty());
    let Some((n, first)) = lines.next() else {
        return Err(FormatError {
            line: 1,
            message: format!("empty file; a recording starts with {}", header_line()),
        });
    };
    let header: Header = serde_json::from_str(first).map_err(|e| FormatError {
        line: n,
        message: format!("not a rawko recording (expected {}): {e}", header_line()),
    })?;
    if header.rawko_recording != VERSION {
        return Err(FormatError {
            line: n,
            message: format!(
                "recording format version {} is not supported (this rawko reads version {VERSION})",
                header.rawko_recording
            ),
        });
    }
    let mut out = Vec::new();
    for (n, line) in lines {
        let e: Exchange = serde_json::from_str(line).map_err(|e| FormatError {
            line: n,
            message: e.to_string(),
        })?;
        if e.sequence as usize != out.len() {
            return Err(FormatError {
                line: n,
                message: format!(
                    "exchange has sequence {} where {} was expected (exchanges are numbered from 0, in order)",
                    e.sequence,
                    out.len()
                ),
            });
        }
        if e.response.is_some() == e.error.is_some() {
            return Err(FormatError {
                line: n,
                message: "an exchange has exactly one of `response` and `error`".into(),
            });
        }
        out.push(e);
    }
    Ok(out)
}

/// Where `actual` departs from the recorded conversation, in words, or `None` when it is the
/// same conversation.
///
/// What must match is what makes it the same conversation: the number and roles of messages,
/// the kind of every part, the text of text parts, every tool call's id, name and arguments,
/// and whether each tool result was an error. What may differ is what changes between two runs
/// of the same session without changing its course: the model name, options, the system prompt
/// and tool list (they can mention paths and dates), tool results' text (paths, timings) and
/// reasoning text.
pub fn diverges(recorded: &Request, actual: &Request) -> Option<String> {
    let (r, a) = (&recorded.messages, &actual.messages);
    for (i, (rm, am)) in r.iter().zip(a).enumerate() {
        if rm.role != am.role {
            return Some(format!(
                "messages[{i}] is from the {:?} in the recording but from the {:?} now",
                rm.role, am.role
            ));
        }
        for (j, (rc, ac)) in rm.content.iter().zip(&am.content).enumerate() {
            let at = format!("messages[{i}].content[{j}]");
            if let Some(d) = part_diverges(rc, ac) {
                return Some(format!("{at}: {d}"));
            }
        }
        if rm.content.len() != am.content.len() {
            return Some(format!(
                "messages[{i}] has {} parts in the recording but {} now",
                rm.content.len(),
                am.content.len()
            ));
        }
    }
    if r.len() != a.len() {
        return Some(format!(
            "the recording's request has {} messages but this one has {}",
            r.len(),
            a.len()
        ));
    }
    None
}

fn kind(c: &Content) -> &'static str {
    match c {
        Content::Text { .. } => "text",
        Content::Thinking(_) => "thinking",
        Content::ToolCall(_) => "tool call",
        Content::ToolResult(_) => "tool result",
    }
}

fn part_diverges(r: &Content, a: &Content) -> Option<String> {
    match (r, a) {
        (Content::Text { text: rt }, Content::Text { text: at }) if rt != at => Some(format!(
            "the text differs: recorded {}, now {}",
            excerpt(rt),
            excerpt(at)
        )),
        (Content::ToolCall(rc), Content::ToolCall(ac)) => {
            if (&rc.id, &rc.name) != (&ac.id, &ac.name) {
                Some(format!(
                    "the tool call differs: recorded {} ({}), now {} ({})",
                    rc.name, rc.id, ac.name, ac.id
                ))
            } else if rc.arguments != ac.arguments {
                Some(format!(
                    "the arguments of {} differ: recorded {}, now {}",
                    rc.name,
                    excerpt(&rc.arguments),
                    excerpt(&ac.arguments)
                ))
            } else {
                None
            }
        }
        (Content::ToolResult(rr), Content::ToolResult(ar)) => {
            if rr.call_id != ar.call_id {
                Some(format!(
                    "the tool result answers {} in the recording but {} now",
                    rr.call_id, ar.call_id
                ))
            } else if rr.is_error != ar.is_error {
                Some(format!(
                    "the tool call {} {} in the recording but {} now",
                    rr.call_id,
                    if rr.is_error { "failed" } else { "succeeded" },
                    if ar.is_error { "failed" } else { "succeeded" },
                ))
            } else {
                None
            }
        }
        _ if kind(r) != kind(a) => Some(format!(
            "a {} in the recording but a {} now",
            kind(r),
            kind(a)
        )),
        _ => None,
    }
}

/// A short quoted form of `s` for messages.
fn excerpt(s: &str) -> String {
    const MAX: usize = 80;
    if s.chars().count() <= MAX {
        return format!("{s:?}");
    }
    let cut: String = s.chars().take(MAX).collect();
    format!("{cut:?}…")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::{Message, StopReason, ToolCall, ToolResult, Usage};

    fn request(messages: Vec<Message>) -> Request {
        Request {
            model: "m".into(),
            base_url: String::new(),
            system: "sys".into(),
            messages,
            tools: vec![],
            options: Default::default(),
            stream: false,
            sequence: 0,
        }
    }

    fn reply(text: &str) -> Response {
        Response {
            content: vec![Content::text(text)],
            stop_reason: StopReason::EndTurn,
            usage: Usage::default(),
            model: "m".into(),
        }
    }

    #[test]
    fn a_written_recording_reads_back() {
        let e0 = Exchange {
            sequence: 0,
            adapter: "default".into(),
            request: request(vec![Message::user("hi")]),
            response: Some(reply("hello")),
            error: None,
        };
        let e1 = Exchange {
            sequence: 1,
            adapter: String::new(),
            request: request(vec![Message::user("again")]),
            response: None,
            error: Some(AdapterError::Status {
                status: 429,
                message: "slow down".into(),
            }),
        };
        let text = format!(
            "{}\n{}\n\n{}\n",
            header_line(),
            exchange_line(&e0),
            exchange_line(&e1)
        );
        let parsed = parse(&text).unwrap();
        assert_eq!(parsed, vec![e0.clone(), e1.clone()]);
        assert_eq!(parsed[0].outcome().unwrap().text(), "hello");
        assert!(parsed[1].outcome().is_err());
    }

    #[test]
    fn bad_files_name_the_line() {
        assert_eq!(parse("").unwrap_err().line, 1);
        let e = parse("{\"rawko_recording\":2}\n").unwrap_err();
        assert!(e.message.contains("version 2"), "{e}");
        let e = parse("{\"rawko_recording\":1}\n{\"sequence\":3}\n").unwrap_err();
        assert_eq!(e.line, 2);
        let line = exchange_line(&Exchange {
            sequence: 1,
            adapter: String::new(),
            request: request(vec![]),
            response: Some(reply("x")),
            error: None,
        });
        let e = parse(&format!("{}\n{line}\n", header_line())).unwrap_err();
        assert!(e.message.contains("sequence 1 where 0"), "{e}");
    }

    #[test]
    fn the_same_conversation_with_other_paths_does_not_diverge() {
        let call = ToolCall {
            id: "c1".into(),
            name: "Read".into(),
            arguments: "{\"path\":\"a\"}".into(),
        };
        let result = |content: &str, is_error| Message {
            role: crate::llm::Role::User,
            content: vec![Content::ToolResult(ToolResult {
                call_id: "c1".into(),
                content: content.into(),
                is_error,
            })],
        };
        let called = Message {
            role: crate::llm::Role::Assistant,
            content: vec![Content::ToolCall(call.clone())],
        };
        let recorded = request(vec![
            Message::user("task"),
            called.clone(),
            result("/tmp/a/x", false),
        ]);
        let mut same = request(vec![
            Message::user("task"),
            called.clone(),
            result("/tmp/b/x", false),
        ]);
        same.system = "other system prompt".into();
        assert_eq!(diverges(&recorded, &same), None);

        let failed = request(vec![
            Message::user("task"),
            called,
            result("/tmp/b/x", true),
        ]);
        let d = diverges(&recorded, &failed).unwrap();
        assert!(
            d.contains("messages[2].content[0]") && d.contains("failed"),
            "{d}"
        );

        let other_task = request(vec![Message::user("other")]);
        let d = diverges(&recorded, &other_task).unwrap();
        assert!(d.contains("\"task\"") && d.contains("\"other\""), "{d}");

        let longer = request(vec![Message::user("task"), Message::assistant("x")]);
        assert!(diverges(&request(vec![Message::user("task")]), &longer).is_some());
    }
}
