//! Driving an external coding agent over ACP: rawko is the client.
//!
//! The agent's program is started by the caller (in the state's kernel sandbox) and handed
//! over as a child process. [`Connection::start`] initialises it with client capabilities that
//! match the state's grants and opens a session in the workspace. What the agent then asks of
//! its client (files, terminals, permission) and what it reports (`session/update`) arrive as
//! [`Request`]s on a channel, served on the caller's own thread by the caller's own tools: the
//! protocol layer never touches the workspace itself. A request for a capability rawko did not
//! declare is refused here, before it reaches the caller.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    CancelNotification, ClientCapabilities, ContentBlock, ContentChunk, CreateTerminalRequest,
    CreateTerminalResponse, FileSystemCapabilities, Implementation, InitializeRequest,
    KillTerminalRequest, KillTerminalResponse, NewSessionRequest, PermissionOption,
    PermissionOptionId, PermissionOptionKind, PromptRequest, ReadTextFileRequest,
    ReadTextFileResponse, ReleaseTerminalRequest, ReleaseTerminalResponse,
    RequestPermissionOutcome, RequestPermissionRequest, RequestPermissionResponse,
    SelectedPermissionOutcome, SessionId, SessionNotification, SessionUpdate, StopReason,
    TerminalExitStatus, TerminalOutputRequest, TerminalOutputResponse, TextContent, ToolCallStatus,
    WaitForTerminalExitRequest, WaitForTerminalExitResponse, WriteTextFileRequest,
    WriteTextFileResponse,
};
use agent_client_protocol::{Agent, Client};
use tokio::sync::{mpsc, oneshot};

use crate::lines;
use rawko_sandbox::program::StderrTail;

/// What the state may do, declared to the agent as client capabilities.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grants {
    pub read: bool,
    pub write: bool,
    pub terminal: bool,
}

/// Why the agent could not be driven.
#[derive(Debug, thiserror::Error)]
pub enum AcpError {
    #[error("the agent did not start: {0}")]
    Start(String),
    #[error("the agent speaks another ACP protocol version than rawko's (1): {0}")]
    Version(String),
    #[error("the agent did not answer {what} within {secs} s")]
    Silent { what: &'static str, secs: u64 },
    #[error("the agent failed: {0}")]
    Protocol(String),
    #[error("the agent's connection ended: {0}")]
    Closed(String),
}

/// A terminal's state as the agent sees it.
#[derive(Debug, Clone, Default)]
pub struct TerminalState {
    pub output: String,
    pub truncated: bool,
    /// Set once the command has ended: its exit code, or the signal that ended it.
    pub exit: Option<(Option<u32>, Option<String>)>,
}

/// What the agent asks for or reports; each request carries the channel its answer goes to.
#[derive(Debug)]
pub enum Request {
    Read {
        path: PathBuf,
        line: Option<u32>,
        limit: Option<u32>,
        reply: oneshot::Sender<Result<String, String>>,
    },
    Write {
        path: PathBuf,
        content: String,
        reply: oneshot::Sender<Result<(), String>>,
    },
    CreateTerminal {
        command: String,
        args: Vec<String>,
        env: Vec<(String, String)>,
        cwd: Option<PathBuf>,
        output_limit: Option<u64>,
        reply: oneshot::Sender<Result<String, String>>,
    },
    TerminalOutput {
        id: String,
        reply: oneshot::Sender<Result<TerminalState, String>>,
    },
    WaitForExit {
        id: String,
        reply: oneshot::Sender<Result<TerminalState, String>>,
    },
    KillTerminal {
        id: String,
        reply: oneshot::Sender<Result<(), String>>,
    },
    ReleaseTerminal {
        id: String,
        reply: oneshot::Sender<Result<(), String>>,
    },
    /// The agent asks before one of its own tool calls: what it says the call is (`title`,
    /// `kind`), the call's input as the agent gave it and the paths it names. The answer is
    /// whether to allow it; it picks one of the agent's options of that kind (the reject
    /// option when refused), or cancels when the agent offered none.
    Permission {
        title: String,
        kind: Option<String>,
        input: Option<serde_json::Value>,
        locations: Vec<PathBuf>,
        reply: oneshot::Sender<bool>,
    },
    Update(Update),
}

/// A `session/update`, reduced to what rawko shows and records.
#[derive(Debug, Clone, PartialEq)]
pub enum Update {
    Text(String),
    Thought(String),
    ToolCall {
        id: String,
        title: String,
        kind: String,
        status: String,
        input: Option<serde_json::Value>,
    },
    ToolCallUpdate {
        id: String,
        title: Option<String>,
        status: Option<String>,
        output: Option<String>,
    },
    Plan(Vec<(String, String)>),
    Usage {
        used: u64,
        size: u64,
    },
}

/// An initialised agent with an open session.
pub struct Connection {
    cx: ConnectionTo<Agent>,
    session: SessionId,
    stderr: StderrTail,
    /// Why reading the agent's output failed, when it did.
    transport_failed: Arc<Mutex<Option<String>>>,
    child: tokio::process::Child,
    driver: tokio::task::JoinHandle<()>,
    _close: oneshot::Sender<()>,
    /// The agent's name and version, as it gave them.
    pub agent_info: Option<String>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("session", &self.session.0)
            .finish()
    }
}

