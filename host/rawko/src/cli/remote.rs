//! Tasks on Temporal, as the command line reaches them: the flags that name the server, and (with
//! the `temporal` feature) the client side of `rawko run --remote` and `rawko resume --remote`.
//! Without the feature the flags are there and say how to get a build that has it, so `--help`
//! and scripts see one command line whichever build they meet.

use clap::Args;

use crate::cli::{BadInput, Context};

/// Where tasks run on Temporal.
#[derive(Debug, Args, Clone, Default)]
pub struct TemporalArgs {
    /// The Temporal server's frontend [default: TEMPORAL_ADDRESS, else temporal.address in
    /// your config, else 127.0.0.1:7233]
    #[arg(long, value_name = "HOST:PORT")]
    pub temporal: Option<String>,
    /// The Temporal namespace [default: TEMPORAL_NAMESPACE, else temporal.namespace in your
    /// config, else default]
    #[arg(long, value_name = "NAME")]
    pub namespace: Option<String>,
    /// The task queue workers poll [default: temporal.queue in your config, else rawko]
    #[arg(long, value_name = "NAME")]
    pub queue: Option<String>,
}

/// The server, namespace and queue, each from its flag, else the Temporal CLI's variable, else
/// the user's config (never a workspace's), else the default.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(not(feature = "temporal"), allow(dead_code))]
pub struct Resolved {
    pub address: String,
    pub namespace: String,
    pub queue: String,
}

impl TemporalArgs {
    /// A run here names no Temporal server: a flag that would be ignored is refused.
    pub fn only_with_remote(&self) -> anyhow::Result<()> {
        let given = [
            ("--temporal", self.temporal.is_some()),
            ("--namespace", self.namespace.is_some()),
            ("--queue", self.queue.is_some()),
        ];
        match given.iter().find(|(_, set)| *set) {
            Some((flag, _)) => Err(BadInput::new(format!(
                "{flag} names where tasks run on Temporal: it goes with --remote"
            ))
            .into()),
            None => Ok(()),
        }
    }

    #[cfg_attr(not(feature = "temporal"), allow(dead_code))]
    pub fn resolve(&self, cx: &Context) -> anyhow::Result<Resolved> {
        let config = cx
            .user_config()?
            .and_then(|(_, c)| c.temporal.clone())
            .unwrap_or_default();
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let address = self
            .temporal
            .clone()
            .or_else(|| env("TEMPORAL_ADDRESS"))
            .or(config.address)
            .unwrap_or_else(|| "127.0.0.1:7233".into());
        let namespace = self
            .namespace
            .clone()
            .or_else(|| env("TEMPORAL_NAMESPACE"))
            .or(config.namespace)
            .unwrap_or_else(|| "default".into());
        let queue = self
            .queue
            .clone()
            .or(config.queue)
            .unwrap_or_else(|| "rawko".into());
        for (what, value) in [("namespace", &namespace), ("queue", &queue)] {
            if value.trim().is_empty() || value.chars().any(char::is_control) || value.len() > 200 {
                return Err(BadInput::new(format!(
                    "the Temporal {what} `{}` is not a name",
                    rawko_text::line(value, 80)
                ))
                .into());
            }
        }
        Ok(Resolved {
            address,
            namespace,
            queue,
        })
    }
}

/// The error of a command that needs Temporal in a build without it.
#[cfg(not(feature = "temporal"))]
pub fn unsupported(what: &str) -> anyhow::Error {
    BadInput::new(format!(
        "{what} runs tasks on Temporal, and this rawko was built without it: install one that \
         has it (`cargo install --locked --path host/rawko --features temporal`, or a published \
         binary)"
    ))
    .into()
}

#[cfg(feature = "temporal")]
pub use client::{list_remote, resume_remote, run_remote, team_store, view};

#[cfg(feature = "temporal")]
mod client {
    use std::process::ExitCode;
    use std::time::{Duration, Instant};

    use rawko_store::{AnyStore, Location, TaskStatus};
    use rawko_temporal::{Follow, Progress, Remote, Repository, TaskInput};

