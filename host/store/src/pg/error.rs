//! What can go wrong with a PostgreSQL store, told apart by what the user or the run does about
//! it: a server that cannot be reached, credentials it refused, a schema rawko did not make or a
//! newer rawko made, a connection lost in the middle of a run (the run stops resumable rather than
//! failed). Every message names the store by its URL without the password.

use std::error::Error as _;

use tokio_postgres::error::SqlState;

/// A PostgreSQL store that could not be opened, read or written.
#[derive(Debug, thiserror::Error)]
#[error("task store {store}: {kind}")]
pub struct PgError {
    /// The store's URL, without its password.
    pub store: String,
    pub kind: PgErrorKind,
}

/// What went wrong, by what is done about it.
#[derive(Debug, thiserror::Error)]
pub enum PgErrorKind {
    #[error("{0}")]
    Config(String),
    #[error("cannot reach the server ({0}); is it running, and is this its address?")]
    Unreachable(String),
    #[error("the server refused the credentials ({0}); check the user and password")]
    Auth(String),
    #[error(
        "the `rawko` schema holds a {what} that rawko did not create; it was not used. Drop the \
         schema to start afresh, or remove what was added"
    )]
    Foreign { what: String },
    #[error(
        "was written by a newer rawko (schema version {found}, this rawko knows up to {known}); \
         upgrade rawko"
    )]
    TooNew { found: i64, known: usize },
    #[error("the connection to the server was lost ({0}); the task can be resumed")]
    ConnectionLost(String),
    #[error("{0}")]
    Sql(String),
}

impl PgError {
    pub(crate) fn new(store: &str, kind: PgErrorKind) -> PgError {
        PgError {
            store: store.to_string(),
            kind,
        }
    }

    /// Whether the connection to the server went away while the store was in use: nothing is
    /// wrong with the task, and a run stopped by it can be resumed.
    pub fn is_connection_lost(&self) -> bool {
        matches!(self.kind, PgErrorKind::ConnectionLost(_))
    }

    /// An error of a statement: a connection lost is told apart from the statement's own fault.
    pub(crate) fn query(store: &str, e: &tokio_postgres::Error) -> PgError {
        let kind = if lost(e) {
            PgErrorKind::ConnectionLost(describe(e))
        } else {
            PgErrorKind::Sql(describe(e))
        };
        PgError::new(store, kind)
    }

    /// An error of connecting: refused credentials, a server not there, or (once the store has
    /// been open) a connection lost.
    pub(crate) fn connect(store: &str, e: &tokio_postgres::Error, was_open: bool) -> PgError {
        let auth = matches!(
            e.code(),
            Some(c) if *c == SqlState::INVALID_PASSWORD
                || *c == SqlState::INVALID_AUTHORIZATION_SPECIFICATION
        );
        let kind = if auth {
            PgErrorKind::Auth(describe(e))
        } else if e.as_db_error().is_some() {
            PgErrorKind::Sql(describe(e))
        } else if was_open {
            PgErrorKind::ConnectionLost(describe(e))
        } else {
            PgErrorKind::Unreachable(describe(e))
        };
        PgError::new(store, kind)
    }
}

/// Whether `e` says the connection is gone rather than the statement wrong: the client closed,
/// the socket failed, or the server ended the session (terminated, shutting down, or a
/// connection exception).
fn lost(e: &tokio_postgres::Error) -> bool {
    if e.is_closed() || io_cause(e) {
        return true;
    }
    match e.code() {
        Some(c) => {
            *c == SqlState::ADMIN_SHUTDOWN
                || *c == SqlState::CRASH_SHUTDOWN
                || *c == SqlState::CANNOT_CONNECT_NOW
                || *c == SqlState::IDLE_SESSION_TIMEOUT
                || c.code().starts_with("08")
        }
        None => false,
    }
}

fn io_cause(e: &tokio_postgres::Error) -> bool {
    let mut source = e.source();
    while let Some(s) = source {
        if s.downcast_ref::<std::io::Error>().is_some() {
            return true;
        }
        source = s.source();
    }
    false
}

/// The error and its causes on one line: tokio-postgres's own message names only its kind.
pub(crate) fn describe(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        let mut s = format!(
            "{}: {} (SQLSTATE {})",
            db.severity(),
            db.message(),
            db.code().code()
        );
        if let Some(detail) = db.detail() {
            s.push_str(&format!("; {detail}"));
        }
        return s;
    }
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        s.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    s
}
