//! `rawko ui` in headless Chromium over WebDriver: the task page's graph, timeline and steps for
//! the demo's task and for a task that was killed and resumed with a denied command, a model's
//! markup shown as text, live updates without reload, a page reconnecting to the next `rawko
//! ui`, no request leaving the page's own origin, and the first paint of a 500-step task; and
//! every Mermaid text rawko draws rendered by Mermaid itself. Screenshots go to
//! target/ui-screens/. Without `chromium` and `chromedriver` (or Mermaid's script, which
//! `.ci/run` fetches) these tests say so and pass, unless `CI` is set.

use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::json;

use crate::support::model_server::openai;
use crate::support::{
    Run, TEST_KEY, Workspace, demo_task, rawko, run, running_task, scripted_worker, start_worker,
    store_path,
};
use crate::ui::{HOSTILE, Ui, hostile_task};

/// A chromedriver on a free loopback port, and a headless Chromium session through it.
struct Browser {
    rt: tokio::runtime::Runtime,
    driver: Child,
    client: Option<Client>,
}

impl Drop for Browser {
    fn drop(&mut self) {
        if let Some(c) = self.client.take() {
            let _ = self.rt.block_on(c.close());
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

fn which(name: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(name).is_file()))
}

/// The browser, or None (after saying why) when chromium or chromedriver is missing outside CI.
fn browser() -> Option<Browser> {
    let chromium = ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|b| which(b));
    if chromium.is_none() || !which("chromedriver") {
        let why = "chromium and chromedriver are needed for the browser tests (Debian: apt-get install chromium chromium-driver)";
        assert!(std::env::var_os("CI").is_none(), "{why}");
        eprintln!("skipped: {why}");
        return None;
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let driver = Command::new("chromedriver")
        .args([format!("--port={port}"), "--allowed-ips=127.0.0.1".into()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "chromedriver did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let mut b = Browser {
        rt,
        driver,
        client: None,
    };
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({"args": [
            "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-dev-shm-usage", "--window-size=1400,1000", "--no-first-run",
            "--disable-component-update", "--disable-sync", "--disable-default-apps"
        ]}),
    );
    let client =
        b.rt.block_on(
            ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
                .capabilities(caps)
                .connect(&format!("http://127.0.0.1:{port}")),
        )
        .expect("a Chromium session");
    b.client = Some(client);
    Some(b)
}

impl Browser {
    fn c(&self) -> &Client {
        self.client.as_ref().unwrap()
    }

    fn js(&self, script: &str) -> serde_json::Value {
        self.rt.block_on(self.c().execute(script, vec![])).unwrap()
    }

