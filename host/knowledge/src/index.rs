//! `.rawko/knowledge.db`: files with their content hashes, chunks, the FTS5 index over them
//! and embeddings cached by chunk hash and model.

use std::collections::{HashMap, HashSet};
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime};

use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::chunk::{Kind, chunk};
use crate::config::KnowledgeConfig;
use crate::{Embedder, KnowledgeError, Progress};

/// The index, relative to the repository root.
pub const DB_FILE: &str = ".rawko/knowledge.db";

/// Bumped when the schema changes; an index of another version is rebuilt.
const SCHEMA_VERSION: i64 = 1;

const SCHEMA: &str = "
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

/// Files hashed and chunked per transaction: a kill loses at most this much work.
const FILES_PER_BATCH: usize = 200;

/// Chunks sent to the embedder per call.
const EMBED_BATCH: usize = 64;

/// Deepest directory walked; deeper trees are not indexed below it.
const MAX_DEPTH: usize = 64;

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
    #[serde(skip)]
    pub elapsed: Duration,
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
        let conn = open_checked(&path)?;
        Ok(Index { root, path, conn })
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

    /// Bring the index up to date with the files under the root: only files whose content
    /// differs are cut again, removed files leave, and (with an embedder) chunks without a
    /// vector for its model get one. Work is committed in batches, so after a kill the next
    /// sync picks up where this one stopped.
    pub fn sync(
        &mut self,
        config: &KnowledgeConfig,
        embedder: Option<&mut dyn Embedder>,
        progress: &mut dyn Progress,
    ) -> Result<SyncReport, KnowledgeError> {
        let started = Instant::now();
        let mut report = SyncReport::default();
        self.set_meta("state", "syncing")?;
        let fingerprint = config.fingerprint();
        let previous = self.meta("config")?;
        if previous.as_deref() != Some(fingerprint.as_str()) {
            // What is indexed or how it is cut changed: every file counts as changed.
            report.rechunked = previous.is_some();
            self.conn
                .execute("UPDATE files SET hash = ''", [])
                .map_err(|e| self.db_err(e))?;
            self.set_meta("config", &fingerprint)?;
        }

        let candidates = walk(&self.root, config);
        let stored: HashMap<String, String> = {
            let mut stmt = self
                .conn
                .prepare("SELECT path, hash FROM files")
                .map_err(|e| self.db_err(e))?;
            stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
                .and_then(|rows| rows.collect())
                .map_err(|e| self.db_err(e))?
        };

        progress.phase("indexing", candidates.len() as u64);
        let mut seen: HashSet<String> = HashSet::with_capacity(candidates.len());
        let mut pending: Vec<Pending> = Vec::new();
        let mut buf = Vec::new();
        for rel in &candidates {
            progress.advance(1);
            let content = match read_text(&self.root.join(rel), config.max_file_bytes, &mut buf) {
                Read::Text => {
                    seen.insert(rel.clone());
                    &buf
                }
                Read::Binary => {
                    report.skipped_binary += 1;
                    continue;
                }
                Read::TooLarge => {
                    report.skipped_large += 1;
                    continue;
                }
                Read::Unreadable => {
                    report.skipped_unreadable += 1;
                    // Keep what was indexed: the file may be back next time.
                    seen.insert(rel.clone());
                    continue;
                }
            };
            let hash = format!("{:x}", Sha256::digest(content));
            match stored.get(rel) {
                Some(h) if *h == hash => {
                    report.unchanged += 1;
                    continue;
                }
                Some(_) => report.changed += 1,
                None => report.new += 1,
            }
            let text = String::from_utf8_lossy(content);
            let chunks = chunk(rel, &text, &config.chunking);
            report.chunks_written += chunks.len();
            pending.push(Pending {
                path: rel.clone(),
                hash,
                size: content.len() as u64,
                kind: Kind::of(rel),
                chunks,
            });
            if pending.len() >= FILES_PER_BATCH {
                self.write(std::mem::take(&mut pending))?;
            }
        }
        self.write(pending)?;

        let gone: Vec<&String> = stored.keys().filter(|p| !seen.contains(*p)).collect();
        report.removed = gone.len();
        {
            let tx = self.conn.transaction().map_err(|e| db(&self.path, e))?;
            for path in gone {
                tx.execute("DELETE FROM chunks WHERE path = ?1", [path])
                    .and_then(|_| tx.execute("DELETE FROM files WHERE path = ?1", [path]))
                    .map_err(|e| db(&self.path, e))?;
            }
            tx.commit().map_err(|e| db(&self.path, e))?;
        }

        // The words are complete; vectors that fail now are made by the next sync.
        self.set_meta("state", "complete")?;
        self.set_meta("last_sync", &now())?;
        if let Some(embedder) = embedder {
            report.embedded = self.embed_missing(embedder, progress)?;
        }
        report.elapsed = started.elapsed();
        Ok(report)
    }

    /// Replace the chunks of each file in `files`, in one transaction.
    fn write(&mut self, files: Vec<Pending>) -> Result<(), KnowledgeError> {
        if files.is_empty() {
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
                    "INSERT INTO chunks(path, start_line, end_line, hash, text)
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                )
                .map_err(|e| db(&path, e))?;
            let mut file = tx
                .prepare_cached(
                    "INSERT INTO files(path, hash, size, kind) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT(path) DO UPDATE SET hash = excluded.hash, size = excluded.size,
                     kind = excluded.kind",
                )
                .map_err(|e| db(&path, e))?;
            for f in &files {
                delete.execute([&f.path]).map_err(|e| db(&path, e))?;
                for c in &f.chunks {
                    insert
                        .execute(params![
                            f.path,
                            c.start_line as i64,
                            c.end_line as i64,
                            format!("{:x}", Sha256::digest(c.text.as_bytes())),
                            c.text
                        ])
                        .map_err(|e| db(&path, e))?;
                }
                file.execute(params![f.path, f.hash, f.size as i64, f.kind.as_str()])
                    .map_err(|e| db(&path, e))?;
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
        let words = query_words(text);
        if words.is_empty() {
            return Err(KnowledgeError::Query(
                "the query has no words to search for".into(),
            ));
        }
        // Function words match nearly every passage and rank almost nothing; they only cost.
        let content: Vec<String> = words
            .iter()
            .filter(|w| !STOP_WORDS.contains(&w.as_str()))
            .cloned()
            .collect();
        let words = if content.is_empty() { words } else { content };
        let k = k.clamp(1, 100);
        let depth = if embedder.is_some() {
            FUSION_DEPTH.max(k)
        } else {
            k
        };
        let bm25 = self.bm25(&words, depth)?;
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

    /// Chunk ids and scores (higher is better) by BM25, best first.
    fn bm25(&self, words: &[String], limit: usize) -> Result<Vec<(i64, f64)>, KnowledgeError> {
        // Each word is a quoted FTS5 string: nothing the user typed is query syntax.
        let expr = words
            .iter()
            .map(|w| format!("\"{}\"", w.replace('"', "\"\"")))
            .collect::<Vec<_>>()
            .join(" OR ");
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT rowid, bm25(chunks_fts, 1.0, 0.5) AS r FROM chunks_fts
                 WHERE chunks_fts MATCH ?1 ORDER BY r, rowid LIMIT ?2",
            )
            .map_err(|e| self.db_err(e))?;
        stmt.query_map(params![expr, limit as i64], |r| {
            Ok((r.get::<_, i64>(0)?, -r.get::<_, f64>(1)?))
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
    chunks: Vec<crate::chunk::Chunk>,
}

fn db(path: &Path, e: rusqlite::Error) -> KnowledgeError {
    KnowledgeError::Database {
        path: path.to_path_buf(),
        message: e.to_string(),
    }
}

/// Open the database at `path`, rebuilding it when it is not exactly this schema.
fn open_checked(path: &Path) -> Result<Connection, KnowledgeError> {
    // What a fresh index holds, built once per process in memory.
    static EXPECTED: OnceLock<Vec<(String, String, String)>> = OnceLock::new();
    let expected = match EXPECTED.get() {
        Some(e) => e,
        None => {
            let fresh = Connection::open_in_memory()
                .and_then(|c| schema_objects(&c, true))
                .map_err(|e| db(path, e))?;
            EXPECTED.get_or_init(|| fresh)
        }
    };
    let remove = || {
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
    };
    for attempt in 0..2 {
        let conn = match open(path) {
            Ok(c) => c,
            // Not a database at all.
            Err(rusqlite::Error::SqliteFailure(e, _))
                if attempt == 0 && e.code == rusqlite::ErrorCode::NotADatabase =>
            {
                tracing::warn!("{} is not a database; rebuilding it", path.display());
                remove();
                continue;
            }
            Err(e) => return Err(db(path, e)),
        };
        let version: i64 = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap_or(-1);
        let objects = schema_objects(&conn, false);
        match objects {
            Ok(found) if found.is_empty() && version == 0 => {
                conn.execute_batch(SCHEMA)
                    .and_then(|_| conn.pragma_update(None, "user_version", SCHEMA_VERSION))
                    .map_err(|e| db(path, e))?;
                return Ok(conn);
            }
            Ok(found) if found == *expected && version == SCHEMA_VERSION => return Ok(conn),
            _ if attempt == 0 => {
                // Another version, or not rawko's: the index is derived data, so it is rebuilt
                // rather than trusted.
                tracing::warn!("{} is not a current index; rebuilding it", path.display());
                drop(conn);
                remove();
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

/// Every schema object as (type, name, sql), sorted; `fresh` builds the schema first.
fn schema_objects(
    conn: &Connection,
    fresh: bool,
) -> rusqlite::Result<Vec<(String, String, String)>> {
    if fresh {
        conn.execute_batch(SCHEMA)?;
    }
    let mut stmt = conn
        .prepare("SELECT type, name, coalesce(sql, '') FROM sqlite_master ORDER BY type, name")?;
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect()
}

/// The files under `root` that `config` selects, relative and `/`-separated, sorted. The walk
/// respects `.gitignore`, follows no symlink, skips hidden entries, `.git/` and `.rawko/`, and
/// stops at [`MAX_DEPTH`].
fn walk(root: &Path, config: &KnowledgeConfig) -> Vec<String> {
    let mut out = Vec::new();
    let walker = ignore::WalkBuilder::new(root)
        .hidden(true)
        .git_ignore(true)
        .git_exclude(true)
        .git_global(false)
        .parents(false)
        .require_git(false)
        .ignore(true)
        .follow_links(false)
        .max_depth(Some(MAX_DEPTH))
        .sort_by_file_name(|a, b| a.cmp(b))
        .build();
    for entry in walker {
        let Ok(entry) = entry else { continue };
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let Ok(rel) = entry.path().strip_prefix(root) else {
            continue;
        };
        let Some(rel) = rel.to_str() else { continue };
        let rel = rel.replace(std::path::MAIN_SEPARATOR, "/");
        if rel.starts_with(".git/") || rel.starts_with(".rawko/") {
            continue;
        }
        if config.selects(&rel) {
            out.push(rel);
        }
    }
    out
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
