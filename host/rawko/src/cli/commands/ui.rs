//! `rawko ui`: a read-only page in the browser for the workspace's tasks, served on loopback.
//!
//! Every request must carry the random token the URL printed at start (`?t=`), and name this
//! server as its `Host` (`127.0.0.1:PORT` or `localhost:PORT`), so neither another user's page
//! nor a DNS-rebinding one can read the tasks. Everything the store holds is sent as JSON and
//! put on the page as text; the graph is SVG made here, with every name escaped. The page's
//! script and style are this binary's own files, and its Content-Security-Policy allows nothing
//! else: no inline script, no other origin.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use clap::Args;
use serde_json::{Value, json};
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::{broadcast, mpsc, oneshot};

use crate::cli::views::{agents_graph, path_graph, path_of};
use crate::cli::{BadInput, Context, print_err, print_out};
use rawko_agents::graph::Graph;
use rawko_store::{AnyStore, Location, StoreError};

/// Show the workspace's tasks in your browser: each one's path through the agents, a timeline
/// of its steps, and every message and tool call, updated live
#[derive(Debug, Args)]
#[command(
    after_help = "The page is served on 127.0.0.1 only, at a URL with a random token that \
    every request must carry; nothing on it comes from another address. It is read-only. Stop \
    it with Ctrl-C. The port and token are kept (readable by you alone, beside the workspace's \
    task store), so the next `rawko ui` of this workspace serves the same URL and a page left \
    open reconnects; when that port is taken, a free one and a new token are used."
)]
pub struct UiCmd {
    /// The port to serve on [default: the last one this workspace's `rawko ui` used, if it is
    /// free, else a free one]
    #[arg(long)]
    port: Option<u16>,
    /// Open the page in your browser (xdg-open)
    #[arg(long)]
    open: bool,
}

const PAGE: &str = include_str!("../ui/page.html");
const SCRIPT: &str = include_str!("../ui/app.js");
const STYLE: &str = include_str!("../ui/app.css");

/// The page's policy: its own script and style, JSON and events from itself, nothing else.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// How often a task's page asks the store whether anything was committed, on SQLite.
const POLL: Duration = Duration::from_millis(200);

/// On PostgreSQL, where every write's notice says which task it changed, the page asks on each
/// notice for its task, and this often besides.
const POLL_LISTENING: Duration = Duration::from_secs(5);

/// The most tasks listed.
const MAX_TASKS: usize = 500;

/// A question for the thread that holds the store.
enum Ask {
    Tasks,
    Task(String),
    Stamp(String),
}

type Answer = Result<Value, (StatusCode, String)>;

struct Ui {
    token: String,
    port: u16,
    asks: mpsc::UnboundedSender<(Ask, oneshot::Sender<Answer>)>,
    /// The tasks PostgreSQL says changed, while its listener is connected.
    changes: Option<broadcast::Sender<String>>,
    listening: Arc<AtomicBool>,
}

impl Ui {
    async fn ask(&self, what: Ask) -> Answer {
        let (tx, rx) = oneshot::channel();
        self.asks.send((what, tx)).map_err(|_| gone())?;
        rx.await.map_err(|_| gone())?
    }
}

fn gone() -> (StatusCode, String) {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        "the task store is not open".into(),
    )
}

