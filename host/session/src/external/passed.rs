//! What one external agent's state passes on to the run's events: at most
//! [`MAX_TURN_TEXT`] bytes of them.

use rawko_fsm::events::{EventSink, RunEvent};

use super::MAX_TURN_TEXT;

/// The run's events from one external agent's state, up to [`MAX_TURN_TEXT`] bytes as
/// `--json` prints them: past that the rest of the state's turn is dropped, and said once to
/// be cut. The task store keeps its own record whatever passes here.
pub(super) struct Passed<'e> {
    inner: &'e dyn EventSink,
    agent: &'e str,
    left: std::cell::Cell<usize>,
    /// Tool calls passed on whose results have not come: their results were paid for with
    /// them, and pass after the cut too, so no call shown stays open.
    open: std::cell::Cell<usize>,
    cut: std::cell::Cell<bool>,
}

/// What a tool call's result may take, paid when the call passes.
const RESULT_RESERVE: usize = 1 << 10;

impl<'e> Passed<'e> {
    pub(super) fn new(inner: &'e dyn EventSink, agent: &'e str) -> Self {
        Passed {
            inner,
            agent,
            left: std::cell::Cell::new(MAX_TURN_TEXT),
            open: std::cell::Cell::new(0),
            cut: std::cell::Cell::new(false),
        }
    }
}

/// The bytes `event` takes as a `--json` line.
pub(super) fn json_size(event: &RunEvent) -> usize {
    serde_json::to_string(event).map_or(usize::MAX, |s| s.len())
}

impl EventSink for Passed<'_> {
    fn emit(&self, event: &RunEvent) {
        if let RunEvent::ToolResult { .. } = event
            && self.open.get() > 0
        {
            self.open.set(self.open.get() - 1);
            self.inner.emit(event);
            return;
        }
        if self.cut.get() {
            return;
        }
        let call = matches!(event, RunEvent::ToolCall { .. });
        let size = json_size(event).saturating_add(if call { RESULT_RESERVE } else { 0 });
        let left = self.left.get();
        if size <= left {
            self.left.set(left - size);
            self.open.set(self.open.get() + usize::from(call));
            self.inner.emit(event);
            return;
        }
        // The part of a text that fits still goes.
        if let RunEvent::Text { agent, text } = event {
            let mut end = text.len().min(left);
            loop {
                while !text.is_char_boundary(end) {
                    end -= 1;
                }
                let head = RunEvent::Text {
                    agent: agent.clone(),
                    text: text[..end].to_string(),
                };
                if end == 0 {
                    break;
                }
                if json_size(&head) <= left {
                    self.inner.emit(&head);
                    break;
                }
                end /= 2;
            }
        }
        self.left.set(0);
        self.cut.set(true);
        self.inner.emit(&RunEvent::Warning {
            message: format!(
                "{} passed on {} MiB of messages and progress: the rest of this turn is cut here \
                 (the task store keeps the end of its report)",
                self.agent,
                MAX_TURN_TEXT >> 20
            ),
        });
    }
}
