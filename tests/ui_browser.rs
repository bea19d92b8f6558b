//! `rawko ui` in headless Chromium over WebDriver: the task page's graph, timeline and steps,
//! a model's markup shown as text, live updates without reload, no request leaving the page's
//! own origin, and the first paint of a 500-step task. Screenshots go to target/ui-screens/.
//! Without `chromium` and `chromedriver` these tests say so and pass, unless `CI` is set.

use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::json;

use crate::support::model_server::openai;
use crate::support::{rawko, scripted_worker, start_worker, store_path};
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
    b.rt.block_on(b.c().goto(&ui.url(&format!("/task/{id}"))))
        .unwrap();
    b.until(
        "return document.querySelectorAll('#main .timeline .turn').length > 0",
        Duration::from_secs(5),
    );
    // The graph: SVG built by rawko, the path's edges numbered.
    let edges =
        b.js("return [...document.querySelectorAll('.graph svg .step')].map(e => e.dataset.step)");
    assert!(!edges.as_array().unwrap().is_empty(), "{edges}");
    // One row per state.
    let task: serde_json::Value = ui.json(&format!("/api/task/{id}"));
    let states = task["turns"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["parent_id"].is_null())
        .count();
    assert_eq!(
        b.js("return document.querySelectorAll('#main .timeline .turn').length"),
        json!(states)
    );
    // Opening a step shows its tool calls.
    b.rt.block_on(async {
        b.c()
            .find(Locator::Css("#main .timeline .turn-label"))
            .await?
            .click()
            .await
    })
    .unwrap();
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
    let (ws, server) = scripted_worker("");
    ws.write("a.txt", "hello\n");
    server.push(openai::tool_call("c0", "Read", &json!({"path": "a.txt"})));
    server.push(
        openai::tool_call(
            "c1",
            "finish",
            &json!({"status": "success", "summary": "read it"}),
        )
        .delay(Duration::from_secs(4)),
    );
    let (mut run, id) = start_worker(rawko(&ws), &["read a.txt"]);
    let ui = Ui::start(rawko(&ws));
    b.rt.block_on(b.c().goto(&ui.url(&format!("/task/{id}"))))
        .unwrap();
    b.until(
        "return document.querySelectorAll('#main .timeline .turn').length > 0",
        Duration::from_secs(5),
    );
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
