//! Tasks on Temporal: `rawko run --remote` against real `rawko worker` processes, a real
//! Temporal development server on loopback and the PostgreSQL team store, with the model
//! scripted on loopback. A worker is killed with SIGKILL while it holds tasks: every task must
//! still finish on the others, no tool call the store had committed may run again, and none
//! of their edits may be lost (each call appends its label to a file in the checkout it ran
//! in, and the task's edits that come back to the client must hold each label once).

#[cfg(feature = "temporal")]
mod on_temporal {
    use std::path::{Path, PathBuf};
    use std::process::{Child, Command, Stdio};
    use std::time::{Duration, Instant};

    use serde_json::json;

    use crate::support::model_server::{ModelServer, openai};
    use crate::support::store::{self, PgDb};
    use crate::support::temporal::{TemporalServer, binary};
    use crate::support::{Run, STEP_AGENT, TEST_KEY, Workspace, rawko, scripted_config};

    /// Bash calls each task makes before it finishes.
    const STEPS: usize = 4;

    /// The longest a dead worker's task may wait to be taken over, in seconds.
    const TAKEOVER_BOUND_S: f64 = 15.0;

    /// A team: the client's repository (with the user's config beside it), the model, the
    /// Temporal server and the team store.
    struct Team {
        ws: Workspace,
        _model: ModelServer,
        temporal: TemporalServer,
        db: PgDb,
        queue: String,
    }

    fn git(dir: &Path, args: &[&str]) {
        let out = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
    }

    fn team() -> Option<Team> {
        let bin = binary()?;
        let Some(server) = store::server_url() else {
            eprintln!("skipped: no PostgreSQL server (RAWKO_TEST_PG_URL)");
            return None;
        };
        let db = PgDb::new(&server);
        let ws = Workspace::new();
        let user = ws.config_home().join("rawko");
        std::fs::create_dir_all(user.join("agents")).unwrap();
        std::fs::write(user.join("agents/worker.yaml"), STEP_AGENT).unwrap();
        let model = ModelServer::start();
        // Each request answers for its own task: its next step is the count of tool results
        // in its conversation, so tasks running at once do not share a script.
        model.respond_with(|r| {
            let body = r.json();
            let done = body["messages"]
                .as_array()
                .map_or(0, |m| m.iter().filter(|m| m["role"] == "tool").count());
            // A "slow task" takes longer than a stopping worker's grace period (10 s).
            let pause = if String::from_utf8_lossy(&r.body).contains("slow task") {
                4
            } else {
                1
            };
            if done < STEPS {
                openai::tool_call(
                    &format!("call_{done}"),
                    "Bash",
                    &json!({"command": format!("echo step-{done} >> steps.log && sleep {pause}")}),
                )
            } else {
                openai::tool_call(
                    "call_end",
                    "finish",
                    &json!({"status": "success", "summary": "all steps ran"}),
                )
            }
        });
        std::fs::write(user.join("config.yaml"), scripted_config(&model.base_url())).unwrap();
        ws.write(".gitignore", ".test-config/\n.test-data/\n.test-workers/\n");
        ws.write("README.md", "a project\n");
        git(ws.path(), &["init", "-q", "-b", "main"]);
        git(ws.path(), &["add", "."]);
        git(ws.path(), &["commit", "-q", "-m", "start"]);
        let temporal = TemporalServer::start(&bin);
        Some(Team {
            ws,
            _model: model,
            temporal,
            db,
            queue: format!("rawko-test-{:08x}", fastrand::u32(..)),
        })
    }

    impl Team {
        fn command(&self) -> Command {
            let mut cmd = rawko(&self.ws);
            cmd.env("TEST_KEY", TEST_KEY)
                .env("RAWKO_STORE_URL", self.db.url())
                .env_remove("TEMPORAL_ADDRESS")
                .env_remove("TEMPORAL_NAMESPACE");
            cmd
        }

        fn data_of(&self, worker: &str) -> PathBuf {
            self.ws.path().join(".test-workers").join(worker)
        }

        fn worker(&self, name: &str) -> Worker {
            let data = self.data_of(name);
            std::fs::create_dir_all(&data).unwrap();
            let log = std::fs::File::create(data.with_extension("log")).unwrap();
            self.command()
                .current_dir(&data)
                .env("RAWKO_DATA_DIR", &data)
                .args([
                    "worker",
                    "--temporal",
                    &self.temporal.address,
                    "--queue",
                    &self.queue,
                ])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .map(Worker)
                .unwrap()
        }

