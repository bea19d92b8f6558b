//! `rawko worker`: run tasks that clients start on Temporal, each state in the kernel and wasm
//! sandboxes exactly as `rawko run` runs it, with this user's config, keys and plugins.

use std::process::ExitCode;

use clap::Args;

use crate::cli::Context;
use crate::cli::remote::TemporalArgs;

/// Run tasks from Temporal: check them out here and take them through the agents
#[derive(Debug, Args)]
#[command(
    after_help = "A worker polls the queue for tasks that `rawko run --remote` starts. \
    It clones the task's repository at its commit into its own directory \
    ($XDG_DATA_HOME/rawko/worker/), and runs the task there one state at a time, every step \
    committed to the team store (RAWKO_STORE_URL or store.url) that clients and the other \
    workers share. If a worker dies, another one checks the task out again and goes on from \
    the store; committed tool calls are not run again.\n\n\
    Example:\n  \
    temporal server start-dev --ip 127.0.0.1 --headless &\n  \
    RAWKO_STORE_URL=postgres://me@db/rawko rawko worker --temporal 127.0.0.1:7233\n\n\
    Ctrl-C (or SIGTERM) stops polling, lets the states in flight finish for up to 10 s, then \
    stops them; their tasks go on elsewhere."
)]
pub struct WorkerCmd {
    #[command(flatten)]
    temporal: TemporalArgs,
    /// Most tasks this worker runs at once
    #[arg(long, value_name = "N", default_value_t = 8)]
    max_tasks: usize,
    /// Trust the checked-out repositories' own .rawko/ agents, adapters and filters (by
    /// default they get read-only tools, as an untrusted workspace's do)
    #[arg(long)]
    trust: bool,
}

impl WorkerCmd {
    #[cfg(not(feature = "temporal"))]
    pub async fn execute(self, _cx: &Context) -> anyhow::Result<ExitCode> {
        let _ = (&self.temporal, self.max_tasks, self.trust);
        Err(crate::cli::remote::unsupported("rawko worker"))
    }

    #[cfg(feature = "temporal")]
    pub async fn execute(self, cx: &Context) -> anyhow::Result<ExitCode> {
        imp::execute(self, cx).await
    }
}

#[cfg(feature = "temporal")]
mod imp {
    use std::path::{Path, PathBuf};
    use std::process::ExitCode;
    use std::rc::Rc;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use rawko_config::Trust;
    use rawko_config::paths::Dirs;
    use rawko_fsm::CancelFlag;
    use rawko_store::pg::PgStore;
    use rawko_store::{AnyStore, Location, TaskStatus};
    use rawko_temporal::{
        CheckoutInput, Repository, StateInput, StateReport, StateRun, StepError, StepFuture,
        TaskSteps, WorkerOptions,
    };

    use super::WorkerCmd;
    use crate::cli::patch;
    use crate::cli::setup::{Heartbeat, OutputFlags, Setup, Start, drive_with};
    use crate::cli::{BadInput, Context, print_err};