    use super::{Resolved, TemporalArgs};
    use crate::cli::patch;
    use crate::cli::setup::{ClosingDiff, OutputFlags, exit_code, patch_files, report};
    use crate::cli::{BadInput, Context, print_err, print_out};

    /// Connect as a client, for `what`.
    pub async fn connect(r: &Resolved) -> anyhow::Result<Remote> {
        let address =
            rawko_temporal::Address::parse(&r.address).map_err(|e| BadInput::new(e.to_string()))?;
        let identity = format!("rawko-client-{}", std::process::id());
        let client = rawko_temporal::connect(&address, &r.namespace, &identity).await?;
        Ok(Remote::new(client, &r.namespace, &r.queue))
    }

    /// The team store a remote task lives in: workers and clients must share it.
    pub async fn team_store(cx: &Context) -> anyhow::Result<AnyStore> {
        if let Location::Sqlite(path) = cx.store_location()? {
            return Err(BadInput::new(format!(
                "--remote needs the team store the workers share (RAWKO_STORE_URL, or store.url \
                 in your config); this workspace's tasks are in {}, which only this machine sees",
                path.display()
            ))
            .into());
        }
        cx.open_store().await
    }

    /// The workspace as workers can fetch it: its remote (or its path) and its commit, and the
    /// patch of its uncommitted changes (untracked and binary files included, ignored files
    /// not; empty when there are none), which the caller keeps in the team store.
    pub fn repository(cx: &Context) -> anyhow::Result<(Repository, Vec<u8>)> {
        let ws = cx.workspace();
        let git = |args: &[&str]| -> anyhow::Result<String> {
            patch::git_text(ws, args).map_err(|e| BadInput::new(format!("--remote: {e}")).into())
        };
        let top = git(&["rev-parse", "--show-toplevel"]).map_err(|_| {
            BadInput::new(format!(
                "--remote runs the task on a checkout of this workspace's repository, and {} \
                 is not in one (or git is not on PATH)",
                ws.display()
            ))
        })?;
        if std::path::Path::new(&top).canonicalize().ok().as_deref() != Some(ws) {
            return Err(BadInput::new(format!(
                "--remote: the workspace must be the repository's root ({top})"
            ))
            .into());
        }
        let commit = git(&["rev-parse", "--verify", "HEAD^{commit}"]).map_err(|_| {
            BadInput::new("--remote: the repository has no commit yet to start from")
        })?;
        let changes = patch::work_tree_patch(ws, &commit)
            .map_err(|e| BadInput::new(format!("--remote: the uncommitted changes: {e}")))?;
        if changes.len() > rawko_store::MAX_BLOB {
            return Err(BadInput::new(format!(
                "--remote: this work tree's uncommitted changes come to {} MiB, more than the \
                 {} MiB a task carries; commit them (or ignore what is built) first",
                changes.len() >> 20,
                rawko_store::MAX_BLOB >> 20
            ))
            .into());
        }
        // The default remote as the store names workspaces: without a password (or an
        // http(s) user), which would otherwise sit in every workflow history. Workers fetch
        // with their own credentials.
        let url = rawko_git::repository_id(ws)
            .remote
            .filter(|u| !u.is_empty())
            .unwrap_or_else(|| ws.display().to_string());
        Ok((
            Repository {
                url,
                commit,
                changes: None,
            },
            changes,
        ))
    }

    /// `rawko run --remote`: make the task in the team store, start its workflow, follow it.
    pub async fn run_remote(
        cx: &Context,
        args: &TemporalArgs,
        prompt: &str,
        agent: &str,
        options: serde_json::Value,
        output: &OutputFlags,
        apply: bool,
    ) -> anyhow::Result<ExitCode> {
        let resolved = args.resolve(cx)?;
        let (mut repository, changes) = repository(cx)?;
        let store = team_store(cx).await?;
        let remote = connect(&resolved).await?;
        if !store.has_workspace() {
            store.set_workspace(rawko_session::run::workspace_id(cx.workspace()));
        }
        if !changes.is_empty() {
            repository.changes = Some(store.put_blob(&changes).await?);
            if !output.json && !output.quiet {
                let files = patch_files(&changes);
                print_err(&format!(
                    "the task starts from {} with this work tree's uncommitted changes ({} \
                     file{})",
                    &repository.commit[..repository.commit.len().min(12)],
                    files.len(),
                    if files.len() == 1 { "" } else { "s" }
                ))?;
            }
        }
        let mut options = options;
        options["remote"] = serde_json::json!({
            "url": repository.url,
            "commit": repository.commit,
            "changes": repository.changes,
            "namespace": resolved.namespace,
            "queue": resolved.queue,
        });
        let id = store.create_task(prompt, agent, &options).await?;
        let input = TaskInput {
            task: id.clone(),
            repository,
            worker_queue: None,
            steps: 0,
            state: agent.to_string(),
            earlier: Vec::new(),
        };
        if let Err(e) = remote.start(input, &summary(&id, prompt)).await {
            let _ = store
                .finish_task(&id, TaskStatus::Failed, &format!("not started: {e}"))
                .await;
            return Err(e.into());
        }
        follow(cx, &store, &remote, &resolved, &id, output, apply).await
    }

