//! Real services on loopback for the plugin distribution tests: the CNCF distribution registry
//! (Debian's `docker-registry`), the real `minisign`, and a small HTTP server that misbehaves on
//! purpose (short bodies, errors, stalls).
//!
//! Programs that are missing are installed with apt-get when the tests run as root (as CI does,
//! on a clean machine); otherwise the test fails saying what to install.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/bin")])
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// The path of `program`, installing Debian package `package` if it is missing.
pub fn require_program(program: &str, package: &str) -> PathBuf {
    static LOCK: Mutex<()> = Mutex::new(());
    let _held = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = which(program) {
        return p;
    }
    let apt = |args: &[&str]| {
        Command::new("apt-get")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    let installed = apt(&["install", "-y", "-qq", package])
        || (apt(&["update", "-qq"]) && apt(&["install", "-y", "-qq", package]));
    match which(program) {
        Some(p) if installed => p,
        _ => panic!(
            "these tests need `{program}`; install it with `apt-get install {package}` (as root)"
        ),
    }
}

/// A free port on 127.0.0.1 (free when asked; the caller binds it right away).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// A CNCF distribution registry on 127.0.0.1 with its storage in a temporary directory, stopped
/// when dropped.
pub struct Registry {
    child: Child,
    /// `127.0.0.1:PORT` or `[::1]:PORT`.
    pub addr: String,
    _dir: tempfile::TempDir,
}

impl Registry {
    pub fn start() -> Registry {
        Registry::start_on("127.0.0.1")
    }

    /// A registry listening on `host` (`127.0.0.1`, or `[::1]` for IPv6 loopback).
    pub fn start_on(host: &str) -> Registry {
        let bin = require_program("docker-registry", "docker-registry");
        let dir = tempfile::tempdir().expect("tempdir");
        let port = free_port();
        let addr = format!("{host}:{port}");
        let config = dir.path().join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: \"{addr}\"\n",
                dir.path().join("storage").display()
            ),
        )
        .unwrap();
        let child = Command::new(bin)
            .arg("serve")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start docker-registry");
        let mut registry = Registry {
            child,
            addr,
            _dir: dir,
        };
        registry.wait_ready();
        registry
    }

    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("docker-registry exited at start: {status}");
            }
            if http_status(&self.addr, "/v2/") == Some(200) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!(
            "docker-registry did not answer on {} within 20 s",
            self.addr
        );
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The status code of `GET path` on `addr`, if it answers.
fn http_status(addr: &str, path: &str) -> Option<u16> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line).ok()?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// A minisign key pair made by the real `minisign`, without a password.
pub struct Minisign {
    pub public: PathBuf,
    secret: PathBuf,
}

impl Minisign {
    pub fn generate(dir: &Path, name: &str) -> Minisign {
        let bin = require_program("minisign", "minisign");
        let public = dir.join(format!("{name}.pub"));
        let secret = dir.join(format!("{name}.key"));
        let out = Command::new(bin)
            .args(["-G", "-W", "-p"])
            .arg(&public)
            .arg("-s")
            .arg(&secret)
            .stdin(Stdio::null())
            .output()
            .expect("run minisign -G");
        assert!(out.status.success(), "minisign -G: {out:?}");
        Minisign { public, secret }
    }

    /// Sign `file` into `file.minisig`.
    pub fn sign(&self, file: &Path) -> PathBuf {
        let bin = require_program("minisign", "minisign");
        let out = Command::new(bin)
            .args(["-S", "-s"])
            .arg(&self.secret)
            .arg("-m")
            .arg(file)
            .args(["-t", "signed by the rawko tests"])
            .stdin(Stdio::null())
            .output()
            .expect("run minisign -S");
        assert!(out.status.success(), "minisign -S: {out:?}");
        let mut sig = file.as_os_str().to_os_string();
        sig.push(".minisig");
        PathBuf::from(sig)
    }

    /// The key ID, as minisign prints it.
    pub fn key_id(&self) -> String {
        let text = std::fs::read_to_string(&self.public).unwrap();
        text.lines()
            .next()
            .and_then(|l| l.rsplit(' ').next())
            .unwrap()
            .to_string()
    }
}

/// What the misbehaving server does for one path.
#[derive(Clone)]
pub enum Reply {
    /// 200 with the body.
    Ok(Vec<u8>),
    /// This status, empty body.
    Status(u16),
    /// This status line and these headers, no body: a redirect, or a length that is a lie.
    Head {
        status: u16,
        headers: Vec<(&'static str, String)>,
    },
    /// Announce the whole body, send `sent` bytes, close the connection.
    Truncated { body: Vec<u8>, sent: usize },
    /// Announce the whole body, send `sent` bytes, signal `started`, then hold the connection
    /// open until the server is dropped.
    Stalled {
        body: Vec<u8>,
        sent: usize,
        started: mpsc::Sender<()>,
    },
}

/// An HTTP/1.1 server on 127.0.0.1 answering each path with its [`Reply`] (404 otherwise), one
/// connection at a time.
pub struct Server {
    pub base: String,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    pub fn start(routes: Vec<(&str, Reply)>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let routes: Vec<(String, Reply)> = routes
            .into_iter()
            .map(|(p, r)| (p.to_string(), r))
            .collect();
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if flag.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(mut conn) = conn else { continue };
                let flag = flag.clone();
                let routes = routes.clone();
                // Each connection on its own thread, so a stalled one does not block the rest.
                std::thread::spawn(move || serve(&mut conn, &routes, &flag));
            }
        });
        Server {
            base: format!("http://{addr}"),
            stop,
            thread: Some(thread),
        }
    }
}