impl UiCmd {
    pub async fn execute(self, cx: &Context) -> anyhow::Result<ExitCode> {
        let location = cx.store_location()?;
        // The store opens now, so a store that cannot be used says so before a URL is printed.
        drop(cx.open_store().await?);
        let graph = agents_graph(cx)?;
        let kept_at = cx.store_path().with_file_name("ui");
        let kept = Kept::read(&kept_at);
        let want = self.port.or(kept.as_ref().map(|k| k.port)).unwrap_or(0);
        let listener = match tokio::net::TcpListener::bind(("127.0.0.1", want)).await {
            // The last port is taken by something else now: any free one will do.
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && self.port.is_none() => {
                tokio::net::TcpListener::bind(("127.0.0.1", 0)).await
            }
            bound => bound,
        }
        .map_err(|e| {
            BadInput::new(if e.kind() == std::io::ErrorKind::AddrInUse {
                format!(
                    "port {want} on 127.0.0.1 is in use; choose another with --port, or leave \
                     it out for a free one"
                )
            } else {
                format!("cannot listen on 127.0.0.1:{want}: {e}")
            })
        })?;
        let port = listener.local_addr()?.port();
        // The same URL as last time, so that a page left open finds this server again.
        let token = match kept {
            Some(k) if k.port == port => k.token,
            _ => token()?,
        };
        if let Err(e) = (Kept {
            port,
            token: token.clone(),
        })
        .write(&kept_at)
        {
            print_err(&format!(
                "warning: cannot keep the page's address in {}: {e}; the next `rawko ui` will \
                 serve another",
                kept_at.display()
            ))?;
        }
        let (changes, listening) = listen(&location).await;
        let (asks, questions) = mpsc::unbounded_channel();
        let workspace = cx.workspace().display().to_string();
        let lease = crate::cli::setup::lease_settings(cx)?;
        std::thread::spawn(move || store_thread(location, lease, workspace, graph, questions));
        let ui = Arc::new(Ui {
            token,
            port,
            asks,
            changes,
            listening,
        });
        let url = format!("http://127.0.0.1:{port}/?t={}", ui.token);
        print_out(&format!(
            "rawko ui: the workspace's tasks at {url}\n(read-only; Ctrl-C stops it)"
        ))?;
        if self.open {
            match std::process::Command::new("xdg-open")
                .arg(&url)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
            {
                Ok(_) => {}
                Err(e) => print_err(&format!(
                    "warning: cannot open a browser (xdg-open: {e}); open the URL above"
                ))?,
            }
        }
        let app = Router::new()
            .route("/", get(page))
            .route("/task/{id}", get(page))
            .route("/app.js", get(script))
            .route("/app.css", get(style))
            .route("/api/tasks", get(tasks))
            .route("/api/task/{id}", get(task))
            .route("/api/task/{id}/events", get(events))
            .layer(axum::middleware::from_fn_with_state(ui.clone(), guard))
            .with_state(ui);
        axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = tokio::signal::ctrl_c().await;
            })
            .await?;
        Ok(ExitCode::SUCCESS)
    }
}

/// On PostgreSQL, `LISTEN` for the tasks writes change, forwarded to every page's event stream;
/// the flag is cleared when the listener's connection ends (the pages then poll as on SQLite).
/// A listener that cannot start is a warning.
async fn listen(location: &Location) -> (Option<broadcast::Sender<String>>, Arc<AtomicBool>) {
    let listening = Arc::new(AtomicBool::new(false));
    let Location::Pg(config) = location else {
        return (None, listening);
    };
    let mut listener = match rawko_store::pg::Listener::start(config).await {
        Ok(l) => l,
        Err(e) => {
            let _ = print_err(&format!(
                "warning: cannot listen for changes ({e}); pages will ask the store every {} ms",
                POLL.as_millis()
            ));
            return (None, listening);
        }
    };
    let (changes, _) = broadcast::channel(1024);
    listening.store(true, Ordering::Relaxed);
    let (tx, on) = (changes.clone(), listening.clone());
    tokio::spawn(async move {
        while let Some(task) = listener.next().await {
            let _ = tx.send(task);
        }
        on.store(false, Ordering::Relaxed);
        tracing::warn!("rawko ui: the store's change notices stopped; pages poll it instead");
    });
    (Some(changes), listening)
}

/// Until something of task `id` may have been committed: a notice naming it (or one missed),
/// [`POLL_LISTENING`] at most; [`POLL`] when nothing listens.
async fn next_change(ui: &Ui, id: &str, notices: &mut Option<broadcast::Receiver<String>>) {
    let Some(rx) = notices
        .as_mut()
        .filter(|_| ui.listening.load(Ordering::Relaxed))
    else {
        tokio::time::sleep(POLL).await;
        return;
    };
    let _ = tokio::time::timeout(POLL_LISTENING, async {
        loop {
            match rx.recv().await {
                Ok(task) if task != id => continue,
                // This task, or a notice missed: look.
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => return,
                // No one sends any more: look, at the polling pace.
                Err(broadcast::error::RecvError::Closed) => {
                    tokio::time::sleep(POLL).await;
                    return;
                }
            }
        }
    })
    .await;
}

