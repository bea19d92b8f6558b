//! The store's schema and the defences around its file: the migrations that build it, SQLite's
//! hardening for a file someone else may have written, the check that every schema object is one
//! rawko created, and the retry for a database another runner holds for a moment.

use std::time::Duration;

use rusqlite::Connection;
use rusqlite::config::DbConfig;

/// Schema migrations, in order. Never edit a released entry; append a new one.
pub(crate) const MIGRATIONS: &[&str] = &[
    r#"
CREATE TABLE tasks (
    id          TEXT PRIMARY KEY,
    prompt      TEXT NOT NULL,
    status      TEXT NOT NULL,
    state       TEXT NOT NULL,
    options     TEXT NOT NULL,
    steps       INTEGER NOT NULL DEFAULT 0,
    summary     TEXT,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);
CREATE TABLE transitions (
    id          INTEGER PRIMARY KEY,
    task_id     TEXT NOT NULL REFERENCES tasks(id),
    from_state  TEXT,
    to_state    TEXT NOT NULL,
    event       TEXT NOT NULL,
    mode        TEXT NOT NULL,
    reason      TEXT NOT NULL,
    at          INTEGER NOT NULL
);
CREATE INDEX transitions_task ON transitions(task_id, id);
CREATE TABLE turns (
    id          INTEGER PRIMARY KEY,
    task_id     TEXT NOT NULL REFERENCES tasks(id),
    parent_id   INTEGER REFERENCES turns(id),
    agent       TEXT NOT NULL,
    started_at  INTEGER NOT NULL,
    ended_at    INTEGER,
    outcome     TEXT,
    summary     TEXT,
    output      TEXT,
    iterations  INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX turns_task ON turns(task_id, id);
CREATE TABLE messages (
    id          INTEGER PRIMARY KEY,
    turn_id     INTEGER NOT NULL REFERENCES turns(id),
    role        TEXT NOT NULL,
    content     TEXT NOT NULL,
    at          INTEGER NOT NULL
);
CREATE INDEX messages_turn ON messages(turn_id, id);
CREATE TABLE tool_calls (
    id          INTEGER PRIMARY KEY,
    turn_id     INTEGER NOT NULL REFERENCES turns(id),
    call_id     TEXT NOT NULL,
    tool        TEXT NOT NULL,
    input       TEXT NOT NULL,
    output      TEXT NOT NULL,
    is_error    INTEGER NOT NULL,
    verdict     TEXT NOT NULL,
    duration_us INTEGER NOT NULL,
    at          INTEGER NOT NULL,
    UNIQUE (turn_id, call_id)
);
CREATE TABLE decisions (
    id          INTEGER PRIMARY KEY,
    task_id     TEXT NOT NULL REFERENCES tasks(id),
    turn_id     INTEGER REFERENCES turns(id),
    subject     TEXT NOT NULL,
    capability  TEXT NOT NULL,
    detail      TEXT NOT NULL,
    decision    TEXT NOT NULL,
    reason      TEXT NOT NULL,
    at          INTEGER NOT NULL
);
CREATE INDEX decisions_task ON decisions(task_id, id);
CREATE TABLE usage (
    id            INTEGER PRIMARY KEY,
    turn_id       INTEGER NOT NULL REFERENCES turns(id),
    adapter       TEXT NOT NULL,
    model         TEXT NOT NULL,
    input_tokens  INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    cache_read    INTEGER NOT NULL,
    cache_write   INTEGER NOT NULL,
    at            INTEGER NOT NULL
);
CREATE INDEX usage_turn ON usage(turn_id);
"#,
    r#"
ALTER TABLE tasks ADD COLUMN lease_pid INTEGER;
ALTER TABLE tasks ADD COLUMN lease_host TEXT;
ALTER TABLE tasks ADD COLUMN lease_at INTEGER;
"#,
    r#"
ALTER TABLE tasks ADD COLUMN lease_start TEXT;
"#,
    r#"
ALTER TABLE tasks ADD COLUMN lease_token TEXT;
ALTER TABLE tasks ADD COLUMN workspace_root TEXT;
ALTER TABLE tasks ADD COLUMN workspace_remote TEXT;
ALTER TABLE tasks ADD COLUMN workspace_path TEXT;
ALTER TABLE tasks ADD COLUMN host TEXT;
"#,
    r#"
ALTER TABLE tasks ADD COLUMN trace TEXT;
CREATE TABLE runs (
    id          INTEGER PRIMARY KEY,
    task_id     TEXT NOT NULL REFERENCES tasks(id),
    host        TEXT NOT NULL,
    pid         INTEGER NOT NULL,
    trace       TEXT,
    started_at  INTEGER NOT NULL,
    ended_at    INTEGER,
    status      TEXT
);
CREATE INDEX runs_task ON runs(task_id, id);
CREATE TABLE model_calls (
    id             INTEGER PRIMARY KEY,
    turn_id        INTEGER NOT NULL REFERENCES turns(id),
    adapter        TEXT NOT NULL,
    model          TEXT NOT NULL,
    response_model TEXT,
    finish_reason  TEXT,
    attempt        INTEGER NOT NULL,
    outcome        TEXT NOT NULL,
    started_at     INTEGER NOT NULL,
    ended_at       INTEGER NOT NULL
);
CREATE INDEX model_calls_turn ON model_calls(turn_id, id);
"#,
    r#"
CREATE TABLE blobs (
    hash        TEXT PRIMARY KEY,
    size        INTEGER NOT NULL,
    data        BLOB NOT NULL,
    created_at  INTEGER NOT NULL
);
CREATE TABLE task_edits (
    task_id     TEXT PRIMARY KEY REFERENCES tasks(id),
    steps       INTEGER NOT NULL,
    patch       TEXT NOT NULL REFERENCES blobs(hash),
    at          INTEGER NOT NULL
);
"#,
];

/// Run `op` again while SQLite says the database is busy or locked, for up to five seconds.
pub(crate) fn retry_busy<T>(mut op: impl FnMut() -> rusqlite::Result<T>) -> rusqlite::Result<T> {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        match op() {
            Err(rusqlite::Error::SqliteFailure(e, _))
                if matches!(
                    e.code,
                    rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
                ) && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(10 + fastrand::u64(0..20)));
            }
            other => return other,
        }
    }
}

