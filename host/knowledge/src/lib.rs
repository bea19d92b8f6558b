//! The knowledge layer: what a repository already knows (its docs and source), cut into
//! chunks and indexed in `.rawko/knowledge.db` so agents and users can search it without reading
//! everything.
//!
//! - [`config`]: `knowledge.yaml`, which files and how they are cut.
//! - [`chunk`]: Markdown by heading, code at item boundaries (a doc comment with its item),
//!   other text by line windows; and the words inside compound identifiers, for the index.
//! - [`Index`]: the SQLite file: files with content hashes and stat stamps, chunks, an FTS5
//!   (BM25) index, and embeddings cached by chunk hash and model. [`Index::sync`] reads only
//!   files whose stamp moved, is incremental by content hash and commits in batches, so a
//!   killed sync is completed by the next one; [`Index::refresh`] is the cheap check before a
//!   query; [`Index::query`] searches the query's words (never FTS5 syntax), chunks holding
//!   more of them first, and fuses with vector ranks when an [`Embedder`] is given.
//! - [`registry`]: the repositories indexed on this machine, for `--repo` and `--global`.

pub mod chunk;
pub mod config;
#[cfg(feature = "index")]
mod fresh;
#[cfg(feature = "index")]
mod index;
pub mod registry;

use std::path::PathBuf;

pub use config::KnowledgeConfig;
#[cfg(feature = "index")]
pub use index::{DB_FILE, Hit, Index, Status, SyncReport, query_words};

/// Something that turns texts into vectors: an adapter with embeddings.
pub trait Embedder {
    /// The model, as the cache knows it: vectors of different models never mix.
    fn model(&self) -> &str;
    /// One vector per input, in order, all the same length.
    fn embed(&mut self, inputs: &[String]) -> Result<Vec<Vec<f32>>, String>;
}

/// Progress of a long sync, for a terminal.
pub trait Progress {
    /// A new phase with `total` steps.
    fn phase(&mut self, name: &str, total: u64);
    /// `n` more steps done.
    fn advance(&mut self, n: u64);
}

/// No progress shown.
#[derive(Debug, Default)]
pub struct Quiet;

impl Progress for Quiet {
    fn phase(&mut self, _name: &str, _total: u64) {}
    fn advance(&mut self, _n: u64) {}
}

#[derive(Debug, thiserror::Error)]
pub enum KnowledgeError {
    #[error("{}:{line}:{column}: {message}", path.display())]
    Config {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("the knowledge index {}: {message}", path.display())]
    Database { path: PathBuf, message: String },
    #[error("{0}")]
    Refused(String),
    #[error("embeddings: {0}")]
    Embedding(String),
    #[error("{0}")]
    Query(String),
}
