//! The `rawko` command line: argument parsing, logging, and exit codes.
//!
//! Each command lives in its own file under `commands/` with one clap struct and an `execute`
//! method; what more than one command needs lives beside `commands/` (`setup`, `trust`,
//! `servers`, `offered`, `lookup`, `policy`), so no command imports another. Exit status: 0 on
//! success, 1 when a task, check or tool call fails, 2 on bad usage or bad input.

mod commands;
mod live;
mod lookup;
mod offered;
mod output;
#[cfg(feature = "temporal")]
mod patch;
mod policy;
mod remote;
mod servers;
mod setup;
mod telemetry;
mod trust;
mod views;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use std::collections::BTreeMap;

use rawko_adapters::instance::resolve_all;
use rawko_adapters::{AdapterInstance, InstalledAdapters, Trust};
use rawko_config::Layers;
use rawko_config::paths::Dirs;
use rawko_config::trust::Status;
use rawko_runtime::Runtime;
use rawko_shell::exec::Launch;

pub use output::{Printer, Table, print_err, print_json, print_out, terminal_safe};

const ABOUT: &str = "An agentic coding robot whose every tool, model adapter and shell filter is a \
sandboxed WebAssembly plugin";

const LONG_ABOUT: &str =
    "An agentic coding robot whose every tool, model adapter and shell filter \
is a sandboxed WebAssembly plugin.

Each plugin call runs in a fresh WebAssembly instance that sees only the directories it was \
granted, has no network (an LLM adapter reaches its own endpoint only, through rawko, which \
holds the API key), no environment and no terminal, and is stopped when it overruns its time, \
memory or output budget.

Configuration: your own $XDG_CONFIG_HOME/rawko/config.yaml (~/.config/rawko/config.yaml when \
XDG_CONFIG_HOME is unset) with your agents in agents/ beside it, and the workspace's \
.rawko/config.yaml and .rawko/agents/, which take effect once you trust the workspace \
(`rawko trust --help`).";

#[derive(Debug, Parser)]
#[command(name = "rawko", version, about = ABOUT, long_about = LONG_ABOUT)]
pub struct Cli {
    #[command(flatten)]
    global: GlobalArgs,
    #[command(subcommand)]
    command: Command,
}

/// Flags every command takes.
#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// The workspace to work in [default: the nearest directory up to the git root with a
    /// .rawko/, else the git root, else the current directory]
    #[arg(long, global = true, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// Where rawko keeps grants, trust decisions, installed plugins and (in state/, unless
    /// RAWKO_STATE_DIR is set) task stores [default: $XDG_DATA_HOME/rawko]
    #[arg(long, global = true, env = "RAWKO_DATA_DIR", value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Log more (-v: info, -vv: debug, -vvv: trace); RAWKO_LOG takes a tracing filter
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    /// Run native commands (Bash, command tools) without the kernel sandbox: they can read your
    /// home directory, use the network and write anywhere you can. Recorded in the audit log
    #[arg(long, global = true)]
    no_sandbox: bool,
}

#[derive(Debug, Subcommand)]
enum Command {
    Run(commands::run::RunCmd),
    Resume(commands::run::ResumeCmd),
    Demo(commands::demo::DemoCmd),
    Init(commands::init::InitCmd),
    Trust(commands::trust::TrustCmd),
    Tasks(commands::tasks::TasksCmd),
    Store(commands::store::StoreCmd),
    Agents(commands::agents::AgentsCmd),
    Tools(commands::tools::ToolsCmd),
    Tool(commands::tool::ToolCmd),
    Adapters(commands::adapters::AdaptersCmd),
    Ask(commands::ask::AskCmd),
    Plugin(commands::plugin::PluginCmd),
    Bash(commands::bash::BashCmd),
    Doctor(commands::doctor::DoctorCmd),
    Bench(commands::bench::BenchCmd),
    Knowledge(commands::knowledge::KnowledgeCmd),
    Mcp(commands::mcp::McpCmd),
    Acp(commands::acp::AcpCmd),
    Ui(commands::ui::UiCmd),
    Worker(commands::worker::WorkerCmd),
}

