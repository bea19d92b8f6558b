//! The `exec` capability: rawko runs a judged command line itself.
//!
//! No shell reads the text again. The executor walks the parsed structure and spawns each
//! simple command's argv (the words the filters judged), wiring pipes, `&&` / `||` / `;` lists,
//! subshells, groups and redirections itself. What it does not implement is refused before
//! anything starts ([`runnable`]). Every run gets: the workspace as its starting directory,
//! stdin at end of file, an environment scrubbed to [`rawko_sandbox::ENV_ALLOWLIST`], a deadline after which the
//! whole process group of the running pipeline is killed, output captured up to a cap, and on
//! Linux a landlock ruleset that limits writes to the writable grants (plus a private temporary
//! directory and `/dev/null`) for every process it starts. Redirections never write under the
//! workspace's `.git` or `.rawko` ([`rawko_capability::protect`]).

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::model::{Connector, ListItem, Pipeline, Script, Stage};
use crate::{ParsedCommand, RedirectKind, SimpleCommand, Word};
use rawko_capability::protect::Protected;
use rawko_sandbox::{
    Confinement, CreationGuard, Mode, Policy as SandboxPolicy, base_env, confine, kill_group,
    stop_group,
};

/// Default deadline of a command line.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// Longest deadline a caller may ask for.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(600);
/// Default output cap, in characters.
pub const DEFAULT_MAX_OUTPUT: usize = 30_000;

/// How to run a command line.
#[derive(Debug, Clone)]
pub struct ExecOptions {
    pub workspace: PathBuf,
    /// Directories commands may write (landlock); empty for a read-only agent.
    pub write_paths: Vec<PathBuf>,
    /// The `PATH` commands see (the resolver's directories).
    pub path_dirs: Vec<PathBuf>,
    pub timeout: Duration,
    /// Output cap, in characters.
    pub max_output: usize,
    /// Keep stderr apart from stdout (command tools) instead of interleaving them (Bash).
    pub separate_stderr: bool,
    /// How each program is started: through the kernel sandbox, or not.
    pub launch: Launch,
}

/// How the executor starts programs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Launch {
    /// Through the sandbox helper `launcher` (the `rawko` binary), under a policy of `mode`
    /// (when `None`: workspace-write if there are `write_paths`, else read-only), with the
    /// network only if `network`.
    Sandboxed {
        launcher: PathBuf,
        mode: Option<Mode>,
        network: bool,
        /// The task's private temporary directory ([`TaskTmp`]), shared by its commands; each
        /// run gets a fresh one of its own when `None`.
        tmp: Option<PathBuf>,
        /// Processes a command may hold at once (the agent's `limits.processes`); the
        /// sandbox's default when `None`.
        processes: Option<u64>,
    },
    /// Without kernel confinement beyond the write limits of the starting thread: mode `full`,
    /// `--no-sandbox`, or tests of the executor itself. Each program starts under the reaper
    /// `reaper` (the `rawko` binary), which takes down whatever it leaves running, daemons
    /// included, when it ends or rawko dies; directly when `None`.
    Unconfined { reaper: Option<PathBuf> },
}

/// What a run produced.
#[derive(Debug, Clone, Serialize)]
pub struct ExecOutput {
    /// stdout and stderr interleaved (or stdout alone with `separate_stderr`), capped.
    pub output: String,
    /// stderr, capped, with `separate_stderr`.
    pub stderr: String,
    /// The exit status of the last pipeline that ran, bash-style (128 + signal when killed).
    pub exit_code: i32,
    pub timed_out: bool,
    pub truncated: bool,
    pub duration_ms: u64,
    pub confinement: Confinement,
    /// The kernel sandbox policy every program ran under; `None` when unconfined.
    pub sandbox: Option<SandboxPolicy>,
}

/// Why a command line was not run, or could not be.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ExecError {
    #[error("rawko's executor does not run this command: {0}")]
    NotRunnable(Unsupported),
    #[error("cannot run the command: {0}")]
    Setup(String),
}

/// The part of a command line the executor does not implement, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unsupported(pub String);

/// Check that every part of `parsed` is something the executor implements.
pub fn runnable(parsed: &ParsedCommand) -> Result<(), Unsupported> {
    check_script(&parsed.script, &parsed.commands).map_err(Unsupported)
}