/// Hand a request to the serving side and wait for its answer; `None` when that side is gone.
/// The channel is bounded and the handler awaits room in it, so an agent that sends faster than
/// rawko serves is held back by the protocol's dispatch loop instead of filling memory.
async fn ask<T>(
    tx: &mpsc::Sender<Request>,
    make: impl FnOnce(oneshot::Sender<T>) -> Request,
) -> Option<T> {
    let (reply, answer) = oneshot::channel();
    tx.send(make(reply)).await.ok()?;
    answer.await.ok()
}

fn refused(message: impl Into<String>) -> agent_client_protocol::Error {
    agent_client_protocol::Error::new(-32000, message.into())
}

fn stopped() -> agent_client_protocol::Error {
    refused("rawko stopped serving this session")
}

/// Serve one request the engine answers: refused here when rawko did not declare the
/// capability it needs, otherwise handed over (`make`), and the engine's answer sent back
/// (`ok`), or its refusal as an error.
async fn forward<T, R: agent_client_protocol::JsonRpcResponse>(
    declared: bool,
    method: &str,
    tx: &mpsc::Sender<Request>,
    responder: agent_client_protocol::v1::Responder<R>,
    make: impl FnOnce(oneshot::Sender<Result<T, String>>) -> Request,
    ok: impl FnOnce(T) -> R,
) -> Result<(), agent_client_protocol::Error> {
    if !declared {
        return responder.respond_with_error(not_declared(method));
    }
    match ask(tx, make).await {
        Some(Ok(v)) => responder.respond(ok(v)),
        Some(Err(why)) => responder.respond_with_error(refused(why)),
        None => responder.respond_with_error(stopped()),
    }
}

fn not_declared(what: &str) -> agent_client_protocol::Error {
    agent_client_protocol::Error::new(
        -32601,
        format!("{what} is not available to this agent: rawko did not declare it"),
    )
}

fn exit_status(exit: &(Option<u32>, Option<String>)) -> TerminalExitStatus {
    TerminalExitStatus::new()
        .exit_code(exit.0)
        .signal(exit.1.clone())
}

