//! Hot reload: files edited, broken, fixed, deleted and created while a watcher runs, in
//! process (to inspect the registry between reloads) and through `rawko agents watch`.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, atomic::AtomicBool, atomic::Ordering};
use std::time::{Duration, Instant};

use rawko_agents::registry::{Registry, SearchPath, Status};
use rawko_agents::watch::{ChangeKind, ReloadEvent, Report, Watcher};

use crate::support::{Workspace, rawko};

/// Generous: a bound on a broken watcher, not a performance claim.
const PATIENCE: Duration = Duration::from_secs(30);

struct Harness {
    ws: Workspace,
    watcher: Watcher,
    reports: Receiver<Report>,
}

impl Harness {
    fn start(ws: Workspace) -> Harness {
        // Agents are read against the host's tools, as the binary reads them.
        rawko_toolset::host::install_catalogue();
        let search = SearchPath::standard(ws.path(), &ws.config_home().join("rawko"));
        let (tx, reports) = mpsc::channel();
        let watcher = Watcher::start(search, move |r| {
            let _ = tx.send(r);
        })
        .expect("watcher starts");
        Harness {
            ws,
            watcher,
            reports,
        }
    }

    /// Wait until the registry satisfies `ready`; fails after [`PATIENCE`].
    fn wait_until(&self, what: &str, ready: impl Fn(&Registry) -> bool) {
        let deadline = Instant::now() + PATIENCE;
        let shared = self.watcher.registry();
        while !ready(&shared.snapshot()) {
            let left = deadline
                .checked_duration_since(Instant::now())
                .unwrap_or_else(|| panic!("never: {what}"));
            let _ = self
                .reports
                .recv_timeout(left.min(Duration::from_millis(500)));
        }
    }

    /// Wait for a reload with a change of `kind` to `name`; fails after [`PATIENCE`].
    fn wait_for(&self, name: &str, kind: ChangeKind) -> ReloadEvent {
        let deadline = Instant::now() + PATIENCE;
        let mut seen = Vec::new();
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.reports.recv_timeout(left) {
                Ok(Report::Reload(ev)) => {
                    if ev.changes.iter().any(|c| c.name == name && c.kind == kind) {
                        return ev;
                    }
                    seen.push(ev);
                }
                Ok(Report::Warning { message }) => panic!("watcher warning: {message}"),
                Err(_) => break,
            }
        }
        panic!("no {kind:?} for {name}; reloads seen: {seen:#?}");
    }
}

fn agent(name: &str, version: u32) -> String {
    format!(
        "name: {name}\nwhenToUse: version {version}\nsystemPrompt: version {version}\ntransitions:\n  onSuccess: done\n"
    )
}

/// Create a file whole: write it under a name agents are not read from, then rename it.
fn save_new(ws: &Workspace, rel: &str, text: &str) {
    let path = ws.path().join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    save(&path, text);
}

