//! `--record FILE`: every exchange with an adapter, written as it happens in the format the
//! replay adapter plays (see `rawko_plugin_sdk::recording`), with secrets redacted.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use rawko_plugin_sdk::llm::{AdapterError, Request, Response};
use rawko_plugin_sdk::recording::{self, Exchange};

use rawko_capability::http::Redactor;

/// A recording being written. Shared by every adapter of a run, so exchanges are numbered in
/// the order they completed.
pub struct Recorder {
    path: PathBuf,
    inner: Mutex<Inner>,
}

struct Inner {
    file: File,
    next: u32,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("path", &self.path)
            .finish()
    }
}

/// A recording that could not be started: its file, and why.
#[derive(Debug, thiserror::Error)]
#[error("cannot write the recording {}: {source}", path.display())]
pub struct RecordingError {
    pub path: std::path::PathBuf,
    #[source]
    pub source: std::io::Error,
}

impl Recorder {
    /// Start a recording at `path`, replacing the file.
    pub fn create(path: &Path) -> std::io::Result<Recorder> {
        let mut file = File::create(path)?;
        writeln!(file, "{}", recording::header_line())?;
        file.flush()?;
        Ok(Recorder {
            path: path.to_path_buf(),
            inner: Mutex::new(Inner { file, next: 0 }),
        })
    }

    /// For a command's `--record FILE`: the recorder, shared, or a message naming the file.
    pub fn for_flag(
        path: Option<&Path>,
    ) -> Result<Option<std::sync::Arc<Recorder>>, RecordingError> {
        path.map(|p| {
            Recorder::create(p)
                .map(std::sync::Arc::new)
                .map_err(|source| RecordingError {
                    path: p.to_path_buf(),
                    source,
                })
        })
        .transpose()
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Append one exchange, with every secret `redactor` knows replaced. The file is flushed,
    /// so the exchange survives a crash of the run.
    pub fn record(
        &self,
        adapter: &str,
        request: &Request,
        outcome: Result<&Response, &AdapterError>,
        redactor: &Redactor,
    ) -> std::io::Result<()> {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let exchange = Exchange {
            sequence: inner.next,
            adapter: adapter.to_string(),
            request: Request {
                sequence: inner.next,
                ..request.clone()
            },
            response: outcome.ok().cloned(),
            error: outcome.err().cloned(),
        };
        let line = recording::exchange_line(&exchange);
        writeln!(inner.file, "{}", redactor.text(&line))?;
        inner.file.flush()?;
        inner.next += 1;
        Ok(())
    }
}
