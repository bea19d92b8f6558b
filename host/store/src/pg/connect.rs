//! Where a PostgreSQL store is and how rawko connects to it: a URL (or libpq's `key=value`
//! form), with what it leaves out taken from the standard `PGHOST`, `PGPORT`, `PGUSER`,
//! `PGPASSWORD` and `PGDATABASE` variables, and settings rawko fixes on every connection
//! (its own schema first on the search path, synchronous commits). The store is named in
//! messages by a URL that never holds the password.

use std::time::Duration;

use tokio_postgres::config::Host;

use super::error::{PgError, PgErrorKind};

/// The settings every connection gets, after the user's own `options`: names resolve in rawko's
/// schema (and never in `public`, where anyone may create functions), and a commit returns only
/// once it is on disk whatever the server's or the role's default.
const SESSION_OPTIONS: &str = "-csearch_path=rawko,pg_temp -csynchronous_commit=on";

/// How long connecting may take before the server counts as unreachable, unless the URL says.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A PostgreSQL store's address and credentials, ready to connect.
#[derive(Clone)]
pub struct PgConfig {
    pub(crate) config: tokio_postgres::Config,
}

impl std::fmt::Debug for PgConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("PgConfig").field(&self.label()).finish()
    }
}

impl PgConfig {
    /// The store a user named (`RAWKO_STORE_URL`, `store: {url}`): a `postgres://` or
    /// `postgresql://` URL, completed from the `PG*` variables of this process.
    pub fn store_url(url: &str) -> Result<PgConfig, PgError> {
        let t = url.trim();
        if !(t.starts_with("postgres://") || t.starts_with("postgresql://")) {
            let scheme = t.split_once("://").map_or("", |(s, _)| s);
            return Err(PgError::new(
                &redact(t),
                PgErrorKind::Config(if scheme.is_empty() {
                    "not a store URL: rawko keeps tasks in a PostgreSQL server named as \
                     `postgres://user@host/database`"
                        .into()
                } else {
                    format!(
                        "`{}` is not a store rawko knows: give a PostgreSQL URL \
                         (`postgres://user@host/database`), or no URL for the workspace's \
                         SQLite file",
                        scheme.chars().take(20).collect::<String>()
                    )
                }),
            ));
        }
        PgConfig::from_url(t)
    }

    /// The store at `url`, completed from the `PG*` variables of this process.
    pub fn from_url(url: &str) -> Result<PgConfig, PgError> {
        PgConfig::from_url_env(url, |k| std::env::var(k).ok())
    }

