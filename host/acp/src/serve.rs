//! rawko as an ACP agent on stdio, for editors that host ACP agents (Zed, JetBrains, Neovim).
//!
//! The protocol runs on a thread of its own, so the thread that runs tasks may block while it
//! waits for the editor (a permission question). Requests that start work (`session/new`,
//! `session/prompt`) and `session/cancel` go to the task thread as [`FromEditor`] events, each
//! with the handle its answer goes to; the protocol's dispatch loop is never held by a task.
//! Progress goes back as `session/update` notifications through [`Editor`].

use std::path::PathBuf;
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, CancelNotification, ContentBlock, Implementation, InitializeRequest,
    InitializeResponse, NewSessionRequest, NewSessionResponse, PermissionOptionKind, PromptRequest,
    PromptResponse, RequestPermissionOutcome, RequestPermissionRequest, SessionNotification,
    SessionUpdate, StopReason,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, Client};
use serde_json::json;
use tokio::sync::mpsc;

use crate::client::{Stop, Update};
use crate::lines;

/// The answer to a `session/new`.
#[derive(Debug)]
pub struct NewSessionReply(Responder<NewSessionResponse>);

impl NewSessionReply {
    pub fn ok(self, session: &str) {
        let _ = self.0.respond(NewSessionResponse::new(session.to_string()));
    }

    pub fn refuse(self, why: &str) {
        let _ = self
            .0
            .respond_with_error(agent_client_protocol::Error::new(-32602, why.to_string()));
    }
}

/// The answer to a `session/prompt`.
#[derive(Debug)]
pub struct PromptReply(Responder<PromptResponse>);

impl PromptReply {
    pub fn stop(self, stop: Stop) {
        let reason = match stop {
            Stop::EndTurn | Stop::Other => StopReason::EndTurn,
            Stop::MaxTokens => StopReason::MaxTokens,
            Stop::MaxTurnRequests => StopReason::MaxTurnRequests,
            Stop::Refusal => StopReason::Refusal,
            Stop::Cancelled => StopReason::Cancelled,
        };
        let _ = self.0.respond(PromptResponse::new(reason));
    }

    pub fn refuse(self, why: &str) {
        let _ = self
            .0
            .respond_with_error(agent_client_protocol::Error::new(-32000, why.to_string()));
    }
}

/// What the editor asks of rawko.
#[derive(Debug)]
pub enum FromEditor {
    NewSession {
        cwd: PathBuf,
        reply: NewSessionReply,
    },
    Prompt {
        session: String,
        /// The prompt's text blocks, joined; resources named by link are listed by URI.
        text: String,
        reply: PromptReply,
    },
    Cancel {
        session: String,
    },
}

/// rawko's side of the connection to the editor: progress out, questions out.
#[derive(Clone)]
pub struct Editor {
    cx: ConnectionTo<Client>,
    rt: tokio::runtime::Handle,
}

impl std::fmt::Debug for Editor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Editor")
    }
}

impl Editor {
    /// Send `update` for `session` (best effort: an editor that went away misses it).
    pub fn update(&self, session: &str, update: &Update) {
        let Some(update) = to_session_update(update) else {
            return;
        };
        let _ = self
            .cx
            .send_notification(SessionNotification::new(session.to_string(), update));
    }

    /// Ask the editor's user whether to allow `what`; blocks the calling thread (never the
    /// protocol's) until the editor answers, the connection ends or `timeout` passes (then
    /// no).
    pub fn ask(
        &self,
        session: &str,
        title: &str,
        kind: &str,
        detail: &str,
        timeout: Duration,
    ) -> bool {
        let fields = json!({
            "sessionId": session,
            "toolCall": {
                "toolCallId": format!("ask-{}", uniq()),
                "title": title,
                "kind": kind,
                "status": "pending",
                "rawInput": {"detail": detail},
            },
            "options": [
                {"optionId": "allow", "name": "Allow once", "kind": "allow_once"},
                {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
            ],
        });
        let Ok(request) = serde_json::from_value::<RequestPermissionRequest>(fields) else {
            return false;
        };
        let allow_id: Vec<_> = request
            .options
            .iter()
            .filter(|o| {
                matches!(
                    o.kind,
                    PermissionOptionKind::AllowOnce | PermissionOptionKind::AllowAlways
                )
            })
            .map(|o| o.option_id.clone())
            .collect();
        let (tx, rx) = std::sync::mpsc::channel();
        let cx = self.cx.clone();
        self.rt.spawn(async move {
            let answer = tokio::time::timeout(timeout, cx.send_request(request).block_task()).await;
            let allowed = matches!(
                answer,
                Ok(Ok(r)) if matches!(&r.outcome, RequestPermissionOutcome::Selected(s) if allow_id.contains(&s.option_id))
            );
            let _ = tx.send(allowed);
        });
        rx.recv().unwrap_or(false)
    }
}

fn uniq() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed) + 1
}