/// Replace a file the way editors do: write a temporary file, then rename it over the old.
fn save(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp~");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

#[test]
fn edit_break_fix_delete_and_create_while_watching() {
    let ws = Workspace::new();
    ws.write(".rawko/agents/helper.yaml", agent("helper", 1));
    let h = Harness::start(ws);
    let shared = h.watcher.registry();
    let v1 = shared.get("helper").expect("loaded at start");
    assert_eq!(v1.system_prompt, "version 1");
    let path = h.ws.path().join(".rawko/agents/helper.yaml");

    // Edit in place (a reload may catch the file half written; it settles on version 2).
    std::fs::write(&path, agent("helper", 2)).unwrap();
    h.wait_until("helper at version 2", |r| {
        r.get("helper")
            .is_some_and(|a| a.system_prompt == "version 2")
            && r.entry("helper").unwrap().status == Status::Ok
    });
    // Work that started with version 1 still has version 1.
    assert_eq!(v1.system_prompt, "version 1");

    // Break it: the last good version stays in use, and the error says where.
    save(
        &path,
        "name: helper\nsystemPrompt: version 3\ntransitions:\n  onSucces: done\n",
    );
    let ev = h.wait_for("helper", ChangeKind::Kept);
    let messages: Vec<String> = ev.diagnostics.iter().map(|d| d.to_string()).collect();
    assert!(
        messages.contains(
            &".rawko/agents/helper.yaml:4:3: unknown field 'onSucces' (did you mean 'onSuccess'?)"
                .to_string()
        ),
        "{messages:#?}"
    );
    let snap = shared.snapshot();
    assert_eq!(snap.entry("helper").unwrap().status, Status::Stale);
    assert_eq!(snap.get("helper").unwrap().system_prompt, "version 2");

    // Fix it.
    save(&path, &agent("helper", 4));
    h.wait_for("helper", ChangeKind::Restored);
    assert_eq!(shared.get("helper").unwrap().system_prompt, "version 4");

    // Create another, then delete both: a name the built-ins also define falls back to them.
    save_new(
        &h.ws,
        ".rawko/agents/planner.md",
        "---\nname: planner\ndescription: Mine.\n---\nPlan my way.\n",
    );
    let ev = h.wait_for("planner", ChangeKind::Updated);
    assert_eq!(
        ev.changes
            .iter()
            .find(|c| c.name == "planner")
            .unwrap()
            .file,
        ".rawko/agents/planner.md"
    );
    assert_eq!(shared.get("planner").unwrap().system_prompt, "Plan my way.");

    std::fs::remove_file(&path).unwrap();
    h.wait_for("helper", ChangeKind::Removed);
    assert!(shared.get("helper").is_none());
    std::fs::remove_file(h.ws.path().join(".rawko/agents/planner.md")).unwrap();
    let ev = h.wait_for("planner", ChangeKind::Updated);
    assert_eq!(
        ev.changes
            .iter()
            .find(|c| c.name == "planner")
            .unwrap()
            .file,
        "<builtin>/planner.yaml"
    );
    // Generations only go up.
    assert!(shared.snapshot().generation() >= 6);
}

#[test]
fn an_agents_directory_created_after_the_start_is_picked_up() {
    let ws = Workspace::new();
    let h = Harness::start(ws);
    assert!(h.watcher.registry().get("late").is_none());
    h.ws.write(".rawko/agents/late.yaml", agent("late", 1));
    h.wait_until("late is loaded", |r| r.get("late").is_some());
    // And the user's directory, which did not exist either.
    h.ws.write(
        ".test-config/rawko/agents/mine.md",
        "---\nname: mine\ndescription: d\n---\nMine.\n",
    );
    h.wait_until("mine is loaded", |r| r.get("mine").is_some());
    let snap = h.watcher.registry().snapshot();
    assert_eq!(
        snap.entry("mine").unwrap().file.origin,
        rawko_agents::AgentOrigin::User
    );
}

/// Readers hammer the registry while a writer swaps a whole directory of agents between
/// versions. Every snapshot must hold one version of everything: every workspace agent at the
/// same version, and inside each agent both versioned fields agree.
#[test]
fn the_registry_is_never_half_updated() {
    const AGENTS: u32 = 20;
    const ROUNDS: u32 = 8;
    let ws = Workspace::new();
    let write_version = |dir: &Path, v: u32| {
        std::fs::create_dir_all(dir).unwrap();
        for i in 0..AGENTS {
            std::fs::write(dir.join(format!("a{i}.yaml")), agent(&format!("a{i}"), v)).unwrap();
        }
    };
    let agents_dir = ws.path().join(".rawko/agents");
    write_version(&agents_dir, 0);
    let h = Harness::start(ws);
    let shared = h.watcher.registry();

    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let shared = shared.clone();
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut snapshots = 0u64;
            let mut last_generation = 0;
            let mut versions_seen = std::collections::BTreeSet::new();
            while !stop.load(Ordering::Relaxed) {
                let snap = shared.snapshot();
                assert!(snap.generation() >= last_generation, "generation went back");
                last_generation = snap.generation();
                let mut version = None;
                for a in snap.agents().filter(|a| a.name.starts_with('a')) {
                    let v = a.system_prompt.clone();
                    assert_eq!(a.when_to_use.as_deref(), Some(v.as_str()), "a torn agent");
                    match &version {
                        None => version = Some(v),
                        Some(seen) => {
                            assert_eq!(seen, &v, "agents from two versions in one snapshot")
                        }
                    }
                }
                if let Some(v) = version {
                    versions_seen.insert(v);
                }
                snapshots += 1;
            }
            (snapshots, versions_seen)
        })
    };

    // Each round prepares the next version beside the live directory, then swaps it in with
    // two renames, so on disk the agents are never of mixed versions.
    let rawko_dir = h.ws.path().join(".rawko");
    for round in 1..=ROUNDS {
        let next = rawko_dir.join("next");
        write_version(&next, round);
        std::fs::rename(&agents_dir, rawko_dir.join("old")).unwrap();
        std::fs::rename(&next, &agents_dir).unwrap();
        std::fs::remove_dir_all(rawko_dir.join("old")).unwrap();
        // Wait until this round is live before the next one.
        let want = format!("version {round}");
        let deadline = Instant::now() + PATIENCE;
        while shared.get("a0").is_none_or(|a| a.system_prompt != want) {
            assert!(Instant::now() < deadline, "round {round} never went live");
            let _ = h.reports.recv_timeout(Duration::from_millis(200));
        }
    }
    stop.store(true, Ordering::Relaxed);
    let (snapshots, versions) = reader.join().expect("reader saw only whole registries");
    assert!(snapshots > 0);
    assert!(versions.len() >= 2, "the reader saw {versions:?}");
    let snap = shared.snapshot();
    assert_eq!(
        snap.agents().filter(|a| a.name.starts_with('a')).count(),
        AGENTS as usize
    );
    assert!(
        snap.agents()
            .filter(|a| a.name.starts_with('a'))
            .all(|a| a.system_prompt == format!("version {ROUNDS}"))
    );
}