/// Everything a command needs from the global flags.
#[derive(Debug)]
pub struct Context {
    /// The workspace root, absolute and canonical.
    pub workspace: PathBuf,
    pub dirs: Dirs,
    pub verbose: u8,
    /// `--no-sandbox`: native commands run without kernel confinement.
    pub no_sandbox: bool,
    /// Whether the workspace settings the config layers dropped were listed already.
    warned_config: std::cell::Cell<bool>,
    /// The workspace's trust, decided once.
    trust: std::cell::OnceCell<Trust>,
    /// The user's own `config.yaml` (None when there is none), read once.
    user_config: std::cell::OnceCell<Option<(PathBuf, rawko_config::Config)>>,
}

impl Context {
    fn new(global: &GlobalArgs) -> anyhow::Result<Self> {
        let requested = match &global.workspace {
            Some(w) => w.clone(),
            None => std::env::current_dir()
                .map_err(|e| BadInput::new(format!("cannot read the current directory: {e}")))?,
        };
        let mut workspace = requested
            .canonicalize()
            .map_err(|e| BadInput::new(format!("workspace {}: {e}", requested.display())))?;
        // Without --workspace, the workspace is found as git finds a repository.
        if global.workspace.is_none() && workspace.is_dir() {
            let (found, how) = rawko_config::paths::discover_workspace(&workspace);
            tracing::info!("workspace {}: {how}", found.display());
            workspace = found;
        }
        if !workspace.is_dir() {
            return Err(BadInput::new(format!(
                "workspace {} is not a directory",
                requested.display()
            ))
            .into());
        }
        Ok(Context {
            workspace,
            dirs: Dirs::resolve(global.data_dir.as_deref()),
            verbose: global.verbose,
            no_sandbox: global.no_sandbox,
            warned_config: std::cell::Cell::new(false),
            trust: std::cell::OnceCell::new(),
            user_config: std::cell::OnceCell::new(),
        })
    }

    /// The same user, directories and sandbox choice in another workspace (a worker's
    /// checkout of a task).
    #[cfg_attr(not(feature = "temporal"), allow(dead_code))]
    pub fn at(workspace: PathBuf, dirs: Dirs, verbose: u8, no_sandbox: bool) -> Context {
        Context {
            workspace,
            dirs,
            verbose,
            no_sandbox,
            warned_config: std::cell::Cell::new(false),
            trust: std::cell::OnceCell::new(),
            user_config: std::cell::OnceCell::new(),
        }
    }

    /// How native commands start: through the kernel sandbox (this binary is its helper), or,
    /// with `--no-sandbox`, under this binary's reaper only, with a warning each time.
    pub fn launch(&self) -> anyhow::Result<Launch> {
        if self.no_sandbox {
            eprintln!(
                "warning: --no-sandbox: native commands run without the kernel sandbox; they can \
                 read your home directory, use the network and write anywhere you can"
            );
        }
        let launcher = std::env::current_exe()
            .map_err(|e| anyhow::anyhow!("cannot find the rawko binary to run the sandbox: {e}"))?;
        if self.no_sandbox {
            // Still under rawko's reaper, so nothing a command starts outlives it.
            return Ok(Launch::Unconfined {
                reaper: Some(launcher),
            });
        }
        Ok(Launch::Sandboxed {
            launcher,
            mode: None,
            network: false,
            tmp: None,
            processes: None,
        })
    }

    /// Start the plugin runtime, with compiled plugins cached in the cache directory.
    pub fn runtime(&self) -> anyhow::Result<Runtime> {
        Ok(Runtime::new(Some(self.dirs.cache.clone()))?)
    }

    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// The workspace's SQLite task store, in the user's state directory.
    pub fn store_path(&self) -> PathBuf {
        rawko_store::path_for(&self.dirs.state, &self.workspace)
    }

