//! `.rawko/knowledge.db`: files with their content hashes, chunks, the FTS5 index over them
//! and embeddings cached by chunk hash and model.

use std::collections::HashMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime};

use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::chunk::{Kind, chunk, identifier_words, split_identifier};
use crate::config::KnowledgeConfig;
use crate::fresh::{self, Stamp, Want};
use crate::{Embedder, KnowledgeError, Progress};

/// The index, relative to the repository root.
pub const DB_FILE: &str = ".rawko/knowledge.db";

/// Bumped when the schema changes: an index of version 1 is upgraded in place (its embeddings
/// kept), one of any other version rebuilt.
const SCHEMA_VERSION: i64 = 2;

/// Everything but the embeddings: what a sync recomputes from the files.
const SCHEMA_WORDS: &str = "
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
const SCHEMA_EMBEDDINGS: &str = "
CREATE TABLE embeddings(hash TEXT NOT NULL, model TEXT NOT NULL, vector BLOB NOT NULL,
    PRIMARY KEY(hash, model)) WITHOUT ROWID;
";

/// Version 1, as it was written: recognised exactly before its embeddings are carried over.
const SCHEMA_V1: &str = "
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
const DROP_V1_WORDS: &str = "
DROP TRIGGER chunks_added;
DROP TRIGGER chunks_removed;
DROP TABLE chunks_fts;
DROP TABLE chunks;
DROP TABLE files;
DROP TABLE meta;
";

/// Files hashed and chunked per transaction: a kill loses at most this much work.
const FILES_PER_BATCH: usize = 200;

/// Chunks sent to the embedder per call.
const EMBED_BATCH: usize = 64;

/// Most words of a query searched.
const MAX_QUERY_WORDS: usize = 32;

/// English function words, left out of a query that has other words.
const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "can", "do", "does", "for", "from", "how",
    "i", "in", "is", "it", "of", "on", "or", "that", "the", "this", "to", "was", "what", "when",
    "where", "which", "who", "why", "with",
];

/// Candidates each ranking contributes to the fusion.
const FUSION_DEPTH: usize = 50;

/// The reciprocal rank fusion constant (as in Cormack et al.).
const RRF_K: f64 = 60.0;

/// What a sync did.
#[derive(Debug, Default, Clone, Serialize)]
pub struct SyncReport {
    pub new: usize,
    pub changed: usize,
    pub removed: usize,
    pub unchanged: usize,
    pub skipped_binary: usize,
    pub skipped_large: usize,
    pub skipped_unreadable: usize,
    pub chunks_written: usize,
    pub embedded: usize,
    /// Whether the config changed since the last sync, so everything was cut again.
    pub rechunked: bool,
    /// Whether directories were read (a walk), rather than only the files known from the last
    /// listing stat'ed.
    #[serde(skip)]
    pub walked: bool,
    #[serde(skip)]
    pub elapsed: Duration,
}

impl SyncReport {
    fn count_skip(&mut self, why: &str) {
        match why {
            "binary" => self.skipped_binary += 1,
            "large" => self.skipped_large += 1,
            _ => self.skipped_unreadable += 1,
        }
    }
}

/// What the index holds.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    pub root: PathBuf,
    pub database: PathBuf,
    pub files: u64,
    pub chunks: u64,
    pub bytes: u64,
    /// When the last sync finished, RFC 3339.
    pub last_sync: Option<String>,
    /// Whether a sync was interrupted since (the next one completes it).
    pub interrupted: bool,
    /// Vectors per embedding model.
    pub embeddings: Vec<(String, u64)>,
}

/// One result, best first.
#[derive(Debug, Clone, Serialize)]
pub struct Hit {
    /// The repository, for queries over several.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repo: Option<PathBuf>,
    pub path: String,
    pub start_line: usize,
    pub end_line: usize,
    pub score: f64,
    pub text: String,
}

/// A repository's knowledge index.
#[derive(Debug)]
pub struct Index {
    root: PathBuf,
    path: PathBuf,
    conn: Connection,
    opened: Opened,
}

/// What opening found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Opened {
    /// An index of this version, or none (a new one).
    Current,
    /// An index of an older version, upgraded: every file is indexed again, embeddings kept.
    Upgraded { from: i64 },
    /// Something else (another version, not rawko's, not a database), replaced by a new index.
    Rebuilt,
}