/// 128 random bits, as hex.
fn token() -> anyhow::Result<String> {
    use std::io::Read as _;
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// The port and token the workspace's last `rawko ui` served with: `PORT TOKEN` in a file only
/// its owner can read, beside the task store (which whoever reads the file can read anyway).
struct Kept {
    port: u16,
    token: String,
}

impl Kept {
    /// What the file says, or None when it is missing, not what this code writes, or not a
    /// file of this user's that no one else may read (a token others could read is not reused).
    fn read(path: &std::path::Path) -> Option<Kept> {
        use std::os::unix::fs::MetadataExt as _;
        let meta = std::fs::symlink_metadata(path).ok()?;
        // SAFETY: geteuid has no preconditions and cannot fail.
        let me = unsafe { libc::geteuid() };
        if !meta.is_file() || meta.uid() != me || meta.mode() & 0o077 != 0 {
            return None;
        }
        let text = std::fs::read_to_string(path).ok()?;
        let (port, token) = text.trim().split_once(' ')?;
        let port = port.parse().ok().filter(|p| *p != 0)?;
        (token.len() == 32 && token.bytes().all(|b| b.is_ascii_hexdigit())).then(|| Kept {
            port,
            token: token.to_string(),
        })
    }

    /// Written whole (a new file renamed over the old), readable by its owner alone.
    fn write(&self, path: &std::path::Path) -> std::io::Result<()> {
        use std::io::Write as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let fresh = path.with_file_name(format!("ui.{}", std::process::id()));
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&fresh)?;
        f.write_all(format!("{} {}\n", self.port, self.token).as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&fresh, path)
    }
}

/// The `t` parameter of a query string (a token is hex: nothing in it is encoded).
fn token_of(query: Option<&str>) -> Option<&str> {
    query?.split('&').find_map(|p| p.strip_prefix("t="))
}

/// Every request: this server's `Host`, the token, and the headers that keep the page to
/// itself.
async fn guard(State(ui): State<Arc<Ui>>, req: Request, next: Next) -> Response {
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    let mut response = if host != format!("127.0.0.1:{}", ui.port)
        && host != format!("localhost:{}", ui.port)
    {
        (
            StatusCode::MISDIRECTED_REQUEST,
            "this server answers to 127.0.0.1 and localhost only\n",
        )
            .into_response()
    } else if !token_of(req.uri().query()).is_some_and(|t| same(t.as_bytes(), ui.token.as_bytes()))
    {
        (
            StatusCode::UNAUTHORIZED,
            "the URL's token is missing or wrong: open the URL `rawko ui` printed\n",
        )
            .into_response()
    } else {
        next.run(req).await
    };
    let h = response.headers_mut();
    for (name, value) in [
        (header::CONTENT_SECURITY_POLICY, CSP),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::CACHE_CONTROL, "no-store"),
        (header::X_FRAME_OPTIONS, "DENY"),
    ] {
        h.insert(name, HeaderValue::from_static(value));
    }
    response
}

/// Equal, in time that does not depend on where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

/// The page, its script and style named with the token (hex: nothing to escape).
async fn page(State(ui): State<Arc<Ui>>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        PAGE.replace("{{t}}", &ui.token),
    )
}

async fn script() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        SCRIPT,
    )
}

async fn style() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], STYLE)
}

async fn tasks(State(ui): State<Arc<Ui>>) -> Response {
    reply(ui.ask(Ask::Tasks).await)
}

async fn task(State(ui): State<Arc<Ui>>, Path(id): Path<String>) -> Response {
    reply(ui.ask(Ask::Task(id)).await)
}

fn reply(answer: Answer) -> Response {
    match answer {
        Ok(v) => axum::Json(v).into_response(),
        Err((status, message)) => (status, axum::Json(json!({ "error": message }))).into_response(),
    }
}