fn check_script(s: &Script, cmds: &[SimpleCommand]) -> Result<(), String> {
    for item in &s.0 {
        if item.background {
            return Err("background jobs (`&`) are not supported".into());
        }
        for p in std::iter::once(&item.first).chain(item.rest.iter().map(|(_, p)| p)) {
            check_pipeline(p, cmds)?;
        }
    }
    Ok(())
}

fn check_pipeline(p: &Pipeline, cmds: &[SimpleCommand]) -> Result<(), String> {
    if p.timed {
        return Err("the `time` keyword is not supported".into());
    }
    let multi = p.stages.len() > 1;
    for stage in &p.stages {
        match stage {
            Stage::Command(i) => {
                let c = &cmds[*i];
                if let Some(why) = c.not_runnable.first() {
                    return Err(format!("`{}`: {why}", c.text));
                }
                for r in &c.redirects {
                    let fd = r.fd.unwrap_or(0);
                    if fd > 2 {
                        return Err(format!(
                            "`{}`: redirecting descriptor {fd} is not supported (only 0, 1 and 2)",
                            c.text
                        ));
                    }
                    if r.kind == RedirectKind::Duplicate
                        && let Word::Literal(t) = &r.target
                        && t != "-"
                        && t.parse::<u32>().map_or(true, |n| n > 2)
                    {
                        return Err(format!(
                            "`{}`: duplicating descriptor {t} is not supported (only 0, 1 and 2)",
                            c.text
                        ));
                    }
                }
            }
            Stage::Subshell { script, redirected } | Stage::Group { script, redirected } => {
                if *redirected {
                    return Err("redirections on a group or subshell are not supported".into());
                }
                if multi {
                    return Err("a group or subshell inside a pipeline is not supported".into());
                }
                check_script(script, cmds)?;
            }
            Stage::Other(what) => return Err(format!("{what} is not supported")),
        }
    }
    Ok(())
}

/// Run `parsed`, which the filters allowed and [`runnable`] accepts, on a thread of its own
/// (landlock restricts the thread that starts the processes, so it must not be shared).
pub async fn run(parsed: &ParsedCommand, opts: &ExecOptions) -> Result<ExecOutput, ExecError> {
    runnable(parsed).map_err(ExecError::NotRunnable)?;
    let parsed = parsed.clone();
    let opts = opts.clone();
    let (tx, rx) = tokio::sync::oneshot::channel();
    // A caller that stops waiting (its future dropped: an external agent's terminal killed, a
    // state that ended) stops the command as its deadline would.
    let abandoned = Abandoned::default();
    let watched = abandoned.0.clone();
    std::thread::Builder::new()
        .name("rawko-exec".into())
        .spawn(move || {
            let _ = tx.send(run_blocking(&parsed, &opts, watched));
        })
        .map_err(|e| ExecError::Setup(format!("cannot start a thread: {e}")))?;
    let out = rx
        .await
        .map_err(|_| ExecError::Setup("the executor thread stopped unexpectedly".into()))?;
    drop(abandoned);
    out
}

/// Set when dropped: the run's caller is gone.
#[derive(Default)]
struct Abandoned(Arc<std::sync::atomic::AtomicBool>);

impl Drop for Abandoned {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// The name each command's private temporary directory starts with, followed by the pid of the
/// rawko that made it.
const TMP_PREFIX: &str = "rawko-exec-";

/// A task's private temporary directory: the `TMPDIR` of every sandboxed command the task runs,
/// so what one command leaves there the next can use, and nothing else can see it. Removed
/// when dropped (the task's run in this process ends), or by a later rawko's sweep when this
/// one was killed.
#[derive(Debug)]
pub struct TaskTmp(tempfile::TempDir);

impl TaskTmp {
    pub fn new() -> std::io::Result<TaskTmp> {
        static SWEPT: std::sync::Once = std::sync::Once::new();
        SWEPT.call_once(sweep_stale_tmp);
        tempfile::Builder::new()
            .prefix(&format!("{TMP_PREFIX}{}-", std::process::id()))
            .tempdir()
            .map(TaskTmp)
    }