    /// Wait until `script` returns true, for up to `limit`.
    fn until(&self, script: &str, limit: Duration) -> Duration {
        let start = Instant::now();
        loop {
            if self.js(script) == json!(true) {
                return start.elapsed();
            }
            assert!(start.elapsed() < limit, "not true in {limit:?}: {script}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn screenshot(&self, name: &str) -> PathBuf {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/ui-screens");
        let dir = std::env::var_os("CARGO_TARGET_DIR")
            .map(|t| PathBuf::from(t).join("ui-screens"))
            .unwrap_or(dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, self.rt.block_on(self.c().screenshot()).unwrap()).unwrap();
        eprintln!("screenshot: {}", path.display());
        path
    }

    fn click(&self, css: &str) {
        self.rt
            .block_on(async { self.c().find(Locator::Css(css)).await?.click().await })
            .unwrap();
    }

    /// Open a task's page and wait until its timeline is drawn; the task's JSON.
    fn open_task(&self, ui: &Ui, id: &str) -> serde_json::Value {
        self.rt
            .block_on(self.c().goto(&ui.url(&format!("/task/{id}"))))
            .unwrap();
        self.until(
            "return document.querySelectorAll('#main .timeline .turn').length > 0",
            Duration::from_secs(5),
        );
        ui.json(&format!("/api/task/{id}"))
    }

    /// The graph shows the path (its steps numbered on the edges), and the timeline one row
    /// per state.
    fn path_and_rows(&self, task: &serde_json::Value) {
        let steps = self.js(
            "return [...document.querySelectorAll('.graph svg .step')].map(e => e.dataset.step)",
        );
        let transitions = task["transitions"].as_array().unwrap().len();
        assert!(
            steps.as_array().unwrap().len() >= transitions.min(1),
            "{steps} for {transitions} transitions"
        );
        let states = task["turns"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["parent_id"].is_null())
            .count();
        assert_eq!(
            self.js("return document.querySelectorAll('#main .timeline .turn').length"),
            json!(states)
        );
    }

    /// Every resource the page loaded came from its own origin.
    fn only_own_origin(&self) {
        let foreign = self.js(
            "return performance.getEntriesByType('resource').map(e => e.name)\
             .filter(n => new URL(n).origin !== location.origin)",
        );
        assert_eq!(foreign, json!([]), "requests to other origins");
        let count = self.js("return performance.getEntriesByType('resource').length");
        assert!(count.as_u64().unwrap() >= 2, "{count}");
    }
}

#[test]
fn ui_browser_task_page_shows_path_timeline_steps_and_markup_as_text() {
    let Some(b) = browser() else { return };
    let (ws, id) = hostile_task();
    let ui = Ui::start(rawko(&ws));
    b.rt.block_on(b.c().goto(&ui.url("/"))).unwrap();
    b.until(
        "return document.querySelectorAll('table.tasks a').length === 1",
        Duration::from_secs(5),
    );
    b.screenshot("tasks");
    let task = b.open_task(&ui, &id);
    // The graph: SVG built by rawko, the path's edges numbered; one row per state.
    b.path_and_rows(&task);
    let edges = b.js("return document.querySelectorAll('.graph svg .step').length");
    assert!(edges.as_u64().unwrap() > 0, "{edges}");
    // Opening a step shows its tool calls.
    b.click("#main .timeline .turn-label");
    b.until(
        "return document.querySelectorAll('.details .call').length > 0",
        Duration::from_secs(5),
    );
    // The model's markup is text: no script ran, no element was made of it.
    assert_eq!(
        b.js("return document.querySelectorAll('img').length"),
        json!(0)
    );
    assert_eq!(
        b.js("return document.querySelectorAll('script').length"),
        json!(1)
    );
    assert_eq!(
        b.js("return typeof window.alert_called"),
        json!("undefined")
    );
    let shown = b.js("return document.querySelector('.task-head .summary').textContent");
    assert_eq!(shown, json!(HOSTILE));
    assert!(
        b.js("return document.body.textContent")
            .as_str()
            .unwrap()
            .contains(HOSTILE)
    );
    b.only_own_origin();
    b.screenshot("task-hostile");
}

#[test]
fn ui_browser_live_page_follows_a_running_task_without_reload() {
    let Some(b) = browser() else { return };
    let (ws, _server, mut run, id) = running_task(Duration::from_secs(4));
    let ui = Ui::start(rawko(&ws));
    b.open_task(&ui, &id);
    assert!(
        b.js("return document.querySelector('.facts').textContent")
            .as_str()
            .unwrap()
            .starts_with("running")
    );
    b.js("window.notReloaded = true; return true");
    // The Read call commits first: the page shows it, and then the task's end.
    b.until(
        "return [...document.querySelectorAll('.bar.tool')].some(e => e.title.startsWith('Read'))",
        Duration::from_secs(5),
    );
    let status = run.wait().unwrap();
    assert!(status.success());
    let took = b.until(
        "return document.querySelector('.facts').textContent.startsWith('done')",
        Duration::from_secs(3),
    );
    assert!(
        took < Duration::from_secs(1),
        "the page followed the end in {took:?}"
    );
    assert_eq!(b.js("return window.notReloaded === true"), json!(true));
    b.only_own_origin();
    b.screenshot("task-live");
    let _ = store_path(&ws);
}

#[test]
fn ui_browser_first_paint_of_a_500_step_task_is_under_a_second() {
    let Some(b) = browser() else { return };
    let (ws, id) = hostile_task();
    // Grow the task to 500 steps, each with a model call and a tool call.
    let db = rusqlite::Connection::open(store_path(&ws)).unwrap();
    db.execute_batch(&format!(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 499)
         INSERT INTO turns (task_id, agent, started_at, ended_at, outcome, summary, iterations)
           SELECT '{id}', 'worker', 1700000000000 + i * 1000, 1700000000000 + i * 1000 + 800,
                  'success', 'step ' || i, 1 FROM n;
         INSERT INTO transitions (task_id, from_state, to_state, event, mode, reason, at)
           SELECT '{id}', 'worker', 'worker', 'success', 'fixed', 'again', started_at
           FROM turns WHERE task_id = '{id}' AND summary LIKE 'step %';
         INSERT INTO model_calls (turn_id, adapter, model, attempt, outcome, started_at, ended_at)
           SELECT id, 'scripted', 'm', 0, 'ok', started_at, started_at + 500
           FROM turns WHERE task_id = '{id}' AND summary LIKE 'step %';
         INSERT INTO tool_calls (turn_id, call_id, tool, input, output, is_error, verdict, duration_us, at)
           SELECT id, 'c', 'Read', '{{}}', 'text', 0, 'allowed', 200000, started_at + 700
           FROM turns WHERE task_id = '{id}' AND summary LIKE 'step %';
         UPDATE tasks SET steps = 500 WHERE id = '{id}';"
    ))
    .unwrap();
    let ui = Ui::start(rawko(&ws));
    b.rt.block_on(b.c().goto(&ui.url(&format!("/task/{id}"))))
        .unwrap();
    b.until(
        "return document.querySelectorAll('#main .timeline .turn').length === 500",
        Duration::from_secs(10),
    );
    let paint = b.js("const p = performance.getEntriesByType('paint'); \
         const e = p.find(e => e.name === 'first-contentful-paint') || p[0]; \
         return e ? e.startTime : null");
    let ready = b.js("return performance.now()");
    eprintln!("500-step task page: first paint {paint} ms, timeline drawn by {ready} ms");
    assert!(paint.as_f64().unwrap() < 1000.0, "{paint}");
    b.screenshot("task-500-steps");
}

#[test]
fn ui_browser_the_demo_task_shows_its_path_rows_and_tool_calls() {
    let Some(b) = browser() else { return };
    let data = Workspace::new();
    let demo = demo_task(&data);
    let mut cmd = rawko(&data);
    cmd.arg("--workspace").arg(&demo.workspace);
    let ui = Ui::start(cmd);
    let task = b.open_task(&ui, &demo.id);
    assert!(task["transitions"].as_array().unwrap().len() >= 2, "{task}");
    b.path_and_rows(&task);
    let steps = b.js("return document.querySelectorAll('.graph svg .step').length");
    assert!(steps.as_u64().unwrap() >= 2, "{steps}");
    // Each state opens to its tool calls.
    b.click("#main .timeline .turn-label");
    b.until(
        "return document.querySelectorAll('.details .call').length > 0",
        Duration::from_secs(5),
    );
    b.only_own_origin();
    b.screenshot("task-demo");
}

const LIMITED: &str = "name: worker
whenToUse: Does the work.
systemPrompt: You work.
tools:
  allowed: [Bash]
  bashFilter:
    allowedCommands: [\"echo *\"]
transitions:
  onSuccess: done
  onFailure: failed
";

/// A task whose model asked for a command its agent may not run (denied), then one it may, and
/// whose runner was killed (SIGKILL) while the model thought, then resumed to the end.
fn killed_and_resumed_task_with_a_denied_command() -> (Workspace, String) {
    let (ws, server) = scripted_worker("");
    std::fs::write(ws.config_home().join("rawko/agents/worker.yaml"), LIMITED).unwrap();
    let bash =
        |id: &str, command: &str| openai::tool_call(id, "Bash", &json!({ "command": command }));
    server.push(bash("c0", "curl -s http://198.51.100.7/x"));
    server.push(bash("c1", "echo one >> runs.log"));
    let finish = openai::tool_call(
        "c2",
        "finish",
        &json!({"status": "success", "summary": "one ran, curl did not"}),
    );
    server.push(finish.clone().delay(Duration::from_secs(30)));
    let (mut child, id) = start_worker(rawko(&ws), &["run echo, and curl if you can"]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while server.hits() < 3 {
        assert!(
            Instant::now() < deadline,
            "the third model request never came"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    server.push(finish);
    let r = Run::of(
        rawko(&ws)
            .env("TEST_KEY", TEST_KEY)
            .args(["resume", &id, "--json"])
            .output()
            .unwrap(),
    );
    assert_eq!(r.code, 0, "{r:?}");
    (ws, id)
}

#[test]
fn ui_browser_a_killed_and_resumed_task_shows_the_resume_and_the_denial() {
    let Some(b) = browser() else { return };
    let (ws, id) = killed_and_resumed_task_with_a_denied_command();
    let ui = Ui::start(rawko(&ws));
    let task = b.open_task(&ui, &id);
    assert_eq!(task["runs"].as_array().unwrap().len(), 2, "{task}");
    b.path_and_rows(&task);
    // Where the second run resumed it, and the denied call, each marked.
    assert_eq!(
        b.js("return [...document.querySelectorAll('.timeline .resume-mark')].map(e => e.textContent)"),
        json!(["resumed (run 2)"])
    );
    let denials =
        b.js("return [...document.querySelectorAll('.timeline .denial-mark')].map(e => e.title)");
    let denials = denials.as_array().unwrap();
    assert_eq!(denials.len(), 1, "{denials:?}");
    assert!(
        denials[0].as_str().unwrap().starts_with("Bash: denied"),
        "{denials:?}"
    );
    // The state opens to both calls: the denied one with its verdict, and the one that ran.
    b.click("#main .timeline .turn-label");
    b.until(
        "return document.querySelectorAll('.details .call').length >= 2",
        Duration::from_secs(5),
    );
    let details = b.js("return document.querySelector('.details').textContent");
    let details = details.as_str().unwrap();
    assert!(
        details.contains("curl -s http://198.51.100.7/x"),
        "{details}"
    );
    assert!(details.contains("denied"), "{details}");
    assert!(details.contains("echo one >> runs.log"), "{details}");
    b.only_own_origin();
    b.screenshot("task-resumed-denied");
}

#[test]
fn ui_browser_a_page_left_open_reconnects_to_the_next_rawko_ui() {
    let Some(b) = browser() else { return };
    let (ws, _server, mut run, id) = running_task(Duration::from_secs(2));
    let first = Ui::start(rawko(&ws));
    let (port, token) = (first.port, first.token.clone());
    b.open_task(&first, &id);
    b.js("window.notReloaded = true; return true");
    b.until(
        "return [...document.querySelectorAll('.bar.tool')].some(e => e.title.startsWith('Read'))",
        Duration::from_secs(5),
    );
    // `rawko ui` stops: the page says so. The task ends while nothing serves the page.
    drop(first);
    b.until(
        "return !document.getElementById('stopped').hidden",
        Duration::from_secs(5),
    );
    assert!(run.wait().unwrap().success());
    // The next `rawko ui` of the workspace serves the same URL; the page finds it and shows
    // what was committed meanwhile, without a reload.
    let again = Ui::start_with(rawko(&ws), &[]);
    assert_eq!((again.port, again.token.as_str()), (port, token.as_str()));
    let took = b.until(
        "return document.querySelector('.facts').textContent.startsWith('done') \
         && document.getElementById('stopped').hidden",
        Duration::from_secs(5),
    );
    eprintln!("the page reconnected and caught up in {took:?}");
    assert_eq!(b.js("return window.notReloaded === true"), json!(true));
    b.only_own_origin();
}

/// Mermaid's own script (the `mermaid` npm package's `dist/mermaid.min.js`), which `.ci/run`
/// fetches into target/ci-tools/mermaid; `RAWKO_TEST_MERMAID_JS` names another.
fn mermaid_js() -> Option<PathBuf> {
    let path = std::env::var_os("RAWKO_TEST_MERMAID_JS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../target/ci-tools/mermaid/package/dist/mermaid.min.js")
        });
    if path.is_file() {
        return Some(path.canonicalize().unwrap());
    }
    let why = format!(
        "Mermaid's script is needed to render the graphs ({}; `.ci/run` fetches it)",
        path.display()
    );
    assert!(std::env::var_os("CI").is_none(), "{why}");
    eprintln!("skipped: {why}");
    None
}

#[test]
fn ui_browser_mermaid_renders_every_graph_rawko_draws() {
    let Some(js) = mermaid_js() else { return };
    let Some(b) = browser() else { return };
    let ok = |ws: &Workspace, args: &[&str]| {
        let r = run(ws, args);
        assert_eq!(r.code, 0, "{args:?}: {r:?}");
        r.stdout
    };
    let plain = Workspace::new();
    let foreign = crate::graphs::foreign_workspace();
    let (task_ws, task) = killed_and_resumed_task_with_a_denied_command();
    let llm = Workspace::new();
    llm.write(".test-config/rawko/config.yaml", "arbiter:\n  mode: llm\n");
    let graphs = [
        ("the built-in agents", ok(&plain, &["agents", "graph"])),
        (
            "the reviewer under the LLM arbiter",
            ok(&llm, &["agents", "graph", "--agent", "reviewer"]),
        ),
        (
            "kodelet and Claude Code agents",
            ok(&foreign, &["agents", "graph", "--agent", "lead"]),
        ),
        (
            "a workspace's whole graph",
            ok(&foreign, &["agents", "graph"]),
        ),
        (
            "a killed and resumed task's path",
            ok(&task_ws, &["tasks", "show", &task, "--format", "mermaid"]),
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("mermaid.html");
    std::fs::write(
        &page,
        format!(
            "<!doctype html><meta charset=\"utf-8\"><script src=\"file://{}\"></script><body></body>",
            js.display()
        ),
    )
    .unwrap();
    b.rt.block_on(b.c().goto(&format!("file://{}", page.display())))
        .unwrap();
    let texts: Vec<&str> = graphs.iter().map(|(_, t)| t.as_str()).collect();
    let rendered =
        b.rt.block_on(b.c().execute_async(
            "const [texts, done] = arguments;
             (async () => {
               mermaid.initialize({ startOnLoad: false, securityLevel: 'strict' });
               const out = [];
               for (const [i, text] of texts.entries()) {
                 try {
                   const { svg } = await mermaid.render('graph' + i, text);
                   out.push({ svg });
                 } catch (e) {
                   out.push({ error: String((e && e.message) || e) });
                 }
               }
               done(out);
             })();",
            vec![json!(texts)],
        ))
        .unwrap();
    for ((what, text), got) in graphs.iter().zip(rendered.as_array().unwrap()) {
        assert!(
            got["error"].is_null(),
            "{what}: Mermaid says {}\n{text}",
            got["error"]
        );
        let svg = got["svg"].as_str().unwrap();
        assert!(svg.starts_with("<svg"), "{what}: {svg}");
        // Each node rawko named is on the drawing.
        for name in ["planner", "lead", "worker"] {
            if text.contains(name) {
                assert!(svg.contains(name), "{what}: no {name} in {svg}");
            }
        }
        assert!(!svg.contains("Syntax error"), "{what}: {svg}");
    }
}