        fn client(&self, prompt: &str) -> Child {
            self.command()
                .args(["run", "--remote", "--agent", "worker", "--no-stream"])
                .args([
                    "--temporal",
                    &self.temporal.address,
                    "--queue",
                    &self.queue,
                    prompt,
                ])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        }

        /// Whether any task's checkout on these workers has a step's label.
        fn labels_of_any(&self, workers: &[&str]) -> bool {
            workers.iter().any(|w| {
                std::fs::read_dir(self.data_of(w).join("worker"))
                    .into_iter()
                    .flatten()
                    .flatten()
                    .any(|e| e.path().join("steps.log").exists())
            })
        }

        /// Record `patch` in the team store as the task's edits, as after more steps than the
        /// task takes, so that the worker's own never replace them: what a compromised worker
        /// or anyone else who can write the store could leave there.
        fn record_edits(&self, id: &str, patch: &str) {
            let data = format!("convert_to($p${patch}$p$, 'UTF8')");
            self.db.execute(&format!(
                "INSERT INTO blobs (hash, size, data, created_at) VALUES \
                 ('sha256:' || encode(sha256({data}), 'hex'), length({data}), {data}, 0) \
                 ON CONFLICT DO NOTHING"
            ));
            self.db.execute(&format!(
                "INSERT INTO task_edits (task_id, steps, patch, at) VALUES \
                 ('{id}', 1000, 'sha256:' || encode(sha256({data}), 'hex'), 0) \
                 ON CONFLICT (task_id) DO UPDATE SET steps = excluded.steps, patch = excluded.patch"
            ));
        }

        fn worker_log(&self, name: &str) -> String {
            std::fs::read_to_string(self.data_of(name).with_extension("log")).unwrap_or_default()
        }
    }

    /// A worker process, killed when dropped: a failing test leaves none behind.
    struct Worker(Child);

    impl std::ops::Deref for Worker {
        type Target = Child;
        fn deref(&self) -> &Child {
            &self.0
        }
    }

    impl std::ops::DerefMut for Worker {
        fn deref_mut(&mut self) -> &mut Child {
            &mut self.0
        }
    }

    impl Drop for Worker {
        fn drop(&mut self) {
            kill(&mut self.0);
        }
    }