impl Connection {
    /// Speak ACP with `child` (its stdin and stdout piped): initialise with `grants`, open a
    /// session in `cwd`, each step within `deadline`. What the agent asks for goes to
    /// `requests`.
    pub async fn start(
        mut child: tokio::process::Child,
        grants: Grants,
        cwd: PathBuf,
        deadline: Duration,
        requests: mpsc::Sender<Request>,
    ) -> Result<Connection, AcpError> {
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| AcpError::Start("no stdout".into()))?;
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| AcpError::Start("no stdin".into()))?;
        let stderr = StderrTail::default();
        if let Some(err) = child.stderr.take() {
            tokio::spawn(stderr.clone().keep(err));
        }
        let ended = lines::Ended::default();
        let transport_failed = ended.failed.clone();
        let transport = lines::transport(stdout, stdin, lines::MAX_MESSAGE, ended);
        let (cx_tx, cx_rx) = oneshot::channel();
        let (close, closed) = oneshot::channel::<()>();
        let tx = requests;
        let (t1, t2, t3, t4, t5, t6, t7, t8, t9) = (
            tx.clone(),
            tx.clone(),
            tx.clone(),
            tx.clone(),
            tx.clone(),
            tx.clone(),
            tx.clone(),
            tx.clone(),
            tx,
        );
        let connection = Client
            .v1()
            .name("rawko")
            .on_receive_request(
                async move |r: ReadTextFileRequest, responder, _cx| {
                    let make = |reply| Request::Read {
                        path: r.path,
                        line: r.line,
                        limit: r.limit,
                        reply,
                    };
                    forward(
                        grants.read,
                        "fs/read_text_file",
                        &t1,
                        responder,
                        make,
                        ReadTextFileResponse::new,
                    )
                    .await
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |r: WriteTextFileRequest, responder, _cx| {
                    let make = |reply| Request::Write {
                        path: r.path,
                        content: r.content,
                        reply,
                    };
                    forward(
                        grants.write,
                        "fs/write_text_file",
                        &t2,
                        responder,
                        make,
                        |()| WriteTextFileResponse::new(),
                    )
                    .await
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |r: CreateTerminalRequest, responder, _cx| {
                    let make = |reply| Request::CreateTerminal {
                        command: r.command,
                        args: r.args,
                        env: r.env.into_iter().map(|v| (v.name, v.value)).collect(),
                        cwd: r.cwd,
                        output_limit: r.output_byte_limit,
                        reply,
                    };
                    forward(
                        grants.terminal,
                        "terminal/create",
                        &t3,
                        responder,
                        make,
                        CreateTerminalResponse::new,
                    )
                    .await
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |r: TerminalOutputRequest, responder, _cx| {
                    let make = |reply| Request::TerminalOutput {
                        id: r.terminal_id.0.to_string(),
                        reply,
                    };
                    forward(
                        grants.terminal,
                        "terminal/output",
                        &t4,
                        responder,
                        make,
                        |t: TerminalState| {
                            TerminalOutputResponse::new(t.output, t.truncated)
                                .exit_status(t.exit.as_ref().map(exit_status))
                        },
                    )
                    .await
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |r: WaitForTerminalExitRequest, responder, _cx| {
                    let make = |reply| Request::WaitForExit {
                        id: r.terminal_id.0.to_string(),
                        reply,
                    };
                    forward(
                        grants.terminal,
                        "terminal/wait_for_exit",
                        &t5,
                        responder,
                        make,
                        |t: TerminalState| {
                            WaitForTerminalExitResponse::new(exit_status(
                                &t.exit.unwrap_or((None, None)),
                            ))
                        },
                    )
                    .await
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |r: KillTerminalRequest, responder, _cx| {
                    let make = |reply| Request::KillTerminal {
                        id: r.terminal_id.0.to_string(),
                        reply,
                    };
                    forward(
                        grants.terminal,
                        "terminal/kill",
                        &t6,
                        responder,
                        make,
                        |()| KillTerminalResponse::new(),
                    )
                    .await
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |r: ReleaseTerminalRequest, responder, _cx| {
                    let make = |reply| Request::ReleaseTerminal {
                        id: r.terminal_id.0.to_string(),
                        reply,
                    };
                    forward(
                        grants.terminal,
                        "terminal/release",
                        &t7,
                        responder,
                        make,
                        |()| ReleaseTerminalResponse::new(),
                    )
                    .await
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |r: RequestPermissionRequest, responder, _cx| {
                    let fields = &r.tool_call.fields;
                    let answer = ask(&t8, |reply| Request::Permission {
                        title: fields.title.clone().unwrap_or_default(),
                        kind: fields.kind.as_ref().map(enum_name),
                        input: fields.raw_input.clone(),
                        locations: fields
                            .locations
                            .iter()
                            .flatten()
                            .map(|l| l.path.clone())
                            .collect(),
                        reply,
                    });
                    let allow = answer.await.unwrap_or(false);
                    let outcome = permission_outcome(&r.options, allow);
                    responder.respond(RequestPermissionResponse::new(outcome))
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_notification(
                async move |n: SessionNotification, _cx| {
                    if let Some(u) = reduce(n.update) {
                        let _ = t9.send(Request::Update(u)).await;
                    }
                    Ok(())
                },
                agent_client_protocol::on_receive_notification!(),
            )
            .connect_with(transport, async move |cx: ConnectionTo<Agent>| {
                let _ = cx_tx.send(cx);
                let _ = closed.await;
                Ok(())
            });
        let driver = tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!("the ACP connection ended: {e}");
            }
        });
        let cx = cx_rx
            .await
            .map_err(|_| AcpError::Start("the connection did not open".into()))?;
        let mut c = Connection {
            cx,
            session: SessionId::new("pending"),
            stderr,
            transport_failed,
            child,
            driver,
            _close: close,
            agent_info: None,
        };

        let caps = ClientCapabilities::new()
            .fs(FileSystemCapabilities::new()
                .read_text_file(grants.read)
                .write_text_file(grants.write))
            .terminal(grants.terminal);
        let init = InitializeRequest::new(ProtocolVersion::V1)
            .client_capabilities(caps)
            .client_info(Implementation::new("rawko", env!("CARGO_PKG_VERSION")));
        let answer = match c
            .within(deadline, "initialize", c.cx.send_request(init).block_task())
            .await
        {
            // The protocol layer refuses a version other than the one asked for.
            Err(AcpError::Protocol(m)) if m.contains("protocol version") => {
                return Err(AcpError::Version(m));
            }
            other => other?,
        };
        if answer.protocol_version != ProtocolVersion::V1 {
            return Err(AcpError::Version(format!(
                "it answered version {}",
                serde_json::to_string(&answer.protocol_version).unwrap_or_default()
            )));
        }
        c.agent_info = answer.agent_info.map(|i| {
            format!(
                "{} {}",
                rawko_text::line(&i.name, 64),
                rawko_text::line(&i.version, 32)
            )
        });
        let session = c
            .within(
                deadline,
                "session/new",
                c.cx.send_request(NewSessionRequest::new(cwd)).block_task(),
            )
            .await?;
        c.session = session.session_id;
        Ok(c)
    }

    async fn within<T>(
        &self,
        deadline: Duration,
        what: &'static str,
        call: impl std::future::Future<Output = Result<T, agent_client_protocol::Error>>,
    ) -> Result<T, AcpError> {
        match tokio::time::timeout(deadline, call).await {
            Err(_) => Err(AcpError::Silent {
                what,
                secs: deadline.as_secs(),
            }),
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(self.failure(e)),
        }
    }

    /// An error from the connection, told as what happened to the agent.
    fn failure(&self, e: agent_client_protocol::Error) -> AcpError {
        if agent_client_protocol::is_connection_terminated(&e)
            || agent_client_protocol::is_incoming_transport_closed(&e)
            || self.driver.is_finished()
        {
            let why = self.transport_failed.lock().ok().and_then(|f| f.clone());
            AcpError::Closed(self.stderr.with(
                why.unwrap_or_else(|| "the agent closed its output (it exited, or crashed)".into()),
            ))
        } else {
            AcpError::Protocol(
                self.stderr
                    .with(rawko_text::line(&e.to_string(), 2_000).into_owned()),
            )
        }
    }

    /// Send one prompt turn and wait for its stop reason, and the turn's token usage when the
    /// agent reports it. Requests the agent makes meanwhile arrive on the channel given to
    /// [`Connection::start`]; serve them while this runs.
    pub async fn prompt(&self, text: String) -> Result<(Stop, Option<TokenUsage>), AcpError> {
        let request = PromptRequest::new(
            self.session.clone(),
            vec![ContentBlock::Text(TextContent::new(text))],
        );
        match self.cx.send_request(request).block_task().await {
            Ok(r) => Ok((
                Stop::from(r.stop_reason),
                r.usage.map(|u| TokenUsage {
                    input: u.input_tokens,
                    output: u.output_tokens,
                    cache_read: u.cached_read_tokens.unwrap_or(0),
                }),
            )),
            Err(e) => Err(self.failure(e)),
        }
    }

    /// Ask the agent to stop the turn (`session/cancel`); the prompt then ends with
    /// [`Stop::Cancelled`] if the agent obeys.
    pub fn cancel(&self) {
        let _ = self
            .cx
            .send_notification(CancelNotification::new(self.session.clone()));
    }

    /// Stop the agent's process (its whole sandbox) and the connection.
    pub async fn close(mut self) {
        let _ = self.child.start_kill();
        let _ = tokio::time::timeout(Duration::from_secs(2), self.child.wait()).await;
        self.driver.abort();
    }
}

/// The tokens one prompt turn used, as the agent reports them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokenUsage {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
}

/// How a prompt turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    EndTurn,
    MaxTokens,
    MaxTurnRequests,
    Refusal,
    Cancelled,
    Other,
}

impl Stop {
    pub fn as_str(self) -> &'static str {
        match self {
            Stop::EndTurn => "end_turn",
            Stop::MaxTokens => "max_tokens",
            Stop::MaxTurnRequests => "max_turn_requests",
            Stop::Refusal => "refusal",
            Stop::Cancelled => "cancelled",
            Stop::Other => "other",
        }
    }
}

impl From<StopReason> for Stop {
    fn from(r: StopReason) -> Stop {
        match r {
            StopReason::EndTurn => Stop::EndTurn,
            StopReason::MaxTokens => Stop::MaxTokens,
            StopReason::MaxTurnRequests => Stop::MaxTurnRequests,
            StopReason::Refusal => Stop::Refusal,
            StopReason::Cancelled => Stop::Cancelled,
            _ => Stop::Other,
        }
    }
}

/// A serde enum's wire name (`in_progress`, `execute`).
fn enum_name<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| "other".into())
}

