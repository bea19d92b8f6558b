//! `rawko acp`: rawko as an Agent Client Protocol agent on stdio, for editors.
//!
//! A session lives in this workspace. Its first prompt starts a task; a prompt after a task
//! that was cancelled or interrupted resumes that task; after a task that ended, a prompt
//! starts a new one. Progress streams to the editor as `session/update` (the states as a plan,
//! each tool call with its status, the agents' messages), rawko's ask decisions become
//! `session/request_permission`, and `session/cancel` interrupts the task, which stays
//! resumable. Everything is recorded in the workspace's task store, as for `rawko run`.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::Args;

use crate::cli::lookup::usable_agent;
use crate::cli::servers::mcp_servers;
use crate::cli::setup::{DEFAULT_START, Heartbeat, OutputFlags, Setup, Start, drive_with};
use crate::cli::trust::decide_trust;
use crate::cli::{BadInput, Context};
use rawko_acp::client::{Stop, Update};
use rawko_acp::serve::{Editor, FromEditor, PromptReply};
use rawko_config::Trust;
use rawko_fsm::CancelFlag;
use rawko_fsm::events::{EventSink, RunEvent};
use rawko_store::{AnyStore, TaskStatus};

/// How long the editor has to answer a permission question before it counts as no.
const ASK_TIMEOUT: Duration = Duration::from_secs(600);

/// Speak the Agent Client Protocol on stdio, as an agent for editors (Zed, JetBrains, Neovim)
#[derive(Debug, Args)]
#[command(
    after_help = "Configure your editor to start `rawko acp` in the project as an ACP \
    agent. Zed, for example (settings.json):\n  \
    \"agent_servers\": { \"rawko\": { \"command\": \"rawko\", \"args\": [\"acp\"] } }\n\n\
    Each prompt runs a rawko task in this workspace, as `rawko run` would, starting at --agent. \
    A prompt after a task that was cancelled continues that task. Questions rawko would ask on \
    a terminal (a bash filter's ask, an external agent's permission request) go to the editor. \
    Tasks are in the workspace's task store: `rawko tasks list`."
)]
pub struct AcpCmd {
    /// The agent each task starts with
    #[arg(long, value_name = "NAME", default_value = DEFAULT_START)]
    agent: String,
    /// Trust this workspace's own agents and config (remembered, as `rawko trust`)
    #[arg(long)]
    trust: bool,
    /// Approve the configured MCP servers without asking (there is no terminal to ask on)
    #[arg(long)]
    yes: bool,
    /// Most transitions one task may take
    #[arg(long, default_value_t = crate::cli::setup::DEFAULT_MAX_STEPS)]
    max_steps: u32,
}

/// One editor session: the task it last ran.
#[derive(Default)]
struct Session {
    task: Option<String>,
}

type Running<'a> = Pin<Box<dyn Future<Output = (String, Option<String>)> + 'a>>;