    /// The store at `url`, completed from the `PG*` variables `env` gives.
    pub fn from_url_env(
        url: &str,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<PgConfig, PgError> {
        let mut config: tokio_postgres::Config = if url.trim().is_empty() {
            tokio_postgres::Config::new()
        } else {
            url.parse().map_err(|e: tokio_postgres::Error| {
                PgError::new(
                    &redact(url),
                    PgErrorKind::Config(format!("not a PostgreSQL URL: {e}")),
                )
            })?
        };
        let env = |k: &str| env(k).filter(|v| !v.is_empty());
        if config.get_hosts().is_empty()
            && let Some(hosts) = env("PGHOST")
        {
            for h in hosts.split(',') {
                config.host(h);
            }
        }
        if config.get_ports().is_empty()
            && let Some(port) = env("PGPORT")
        {
            let port = port.parse().map_err(|_| {
                PgError::new(
                    &redact(url),
                    PgErrorKind::Config(format!("PGPORT `{port}` is not a port")),
                )
            })?;
            config.port(port);
        }
        if config.get_user().is_none()
            && let Some(user) = env("PGUSER")
        {
            config.user(user);
        }
        if config.get_password().is_none()
            && let Some(password) = env("PGPASSWORD")
        {
            config.password(password);
        }
        if config.get_dbname().is_none()
            && let Some(db) = env("PGDATABASE")
        {
            config.dbname(db);
        }
        if config.get_hosts().is_empty() {
            return Err(PgError::new(
                &redact(url),
                PgErrorKind::Config(
                    "no server: give a host in the URL (`postgres://host/db`, or \
                     `?host=/socket/dir`) or in PGHOST"
                        .into(),
                ),
            ));
        }
        let options = match config.get_options() {
            Some(own) if !own.trim().is_empty() => format!("{own} {SESSION_OPTIONS}"),
            _ => SESSION_OPTIONS.to_string(),
        };
        config.options(options);
        if config.get_application_name().is_none() {
            config.application_name("rawko");
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        Ok(PgConfig { config })
    }

    /// The same server and credentials, database `name`.
    pub fn with_dbname(mut self, name: &str) -> PgConfig {
        self.config.dbname(name);
        self
    }

    /// The same server and user, with password `password`.
    pub fn with_password(mut self, password: &str) -> PgConfig {
        self.config.password(password);
        self
    }

    /// The client's own configuration, to connect beside the store (a tool, a test).
    pub fn tokio_config(&self) -> &tokio_postgres::Config {
        &self.config
    }

    /// The database connected to; None for the server's default (the user's name).
    pub fn dbname(&self) -> Option<&str> {
        self.config.get_dbname()
    }

    /// The store as a URL without its password, to name it in messages.
    pub fn label(&self) -> String {
        let c = &self.config;
        let user = c
            .get_user()
            .map(|u| format!("{}@", escape(u)))
            .unwrap_or_default();
        let db = c.get_dbname().map(escape).unwrap_or_default();
        let ports = c.get_ports();
        let port_of = |i: usize| ports.get(i).or(ports.first()).copied();
        let mut tcp = Vec::new();
        let mut sockets = Vec::new();
        for (i, h) in c.get_hosts().iter().enumerate() {
            match h {
                Host::Tcp(name) => tcp.push(match port_of(i) {
                    Some(p) => format!("{name}:{p}"),
                    None => name.clone(),
                }),
                #[cfg(unix)]
                Host::Unix(dir) => sockets.push(dir.display().to_string()),
            }
        }
        let mut url = format!("postgres://{user}{}/{db}", tcp.join(","));
        let mut query = Vec::new();
        for s in sockets {
            query.push(format!("host={s}"));
        }
        if tcp.is_empty()
            && let Some(p) = ports.first()
        {
            query.push(format!("port={p}"));
        }
        if !query.is_empty() {
            url.push('?');
            url.push_str(&query.join("&"));
        }
        url
    }
}

/// A URL's user or database, with what would change how the URL reads percent-encoded.
fn escape(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '@' | ':' | '/' | '?' | '#' | '%' | ' ' => format!("%{:02X}", c as u32),
            c if c.is_control() => format!("%{:02X}", c as u32 & 0xff),
            c => c.to_string(),
        })
        .collect()
}

/// `url` without its password: the one in its user part (`postgres://user:secret@host`), a
/// `password=` query parameter, and in the `key=value` form a `password` key, are dropped.
pub fn redact(url: &str) -> String {
    if url.contains("://") {
        redact_url(url)
    } else {
        redact_key_value(url)
    }
}

fn redact_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else {
        return url.to_string();
    };
    let (scheme, rest) = url.split_at(scheme_end);
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let authority = match authority.rfind('@') {
        Some(at) => {
            let (userinfo, hosts) = authority.split_at(at);
            let user = userinfo.split(':').next().unwrap_or_default();
            format!("{user}{hosts}")
        }
        None => authority.to_string(),
    };
    let tail = match tail.split_once('?') {
        Some((path, query)) => {
            let (query, fragment) = match query.split_once('#') {
                Some((q, f)) => (q, Some(f)),
                None => (query, None),
            };
            let kept: Vec<&str> = query
                .split('&')
                .filter(|p| {
                    let key = p.split('=').next().unwrap_or_default();
                    !key.eq_ignore_ascii_case("password")
                })
                .collect();
            let mut t = path.to_string();
            if !kept.is_empty() {
                t.push('?');
                t.push_str(&kept.join("&"));
            }
            if let Some(f) = fragment {
                t.push('#');
                t.push_str(f);
            }
            t
        }
        None => tail.to_string(),
    };
    format!("{scheme}{authority}{tail}")
}

