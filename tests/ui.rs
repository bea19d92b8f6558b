//! `rawko ui` through the binary: the page and its data only with the token and this server's
//! own `Host`, a strict Content-Security-Policy on every answer, a task's JSON and graph, a
//! port in use said clearly, a running task's page told of each commit, and (in headless
//! Chromium, required under CI) model output that tries to be markup shown as text.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::model_server::openai;
use crate::support::{Run, TEST_KEY, Workspace, demo_task, rawko, scripted_worker};

/// A model's reply that tries to be markup.
pub const HOSTILE: &str = "<script>alert(1)</script><img src=x onerror=alert(2)>";

/// A workspace with one finished task whose model replied with markup; its id.
pub fn hostile_task() -> (Workspace, String) {
    let (ws, server) = scripted_worker("");
    server.push(openai::tool_call(
        "c0",
        "finish",
        &json!({"status": "success", "summary": HOSTILE}),
    ));
    let r = Run::of(
        rawko(&ws)
            .env("TEST_KEY", TEST_KEY)
            .args(["run", "--agent", "worker", "--json", "--no-stream", HOSTILE])
            .output()
            .unwrap(),
    );
    assert_eq!(r.code, 0, "{r:?}");
    let list = Run::of(
        rawko(&ws)
            .args(["tasks", "list", "--json"])
            .output()
            .unwrap(),
    );
    let id = list.json()[0]["id"].as_str().unwrap().to_string();
    (ws, id)
}

/// A `rawko ui` running in a workspace, stopped on drop.
pub struct Ui {
    child: Child,
    pub port: u16,
    pub token: String,
}

impl Ui {
    /// `rawko ui` on a free port.
    pub fn start(cmd: Command) -> Ui {
        Ui::start_with(cmd, &["--port", "0"])
    }

    /// `rawko ui args...`.
    pub fn start_with(mut cmd: Command, args: &[&str]) -> Ui {
        let mut child = cmd
            .arg("ui")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .unwrap_or_else(|| panic!("no URL in {line:?}"));
        let rest = url.trim_start_matches("http://127.0.0.1:");
        let (port, query) = rest.split_once("/?t=").unwrap();
        Ui {
            child,
            port: port.parse().unwrap(),
            token: query.trim().to_string(),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}?t={}", self.port, self.token)
    }

    /// `method path` with `host` as the Host header: the status, the headers (lower-case
    /// names) and the body.
    fn request(
        &self,
        method: &str,
        path: &str,
        host: &str,
    ) -> (u16, Vec<(String, String)>, String) {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
        )
        .unwrap();
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).unwrap();
        let text = String::from_utf8_lossy(&raw).into_owned();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let mut lines = head.lines();
        let status = lines
            .next()
            .unwrap()
            .split(' ')
            .nth(1)
            .unwrap()
            .parse()
            .unwrap();
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        (status, headers, body.to_string())
    }

    pub fn get(&self, path: &str) -> (u16, Vec<(String, String)>, String) {
        let host = format!("127.0.0.1:{}", self.port);
        self.request("GET", path, &host)
    }

    pub fn json(&self, path: &str) -> serde_json::Value {
        let (status, _, body) = self.get(&format!("{path}?t={}", self.token));
        assert_eq!(status, 200, "{path}: {body}");
        // A chunked body: the JSON is its middle line.
        let json = body
            .lines()
            .find(|l| l.starts_with('{') || l.starts_with('['))
            .unwrap_or_else(|| panic!("{path}: {body}"));
        serde_json::from_str(json).unwrap()
    }
}

