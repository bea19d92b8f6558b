//! The live view of a run for a person: the current state and agent, each tool call with its
//! verdict, a spinner while the model thinks, and the model's text as it streams in.
//!
//! Everything here goes to stderr, so stdout keeps only the result (the summary, the demo's
//! diff). Every string a model, a tool or a file produced is sanitised before it reaches the
//! terminal: it must not move the cursor, retitle the window or restyle the screen.

use std::sync::Mutex;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use rawko_fsm::events::{EventSink, RunEvent, preview};

/// Longest line of streamed text shown before it is wrapped onto the next line.
const MAX_TEXT_LINE: usize = 400;

/// Renders [`RunEvent`]s for a person.
pub struct Live {
    state: Mutex<State>,
    /// The spinner while something is in progress; none between steps.
    spinner: Mutex<Option<ProgressBar>>,
    animate: bool,
    color: bool,
}

#[derive(Default)]
struct State {
    /// Streamed text not yet ended by a newline.
    pending: String,
    text_agent: String,
    depth: u32,
    /// What the last tool call was about (its path, command or pattern), for its result line.
    target: String,
}

impl Live {
    /// `animate`: draw a spinner (a terminal); otherwise plain lines. Colours follow the
    /// terminal unless `NO_COLOR` is set.
    pub fn new(animate: bool) -> Live {
        Live {
            state: Mutex::new(State::default()),
            spinner: Mutex::new(None),
            animate,
            color: animate && std::env::var_os("NO_COLOR").is_none(),
        }
    }

    fn line(&self, text: &str) {
        let spinner = self.spinner.lock().unwrap_or_else(|e| e.into_inner());
        match spinner.as_ref() {
            Some(pb) => pb.suspend(|| eprintln!("{text}")),
            None => eprintln!("{text}"),
        }
    }

    fn style(&self, code: &str, text: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }

