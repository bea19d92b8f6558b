//! The index's database file: its schema (and version 1's, recognised exactly so that its
//! embeddings survive an upgrade), and opening it. The index is derived data, so a file that is
//! not a current index of rawko's own (another version, foreign objects, not a database) is
//! rebuilt rather than trusted.

use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use crate::KnowledgeError;

/// Bumped when the schema changes: an index of version 1 is upgraded in place (its embeddings
/// kept), one of any other version rebuilt.
pub(super) const SCHEMA_VERSION: i64 = 2;

/// Everything but the embeddings: what a sync recomputes from the files.
pub(super) const SCHEMA_WORDS: &str = "
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE files(path TEXT PRIMARY KEY, hash TEXT NOT NULL, size INTEGER NOT NULL, kind TEXT NOT NULL,
    mtime INTEGER NOT NULL, ctime INTEGER NOT NULL, inode INTEGER NOT NULL);
CREATE TABLE skipped(path TEXT PRIMARY KEY, why TEXT NOT NULL, size INTEGER NOT NULL,
    mtime INTEGER NOT NULL, ctime INTEGER NOT NULL, inode INTEGER NOT NULL);
CREATE TABLE watched(path TEXT PRIMARY KEY, size INTEGER NOT NULL, mtime INTEGER NOT NULL,
    ctime INTEGER NOT NULL, inode INTEGER NOT NULL);
CREATE TABLE chunks(id INTEGER PRIMARY KEY, path TEXT NOT NULL, start_line INTEGER NOT NULL,
    end_line INTEGER NOT NULL, hash TEXT NOT NULL, text TEXT NOT NULL, words TEXT NOT NULL);
CREATE INDEX chunks_by_path ON chunks(path);
CREATE INDEX chunks_by_hash ON chunks(hash);
CREATE VIRTUAL TABLE chunks_fts USING fts5(text, path, words, content='chunks', content_rowid='id',
    tokenize='porter unicode61 remove_diacritics 2');
CREATE TRIGGER chunks_added AFTER INSERT ON chunks BEGIN
    INSERT INTO chunks_fts(rowid, text, path, words) VALUES (new.id, new.text, new.path, new.words);
END;
CREATE TRIGGER chunks_removed AFTER DELETE ON chunks BEGIN
    INSERT INTO chunks_fts(chunks_fts, rowid, text, path, words)
        VALUES ('delete', old.id, old.text, old.path, old.words);
END;
";

/// Embeddings cost calls to a provider: an upgrade keeps them (the statement is version 1's,
/// word for word, so the kept table is exactly the current schema's).
pub(super) const SCHEMA_EMBEDDINGS: &str = "
CREATE TABLE embeddings(hash TEXT NOT NULL, model TEXT NOT NULL, vector BLOB NOT NULL,
    PRIMARY KEY(hash, model)) WITHOUT ROWID;
";

/// Version 1, as it was written: recognised exactly before its embeddings are carried over.
pub(super) const SCHEMA_V1: &str = "
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE files(path TEXT PRIMARY KEY, hash TEXT NOT NULL, size INTEGER NOT NULL, kind TEXT NOT NULL);
CREATE TABLE chunks(id INTEGER PRIMARY KEY, path TEXT NOT NULL, start_line INTEGER NOT NULL,
    end_line INTEGER NOT NULL, hash TEXT NOT NULL, text TEXT NOT NULL);
CREATE INDEX chunks_by_path ON chunks(path);
CREATE INDEX chunks_by_hash ON chunks(hash);
CREATE VIRTUAL TABLE chunks_fts USING fts5(text, path, content='chunks', content_rowid='id',
    tokenize='porter unicode61 remove_diacritics 2');
CREATE TRIGGER chunks_added AFTER INSERT ON chunks BEGIN
    INSERT INTO chunks_fts(rowid, text, path) VALUES (new.id, new.text, new.path);
END;
CREATE TRIGGER chunks_removed AFTER DELETE ON chunks BEGIN
    INSERT INTO chunks_fts(chunks_fts, rowid, text, path) VALUES ('delete', old.id, old.text, old.path);
END;
CREATE TABLE embeddings(hash TEXT NOT NULL, model TEXT NOT NULL, vector BLOB NOT NULL,
    PRIMARY KEY(hash, model)) WITHOUT ROWID;
";

/// From version 1: everything but the embeddings goes, and is made again by the next sync.
pub(super) const DROP_V1_WORDS: &str = "
DROP TRIGGER chunks_added;
DROP TRIGGER chunks_removed;
DROP TABLE chunks_fts;
DROP TABLE chunks;
DROP TABLE files;
DROP TABLE meta;
";