    pub fn path(&self) -> &Path {
        self.0.path()
    }
}

/// Remove the temporary directories of rawkos that are gone (killed, or stopped at once by a
/// second Ctrl-C, before they could clean up): `rawko-exec-<pid>-*` whose process is not alive.
fn sweep_stale_tmp() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(TMP_PREFIX))
            .and_then(|rest| rest.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let alive = std::path::Path::new(&format!("/proc/{pid}")).exists();
        let ours = entry.metadata().is_ok_and(|m| {
            use std::os::unix::fs::MetadataExt;
            m.is_dir() && m.uid() == unsafe { libc::geteuid() }
        });
        if !alive && ours {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

fn run_blocking(
    parsed: &ParsedCommand,
    opts: &ExecOptions,
    abandoned: Arc<std::sync::atomic::AtomicBool>,
) -> Result<ExecOutput, ExecError> {
    let started = Instant::now();
    let setup = |what: &str, e: std::io::Error| ExecError::Setup(format!("{what}: {e}"));
    // A private temporary directory for agents that may write at all, and for every sandboxed
    // run.
    let sandboxed = matches!(opts.launch, Launch::Sandboxed { .. });
    // The task's own, or one for this run alone (removed when it ends).
    let own_tmp = match &opts.launch {
        Launch::Sandboxed { tmp: Some(_), .. } => None,
        _ if opts.write_paths.is_empty() && !sandboxed => None,
        _ => Some(TaskTmp::new().map_err(|e| setup("temporary directory", e))?),
    };
    let tmp: Option<&Path> = match &opts.launch {
        Launch::Sandboxed { tmp: Some(t), .. } => Some(t),
        _ => own_tmp.as_ref().map(TaskTmp::path),
    };
    let mut writable = opts.write_paths.clone();
    if let Some(t) = tmp {
        writable.push(t.to_path_buf());
    }
    // Sandboxed programs get the helper's full confinement. A landlock domain on this thread
    // would be inherited by the helper and forbid the mounts it needs, so only an unconfined
    // run limits this thread's writes (and those of what it starts) here.
    let confinement = if sandboxed {
        Confinement::Full
    } else {
        confine(&writable)
    };
    if confinement != Confinement::Full {
        tracing::info!(
            "landlock is {} on this system: the command's writes are limited by the policy filter only, not by the kernel",
            if confinement == Confinement::None {
                "not available"
            } else {
                "only partly available"
            }
        );
    }

    let (out_r, out_w) = std::io::pipe().map_err(|e| setup("pipe", e))?;
    let (err_r, err_w) = if opts.separate_stderr {
        let (r, w) = std::io::pipe().map_err(|e| setup("pipe", e))?;
        (Some(r), w)
    } else {
        (None, out_w.try_clone().map_err(|e| setup("pipe", e))?)
    };
    let out_reader = Capture::start(out_r, opts.max_output);
    let err_reader = err_r.map(|r| Capture::start(r, opts.max_output.min(8_000)));

    let watchdog = Watchdog::start(opts.timeout, abandoned);
    let protected = Protected::new(
        std::iter::once(opts.workspace.clone()).chain(opts.write_paths.iter().cloned()),
    );
    let sandbox = match (&opts.launch, tmp) {
        (
            Launch::Sandboxed {
                launcher,
                mode,
                network,
                processes,
                ..
            },
            Some(tmp),
        ) => {
            let mode = match mode {
                Some(Mode::ReadOnly) => Mode::ReadOnly,
                _ if opts.write_paths.is_empty() => Mode::ReadOnly,
                _ => Mode::WorkspaceWrite,
            };
            let home = std::env::home_dir();
            let mut policy = SandboxPolicy::new(mode, &opts.workspace, tmp, home.as_deref());
            // Directories granted besides the workspace.
            if mode == Mode::WorkspaceWrite {
                for w in &opts.write_paths {
                    if !policy.write.contains(w) {
                        policy.write.push(w.clone());
                        policy.read.push(w.clone());
                    }
                }
            }
            policy.network = *network;
            if let Some(n) = processes {
                policy.limits.processes = *n;
            }
            Some((launcher.clone(), policy))
        }
        _ => None,
    };
    // A workspace-write command may not leave a repository or rawko configuration of its own
    // behind where there was none.
    let guard = sandbox
        .as_ref()
        .filter(|(_, p)| p.mode == Mode::WorkspaceWrite)
        .map(|_| CreationGuard::before(&opts.workspace));
    let mut exec = Exec {
        sandbox: sandbox.as_ref().map(|(l, p)| (l.as_path(), p)),
        reaper: match &opts.launch {
            Launch::Unconfined { reaper } => reaper.as_deref(),
            Launch::Sandboxed { .. } => None,
        },
        cmds: &parsed.commands,
        protected: &protected,
        env: base_env(&opts.path_dirs, tmp, Some(&opts.workspace)),
        out: out_w,
        err: err_w,
        cwd: opts.workspace.clone(),
        watchdog: &watchdog,
    };
    let outcome = exec.script(&parsed.script);
    let exit_code = match outcome {
        Ok(code) => code,
        Err(Stop::Timeout) => 124,
        Err(Stop::Error(message)) => {
            let _ = writeln!(exec.err, "rawko: {message}");
            1
        }
    };
    drop(exec);
    let timed_out = watchdog.stop();
    let (mut output, truncated) = out_reader.finish();
    let stderr = err_reader.map(|r| r.finish().0).unwrap_or_default();
    for (place, removed) in guard.map(|g| g.after()).unwrap_or_default() {
        let name = place.strip_prefix(&opts.workspace).unwrap_or(&place);
        let note = match removed {
            Ok(()) => format!(
                "\n[rawko: the command created {}, which commands may not create (git runs what a repository's config and hooks name); it was removed]",
                name.display()
            ),
            Err(e) => format!(
                "\n[rawko: the command created {}, which commands may not create, and it could not be removed: {e}]",
                name.display()
            ),
        };
        tracing::warn!("{}", note.trim());
        output.push_str(&note);
    }
    if timed_out && stopping() {
        output.push_str(
            "\n[rawko: stopped because rawko was interrupted (Ctrl-C); the command and every process it started were killed]",
        );
    } else if timed_out {
        output.push_str(&format!(
            "\n[rawko: timed out after {} s; the command and every process it started were killed]",
            opts.timeout.as_secs_f64()
        ));
    }
    Ok(ExecOutput {
        output,
        stderr,
        exit_code: if timed_out { 124 } else { exit_code },
        timed_out,
        truncated,
        duration_ms: started.elapsed().as_millis() as u64,
        confinement,
        sandbox: sandbox.map(|(_, p)| p),
    })
}

/// Why a run stopped early.
enum Stop {
    Timeout,
    Error(String),
}

/// Set once rawko is stopping (Ctrl-C, SIGTERM): every command running in the process is
/// stopped as at its deadline, and no other starts.
static STOPPING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Stop every command running in this process, and start no other: rawko is stopping. Each run
/// ends within about [`STOP_POLL`] plus its group's clean-up, saying it was stopped.
pub fn stop_all() {
    STOPPING.store(true, std::sync::atomic::Ordering::SeqCst);
}

fn stopping() -> bool {
    STOPPING.load(std::sync::atomic::Ordering::SeqCst)
}

/// How often a running command's watchdog looks at [`stop_all`].
const STOP_POLL: Duration = Duration::from_millis(50);

/// How long a pipeline stopped at its deadline has to clean up before it is killed.
const STOP_GRACE: Duration = Duration::from_millis(200);

/// Kills the running pipeline's process group when the deadline passes.
struct Watchdog {
    state: Arc<(Mutex<WatchState>, Condvar)>,
    thread: Option<std::thread::JoinHandle<()>>,
}

#[derive(Default)]
struct WatchState {
    pgid: Option<i32>,
    fired: bool,
    done: bool,
}

impl Watchdog {
    fn start(timeout: Duration, abandoned: Arc<std::sync::atomic::AtomicBool>) -> Self {
        let state = Arc::new((Mutex::new(WatchState::default()), Condvar::new()));
        let s = state.clone();
        let deadline = Instant::now() + timeout;
        let thread = std::thread::Builder::new()
            .name("rawko-exec-deadline".into())
            .spawn(move || {
                let (lock, cv) = &*s;
                let mut st = lock.lock().unwrap_or_else(|e| e.into_inner());
                loop {
                    if st.done {
                        return;
                    }
                    let now = Instant::now();
                    if now >= deadline
                        || stopping()
                        || abandoned.load(std::sync::atomic::Ordering::SeqCst)
                    {
                        st.fired = true;
                        if let Some(pgid) = st.pgid {
                            // Reapers and sandbox helpers first take down what their
                            // programs started.
                            stop_group(pgid, STOP_GRACE);
                        }
                        return;
                    }
                    st = cv
                        .wait_timeout(st, (deadline - now).min(STOP_POLL))
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
            })
            .ok();
        Watchdog { state, thread }
    }

    /// Register the group of the pipeline about to be waited for; false if time is up.
    fn watch(&self, pgid: Option<i32>) -> bool {
        let mut st = self.state.0.lock().unwrap_or_else(|e| e.into_inner());
        st.pgid = pgid;
        if st.fired
            && let Some(g) = pgid
        {
            kill_group(g);
        }
        !st.fired
    }

    fn fired(&self) -> bool {
        self.state.0.lock().unwrap_or_else(|e| e.into_inner()).fired
    }

    /// Stop watching; whether the deadline passed.
    fn stop(mut self) -> bool {
        {
            let mut st = self.state.0.lock().unwrap_or_else(|e| e.into_inner());
            st.done = true;
            self.state.1.notify_all();
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.fired()
    }
}

/// Reads one output pipe on a thread of its own, keeping the first two thirds and the last
/// third of the cap.
struct Capture {
    buf: Arc<Mutex<Captured>>,
    done: std::sync::mpsc::Receiver<()>,
    max_chars: usize,
}

#[derive(Default)]
struct Captured {
    head: Vec<u8>,
    tail: std::collections::VecDeque<u8>,
    total: usize,
}

impl Capture {
    fn start(mut pipe: std::io::PipeReader, max_chars: usize) -> Self {
        let (tx, done) = std::sync::mpsc::channel();
        let buf: Arc<Mutex<Captured>> = Arc::default();
        let shared = buf.clone();
        let head_cap = (max_chars * 2 / 3) * 4;
        let tail_cap = (max_chars - max_chars * 2 / 3) * 4;
        let _ = std::thread::Builder::new()
            .name("rawko-exec-output".into())
            .spawn(move || {
                let mut chunk = [0u8; 16 * 1024];
                loop {
                    let n = match pipe.read(&mut chunk) {
                        Ok(0) => break,
                        Ok(n) => n,
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                        Err(_) => break,
                    };
                    let mut c = shared.lock().unwrap_or_else(|e| e.into_inner());
                    c.total += n;
                    let mut rest = &chunk[..n];
                    if c.head.len() < head_cap {
                        let take = (head_cap - c.head.len()).min(rest.len());
                        c.head.extend_from_slice(&rest[..take]);
                        rest = &rest[take..];
                    }
                    c.tail.extend(rest);
                    while c.tail.len() > tail_cap {
                        c.tail.pop_front();
                    }
                }
                let _ = tx.send(());
            });
        Capture {
            buf,
            done,
            max_chars,
        }
    }

    /// The text, once every writer closed the pipe; or, if a process the command left behind
    /// (outside its process group) still holds it, what arrived in the next two seconds.
    fn finish(self) -> (String, bool) {
        let complete = self.done.recv_timeout(Duration::from_secs(2)).is_ok();
        let mut c = self.buf.lock().unwrap_or_else(|e| e.into_inner());
        let total = c.total;
        let head = std::mem::take(&mut c.head);
        let (mut text, truncated) = render(&head, c.tail.make_contiguous(), total, self.max_chars);
        if !complete {
            text.push_str("\n[rawko: a process the command started still holds its output open; the rest is not shown]");
        }
        (text, truncated || !complete)
    }
}

fn render(head: &[u8], tail: &[u8], total: usize, max_chars: usize) -> (String, bool) {
    if tail.is_empty() {
        let text = String::from_utf8_lossy(head);
        if text.chars().count() <= max_chars {
            return (text.into_owned(), false);
        }
    }
    let head_chars = max_chars * 2 / 3;
    let tail_chars = max_chars - head_chars;
    let head_text: String = String::from_utf8_lossy(head)
        .chars()
        .take(head_chars)
        .collect();
    let tail_full = String::from_utf8_lossy(tail);
    let skip = tail_full.chars().count().saturating_sub(tail_chars);
    let tail_text: String = tail_full.chars().skip(skip).collect();
    let shown = head_text.len() + tail_text.len();
    (
        format!(
            "{head_text}\n[rawko: output truncated: {} bytes in all, {} omitted; showing the first {head_chars} and the last {tail_chars} characters]\n{tail_text}",
            total,
            total.saturating_sub(shown)
        ),
        true,
    )
}

/// One run of a script.
struct Exec<'a> {
    /// The helper and the policy each program starts under, when sandboxed.
    sandbox: Option<(&'a Path, &'a SandboxPolicy)>,
    /// The reaper each unconfined program starts under, if any.
    reaper: Option<&'a Path>,
    cmds: &'a [SimpleCommand],
    env: Vec<(OsString, OsString)>,
    out: std::io::PipeWriter,
    err: std::io::PipeWriter,
    /// The directory the run is in now (`cd` changes it).
    cwd: PathBuf,
    watchdog: &'a Watchdog,
    /// `.git` and `.rawko`: redirections never write there, whatever the filters said.
    protected: &'a Protected,
}

impl Exec<'_> {
    fn script(&mut self, s: &Script) -> Result<i32, Stop> {
        let mut status = 0;
        for item in &s.0 {
            status = self.and_or(item)?;
        }
        Ok(status)
    }

    fn and_or(&mut self, item: &ListItem) -> Result<i32, Stop> {
        let mut status = self.pipeline(&item.first)?;
        for (connector, p) in &item.rest {
            let run = match connector {
                Connector::And => status == 0,
                Connector::Or => status != 0,
            };
            if run {
                status = self.pipeline(p)?;
            }
        }
        Ok(status)
    }

    fn pipeline(&mut self, p: &Pipeline) -> Result<i32, Stop> {
        if self.watchdog.fired() {
            return Err(Stop::Timeout);
        }
        let status = match p.stages.as_slice() {
            [Stage::Subshell { script, .. }] => {
                let saved = self.cwd.clone();
                let status = self.script(script);
                self.cwd = saved;
                status?
            }
            [Stage::Group { script, .. }] => self.script(script)?,
            [Stage::Command(i)] if self.cmds[*i].program.name == "cd" => self.cd(&self.cmds[*i])?,
            stages => {
                let indexes: Vec<usize> = stages
                    .iter()
                    .filter_map(|s| match s {
                        Stage::Command(i) => Some(*i),
                        _ => None,
                    })
                    .collect();
                self.spawn_pipeline(&indexes)?
            }
        };
        Ok(if p.negated {
            i32::from(status == 0)
        } else {
            status
        })
    }

    fn cd(&mut self, cmd: &SimpleCommand) -> Result<i32, Stop> {
        self.check_cwd(cmd)?;
        let Some(dir) = cmd.argv.get(1).and_then(Word::literal) else {
            return Err(Stop::Error("cd: no directory".into()));
        };
        let target = crate::resolve::resolve_path(dir, &cmd.cwd);
        if !target.is_dir() {
            return Err(Stop::Error(format!(
                "cd: {dir}: not a directory (a failed cd stops the command)"
            )));
        }
        self.cwd = target;
        Ok(0)
    }

    /// Every command runs where the parse said it would; a `cd` skipped by `&&`/`||` would make
    /// that untrue, and then the run stops rather than run somewhere unjudged.
    fn check_cwd(&self, cmd: &SimpleCommand) -> Result<(), Stop> {
        if cmd.cwd != self.cwd {
            return Err(Stop::Error(format!(
                "`{}` was checked to run in {}, but the current directory is {} (a `cd` did not run)",
                cmd.text,
                cmd.cwd.display(),
                self.cwd.display()
            )));
        }
        Ok(())
    }

    fn spawn_pipeline(&mut self, stages: &[usize]) -> Result<i32, Stop> {
        let mut children = Vec::new();
        let mut pgid: Option<i32> = None;
        let mut prev: Option<OwnedFd> = None;
        let mut failed: Option<i32> = None;
        for (k, &i) in stages.iter().enumerate() {
            let cmd = &self.cmds[i];
            self.check_cwd(cmd)?;
            let last = k + 1 == stages.len();
            let (next_r, next_w) = if last {
                (None, None)
            } else {
                let (r, w) = std::io::pipe().map_err(|e| Stop::Error(format!("pipe: {e}")))?;
                (Some(OwnedFd::from(r)), Some(OwnedFd::from(w)))
            };
            let stdin = prev.take();
            let stdout = match next_w {
                Some(w) => w,
                None => self.dup(&self.out)?,
            };
            let stderr = self.dup(&self.err)?;
            match self.spawn(cmd, stdin, stdout, stderr, pgid) {
                Ok(child) => {
                    if pgid.is_none() {
                        pgid = i32::try_from(child.id()).ok();
                    }
                    children.push(child);
                }
                Err(message) => {
                    let _ = writeln!(self.err, "rawko: {message}");
                    failed = Some(127);
                }
            }
            prev = next_r;
        }
        drop(prev);
        let in_time = self.watchdog.watch(pgid);
        let mut status = failed.unwrap_or(0);
        let n = children.len();
        for (k, mut child) in children.into_iter().enumerate() {
            let s = child
                .wait()
                .map_err(|e| Stop::Error(format!("wait: {e}")))?;
            if k + 1 == n && failed.is_none() {
                status = s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0));
            }
        }
        // Whatever the pipeline left running in its group goes with it.
        if let Some(g) = pgid {
            kill_group(g);
        }
        self.watchdog.watch(None);
        if !in_time || self.watchdog.fired() {
            return Err(Stop::Timeout);
        }
        Ok(status)
    }

    fn dup(&self, w: &std::io::PipeWriter) -> Result<OwnedFd, Stop> {
        w.try_clone()
            .map(OwnedFd::from)
            .map_err(|e| Stop::Error(format!("pipe: {e}")))
    }

    fn spawn(
        &self,
        cmd: &SimpleCommand,
        stdin: Option<OwnedFd>,
        stdout: OwnedFd,
        stderr: OwnedFd,
        pgid: Option<i32>,
    ) -> Result<std::process::Child, String> {
        let path = cmd
            .program
            .path
            .as_ref()
            .ok_or_else(|| format!("{}: not found", cmd.argv[0].text()))?;
        let words: Vec<&str> = cmd.argv.iter().filter_map(Word::literal).collect();
        let mut fds: [Option<OwnedFd>; 3] = [stdin, Some(stdout), Some(stderr)];
        for r in &cmd.redirects {
            self.redirect(r, cmd, &mut fds)?;
        }
        let mut c = match (self.sandbox, self.reaper) {
            (Some((launcher, policy)), _) => policy.command(launcher, path, words[0], &words[1..]),
            (None, Some(reaper)) => {
                rawko_sandbox::reaper::command(reaper, path, words[0], &words[1..])
            }
            (None, None) => {
                let mut c = std::process::Command::new(path);
                c.arg0(words[0]).args(&words[1..]);
                // Unconfined, nothing else ends the program if rawko is killed: the kernel
                // does. (In the sandbox the helper, PID 1 of its namespace, does the same.)
                // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
                unsafe {
                    c.pre_exec(|| {
                        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                        Ok(())
                    });
                }
                c
            }
        };
        c.current_dir(&cmd.cwd)
            .env_clear()
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .process_group(pgid.unwrap_or(0));
        for a in cmd.assignments.iter().filter_map(Word::literal) {
            if let Some((k, v)) = a.split_once('=') {
                c.env(k, v);
            }
        }
        let [i, o, e] = fds;
        c.stdin(i.map(Stdio::from).unwrap_or_else(Stdio::null));
        c.stdout(o.map(Stdio::from).unwrap_or_else(Stdio::null));
        c.stderr(e.map(Stdio::from).unwrap_or_else(Stdio::null));
        c.spawn()
            .map_err(|e| format!("cannot run `{}`: {e}", words[0]))
    }

    fn redirect(
        &self,
        r: &crate::Redirect,
        cmd: &SimpleCommand,
        fds: &mut [Option<OwnedFd>; 3],
    ) -> Result<(), String> {
        let open =
            |read: bool, write: bool, append: bool, truncate: bool| -> Result<OwnedFd, String> {
                let target = r.target.literal().unwrap_or_default();
                let mut opts = std::fs::OpenOptions::new();
                opts.read(read).write(write).append(append).create(write);
                if write {
                    // Checked where it really lands, at the moment it is opened: a symlink made
                    // by an earlier command cannot lead the write into `.git` or `.rawko`.
                    return self
                        .protected
                        .open_for_write(&cmd.cwd, target, &mut opts, truncate)
                        .map(OwnedFd::from)
                        .map_err(|e| e.to_string());
                }
                opts.open(cmd.cwd.join(target))
                    .map(OwnedFd::from)
                    .map_err(|e| format!("{target}: {e}"))
            };
        let slot = |default: u32| r.fd.unwrap_or(default) as usize;
        match r.kind {
            RedirectKind::Read => fds[slot(0)] = Some(open(true, false, false, false)?),
            RedirectKind::Write | RedirectKind::Append => {
                let append = r.kind == RedirectKind::Append;
                let f = open(false, true, append, !append)?;
                if r.both {
                    fds[2] = Some(f.try_clone().map_err(|e| e.to_string())?);
                    fds[1] = Some(f);
                } else {
                    fds[slot(1)] = Some(f);
                }
            }
            RedirectKind::ReadWrite => fds[slot(0)] = Some(open(true, true, false, false)?),
            RedirectKind::Duplicate => {
                let to = slot(1);
                match r.target.literal() {
                    Some("-") => fds[to] = None,
                    Some(n) => {
                        let from: usize = n.parse().map_err(|_| format!("bad descriptor {n}"))?;
                        fds[to] = match &fds[from] {
                            Some(f) => Some(f.try_clone().map_err(|e| e.to_string())?),
                            None => None,
                        };
                    }
                    None => return Err("a dynamic descriptor".into()),
                }
            }
            RedirectKind::HereString | RedirectKind::HereDoc => {
                let mut text = r.target.literal().unwrap_or_default().to_string();
                if r.kind == RedirectKind::HereString {
                    text.push('\n');
                }
                let (rd, mut wr) = std::io::pipe().map_err(|e| e.to_string())?;
                // A feeder thread, so a here-document larger than the pipe buffer cannot
                // block the executor.
                std::thread::spawn(move || {
                    let _ = wr.write_all(text.as_bytes());
                });
                fds[slot(0)] = Some(OwnedFd::from(rd));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn running(marker: &str) -> bool {
        std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
            std::fs::read(e.path().join("cmdline")).is_ok_and(|c| {
                String::from_utf8_lossy(&c)
                    .replace('\0', " ")
                    .contains(marker)
            })
        })
    }

    #[tokio::test]
    async fn a_run_whose_caller_stops_waiting_is_stopped() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        let resolver = crate::Resolver::from_env(&[ws.as_path()]);
        // A duration no other process has on its command line.
        let marker = format!("29.{}", std::process::id());
        let parsed = crate::parse::parse(
            &format!("sleep {marker}"),
            &ws,
            &crate::parse::ParseOptions {
                resolver: &resolver,
                workspace: &ws,
                expand_globs: true,
            },
        )
        .unwrap();
        let opts = ExecOptions {
            workspace: ws.clone(),
            write_paths: Vec::new(),
            path_dirs: resolver.path_dirs().to_vec(),
            timeout: Duration::from_secs(60),
            max_output: DEFAULT_MAX_OUTPUT,
            separate_stderr: false,
            launch: Launch::Unconfined { reaper: None },
        };
        let gave_up = tokio::time::timeout(Duration::from_millis(300), run(&parsed, &opts)).await;
        assert!(gave_up.is_err(), "sleep ended early");
        let until = Instant::now() + Duration::from_secs(5);
        while running(&format!("sleep {marker}")) {
            assert!(Instant::now() < until, "the abandoned command still runs");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[test]
    fn truncation_keeps_head_and_tail_and_says_so() {
        let text: String = (0..10_000).map(|i| format!("{i}\n")).collect();
        let bytes = text.as_bytes();
        let (head, tail) = bytes.split_at(400);
        let (out, truncated) = render(head, &tail[tail.len() - 200..], bytes.len(), 300);
        assert!(truncated);
        assert!(out.starts_with("0\n1\n"), "{out}");
        assert!(out.ends_with("9999\n"), "{out}");
        assert!(out.contains("output truncated"), "{out}");
        let (short, t) = render(b"hello", b"", 5, 300);
        assert_eq!((short.as_str(), t), ("hello", false));
    }
}