    pub async fn execute(cmd: WorkerCmd, cx: &Context) -> anyhow::Result<ExitCode> {
        if cmd.max_tasks == 0 {
            return Err(BadInput::new("--max-tasks must be at least 1").into());
        }
        let config = match cx.store_location()? {
            Location::Sqlite(path) => {
                return Err(BadInput::new(format!(
                    "a worker needs the team store its clients share (RAWKO_STORE_URL, or \
                     store.url in your config), and would use {}, which only this machine sees",
                    path.display()
                ))
                .into());
            }
            Location::Pg(config) => config,
        };
        // The store is reachable and its schema is this rawko's, before any task is taken.
        let team = Arc::new(PgStore::open(&config).await?);
        let resolved = cmd.temporal.resolve(cx)?;
        let address = rawko_temporal::Address::parse(&resolved.address)
            .map_err(|e| BadInput::new(e.to_string()))?;
        let identity = format!("rawko-worker-{}", std::process::id());
        let client = rawko_temporal::connect(&address, &resolved.namespace, &identity).await?;
        let root = cx.dirs.data.join("worker");
        std::fs::create_dir_all(&root)
            .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", root.display()))?;
        let steps = Arc::new(Steps {
            dirs: cx.dirs.clone(),
            verbose: cx.verbose,
            no_sandbox: cx.no_sandbox,
            trust: if cmd.trust {
                Trust::Trusted
            } else {
                Trust::Untrusted
            },
            root: root.clone(),
            team,
        });
        print_err(&format!(
            "rawko worker {} polling queue {} on {} (namespace {}), at most {} tasks at once; \
             checkouts in {}",
            std::process::id(),
            resolved.queue,
            resolved.address,
            resolved.namespace,
            cmd.max_tasks,
            root.display()
        ))?;
        let options = WorkerOptions {
            queue: resolved.queue.clone(),
            max_tasks: cmd.max_tasks,
        };
        let stop = async {
            use tokio::signal::unix::{SignalKind, signal};
            let mut term = signal(SignalKind::terminate()).ok();
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                Some(()) = async {
                    match term.as_mut() {
                        Some(t) => t.recv().await,
                        None => std::future::pending().await,
                    }
                } => {}
            }
            let _ = print_err("stopping: no new tasks; the states in flight get 10 s to end");
        };
        rawko_temporal::run_worker(client, options, steps, stop).await?;
        print_err("worker stopped")?;
        Ok(ExitCode::SUCCESS)
    }

    /// What the activities do on this worker.
    struct Steps {
        dirs: Dirs,
        verbose: u8,
        no_sandbox: bool,
        trust: Trust,
        /// Where checkouts go, one directory per task.
        root: PathBuf,
        /// The team store, for what a checkout starts from.
        team: Arc<PgStore>,
    }

    impl Steps {
        fn checkout_of(&self, task: &str) -> Result<PathBuf, StepError> {
            checkout_of(&self.root, task)
        }
    }

    /// Where a task's checkout goes under `root`. Task ids are the store's own; still, one never
    /// names a path outside the root.
    fn checkout_of(root: &Path, task: &str) -> Result<PathBuf, StepError> {
        if task.is_empty()
            || task.len() > 100
            || !task.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        {
            return Err(StepError::Fatal(format!(
                "`{}` is not a task id",
                rawko_text::line(task, 80)
            )));
        }
        Ok(root.join(task))
    }

    impl TaskSteps for Steps {
        fn checkout(&self, input: CheckoutInput) -> StepFuture<String> {
            let dir = self.checkout_of(&input.task);
            let team = self.team.clone();
            let task = input.task.clone();
            let made = async move {
                let dir = dir?;
                let at = dir.display().to_string();
                if dir.join(".git").is_dir() {
                    // This worker ran the task's earlier states: their edits are in it.
                    return Ok(at);
                }
                // What the task starts from besides its commit, and what its finished states
                // made of it, from the store: a worker taking a task over loses neither.
                let changes = match &input.repository.changes {
                    Some(hash) => Some(blob(&team, hash, "uncommitted changes").await?),
                    None => None,
                };
                let edits = match team.edits(&input.task).await.map_err(retry)? {
                    Some(e) => Some(blob(&team, &e.patch, "edits").await?),
                    None => None,
                };
                tokio::task::spawn_blocking(move || {
                    checkout(
                        &dir,
                        &input.repository,
                        changes.as_deref(),
                        edits.as_deref(),
                    )
                })
                .await
                .map_err(|e| StepError::Retry(format!("the checkout stopped: {e}")))??;
                Ok(at)
            };
            // Said on the worker too, not only to the client: why its task has no checkout.
            Box::pin(async move {
                let made = made.await;
                if let Err(e) = &made {
                    let then = match e {
                        StepError::Retry(_) => "it will be tried again",
                        StepError::Fatal(_) => "the task fails",
                    };
                    let _ = print_err(&format!("task {task}: no checkout ({then}): {e}"));
                }
                made
            })
        }

        fn state(&self, input: StateInput, worker: &str) -> StateRun {
            let cancel = CancelFlag::default();
            let (tx, rx) = tokio::sync::oneshot::channel();
            let dir = self.checkout_of(&input.task);
            let parts = (
                self.dirs.clone(),
                self.verbose,
                self.no_sandbox,
                self.trust,
                worker.to_string(),
            );
            let team = self.team.clone();
            let flag = cancel.clone();
            // The engine's futures are not Send: each state runs on a thread of its own, with
            // its own single-threaded runtime, as `rawko run` runs a task.
            let spawned = std::thread::Builder::new()
                .name(format!("rawko-state-{}", input.task))
                .spawn(move || {
                    let result = match tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                    {
                        Ok(rt) => rt.block_on(async {
                            let dir = dir?;
                            run_state(&dir, &team, parts, &input, flag).await
                        }),
                        Err(e) => Err(StepError::Retry(format!("cannot start a runtime: {e}"))),
                    };
                    let _ = tx.send(result);
                });
            let result: StepFuture<StateReport> =
                match spawned {
                    Ok(_) => Box::pin(async move {
                        rx.await.unwrap_or_else(|_| {
                            Err(StepError::Retry(
                                "the state's thread ended without a report".into(),
                            ))
                        })
                    }),
                    Err(e) => Box::pin(async move {
                        Err(StepError::Retry(format!("cannot start a thread: {e}")))
                    }),
                };
            StateRun {
                result,
                cancel: Box::new(move || cancel.cancel()),
            }
        }
    }

    /// A blob the task needs, from the team store.
    async fn blob(team: &PgStore, hash: &str, what: &str) -> Result<Vec<u8>, StepError> {
        match team.blob(hash).await {
            Ok(Some(data)) => Ok(data),
            Ok(None) => Err(StepError::Fatal(format!(
                "the task's {what} ({hash}) are not in the team store this worker uses"
            ))),
            Err(e) if e.is_connection_lost() => Err(retry(e)),
            Err(e) => Err(StepError::Fatal(format!("the task's {what}: {e}"))),
        }
    }

    /// Clone `repo` at its commit into `dir`, apply the client's `changes` and mark that as the
    /// task's start ([`patch::START_REF`]), then apply the `edits` its finished states made.
    /// Built beside `dir` and moved into place whole, so a checkout stopped half-way is never
    /// taken for one.
    fn checkout(
        dir: &Path,
        repo: &Repository,
        changes: Option<&[u8]>,
        edits: Option<&[u8]>,
    ) -> Result<(), StepError> {
        if !repo.commit.chars().all(|c| c.is_ascii_hexdigit()) || repo.commit.len() < 7 {
            return Err(StepError::Fatal(format!(
                "`{}` is not a commit id",
                rawko_text::line(&repo.commit, 80)
            )));
        }
        let partial = dir.with_extension("partial");
        let _ = std::fs::remove_dir_all(&partial);
        let built = (|| {
            patch::git(
                None,
                None,
                &[
                    "clone".as_ref(),
                    "--quiet".as_ref(),
                    "--no-checkout".as_ref(),
                    "--".as_ref(),
                    repo.url.as_ref(),
                    partial.as_os_str(),
                ],
            )
            .map_err(|e| StepError::Retry(format!("cannot fetch {}: {e}", repo.url)))?;
            patch::git_text(&partial, &["checkout", "--quiet", "--detach", &repo.commit]).map_err(
                |e| {
                    StepError::Fatal(format!(
                        "{} has no commit {} to check out: {e}",
                        repo.url, repo.commit
                    ))
                },
            )?;
            let fatal = |what: &str| {
                let what = what.to_string();
                move |e: String| StepError::Fatal(format!("the task's {what} do not apply: {e}"))
            };
            if let Some(changes) = changes {
                patch::apply(&partial, changes, false).map_err(fatal("uncommitted changes"))?;
            }
            let start = patch::work_tree_id(&partial).map_err(StepError::Retry)?;
            patch::git_text(&partial, &["update-ref", patch::START_REF, &start])
                .map_err(StepError::Retry)?;
            if let Some(edits) = edits {
                // Another worker's, from the store: what a task's commands could not have
                // written, this checkout (and the trust it may be run with) never gets.
                let protected =
                    patch::protected_paths(&partial, edits).map_err(fatal("edits so far"))?;
                if !protected.is_empty() {
                    return Err(StepError::Fatal(format!(
                        "the task's edits so far would change {}, which no task may change",
                        protected.join(", ")
                    )));
                }
                patch::apply(&partial, edits, false).map_err(fatal("edits so far"))?;
            }
            Ok(())
        })();
        if let Err(e) = built {
            let _ = std::fs::remove_dir_all(&partial);
            return Err(e);
        }
        std::fs::rename(&partial, dir)
            .map_err(|e| StepError::Retry(format!("cannot move the checkout into place: {e}")))
    }

    /// Keep the task's edits (its checkout against its start) in the store, as of `steps`,
    /// unless the store has them already as `kept` (their hash); the hash the store has now.
    async fn keep_edits(
        dir: &Path,
        store: &AnyStore,
        task: &str,
        steps: u32,
        kept: Option<&str>,
    ) -> Result<Option<String>, StepError> {
        // The ref is a file of its own, as the checkout made it (packed only by a `git gc`).
        if !dir.join(".git").join(patch::START_REF).is_file()
            && patch::git_text(dir, &["rev-parse", "--verify", "--quiet", patch::START_REF])
                .is_err()
        {
            // A checkout an older rawko made: it has no start to take the edits against.
            return Ok(kept.map(str::to_string));
        }
        let edits = patch::work_tree_patch(dir, patch::START_REF).map_err(StepError::Retry)?;
        let hash = rawko_store::blob_hash(&edits);
        if kept == Some(hash.as_str()) {
            return Ok(Some(hash));
        }
        if edits.is_empty() && kept.is_none() && store.edits(task).await.map_err(retry)?.is_none() {
            return Ok(None);
        }
        store.put_blob(&edits).await.map_err(|e| {
            StepError::Fatal(format!("the task's edits cannot be kept in the store: {e}"))
        })?;
        store
            .set_edits(task, i64::from(steps), &hash)
            .await
            .map_err(retry)?;
        Ok(Some(hash))
    }

    /// Tools that change no file: no edits to keep after them.
    const READ_ONLY_TOOLS: [&str; 5] = ["Read", "Glob", "Grep", "LS", "Knowledge"];

    /// The checkout's edits kept after every tool call that may have changed files, before
    /// the call is recorded: a worker taking the task over in the middle of the state starts
    /// from the files the recorded calls made, not from those of the last finished state.
    struct KeepEdits {
        dir: PathBuf,
        store: Rc<AnyStore>,
        /// The task's steps before this state, which the edits are kept as of.
        steps: u32,
        /// The hash of the edits the store has, not written again while they are the same.
        kept: std::cell::RefCell<Option<String>>,
        /// Why the edits could not be kept, as the state's error: a fatal one (edits too big
        /// for the store) ends the task instead of being retried.
        failed: std::cell::RefCell<Option<StepError>>,
    }

    impl rawko_fsm::tools::Checkpoint for KeepEdits {
        fn keep<'a>(
            &'a self,
            task: &'a str,
            tool: &'a str,
        ) -> rawko_fsm::tools::CheckpointFuture<'a> {
            Box::pin(async move {
                if READ_ONLY_TOOLS.contains(&tool) {
                    return Ok(());
                }
                let kept = self.kept.borrow().clone();
                match keep_edits(&self.dir, &self.store, task, self.steps, kept.as_deref()).await {
                    Ok(now) => {
                        *self.kept.borrow_mut() = now;
                        Ok(())
                    }
                    Err(e) => {
                        let message = e.to_string();
                        *self.failed.borrow_mut() = Some(e);
                        Err(message)
                    }
                }
            })
        }
    }

    fn retry(e: impl std::fmt::Display) -> StepError {
        StepError::Retry(format!("{e:#}"))
    }

    /// One state of `input.task`, on this worker, from what the store holds.
    async fn run_state(
        dir: &Path,
        team: &PgStore,
        (dirs, verbose, no_sandbox, trust, worker): (Dirs, u8, bool, Trust, String),
        input: &StateInput,
        cancel: CancelFlag,
    ) -> Result<StateReport, StepError> {
        if !dir.join(".git").is_dir() {
            return Err(StepError::Retry(format!(
                "this worker holds no checkout of task {}",
                input.task
            )));
        }
        let dir = dir.canonicalize().map_err(retry)?;
        let cx = Context::at(dir.clone(), dirs, verbose, no_sandbox);
        // Another connection to the team store the worker opened (and checked) at its start.
        let store = Rc::new(AnyStore::Pg(team.beside().map_err(retry)?));
        store.set_lease_settings(crate::cli::setup::lease_settings(&cx).map_err(retry)?);
        if let Err(e) = store.task(&input.task).await {
            return Err(StepError::Fatal(format!(
                "task {}: {e} (in the team store this worker uses)",
                input.task
            )));
        }
        // The previous holder's lease first: free when it is gone (a killed worker on this
        // host at once; on another, when its heartbeat is stale). Taken, the task reads as the
        // store has it, not as interrupted for want of a runner.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            match store.acquire_lease(&input.task).await.map_err(retry)? {
                Ok(()) => break,
                Err(holder) if Instant::now() > deadline => {
                    return Err(StepError::Retry(format!(
                        "task {} is held by pid {} on {}",
                        input.task, holder.pid, holder.host
                    )));
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
            }
        }
        let heartbeat = Heartbeat::start(&store, &input.task, &cancel)
            .await
            .map_err(retry)?;
        let mut outcome = drive_state(&cx, &store, trust, &worker, input, cancel).await;
        if let Ok(report) = &outcome
            && let Err(e) = keep_edits(&dir, &store, &input.task, report.steps, None).await
        {
            outcome = Err(e);
        }
        drop(heartbeat);
        let _ = store.release_lease(&input.task).await;
        outcome
    }

    /// The state under this worker's lease: reported from the store when it was committed
    /// already, else run.
    async fn drive_state(
        cx: &Context,
        store: &Rc<AnyStore>,
        trust: Trust,
        worker: &str,
        input: &StateInput,
        cancel: CancelFlag,
    ) -> Result<StateReport, StepError> {
        let task = store.task(&input.task).await.map_err(retry)?;
        // The idempotency key: a state whose transition the store already has is not run again.
        if task.steps.max(0) as u32 > input.steps || task.status != TaskStatus::Running {
            return recorded(store, &input.task, worker, true).await;
        }
        let started = Instant::now();
        let option = |key: &str| task.options.get(key).cloned();
        let output = OutputFlags {
            json: false,
            quiet: true,
            no_stream: false,
        };
        let mut setup = Setup::new(cx, trust, &output).map_err(retry)?;
        setup.timeline_hint = false;
        setup.run.adapter = option("adapter").and_then(|a| a.as_str().map(str::to_string));
        if let Some(m) = option("max_steps").and_then(|m| m.as_u64()) {
            setup.run.max_steps = m.clamp(1, u64::from(u32::MAX)) as u32;
        }
        setup.sink = Some(Arc::new(rawko_fsm::events::Quiet));
        let prepared = setup
            .prepare(Start::Resume { id: &input.task }, store)
            .await
            .map_err(|e| {
                // What the task needs and this worker lacks (an agent, an adapter, a key).
                if e.downcast_ref::<BadInput>().is_some() {
                    StepError::Fatal(format!("on worker {worker}: {e:#}"))
                } else {
                    retry(e)
                }
            })?
            .pause_after(1);
        let keeper = Rc::new(KeepEdits {
            dir: cx.workspace().to_path_buf(),
            store: Rc::clone(store),
            steps: input.steps,
            kept: std::cell::RefCell::new(
                store
                    .edits(&input.task)
                    .await
                    .map_err(retry)?
                    .map(|e| e.patch),
            ),
            failed: std::cell::RefCell::new(None),
        });
        let prepared = prepared.checkpoint(keeper.clone());
        if let Err(e) = drive_with(prepared, store, cancel, false).await {
            return Err(keeper.failed.take().unwrap_or_else(|| retry(e)));
        }
        let report = recorded(store, &input.task, worker, false).await?;
        let _ = print_err(&format!(
            "task {}: {} -> {} ({} tool call{}, {:.1} s)",
            input.task,
            report.agent,
            report.state,
            report.tools.len(),
            if report.tools.len() == 1 { "" } else { "s" },
            started.elapsed().as_secs_f64()
        ));
        Ok(report)
    }

    /// The last state of `task` as the store recorded it.
    async fn recorded(
        store: &AnyStore,
        task: &str,
        worker: &str,
        recorded: bool,
    ) -> Result<StateReport, StepError> {
        let t = store.task(task).await.map_err(retry)?;
        let transitions = store.transitions(task).await.map_err(retry)?;
        let turns = store.turns(task).await.map_err(retry)?;
        let last = transitions.last();
        let agent = last
            .and_then(|t| t.from.clone())
            .or_else(|| {
                turns
                    .iter()
                    .rev()
                    .find(|t| t.parent_id.is_none())
                    .map(|t| t.agent.clone())
            })
            .unwrap_or_default();
        // The tools of the agent's last top-level turn and the turns it called.
        let tools = match turns
            .iter()
            .rev()
            .find(|x| x.parent_id.is_none() && x.agent == agent)
        {
            Some(turn) => {
                let ids: Vec<i64> = turns
                    .iter()
                    .filter(|x| x.id == turn.id || x.parent_id == Some(turn.id))
                    .map(|x| x.id)
                    .collect();
                store
                    .tool_calls(task)
                    .await
                    .map_err(retry)?
                    .into_iter()
                    .filter(|c| ids.contains(&c.turn_id) && c.tool != "finish")
                    .map(|c| c.tool)
                    .collect()
            }
            None => Vec::new(),
        };
        let summary = match t.status {
            TaskStatus::Running => last.map(|l| l.reason.clone()).unwrap_or_default(),
            _ => t.summary.clone().unwrap_or_default(),
        };
        Ok(StateReport {
            agent,
            tools,
            state: t.state.clone(),
            status: t.status.as_str().to_string(),
            steps: t.steps.max(0) as u32,
            summary: rawko_text::line(&summary, 500).into_owned(),
            worker: worker.to_string(),
            recorded,
        })
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        fn git(dir: &Path, args: &[&str]) -> String {
            let mut all = vec!["-c", "user.name=t", "-c", "user.email=t@t"];
            all.extend_from_slice(args);
            patch::git_text(dir, &all).unwrap()
        }

        #[test]
        fn a_task_id_never_names_a_path_outside_the_checkouts() {
            let root = Path::new("/w");
            assert_eq!(checkout_of(root, "t-1a").unwrap(), root.join("t-1a"));
            for hostile in ["", "..", "../x", "a/b", "/etc", "a\0b", "a b", ".", "-"] {
                if hostile == "-" {
                    // A bare dash is a name, under the root.
                    assert_eq!(checkout_of(root, hostile).unwrap(), root.join("-"));
                    continue;
                }
                assert!(checkout_of(root, hostile).is_err(), "{hostile:?}");
            }
        }

        /// A worker taking a task over builds the checkout the last one had after its last
        /// finished state: the commit, the client's uncommitted changes, the task's edits.
        #[test]
        fn a_checkout_is_the_commit_with_the_changes_and_the_edits_so_far() {
            let origin = tempfile::tempdir().unwrap();
            let o = origin.path();
            git(o, &["init", "-q"]);
            std::fs::write(o.join("a.txt"), "one\n").unwrap();
            git(o, &["add", "-A"]);
            git(o, &["commit", "-qm", "one"]);
            let commit = git(o, &["rev-parse", "HEAD"]);
            // The client's changes, not committed.
            std::fs::write(o.join("a.txt"), "two\n").unwrap();
            std::fs::write(o.join("b.bin"), [0u8, 255, 1]).unwrap();
            let changes = patch::work_tree_patch(o, &commit).unwrap();
            let repo = Repository {
                url: o.display().to_string(),
                commit,
                changes: None,
            };
            // The first worker's checkout, and a state's edits in it.
            let workers = tempfile::tempdir().unwrap();
            let first = workers.path().join("first");
            checkout(&first, &repo, Some(&changes), None).unwrap();
            assert_eq!(
                std::fs::read_to_string(first.join("a.txt")).unwrap(),
                "two\n"
            );
            std::fs::write(first.join("c.txt"), "made by a state\n").unwrap();
            std::fs::write(first.join("a.txt"), "three\n").unwrap();
            let edits = patch::work_tree_patch(&first, patch::START_REF).unwrap();
            assert!(
                !String::from_utf8_lossy(&edits).contains("b.bin"),
                "edits only"
            );
            // The next worker's.
            let second = workers.path().join("second");
            checkout(&second, &repo, Some(&changes), Some(&edits)).unwrap();
            assert_eq!(
                patch::work_tree_id(&second).unwrap(),
                patch::work_tree_id(&first).unwrap()
            );
            assert_eq!(
                patch::work_tree_patch(&second, patch::START_REF).unwrap(),
                edits,
                "its edits are taken against the same start"
            );
            assert!(!workers.path().join("second.partial").exists());
            // Edits that do not fit the start fail the checkout, and leave nothing half-made.
            let third = workers.path().join("third");
            let err = checkout(&third, &repo, None, Some(&edits)).unwrap_err();
            assert!(
                matches!(err, StepError::Fatal(ref m) if m.contains("do not apply")),
                "{err:?}"
            );
            assert!(!third.exists() && !workers.path().join("third.partial").exists());
            // Edits another worker recorded that change rawko's own files are refused whole;
            // the client's own changes may change them.
            std::fs::create_dir(first.join(".rawko")).unwrap();
            std::fs::write(first.join(".rawko/config.yaml"), "tools: [Bash]\n").unwrap();
            let hostile = patch::work_tree_patch(&first, patch::START_REF).unwrap();
            let err = checkout(&third, &repo, Some(&changes), Some(&hostile)).unwrap_err();
            assert!(
                matches!(err, StepError::Fatal(ref m) if m.contains(".rawko/config.yaml")),
                "{err:?}"
            );
            assert!(!third.exists() && !workers.path().join("third.partial").exists());
            std::fs::create_dir(o.join(".rawko")).unwrap();
            std::fs::write(o.join(".rawko/config.yaml"), "tools: [Bash]\n").unwrap();
            let own = patch::work_tree_patch(o, &repo.commit).unwrap();
            checkout(&third, &repo, Some(&own), None).unwrap();
            assert!(third.join(".rawko/config.yaml").is_file());
            let third = workers.path().join("fourth");
            // A commit id that is not one is refused before git sees it.
            let bad = Repository {
                commit: "--upload-pack=touch /tmp/x".into(),
                ..repo
            };
            assert!(matches!(
                checkout(&third, &bad, None, None),
                Err(StepError::Fatal(_))
            ));
        }
    }
}
