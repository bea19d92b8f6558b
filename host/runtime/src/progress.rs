//! The `progress` capability: text a model produces, shown while it streams in.
//!
//! An adapter reports deltas as it parses a streamed reply; the host hands them to whoever
//! asked for the completion (the CLI prints them as they come). What a plugin reports is only
//! for display: the reply that counts is the one `complete` returns. Reports are capped per call
//! so a plugin cannot flood the terminal.

use std::sync::Arc;

use wasmtime::component::{HasData, Linker};

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

/// One call's progress reporting: where it goes (nowhere without a sink) and how much has
/// gone there.
#[derive(Default)]
pub struct ProgressCtx {
    sink: Option<Arc<dyn ProgressSink>>,
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
        ProgressCtx {
            sink: Some(sink),
            reported: 0,
        }
    }

    /// Hand `delta` to the sink with `report`, if there is a sink and `delta` still fits in the
    /// call's allowance (which it then counts against).
    fn report(&mut self, delta: &str, report: impl FnOnce(&dyn ProgressSink, &str)) {
        if let Some(sink) = &self.sink
            && self.reported + delta.len() <= MAX_PROGRESS_BYTES
        {
            self.reported += delta.len();
            report(&**sink, delta);
        }
    }
}

/// The `progress` capability, for [`HasData`]: its host functions see a call's [`ProgressCtx`].
pub struct Progress;

impl HasData for Progress {
    type Data<'a> = &'a mut ProgressCtx;
}

/// Link the `progress` import, reporting through the [`ProgressCtx`] `get` projects from the
/// store's data.
pub fn add_to_linker<T: 'static>(
    linker: &mut Linker<T>,
    get: fn(&mut T) -> &mut ProgressCtx,
) -> wasmtime::Result<()> {
    wit::add_to_linker::<T, Progress>(linker, get)
}

impl wit::Host for ProgressCtx {
    fn text(&mut self, delta: String) -> wasmtime::Result<()> {
        self.report(&delta, |sink, d| sink.text(d));
        Ok(())
    }

    fn thinking(&mut self, delta: String) -> wasmtime::Result<()> {
        self.report(&delta, |sink, d| sink.thinking(d));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::sync::Mutex;
    use wit::Host;

    /// Bytes of text and of thinking a sink was handed.
    #[derive(Default)]
    struct Seen(Mutex<(usize, usize)>);

    impl ProgressSink for Seen {
        fn text(&self, delta: &str) {
            self.0.lock().unwrap().0 += delta.len();
        }
        fn thinking(&self, delta: &str) {
            self.0.lock().unwrap().1 += delta.len();
        }
    }

    /// Text and thinking share one allowance per call: a delta that would go over it is
    /// dropped whole, and smaller ones that still fit go through.
    #[test]
    fn progress_is_capped_per_call() {
        let seen = Arc::new(Seen::default());
        let mut cx = ProgressCtx::new(seen.clone());
        let half = "x".repeat(MAX_PROGRESS_BYTES / 2 + 1);
        cx.text(half.clone()).unwrap();
        cx.thinking(half.clone()).unwrap();
        cx.thinking("y".into()).unwrap();
        assert_eq!(*seen.0.lock().unwrap(), (half.len(), 1));
        // With no sink, progress goes nowhere.
        ProgressCtx::default().text("z".into()).unwrap();
    }
}