/// Server-sent events for one task: `change` whenever something of it was committed.
async fn events(State(ui): State<Arc<Ui>>, Path(id): Path<String>) -> Response {
    // Listening before the first look, so that nothing committed after it goes unheard.
    let notices = ui.changes.as_ref().map(|c| c.subscribe());
    let first = match ui.ask(Ask::Stamp(id.clone())).await {
        Ok(v) => v,
        Err(e) => return reply(Err(e)),
    };
    let start = (ui, id, first, notices);
    let stream = futures::stream::unfold(start, |(ui, id, last, mut notices)| async move {
        loop {
            next_change(&ui, &id, &mut notices).await;
            let now = ui.ask(Ask::Stamp(id.clone())).await.ok()?;
            if now != last {
                let event = Event::default().event("change").data(now.to_string());
                return Some((
                    Ok::<_, std::convert::Infallible>(event),
                    (ui, id, now, notices),
                ));
            }
        }
    });
    // A page whose server went away asks again every half second, so that it finds the next
    // `rawko ui` (same URL) at once.
    let hello = futures::stream::once(async {
        Ok(Event::default()
            .retry(Duration::from_millis(500))
            .comment("connected"))
    });
    Sse::new(futures::StreamExt::chain(hello, stream))
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}

/// The thread that holds the store (a store's connection belongs to one thread) and answers
/// the server's questions in turn.
fn store_thread(
    location: Location,
    lease: rawko_store::LeaseSettings,
    workspace: String,
    graph: Graph,
    mut questions: mpsc::UnboundedReceiver<(Ask, oneshot::Sender<Answer>)>,
) {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return;
    };
    rt.block_on(async move {
        let store = match AnyStore::open(&location).await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("rawko ui: {e}");
                return;
            }
        };
        store.set_lease_settings(lease);
        while let Some((ask, answer)) = questions.recv().await {
            let result = match ask {
                Ask::Tasks => list(&store, &workspace).await,
                Ask::Task(id) => one(&store, &graph, &id).await,
                Ask::Stamp(id) => store.stamp(&id).await.map(Value::from),
            };
            let _ = answer.send(result.map_err(|e| match e {
                StoreError::NoSuchTask(_) => (StatusCode::NOT_FOUND, e.to_string()),
                e => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
            }));
        }
    });
}

/// The workspace's tasks, newest first.
async fn list(store: &AnyStore, workspace: &str) -> Result<Value, StoreError> {
    let mut out = Vec::new();
    for t in store.tasks_in(workspace).await?.into_iter().take(MAX_TASKS) {
        let usage = store.task_usage(&t.id).await?;
        out.push(json!({
            "id": t.id,
            "status": t.status.as_str(),
            "state": t.state,
            "steps": t.steps,
            "prompt": t.prompt.chars().take(300).collect::<String>(),
            "created_at": t.created_at,
            "updated_at": t.updated_at,
            "tokens": usage.input_tokens + usage.output_tokens + usage.cache_read + usage.cache_write,
        }));
    }
    Ok(Value::Array(out))
}

/// Everything of one task the page shows.
async fn one(store: &AnyStore, graph: &Graph, id: &str) -> Result<Value, StoreError> {
    let task = store.task(id).await?;
    let transitions = store.transitions(&task.id).await?;
    let turns = store.turns(&task.id).await?;
    let runs = store.runs(&task.id).await?;
    let calls = store.tool_calls(&task.id).await?;
    let mut messages = serde_json::Map::new();
    for t in &turns {
        messages.insert(t.id.to_string(), json!(store.messages(t.id).await?));
    }
    let usage: serde_json::Map<String, Value> = store
        .usage_by_turn(&task.id)
        .await?
        .into_iter()
        .map(|(turn, u)| (turn.to_string(), json!(u)))
        .collect();
    let overlay = path_of(&task, &transitions, &turns, &runs);
    let svg = path_graph(graph, &overlay).to_svg(Some(&overlay));
    // What the task's Write and Edit calls did, from the store (git is never run).
    let changes: Vec<Value> = calls
        .iter()
        .filter(|c| !c.is_error && matches!(c.tool.as_str(), "Write" | "Edit"))
        .map(|c| {
            json!({
                "tool": c.tool,
                "turn": c.turn_id,
                "input": serde_json::from_str::<Value>(&c.input).unwrap_or(Value::String(c.input.clone())),
            })
        })
        .collect();
    Ok(json!({
        "task": task,
        "transitions": transitions,
        "turns": turns,
        "runs": runs,
        "tool_calls": calls,
        "model_calls": store.model_calls(&task.id).await?,
        "decisions": store.decisions(&task.id).await?,
        "usage": store.task_usage(&task.id).await?,
        "usage_by_turn": usage,
        "messages": messages,
        "changes": changes,
        "graph": svg,
        "stamp": store.stamp(&task.id).await?,
    }))
}