    /// `rawko resume --remote`: start the workflow of a task that stopped, from the store.
    pub async fn resume_remote(
        cx: &Context,
        args: &TemporalArgs,
        task: &str,
        output: &OutputFlags,
        apply: bool,
    ) -> anyhow::Result<ExitCode> {
        let resolved = args.resolve(cx)?;
        let store = team_store(cx).await?;
        let t = store
            .task(task)
            .await
            .map_err(|e| BadInput::new(e.to_string()))?;
        if !t.status.is_resumable() {
            print_out(&format!("task {} is already {}", t.id, t.status.as_str()))?;
            return Ok(ExitCode::from(u8::from(t.status != TaskStatus::Done)));
        }
        let remote_of = |key: &str| {
            t.options
                .get("remote")
                .and_then(|r| r.get(key))
                .and_then(|v| v.as_str())
                .map(str::to_string)
        };
        let (Some(url), Some(commit)) = (remote_of("url"), remote_of("commit")) else {
            return Err(BadInput::new(format!(
                "task {} was run here, not on Temporal: `rawko resume {}` continues it",
                t.id, t.id
            ))
            .into());
        };
        let remote = connect(&resolved).await?;
        if matches!(t.status, TaskStatus::Cancelled | TaskStatus::Interrupted) {
            store.reopen(&t.id).await?;
        }
        let input = TaskInput {
            task: t.id.clone(),
            repository: Repository {
                url,
                commit,
                changes: remote_of("changes"),
            },
            worker_queue: None,
            steps: t.steps.max(0) as u32,
            state: t.state.clone(),
            earlier: Vec::new(),
        };
        remote.start(input, &summary(&t.id, &t.prompt)).await?;
        follow(cx, &store, &remote, &resolved, &t.id, output, apply).await
    }

    /// The edits the store keeps of task `id`: the steps they were taken after, and the patch.
    /// A record whose patch is not in the store is an error, not an empty change.
    async fn task_edits(store: &AnyStore, id: &str) -> anyhow::Result<Option<(i64, Vec<u8>)>> {
        let Some(e) = store.edits(id).await? else {
            return Ok(None);
        };
        match store.blob(&e.patch).await? {
            Some(patch) => Ok(Some((e.steps, patch))),
            None => Err(anyhow::anyhow!(
                "task {id}: its edits ({}) are not in the team store",
                e.patch
            )),
        }
    }