fn chunk_text(c: &ContentChunk) -> Option<String> {
    match &c.content {
        ContentBlock::Text(t) => Some(t.text.clone()),
        _ => None,
    }
}

/// The answer to an agent's permission request: the first of its options that allows (once,
/// then always) when `allow`, else the first that rejects; cancelled when it offered none of
/// that kind. An agent reads an answer's id as the first option that has it, so an id that
/// some option of the other kind also has is never chosen: an agent offering `r` as both
/// "reject" and "allow always" is cancelled, not told `r`.
pub fn permission_outcome(options: &[PermissionOption], allow: bool) -> RequestPermissionOutcome {
    let allows = |kind: PermissionOptionKind| match kind {
        PermissionOptionKind::AllowOnce | PermissionOptionKind::AllowAlways => Some(true),
        PermissionOptionKind::RejectOnce | PermissionOptionKind::RejectAlways => Some(false),
        _ => None,
    };
    // Per id, whether every option under it says the same (and what), in one pass: an agent's
    // list can be long.
    let mut says: std::collections::HashMap<&PermissionOptionId, Option<bool>> =
        std::collections::HashMap::new();
    for o in options {
        let this = allows(o.kind);
        says.entry(&o.option_id)
            .and_modify(|s| {
                if *s != this {
                    *s = None;
                }
            })
            .or_insert(this);
    }
    let wanted: &[PermissionOptionKind] = if allow {
        &[
            PermissionOptionKind::AllowOnce,
            PermissionOptionKind::AllowAlways,
        ]
    } else {
        &[
            PermissionOptionKind::RejectOnce,
            PermissionOptionKind::RejectAlways,
        ]
    };
    let chosen = wanted.iter().find_map(|kind| {
        options
            .iter()
            .find(|o| o.kind == *kind && says.get(&o.option_id) == Some(&Some(allow)))
            .map(|o| o.option_id.clone())
    });
    match chosen {
        Some(id) => RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(id)),
        None => RequestPermissionOutcome::Cancelled,
    }
}