/// Lines from a child's stdout, read on a thread so the test can wait with a deadline.
fn lines_of(child: &mut Child) -> Receiver<String> {
    let out = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

fn expect_line(lines: &Receiver<String>, what: impl Fn(&str) -> bool, describe: &str) -> String {
    let deadline = Instant::now() + PATIENCE;
    let mut seen = Vec::new();
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match lines.recv_timeout(left) {
            Ok(l) if what(&l) => return l,
            Ok(l) => seen.push(l),
            Err(_) => break,
        }
    }
    panic!("no line {describe}; got: {seen:#?}");
}

#[test]
fn rawko_agents_watch_prints_reloads_and_stops_when_stdin_closes() {
    let ws = Workspace::new();
    ws.write(".rawko/agents/helper.yaml", agent("helper", 1));
    let mut child = rawko(&ws)
        .args(["agents", "watch"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = lines_of(&mut child);
    let ready = expect_line(
        &lines,
        |l| l.starts_with("watching "),
        "saying it is watching",
    );
    assert!(
        ready.contains(".rawko/agents")
            && ready.ends_with(&format!(
                ": {} agents",
                rawko_agents::builtin::AGENTS.len() + 1
            )),
        "{ready}"
    );

    let path = ws.path().join(".rawko/agents/helper.yaml");
    save(&path, &agent("helper", 2));
    expect_line(
        &lines,
        |l| l.ends_with("updated helper from .rawko/agents/helper.yaml"),
        "updating helper",
    );

    save(&path, "name: helper\nsystemPrompt: [\n");
    let kept = expect_line(&lines, |l| l.contains("kept helper"), "keeping helper");
    assert!(
        kept.contains("the last good version stays in use"),
        "{kept}"
    );
    expect_line(
        &lines,
        |l| l.contains(".rawko/agents/helper.yaml:3:1: invalid YAML"),
        "with the YAML error",
    );

    save_new(
        &ws,
        ".rawko/agents/extra.md",
        "---\nname: extra\ndescription: d\n---\nExtra.\n",
    );
    expect_line(
        &lines,
        |l| l.ends_with("added extra from .rawko/agents/extra.md"),
        "adding extra",
    );

    save(&path, &agent("helper", 3));
    expect_line(
        &lines,
        |l| l.ends_with("restored helper from .rawko/agents/helper.yaml"),
        "restoring helper",
    );

    std::fs::remove_file(ws.path().join(".rawko/agents/extra.md")).unwrap();
    expect_line(
        &lines,
        |l| l.ends_with("removed extra (.rawko/agents/extra.md)"),
        "removing extra",
    );

    // Closing stdin stops it cleanly.
    drop(child.stdin.take());
    let (tx, exited) = mpsc::channel();
    std::thread::spawn(move || {
        let status = child.wait();
        if tx.send(status).is_err() {
            // The test gave up; do not leave the process behind.
            let _ = child.kill();
        }
    });
    let status = exited
        .recv_timeout(PATIENCE)
        .expect("watch stops when stdin closes")
        .unwrap();
    assert!(status.success(), "{status:?}");
}

#[test]
fn rawko_agents_watch_json_can_be_killed() {
    let ws = Workspace::new();
    let mut child = rawko(&ws)
        .args(["agents", "watch", "--json"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lines = lines_of(&mut child);
    let ready: serde_json::Value =
        serde_json::from_str(&expect_line(&lines, |l| l.contains("\"ready\""), "ready")).unwrap();
    assert_eq!(ready["agents"], rawko_agents::builtin::AGENTS.len());
    save_new(&ws, ".rawko/agents/new.yaml", &agent("new", 1));
    let line = expect_line(&lines, |l| l.contains("\"reload\""), "a reload");
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["changes"][0]["name"], "new");
    assert_eq!(v["changes"][0]["kind"], "added");
    child.kill().unwrap();
    child.wait().unwrap();
}