    /// Where the task store is: the PostgreSQL server `RAWKO_STORE_URL` names, else the one the
    /// user's config names (`store: {url}`; a workspace's config never chooses it), else the
    /// workspace's SQLite file.
    pub fn store_location(&self) -> anyhow::Result<rawko_store::Location> {
        let (url, from) = match std::env::var("RAWKO_STORE_URL") {
            Ok(url) if !url.trim().is_empty() => (url, "RAWKO_STORE_URL".to_string()),
            _ => match self.user_config()? {
                Some((path, config)) => match config.store.as_ref().and_then(|s| s.url.clone()) {
                    Some(url) if !url.trim().is_empty() => {
                        (url, format!("{}: store.url", path.display()))
                    }
                    _ => return Ok(rawko_store::Location::Sqlite(self.store_path())),
                },
                None => return Ok(rawko_store::Location::Sqlite(self.store_path())),
            },
        };
        rawko_store::pg::PgConfig::store_url(&url)
            .map(|c| rawko_store::Location::Pg(Box::new(c)))
            .map_err(|e| BadInput::new(format!("{from}: {e}")).into())
    }

    /// The user's own `config.yaml` and where it is, read once; None when there is none. A
    /// broken file is bad input.
    pub fn user_config(&self) -> anyhow::Result<Option<&(PathBuf, rawko_config::Config)>> {
        if let Some(read) = self.user_config.get() {
            return Ok(read.as_ref());
        }
        let path = self.dirs.config.join(rawko_config::FILE_NAME);
        let read = rawko_config::Config::load(&path)
            .map_err(|e| BadInput::new(e.to_string()))?
            .map(|config| (path, config));
        Ok(self.user_config.get_or_init(|| read).as_ref())
    }

    /// Open the task store ([`Context::store_location`]) with the user's lease settings; a store
    /// that cannot be opened is bad input, named without its password.
    pub async fn open_store(&self) -> anyhow::Result<rawko_store::AnyStore> {
        let location = self.store_location()?;
        let store = rawko_store::AnyStore::open(&location)
            .await
            .map_err(|e| BadInput::new(e.to_string()))?;
        store.set_lease_settings(setup::lease_settings(self)?);
        Ok(store)
    }

    /// The user's and the workspace's `config.yaml`, kept apart, as they take effect under the
    /// workspace's trust ([`Layers::effective`]); what was dropped is listed once, on stderr.
    /// A broken file is bad input.
    pub fn config_layers(&self) -> anyhow::Result<Layers> {
        let raw = Layers::load(&self.dirs.config, &self.workspace)
            .map_err(|e| BadInput::new(e.to_string()))?;
        let (layers, ignored) = raw.effective(self.workspace_trust());
        if let Some(line) = rawko_config::Ignored::summary(&ignored)
            && !self.warned_config.replace(true)
        {
            let _ = print_err(&format!("warning: {line}"));
        }
        Ok(layers)
    }

    /// Whether the user trusts the workspace's own `.rawko/` files (`rawko trust`, `rawko
    /// init`, `--trust`, a prompt) with what they hold now. An untrusted workspace's config only
    /// narrows and its agents get read-only tools. A workspace whose files changed since it was
    /// trusted is untrusted, with a warning (once); a trust store that cannot be read trusts
    /// nothing.
    pub fn workspace_trust(&self) -> Trust {
        *self.trust.get_or_init(|| {
            match rawko_config::trust::TrustStore::new(&self.dirs.data).status(&self.workspace) {
                Ok(Status::Trusted(_)) => Trust::Trusted,
                Ok(Status::Changed(_)) => {
                    eprintln!("warning: {}", changed_since_trusted());
                    Trust::Untrusted
                }
                Ok(Status::Untrusted) => Trust::Untrusted,
                Err(e) => {
                    tracing::warn!("{e}");
                    Trust::Untrusted
                }
            }
        })
    }

    /// Every adapter instance, checked, with what the workspace may not have withheld and with
    /// installed adapter plugins held to their grants.
    pub fn adapter_instances(&self) -> anyhow::Result<BTreeMap<String, AdapterInstance>> {
        let layers = self.config_layers()?;
        let installed = InstalledAdapters::load(&self.dirs.data, &self.workspace);
        Ok(resolve_all(&layers, self.workspace_trust(), &installed)
            .map_err(|e| BadInput::new(e.to_string()))?)
    }
}

