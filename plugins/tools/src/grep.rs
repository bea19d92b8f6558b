//! `Grep`: search file contents with a regular expression.

use std::path::Path;

use regex::bytes::{Regex, RegexBuilder};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::text::Budget;
use crate::{Context, Tool, ToolError, text};

/// Most output lines in `content` mode, and most files in the other modes.
pub const MAX_RESULTS: usize = 1000;
/// Most context lines on each side of a match.
pub const MAX_CONTEXT: u32 = 20;
/// Files larger than this are skipped: they are almost never source, and would dominate time.
pub const MAX_FILE_BYTES: u64 = 64 << 20;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OutputMode {
    /// Matching lines as `path:line:text`, with context lines as `path-line-text`.
    Content,
    /// Only the paths of files that match.
    #[default]
    FilesWithMatches,
    /// The number of matching lines in each file, as `path:count`.
    Count,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GrepInput {
    /// A regular expression (Rust `regex` syntax; `^` and `$` match at line boundaries).
    pub pattern: String,
    /// A file or directory to search (default: the workspace root).
    pub path: Option<String>,
    /// Only search files matching this glob, such as `*.rs` (matched against the file name) or
    /// `src/**/*.rs` (matched against the path below `path`).
    pub glob: Option<String>,
    /// `content`, `files_with_matches` (default) or `count`.
    pub output_mode: Option<OutputMode>,
    /// Lines of context to show before and after each match in `content` mode (at most 20).
    #[schemars(range(max = 20))]
    pub context: Option<u32>,
    /// Match without regard to case.
    #[serde(default)]
    pub case_insensitive: bool,
}

pub struct Grep;

impl Tool for Grep {
    const NAME: &'static str = "Grep";
    const DESCRIPTION: &'static str = "Search file contents with a regular expression. `output_mode` \
is `files_with_matches` (default: paths of matching files), `content` (matching lines as \
`path:line:text`, with `context` lines around them) or `count` (matching lines per file). Filter \
files with `glob`; files ignored by .gitignore, binary files and .git are skipped. Results are \
capped at 1000.";
    type Input = GrepInput;

    fn call(input: GrepInput, cx: &Context) -> Result<String, ToolError> {
        grep(&input, cx)
    }
}

pub fn grep(input: &GrepInput, cx: &Context) -> Result<String, ToolError> {
    let re = RegexBuilder::new(&input.pattern)
        .multi_line(true)
        .case_insensitive(input.case_insensitive)
        .size_limit(8 << 20)
        .build()
        .map_err(|e| ToolError::InvalidInput(format!("bad regular expression: {e}")))?;
    let context = input.context.unwrap_or(0);
    if context > MAX_CONTEXT {
        return Err(ToolError::InvalidInput(format!(
            "context is {context}; at most {MAX_CONTEXT} lines are allowed"
        )));
    }
    let mode = input.output_mode.unwrap_or_default();
    let root = cx.readable(input.path.as_deref().unwrap_or("."))?;
    let filter = match &input.glob {
        Some(g) => Some(GlobFilter::new(g)?),
        None => None,
    };

    let meta = std::fs::metadata(&root).map_err(|e| ToolError::io(&root, &e))?;
    let mut search = Search {
        re,
        mode,
        context: context as usize,
        out: Budget::new(cx.max_output_bytes()),
        results: 0,
        capped: false,
        files_matched: 0,
    };

    if meta.is_file() {
        search.file(&root, &cx.display(&root));
    } else {
        let mut walk = crate::glob::walker(&root);
        walk.sort_by_file_name(|a, b| a.cmp(b));
        for entry in walk.build() {
            let Ok(entry) = entry else { continue };
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                continue;
            }
            let path = entry.path();
            if let Some(f) = &filter {
                let rel = path.strip_prefix(&root).unwrap_or(path);
                if !f.matches(rel) {
                    continue;
                }
            }
            if entry.metadata().is_ok_and(|m| m.len() > MAX_FILE_BYTES) {
                continue;
            }
            search.file(path, &cx.display(path));
            if search.capped {
                break;
            }
        }
    }

    let Search {
        out,
        capped,
        files_matched,
        results,
        ..
    } = search;
    if files_matched == 0 {
        return Ok(format!(
            "No matches for {:?} under {}",
            input.pattern,
            cx.display(&root)
        ));
    }
    let full = out.is_full();
    let mut result = out.finish();
    if capped || full {
        let what = match mode {
            OutputMode::Content => "lines",
            _ => "files",
        };
        result.push_str(&format!(
            "[results cut after {results} {what}{}; narrow the pattern, path or glob]\n",
            if full {
                " (output size limit reached)"
            } else {
                ""
            }
        ));
    }
    Ok(result)
}