fn serve(conn: &mut TcpStream, routes: &[(String, Reply)], stop: &AtomicBool) {
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut request = String::new();
    if reader.read_line(&mut request).is_err() {
        return;
    }
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
    }
    let path = request.split_whitespace().nth(1).unwrap_or("/").to_string();
    let reply = routes
        .iter()
        .find(|(p, _)| *p == path)
        .map(|(_, r)| r.clone());
    let head = |status: u16, len: usize| {
        format!("HTTP/1.1 {status} X\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n")
    };
    let _ = match reply {
        None => conn.write_all(head(404, 0).as_bytes()),
        Some(Reply::Status(s)) => conn.write_all(head(s, 0).as_bytes()),
        Some(Reply::Head { status, headers }) => {
            let lines: String = headers
                .iter()
                .map(|(k, v)| format!("{k}: {v}\r\n"))
                .collect();
            conn.write_all(
                format!("HTTP/1.1 {status} X\r\n{lines}Connection: close\r\n\r\n").as_bytes(),
            )
        }
        Some(Reply::Ok(body)) => conn
            .write_all(head(200, body.len()).as_bytes())
            .and_then(|()| conn.write_all(&body)),
        Some(Reply::Truncated { body, sent }) => conn
            .write_all(head(200, body.len()).as_bytes())
            .and_then(|()| conn.write_all(&body[..sent])),
        Some(Reply::Stalled {
            body,
            sent,
            started,
        }) => {
            let r = conn
                .write_all(head(200, body.len()).as_bytes())
                .and_then(|()| conn.write_all(&body[..sent]))
                .and_then(|()| conn.flush());
            let _ = started.send(());
            while !stop.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(10));
            }
            r
        }
    };
    let _ = conn.flush();
    let _ = conn.shutdown(std::net::Shutdown::Both);
    let mut sink = Vec::new();
    let _ = reader.read_to_end(&mut sink);
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop.
        let _ = TcpStream::connect(self.base.trim_start_matches("http://"));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A front for a [`Registry`] that demands a Bearer token, as public registries do: requests
/// without `Authorization: Bearer <token>` get a 401 challenge naming its `/token` endpoint, which
/// hands out the token; authorized requests are passed to the registry.
pub struct TokenGate {
    /// `127.0.0.1:PORT`.
    pub addr: String,
    /// How many tokens were handed out.
    pub tokens_issued: Arc<std::sync::atomic::AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

const GATE_TOKEN: &str = "rawko-test-token";

impl TokenGate {
    pub fn start(upstream: &str) -> TokenGate {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let stop = Arc::new(AtomicBool::new(false));
        let issued = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (flag, count, up, me) = (
            stop.clone(),
            issued.clone(),
            upstream.to_string(),
            addr.clone(),
        );
        let thread = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if flag.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let (count, up, me) = (count.clone(), up.clone(), me.clone());
                std::thread::spawn(move || gate(conn, &up, &me, &count));
            }
        });
        TokenGate {
            addr,
            tokens_issued: issued,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for TokenGate {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(&self.addr);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Serve the requests on one client connection.
fn gate(client: TcpStream, upstream: &str, me: &str, issued: &std::sync::atomic::AtomicUsize) {
    let mut reader = BufReader::new(client.try_clone().unwrap());
    let mut client = client;
    loop {
        let mut head = Vec::new();
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
            return;
        }
        let mut len = 0usize;
        let mut authorized = false;
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            if line == "\r\n" {
                break;
            }
            let lower = line.to_ascii_lowercase();
            if let Some(v) = lower.strip_prefix("content-length:") {
                len = v.trim().parse().unwrap_or(0);
            }
            if lower.starts_with("authorization:") && line.contains(&format!("Bearer {GATE_TOKEN}"))
            {
                authorized = true;
            }
            if !lower.starts_with("connection:") {
                head.extend_from_slice(line.as_bytes());
            }
        }
        let mut body = vec![0u8; len];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let path = request_line.split_whitespace().nth(1).unwrap_or("/");
        let reply = if path.starts_with("/token?") {
            issued.fetch_add(1, Ordering::SeqCst);
            let json = format!("{{\"token\":\"{GATE_TOKEN}\"}}");
            format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{json}",
                json.len()
            )
            .into_bytes()
        } else if !authorized {
            format!(
                "HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Bearer realm=\"http://{me}/token\",service=\"rawko-tests\"\r\nContent-Length: 0\r\n\r\n"
            )
            .into_bytes()
        } else {
            // One upstream connection per request, closed by the registry after its answer.
            let Ok(mut up) = TcpStream::connect(upstream) else {
                return;
            };
            let mut forward = request_line.clone().into_bytes();
            forward.extend_from_slice(&head);
            forward.extend_from_slice(b"Connection: close\r\n\r\n");
            forward.extend_from_slice(&body);
            if up.write_all(&forward).is_err() {
                return;
            }
            let mut answer = Vec::new();
            if up.read_to_end(&mut answer).is_err() {
                return;
            }
            answer
        };
        if client.write_all(&reply).is_err() {
            return;
        }
    }
}