/// What rawko says when a trusted workspace's own files changed since the user trusted it.
pub fn changed_since_trusted() -> &'static str {
    "this workspace's own agents or config changed since you trusted it: they get read-only \
     tools and the config only narrows until you trust it again (`rawko trust` shows what it \
     brings)"
}

/// An error caused by what the user typed or supplied: exit status 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BadInput(String);

impl BadInput {
    pub fn new(message: impl Into<String>) -> Self {
        BadInput(message.into())
    }
}

/// Add the nearest subcommand to an "unrecognized subcommand" error when clap found none
/// (clap's own matching misses transposed letters: `rawko rnu`).
fn suggest_subcommand(e: &mut clap::Error) {
    use clap::CommandFactory;
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if e.kind() != ErrorKind::InvalidSubcommand || e.get(ContextKind::SuggestedSubcommand).is_some()
    {
        return;
    }
    let Some(ContextValue::String(typed)) = e.get(ContextKind::InvalidSubcommand) else {
        return;
    };
    let cmd = Cli::command();
    let names: Vec<&str> = cmd.get_subcommands().map(|c| c.get_name()).collect();
    if let Some(near) = rawko_agents::diag::did_you_mean(typed, &names) {
        e.insert(
            ContextKind::SuggestedSubcommand,
            ContextValue::Strings(vec![near.to_string()]),
        );
    }
}

/// Run the command line and return the process exit status.
/// The hidden first argument of `rawko __compile CACHE_DIR FILE`: compile a plugin into the
/// component cache, in a child process whose time and memory the installer limits.
pub const COMPILE_ARG: &str = "__compile";

/// `rawko __compile CACHE_DIR FILE`.
pub fn compile_main(args: &[std::ffi::OsString]) -> ExitCode {
    let [cache, file] = args else {
        eprintln!("rawko compiler: usage: rawko __compile CACHE_DIR FILE");
        return ExitCode::from(2);
    };
    let wasm = match std::fs::read(file) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("cannot read {}: {e}", std::path::Path::new(file).display());
            return ExitCode::from(1);
        }
    };
    let rt = match Runtime::new(Some(PathBuf::from(cache))) {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(1);
        }
    };
    match rt.cache().load(rt.engine(), &wasm) {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("not a valid component: {e:#}");
            ExitCode::from(1)
        }
    }
}

pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(mut e) => {
            suggest_subcommand(&mut e);
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    let telemetry = init_tracing(cli.global.verbose, &cli.global);

    // IO for HTTP (plugin downloads, registries), time for call deadlines.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let result = runtime.block_on(async {
        let cx = Context::new(&cli.global)?;
        cli.command.execute(&cx).await
    });
    if let Some(t) = telemetry {
        t.shutdown();
    }
    match result {
        Ok(code) => code,
        Err(e) => {
            let _ = print_err(&format!("error: {e:#}"));
            if e.downcast_ref::<BadInput>().is_some() {
                ExitCode::from(2)
            } else if e.chain().any(|c| {
                let store = c.downcast_ref::<rawko_store::StoreError>().or_else(|| {
                    match c.downcast_ref::<rawko_fsm::EngineError>() {
                        Some(rawko_fsm::EngineError::TaskStore(e)) => Some(e),
                        Some(rawko_fsm::EngineError::Checkpoint(_)) | None => None,
                    }
                });
                store.is_some_and(|e| e.is_taken_over() || e.is_connection_lost())
            }) {
                // The task goes on elsewhere, or the store went away under it: this run
                // stopped as an interrupted one does, to be resumed.
                ExitCode::from(75)
            } else {
                ExitCode::from(1)
            }
        }
    }
}