struct Search {
    re: Regex,
    mode: OutputMode,
    context: usize,
    out: Budget,
    /// Lines written in content mode, files in the others.
    results: usize,
    capped: bool,
    files_matched: usize,
}

impl Search {
    fn file(&mut self, path: &Path, shown: &str) {
        let Ok(bytes) = std::fs::read(path) else {
            return;
        };
        if text::looks_binary(&bytes) {
            return;
        }
        match self.mode {
            OutputMode::FilesWithMatches => {
                if self.re.is_match(&bytes) {
                    self.files_matched += 1;
                    self.emit(shown);
                }
            }
            OutputMode::Count => {
                let n = matching_lines(&self.re, &bytes).len();
                if n > 0 {
                    self.files_matched += 1;
                    self.emit(&format!("{shown}:{n}"));
                }
            }
            OutputMode::Content => {
                let lines = matching_lines(&self.re, &bytes);
                if lines.is_empty() {
                    return;
                }
                self.files_matched += 1;
                self.content(&bytes, &lines, shown);
            }
        }
    }

    fn emit(&mut self, line: &str) -> bool {
        if self.results >= MAX_RESULTS {
            self.capped = true;
            return false;
        }
        if !self.out.line(line) {
            self.capped = true;
            return false;
        }
        self.results += 1;
        true
    }

    /// Write the matching lines of one file with their context; with context, groups that do
    /// not touch are separated by `--`, as grep does.
    fn content(&mut self, bytes: &[u8], matches: &[usize], shown: &str) {
        let starts = line_starts(bytes);
        let last = starts.len() - 2;
        // Merge each match's window with the next when they touch or overlap.
        let mut windows: Vec<(usize, usize)> = Vec::new();
        for &m in matches {
            let (from, to) = (m.saturating_sub(self.context), (m + self.context).min(last));
            match windows.last_mut() {
                Some(w) if from <= w.1 + 1 => w.1 = to,
                _ => windows.push((from, to)),
            }
        }
        let mut next_match = matches.iter().peekable();
        for (k, &(from, to)) in windows.iter().enumerate() {
            if k > 0 && self.context > 0 && !self.emit("--") {
                return;
            }
            for n in from..=to {
                let is_match = next_match.next_if_eq(&&n).is_some();
                let sep = if is_match { ':' } else { '-' };
                let text = String::from_utf8_lossy(line_text(bytes, &starts, n));
                if !self.emit(&format!("{shown}{sep}{}{sep}{text}", n + 1)) {
                    return;
                }
            }
        }
    }
}

/// Zero-based numbers of the lines where a match starts, each line once.
fn matching_lines(re: &Regex, bytes: &[u8]) -> Vec<usize> {
    let mut lines = Vec::new();
    // `pos` is always the start of line number `line`.
    let mut line = 0usize;
    let mut pos = 0usize;
    while pos < bytes.len() || pos == 0 {
        let Some(m) = re.find_at(bytes, pos) else {
            break;
        };
        line += memchr::memchr_iter(b'\n', &bytes[pos..m.start()]).count();
        lines.push(line);
        // One entry per line is enough: go on from the next line.
        match memchr::memchr(b'\n', &bytes[m.start()..]) {
            Some(nl) => {
                pos = m.start() + nl + 1;
                line += 1;
            }
            None => break,
        }
    }
    lines
}

/// Byte offsets where each line starts, then the end: always at least one line.
fn line_starts(bytes: &[u8]) -> Vec<usize> {
    let mut starts = vec![0];
    starts.extend(memchr::memchr_iter(b'\n', bytes).map(|i| i + 1));
    if starts.len() == 1 || *starts.last().unwrap_or(&0) != bytes.len() {
        starts.push(bytes.len());
    }
    starts
}

fn line_text<'a>(bytes: &'a [u8], starts: &[usize], n: usize) -> &'a [u8] {
    let mut text = &bytes[starts[n]..starts[n + 1]];
    if let Some(t) = text.strip_suffix(b"\n") {
        text = t;
    }
    if let Some(t) = text.strip_suffix(b"\r") {
        text = t;
    }
    text
}

/// The `glob` filter: a pattern without `/` matches file names, one with `/` matches the path
/// below the search root.
struct GlobFilter {
    matcher: globset::GlobMatcher,
    whole_path: bool,
}

impl GlobFilter {
    fn new(pattern: &str) -> Result<Self, ToolError> {
        let matcher = globset::GlobBuilder::new(pattern)
            .literal_separator(true)
            .build()
            .map_err(|e| ToolError::InvalidInput(format!("bad glob {pattern:?}: {e}")))?
            .compile_matcher();
        Ok(GlobFilter {
            matcher,
            whole_path: pattern.contains('/'),
        })
    }