impl AcpCmd {
    pub async fn execute(self, cx: &Context) -> anyhow::Result<ExitCode> {
        if self.max_steps == 0 {
            return Err(BadInput::new("--max-steps must be at least 1").into());
        }
        let trust = decide_trust(cx, self.trust, false)?;
        usable_agent(cx, &self.agent)?;
        let store = cx.open_store().await?;
        let mcp = mcp_servers(cx, self.yes).await?;
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let (editor, thread) = rawko_acp::serve::serve_stdio(tx)
            .map_err(|e| anyhow::anyhow!("cannot speak ACP on stdio: {e}"))?;
        tracing::info!("serving ACP on stdio in {}", cx.workspace().display());

        let mut sessions: HashMap<String, Session> = HashMap::new();
        let mut running: Option<(String, CancelFlag, Running<'_>)> = None;
        let workspace = cx.workspace().to_path_buf();
        loop {
            tokio::select! {
                ev = rx.recv() => {
                    let Some(ev) = ev else { break };
                    match ev {
                        FromEditor::NewSession { cwd, reply } => {
                            let inside = cwd
                                .canonicalize()
                                .is_ok_and(|c| c.starts_with(&workspace));
                            if inside {
                                let id = format!("rawko-{}", sessions.len() + 1);
                                sessions.insert(id.clone(), Session::default());
                                reply.ok(&id);
                            } else {
                                reply.refuse(&format!(
                                    "this rawko serves the workspace {}, and {} is not inside it: \
                                     start `rawko acp` there (or with --workspace)",
                                    workspace.display(),
                                    cwd.display()
                                ));
                            }
                        }
                        FromEditor::Prompt { session, text, reply } => {
                            let Some(s) = sessions.get(&session) else {
                                reply.refuse(&format!("no session {session}"));
                                continue;
                            };
                            if running.is_some() {
                                reply.refuse("a task is running; cancel it first (session/cancel)");
                                continue;
                            }
                            if text.trim().is_empty() {
                                reply.refuse("the prompt has no text: say what to do");
                                continue;
                            }
                            let resume = match s.task.clone() {
                                Some(id) => store.task(&id).await.is_ok_and(|t| {
                                    matches!(t.status, TaskStatus::Cancelled | TaskStatus::Interrupted)
                                }).then_some(id),
                                None => None,
                            };
                            let cancel = CancelFlag::default();
                            let fut = run_prompt(
                                cx,
                                &store,
                                PromptRun {
                                    editor: editor.clone(),
                                    session: session.clone(),
                                    text,
                                    resume,
                                    agent: self.agent.clone(),
                                    trust,
                                    max_steps: self.max_steps,
                                    mcp: mcp.clone(),
                                    cancel: cancel.clone(),
                                },
                                reply,
                            );
                            running = Some((session, cancel, Box::pin(fut)));
                        }
                        FromEditor::Cancel { session } => {
                            if let Some((s, cancel, _)) = &running
                                && *s == session
                            {
                                cancel.cancel();
                                rawko_shell::exec::stop_all();
                            }
                        }
                    }
                }
                (session, task) = async { running.as_mut().expect("checked").2.as_mut().await },
                    if running.is_some() => {
                    running = None;
                    if let Some(s) = sessions.get_mut(&session) {
                        s.task = task.or(s.task.take());
                    }
                }
                _ = tokio::signal::ctrl_c() => {
                    if let Some((_, cancel, _)) = &running {
                        cancel.cancel();
                    }
                    break;
                }
            }
        }
        // A task still running when the editor went away is cancelled, keeping what finished.
        if let Some((_, cancel, fut)) = running.take() {
            cancel.cancel();
            rawko_shell::exec::stop_all();
            let _ = tokio::time::timeout(Duration::from_secs(10), fut).await;
        }
        drop(editor);
        match thread.join() {
            Ok(Err(e)) if !e.to_string().contains("closed") => {
                tracing::info!("the ACP connection ended: {e}");
            }
            _ => {}
        }
        Ok(ExitCode::SUCCESS)
    }
}

/// What one prompt runs with.
struct PromptRun {
    editor: Editor,
    session: String,
    text: String,
    resume: Option<String>,
    agent: String,
    trust: Trust,
    max_steps: u32,
    mcp: std::rc::Rc<rawko_mcp::client::Servers>,
    cancel: CancelFlag,
}

/// Run (or resume) the session's task for one prompt, and answer the prompt. Returns the
/// session and the task it ran.
async fn run_prompt(
    cx: &Context,
    store: &AnyStore,
    p: PromptRun,
    reply: PromptReply,
) -> (String, Option<String>) {
    let session = p.session.clone();
    match drive(cx, store, p).await {
        Ok((task, stop)) => {
            reply.stop(stop);
            (session, Some(task))
        }
        Err(e) => {
            reply.refuse(&format!("{e:#}"));
            (session, None)
        }
    }
}

async fn drive(cx: &Context, store: &AnyStore, p: PromptRun) -> anyhow::Result<(String, Stop)> {
    let sink = Arc::new(EditorSink::new(p.editor.clone(), p.session.clone()));
    let quiet = OutputFlags {
        quiet: true,
        no_stream: false,
        ..Default::default()
    };
    let mut setup = Setup::new(cx, p.trust, &quiet)?;
    setup.run.max_steps = p.max_steps;
    setup.run.mcp = Some(p.mcp.clone());
    setup.sink = Some(sink.clone());
    setup.timeline_hint = false;
    let options = serde_json::json!({ "max_steps": p.max_steps, "start": p.agent, "acp": true });
    let start = match &p.resume {
        Some(id) => {
            store.reopen(id).await?;
            Start::Resume { id }
        }
        None => Start::New {
            prompt: &p.text,
            agent: &p.agent,
            options,
        },
    };
    let prepared = setup.prepare(start, store).await?;
    let task = prepared.task().to_string();
    if let Err(holder) = store.acquire_lease(&task).await? {
        anyhow::bail!(
            "task {task} is being run by rawko (pid {} on {})",
            holder.pid,
            rawko_text::line(&holder.host, 80)
        );
    }
    let asker = {
        let editor = p.editor.clone();
        let session = p.session.clone();
        rawko_toolset::ask::install(move |q| {
            editor.ask(
                &session,
                &format!("{}: {}", q.who, rawko_text::line(&q.what, 300)),
                "execute",
                &q.reason,
                ASK_TIMEOUT,
            )
        })
    };
    // The lease is renewed while the prompt runs, as `rawko run` renews it, and a task taken
    // over by another runner stops this prompt.
    let heartbeat = Heartbeat::start(store, &task, &p.cancel).await?;
    let end = drive_with(prepared, store, p.cancel.clone(), false).await;
    drop(heartbeat);
    drop(asker);
    let _ = store.release_lease(&task).await;
    let end = end?;
    let stop = match end.status {
        TaskStatus::Cancelled | TaskStatus::Interrupted => Stop::Cancelled,
        _ => Stop::EndTurn,
    };
    let closing = match end.status {
        TaskStatus::Done => format!("\n\nTask {task} is done.\n{}", end.summary),
        TaskStatus::Cancelled | TaskStatus::Interrupted => format!(
            "\n\nTask {task} was {} at {}; send another prompt to continue it.",
            end.status.as_str(),
            end.state
        ),
        other => format!("\n\nTask {task} {}: {}", other.as_str(), end.summary),
    };
    p.editor.update(&p.session, &Update::Text(closing));
    Ok((task, stop))
}

/// A run's events as the editor's session updates.
struct EditorSink {
    editor: Editor,
    session: String,
    state: Mutex<SinkState>,
}

#[derive(Default)]
struct SinkState {
    /// The top-level states so far, for the plan: (agent, status).
    states: Vec<(String, String)>,
    /// Tool calls announced and not yet finished, innermost last: an agent called as a tool
    /// makes its own calls inside its caller's.
    open: Vec<String>,
    next: u64,
}

impl EditorSink {
    fn new(editor: Editor, session: String) -> Self {
        EditorSink {
            editor,
            session,
            state: Mutex::new(SinkState::default()),
        }
    }