impl Drop for Ui {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

#[test]
fn the_page_answers_only_its_token_and_its_host() {
    let data = Workspace::new();
    let demo = demo_task(&data);
    let mut cmd = rawko(&data);
    cmd.arg("--workspace").arg(&demo.workspace);
    let ui = Ui::start(cmd);
    let t = ui.token.clone();
    let here = format!("127.0.0.1:{}", ui.port);

    // Without the token, with another one, or for another host name: refused, assets too.
    for (path, host, want) in [
        ("/".to_string(), here.clone(), 401),
        ("/?t=0123".to_string(), here.clone(), 401),
        (format!("/?t={}", "0".repeat(32)), here.clone(), 401),
        ("/app.js".to_string(), here.clone(), 401),
        (format!("/api/task/{}/events", demo.id), here.clone(), 401),
        (format!("/?t={t}"), "evil.example".to_string(), 421),
        (format!("/?t={t}"), format!("evil.example:{}", ui.port), 421),
        (format!("/api/tasks?t={t}"), "127.0.0.1:1".to_string(), 421),
    ] {
        let (status, headers, body) = ui.request("GET", &path, &host);
        assert_eq!(status, want, "{path} as {host}: {body}");
        assert!(!body.contains(&demo.id), "{path} as {host}: {body}");
        assert!(header(&headers, "content-security-policy").is_some());
    }
    // Read-only: nothing but GET.
    let (status, _, _) = ui.request("POST", &format!("/api/tasks?t={t}"), &here);
    assert_eq!(status, 405);

    // With both: the page, whose policy allows its own script and nothing else.
    let (status, headers, body) = ui.get(&format!("/?t={t}"));
    assert_eq!(status, 200, "{body}");
    let csp = header(&headers, "content-security-policy").unwrap();
    for part in [
        "default-src 'none'",
        "script-src 'self'",
        "connect-src 'self'",
    ] {
        assert!(csp.contains(part), "{csp}");
    }
    assert!(
        !csp.contains("unsafe-inline") && !csp.contains("http"),
        "{csp}"
    );
    assert_eq!(header(&headers, "x-content-type-options"), Some("nosniff"));
    assert!(body.contains(&format!("/app.js?t={t}")), "{body}");
    assert!(
        !body.contains("<script>") && !body.contains("http"),
        "{body}"
    );
    let (status, _, _) = ui.request(
        "GET",
        &format!("/?t={t}"),
        &format!("localhost:{}", ui.port),
    );
    assert_eq!(status, 200);

    // The data: the workspace's tasks, and one task with its path drawn.
    let tasks = ui.json("/api/tasks");
    assert_eq!(tasks[0]["id"], demo.id.as_str(), "{tasks}");
    let task = ui.json(&format!("/api/task/{}", demo.id));
    assert_eq!(task["task"]["status"], "done");
    let agents: Vec<&str> = task["turns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["agent"].as_str().unwrap())
        .collect();
    assert_eq!(agents, ["planner", "developer", "tester", "reviewer"]);
    let svg = task["graph"].as_str().unwrap();
    assert!(
        svg.starts_with("<svg") && svg.contains("data-step=\"5\""),
        "{svg}"
    );
    assert!(
        task["changes"][0]["input"]["path"] == "src/lib.rs",
        "{task}"
    );
    let (status, _, _) = ui.get(&format!("/api/task/nosuchtask?t={t}"));
    assert_eq!(status, 404);
}

#[test]
fn a_port_in_use_is_said_clearly() {
    let ws = Workspace::new();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let r = Run::of(
        rawko(&ws)
            .args(["ui", "--port", &port])
            .stdin(Stdio::null())
            .output()
            .unwrap(),
    );
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr
            .contains(&format!("port {port} on 127.0.0.1 is in use")),
        "{r:?}"
    );
}

/// A running task's event stream says `change` within a second of each commit.
#[test]
fn a_running_tasks_page_is_told_of_each_commit() {
    let (ws, server, mut run, id) = crate::support::running_task(Duration::from_secs(2));
    let ui = Ui::start(rawko(&ws));
    let mut s = TcpStream::connect(("127.0.0.1", ui.port)).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    write!(
        s,
        "GET /api/task/{id}/events?t={} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAccept: text/event-stream\r\n\r\n",
        ui.token, ui.port
    )
    .unwrap();
    // Wait until the model is asked for the reply that ends the task; it is committed when it
    // arrives, 2 s later.
    let deadline = Instant::now() + Duration::from_secs(60);
    while server.hits() < 2 {
        assert!(
            Instant::now() < deadline,
            "the second model call never came"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // When the server had the request: its reply leaves 2 s after that, however late this
    // thread saw the request arrive.
    let asked = server.received()[1].at;
    // Each change event, with when it came after the reply was asked for.
    let mut changes: Vec<Duration> = Vec::new();
    let mut seen = String::new();
    let mut buf = [0u8; 4096];
    let mut ended: Option<Instant> = None;
    while ended.is_none_or(|e| e.elapsed() < Duration::from_secs(1)) {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                let chunk = String::from_utf8_lossy(&buf[..n]).into_owned();
                for _ in chunk.matches("event: change") {
                    changes.push(asked.elapsed());
                }
                seen.push_str(&chunk);
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) => panic!("{e}"),
        }
        if ended.is_none() && run.try_wait().unwrap().is_some() {
            ended = Some(Instant::now());
        }
        assert!(asked.elapsed() < Duration::from_secs(30), "{seen}");
    }
    let out = run.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    // The reply arrives 2 s after it was asked for and is committed at once: the page is told
    // within a second of that.
    assert!(
        changes
            .iter()
            .any(|t| *t >= Duration::from_millis(1900) && *t <= Duration::from_millis(3000)),
        "{changes:?}: {seen}"
    );
}

#[test]
fn the_next_rawko_ui_serves_the_same_url_unless_its_port_was_taken() {
    use std::os::unix::fs::PermissionsExt as _;
    let ws = Workspace::new();
    let first = Ui::start(rawko(&ws));
    let (port, token) = (first.port, first.token.clone());
    drop(first);
    let kept = crate::support::store_path(&ws).with_file_name("ui");
    let mode = std::fs::metadata(&kept).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "{}", kept.display());

