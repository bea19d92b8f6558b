//! Which task store the binary under test keeps its tasks in, and reading it behind its back.
//!
//! By default every test workspace has its SQLite file. With `RAWKO_TEST_STORE=postgres` (and
//! `RAWKO_TEST_PG_URL` naming a throw-away server whose user may create databases), each
//! workspace gets a database of its own on that server, made when the workspace is and dropped
//! with it, and [`crate::support::rawko`] points the binary at it with `RAWKO_STORE_URL`: the
//! same tests then run against PostgreSQL.

use std::path::Path;

/// Whether this test process runs its workspaces' tasks on PostgreSQL.
pub fn on_postgres() -> bool {
    std::env::var("RAWKO_TEST_STORE").is_ok_and(|s| s == "postgres")
}

/// The throw-away server's URL: required with `RAWKO_TEST_STORE=postgres`, and under CI.
pub fn server_url() -> Option<String> {
    match std::env::var("RAWKO_TEST_PG_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ if on_postgres() || std::env::var_os("CI").is_some() => {
            panic!("RAWKO_TEST_PG_URL is not set, and these tests need a PostgreSQL server")
        }
        _ => None,
    }
}

/// A database of its own on the test server, dropped on drop.
pub struct PgDb {
    server: String,
    pub name: String,
}

impl PgDb {
    /// A fresh database on the server `RAWKO_TEST_PG_URL` names.
    pub fn new(server: &str) -> PgDb {
        let name = format!("rawko_it_{:016x}", fastrand::u64(..));
        crate::support::block_on(async {
            admin(server)
                .await
                .batch_execute(&format!("CREATE DATABASE {name}"))
                .await
                .expect("create the test database")
        });
        PgDb {
            server: server.to_string(),
            name,
        }
    }

    /// The URL rawko is given (`RAWKO_STORE_URL`), with the password.
    pub fn url(&self) -> String {
        with_dbname(&self.server, &self.name)
    }

    /// Rows of `sql` run on this database (names resolving in rawko's schema), every column
    /// cast to text by the query.
    pub fn query(&self, sql: &str) -> Vec<Vec<Option<String>>> {
        let url = self.url();
        crate::support::block_on(async {
            let c = admin(&url).await;
            c.batch_execute("SET search_path = rawko").await.unwrap();
            c.query(sql, &[])
                .await
                .unwrap_or_else(|e| panic!("{sql}: {e:?}"))
                .iter()
                .map(|r| {
                    (0..r.len())
                        .map(|i| r.get::<_, Option<String>>(i))
                        .collect()
                })
                .collect()
        })
    }

    pub fn execute(&self, sql: &str) -> u64 {
        let url = self.url();
        crate::support::block_on(async {
            let c = admin(&url).await;
            c.batch_execute("SET search_path = rawko").await.unwrap();
            c.execute(sql, &[])
                .await
                .unwrap_or_else(|e| panic!("{sql}: {e:?}"))
        })
    }
}

impl Drop for PgDb {
    fn drop(&mut self) {
        let (server, name) = (self.server.clone(), self.name.clone());
        // Dropped inside a test's own runtime or not: a thread and runtime of its own.
        let _ = std::thread::spawn(move || {
            crate::support::block_on(async {
                admin(&server)
                    .await
                    .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                    .await
            })
        })
        .join();
    }
}

/// `url` with its database replaced by `name`.
pub fn with_dbname(url: &str, name: &str) -> String {
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    let authority_end = base[scheme_end..]
        .find('/')
        .map_or(base.len(), |i| scheme_end + i);
    let mut out = format!("{}/{name}", &base[..authority_end]);
    if !query.is_empty() {
        out.push('?');
        out.push_str(query);
    }
    out
}

async fn admin(url: &str) -> tokio_postgres::Client {
    let config: tokio_postgres::Config = url.parse().expect("a PostgreSQL URL");
    let (client, connection) = config
        .connect(tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| panic!("connecting to the test server: {e:?}"));
    tokio::spawn(connection);
    client
}

/// The rows of `sql` in a workspace's store, whichever backend holds it, every column as
/// text (the SQL must cast: `CAST(x AS TEXT)` reads the same on both), names resolving in
/// rawko's schema. The tests' values are ids rawko made, quoted into the SQL.
pub fn query(ws: &crate::support::Workspace, sql: &str) -> Vec<Vec<Option<String>>> {
    match ws.pg() {
        Some(db) => db.query(sql),
        None => sqlite_query(&crate::support::store_path(ws), sql),
    }
}