    /// Apply the task's changes to this work tree (`--apply`), or keep them in a patch file that
    /// `git apply` takes; either way, say which.
    fn changes(
        cx: &Context,
        id: &str,
        edits: &[u8],
        apply: bool,
        output: &OutputFlags,
    ) -> anyhow::Result<()> {
        let ws = cx.workspace();
        let files = patch_files(edits).len();
        let plural = if files == 1 { "" } else { "s" };
        // Whoever could write the team store wrote these edits: where the sandbox would have
        // kept the task's own commands from writing, they are refused whole.
        let refused = match patch::protected_paths(ws, edits) {
            Ok(paths) if paths.is_empty() => None,
            Ok(paths) => Some(format!(
                "they would change {}, which no task may change (rawko's own files and git's)",
                paths.join(", ")
            )),
            Err(e) => Some(format!("they cannot be read ({e})")),
        };
        let applied = apply && refused.is_none() && {
            match patch::apply(ws, edits, true).and_then(|()| patch::apply(ws, edits, false)) {
                Ok(()) => true,
                Err(e) => {
                    print_err(&format!(
                        "warning: the task's changes do not apply to this work tree, which is \
                         left as it was ({e})"
                    ))?;
                    false
                }
            }
        };
        let kept = if applied {
            None
        } else {
            let dir = cx.dirs.data.join("remote");
            let file = dir.join(format!("{id}.patch"));
            std::fs::create_dir_all(&dir)
                .and_then(|()| std::fs::write(&file, edits))
                .map_err(|e| {
                    anyhow::anyhow!("cannot keep the task's changes in {}: {e}", file.display())
                })?;
            Some(file)
        };
        if output.json {
            print_out(
                &serde_json::json!({
                    "event": "remote_changes",
                    "task": id,
                    "files": files,
                    "applied": applied,
                    "refused": refused,
                    "patch": kept.as_ref().map(|f| f.display().to_string()),
                })
                .to_string(),
            )?;
        } else if let (Some(why), Some(file), false) = (&refused, &kept, apply) {
            // Said even with --quiet: the user may apply it by hand.
            print_err(&format!(
                "warning: this work tree is unchanged; the task's changes ({files} file{plural}) \
                 are in {}, but {why}: read them before you apply any of them by hand",
                file.display()
            ))?;
        } else if !output.quiet && (applied || !apply) {
            match &kept {
                None => print_err(&format!(
                    "applied the task's changes ({files} file{plural}) to this work tree"
                ))?,
                Some(file) => print_err(&format!(
                    "this work tree is unchanged; the task's changes ({files} file{plural}) are in \
                     {}: `git apply {}` applies them (or run with --apply)",
                    file.display(),
                    file.display()
                ))?,
            }
        }
        if apply && !applied {
            let kept = kept
                .as_ref()
                .map(|f| f.display().to_string())
                .unwrap_or_default();
            return Err(match refused {
                Some(why) => anyhow::anyhow!(
                    "--apply: the task's changes were refused: {why}; they are kept in {kept}"
                ),
                None => BadInput::new(format!(
                    "--apply: the task's changes did not apply to this work tree; they are kept \
                     in {kept}"
                ))
                .into(),
            });
        }
        Ok(())
    }

    /// How long ago `ms` (since the Unix epoch) was, for people.
    fn ago(ms: Option<i64>) -> String {
        let Some(ms) = ms else { return "-".into() };
        let secs = (rawko_store::now_ms() - ms).max(0) / 1000;
        match secs {
            0..60 => format!("{secs}s ago"),
            60..3600 => format!("{}m ago", secs / 60),
            3600..86400 => format!("{}h ago", secs / 3600),
            _ => format!("{}d ago", secs / 86400),
        }
    }

    /// The most workflows `tasks list --remote` shows.
    const LIST_LIMIT: usize = 200;