/// An [`Update`] as ACP's `session/update`.
fn to_session_update(u: &Update) -> Option<SessionUpdate> {
    let v = match u {
        Update::Text(t) => json!({
            "sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": t},
        }),
        Update::Thought(t) => json!({
            "sessionUpdate": "agent_thought_chunk",
            "content": {"type": "text", "text": t},
        }),
        Update::ToolCall {
            id,
            title,
            kind,
            status,
            input,
        } => json!({
            "sessionUpdate": "tool_call",
            "toolCallId": id,
            "title": title,
            "kind": kind,
            "status": status,
            "rawInput": input,
        }),
        Update::ToolCallUpdate {
            id,
            title,
            status,
            output,
        } => {
            let mut v = json!({"sessionUpdate": "tool_call_update", "toolCallId": id});
            if let Some(t) = title {
                v["title"] = json!(t);
            }
            if let Some(s) = status {
                v["status"] = json!(s);
            }
            if let Some(o) = output {
                v["content"] = json!([{"type": "content", "content": {"type": "text", "text": o}}]);
            }
            v
        }
        Update::Plan(entries) => json!({
            "sessionUpdate": "plan",
            "entries": entries.iter().map(|(c, s)| json!({
                "content": c, "priority": "medium", "status": s,
            })).collect::<Vec<_>>(),
        }),
        Update::Usage { used, size } => json!({
            "sessionUpdate": "usage_update", "used": used, "size": size,
        }),
    };
    serde_json::from_value(v).ok()
}

/// The text of a prompt: text blocks as they are, links to resources by URI.
pub fn prompt_text(blocks: &[ContentBlock]) -> String {
    let mut out = String::new();
    for b in blocks {
        match b {
            ContentBlock::Text(t) => {
                out.push_str(&t.text);
                out.push('\n');
            }
            ContentBlock::ResourceLink(l) => {
                out.push_str(&format!("(see {})\n", l.uri));
            }
            _ => {}
        }
    }
    out.trim().to_string()
}

/// Why the ACP connection on stdio ended with an error.
#[derive(Debug, thiserror::Error)]
pub enum ConnectionError {
    /// The connection's thread could not start its runtime.
    #[error("{0}")]
    Runtime(#[source] std::io::Error),
    /// The protocol ended the connection, in its own words.
    #[error("{0}")]
    Protocol(String),
}

/// Speak ACP on this process's stdin and stdout, on a thread of its own. Returns the editor
/// handle once the connection is up, and the thread, which ends with the connection.
pub fn serve_stdio(
    events: mpsc::UnboundedSender<FromEditor>,
) -> std::io::Result<(Editor, std::thread::JoinHandle<Result<(), ConnectionError>>)> {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Editor>();
    let thread = std::thread::Builder::new()
        .name("acp".into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(ConnectionError::Runtime)?;
            let handle = rt.handle().clone();
            rt.block_on(async move {
                let ended = lines::Ended::default();
                let closed = ended.closed.clone();
                let transport = lines::transport(
                    tokio::io::stdin(),
                    tokio::io::stdout(),
                    lines::MAX_MESSAGE,
                    ended,
                );
                let (e1, e2, e3) = (events.clone(), events.clone(), events);
                Agent
                    .v1()
                    .name("rawko")
                    .on_receive_request(
                        async move |_r: InitializeRequest, responder, _cx| {
                            responder.respond(
                                InitializeResponse::new(ProtocolVersion::V1)
                                    .agent_capabilities(AgentCapabilities::new())
                                    .agent_info(Implementation::new(
                                        "rawko",
                                        env!("CARGO_PKG_VERSION"),
                                    )),
                            )
                        },
                        agent_client_protocol::on_receive_request!(),
                    )
                    .on_receive_request(
                        async move |r: NewSessionRequest, responder, _cx| {
                            let _ = e1.send(FromEditor::NewSession {
                                cwd: r.cwd,
                                reply: NewSessionReply(responder),
                            });
                            Ok(())
                        },
                        agent_client_protocol::on_receive_request!(),
                    )
                    .on_receive_request(
                        async move |r: PromptRequest, responder, _cx| {
                            let _ = e2.send(FromEditor::Prompt {
                                session: r.session_id.0.to_string(),
                                text: prompt_text(&r.prompt),
                                reply: PromptReply(responder),
                            });
                            Ok(())
                        },
                        agent_client_protocol::on_receive_request!(),
                    )
                    .on_receive_notification(
                        async move |n: CancelNotification, _cx| {
                            let _ = e3.send(FromEditor::Cancel {
                                session: n.session_id.0.to_string(),
                            });
                            Ok(())
                        },
                        agent_client_protocol::on_receive_notification!(),
                    )
                    .connect_with(transport, async move |cx: ConnectionTo<Client>| {
                        let _ = ready_tx.send(Editor { cx, rt: handle });
                        // The editor closed its end: the connection is over.
                        closed.notified().await;
                        Ok(())
                    })
                    .await
                    .map_err(|e| ConnectionError::Protocol(e.to_string()))
            })
        })?;
    match ready_rx.recv() {
        Ok(editor) => Ok((editor, thread)),
        Err(_) => {
            let why = match thread.join() {
                Ok(Err(e)) => e.to_string(),
                _ => "the connection ended before it opened".into(),
            };
            Err(std::io::Error::other(why))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_update_becomes_a_session_update() {
        for u in [
            Update::Text("hi".into()),
            Update::Thought("hm".into()),
            Update::ToolCall {
                id: "1".into(),
                title: "Read a.txt".into(),
                kind: "read".into(),
                status: "in_progress".into(),
                input: Some(json!({"path": "a.txt"})),
            },
            Update::ToolCallUpdate {
                id: "1".into(),
                title: None,
                status: Some("completed".into()),
                output: Some("text".into()),
            },
            Update::Plan(vec![("planner".into(), "completed".into())]),
            Update::Usage { used: 1, size: 2 },
        ] {
            assert!(to_session_update(&u).is_some(), "{u:?}");
        }
    }
}