impl Index {
    /// The index of the repository at `root`, created if there is none. The `.rawko/` directory
    /// and the database must be the repository's own: a symlink in their place is refused (it
    /// could point anywhere), and a database that is not exactly rawko's schema (another
    /// version, or a hostile file) is rebuilt from scratch.
    pub fn open(root: &Path) -> Result<Index, KnowledgeError> {
        let root = root.to_path_buf();
        let dir = root.join(".rawko");
        match std::fs::symlink_metadata(&dir) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(KnowledgeError::Refused(format!(
                    "{} is not a directory (a symlink or file is not followed)",
                    dir.display()
                )));
            }
            Err(_) => {
                std::fs::create_dir(&dir).map_err(|e| KnowledgeError::Database {
                    path: dir.clone(),
                    message: format!("cannot create it: {e}"),
                })?;
                // The index is this machine's; keep it out of `git add -A`.
                let _ = std::fs::write(dir.join(".gitignore"), GITIGNORE);
            }
        }
        let path = root.join(DB_FILE);
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let p = PathBuf::from(format!("{}{suffix}", path.display()));
            if let Ok(m) = std::fs::symlink_metadata(&p)
                && !m.is_file()
            {
                return Err(KnowledgeError::Refused(format!(
                    "{} is not a regular file (a symlink is not followed); remove it and sync again",
                    p.display()
                )));
            }
        }
        let (conn, opened) = open_checked(&path)?;
        Ok(Index {
            root,
            path,
            conn,
            opened,
        })
    }

    /// Open the index of `root` only if one exists.
    pub fn open_existing(root: &Path) -> Result<Option<Index>, KnowledgeError> {
        if std::fs::symlink_metadata(root.join(DB_FILE)).is_err() {
            return Ok(None);
        }
        Index::open(root).map(Some)
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// A line for the user when opening changed the index's format: what happened and what the
    /// next sync will cost.
    pub fn notice(&self) -> Option<String> {
        let db = self.path.strip_prefix(&self.root).unwrap_or(&self.path);
        match self.opened {
            Opened::Current => None,
            Opened::Upgraded { from } => Some(format!(
                "upgrading {} from format {from} to {SCHEMA_VERSION}: every file is indexed again \
                 (embeddings are kept)",
                db.display()
            )),
            Opened::Rebuilt => Some(format!(
                "{} was not an index this rawko can read: building it again",
                db.display()
            )),
        }
    }

    fn db_err(&self, e: rusqlite::Error) -> KnowledgeError {
        KnowledgeError::Database {
            path: self.path.clone(),
            message: e.to_string(),
        }
    }

    fn meta(&self, key: &str) -> Result<Option<String>, KnowledgeError> {
        self.conn
            .query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
            .optional()
            .map_err(|e| self.db_err(e))
    }

    fn set_meta(&self, key: &str, value: &str) -> Result<(), KnowledgeError> {
        self.conn
            .execute(
                "INSERT INTO meta(key, value) VALUES (?1, ?2)
                 ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                [key, value],
            )
            .map(drop)
            .map_err(|e| self.db_err(e))
    }

    /// Bring the index up to date with the files under the root: only files whose stat stamp
    /// moved are read again, and only those whose content differs are cut again; removed files
    /// leave; and (with an embedder) chunks without a vector for its model get one. Work is
    /// committed in batches, so after a kill the next sync picks up where this one stopped.
    pub fn sync(
        &mut self,
        config: &KnowledgeConfig,
        embedder: Option<&mut dyn Embedder>,
        progress: &mut dyn Progress,
    ) -> Result<SyncReport, KnowledgeError> {
        let mut report = self.update(config, progress, true)?;
        if let Some(embedder) = embedder {
            report.embedded = self.embed_missing(embedder, progress)?;
        }
        Ok(report)
    }

    /// The check before a query: what [`Index::sync`] does for words, writing nothing when
    /// nothing changed. Cheap when nothing did: no directory is read unless one changed, and
    /// only files are stat'ed, none read.
    pub fn refresh(
        &mut self,
        config: &KnowledgeConfig,
        progress: &mut dyn Progress,
    ) -> Result<SyncReport, KnowledgeError> {
        self.update(config, progress, false)
    }

    /// Bring the words up to date; `stamp` records the time of this sync even if nothing
    /// changed.
    fn update(
        &mut self,
        config: &KnowledgeConfig,
        progress: &mut dyn Progress,
        stamp: bool,
    ) -> Result<SyncReport, KnowledgeError> {
        self.update_since(config, progress, stamp, fresh::now_ns())
    }

    /// [`Index::update`], with stamps newer than `since` (less the margin) not trusted next
    /// time: `since` is taken before anything is listed.
    fn update_since(
        &mut self,
        config: &KnowledgeConfig,
        progress: &mut dyn Progress,
        stamp: bool,
        since: i64,
    ) -> Result<SyncReport, KnowledgeError> {
        let started = Instant::now();
        let mut report = SyncReport::default();
        let fingerprint = config.fingerprint();
        let previous = self.meta("config")?;
        let rechunk = previous.as_deref() != Some(fingerprint.as_str());
        let complete = self.meta("state")?.as_deref() == Some("complete");
        // What the index knows, sorted by path, with a mark for each path still there.
        let mut stored_files: Vec<(String, Stamp)> = self.rows(
            "SELECT path, size, mtime, ctime, inode FROM files ORDER BY path",
            |r| Ok((r.get(0)?, stamp_at(r, 1)?)),
        )?;
        let mut files_seen = vec![false; stored_files.len()];
        let stored_skipped: Vec<(String, (String, Stamp))> = self.rows(
            "SELECT path, why, size, mtime, ctime, inode FROM skipped ORDER BY path",
            |r| Ok((r.get(0)?, (r.get(1)?, stamp_at(r, 2)?))),
        )?;
        let mut skipped_seen = vec![false; stored_skipped.len()];
        let stored_watched: Vec<(String, Stamp)> = self.rows(
            "SELECT path, size, mtime, ctime, inode FROM watched ORDER BY path",
            |r| Ok((r.get(0)?, stamp_at(r, 1)?)),
        )?;
        if rechunk {
            // What is indexed or how it is cut changed: every file counts as changed.
            report.rechunked = previous.is_some();
            for (_, s) in &mut stored_files {
                s.mtime = fresh::UNSETTLED;
            }
        }

        // What is there: the last listing when no directory or ignore file moved, else a walk.
        let listed = complete && !rechunk && fresh::unchanged(&self.root, &stored_watched);
        let walked = (!listed).then(|| fresh::walk(&self.root, config));
        report.walked = walked.is_some();
        let listing: Vec<(&str, Option<Stamp>)> = match &walked {
            Some(w) => w.files.iter().map(|(p, s)| (p.as_str(), *s)).collect(),
            None => {
                let mut known: Vec<&str> = stored_files
                    .iter()
                    .map(|(p, _)| p.as_str())
                    .chain(stored_skipped.iter().map(|(p, _)| p.as_str()))
                    .collect();
                known.sort_unstable();
                let stamps = fresh::stat_all(&self.root, &known, Want::File);
                known.into_iter().zip(stamps).collect()
            }
        };
        let watched: Option<Vec<(String, Stamp)>> = walked.as_ref().map(|w| {
            let mut watched: Vec<(String, Stamp)> = w
                .watched
                .iter()
                .map(|(p, s)| (p.clone(), s.settled(since)))
                .collect();
            watched.sort_unstable_by(|a, b| a.0.cmp(&b.0));
            watched
        });

        let mut to_read: Vec<(&str, Stamp)> = Vec::new();
        let mut ops: Vec<Op> = Vec::new();
        for &(rel, stamp) in &listing {
            let Some(stamp) = stamp else { continue };
            let file = find(&stored_files, rel);
            if let Some(i) = file
                && stored_files[i].1 == stamp
            {
                files_seen[i] = true;
                report.unchanged += 1;
                continue;
            }
            let skipped = find(&stored_skipped, rel);
            if let Some(i) = skipped
                && stored_skipped[i].1.1 == stamp
                && !rechunk
            {
                skipped_seen[i] = true;
                report.count_skip(&stored_skipped[i].1.0);
                continue;
            }
            if stamp.size as u64 > config.max_file_bytes {
                if let Some(i) = skipped {
                    skipped_seen[i] = true;
                }
                report.skipped_large += 1;
                ops.push(Op::Skip {
                    path: rel.to_string(),
                    why: Skip::Large,
                    stamp: stamp.settled(since),
                });
                continue;
            }
            to_read.push((rel, stamp));
        }

        if !to_read.is_empty() {
            progress.phase("indexing", to_read.len() as u64);
        }
        let mut wrote = false;
        let mut buf = Vec::new();
        for (rel, stamp) in to_read {
            progress.advance(1);
            let settled = stamp.settled(since);
            let content = match read_text(&self.root.join(rel), config.max_file_bytes, &mut buf) {
                Read::Text => &buf,
                other => {
                    let why = match other {
                        Read::Binary => Skip::Binary,
                        Read::TooLarge => Skip::Large,
                        _ => Skip::Unreadable,
                    };
                    report.count_skip(why.as_str());
                    if let (Skip::Unreadable, Some(i)) = (why, find(&stored_files, rel)) {
                        // Keep what was indexed: the file may be back next time.
                        files_seen[i] = true;
                        continue;
                    }
                    if let Some(i) = find(&stored_skipped, rel) {
                        skipped_seen[i] = true;
                    }
                    ops.push(Op::Skip {
                        path: rel.to_string(),
                        why,
                        stamp: settled,
                    });
                    continue;
                }
            };
            let hash = format!("{:x}", Sha256::digest(content));
            let file = find(&stored_files, rel);
            let old = match file {
                Some(i) => {
                    files_seen[i] = true;
                    self.stored_hash(rel)?
                }
                None => None,
            };
            match old {
                Some(h) if h == hash && !rechunk => {
                    report.unchanged += 1;
                    if file.is_some_and(|i| stored_files[i].1 != settled) {
                        ops.push(Op::Restamp {
                            path: rel.to_string(),
                            stamp: settled,
                        });
                    }
                    continue;
                }
                Some(_) => report.changed += 1,
                None => report.new += 1,
            }
            let text = String::from_utf8_lossy(content);
            let chunks = chunk(rel, &text, &config.chunking);
            report.chunks_written += chunks.len();
            ops.push(Op::Index(Pending {
                path: rel.to_string(),
                hash,
                size: content.len() as u64,
                kind: Kind::of(rel),
                stamp: settled,
                chunks,
            }));
            if ops.len() >= FILES_PER_BATCH {
                self.begin(&mut wrote, rechunk.then_some(fingerprint.as_str()))?;
                self.write(std::mem::take(&mut ops))?;
            }
        }

        let gone: Vec<&String> = stored_files
            .iter()
            .zip(&files_seen)
            .filter(|(_, seen)| !**seen)
            .map(|((p, _), _)| p)
            .collect();
        let unskipped: Vec<&String> = stored_skipped
            .iter()
            .zip(&skipped_seen)
            .filter(|(_, seen)| !**seen)
            .map(|((p, _), _)| p)
            .collect();
        let watched = watched.filter(|w| *w != stored_watched);
        report.removed = gone.len();
        let changed = wrote
            || !ops.is_empty()
            || !gone.is_empty()
            || !unskipped.is_empty()
            || watched.is_some()
            || rechunk
            || !complete;
        if changed {
            self.begin(&mut wrote, rechunk.then_some(fingerprint.as_str()))?;
            self.write(ops)?;
            let path = self.path.clone();
            let tx = self.conn.transaction().map_err(|e| db(&path, e))?;
            for p in gone {
                tx.execute("DELETE FROM chunks WHERE path = ?1", [p])
                    .and_then(|_| tx.execute("DELETE FROM files WHERE path = ?1", [p]))
                    .map_err(|e| db(&path, e))?;
            }
            for p in unskipped {
                tx.execute("DELETE FROM skipped WHERE path = ?1", [p])
                    .map_err(|e| db(&path, e))?;
            }
            if let Some(watched) = watched {
                tx.execute("DELETE FROM watched", [])
                    .map_err(|e| db(&path, e))?;
                let mut insert = tx
                    .prepare_cached(
                        "INSERT INTO watched(path, size, mtime, ctime, inode)
                         VALUES (?1, ?2, ?3, ?4, ?5)",
                    )
                    .map_err(|e| db(&path, e))?;
                for (p, s) in &watched {
                    insert
                        .execute(params![p, s.size, s.mtime, s.ctime, s.inode])
                        .map_err(|e| db(&path, e))?;
                }
            }
            // The words are complete; vectors that fail now are made by the next sync.
            for (k, v) in [("state", "complete".to_string()), ("last_sync", now())] {
                tx.execute(
                    "INSERT INTO meta(key, value) VALUES (?1, ?2)
                     ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                    params![k, v],
                )
                .map_err(|e| db(&path, e))?;
            }
            tx.commit().map_err(|e| db(&path, e))?;
        } else if stamp {
            self.set_meta("last_sync", &now())?;
        }
        report.elapsed = started.elapsed();
        Ok(report)
    }

    /// Before the first write of a sync: mark the index as being synced (a kill leaves it so,
    /// and the next sync walks everything), with the config it is being cut for.
    fn begin(&self, begun: &mut bool, config: Option<&str>) -> Result<(), KnowledgeError> {
        if !*begun {
            *begun = true;
            self.set_meta("state", "syncing")?;
            if let Some(c) = config {
                self.set_meta("config", c)?;
            }
        }
        Ok(())
    }

    /// Every row `sql` selects, as `row` makes it.
    fn rows<T>(
        &self,
        sql: &str,
        row: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    ) -> Result<Vec<T>, KnowledgeError> {
        let mut stmt = self.conn.prepare_cached(sql).map_err(|e| self.db_err(e))?;
        stmt.query_map([], row)
            .and_then(|rows| rows.collect())
            .map_err(|e| self.db_err(e))
    }

    fn stored_hash(&self, path: &str) -> Result<Option<String>, KnowledgeError> {
        self.conn
            .prepare_cached("SELECT hash FROM files WHERE path = ?1")
            .and_then(|mut s| s.query_row([path], |r| r.get(0)).optional())
            .map_err(|e| self.db_err(e))
    }

    /// Apply `ops` in one transaction.
    fn write(&mut self, ops: Vec<Op>) -> Result<(), KnowledgeError> {
        if ops.is_empty() {
            return Ok(());
        }
        let path = self.path.clone();
        let tx = self.conn.transaction().map_err(|e| db(&path, e))?;
        {
            let mut delete = tx
                .prepare_cached("DELETE FROM chunks WHERE path = ?1")
                .map_err(|e| db(&path, e))?;
            let mut insert = tx
                .prepare_cached(
                    "INSERT INTO chunks(path, start_line, end_line, hash, text, words)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                )
                .map_err(|e| db(&path, e))?;
            let mut file = tx
                .prepare_cached(
                    "INSERT INTO files(path, hash, size, kind, mtime, ctime, inode)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                     ON CONFLICT(path) DO UPDATE SET hash = excluded.hash, size = excluded.size,
                     kind = excluded.kind, mtime = excluded.mtime, ctime = excluded.ctime,
                     inode = excluded.inode",
                )
                .map_err(|e| db(&path, e))?;
            let mut restamp = tx
                .prepare_cached(
                    "UPDATE files SET size = ?2, mtime = ?3, ctime = ?4, inode = ?5
                     WHERE path = ?1",
                )
                .map_err(|e| db(&path, e))?;
            let mut skip = tx
                .prepare_cached(
                    "INSERT INTO skipped(path, why, size, mtime, ctime, inode)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                     ON CONFLICT(path) DO UPDATE SET why = excluded.why, size = excluded.size,
                     mtime = excluded.mtime, ctime = excluded.ctime, inode = excluded.inode",
                )
                .map_err(|e| db(&path, e))?;
            let mut unskip = tx
                .prepare_cached("DELETE FROM skipped WHERE path = ?1")
                .map_err(|e| db(&path, e))?;
            for op in &ops {
                match op {
                    Op::Index(f) => {
                        delete.execute([&f.path]).map_err(|e| db(&path, e))?;
                        let mut words = String::new();
                        for c in &f.chunks {
                            words.clear();
                            words.push_str(&identifier_words(&f.path));
                            words.push('\n');
                            words.push_str(&identifier_words(&c.text));
                            insert
                                .execute(params![
                                    f.path,
                                    c.start_line as i64,
                                    c.end_line as i64,
                                    format!("{:x}", Sha256::digest(c.text.as_bytes())),
                                    c.text,
                                    words.trim()
                                ])
                                .map_err(|e| db(&path, e))?;
                        }
                        let s = f.stamp;
                        file.execute(params![
                            f.path,
                            f.hash,
                            f.size as i64,
                            f.kind.as_str(),
                            s.mtime,
                            s.ctime,
                            s.inode
                        ])
                        .and_then(|_| unskip.execute([&f.path]))
                        .map_err(|e| db(&path, e))?;
                    }
                    Op::Restamp { path: p, stamp: s } => {
                        restamp
                            .execute(params![p, s.size, s.mtime, s.ctime, s.inode])
                            .map_err(|e| db(&path, e))?;
                    }
                    Op::Skip {
                        path: p,
                        why,
                        stamp: s,
                    } => {
                        skip.execute(params![p, why.as_str(), s.size, s.mtime, s.ctime, s.inode])
                            .map_err(|e| db(&path, e))?;
                    }
                }
            }
        }
        tx.commit().map_err(|e| db(&path, e))
    }

    /// Embed every chunk text that has no vector for the embedder's model yet, committing each
    /// batch; how many were embedded.
    pub fn embed_missing(
        &mut self,
        embedder: &mut dyn Embedder,
        progress: &mut dyn Progress,
    ) -> Result<usize, KnowledgeError> {
        let model = embedder.model().to_string();
        let missing: Vec<(String, String)> = {
            let mut stmt = self
                .conn
                .prepare(
                    "SELECT hash, min(text) FROM chunks
                     WHERE hash NOT IN (SELECT hash FROM embeddings WHERE model = ?1)
                     GROUP BY hash",
                )
                .map_err(|e| self.db_err(e))?;
            stmt.query_map([&model], |r| Ok((r.get(0)?, r.get(1)?)))
                .and_then(|rows| rows.collect())
                .map_err(|e| self.db_err(e))?
        };
        progress.phase("embedding", missing.len() as u64);
        let mut done = 0;
        let mut dimensions: Option<usize> = None;
        for batch in missing.chunks(EMBED_BATCH) {
            let inputs: Vec<String> = batch.iter().map(|(_, t)| t.clone()).collect();
            let vectors = embedder.embed(&inputs).map_err(KnowledgeError::Embedding)?;
            if vectors.len() != inputs.len() {
                return Err(KnowledgeError::Embedding(format!(
                    "{} vectors for {} inputs",
                    vectors.len(),
                    inputs.len()
                )));
            }
            let path = self.path.clone();
            let tx = self.conn.transaction().map_err(|e| db(&path, e))?;
            for ((hash, _), v) in batch.iter().zip(&vectors) {
                let d = *dimensions.get_or_insert(v.len());
                if v.is_empty() || v.len() != d || v.iter().any(|x| !x.is_finite()) {
                    return Err(KnowledgeError::Embedding(
                        "the adapter returned empty, ragged or non-finite vectors".into(),
                    ));
                }
                tx.execute(
                    "INSERT OR REPLACE INTO embeddings(hash, model, vector) VALUES (?1, ?2, ?3)",
                    params![hash, model, to_blob(v)],
                )
                .map_err(|e| db(&path, e))?;
            }
            tx.commit().map_err(|e| db(&path, e))?;
            done += batch.len();
            progress.advance(batch.len() as u64);
        }
        Ok(done)
    }

    /// The `k` best chunks for `text`: BM25 over its words, fused with vector similarity by
    /// reciprocal rank when `embedder` is given and the index has vectors of its model.
    pub fn query(
        &self,
        text: &str,
        k: usize,
        embedder: Option<&mut dyn Embedder>,
    ) -> Result<Vec<Hit>, KnowledgeError> {
        let terms = query_terms(text);
        if terms.is_empty() {
            return Err(KnowledgeError::Query(
                "the query has no words to search for".into(),
            ));
        }
        let k = k.clamp(1, 100);
        let depth = if embedder.is_some() {
            FUSION_DEPTH.max(k)
        } else {
            k
        };
        let bm25 = self.bm25(&terms, depth)?;
        let vectors = match embedder {
            Some(e) => self.nearest(text, e, depth)?,
            None => Vec::new(),
        };
        if vectors.is_empty() {
            let ids: Vec<(i64, f64)> = bm25.into_iter().take(k).collect();
            return self.hits(&ids);
        }
        let mut fused: HashMap<i64, f64> = HashMap::new();
        for list in [&bm25, &vectors] {
            for (rank, (id, _)) in list.iter().enumerate() {
                *fused.entry(*id).or_default() += 1.0 / (RRF_K + rank as f64 + 1.0);
            }
        }
        let mut ranked: Vec<(i64, f64)> = fused.into_iter().collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        ranked.truncate(k);
        self.hits(&ranked)
    }

    /// Chunk ids and scores (higher is better), best first: chunks that hold more of the
    /// query's words first, then by BM25 (the words of identifiers and the path count for
    /// less than the text). The score is the number of words held plus BM25 mapped into
    /// `[0, 1)`, so it orders hits the same way across indexes.
    fn bm25(&self, terms: &[String], limit: usize) -> Result<Vec<(i64, f64)>, KnowledgeError> {
        // Chunks holding every word come first, and FTS5 finds those by intersecting the
        // words' lists, without scoring every chunk that holds any one of them: when there are
        // `limit` of them, they are the answer (their BM25 is the same under AND as under OR,
        // the query's phrases being the same words).
        if terms.len() > 1 {
            let all = self.ranked(&terms.join(" AND "), limit)?;
            if all.len() >= limit {
                let n = terms.len() as f64;
                return Ok(all.into_iter().map(|(id, s)| (id, n + s)).collect());
            }
        }
        self.covered(terms, limit)
    }

    /// [`Self::bm25`]'s order computed over every chunk holding any of the words.
    fn covered(&self, terms: &[String], limit: usize) -> Result<Vec<(i64, f64)>, KnowledgeError> {
        let expr = terms.join(" OR ");
        let mut sql = String::from("SELECT rowid, bm25(chunks_fts, 1.0, 0.5, 0.5) AS r, ");
        // With one word, every match holds all of it.
        let counted = if terms.len() > 1 { terms.len() } else { 0 };
        if counted == 0 {
            sql.push('1');
        }
        for i in 0..counted {
            if i > 0 {
                sql.push_str(" + ");
            }
            // Each term's matches, found once per query and looked up for every row.
            sql.push_str(&format!(
                "(rowid IN (SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ?{}))",
                i + 3
            ));
        }
        sql.push_str(
            " AS cover FROM chunks_fts WHERE chunks_fts MATCH ?1
             ORDER BY cover DESC, r, rowid LIMIT ?2",
        );
        let limit = limit as i64;
        let mut values: Vec<&dyn rusqlite::ToSql> = vec![&expr, &limit];
        values.extend(terms[..counted].iter().map(|t| t as &dyn rusqlite::ToSql));
        let mut stmt = self.conn.prepare_cached(&sql).map_err(|e| self.db_err(e))?;
        stmt.query_map(values.as_slice(), |r| {
            let s = (-r.get::<_, f64>(1)?).max(0.0);
            let cover: i64 = r.get(2)?;
            Ok((r.get::<_, i64>(0)?, cover as f64 + s / (1.0 + s)))
        })
        .and_then(|rows| rows.collect())
        .map_err(|e| self.db_err(e))
    }

    /// Chunk ids matching the FTS5 expression `expr`, best BM25 first, with BM25 mapped into
    /// `[0, 1)` (higher is better).
    fn ranked(&self, expr: &str, limit: usize) -> Result<Vec<(i64, f64)>, KnowledgeError> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT rowid, bm25(chunks_fts, 1.0, 0.5, 0.5) AS r FROM chunks_fts
                 WHERE chunks_fts MATCH ?1 ORDER BY r, rowid LIMIT ?2",
            )
            .map_err(|e| self.db_err(e))?;
        stmt.query_map(rusqlite::params![expr, limit as i64], |r| {
            let s = (-r.get::<_, f64>(1)?).max(0.0);
            Ok((r.get::<_, i64>(0)?, s / (1.0 + s)))
        })
        .and_then(|rows| rows.collect())
        .map_err(|e| self.db_err(e))
    }

    /// Chunk ids and cosine similarities to `text`'s vector, best first; empty when the index
    /// has no vectors of the embedder's model.
    fn nearest(
        &self,
        text: &str,
        embedder: &mut dyn Embedder,
        limit: usize,
    ) -> Result<Vec<(i64, f64)>, KnowledgeError> {
        let model = embedder.model().to_string();
        let has_any: bool = self
            .conn
            .query_row(
                "SELECT EXISTS(SELECT 1 FROM embeddings WHERE model = ?1)",
                [&model],
                |r| r.get(0),
            )
            .map_err(|e| self.db_err(e))?;
        if !has_any {
            return Ok(Vec::new());
        }
        let query = embedder
            .embed(&[text.to_string()])
            .map_err(KnowledgeError::Embedding)?
            .into_iter()
            .next()
            .ok_or_else(|| KnowledgeError::Embedding("no vector for the query".into()))?;
        let qn = norm(&query);
        if qn == 0.0 || query.iter().any(|x| !x.is_finite()) {
            return Err(KnowledgeError::Embedding(
                "the query's vector is zero or not finite".into(),
            ));
        }
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT c.id, e.vector FROM chunks c
                 JOIN embeddings e ON e.hash = c.hash AND e.model = ?1",
            )
            .map_err(|e| self.db_err(e))?;
        let mut rows = stmt.query([&model]).map_err(|e| self.db_err(e))?;
        let mut scored: Vec<(i64, f64)> = Vec::new();
        let mut v = Vec::new();
        while let Some(row) = rows.next().map_err(|e| self.db_err(e))? {
            let id: i64 = row.get(0).map_err(|e| self.db_err(e))?;
            let blob = row.get_ref(1).map_err(|e| self.db_err(e))?;
            let Ok(bytes) = blob.as_blob() else { continue };
            from_blob(bytes, &mut v);
            if v.len() != query.len() {
                continue;
            }
            let n = norm(&v);
            if n == 0.0 {
                continue;
            }
            let dot: f64 = v
                .iter()
                .zip(&query)
                .map(|(a, b)| f64::from(*a) * f64::from(*b))
                .sum();
            scored.push((id, dot / (n * qn)));
        }
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        scored.truncate(limit);
        Ok(scored)
    }

    fn hits(&self, ranked: &[(i64, f64)]) -> Result<Vec<Hit>, KnowledgeError> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT path, start_line, end_line, text FROM chunks WHERE id = ?1")
            .map_err(|e| self.db_err(e))?;
        let mut out = Vec::with_capacity(ranked.len());
        for (id, score) in ranked {
            let hit = stmt
                .query_row([id], |r| {
                    Ok(Hit {
                        repo: None,
                        path: r.get(0)?,
                        start_line: r.get::<_, i64>(1)? as usize,
                        end_line: r.get::<_, i64>(2)? as usize,
                        score: *score,
                        text: r.get(3)?,
                    })
                })
                .map_err(|e| self.db_err(e))?;
            out.push(hit);
        }
        Ok(out)
    }

    /// What the index holds.
    pub fn status(&self) -> Result<Status, KnowledgeError> {
        let count = |sql: &str| -> Result<u64, KnowledgeError> {
            self.conn
                .query_row(sql, [], |r| r.get::<_, i64>(0))
                .map(|n| n as u64)
                .map_err(|e| self.db_err(e))
        };
        let mut stmt = self
            .conn
            .prepare("SELECT model, count(*) FROM embeddings GROUP BY model ORDER BY model")
            .map_err(|e| self.db_err(e))?;
        let embeddings = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get::<_, i64>(1)? as u64)))
            .and_then(|rows| rows.collect())
            .map_err(|e| self.db_err(e))?;
        Ok(Status {
            root: self.root.clone(),
            database: self.path.clone(),
            files: count("SELECT count(*) FROM files")?,
            chunks: count("SELECT count(*) FROM chunks")?,
            bytes: std::fs::metadata(&self.path).map(|m| m.len()).unwrap_or(0),
            last_sync: self.meta("last_sync")?,
            interrupted: self.meta("state")?.as_deref() == Some("syncing"),
            embeddings,
        })
    }
}