/// The parts of an update (`session/update`, as the agent sent it) rawko shows and records.
pub fn reduce(update: SessionUpdate) -> Option<Update> {
    Some(match update {
        SessionUpdate::AgentMessageChunk(c) => Update::Text(chunk_text(&c)?),
        SessionUpdate::AgentThoughtChunk(c) => Update::Thought(chunk_text(&c)?),
        SessionUpdate::ToolCall(t) => Update::ToolCall {
            id: t.tool_call_id.0.to_string(),
            title: t.title,
            kind: enum_name(&t.kind),
            status: enum_name(&t.status),
            input: t.raw_input,
        },
        SessionUpdate::ToolCallUpdate(u) => Update::ToolCallUpdate {
            id: u.tool_call_id.0.to_string(),
            title: u.fields.title,
            status: u.fields.status.as_ref().map(enum_name),
            output: u.fields.raw_output.map(|v| match v {
                serde_json::Value::String(s) => s,
                other => other.to_string(),
            }),
        },
        SessionUpdate::Plan(p) => Update::Plan(
            p.entries
                .into_iter()
                .map(|e| (e.content, enum_name(&e.status)))
                .collect(),
        ),
        SessionUpdate::UsageUpdate(u) => Update::Usage {
            used: u.used,
            size: u.size,
        },
        _ => return None,
    })
}

