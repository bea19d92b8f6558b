//! The `remote` rows: the demo task (planner, developer, tester, reviewer, its model replies
//! played back) run by `rawko run --remote` on one `rawko worker`, against the same task run
//! here by `rawko run`. The worker, the client, a Temporal development server on loopback and a
//! PostgreSQL database made for the rows are all real; the rows are skipped, saying why, when
//! there is no Temporal CLI (`RAWKO_TEST_TEMPORAL`, or `temporal` on PATH), no PostgreSQL server
//! (`RAWKO_TEST_PG_URL`) or the binary was built without the `temporal` feature.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rawko::bench::{Bench, Skip};

/// The demo's states: planner, developer, tester, reviewer.
pub const STATES: u32 = 4;

/// Kills a child process when dropped.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn temporal_cli() -> Result<PathBuf, Skip> {
    if let Some(p) = std::env::var_os("RAWKO_TEST_TEMPORAL").map(PathBuf::from) {
        return Ok(p);
    }
    let ci = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/ci-tools/bin/temporal");
    if ci.is_file() {
        return Ok(ci);
    }
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join("temporal"))
        .find(|p| p.is_file())
        .ok_or_else(|| Skip("no Temporal CLI (set RAWKO_TEST_TEMPORAL)".into()))
}

/// `url` with its database name replaced by `name`.
fn with_database(url: &str, name: &str) -> Result<String, Skip> {
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let authority = base
        .find("://")
        .map(|i| i + 3)
        .ok_or_else(|| Skip("RAWKO_TEST_PG_URL is not a URL".into()))?;
    let end = base[authority..]
        .find('/')
        .map_or(base.len(), |i| authority + i);
    let mut out = format!("{}/{name}", &base[..end]);
    if !query.is_empty() {
        out.push('?');
        out.push_str(query);
    }
    Ok(out)
}

/// Each file of the demo's project under `dir`, committed.
fn project(dir: &Path) -> Result<(), Skip> {
    for (path, text) in rawko::demo::PROJECT {
        let file = dir.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).map_err(Skip::doing("the project"))?;
        std::fs::write(&file, text).map_err(Skip::doing("the project"))?;
    }
    std::fs::write(dir.join(".gitignore"), "target/\ndata/\nconfig/\n")
        .map_err(Skip::doing("the project"))?;
    for args in [
        &["init", "-q"][..],
        &["add", "-A"],
        &[
            "-c",
            "user.name=b",
            "-c",
            "user.email=b@b",
            "commit",
            "-qm",
            "demo",
        ],
    ] {
        let ok = Command::new("git")
            .args(args)
            .current_dir(dir)
            .output()
            .map_err(Skip::doing("git"))?
            .status
            .success();
        if !ok {
            return Err(Skip(format!("git {args:?} failed")));
        }
    }
    Ok(())
}

/// `dir/config/rawko/config.yaml`: the `demo` adapter instance, replaying the recording.
fn config(dir: &Path, recording: &Path) -> Result<(), Skip> {
    let rawko = dir.join("config/rawko");
    std::fs::create_dir_all(&rawko).map_err(Skip::doing("the config"))?;
    std::fs::write(
        rawko.join("config.yaml"),
        format!(
            "adapters:\n  demo:\n    plugin: replay\n    recording: {}\n",
            recording.display()
        ),
    )
    .map_err(Skip::doing("the config"))
}