    // Started again: the same port and token, so a page left open finds it.
    let again = Ui::start_with(rawko(&ws), &[]);
    assert_eq!((again.port, again.token.as_str()), (port, token.as_str()));
    let (status, _, _) = again.get(&format!("/api/tasks?t={token}"));
    assert_eq!(status, 200);
    drop(again);

    // Its port taken by another program: a free one, with a new token.
    let squatter = std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
    let third = Ui::start_with(rawko(&ws), &[]);
    assert_ne!(third.port, port);
    assert_ne!(third.token, token);
    drop(third);
    drop(squatter);

    // A kept token that others may read is not used again.
    let fourth = Ui::start_with(rawko(&ws), &[]);
    let token = fourth.token.clone();
    drop(fourth);
    std::fs::set_permissions(&kept, std::fs::Permissions::from_mode(0o644)).unwrap();
    let fifth = Ui::start_with(rawko(&ws), &[]);
    assert_ne!(
        fifth.token, token,
        "a token others could read was used again"
    );
    let token = fifth.token.clone();
    drop(fifth);
    let mode = std::fs::metadata(&kept).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "written again for its owner alone");

    // Nor one in a file another user owns (planted by them, private or not); as root the test
    // can make one, otherwise it cannot and skips this part.
    if std::os::unix::fs::chown(&kept, Some(65534), Some(65534)).is_ok() {
        let planted = Ui::start_with(rawko(&ws), &[]);
        assert_ne!(planted.token, token, "another user's token file was used");
        drop(planted);
    }

    // A file that is not what rawko wrote is ignored: a free port and a fresh token.
    std::fs::write(&kept, "80 <script>\n").unwrap();
    let sixth = Ui::start_with(rawko(&ws), &[]);
    assert_ne!(sixth.port, 80);
    assert_eq!(sixth.token.len(), 32);
}
