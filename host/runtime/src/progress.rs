//! The `progress` capability: text a model produces, shown while it streams in.
//!
//! An adapter reports deltas as it parses a streamed reply; the host hands them to whoever
//! asked for the completion (the CLI prints them as they come). What a plugin reports is only
//! for display: the reply that counts is the one `complete` returns. Reports are capped per call
//! so a plugin cannot flood the terminal.

use std::sync::Arc;

use crate::HostState;
use crate::bindings::progress as wit;
pub use crate::limits::MAX_PROGRESS_BYTES;

/// Where progress goes. Implementations must be quick: the plugin waits for them.
pub trait ProgressSink: Send + Sync {
    /// Visible text produced since the last call.
    fn text(&self, delta: &str);
    /// Reasoning text produced since the last call.
    fn thinking(&self, delta: &str);
}

/// Progress nobody watches.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoProgress;

impl ProgressSink for NoProgress {
    fn text(&self, _: &str) {}
    fn thinking(&self, _: &str) {}
}

/// One call's progress reporting.
pub struct ProgressCtx {
    sink: Arc<dyn ProgressSink>,
    reported: usize,
}

impl std::fmt::Debug for ProgressCtx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProgressCtx")
            .field("reported", &self.reported)
            .finish_non_exhaustive()
    }
}

impl ProgressCtx {
    pub fn new(sink: Arc<dyn ProgressSink>) -> Self {
        ProgressCtx { sink, reported: 0 }
    }

    /// Whether `delta` still fits in the call's allowance; counts it if so.
    fn admit(&mut self, delta: &str) -> bool {
        if self.reported + delta.len() > MAX_PROGRESS_BYTES {
            return false;
        }
        self.reported += delta.len();
        true
    }
}

impl wit::Host for HostState {
    fn text(&mut self, delta: String) -> wasmtime::Result<()> {
        if let Some(p) = self.progress.as_mut()
            && p.admit(&delta)
        {
            p.sink.text(&delta);
        }
        Ok(())
    }

    fn thinking(&mut self, delta: String) -> wasmtime::Result<()> {
        if let Some(p) = self.progress.as_mut()
            && p.admit(&delta)
        {
            p.sink.thinking(&delta);
        }
        Ok(())
    }
}