/// Run a statement on a workspace's store behind rawko's back; the rows changed.
pub fn execute(ws: &crate::support::Workspace, sql: &str) -> u64 {
    match ws.pg() {
        Some(db) => db.execute(sql),
        None => {
            let conn = rusqlite::Connection::open(crate::support::store_path(ws)).unwrap();
            conn.busy_timeout(std::time::Duration::from_secs(5))
                .unwrap();
            conn.execute(sql, [])
                .unwrap_or_else(|e| panic!("{sql}: {e}")) as u64
        }
    }
}

/// Whether a workspace's store exists yet (a PostgreSQL store always does).
pub fn exists(ws: &crate::support::Workspace) -> bool {
    ws.pg().is_some() || crate::support::store_path(ws).exists()
}

fn sqlite_query(path: &Path, sql: &str) -> Vec<Vec<Option<String>>> {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .unwrap();
    let mut stmt = conn.prepare(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    let n = stmt.column_count();
    stmt.query_map([], |r| {
        (0..n)
            .map(|i| r.get::<_, Option<String>>(i))
            .collect::<rusqlite::Result<Vec<_>>>()
    })
    .unwrap()
    .collect::<rusqlite::Result<Vec<_>>>()
    .unwrap()
}

/// A TCP port on loopback that passes connections on to the test server's Unix socket, and can
/// cut them: what a client sees when the network to its database goes away and comes back.
pub struct PgProxy {
    port: u16,
    cut: std::sync::Arc<std::sync::atomic::AtomicBool>,
    open: std::sync::Arc<std::sync::Mutex<Vec<std::net::TcpStream>>>,
}

impl PgProxy {
    /// A proxy in front of the server `server_url` names (its `host=` socket directory and port).
    pub fn start(server_url: &str) -> PgProxy {
        let config: tokio_postgres::Config = server_url.parse().expect("a PostgreSQL URL");
        let dir = config
            .get_hosts()
            .iter()
            .find_map(|h| match h {
                tokio_postgres::config::Host::Unix(p) => Some(p.clone()),
                _ => None,
            })
            .expect("the test server is reached on a Unix socket");
        let port = config.get_ports().first().copied().unwrap_or(5432);
        let socket = dir.join(format!(".s.PGSQL.{port}"));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let proxy = PgProxy {
            port: listener.local_addr().unwrap().port(),
            cut: Default::default(),
            open: Default::default(),
        };
        let (cut, open) = (proxy.cut.clone(), proxy.open.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                if cut.load(std::sync::atomic::Ordering::SeqCst) {
                    drop(client);
                    continue;
                }
                let Ok(server) = std::os::unix::net::UnixStream::connect(&socket) else {
                    continue;
                };
                open.lock().unwrap().push(client.try_clone().unwrap());
                let (mut c_in, mut s_out) =
                    (client.try_clone().unwrap(), server.try_clone().unwrap());
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut c_in, &mut s_out);
                    let _ = s_out.shutdown(std::net::Shutdown::Both);
                });
                let (mut s_in, mut c_out) = (server, client);
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut s_in, &mut c_out);
                    let _ = c_out.shutdown(std::net::Shutdown::Both);
                });
            }
        });
        proxy
    }

    /// `db`'s URL through this proxy, over TCP on loopback.
    pub fn url(&self, db: &PgDb) -> String {
        let config: tokio_postgres::Config = db.url().parse().unwrap();
        let user = config.get_user().unwrap_or("postgres");
        let password = config
            .get_password()
            .map(|p| format!(":{}", String::from_utf8_lossy(p)))
            .unwrap_or_default();
        format!(
            "postgres://{user}{password}@127.0.0.1:{}/{}",
            self.port, db.name
        )
    }

    /// Close every connection, and refuse new ones until [`PgProxy::restore`].
    pub fn cut(&self) {
        self.cut.store(true, std::sync::atomic::Ordering::SeqCst);
        for c in self.open.lock().unwrap().drain(..) {
            let _ = c.shutdown(std::net::Shutdown::Both);
        }
    }

    pub fn restore(&self) {
        self.cut.store(false, std::sync::atomic::Ordering::SeqCst);
    }
}