    fn send(&self, u: Update) {
        self.editor.update(&self.session, &u);
    }
}

/// ACP's tool kind for a rawko tool (the tool's own), or for an editor's method an external
/// agent called.
fn kind_of(tool: &str) -> &'static str {
    if let Some(kind) = rawko_toolset::host::acp_kind(tool) {
        return kind.as_str();
    }
    match tool {
        "fs/write_text_file" => "edit",
        "terminal" | "terminal/create" => "execute",
        "fs/read_text_file" => "read",
        _ => "other",
    }
}

impl EventSink for EditorSink {
    fn emit(&self, event: &RunEvent) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        match event {
            RunEvent::StateEntered { agent, depth: 0 } => {
                for s in &mut st.states {
                    s.1 = "completed".into();
                }
                st.states.push((agent.clone(), "in_progress".into()));
                let plan = st.states.clone();
                drop(st);
                self.send(Update::Plan(plan));
            }
            RunEvent::StateEntered { agent, .. } => {
                drop(st);
                self.send(Update::Thought(format!("asking the {agent} agent\n")));
            }
            RunEvent::Text { text, .. } => {
                drop(st);
                self.send(Update::Text(text.clone()));
            }
            RunEvent::ToolCall { agent, tool, input } => {
                st.next += 1;
                let id = format!("call-{}", st.next);
                st.open.push(id.clone());
                drop(st);
                let target = ["path", "command", "pattern", "query"]
                    .iter()
                    .find_map(|k| input.get(k).and_then(|v| v.as_str()))
                    .map(|t| format!(" {}", rawko_text::line(t, 120)))
                    .unwrap_or_default();
                self.send(Update::ToolCall {
                    id,
                    title: format!("{agent}: {tool}{target}"),
                    kind: kind_of(tool).into(),
                    status: "in_progress".into(),
                    input: Some(input.clone()),
                });
            }
            RunEvent::ToolResult {
                ok,
                verdict,
                preview,
                ..
            } => {
                let Some(id) = st.open.pop() else {
                    return;
                };
                drop(st);
                let output = if verdict.starts_with("denied") {
                    verdict.clone()
                } else {
                    preview.clone()
                };
                self.send(Update::ToolCallUpdate {
                    id,
                    title: None,
                    status: Some(if *ok { "completed" } else { "failed" }.into()),
                    output: Some(output),
                });
            }
            RunEvent::StateEnded {
                agent,
                outcome,
                summary,
            } => {
                drop(st);
                self.send(Update::Thought(format!(
                    "{agent} {outcome}: {}\n",
                    rawko_text::line(summary, 500)
                )));
            }
            RunEvent::Transition { to, reason, .. } => {
                drop(st);
                self.send(Update::Thought(format!("→ {to} ({reason})\n")));
            }
            RunEvent::Warning { message } => {
                drop(st);
                self.send(Update::Thought(format!("warning: {message}\n")));
            }
            _ => {}
        }
    }
}