/// libpq's `key = value` form without its `password` pair; a value may be quoted, with `\` to
/// escape.
fn redact_key_value(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let start = i;
        while i < chars.len() && chars[i].is_whitespace() {
            i += 1;
        }
        let key_start = i;
        while i < chars.len() && !chars[i].is_whitespace() && chars[i] != '=' {
            i += 1;
        }
        let key: String = chars[key_start..i].iter().collect();
        while i < chars.len() && chars[i].is_whitespace() {
            i += 1;
        }
        if i < chars.len() && chars[i] == '=' {
            i += 1;
        }
        while i < chars.len() && chars[i].is_whitespace() {
            i += 1;
        }
        if i < chars.len() && chars[i] == '\'' {
            i += 1;
            while i < chars.len() && chars[i] != '\'' {
                if chars[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
        } else {
            while i < chars.len() && !chars[i].is_whitespace() {
                if chars[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
        }
        let i_end = i.min(chars.len());
        if !key.eq_ignore_ascii_case("password") {
            out.extend(&chars[start..i_end]);
        }
        i = i_end;
    }
    out.trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "s3cr3t-pw";

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn a_password_in_the_url_is_never_shown() {
        for url in [
            "postgres://rawko:s3cr3t-pw@db.example:5433/tasks",
            "postgresql://rawko:s3cr3t-pw@db.example/tasks?sslmode=disable",
            "postgres://rawko@db.example/tasks?password=s3cr3t-pw&application_name=x",
            "postgres://rawko@/tasks?host=/tmp/pg&password=s3cr3t-pw",
            "postgres://rawko:s3cr3t-pw@/tasks?host=/tmp/pg",
            "host=db.example user=rawko password=s3cr3t-pw dbname=tasks",
            "host=db.example user=rawko password = 's3cr3t-pw' dbname=tasks",
            "password='s3cr3t-pw with space' host=db.example",
        ] {
            let r = redact(url);
            assert!(!r.contains(SECRET) && !r.contains("s3cr3t"), "{url} -> {r}");
            let label = PgConfig::from_url_env(url, no_env).unwrap().label();
            assert!(!label.contains("s3cr3t"), "{url} -> {label}");
            assert!(
                label.contains("tasks") || label.contains("db.example"),
                "{label}"
            );
        }
        assert_eq!(
            redact("postgres://rawko:s3cr3t-pw@db.example:5433/tasks?x=1"),
            "postgres://rawko@db.example:5433/tasks?x=1"
        );
        assert_eq!(
            redact("host=db.example password='a b' user=rawko"),
            "host=db.example user=rawko"
        );
    }

    #[test]
    fn what_the_url_leaves_out_comes_from_the_pg_variables_and_stays_unshown() {
        let env = |k: &str| {
            match k {
                "PGHOST" => Some("/run/pg"),
                "PGPORT" => Some("6543"),
                "PGUSER" => Some("alice"),
                "PGPASSWORD" => Some(SECRET),
                "PGDATABASE" => Some("work"),
                _ => None,
            }
            .map(String::from)
        };
        let c = PgConfig::from_url_env("", env).unwrap();
        assert_eq!(c.config.get_password(), Some(SECRET.as_bytes()));
        assert_eq!(c.label(), "postgres://alice@/work?host=/run/pg&port=6543");
        assert!(!format!("{c:?}").contains(SECRET));
        // The URL's own parts win (a host in it comes with its port, 5432 unless it says).
        let c = PgConfig::from_url_env("postgres://bob:other@db.example/mine", env).unwrap();
        assert_eq!(c.config.get_password(), Some(&b"other"[..]));
        assert_eq!(c.label(), "postgres://bob@db.example:5432/mine");
        let e = PgError::new(&c.label(), PgErrorKind::ConnectionLost("x".into())).to_string();
        assert!(!e.contains("other") && !e.contains(SECRET), "{e}");
    }

    #[test]
    fn every_connection_gets_rawkos_search_path_and_synchronous_commits() {
        let c =
            PgConfig::from_url_env("postgres://u@h/d?options=-cwork_mem%3D64MB", no_env).unwrap();
        assert_eq!(
            c.config.get_options(),
            Some("-cwork_mem=64MB -csearch_path=rawko,pg_temp -csynchronous_commit=on")
        );
        let e = PgConfig::from_url_env("", no_env).unwrap_err().to_string();
        assert!(e.contains("no server"), "{e}");
        let e = PgConfig::from_url_env("postgres://u:s3cr3t-pw@h:notaport/d", no_env)
            .unwrap_err()
            .to_string();
        assert!(!e.contains("s3cr3t"), "{e}");
    }
}
