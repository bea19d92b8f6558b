//! Text for a model: unified diffs with a file summary first, cut at a number of lines with a
//! marker that says what was left out and how to see it.

use std::time::Duration;

use gix::index::entry::Mode;

use crate::MAX_DIFF_FILE_BYTES;

/// Lines of output up to a limit, counting what did not fit.
#[derive(Debug)]
pub struct Capped {
    text: String,
    lines: usize,
    max: usize,
    dropped: usize,
}

impl Capped {
    pub fn new(max: usize) -> Self {
        Capped {
            text: String::new(),
            lines: 0,
            max,
            dropped: 0,
        }
    }

    pub fn line(&mut self, line: &str) {
        if self.lines < self.max {
            self.text.push_str(line);
            self.text.push('\n');
            self.lines += 1;
        } else {
            self.dropped += 1;
        }
    }

    pub fn is_empty(&self) -> bool {
        self.lines == 0 && self.dropped == 0
    }

    /// The text, with `hint` after the marker when lines were cut.
    pub fn finish(mut self, hint: &str) -> String {
        if self.dropped > 0 {
            self.text.push_str(&format!(
                "[cut: {} more lines not shown; {hint}]\n",
                self.dropped
            ));
        }
        self.text
    }
}

/// One file's side of a change.
#[derive(Debug, Clone, Copy)]
pub struct Side<'a> {
    pub mode: Mode,
    pub data: &'a [u8],
}

fn mode_octal(mode: Mode) -> &'static str {
    match mode {
        Mode::FILE_EXECUTABLE => "100755",
        Mode::SYMLINK => "120000",
        Mode::COMMIT => "160000",
        Mode::DIR => "040000",
        _ => "100644",
    }
}

fn is_binary(data: &[u8]) -> bool {
    data[..data.len().min(8000)].contains(&0)
}

/// A diff of many files: per-file `+added -removed` counts, then the hunks.
#[derive(Debug, Default)]
pub struct Diff {
    stats: Vec<(String, String)>,
    body: Vec<String>,
}

impl Diff {
    /// Add one file's change (`old` or `new` absent for an addition or a deletion).
    pub fn file(&mut self, path: &str, old: Option<Side<'_>>, new: Option<Side<'_>>) {
        let mut lines: Vec<String> = vec![format!("diff --git a/{path} b/{path}")];
        match (old, new) {
            (None, Some(n)) => lines.push(format!("new file mode {}", mode_octal(n.mode))),
            (Some(o), None) => lines.push(format!("deleted file mode {}", mode_octal(o.mode))),
            (Some(o), Some(n)) if o.mode != n.mode => {
                lines.push(format!("old mode {}", mode_octal(o.mode)));
                lines.push(format!("new mode {}", mode_octal(n.mode)));
            }
            _ => {}
        }
        let empty: &[u8] = &[];
        let (a, b) = (
            old.map(|s| s.data).unwrap_or(empty),
            new.map(|s| s.data).unwrap_or(empty),
        );
        let stat = if is_binary(a) || is_binary(b) {
            lines.push(format!("Binary files a/{path} and b/{path} differ"));
            "binary".to_string()
        } else if a.len() > MAX_DIFF_FILE_BYTES || b.len() > MAX_DIFF_FILE_BYTES {
            lines.push(format!(
                "[large file: {} bytes before, {} after; not diffed]",
                a.len(),
                b.len()
            ));
            "large".to_string()
        } else {
            let (a, b) = (String::from_utf8_lossy(a), String::from_utf8_lossy(b));
            let diff = similar::TextDiff::configure()
                .timeout(Duration::from_secs(2))
                .diff_lines(a.as_ref(), b.as_ref());
            let (mut added, mut removed) = (0usize, 0usize);
            for op in diff.ops() {
                for change in diff.iter_changes(op) {
                    match change.tag() {
                        similar::ChangeTag::Insert => added += 1,
                        similar::ChangeTag::Delete => removed += 1,
                        similar::ChangeTag::Equal => {}
                    }
                }
            }
            lines.push(if old.is_some() {
                format!("--- a/{path}")
            } else {
                "--- /dev/null".into()
            });
            lines.push(if new.is_some() {
                format!("+++ b/{path}")
            } else {
                "+++ /dev/null".into()
            });
            let mut unified = diff.unified_diff();
            unified.context_radius(3).missing_newline_hint(true);
            for hunk in unified.iter_hunks() {
                for l in hunk.to_string().lines() {
                    lines.push(l.to_string());
                }
            }
            format!("+{added} -{removed}")
        };
        self.stats.push((path.to_string(), stat));
        self.body.extend(lines);
    }

    pub fn is_empty(&self) -> bool {
        self.stats.is_empty()
    }

    /// The summary and as many lines of the body as `max_lines` allows.
    pub fn render(self, max_lines: usize, hint: &str) -> String {
        let mut out = String::new();
        let shown = self.stats.len().min(200);
        out.push_str(&format!("{} file(s) changed:\n", self.stats.len()));
        for (path, stat) in &self.stats[..shown] {
            out.push_str(&format!("  {path} | {stat}\n"));
        }
        if shown < self.stats.len() {
            out.push_str(&format!("  ... and {} more\n", self.stats.len() - shown));
        }
        out.push('\n');
        let mut capped = Capped::new(max_lines);
        for l in &self.body {
            capped.line(l);
        }
        out.push_str(&capped.finish(hint));
        out
    }
}

/// A repository path as text for a model: lossy UTF-8 with control characters made visible.
pub fn path(p: &gix::bstr::BStr) -> String {
    rawko_text::line(&String::from_utf8_lossy(p), 4096).into_owned()
}

/// A commit time as `YYYY-MM-DD HH:MM` (UTC).
pub fn date(seconds: i64) -> String {
    let t = if seconds >= 0 {
        std::time::UNIX_EPOCH + Duration::from_secs(seconds as u64)
    } else {
        std::time::UNIX_EPOCH
    };
    let s = humantime::format_rfc3339_seconds(t).to_string();
    // 2026-11-26T00:25:07Z
    format!("{} {}", &s[..10], &s[11..16])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_diff_shows_counts_hunks_and_a_cut_marker() {
        let mut d = Diff::default();
        let old = Side {
            mode: Mode::FILE,
            data: b"one\ntwo\nthree\n",
        };
        let new = Side {
            mode: Mode::FILE,
            data: b"one\n2\nthree\nfour\n",
        };
        d.file("f.txt", Some(old), Some(new));
        let full = d.render(100, "raise max_lines");
        assert!(full.contains("f.txt | +2 -1"), "{full}");
        assert!(full.contains("-two\n+2\n"), "{full}");
        assert!(!full.contains("[cut"), "{full}");

        let mut d = Diff::default();
        d.file("f.txt", Some(old), Some(new));
        let cut = d.render(3, "raise max_lines");
        assert!(
            cut.contains("more lines not shown; raise max_lines]"),
            "{cut}"
        );
    }

    #[test]
    fn binary_files_are_named_not_printed() {
        let mut d = Diff::default();
        d.file(
            "b.bin",
            None,
            Some(Side {
                mode: Mode::FILE,
                data: b"\0\x01\x02",
            }),
        );
        let out = d.render(100, "");
        assert!(
            out.contains("Binary files a/b.bin and b/b.bin differ"),
            "{out}"
        );
        assert!(out.contains("new file mode 100644"), "{out}");
    }

    #[test]
    fn dates_are_short_and_utc() {
        assert_eq!(date(0), "1970-01-01 00:00");
        assert_eq!(date(1_700_000_000), "2023-11-14 22:13");
    }
}