    /// `rawko tasks list --remote`: the tasks' workflows on Temporal, newest first, each with
    /// its task as the team store has it.
    pub async fn list_remote(
        cx: &Context,
        args: &TemporalArgs,
        json: bool,
    ) -> anyhow::Result<ExitCode> {
        let resolved = args.resolve(cx)?;
        let store = team_store(cx).await?;
        let remote = connect(&resolved).await?;
        let executions = remote.list(LIST_LIMIT).await.map_err(|e| {
            anyhow::anyhow!(
                "cannot list the workflows in namespace {}: {e}",
                resolved.namespace
            )
        })?;
        let mut rows = Vec::new();
        for e in &executions {
            let task = match store.task(&e.task).await {
                Ok(t) if t.id == e.task => Some(t),
                Ok(_) | Err(rawko_store::StoreError::NoSuchTask(_)) => None,
                Err(other) => return Err(other.into()),
            };
            rows.push((e, task));
        }
        if json {
            let list: Vec<serde_json::Value> = rows
                .iter()
                .map(|(e, t)| serde_json::json!({"workflow": e, "task": t}))
                .collect();
            crate::cli::print_json(&serde_json::Value::Array(list))?;
            return Ok(ExitCode::SUCCESS);
        }
        if rows.is_empty() {
            print_out(&format!(
                "No tasks on Temporal in namespace {} yet (start one with `rawko run --remote`).",
                resolved.namespace
            ))?;
            return Ok(ExitCode::SUCCESS);
        }
        let mut table = crate::cli::Table::new(&[
            "ID", "WORKFLOW", "STATUS", "STATE", "STEPS", "STARTED", "QUEUE", "TASK",
        ]);
        for (e, t) in &rows {
            let (status, state, steps, prompt) = match t {
                Some(t) => (
                    t.status.as_str().to_string(),
                    t.state.clone(),
                    t.steps.to_string(),
                    rawko_text::line(t.prompt.lines().next().unwrap_or(""), 60).into_owned(),
                ),
                None => (
                    "-".into(),
                    "-".into(),
                    "-".into(),
                    "(not in this team store)".into(),
                ),
            };
            table.row(vec![
                e.task.clone(),
                e.status.to_string(),
                status,
                state,
                steps,
                ago(e.started_ms),
                e.queue.clone(),
                prompt,
            ]);
        }
        print_out(&table.render())?;
        if executions.len() == LIST_LIMIT {
            print_err(&format!("(the newest {LIST_LIMIT} shown)"))?;
        }
        Ok(ExitCode::SUCCESS)
    }

    /// `rawko tasks show --remote`: the task's workflow on Temporal, as JSON and as text: its
    /// status and history, the worker holding its checkout, and the files its edits change.
    pub async fn view(
        cx: &Context,
        args: &TemporalArgs,
        store: &AnyStore,
        id: &str,
    ) -> anyhow::Result<(serde_json::Value, String)> {
        let resolved = args.resolve(cx)?;
        let remote = connect(&resolved).await?;
        let execution = remote
            .describe(id)
            .await
            .map_err(|e| anyhow::anyhow!("cannot describe task {id}'s workflow: {e}"))?;
        let edits = task_edits(store, id).await?;
        let files = edits
            .as_ref()
            .map(|(_, p)| patch::files_of(cx.workspace(), p).unwrap_or_default())
            .unwrap_or_default();
        let mut text = String::new();
        let Some(e) = execution else {
            text.push_str(&format!(
                "  no workflow of it in namespace {} (it ran here, or its history is past \
                 the namespace's retention)\n",
                resolved.namespace
            ));
            return Ok((serde_json::json!({"workflow": null}), text));
        };
        // Who holds the checkout: the workflow answers while a worker can replay it.
        let progress = remote.progress(id, Duration::from_secs(3)).await.ok();
        text.push_str(&format!(
            "  workflow {} (run {}): {}, started {}, {} history events, queue {}\n",
            rawko_temporal::workflow_id(id),
            e.run,
            e.status,
            ago(e.started_ms),
            e.events,
            e.queue
        ));
        match &progress {
            Some(p) => text.push_str(&format!(
                "  checked out on {} ({} checkout{} in this run){}\n",
                p.worker.as_deref().unwrap_or("no worker yet"),
                p.checkouts,
                if p.checkouts == 1 { "" } else { "s" },
                p.checkout
                    .as_deref()
                    .map(|c| format!(" at {c}"))
                    .unwrap_or_default()
            )),
            None => text.push_str("  no worker answered for its progress\n"),
        }
        match &edits {
            Some((steps, _)) if !files.is_empty() => {
                text.push_str(&format!(
                    "  edits after {steps} step{}:\n",
                    if *steps == 1 { "" } else { "s" }
                ));
                for (added, deleted, path) in &files {
                    text.push_str(&format!("    {path} (+{added} -{deleted})\n"));
                }
            }
            _ => text.push_str("  no edits kept yet\n"),
        }
        let value = serde_json::json!({
            "workflow": e,
            "progress": progress,
            "edits": edits.as_ref().map(|(steps, _)| serde_json::json!({
                "steps": steps,
                "files": files.iter().map(|(a, d, p)| serde_json::json!({
                    "path": p, "added": a, "deleted": d,
                })).collect::<Vec<_>>(),
            })),
        });
        Ok((value, text))
    }