/// Whether a tool call status means it is over.
pub fn is_final(status: &str) -> bool {
    status == enum_name(&ToolCallStatus::Completed) || status == enum_name(&ToolCallStatus::Failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn option(id: &'static str, kind: PermissionOptionKind) -> PermissionOption {
        PermissionOption::new(id, id, kind)
    }

    fn selected(outcome: RequestPermissionOutcome) -> Option<String> {
        match outcome {
            RequestPermissionOutcome::Selected(s) => Some(s.option_id.0.to_string()),
            _ => None,
        }
    }

    /// Found by the `acp` fuzz target: an agent that offers two options under one id, one
    /// allowing and one rejecting, was answered with that id when rawko refused, and an agent
    /// reads an id as the first option that has it: rawko's refusal became "allow always". An id
    /// is chosen only when every option under it says the same as rawko; otherwise rawko
    /// cancels, which allows nothing.
    #[test]
    fn regression_fuzz_acp_a_shared_option_id_turned_a_refusal_into_allow_always() {
        use PermissionOptionKind::*;
        let options = [
            option("a", AllowOnce),
            option("r", AllowAlways),
            option("r", RejectOnce),
        ];
        assert_eq!(selected(permission_outcome(&options, false)), None);
        assert_eq!(
            selected(permission_outcome(&options, true)).as_deref(),
            Some("a")
        );
        // An unambiguous option of the kind is still found past an ambiguous one.
        let options = [
            option("x", RejectOnce),
            option("x", AllowOnce),
            option("no", RejectAlways),
        ];
        assert_eq!(
            selected(permission_outcome(&options, false)).as_deref(),
            Some("no")
        );
        assert_eq!(selected(permission_outcome(&options, true)), None);
        // Options an agent offers as they should be: once before always.
        let options = [
            option("aa", AllowAlways),
            option("a", AllowOnce),
            option("r", RejectOnce),
        ];
        assert_eq!(
            selected(permission_outcome(&options, true)).as_deref(),
            Some("a")
        );
        assert_eq!(
            selected(permission_outcome(&options, false)).as_deref(),
            Some("r")
        );
    }
}