/// `.rawko/.gitignore` when the index creates the directory.
const GITIGNORE: &str = "# Written by rawko: files it keeps here for this machine only.\n\
/knowledge.db\n/knowledge.db-*\n/*.db-wal\n/*.db-shm\n";

struct Pending {
    path: String,
    hash: String,
    size: u64,
    kind: Kind,
    stamp: Stamp,
    chunks: Vec<crate::chunk::Chunk>,
}

/// One change a sync writes.
enum Op {
    /// A file's chunks, new or replaced.
    Index(Pending),
    /// A file read again whose content had not changed: only its stamp is new.
    Restamp { path: String, stamp: Stamp },
    /// A file not indexed, remembered with its stamp so it is not read again until it changes.
    Skip {
        path: String,
        why: Skip,
        stamp: Stamp,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Skip {
    Binary,
    Large,
    Unreadable,
}

impl Skip {
    fn as_str(self) -> &'static str {
        match self {
            Skip::Binary => "binary",
            Skip::Large => "large",
            Skip::Unreadable => "unreadable",
        }
    }
}

/// Where `rel` is in `rows`, sorted by path.
fn find<T>(rows: &[(String, T)], rel: &str) -> Option<usize> {
    rows.binary_search_by(|(p, _)| p.as_str().cmp(rel)).ok()
}

/// The stamp in columns `at..at + 4` (size, mtime, ctime, inode).
fn stamp_at(r: &rusqlite::Row<'_>, at: usize) -> rusqlite::Result<Stamp> {
    Ok(Stamp {
        size: r.get(at)?,
        mtime: r.get(at + 1)?,
        ctime: r.get(at + 2)?,
        inode: r.get(at + 3)?,
    })
}

fn db(path: &Path, e: rusqlite::Error) -> KnowledgeError {
    KnowledgeError::Database {
        path: path.to_path_buf(),
        message: e.to_string(),
    }
}

/// The schema objects of `schema` built in memory: what an index of that version holds.
fn objects_of(
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
fn open_checked(path: &Path) -> Result<(Connection, Opened), KnowledgeError> {
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

fn open(path: &Path) -> rusqlite::Result<Connection> {
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
    Ok(conn)
}

/// Every schema object as (type, name, sql), sorted.
fn schema_objects(conn: &Connection) -> rusqlite::Result<Vec<(String, String, String)>> {
    let mut stmt = conn
        .prepare("SELECT type, name, coalesce(sql, '') FROM sqlite_master ORDER BY type, name")?;
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect()
}

enum Read {
    Text,
    Binary,
    TooLarge,
    Unreadable,
}

/// Read the regular file at `path` into `buf` if it is text no larger than `max` bytes.
fn read_text(path: &Path, max: u64, buf: &mut Vec<u8>) -> Read {
    buf.clear();
    let Ok(file) = std::fs::File::open(path) else {
        return Read::Unreadable;
    };
    match file.metadata() {
        Ok(m) if !m.is_file() => return Read::Unreadable,
        Ok(m) if m.len() > max => return Read::TooLarge,
        Ok(_) => {}
        Err(_) => return Read::Unreadable,
    }
    // The size may have changed since; never read more than the cap.
    if file.take(max + 1).read_to_end(buf).is_err() {
        return Read::Unreadable;
    }
    if buf.len() as u64 > max {
        return Read::TooLarge;
    }
    if buf[..buf.len().min(8192)].contains(&0) {
        return Read::Binary;
    }
    Read::Text
}

/// The words of a query, lowercased, as FTS5 will match them: runs of letters and digits.
pub fn query_words(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for w in text.split(|c: char| !c.is_alphanumeric()) {
        if w.is_empty() {
            continue;
        }
        let w = w.to_lowercase();
        if !out.contains(&w) {
            out.push(w);
        }
        if out.len() == MAX_QUERY_WORDS {
            break;
        }
    }
    out
}

/// The query's words as FTS5 expressions made of quoted strings only (nothing the user typed is
/// query syntax): each word, or for a compound identifier (`reconcileLedgerDrift`) the word or
/// its parts in a row, which is how the index holds `reconcile_ledger_drift` and the
/// identifier's words. Function words are left out of a query that has other words.
fn query_terms(text: &str) -> Vec<String> {
    let mut words: Vec<(String, Vec<String>)> = Vec::new();
    let mut parts = Vec::new();
    for w in text.split(|c: char| !c.is_alphanumeric()) {
        if w.is_empty() {
            continue;
        }
        let lower = w.to_lowercase();
        if words.iter().any(|(l, _)| *l == lower) {
            continue;
        }
        parts.clear();
        split_identifier(w, &mut parts);
        let split = if parts.len() > 1 {
            parts.iter().map(|p| p.to_lowercase()).collect()
        } else {
            Vec::new()
        };
        words.push((lower, split));
        if words.len() == MAX_QUERY_WORDS {
            break;
        }
    }
    let content = words.iter().any(|(w, _)| !STOP_WORDS.contains(&w.as_str()));
    let quote = |s: &str| format!("\"{}\"", s.replace('"', "\"\""));
    words
        .into_iter()
        .filter(|(w, _)| !content || !STOP_WORDS.contains(&w.as_str()))
        .map(|(w, split)| {
            if split.is_empty() {
                quote(&w)
            } else {
                format!("({} OR {})", quote(&w), quote(&split.join(" ")))
            }
        })
        .collect()
}

fn now() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
}

fn to_blob(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn from_blob(b: &[u8], out: &mut Vec<f32>) {
    out.clear();
    out.extend(
        b.chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
    );
}

fn norm(v: &[f32]) -> f64 {
    v.iter()
        .map(|x| f64::from(*x) * f64::from(*x))
        .sum::<f64>()
        .sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Quiet;

    fn repo() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let w = |rel: &str, text: &str| {
            let p = dir.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        w(
            "README.md",
            "# Widgets\nThis project renders widgets.\n\n## Install\nRun the installer script.\n",
        );
        w(
            "src/parse.rs",
            "/// Parse a frobnicator configuration.\nfn parse_config() {}\n\nfn unrelated() {}\n",
        );
        w("src/render.rs", "fn render_widget() { draw(); }\n");
        w("notes.txt", "Meeting notes about the release plan.\n");
        dir
    }

    fn sync(root: &Path) -> SyncReport {
        let mut index = Index::open(root).unwrap();
        index
            .sync(&KnowledgeConfig::defaults(), None, &mut Quiet)
            .unwrap()
    }

    #[test]
    fn a_query_finds_its_chunk_with_lines() {
        let dir = repo();
        let r = sync(dir.path());
        assert_eq!(r.new, 4);
        let index = Index::open(dir.path()).unwrap();
        let hits = index.query("frobnicator", 5, None).unwrap();
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].path, "src/parse.rs");
        assert_eq!((hits[0].start_line, hits[0].end_line), (1, 4));
        // Stemmed: "installing" finds "installer"? No: porter maps both to "instal".
        let hits = index.query("installing", 5, None).unwrap();
        assert_eq!(hits[0].path, "README.md");
        assert_eq!(hits[0].start_line, 4);
    }

    #[test]
    fn query_syntax_is_never_passed_to_fts5() {
        let dir = repo();
        sync(dir.path());
        let index = Index::open(dir.path()).unwrap();
        for q in [
            "\"unbalanced",
            "widgets AND OR NOT",
            "path:README",
            "NEAR(a b)",
            "w*",
            "render_widget)",
            "col:text ^x",
        ] {
            index
                .query(q, 5, None)
                .unwrap_or_else(|e| panic!("{q}: {e}"));
        }
        assert!(index.query("!!! --- *", 5, None).is_err());
    }

    #[test]
    fn an_unchanged_tree_rewrites_nothing_and_an_edit_only_its_file() {
        let dir = repo();
        sync(dir.path());
        let again = sync(dir.path());
        assert_eq!((again.new, again.changed, again.unchanged), (0, 0, 4));
        assert_eq!(again.chunks_written, 0);
        std::fs::write(dir.path().join("notes.txt"), "Now about lunch.\n").unwrap();
        std::fs::remove_file(dir.path().join("src/render.rs")).unwrap();
        let r = sync(dir.path());
        assert_eq!((r.changed, r.removed, r.unchanged), (1, 1, 2));
        let index = Index::open(dir.path()).unwrap();
        assert!(index.query("release", 5, None).unwrap().is_empty());
        assert_eq!(index.query("lunch", 5, None).unwrap().len(), 1);
        assert!(index.query("draw", 5, None).unwrap().is_empty());
    }

    #[test]
    fn a_hostile_database_is_rebuilt_and_a_symlinked_one_refused() {
        let dir = repo();
        std::fs::create_dir(dir.path().join(".rawko")).unwrap();
        let path = dir.path().join(DB_FILE);
        {
            let c = Connection::open(&path).unwrap();
            c.execute_batch(
                "CREATE TABLE chunks(x); CREATE TRIGGER t AFTER INSERT ON chunks BEGIN SELECT 1; END;",
            )
            .unwrap();
        }
        sync(dir.path());
        let index = Index::open(dir.path()).unwrap();
        assert_eq!(index.status().unwrap().files, 4);
        drop(index);

        let other = tempfile::tempdir().unwrap();
        let dir2 = repo();
        std::fs::create_dir(dir2.path().join(".rawko")).unwrap();
        std::os::unix::fs::symlink(other.path().join("planted.db"), dir2.path().join(DB_FILE))
            .unwrap();
        let e = Index::open(dir2.path()).unwrap_err().to_string();
        assert!(e.contains("not a regular file"), "{e}");
        assert!(!other.path().join("planted.db").exists());
        std::fs::remove_file(dir2.path().join(DB_FILE)).unwrap();
        std::fs::remove_dir(dir2.path().join(".rawko")).unwrap();
        std::os::unix::fs::symlink(other.path(), dir2.path().join(".rawko")).unwrap();
        let e = Index::open(dir2.path()).unwrap_err().to_string();
        assert!(e.contains("not a directory"), "{e}");
        assert!(std::fs::read_dir(other.path()).unwrap().next().is_none());
    }

    /// Refresh as if the listing happened `ahead` from now, so that files written by the test
    /// count as settled.
    fn refresh_ahead(root: &Path) -> SyncReport {
        let mut index = Index::open(root).unwrap();
        let since = fresh::now_ns() + 3_000_000_000;
        index
            .update_since(&KnowledgeConfig::defaults(), &mut Quiet, false, since)
            .unwrap()
    }

    /// Past one tick of the file system's clock.
    fn tick() {
        std::thread::sleep(Duration::from_millis(50));
    }

    #[test]
    fn a_settled_tree_is_checked_by_stat_alone_and_every_change_is_still_seen() {
        let dir = repo();
        let first = refresh_ahead(dir.path());
        assert!(first.walked);
        assert_eq!(first.new, 4);
        let again = refresh_ahead(dir.path());
        assert!(!again.walked, "nothing moved: no directory is read");
        assert_eq!((again.unchanged, again.changed, again.new), (4, 0, 0));

        // An edit in place that keeps the size: its directory does not move, the file does.
        tick();
        std::fs::write(
            dir.path().join("notes.txt"),
            "Meeting notes about the zebroid plan.\n",
        )
        .unwrap();
        let r = refresh_ahead(dir.path());
        assert!(!r.walked);
        assert_eq!((r.changed, r.unchanged), (1, 3));
        let index = Index::open(dir.path()).unwrap();
        assert_eq!(index.query("zebroid", 5, None).unwrap().len(), 1);

        // A file in a new nested directory, then one removed: directories moved, so a walk.
        tick();
        std::fs::create_dir_all(dir.path().join("a/b/c")).unwrap();
        std::fs::write(dir.path().join("a/b/c/deep.md"), "# Deep\nokapi\n").unwrap();
        let r = refresh_ahead(dir.path());
        assert!(r.walked);
        assert_eq!(r.new, 1);
        tick();
        std::fs::remove_file(dir.path().join("src/render.rs")).unwrap();
        let r = refresh_ahead(dir.path());
        assert!(r.walked);
        assert_eq!(r.removed, 1);
        assert!(!refresh_ahead(dir.path()).walked);

        // An ignore file edited in place moves only itself, and is watched.
        std::fs::write(dir.path().join(".gitignore"), "nothing\n").unwrap();
        refresh_ahead(dir.path());
        tick();
        std::fs::write(dir.path().join(".gitignore"), "a/\n\n\n\n\n").unwrap();
        let r = refresh_ahead(dir.path());
        assert!(r.walked);
        assert_eq!(r.removed, 1);
        let index = Index::open(dir.path()).unwrap();
        assert!(index.query("okapi", 5, None).unwrap().is_empty());
    }

    #[test]
    fn files_just_written_are_read_again_until_they_settle() {
        let dir = repo();
        sync(dir.path());
        let mut index = Index::open(dir.path()).unwrap();
        // Written moments ago: not trusted by stamp, so read (and found unchanged).
        let r = index
            .refresh(&KnowledgeConfig::defaults(), &mut Quiet)
            .unwrap();
        assert!(r.walked);
        assert_eq!((r.unchanged, r.chunks_written), (4, 0));
        // A binary file is remembered, not read again while its stamp holds.
        std::fs::write(dir.path().join("blob.txt"), b"a\0b").unwrap();
        let r = refresh_ahead(dir.path());
        assert_eq!(r.skipped_binary, 1);
        let r = refresh_ahead(dir.path());
        assert!(!r.walked);
        assert_eq!(r.skipped_binary, 1);
    }

    #[test]
    fn a_version_1_index_is_upgraded_keeping_its_embeddings() {
        let dir = repo();
        std::fs::create_dir(dir.path().join(".rawko")).unwrap();
        let path = dir.path().join(DB_FILE);
        {
            let c = Connection::open(&path).unwrap();
            c.execute_batch(SCHEMA_V1).unwrap();
            c.pragma_update(None, "user_version", 1).unwrap();
            c.execute_batch(
                "INSERT INTO files VALUES ('gone.md', 'h', 1, 'markdown');
                 INSERT INTO chunks(path, start_line, end_line, hash, text) VALUES ('gone.md', 1, 1, 'h', 'ghostword');
                 INSERT INTO embeddings VALUES ('h', 'm', x'0000803f');",
            )
            .unwrap();
        }
        let mut index = Index::open(dir.path()).unwrap();
        let notice = index.notice().unwrap();
        assert!(notice.contains("from format 1 to 2"), "{notice}");
        assert!(notice.contains("embeddings are kept"), "{notice}");
        let r = index
            .sync(&KnowledgeConfig::defaults(), None, &mut Quiet)
            .unwrap();
        assert_eq!(r.new, 4);
        assert!(index.query("ghostword", 5, None).unwrap().is_empty());
        assert_eq!(index.query("frobnicator", 5, None).unwrap().len(), 1);
        let status = index.status().unwrap();
        assert_eq!(status.embeddings, [("m".to_string(), 1)]);
        drop(index);
        assert_eq!(Index::open(dir.path()).unwrap().notice(), None);
    }

    #[test]
    fn chunks_holding_more_of_the_query_rank_first_and_identifiers_split() {
        let dir = tempfile::tempdir().unwrap();
        let w = |rel: &str, text: &str| {
            let p = dir.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        w(
            "two.md",
            "# Two\nalpha beta alpha beta alpha beta alpha beta\n",
        );
        w(
            "three.rs",
            "/// alpha, beta and gamma, in a long comment about many other things as well\nfn f() {}\n",
        );
        w("camel.ts", "function gammaDeltaEpsilon() {}\n");
        sync(dir.path());
        let index = Index::open(dir.path()).unwrap();
        let hits = index.query("alpha beta gamma", 5, None).unwrap();
        assert_eq!(hits[0].path, "three.rs");
        assert!(
            hits[0].score >= 3.0 && hits[0].score < 4.0,
            "{}",
            hits[0].score
        );
        assert_eq!(hits[1].path, "two.md");
        assert!(hits[1].score >= 2.0 && hits[1].score < 3.0);
        assert_eq!(index.query("delta", 5, None).unwrap()[0].path, "camel.ts");
        assert_eq!(
            index.query("DeltaEpsilon", 5, None).unwrap()[0].path,
            "camel.ts"
        );
        assert_eq!(
            query_terms("the reconcileLedger \"x\" of"),
            ["(\"reconcileledger\" OR \"reconcile ledger\")", "\"x\""]
        );
    }

    /// Where enough chunks hold every word, they are found without scoring the others, and
    /// the answer is the one the scoring of every chunk gives.
    #[test]
    fn chunks_holding_every_word_are_found_as_scoring_all_would_find_them() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..40 {
            let text = match i % 4 {
                0 => format!("# N{i}\nalpha beta gamma {}\n", "filler ".repeat(i)),
                1 => format!("# N{i}\nalpha beta alpha beta {}\n", "filler ".repeat(i)),
                2 => format!("# N{i}\ngamma {}\n", "alpha ".repeat(i)),
                _ => format!("# N{i}\nnothing here {i}\n"),
            };
            std::fs::write(dir.path().join(format!("n{i:02}.md")), text).unwrap();
        }
        sync(dir.path());
        let index = Index::open(dir.path()).unwrap();
        let terms = query_terms("alpha beta gamma");
        for limit in [1, 5, 10, 11, 30] {
            let fast = index.bm25(&terms, limit).unwrap();
            let all = index.covered(&terms, limit).unwrap();
            assert_eq!(fast, all, "limit {limit}");
        }
        // Ten chunks hold all three words: asked for more, the rest come by how many they hold.
        let hits = index.bm25(&terms, 30).unwrap();
        assert!(hits[..10].iter().all(|h| h.1 >= 3.0), "{hits:?}");
        assert!(hits[10..].iter().all(|h| h.1 < 3.0), "{hits:?}");
    }

    struct Letters;
    impl Embedder for Letters {
        fn model(&self) -> &str {
            "letters"
        }
        /// A vector of letter counts: texts sharing letters are near.
        fn embed(&mut self, inputs: &[String]) -> Result<Vec<Vec<f32>>, String> {
            Ok(inputs
                .iter()
                .map(|t| {
                    let mut v = vec![0.0f32; 26];
                    for c in t.to_ascii_lowercase().bytes() {
                        if c.is_ascii_lowercase() {
                            v[(c - b'a') as usize] += 1.0;
                        }
                    }
                    v[25] += 0.01;
                    v
                })
                .collect())
        }
    }

    #[test]
    fn embeddings_are_cached_by_chunk_and_fused_with_bm25() {
        let dir = repo();
        let mut index = Index::open(dir.path()).unwrap();
        let r = index
            .sync(&KnowledgeConfig::defaults(), Some(&mut Letters), &mut Quiet)
            .unwrap();
        assert!(r.embedded > 0);
        let r = index
            .sync(&KnowledgeConfig::defaults(), Some(&mut Letters), &mut Quiet)
            .unwrap();
        assert_eq!(r.embedded, 0);
        let status = index.status().unwrap();
        assert_eq!(status.embeddings[0].0, "letters");
        let hits = index.query("widgets", 10, Some(&mut Letters)).unwrap();
        // Every chunk has a vector, so the fusion ranks them all; BM25's hit is first.
        assert_eq!(hits.len() as u64, status.chunks);
        assert_eq!(hits[0].path, "README.md");
    }
}
