//! Problems found in agent files, each pointing at a file, line and column.
//!
//! Loading never stops at the first problem: every decoder records what it finds in a
//! [`Problems`] list and carries on, so one run of `rawko agents validate` shows everything a
//! user has to fix. A hostile file can produce a great many problems, so the list is capped.

use std::borrow::Cow;
use std::fmt;

use serde::Serialize;

/// How bad a problem is. Errors make a definition unusable; warnings do not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Warning,
    Error,
}

/// A position in a file: line and column, both counted from 1, columns in characters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Pos {
    pub line: usize,
    pub column: usize,
}

impl Pos {
    pub const START: Pos = Pos { line: 1, column: 1 };

    pub fn new(line: usize, column: usize) -> Pos {
        Pos {
            line: line.max(1),
            column: column.max(1),
        }
    }
}

/// One problem in one file, as printed: `file:line:column: message (hint)`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    /// The file as shown to the user (relative to the workspace where it lies inside it).
    pub file: String,
    pub line: usize,
    pub column: usize,
    pub severity: Severity,
    pub message: String,
    /// What to do about it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

impl Diagnostic {
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}: ", self.file, self.line, self.column)?;
        if self.severity == Severity::Warning {
            f.write_str("warning: ")?;
        }
        f.write_str(&self.message)?;
        if let Some(hint) = &self.hint {
            write!(f, " ({hint})")?;
        }
        Ok(())
    }
}

/// A problem before it knows which file it belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub severity: Severity,
    pub pos: Pos,
    pub message: String,
    pub hint: Option<String>,
}

/// The problems found in one file, in the order found.
#[derive(Debug, Default, Clone)]
pub struct Problems {
    items: Vec<Problem>,
    dropped: usize,
    dropped_errors: usize,
    /// Added to every line, for YAML that starts below line 1 (Markdown frontmatter).
    line_offset: usize,
}

/// More than this many problems in one file are counted, not listed.
const MAX_PROBLEMS: usize = 50;

impl Problems {
    pub fn new() -> Problems {
        Problems::default()
    }

    /// Shift every position recorded from now on down by `lines`.
    pub fn set_line_offset(&mut self, lines: usize) {
        self.line_offset = lines;
    }

    pub fn error(&mut self, pos: Pos, message: impl Into<String>, hint: Option<String>) {
        self.push(Severity::Error, pos, message.into(), hint);
    }

    pub fn warn(&mut self, pos: Pos, message: impl Into<String>, hint: Option<String>) {
        self.push(Severity::Warning, pos, message.into(), hint);
    }

    pub fn push(&mut self, severity: Severity, pos: Pos, message: String, hint: Option<String>) {
        if self.items.len() >= MAX_PROBLEMS {
            self.dropped += 1;
            self.dropped_errors += usize::from(severity == Severity::Error);
            return;
        }
        let pos = Pos::new(pos.line + self.line_offset, pos.column);
        self.items.push(Problem {
            severity,
            pos,
            message: one_line(message),
            hint: hint.map(one_line),
        });
    }

    pub fn has_errors(&self) -> bool {
        self.dropped_errors > 0 || self.items.iter().any(|p| p.severity == Severity::Error)
    }

    /// Take on the problems `other` recorded (already at their final positions).
    pub fn absorb(&mut self, other: Problems) {
        for item in other.items {
            if self.items.len() >= MAX_PROBLEMS {
                self.dropped += 1;
                self.dropped_errors += usize::from(item.severity == Severity::Error);
            } else {
                self.items.push(item);
            }
        }
        self.dropped += other.dropped;
        self.dropped_errors += other.dropped_errors;
    }