/// What opening found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Opened {
    /// An index of this version, or none (a new one).
    Current,
    /// An index of an older version, upgraded: every file is indexed again, embeddings kept.
    Upgraded { from: i64 },
    /// Something else (another version, not rawko's, not a database), replaced by a new index.
    Rebuilt,
}

pub(super) fn db(path: &Path, e: rusqlite::Error) -> KnowledgeError {
    KnowledgeError::Database {
        path: path.to_path_buf(),
        message: e.to_string(),
    }
}

/// The schema objects of `schema` built in memory: what an index of that version holds.
pub(super) fn objects_of(
    cell: &'static OnceLock<Vec<(String, String, String)>>,
    schema: &[&str],
    path: &Path,
) -> Result<&'static [(String, String, String)], KnowledgeError> {
    if let Some(e) = cell.get() {
        return Ok(e);
    }
    let built = Connection::open_in_memory()
        .and_then(|c| {
            for part in schema {
                c.execute_batch(part)?;
            }
            schema_objects(&c)
        })
        .map_err(|e| db(path, e))?;
    Ok(cell.get_or_init(|| built))
}

/// Open the database at `path`: a current index as it is, one of version 1 upgraded in place
/// (its embeddings kept), and anything else rebuilt from scratch.
pub(super) fn open_checked(path: &Path) -> Result<(Connection, Opened), KnowledgeError> {
    static CURRENT: OnceLock<Vec<(String, String, String)>> = OnceLock::new();
    static V1: OnceLock<Vec<(String, String, String)>> = OnceLock::new();
    let current = objects_of(&CURRENT, &[SCHEMA_WORDS, SCHEMA_EMBEDDINGS], path)?;
    let remove = || {
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
    };
    let mut opened = Opened::Current;
    for attempt in 0..2 {
        let conn = match open(path) {
            Ok(c) => c,
            // Not a database at all.
            Err(rusqlite::Error::SqliteFailure(e, _))
                if attempt == 0 && e.code == rusqlite::ErrorCode::NotADatabase =>
            {
                tracing::warn!("{} is not a database; rebuilding it", path.display());
                remove();
                opened = Opened::Rebuilt;
                continue;
            }
            Err(e) => return Err(db(path, e)),
        };
        let version: i64 = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap_or(-1);
        match schema_objects(&conn) {
            Ok(found) if found.is_empty() && version == 0 => {
                conn.execute_batch(SCHEMA_WORDS)
                    .and_then(|_| conn.execute_batch(SCHEMA_EMBEDDINGS))
                    .and_then(|_| conn.pragma_update(None, "user_version", SCHEMA_VERSION))
                    .map_err(|e| db(path, e))?;
                return Ok((conn, opened));
            }
            Ok(found) if found == current && version == SCHEMA_VERSION => {
                return Ok((conn, opened));
            }
            Ok(found)
                if attempt == 0
                    && version == 1
                    && found == objects_of(&V1, &[SCHEMA_V1], path)? =>
            {
                // Everything but the vectors is recomputed from the files by the next sync.
                let upgraded = conn
                    .execute_batch(&format!(
                        "BEGIN; {DROP_V1_WORDS} {SCHEMA_WORDS} PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;"
                    ))
                    .and_then(|_| schema_objects(&conn));
                match upgraded {
                    Ok(found) if found == current => {
                        return Ok((conn, Opened::Upgraded { from: 1 }));
                    }
                    _ => {
                        tracing::warn!("{} could not be upgraded; rebuilding it", path.display());
                        drop(conn);
                        remove();
                        opened = Opened::Rebuilt;
                    }
                }
            }
            _ if attempt == 0 => {
                // Another version, or not rawko's: the index is derived data, so it is rebuilt
                // rather than trusted.
                tracing::warn!("{} is not a current index; rebuilding it", path.display());
                drop(conn);
                remove();
                opened = Opened::Rebuilt;
            }
            _ => break,
        }
    }
    Err(KnowledgeError::Database {
        path: path.to_path_buf(),
        message: "cannot create a fresh index".into(),
    })
}

pub(super) fn open(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_NOFOLLOW,
    )?;
    conn.busy_timeout(Duration::from_secs(10))?;
    // Nothing in the file runs with more than the plainest functions, whoever wrote it.
    conn.pragma_update(None, "trusted_schema", false)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    // Pages are read from a mapping of the file rather than copied into buffers of the page
    // cache: a query in a new process reads hundreds of them, and faults in fewer pages.
    conn.pragma_update(None, "mmap_size", 256i64 << 20)?;
    Ok(conn)
}

/// Every schema object as (type, name, sql), sorted.
pub(super) fn schema_objects(conn: &Connection) -> rusqlite::Result<Vec<(String, String, String)>> {
    let mut stmt = conn
        .prepare("SELECT type, name, coalesce(sql, '') FROM sqlite_master ORDER BY type, name")?;
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect()
}
