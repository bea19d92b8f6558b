//! What a run reports as it goes: the events behind the live display, `--json` lines and `-q`.

use std::io::Write;
use std::sync::Mutex;

use serde::Serialize;

/// Largest tool input an event carries whole, as JSON.
pub const MAX_EVENT_INPUT: usize = 16 << 10;

/// A tool call's input for an event: the JSON value when it is JSON and not too large, else a
/// string preview.
pub fn event_input(arguments: &str) -> serde_json::Value {
    if arguments.len() <= MAX_EVENT_INPUT
        && let Ok(v) = serde_json::from_str::<serde_json::Value>(arguments)
    {
        return v;
    }
    serde_json::Value::String(preview(arguments, 200))
}

/// One thing that happened in a run.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum RunEvent {
    TaskStarted {
        task: String,
        prompt: String,
    },
    TaskResumed {
        task: String,
        state: String,
    },
    StateEntered {
        agent: String,
        depth: u32,
    },
    /// The model is being asked (iteration `iteration` of the agent's state).
    Thinking {
        agent: String,
        iteration: u32,
    },
    /// Streamed text from the model.
    Text {
        agent: String,
        text: String,
    },
    ToolCall {
        agent: String,
        tool: String,
        /// The call's input as the JSON it is (a string preview when it is not JSON or is
        /// larger than [`MAX_EVENT_INPUT`]).
        input: serde_json::Value,
    },
    ToolResult {
        agent: String,
        tool: String,
        ok: bool,
        /// What the host decided before running it (`allowed`, `denied: ...`).
        verdict: String,
        duration_ms: f64,
        /// The first line of the output or error.
        preview: String,
    },
    StateEnded {
        agent: String,
        outcome: String,
        summary: String,
    },
    Transition {
        from: String,
        to: String,
        event: String,
        mode: String,
        reason: String,
    },
    TaskFinished {
        task: String,
        status: String,
        summary: String,
    },
    /// An external agent's plan, as it last reported it.
    Plan {
        agent: String,
        /// `{content, status}` each.
        entries: Vec<serde_json::Value>,
    },
    /// The agent's conversation outgrew its model's window: its older part was summarised.
    Compacted {
        agent: String,
        summary_chars: usize,
    },
    Warning {
        message: String,
    },
}

/// Where events go.
pub trait EventSink {
    fn emit(&self, event: &RunEvent);
}

/// Discards events (`-q`, benchmarks).
#[derive(Debug, Default)]
pub struct Quiet;

impl EventSink for Quiet {
    fn emit(&self, _: &RunEvent) {}
}

/// One JSON object per line on stdout (`--json`).
#[derive(Debug, Default)]
pub struct JsonLines {
    // Serialises concurrent writers, so lines never interleave.
    lock: Mutex<()>,
}

impl EventSink for JsonLines {
    fn emit(&self, event: &RunEvent) {
        let _guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        if let Ok(line) = serde_json::to_string(event) {
            let mut out = std::io::stdout().lock();
            // A closed pipe must not stop the run; the store still has everything.
            let _ = writeln!(out, "{line}");
            let _ = out.flush();
        }
    }
}

/// Keeps every event, for tests.
#[derive(Debug, Default)]
pub struct Recorder {
    pub events: Mutex<Vec<RunEvent>>,
}

impl EventSink for Recorder {
    fn emit(&self, event: &RunEvent) {
        self.events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(event.clone());
    }
}

/// The first line of `text`, at most `max` characters.
pub fn preview(text: &str, max: usize) -> String {
    let line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let mut out: String = line.chars().take(max).collect();
    if line.chars().count() > max {
        out.push('…');
    }
    out
}