    fn summary(id: &str, prompt: &str) -> String {
        format!("rawko {id}: {}", rawko_text::line(prompt, 120))
    }

    /// Print each state as the workflow reports it, cancel on Ctrl-C, and report the end as a
    /// local run does.
    async fn follow(
        cx: &Context,
        store: &AnyStore,
        remote: &Remote,
        resolved: &Resolved,
        id: &str,
        output: &OutputFlags,
        apply: bool,
    ) -> anyhow::Result<ExitCode> {
        let chatty = !output.json && !output.quiet;
        if chatty {
            print_err(&format!(
                "task {id} runs on Temporal at {} (namespace {}, queue {}); Ctrl-C cancels it",
                resolved.address,
                remote.namespace(),
                remote.queue()
            ))?;
        }
        let started = Instant::now();
        let mut shown = 0usize;
        let mut holder: Option<String> = None;
        let mut show = |p: &Progress| -> anyhow::Result<()> {
            if p.worker != holder {
                if let (Some(w), true) = (&p.worker, chatty) {
                    print_err(&format!("  checked out on worker {w}"))?;
                }
                holder = p.worker.clone();
            }
            for s in p.states.iter().skip(shown) {
                let line = serde_json::json!({
                    "event": "remote_state",
                    "task": id,
                    "agent": s.agent,
                    "tools": s.tools,
                    "to": s.state,
                    "status": s.status,
                    "worker": s.worker,
                });
                if output.json {
                    print_out(&line.to_string())?;
                } else if chatty {
                    let tools = if s.tools.is_empty() {
                        String::new()
                    } else {
                        format!(" [{}]", s.tools.join(", "))
                    };
                    print_err(&format!(
                        "  [{:>6.1}s] {}{tools} -> {}",
                        started.elapsed().as_secs_f64(),
                        s.agent,
                        s.state
                    ))?;
                }
            }
            shown = shown.max(p.states.len());
            Ok(())
        };
        let wait = remote.wait(id);
        tokio::pin!(wait);
        let mut tick = tokio::time::interval(Duration::from_millis(500));
        let ended = loop {
            tokio::select! {
                end = &mut wait => break end,
                _ = tick.tick() => {
                    if let Ok(p) = remote.progress(id, Duration::from_secs(2)).await {
                        show(&p)?;
                    }
                }
                _ = tokio::signal::ctrl_c() => {
                    if chatty {
                        print_err("cancelling the task on Temporal (the state running now stops; \
                                   `rawko resume --remote` continues it)")?;
                    }
                    if let Err(e) = remote.cancel(id, "Ctrl-C on the client").await {
                        print_err(&format!("warning: cannot cancel the workflow: {e}"))?;
                    }
                    break (&mut wait).await;
                }
            }
        };
        if let Ok(p) = remote.progress(id, Duration::from_secs(2)).await {
            show(&p)?;
        }
        if matches!(ended, Follow::Cancelled) && store.task(id).await?.status == TaskStatus::Running
        {
            // Cancelled between two states: nothing ran to say so in the store.
            store
                .finish_task(id, TaskStatus::Cancelled, "cancelled on Temporal")
                .await?;
        }
        let task = store.task(id).await?;
        let end = rawko_fsm::TaskEnd {
            status: task.status,
            state: task.state.clone(),
            summary: task.summary.clone().unwrap_or_default(),
        };
        match ended {
            Follow::Ended(_) | Follow::Cancelled => {}
            Follow::Failed(why) => {
                if !task.status.is_finished() {
                    let _ = store
                        .finish_task(id, TaskStatus::Failed, &format!("on Temporal: {why}"))
                        .await;
                }
                return Err(anyhow::anyhow!("task {id}: its workflow failed: {why}"));
            }
        }
        // The task's changes, as the worker that ran its last state kept them in the store:
        // shown, and applied to this work tree only when asked.
        let edits = task_edits(store, id)
            .await?
            .map(|(_, patch)| patch)
            .unwrap_or_default();
        report(store, ClosingDiff::Patch(&edits), id, &end, output, true).await?;
        if !edits.is_empty() {
            changes(cx, id, &edits, apply, output)?;
        }
        Ok(exit_code(&end))
    }
}
