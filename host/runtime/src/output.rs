//! The `output` capability: a tool handing over the start of its result before it returns.
//!
//! A tool that makes a large result (a `Read` of a big file) would otherwise build all of it in
//! its linear memory, and the host would copy all of it out again when the call returns: two
//! buffers the size of the result, each page of them a fault, and nothing shown until the end.
//! With `output.write` the tool hands over a piece at a time and reuses its buffer. The host
//! either gathers the pieces into the result (a run, `--json`, MCP: the result is used whole) or
//! passes each to a [`OutputSink`] as it comes (`rawko tool call` prints it at once). Either way
//! the pieces count against the call's output budget, and a piece past it ends the call.

use std::sync::Arc;

use wasmtime::component::{HasData, Linker};

use crate::bindings::output as wit;

/// Most reserved for gathered pieces before the first arrives: the output budgets rawko sets
/// are at most this (a bench's 64 MiB), and a larger one grows as a `String` does.
const GATHER_RESERVE: u64 = 64 << 20;

/// Where pieces go while a call runs. Implementations must be quick and must not block on a
/// slow reader: the plugin waits for them, inside its deadline.
pub trait OutputSink: Send + Sync {
    /// The next piece of the result.
    fn write(&self, piece: String);
}

/// One call's pieces: passed on to a sink, or gathered for the result, and counted against the
/// call's output budget.
#[derive(Default)]
pub struct OutputCtx {
    sink: Option<Arc<dyn OutputSink>>,
    gathered: String,
    /// Bytes handed over so far, passed on or gathered.
    written: u64,
    limit: u64,
    /// A piece went past the budget: the call has been ended for it.
    over: bool,
}

impl std::fmt::Debug for OutputCtx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutputCtx")
            .field("written", &self.written)
            .field("limit", &self.limit)
            .field("over", &self.over)
            .finish_non_exhaustive()
    }
}

/// What a finished call handed over through `output.write`.
#[derive(Debug, Default)]
pub struct Written {
    /// The pieces, in order, when they were gathered (empty when a sink had them).
    pub gathered: String,
    /// Bytes of all the pieces.
    pub bytes: u64,
    /// Whether a piece went past the budget.
    pub over: bool,
}

impl OutputCtx {
    /// Gather pieces (up to `limit` bytes) for the result.
    pub fn gathering(limit: u64) -> Self {
        OutputCtx {
            limit,
            ..OutputCtx::default()
        }
    }

    /// Pass pieces (up to `limit` bytes) on to `sink` as they come.
    pub fn passing_to(sink: Arc<dyn OutputSink>, limit: u64) -> Self {
        OutputCtx {
            sink: Some(sink),
            limit,
            ..OutputCtx::default()
        }
    }

    /// What the call handed over, leaving this context empty.
    pub fn take(&mut self) -> Written {
        Written {
            gathered: std::mem::take(&mut self.gathered),
            bytes: self.written,
            over: self.over,
        }
    }

    fn write(&mut self, piece: String) -> Result<(), OverBudget> {
        let len = piece.len() as u64;
        if self.over || self.written.saturating_add(len) > self.limit {
            self.over = true;
            return Err(OverBudget);
        }
        self.written += len;
        match &self.sink {
            Some(sink) => sink.write(piece),
            None => {
                if self.gathered.capacity() == 0 {
                    // Room for the whole budget at once (up to a bound), so a large result is
                    // not copied again each time it outgrows its buffer: reserved pages cost
                    // nothing until they are written.
                    let room = usize::try_from(self.limit.min(GATHER_RESERVE)).unwrap_or(0);
                    self.gathered.reserve(room.max(piece.len()));
                }
                self.gathered.push_str(&piece);
            }
        }
        Ok(())
    }
}

/// A piece went past the call's output budget.
#[derive(Debug, thiserror::Error)]
#[error("the tool's output went past the call's output budget")]
pub struct OverBudget;

/// The `output` capability, for [`HasData`]: its host function sees a call's [`OutputCtx`].
pub struct Output;

impl HasData for Output {
    type Data<'a> = &'a mut OutputCtx;
}

/// Link the `output` import, writing to the [`OutputCtx`] `get` projects from the store's data.
pub fn add_to_linker<T: 'static>(
    linker: &mut Linker<T>,
    get: fn(&mut T) -> &mut OutputCtx,
) -> wasmtime::Result<()> {
    wit::add_to_linker::<T, Output>(linker, get)
}

impl wit::Host for OutputCtx {
    /// A piece past the budget traps: the call ends there rather than making more that would
    /// be thrown away (the host reports the output budget, see `ToolPlugin::call`).
    fn write(&mut self, text: String) -> wasmtime::Result<()> {
        OutputCtx::write(self, text).map_err(wasmtime::Error::new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::sync::Mutex;

    #[derive(Default)]
    struct Seen(Mutex<Vec<String>>);

    impl OutputSink for Seen {
        fn write(&self, piece: String) {
            self.0.lock().unwrap().push(piece);
        }
    }

    /// Pieces are gathered in order while they fit; the first that does not is refused, and so
    /// is every later one, however small.
    #[test]
    fn pieces_are_gathered_up_to_the_budget() {
        let mut cx = OutputCtx::gathering(10);
        cx.write("abc".into()).unwrap();
        cx.write("defg".into()).unwrap();
        assert!(cx.write("hijk".into()).is_err());
        assert!(cx.write("h".into()).is_err(), "once over, stays over");
        // Through the import, a refused piece is an error, which traps the guest: the call
        // ends at that piece instead of going on to make more.
        assert!(wit::Host::write(&mut cx, "i".into()).is_err());
        let w = cx.take();
        assert_eq!((w.gathered.as_str(), w.bytes, w.over), ("abcdefg", 7, true));
    }

    /// With a sink, pieces go to it as they come and nothing is kept.
    #[test]
    fn pieces_are_passed_on_to_a_sink() {
        let seen = Arc::new(Seen::default());
        let mut cx = OutputCtx::passing_to(seen.clone(), 1 << 20);
        cx.write("one ".into()).unwrap();
        cx.write("two".into()).unwrap();
        assert_eq!(*seen.0.lock().unwrap(), ["one ", "two"]);
        let w = cx.take();
        assert_eq!((w.gathered.as_str(), w.bytes, w.over), ("", 7, false));
    }
}