/// One run of the demo task by `args` (a `rawko run` command line) in `dir`, timed.
fn timed(b: &Bench, dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Result<Duration, Skip> {
    let mut cmd = b.rawko(dir, args);
    cmd.args([
        "--agent",
        "planner",
        "--adapter",
        "demo",
        "-q",
        rawko::demo::TASK,
    ]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let started = Instant::now();
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(Skip::doing("rawko"))?;
    let took = started.elapsed();
    if !out.status.success() {
        return Err(Skip(format!(
            "`rawko {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(took)
}

/// `sql` on the server `url` names.
async fn psql(url: &str, sql: &str) -> Result<(), Skip> {
    let config: tokio_postgres::Config = url.parse().map_err(Skip::doing("RAWKO_TEST_PG_URL"))?;
    let (client, connection) = config
        .connect(tokio_postgres::NoTls)
        .await
        .map_err(Skip::doing("connecting"))?;
    tokio::spawn(connection);
    client
        .batch_execute(sql)
        .await
        .map_err(|e| Skip(format!("{sql}: {e:?}")))
}

/// The medians of the demo task run remotely and here, over `n` runs each.
pub async fn remote_and_local(b: &Bench, n: usize) -> Result<(Duration, Duration), Skip> {
    let help = b
        .rawko(Path::new("/"), &["worker", "--help"])
        .output()
        .map_err(Skip::doing("rawko"))?;
    if !help.status.success() {
        return Err(Skip(
            "this rawko was built without the temporal feature".into(),
        ));
    }
    let cli = temporal_cli()?;
    let url = std::env::var("RAWKO_TEST_PG_URL")
        .ok()
        .filter(|u| !u.is_empty())
        .ok_or_else(|| Skip("no PostgreSQL server (set RAWKO_TEST_PG_URL)".into()))?;
    let root = b.subdir("remote")?;
    let recording = root.join("recording.jsonl");
    std::fs::write(&recording, rawko::demo::RECORDING).map_err(Skip::doing("the recording"))?;

    // Here: each run in a fresh copy of the project.
    let mut local = Vec::new();
    for i in 0..=n {
        let dir = root.join(format!("local-{i}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(Skip::doing("the workspace"))?;
        project(&dir)?;
        config(&dir, &recording)?;
        let took = timed(b, &dir, &["run"], &[])?;
        if i > 0 {
            local.push(took);
        }
    }

    // There: a dev server, a database, one worker.
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(Skip::doing("a port"))?
        .port();
    let address = format!("127.0.0.1:{port}");
    let _server = Reaped(
        Command::new(&cli)
            .args(["server", "start-dev", "--ip", "127.0.0.1", "--headless"])
            .args(["--port", &port.to_string(), "--log-level", "error"])
            .arg("--db-filename")
            .arg(root.join("temporal.db"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(Skip::doing("the Temporal dev server"))?,
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    while TcpStream::connect(&address).is_err() {
        if Instant::now() > deadline {
            return Err(Skip("the Temporal dev server did not start".into()));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let name = format!("rawko_bench_remote_{}", std::process::id());
    psql(
        &url,
        &format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
    )
    .await?;
    psql(&url, &format!("CREATE DATABASE {name}")).await?;
    let result = (|| {
        let store = with_database(&url, &name)?;
        let queue = format!("bench-{port}");
        let workers = root.join("worker");
        std::fs::create_dir_all(&workers).map_err(Skip::doing("the worker"))?;
        config(&workers, &recording)?;
        let log = std::fs::File::create(root.join("worker.log")).map_err(Skip::doing("a log"))?;
        let _worker = Reaped(
            b.rawko(
                &workers,
                &["worker", "--temporal", &address, "--queue", &queue],
            )
            .env("RAWKO_STORE_URL", &store)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(Skip::doing("the worker"))?,
        );
        // The first run warms the worker (its plugins compiled, its pool filled) and is not
        // counted; nor is the first run here.
        let mut remote = Vec::new();
        for i in 0..=n {
            let dir = root.join(format!("client-{i}"));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).map_err(Skip::doing("the workspace"))?;
            project(&dir)?;
            config(&dir, &recording)?;
            let args = ["run", "--remote", "--temporal", &address, "--queue", &queue];
            let took =
                timed(b, &dir, &args, &[("RAWKO_STORE_URL", &store)]).map_err(|Skip(why)| {
                    let log = std::fs::read_to_string(root.join("worker.log")).unwrap_or_default();
                    Skip(format!("{why}\nthe worker's log:\n{log}"))
                })?;
            if i > 0 {
                remote.push(took);
            }
        }
        Ok(remote)
    })();
    let _ = psql(
        &url,
        &format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
    )
    .await;
    let mut remote = result?;
    remote.sort();
    local.sort();
    Ok((remote[remote.len() / 2], local[local.len() / 2]))
}