impl Command {
    async fn execute(self, cx: &Context) -> anyhow::Result<ExitCode> {
        match self {
            Command::Run(c) => c.execute(cx).await,
            Command::Resume(c) => c.execute(cx).await,
            Command::Demo(c) => c.execute(cx).await,
            Command::Init(c) => c.execute(cx).await,
            Command::Trust(c) => c.execute(cx).await,
            Command::Tasks(c) => c.execute(cx).await,
            Command::Store(c) => c.execute(cx).await,
            Command::Agents(c) => c.execute(cx).await,
            Command::Tools(c) => c.execute(cx).await,
            Command::Tool(c) => c.execute(cx).await,
            Command::Adapters(c) => c.execute(cx).await,
            Command::Ask(c) => c.execute(cx).await,
            Command::Plugin(c) => c.execute(cx).await,
            Command::Bash(c) => c.execute(cx).await,
            Command::Doctor(c) => c.execute(cx).await,
            Command::Bench(c) => c.execute(cx).await,
            Command::Knowledge(c) => c.execute(cx).await,
            Command::Mcp(c) => c.execute(cx).await,
            Command::Acp(c) => c.execute(cx).await,
            Command::Ui(c) => c.execute(cx).await,
            Command::Worker(c) => c.execute(cx).await,
        }
    }
}

/// Logging on stderr, at `verbose`'s level or `RAWKO_LOG`'s, and the export of traces when the
/// environment configures it (see [`telemetry`]).
fn init_tracing(verbose: u8, global: &GlobalArgs) -> Option<telemetry::Telemetry> {
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let default = match verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = std::env::var("RAWKO_LOG")
        .ok()
        .and_then(|f| tracing_subscriber::EnvFilter::try_new(f).ok())
        .unwrap_or_else(|| {
            // Our own crate at the chosen level; dependencies only at warn unless tracing.
            let deps = if verbose >= 3 { "trace" } else { "warn" };
            // Plugins' own log lines only with -v: a plugin cannot write to the user's
            // terminal by logging.
            let plugins = if verbose == 0 { "off" } else { default };
            // The protocol crates log every error answer they send or get (a denied read, an
            // unknown tool) as a warning; rawko reports those itself.
            let protocols = if verbose >= 2 { default } else { "error" };
            tracing_subscriber::EnvFilter::new(format!(
                "{deps},rawko={default},rawko::plugin={plugins},\
                 agent_client_protocol={protocols},rmcp={protocols}"
            ))
        });
    // Log lines quote errors, paths and files from outside: they go through the sanitiser,
    // so they carry no colours of their own either.
    let logs = tracing_subscriber::fmt::layer()
        .with_writer(|| SafeStderr)
        .with_ansi(false)
        .with_target(verbose >= 2)
        .without_time()
        .with_filter(filter);
    // The user's own config may say where traces go (a broken file is reported by the
    // command that reads it).
    let user = Dirs::resolve(global.data_dir.as_deref())
        .config
        .join(rawko_config::FILE_NAME);
    let user = rawko_config::Config::load(&user).ok().flatten();
    let otel = user.as_ref().and_then(|c| c.otel.clone());
    // The variables the user's config names as holding secrets, which content in spans never
    // carries.
    let named: Vec<String> = user
        .iter()
        .flat_map(|c| {
            let adapters = c.adapters.values().filter_map(|a| a.api_key_env.clone());
            let mcp = c.mcp.values().flat_map(|m| m.env.clone());
            let headers = c.otel.iter().flat_map(|o| o.headers.values().cloned());
            adapters.chain(mcp).chain(headers).collect::<Vec<_>>()
        })
        .collect();
    let (telemetry, traces) = match telemetry::Telemetry::from_env(otel.as_ref(), &named) {
        Ok(Some((t, layer))) => (Some(t), Some(layer)),
        Ok(None) => (None, None),
        Err(e) => {
            let _ = print_err(&format!("warning: {e}"));
            (None, None)
        }
    };
    let _ = tracing_subscriber::registry()
        .with(logs)
        .with(traces)
        .try_init();
    telemetry
}

/// Stderr, with every write made safe for a terminal ([`terminal_safe`]).
struct SafeStderr;

impl std::io::Write for SafeStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        std::io::stderr().write_all(terminal_safe(&text).as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}