    fn matches(&self, rel: &Path) -> bool {
        if self.whole_path {
            self.matcher.is_match(rel)
        } else {
            rel.file_name().is_some_and(|n| self.matcher.is_match(n))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::setup;

    fn input(pattern: &str) -> GrepInput {
        GrepInput {
            pattern: pattern.into(),
            path: None,
            glob: None,
            output_mode: None,
            context: None,
            case_insensitive: false,
        }
    }

    fn files() -> (tempfile::TempDir, Context) {
        setup(&[
            ("src/a.rs", b"fn main() {\n    let x = 1;\n}\n"),
            ("src/b.rs", b"// TODO one\nfn b() {}\n// todo two\n"),
            ("notes.md", b"TODO: write docs\n"),
            ("ignored/x.rs", b"TODO hidden\n"),
            (".gitignore", b"ignored/\n"),
            ("bin.dat", b"TODO\0\0"),
        ])
    }

    #[test]
    fn files_mode_is_default_and_sorted() {
        let (_d, cx) = files();
        let out = grep(&input("TODO"), &cx).unwrap();
        assert_eq!(out, "notes.md\nsrc/b.rs\n");
    }

    #[test]
    fn content_mode_with_context_and_case() {
        let (_d, cx) = files();
        let mut i = input("todo");
        i.output_mode = Some(OutputMode::Content);
        i.case_insensitive = true;
        i.glob = Some("*.rs".into());
        let out = grep(&i, &cx).unwrap();
        assert_eq!(out, "src/b.rs:1:// TODO one\nsrc/b.rs:3:// todo two\n");
        i.context = Some(1);
        i.case_insensitive = false;
        let out = grep(&i, &cx).unwrap();
        assert_eq!(out, "src/b.rs-2-fn b() {}\nsrc/b.rs:3:// todo two\n");
    }

    #[test]
    fn separated_groups_get_a_separator() {
        let body: String = (1..=20).map(|i| format!("line {i}\n")).collect();
        let (_d, cx) = setup(&[("f", body.as_bytes())]);
        let mut i = input("^line (2|9|10|18)$");
        i.output_mode = Some(OutputMode::Content);
        i.context = Some(1);
        let out = grep(&i, &cx).unwrap();
        let want = "f-1-line 1\nf:2:line 2\nf-3-line 3\n--\nf-8-line 8\nf:9:line 9\nf:10:line 10\nf-11-line 11\n--\nf-17-line 17\nf:18:line 18\nf-19-line 19\n";
        assert_eq!(out, want);
    }

    #[test]
    fn count_mode_and_single_file() {
        let (_d, cx) = files();
        let mut i = input("(?i)todo");
        i.output_mode = Some(OutputMode::Count);
        i.path = Some("src/b.rs".into());
        assert_eq!(grep(&i, &cx).unwrap(), "src/b.rs:2\n");
    }

    #[test]
    fn results_are_capped() {
        let body = "hit\n".repeat(MAX_RESULTS + 50);
        let (_d, cx) = setup(&[("f", body.as_bytes())]);
        let mut i = input("hit");
        i.output_mode = Some(OutputMode::Content);
        let out = grep(&i, &cx).unwrap();
        assert_eq!(
            out.lines().filter(|l| l.starts_with("f:")).count(),
            MAX_RESULTS
        );
        assert!(out.contains("[results cut after 1000 lines"));
    }

    #[test]
    fn bad_input_is_explained() {
        let (_d, cx) = files();
        assert!(
            matches!(grep(&input("("), &cx), Err(ToolError::InvalidInput(m)) if m.contains("regular expression"))
        );
        let mut i = input("x");
        i.context = Some(99);
        assert!(matches!(grep(&i, &cx), Err(ToolError::InvalidInput(_))));
        let mut i = input("x");
        i.path = Some("/nowhere".into());
        assert!(matches!(grep(&i, &cx), Err(ToolError::Denied(_))));
        let mut i = input("x");
        i.path = Some("missing".into());
        assert!(matches!(grep(&i, &cx), Err(ToolError::NotFound(_))));
        assert!(
            grep(&input("nomatchanywhere"), &cx)
                .unwrap()
                .starts_with("No matches")
        );
    }

    #[test]
    fn matching_lines_counts_each_line_once() {
        let re = Regex::new("a").unwrap();
        assert_eq!(matching_lines(&re, b"aaa\nb\na"), vec![0, 2]);
        assert_eq!(matching_lines(&re, b""), Vec::<usize>::new());
        let any = Regex::new("(?m)^").unwrap();
        assert_eq!(
            matching_lines(&any, b"x\ny\n"),
            vec![0, 1],
            "no phantom line after the last newline"
        );
    }
}