    /// The first error's message, if any.
    pub fn first_error(&self) -> Option<&str> {
        self.items
            .iter()
            .find(|p| p.severity == Severity::Error)
            .map(|p| p.message.as_str())
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The problems, with `file` attached; a last entry counts any that were left out.
    pub fn into_diagnostics(self, file: &str) -> Vec<Diagnostic> {
        let file = printable(file, false);
        let file: &str = &file;
        let last = self.items.last().map(|p| p.pos).unwrap_or(Pos::START);
        let mut out: Vec<Diagnostic> = self
            .items
            .into_iter()
            .map(|p| Diagnostic {
                file: file.to_string(),
                line: p.pos.line,
                column: p.pos.column,
                severity: p.severity,
                message: p.message,
                hint: p.hint,
            })
            .collect();
        if self.dropped > 0 {
            out.push(Diagnostic {
                file: file.to_string(),
                line: last.line,
                column: last.column,
                severity: if self.dropped_errors > 0 {
                    Severity::Error
                } else {
                    Severity::Warning
                },
                message: format!("{} more problems not shown", self.dropped),
                hint: Some("fix the ones above first".into()),
            });
        }
        out
    }
}

/// Longest message kept; values quoted from a file are the user's, and may be huge.
const MAX_MESSAGE_CHARS: usize = 300;

/// `text` made safe to print on a terminal by the one sanitiser ([`rawko_text`]): control
/// and deceptive format characters shown escaped; newlines and tabs kept only with `multiline`.
pub fn printable(text: &str, multiline: bool) -> Cow<'_, str> {
    if multiline {
        rawko_text::block(text, usize::MAX)
    } else {
        rawko_text::line(text, usize::MAX)
    }
}

/// One line of a message: printable, and cut short if a quoted value made it huge.
fn one_line(text: String) -> String {
    let clean = match printable(&text, false) {
        Cow::Borrowed(_) => text,
        Cow::Owned(o) => o,
    };
    if clean.chars().count() <= MAX_MESSAGE_CHARS {
        return clean;
    }
    let mut cut: String = clean.chars().take(MAX_MESSAGE_CHARS).collect();
    cut.push_str("...");
    cut
}

/// The candidate closest to `word`, if one is close enough to be a likely typo: the same
/// letters ignoring case, `_` and `-` (`max_iterations` for `maxIterations`), or a small edit
/// distance.
pub fn did_you_mean<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let norm = |s: &str| -> String {
        s.chars()
            .filter(|c| *c != '_' && *c != '-')
            .flat_map(char::to_lowercase)
            .collect()
    };
    let w = norm(word);
    if let Some(c) = candidates.iter().find(|c| norm(c) == w) {
        return Some(c);
    }
    let limit = (word.chars().count() / 3).clamp(1, 3);
    candidates
        .iter()
        .map(|c| (strsim::osa_distance(&w, &norm(c)), *c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_file_line_column_message_hint() {
        let d = Diagnostic {
            file: "agents/planner.yaml".into(),
            line: 12,
            column: 5,
            severity: Severity::Error,
            message: "unknown field 'tool'".into(),
            hint: Some("did you mean 'tools'?".into()),
        };
        assert_eq!(
            d.to_string(),
            "agents/planner.yaml:12:5: unknown field 'tool' (did you mean 'tools'?)"
        );
        let w = Diagnostic {
            severity: Severity::Warning,
            hint: None,
            ..d
        };
        assert_eq!(
            w.to_string(),
            "agents/planner.yaml:12:5: warning: unknown field 'tool'"
        );
    }

    #[test]
    fn suggestions_catch_case_separators_and_typos() {
        let keys = ["name", "tools", "maxIterations", "systemPrompt"];
        assert_eq!(did_you_mean("tool", &keys), Some("tools"));
        assert_eq!(did_you_mean("max_iterations", &keys), Some("maxIterations"));
        assert_eq!(did_you_mean("system_promt", &keys), Some("systemPrompt"));
        assert_eq!(did_you_mean("colour", &keys), None);
    }

    #[test]
    fn quoted_values_cannot_drive_the_terminal_or_flood_it() {
        let mut p = Problems::new();
        p.error(
            Pos::START,
            format!("name '{}'", "\u{1b}[2J\u{7}x"),
            Some("a\nb".into()),
        );
        p.error(Pos::START, "y".repeat(10_000), None);
        let d = p.into_diagnostics("dir/\u{1b}]0;evil\u{7}.yaml");
        let text: String = d.iter().map(|d| format!("{d}\n")).collect();
        assert!(
            !text.chars().any(|c| c.is_control() && c != '\n'),
            "{text:?}"
        );
        assert!(text.contains("name '\\u{1b}[2J\\u{7}x'"), "{text}");
        assert!(d[1].message.len() < 400);
        assert_eq!(printable("keep\n\tthis", true), "keep\n\tthis");
    }

    #[test]
    fn problems_are_capped_and_counted() {
        let mut p = Problems::new();
        for i in 0..(MAX_PROBLEMS + 7) {
            p.error(Pos::new(i + 1, 1), "x", None);
        }
        let d = p.into_diagnostics("f");
        assert_eq!(d.len(), MAX_PROBLEMS + 1);
        assert!(d.last().unwrap().message.starts_with("7 more problems"));
    }
}