    fn spin(&self, message: String) {
        if !self.animate {
            return;
        }
        let mut spinner = self.spinner.lock().unwrap_or_else(|e| e.into_inner());
        let pb = spinner.get_or_insert_with(|| {
            let pb = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            pb.set_style(
                ProgressStyle::with_template("{spinner} {msg} {elapsed:.dim}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            pb.enable_steady_tick(Duration::from_millis(100));
            pb
        });
        pb.set_message(message);
    }

    fn stop_spinner(&self) {
        if let Some(pb) = self
            .spinner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            pb.finish_and_clear();
        }
    }

    /// Print streamed text up to its last newline (or all of it, at the end of a reply).
    fn flush_text(&self, st: &mut State, all: bool) {
        let indent = "  ".repeat(st.depth as usize + 1);
        while let Some(nl) = st.pending.find('\n') {
            let line: String = st.pending.drain(..=nl).collect();
            let shown = safe(line.trim_end_matches('\n'), MAX_TEXT_LINE);
            self.line(&format!(
                "{indent}{}",
                self.style("2", &format!("│ {shown}"))
            ));
        }
        if all && !st.pending.trim().is_empty() {
            let shown = safe(&st.pending, MAX_TEXT_LINE);
            self.line(&format!(
                "{indent}{}",
                self.style("2", &format!("│ {shown}"))
            ));
        }
        if all {
            st.pending.clear();
        }
    }
}

impl EventSink for Live {
    fn emit(&self, event: &RunEvent) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if !matches!(event, RunEvent::Text { .. }) {
            self.flush_text(&mut st, true);
        }
        let indent = "  ".repeat(st.depth as usize);
        match event {
            RunEvent::TaskStarted { task, prompt } => {
                self.line(&format!(
                    "{} {}",
                    self.style("1", &format!("task {task}:")),
                    safe(prompt, 200)
                ));
            }
            RunEvent::TaskResumed { task, state } => {
                self.line(&format!(
                    "{} at {}",
                    self.style("1", &format!("resuming task {task}")),
                    safe(state, 80)
                ));
            }
            RunEvent::StateEntered { agent, depth } => {
                st.depth = *depth;
                let indent = "  ".repeat(*depth as usize);
                let what = if *depth == 0 {
                    format!("▶ {}", safe(agent, 80))
                } else {
                    format!("↳ asking {}", safe(agent, 80))
                };
                self.line(&format!("{indent}{}", self.style("1;36", &what)));
            }
            RunEvent::Thinking { agent, iteration } => {
                st.text_agent = agent.clone();
                self.spin(format!(
                    "{} · iteration {iteration} · thinking",
                    safe(agent, 80)
                ));
            }
            RunEvent::Text { agent, text } => {
                if st.text_agent != *agent {
                    self.flush_text(&mut st, true);
                    st.text_agent = agent.clone();
                }
                st.pending.push_str(text);
                self.flush_text(&mut st, false);
            }
            RunEvent::ToolCall { agent, tool, input } => {
                st.target = ["path", "command", "pattern", "query"]
                    .iter()
                    .find_map(|k| input.get(k).and_then(|v| v.as_str()))
                    .unwrap_or_default()
                    .to_string();
                let input = match input {
                    serde_json::Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                self.spin(format!(
                    "{} · {} {}",
                    safe(agent, 80),
                    safe(tool, 80),
                    preview(&safe(&input, 200), 60)
                ));
            }
            RunEvent::ToolResult {
                tool,
                ok,
                verdict,
                duration_ms,
                preview: first,
                ..
            } => {
                self.stop_spinner();
                let mark = if *ok {
                    self.style("32", "✓")
                } else if verdict.starts_with("denied") {
                    self.style("31", "⊘")
                } else {
                    self.style("33", "✗")
                };
                // What the call was about (the file read, the command run), then, for a
                // failure, the first line of what it said.
                let detail = if verdict.starts_with("denied") {
                    safe(verdict, 160)
                } else if st.target.is_empty() {
                    safe(first, 120)
                } else if *ok {
                    safe(&st.target, 120)
                } else {
                    format!("{}: {}", safe(&st.target, 80), safe(first, 100))
                };
                self.line(&format!(
                    "{indent}  {mark} {} {} {}",
                    safe(tool, 80),
                    self.style("2", &format!("({duration_ms:.0} ms)")),
                    detail
                ));
            }
            RunEvent::StateEnded {
                agent,
                outcome,
                summary,
            } => {
                self.stop_spinner();
                let color = if outcome == "succeeded" { "32" } else { "33" };
                self.line(&format!(
                    "{indent}  {} {}",
                    self.style(color, &format!("{} {outcome}:", safe(agent, 80))),
                    preview(&safe(summary, 2000), 160)
                ));
                if st.depth > 0 {
                    st.depth -= 1;
                }
            }
            RunEvent::Transition {
                to,
                event,
                mode,
                reason,
                ..
            } => {
                self.line(&format!(
                    "  {} {}",
                    self.style("35", &format!("→ {}", safe(to, 80))),
                    self.style("2", &{
                        // A fixed transition's reason already names the event.
                        let reason = preview(&safe(reason, 400), 100);
                        if mode == "fixed" {
                            format!("({reason})")
                        } else {
                            format!("({event}, {mode}: {reason})")
                        }
                    })
                ));
            }
            RunEvent::TaskFinished { .. } => self.stop_spinner(),
            RunEvent::Plan { agent, entries } => {
                self.stop_spinner();
                self.line(&format!(
                    "{indent}  {}",
                    self.style("2", &format!("{}'s plan:", safe(agent, 80)))
                ));
                for e in entries.iter().take(20) {
                    let mark = match e["status"].as_str() {
                        Some("completed") => "☑",
                        Some("in_progress") => "▸",
                        _ => "☐",
                    };
                    self.line(&format!(
                        "{indent}    {mark} {}",
                        safe(e["content"].as_str().unwrap_or(""), 160)
                    ));
                }
            }
            RunEvent::Compacted {
                agent,
                summary_chars,
            } => {
                self.stop_spinner();
                self.line(&format!(
                    "{indent}  {}",
                    self.style(
                        "2",
                        &format!(
                            "{} · older messages summarised to fit the model's context window \
                             ({summary_chars} characters)",
                            safe(agent, 80)
                        )
                    )
                ));
            }
            RunEvent::Warning { message } => {
                self.line(&self.style("33", &format!("warning: {}", safe(message, 500))));
            }
        }
    }
}

/// One line of outside text for the progress display: escaped and cut by the one sanitiser.
fn safe(text: &str, max_chars: usize) -> String {
    rawko_text::line(text, max_chars).into_owned()
}
