//! `.rawko/knowledge.db`: files with their content hashes, chunks, the FTS5 index over them
//! and embeddings cached by chunk hash and model.

use std::collections::HashMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use std::time::{Duration, Instant, SystemTime};

use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::chunk::{Kind, chunk, identifier_words};
use crate::config::KnowledgeConfig;
use crate::fresh::{self, Stamp, Want};
use crate::{Embedder, KnowledgeError, Progress};

mod database;
mod stored;
#[cfg(test)]
mod tests;
mod words;

use database::{Opened, SCHEMA_VERSION, db, open_checked};
use stored::{Stored, merged};
use words::query_terms;
pub use words::query_words;

/// The index, relative to the repository root.
pub const DB_FILE: &str = ".rawko/knowledge.db";

/// Files hashed and chunked per transaction: a kill loses at most this much work.
const FILES_PER_BATCH: usize = 200;

/// Chunks sent to the embedder per call.
const EMBED_BATCH: usize = 64;

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
        let mut stored_files: Stored<Stamp> = Stored::read(
            &self.conn,
            "SELECT path, size, mtime, ctime, inode FROM files ORDER BY path",
            |r| stamp_at(r, 1),
        )
        .map_err(|e| self.db_err(e))?;
        let mut files_seen = vec![false; stored_files.len()];
        let stored_skipped: Stored<(String, Stamp)> = Stored::read(
            &self.conn,
            "SELECT path, why, size, mtime, ctime, inode FROM skipped ORDER BY path",
            |r| Ok((r.get(1)?, stamp_at(r, 2)?)),
        )
        .map_err(|e| self.db_err(e))?;
        let mut skipped_seen = vec![false; stored_skipped.len()];
        let stored_watched: Vec<(String, Stamp)> = self.rows(
            "SELECT path, size, mtime, ctime, inode FROM watched ORDER BY path",
            |r| Ok((r.get(0)?, stamp_at(r, 1)?)),
        )?;
        if rechunk {
            // What is indexed or how it is cut changed: every file counts as changed.
            report.rechunked = previous.is_some();
            for s in &mut stored_files.values {
                s.mtime = fresh::UNSETTLED;
            }
        }

        // What is there: the last listing when no directory or ignore file moved, else a walk.
        let listed = complete && !rechunk && fresh::unchanged(&self.root, &stored_watched);
        let walked = (!listed).then(|| fresh::walk(&self.root, config));
        report.walked = walked.is_some();
        let (listing, stamps): (Vec<&str>, Vec<Option<Stamp>>) = match &walked {
            Some(w) => w.files.iter().map(|(p, s)| (p.as_str(), *s)).unzip(),
            None => {
                let known = merged(&stored_files, &stored_skipped);
                let stamps = fresh::stat_all(&self.root, &known, Want::File);
                (known, stamps)
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
        // The listing is sorted as the stored rows are: one pass matches them.
        let (mut at_file, mut at_skipped) = (0, 0);
        for (&rel, &stamp) in listing.iter().zip(&stamps) {
            let Some(stamp) = stamp else { continue };
            let file = stored_files.seek(&mut at_file, rel);
            if let Some(i) = file
                && stored_files.values[i] == stamp
            {
                files_seen[i] = true;
                report.unchanged += 1;
                continue;
            }
            let skipped = stored_skipped.seek(&mut at_skipped, rel);
            if let Some(i) = skipped
                && stored_skipped.values[i].1 == stamp
                && !rechunk
            {
                skipped_seen[i] = true;
                report.count_skip(&stored_skipped.values[i].0);
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
                    if let (Skip::Unreadable, Some(i)) = (why, stored_files.find(rel)) {
                        // Keep what was indexed: the file may be back next time.
                        files_seen[i] = true;
                        continue;
                    }
                    if let Some(i) = stored_skipped.find(rel) {
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
            let file = stored_files.find(rel);
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
                    if file.is_some_and(|i| stored_files.values[i] != settled) {
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

        let gone: Vec<&str> = stored_files
            .paths()
            .zip(&files_seen)
            .filter(|(_, seen)| !**seen)
            .map(|(p, _)| p)
            .collect();
        let unskipped: Vec<&str> = stored_skipped
            .paths()
            .zip(&skipped_seen)
            .filter(|(_, seen)| !**seen)
            .map(|(p, _)| p)
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
            let cover: i64 = r.get(2)?;
            Ok((r.get::<_, i64>(0)?, cover as f64 + bm25_unit(r.get(1)?)))
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
            Ok((r.get::<_, i64>(0)?, bm25_unit(r.get(1)?)))
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

/// The stamp in columns `at..at + 4` (size, mtime, ctime, inode).
fn stamp_at(r: &rusqlite::Row<'_>, at: usize) -> rusqlite::Result<Stamp> {
    Ok(Stamp {
        size: r.get(at)?,
        mtime: r.get(at + 1)?,
        ctime: r.get(at + 2)?,
        inode: r.get(at + 3)?,
    })
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

fn now() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
}

/// FTS5's BM25 (negative, lower is better) mapped into `[0, 1)`, higher is better.
fn bm25_unit(bm25: f64) -> f64 {
    let s = (-bm25).max(0.0);
    s / (1.0 + s)
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