/// SQLite's own hardening for a file that may have been written by someone else: defensive
/// mode (no writes to the schema or to shadow tables through SQL), no functions with side
/// effects called from schema objects, and no triggers or views at all (rawko uses neither).
pub(crate) fn defend(conn: &Connection) -> rusqlite::Result<()> {
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_DEFENSIVE, true)?;
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_TRUSTED_SCHEMA, false)?;
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_TRIGGER, false)?;
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_VIEW, false)?;
    conn.pragma_update(None, "trusted_schema", false)?;
    Ok(())
}

pub(crate) enum SchemaCheck {
    Sql(rusqlite::Error),
    Foreign(String),
}

/// The schema objects (type, name, SQL) of a store at `version`, as rawko creates them.
fn expected_schema(version: usize) -> rusqlite::Result<Vec<(String, String, Option<String>)>> {
    let conn = Connection::open_in_memory()?;
    for sql in &MIGRATIONS[..version] {
        conn.execute_batch(sql)?;
    }
    schema(&conn)
}

fn schema(conn: &Connection) -> rusqlite::Result<Vec<(String, String, Option<String>)>> {
    let mut stmt = conn.prepare("SELECT type, name, sql FROM sqlite_schema ORDER BY type, name")?;
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect()
}

/// Every object in the file is one rawko's migrations up to `version` create, with the same
/// definition.
pub(crate) fn check_schema(
    conn: &Connection,
    version: usize,
) -> std::result::Result<(), SchemaCheck> {
    let found = schema(conn).map_err(SchemaCheck::Sql)?;
    let expected = expected_schema(version).map_err(SchemaCheck::Sql)?;
    for object in &found {
        if !expected.contains(object) {
            let (kind, name, _) = object;
            let name: String = name.chars().filter(|c| !c.is_control()).take(80).collect();
            return Err(SchemaCheck::Foreign(format!("{kind} `{name}`")));
        }
    }
    if found.len() != expected.len() {
        return Err(SchemaCheck::Foreign(format!(
            "schema missing a table or index of version {version}"
        )));
    }
    Ok(())
}