    fn finish(mut child: Child, what: &str) -> Run {
        let deadline = Instant::now() + Duration::from_secs(240);
        loop {
            if child.try_wait().unwrap().is_some() {
                return Run::of(child.wait_with_output().unwrap());
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!(
                    "{what} did not end: {:?}",
                    Run::of(child.wait_with_output().unwrap())
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn kill(child: &mut Child) {
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Tasks over workers (three over two; `RAWKO_REMOTE_TASKS` and `RAWKO_REMOTE_WORKERS` for
    /// a bigger run by hand); a worker holding a running task is killed at a random moment
    /// while it works (the seed is printed). Every task finishes on the others, every step ran,
    /// only a step in flight at the kill may have run twice, and the killed worker's tasks are
    /// taken over soon after its death (each takeover's delay is printed).
    #[test]
    fn tasks_finish_on_the_other_worker_when_one_is_killed() {
        let Some(team) = team() else { return };
        let count = |var: &str, default: usize| {
            std::env::var(var)
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(default)
        };
        let (n_tasks, n_workers) = (
            count("RAWKO_REMOTE_TASKS", 3),
            count("RAWKO_REMOTE_WORKERS", 2),
        );
        let seed = std::env::var("RAWKO_KILL_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| fastrand::u64(..));
        eprintln!("kill seed: {seed} (RAWKO_KILL_SEED={seed} repeats it)");
        let mut rng = fastrand::Rng::with_seed(seed);
        let names: Vec<String> = (0..n_workers).map(|i| format!("w{i}")).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let mut workers: Vec<Worker> = names.iter().map(|n| team.worker(n)).collect();
        let started = Instant::now();
        let clients: Vec<Child> = (0..n_tasks)
            .map(|i| team.client(&format!("task {i}")))
            .collect();
        // Wait until some tool call is committed, then a random while more.
        let deadline = Instant::now() + Duration::from_secs(120);
        let committed = || {
            team.db
                .query("SELECT CAST(to_regclass('rawko.tool_calls') AS TEXT)")[0][0]
                .is_some()
                && team
                    .db
                    .query("SELECT CAST(COUNT(*) AS TEXT) FROM tool_calls")[0][0]
                    .as_deref()
                    != Some("0")
        };
        while !committed() {
            assert!(Instant::now() < deadline, "no tool call was committed");
            std::thread::sleep(Duration::from_millis(50));
        }
        std::thread::sleep(Duration::from_millis(rng.u64(0..2500)));
        let holders = team.db.query(
            "SELECT CAST(lease_pid AS TEXT) FROM tasks WHERE status = 'running' AND lease_pid IS NOT NULL",
        );
        let victim = holders
            .iter()
            .filter_map(|r| r[0].as_deref()?.parse::<u32>().ok())
            .find_map(|p| workers.iter().position(|w| w.id() == p))
            .unwrap_or(0);
        let victim_pid = workers[victim].id();
        kill(&mut workers[victim]);
        let killed_at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        let logs = || {
            names
                .iter()
                .map(|n| format!("worker {n}:\n{}", team.worker_log(n)))
                .collect::<Vec<_>>()
                .join("\n")
        };
        eprintln!("killed worker {} (pid {victim_pid})", names[victim]);
        let runs: Vec<Run> = clients
            .into_iter()
            .enumerate()
            .map(|(i, c)| finish(c, &format!("client {i}")))
            .collect();
        for (i, r) in runs.iter().enumerate() {
            assert_eq!(r.code, 0, "client {i}: {r:?}\n{}", logs());
            assert!(r.stdout.contains("is done"), "{r:?}");
            // The task's edits, as the client gets them, hold every step's: those the killed
            // worker made before its death as well (kept after each call, before its record).
            // At most the call in flight at the kill ran twice.
            let labels: Vec<&str> = r
                .stdout
                .lines()
                .filter_map(|l| l.strip_prefix('+').filter(|l| l.starts_with("step-")))
                .collect();
            for n in 0..STEPS {
                let label = format!("step-{n}");
                assert!(
                    labels.contains(&label.as_str()),
                    "client {i}: {label}'s edit was lost: {r:?}\n{}",
                    logs()
                );
            }
            let again = labels.len() - STEPS;
            assert!(
                again <= 1,
                "client {i}: {again} steps ran twice: {labels:?}"
            );
        }
        eprintln!(
            "{n_tasks} tasks over {n_workers} workers done in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        // Each of the killed worker's tasks was taken over (the store's clock, this machine's).
        let takeovers = team.db.query(&format!(
            "SELECT CAST(at AS TEXT), reason FROM decisions \
             WHERE capability = 'lease' AND decision = 'interrupted' AND reason LIKE '%pid {victim_pid} %'"
        ));
        for t in &takeovers {
            let at: i64 = t[0].as_deref().unwrap().parse().unwrap();
            let after = (at - killed_at) as f64 / 1000.0;
            eprintln!("taken over {after:.1} s after the kill");
            // The aim is 10 s (5-6 s on a quiet machine); the bound leaves room for a machine
            // as loaded as CI's, where hundreds of other tests run beside this one.
            assert!(
                after <= TAKEOVER_BOUND_S,
                "a task was taken over {after:.1} s after the kill"
            );
        }
        let tasks = team.db.query("SELECT id, status FROM tasks ORDER BY id");
        assert_eq!(tasks.len(), n_tasks, "{tasks:?}");
        for row in &tasks {
            let id = row[0].clone().unwrap();
            assert_eq!(row[1].as_deref(), Some("done"), "{tasks:?}");
            // The store has each call once, with its own id.
            let calls = team.db.query(&format!(
                "SELECT call_id FROM tool_calls c JOIN turns t ON t.id = c.turn_id \
                 WHERE t.task_id = '{id}' AND c.tool = 'Bash' ORDER BY c.call_id"
            ));
            // Stored as `ITERATION.ID`.
            let ids: Vec<String> = calls
                .into_iter()
                .filter_map(|r| Some(r[0].as_deref()?.split_once('.')?.1.to_string()))
                .collect();
            let want: Vec<String> = (0..STEPS).map(|n| format!("call_{n}")).collect();
            assert_eq!(ids, want, "task {id}");
        }
        // The histories carry ids and reports, never the key the workers hold.
        let bin = binary().unwrap();
        for row in &tasks {
            let id = row[0].as_deref().unwrap();
            let history = team.temporal.history(&bin, &format!("rawko-task-{id}"));
            // The payloads are read decoded: the task's own id is in its input.
            assert!(history.contains(&format!("\"task\":\"{id}\"")), "{history}");
            assert!(
                !history.contains(TEST_KEY),
                "task {id}'s history holds the key"
            );
        }
        for w in &mut workers {
            kill(w);
        }
    }

    /// A worker stopped with SIGTERM in the middle of a state longer than its grace period
    /// stops after that period without cancelling the task: the other worker finishes it.
    #[test]
    fn a_stopped_worker_hands_its_task_over_instead_of_cancelling_it() {
        let Some(team) = team() else { return };
        let mut a = team.worker("a");
        let client = team.client("one slow task");
        let deadline = Instant::now() + Duration::from_secs(120);
        while !team.labels_of_any(&["a"]) {
            assert!(Instant::now() < deadline, "worker a never ran a step");
            std::thread::sleep(Duration::from_millis(50));
        }
        let mut b = team.worker("b");
        let stopped = Instant::now();
        // SAFETY: kill(2) on a child of this process.
        assert_eq!(unsafe { libc::kill(a.id() as i32, libc::SIGTERM) }, 0);
        let status = loop {
            if let Some(s) = a.try_wait().unwrap() {
                break s;
            }
            assert!(
                stopped.elapsed() < Duration::from_secs(30),
                "worker a did not stop"
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(
            status.success(),
            "worker a: {status:?}\n{}",
            team.worker_log("a")
        );
        let r = finish(client, "the client");
        assert_eq!(
            r.code,
            0,
            "{r:?}\nworker a:\n{}\nworker b:\n{}",
            team.worker_log("a"),
            team.worker_log("b")
        );
        assert!(
            team.worker_log("b").contains("-> done"),
            "{}",
            team.worker_log("b")
        );
        kill(&mut b);
    }

    /// A work tree's uncommitted changes (an edit, a new file, a binary one) travel with the
    /// task by their hash in the store; the task's edits come back as a patch, applied with
    /// `--apply` and kept in a file without it, the work tree then untouched.
    #[test]
    fn uncommitted_changes_travel_and_the_tasks_edits_come_back() {
        let Some(team) = team() else { return };
        let ws = team.ws.path();
        team.ws.write("README.md", "changed, not committed\n");
        team.ws.write("notes.txt", "new, not added\n");
        let logo = [0u8, 0x89, b'P', b'N', b'G', 0xff, 0];
        std::fs::write(ws.join("logo.bin"), logo).unwrap();
        let mut w = team.worker("w");
        let mut client = team.command();
        client.args([
            "run",
            "--remote",
            "--apply",
            "--agent",
            "worker",
            "--no-stream",
        ]);
        client.args(["--temporal", &team.temporal.address, "--queue", &team.queue]);
        let r = Run::of(client.arg("first").output().unwrap());
        assert_eq!(r.code, 0, "{r:?}\n{}", team.worker_log("w"));
        assert!(r.stderr.contains("uncommitted changes (3 files)"), "{r:?}");
        assert!(
            r.stderr.contains("applied the task's changes (1 file)"),
            "{r:?}"
        );
        assert!(r.stdout.contains("+step-3"), "the closing diff: {r:?}");
        let id = team.db.query("SELECT id FROM tasks WHERE prompt = 'first'")[0][0]
            .clone()
            .unwrap();
        // The worker ran on the files the user had, and its edits are here now.
        let checkout = team.data_of("w").join("worker").join(&id);
        assert_eq!(
            std::fs::read_to_string(checkout.join("README.md")).unwrap(),
            "changed, not committed\n"
        );
        assert_eq!(std::fs::read(checkout.join("logo.bin")).unwrap(), logo);
        assert!(checkout.join("notes.txt").is_file());
        let steps = |dir: &Path| std::fs::read_to_string(dir.join("steps.log")).unwrap_or_default();
        assert_eq!(steps(ws), steps(&checkout));
        assert_eq!(steps(ws).lines().count(), STEPS, "{}", steps(ws));
        assert_eq!(
            std::fs::read_to_string(ws.join("README.md")).unwrap(),
            "changed, not committed\n",
            "the user's own changes are as they were"
        );
        // The history names the changes by hash, never by content.
        let history = team
            .temporal
            .history(&binary().unwrap(), &format!("rawko-task-{id}"));
        assert!(history.contains("\"changes\":\"sha256:"), "{history}");
        assert!(!history.contains("new, not added"), "{history}");

        // Without --apply the work tree stays as it is, and the patch is kept for git apply.
        let mut client = team.command();
        client.args(["run", "--remote", "--agent", "worker", "--no-stream"]);
        client.args(["--temporal", &team.temporal.address, "--queue", &team.queue]);
        let r = Run::of(client.arg("second").output().unwrap());
        assert_eq!(r.code, 0, "{r:?}\n{}", team.worker_log("w"));
        assert!(r.stderr.contains("this work tree is unchanged"), "{r:?}");
        assert_eq!(steps(ws).lines().count(), STEPS);
        let id = team
            .db
            .query("SELECT id FROM tasks WHERE prompt = 'second'")[0][0]
            .clone()
            .unwrap();
        let kept = team
            .ws
            .path()
            .join(".test-data/remote")
            .join(format!("{id}.patch"));
        assert!(kept.is_file(), "{r:?}");
        git(ws, &["apply", kept.to_str().unwrap()]);
        assert_eq!(steps(ws).lines().count(), 2 * STEPS, "{}", steps(ws));

        // Both tasks, as Temporal and the team store have them.
        let tasks = |args: &[&str]| {
            Run::of(
                team.command()
                    .arg("tasks")
                    .args(args)
                    .args(["--temporal", &team.temporal.address])
                    .output()
                    .unwrap(),
            )
        };
        let list = tasks(&["list", "--remote"]);
        assert_eq!(list.code, 0, "{list:?}");
        let row = list
            .stdout
            .lines()
            .find(|l| l.starts_with(&id))
            .unwrap_or("");
        assert!(
            row.contains("completed") && row.contains("done") && row.contains("second"),
            "{list:?}"
        );
        let show = tasks(&["show", "--remote", &id]);
        assert_eq!(show.code, 0, "{show:?}");
        assert!(show.stdout.contains("on Temporal:"), "{show:?}");
        assert!(show.stdout.contains(": completed, started"), "{show:?}");
        assert!(show.stdout.contains("steps.log (+4 -0)"), "{show:?}");
        assert!(show.stdout.contains("checked out on "), "{show:?}");
        let here = tasks(&["list"]);
        assert_eq!(here.code, 2, "{here:?}");
        assert!(here.stderr.contains("goes with --remote"), "{here:?}");
        kill(&mut w);
    }

    /// The edits that come back are only as trustworthy as whoever could write the team store.
    /// A hostile worker (here: the test, writing the store as one would) records edits that
    /// change the workspace's `.rawko/` (its agents, whose trust the user gave), the name
    /// disguised in git's quoting, beside an honest change: `--apply` applies none of it, says
    /// which file it refused, and keeps the patch for the user to read; the work tree is as it
    /// was. Without `--apply`, the user is warned before applying the kept patch by hand.
    #[test]
    fn edits_that_change_rawkos_own_files_are_never_applied() {
        let Some(team) = team() else { return };
        let ws = team.ws.path();
        let mut w = team.worker("w");
        let hostile = "diff --git a/steps.log b/steps.log\nnew file mode 100644\n--- /dev/null\n\
                       +++ b/steps.log\n@@ -0,0 +1 @@\n+honest\n\
                       diff --git \"a/\\056rawko/agents/evil.yaml\" \"b/\\056rawko/agents/evil.yaml\"\n\
                       new file mode 100644\n--- /dev/null\n+++ \"b/\\056rawko/agents/evil.yaml\"\n\
                       @@ -0,0 +1 @@\n+name: evil\n";
        let run = |prompt: &str, apply: bool| {
            let mut client = team.command();
            client.args(["run", "--remote", "--agent", "worker", "--no-stream"]);
            if apply {
                client.arg("--apply");
            }
            client.args(["--temporal", &team.temporal.address, "--queue", &team.queue]);
            let child = client
                .arg(prompt)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            // Once the worker has its checkout, the task's edits are the hostile ones, recorded
            // as after more steps than the task takes, so the worker's own never replace them.
            let deadline = Instant::now() + Duration::from_secs(60);
            let id = loop {
                let q = format!(
                    "SELECT id FROM tasks WHERE prompt = '{prompt}' \
                     AND to_regclass('rawko.task_edits') IS NOT NULL"
                );
                let made = team
                    .db
                    .query("SELECT CAST(to_regclass('rawko.tasks') AS TEXT)");
                if made[0][0].is_some()
                    && let Some(id) = team.db.query(&q).first().and_then(|r| r[0].clone())
                    && team.data_of("w").join("worker").join(&id).is_dir()
                {
                    break id;
                }
                assert!(Instant::now() < deadline, "the task was never checked out");
                std::thread::sleep(Duration::from_millis(20));
            };
            team.record_edits(&id, hostile);
            (id, finish(child, "the client"))
        };
        let (id, r) = run("hostile edits", true);
        assert_ne!(r.code, 0, "{r:?}\n{}", team.worker_log("w"));
        assert!(r.stderr.contains(".rawko/agents/evil.yaml"), "{r:?}");
        assert!(r.stderr.contains("no task may change"), "{r:?}");
        assert!(
            r.stdout
                .contains("files changed: steps.log, .rawko/agents/evil.yaml"),
            "the report names every file: {r:?}"
        );
        assert!(!ws.join(".rawko/agents/evil.yaml").exists(), "{r:?}");
        assert!(!ws.join("steps.log").exists(), "half of it was applied");
        let kept = ws.join(".test-data/remote").join(format!("{id}.patch"));
        assert_eq!(std::fs::read_to_string(&kept).unwrap(), hostile);

        let (_, r) = run("hostile edits, kept", false);
        assert_eq!(r.code, 0, "{r:?}\n{}", team.worker_log("w"));
        assert!(
            r.stderr.contains("warning: this work tree is unchanged")
                && r.stderr.contains("(2 files)")
                && r.stderr.contains("would change .rawko/agents/evil.yaml"),
            "{r:?}"
        );
        assert!(!r.stderr.contains("--apply"), "{r:?}");
        assert!(!ws.join(".rawko").exists());
        kill(&mut w);
    }

    /// Edits in the store that change what no task may change (a git hook, an agent of the
    /// repository's own), left there while a worker held the task: the worker that takes the
    /// task over when that one dies refuses the whole checkout, the task fails saying why, and
    /// no file of those edits is written anywhere on the new worker.
    #[test]
    fn a_worker_taking_a_task_over_refuses_hostile_edits_from_the_store() {
        let Some(team) = team() else { return };
        let hostile = "diff --git a/steps.log b/steps.log\nnew file mode 100644\n--- /dev/null\n\
                       +++ b/steps.log\n@@ -0,0 +1 @@\n+honest\n\
                       diff --git a/.git/hooks/post-checkout b/.git/hooks/post-checkout\n\
                       new file mode 100755\n--- /dev/null\n+++ b/.git/hooks/post-checkout\n\
                       @@ -0,0 +1,2 @@\n+#!/bin/sh\n+touch /tmp/rawko-hostile-hook-ran\n\
                       diff --git \"a/\\056rawko/agents/evil.yaml\" \"b/\\056rawko/agents/evil.yaml\"\n\
                       new file mode 100644\n--- /dev/null\n+++ \"b/\\056rawko/agents/evil.yaml\"\n\
                       @@ -0,0 +1 @@\n+name: evil\n";
        let mut a = team.worker("a");
        let prompt = "one slow task, then hostile edits";
        let client = team.client(prompt);
        let deadline = Instant::now() + Duration::from_secs(120);
        while !team.labels_of_any(&["a"]) {
            assert!(Instant::now() < deadline, "worker a never ran a step");
            std::thread::sleep(Duration::from_millis(50));
        }
        let q = format!("SELECT id FROM tasks WHERE prompt = '{prompt}'");
        let id = team.db.query(&q)[0][0].clone().expect("the task's id");
        team.record_edits(&id, hostile);
        kill(&mut a);
        let mut b = team.worker("b");
        let r = finish(client, "the client");
        let logs = format!(
            "{r:?}\nworker a:\n{}\nworker b:\n{}",
            team.worker_log("a"),
            team.worker_log("b")
        );
        assert_ne!(r.code, 0, "{logs}");
        let said = format!("{}{}", r.stdout, r.stderr);
        // The reason, not only that an activity failed.
        assert!(
            said.contains("its workflow failed: the task's edits so far would change"),
            "{logs}"
        );
        assert!(said.contains("which no task may change"), "{logs}");
        assert!(said.contains(".rawko/agents/evil.yaml"), "{logs}");
        assert!(!said.contains("scheduled_event_id"), "{logs}");
        assert!(
            team.worker_log("b")
                .contains("no checkout (the task fails): the task's edits so far would change"),
            "{logs}"
        );
        // Nothing of them on worker b: no checkout holds them, half-made or whole.
        let mut left = vec![team.data_of("b")];
        while let Some(dir) = left.pop() {
            for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let p = e.path();
                assert!(
                    !p.ends_with(".rawko/agents/evil.yaml") && !p.ends_with("hooks/post-checkout"),
                    "{} was written\n{logs}",
                    p.display()
                );
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    left.push(p);
                }
            }
        }
        assert!(!Path::new("/tmp/rawko-hostile-hook-ran").exists(), "{logs}");
        kill(&mut b);
    }

    /// What a user gets wrong, and what they are told; nothing is started or left behind.
    #[test]
    fn bad_servers_stores_and_work_trees_are_refused_with_a_reason() {
        let Some(team) = team() else { return };
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = closed.local_addr().unwrap().port();
        drop(closed);
        let run = |extra: &[&str], store: bool| {
            let mut cmd = team.command();
            if !store {
                cmd.env_remove("RAWKO_STORE_URL");
            }
            Run::of(
                cmd.args(["run", "--remote", "--agent", "worker"])
                    .args(extra)
                    .arg("a task")
                    .output()
                    .unwrap(),
            )
        };
        let here = Run::of(
            team.command()
                .args(["run", "--temporal", "127.0.0.1:7233", "a task"])
                .output()
                .unwrap(),
        );
        assert_eq!(here.code, 2, "{here:?}");
        assert!(here.stderr.contains("goes with --remote"), "{here:?}");
        let down = run(&["--temporal", &format!("127.0.0.1:{port}")], true);
        assert_eq!(down.code, 1, "{down:?}");
        assert!(
            down.stderr.contains("cannot reach the Temporal server"),
            "{down:?}"
        );
        let bad = run(&["--temporal", "not an address"], true);
        assert_eq!(bad.code, 2, "{bad:?}");
        assert!(bad.stderr.contains("is not HOST:PORT"), "{bad:?}");
        let tls = run(&["--temporal", "https://127.0.0.1:7233"], true);
        assert!(tls.stderr.contains("needs TLS"), "{tls:?}");
        let local = run(&["--temporal", &team.temporal.address], false);
        assert_eq!(local.code, 2, "{local:?}");
        assert!(local.stderr.contains("needs the team store"), "{local:?}");
        let nope = run(
            &["--temporal", &team.temporal.address, "--namespace", "nope"],
            true,
        );
        assert_eq!(nope.code, 1, "{nope:?}");
        assert!(nope.stderr.contains("nope"), "{nope:?}");
        // A remote whose URL holds a token: the token reaches neither the store nor the
        // workflow's history (no worker polls this queue, so the workflow waits, started).
        git(
            team.ws.path(),
            &[
                "remote",
                "add",
                "origin",
                "https://me:tok-5e3cret@127.0.0.1:9/r.git",
            ],
        );
        let mut waiting = team
            .command()
            .args([
                "run",
                "--remote",
                "--agent",
                "worker",
                "--temporal",
                &team.temporal.address,
            ])
            .args(["--queue", "nobody-polls-this", "token task"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let bin = binary().unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        let history = loop {
            let ids = team
                .db
                .query("SELECT id FROM tasks WHERE prompt = 'token task'");
            if let Some(id) = ids.first().and_then(|r| r[0].clone()) {
                break team.temporal.history(&bin, &format!("rawko-task-{id}"));
            }
            assert!(Instant::now() < deadline, "the token task was never made");
            std::thread::sleep(Duration::from_millis(100));
        };
        kill(&mut waiting);
        assert!(history.contains("127.0.0.1:9/r.git"), "{history}");
        assert!(
            !history.contains("tok-5e3cret"),
            "the remote's token is in the history"
        );
        let options = team
            .db
            .query("SELECT options FROM tasks WHERE prompt = 'token task'");
        assert!(
            !format!("{options:?}").contains("tok-5e3cret"),
            "{options:?}"
        );
        // Uncommitted changes too big to carry: refused before anything is made.
        let mut big = vec![0u8; (64 << 20) + 1];
        fastrand::fill(&mut big);
        std::fs::write(team.ws.path().join("big.bin"), &big).unwrap();
        let dirty = run(&["--temporal", &team.temporal.address], true);
        std::fs::remove_file(team.ws.path().join("big.bin")).unwrap();
        assert_eq!(dirty.code, 2, "{dirty:?}");
        assert!(
            dirty.stderr.contains("uncommitted changes come to"),
            "{dirty:?}"
        );
        let apply_here = Run::of(
            team.command()
                .args(["run", "--apply", "x"])
                .output()
                .unwrap(),
        );
        assert_eq!(apply_here.code, 2, "{apply_here:?}");
        assert!(
            apply_here.stderr.contains("goes with --remote"),
            "{apply_here:?}"
        );
        // Only the start the server refused made a task, and it says why it never ran.
        let tasks = team
            .db
            .query("SELECT status, summary FROM tasks WHERE prompt <> 'token task'");
        assert_eq!(tasks.len(), 1, "{tasks:?}");
        assert_eq!(tasks[0][0].as_deref(), Some("failed"));
        assert!(
            tasks[0][1].as_deref().unwrap_or("").contains("not started"),
            "{tasks:?}"
        );
        // A worker with a wrong namespace stops, saying so.
        let w = Run::of(
            team.command()
                .args([
                    "worker",
                    "--temporal",
                    &team.temporal.address,
                    "--namespace",
                    "nope",
                ])
                .output()
                .unwrap(),
        );
        assert_eq!(w.code, 1, "{w:?}");
        assert!(w.stderr.contains("nope"), "{w:?}");
    }
}

/// A workspace whose own `.git/config` names programs (a clean filter for every file, an
/// fsmonitor): `rawko run --remote` builds the patch of its uncommitted changes with git, and
/// git runs none of them. The client stops later for want of a team store; the patch came first.
#[cfg(feature = "temporal")]
#[test]
fn a_hostile_repositorys_git_config_runs_nothing_when_its_changes_are_sent() {
    use crate::support::{Workspace, rawko};
    let ws = Workspace::new();
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(args)
            .current_dir(ws.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
    };
    ws.write(".gitignore", ".test-config/\n.test-data/\n");
    ws.write("a.txt", "one\n");
    git(&["init", "-q"]);
    git(&["add", "-A"]);
    git(&["commit", "-qm", "one"]);
    let marker = ws.path().join("pwned");
    let filter = format!("touch {}", marker.display());
    git(&["config", "filter.evil.clean", &filter]);
    git(&["config", "filter.evil.smudge", &filter]);
    git(&["config", "diff.evil.textconv", &filter]);
    ws.write(".gitattributes", "* filter=evil diff=evil\n");
    ws.write("a.txt", "two\n");
    ws.write("new.txt", "new\n");
    let r = crate::support::Run::of(
        rawko(&ws)
            .args(["run", "--remote", "--temporal", "127.0.0.1:9", "a task"])
            .env_remove("RAWKO_STORE_URL")
            .output()
            .unwrap(),
    );
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("needs the team store"), "{r:?}");
    assert!(!marker.exists(), "the repository's filter ran");
}

/// A build without Temporal says how to get one that has it.
#[cfg(not(feature = "temporal"))]
#[test]
fn a_build_without_temporal_says_so() {
    let ws = crate::support::Workspace::new();
    let r = crate::support::run(&ws, &["worker"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("--features temporal"), "{r:?}");
    let r = crate::support::run(&ws, &["run", "--remote", "x"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("built without it"), "{r:?}");
}
