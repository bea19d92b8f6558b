//! `Grep`: search file contents with a regular expression.

use std::io::Read as _;
use std::path::Path;

use grep_regex::RegexMatcherBuilder;
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkMatch};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::candidates::Candidates;
use crate::text::Budget;
use crate::walk::{Fs, Kind};
use crate::{Context, Tool, ToolError};

/// Most output lines in `content` mode, and most files in the other modes.
pub const MAX_RESULTS: usize = 1000;
/// Most context lines on each side of a match.
pub const MAX_CONTEXT: u32 = 20;
/// Bytes of one file searched at most: larger files are almost never source, and would take
/// the whole time budget.
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
    /// A regular expression (Rust `regex` syntax), matched within one line as ripgrep does:
    /// `^` and `$` match at line boundaries and nothing matches across a newline.
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
files with `glob`; files ignored by .gitignore, binary files and .git are skipped. A match never \
spans lines. Results are capped at 1000.";
    type Input = GrepInput;

    fn call(input: GrepInput, cx: &Context) -> Result<String, ToolError> {
        grep(&input, cx)
    }
}

pub fn grep(input: &GrepInput, cx: &Context) -> Result<String, ToolError> {
    // As ripgrep: the pattern matches within a line (a `\s` never crosses one), `^` and `$`
    // at line boundaries.
    let regex = RegexMatcherBuilder::new()
        .multi_line(true)
        .line_terminator(Some(b'\n'))
        .case_insensitive(input.case_insensitive)
        .size_limit(8 << 20)
        .dfa_size_limit(8 << 20)
        .build(&input.pattern)
        .map_err(|e| ToolError::InvalidInput(format!("bad regular expression: {e}")))?;
    let matcher = Candidates::new(regex, &input.pattern, input.case_insensitive);
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
    // One searcher for every file, so its buffer is reused. A NUL byte marks a file binary, as
    // ripgrep does: one in the first block skips the file, a later one ends its search.
    let with_context = mode == OutputMode::Content && context > 0;
    let mut searcher = SearcherBuilder::new()
        .binary_detection(BinaryDetection::quit(0))
        .line_number(mode == OutputMode::Content)
        .before_context(if with_context { context as usize } else { 0 })
        .after_context(if with_context { context as usize } else { 0 })
        .build();
    let mut search = Search {
        mode,
        out: Budget::new(cx.max_output_bytes()),
        results: 0,
        capped: false,
        files_matched: 0,
        line: String::new(),
    };

    let fs = Fs::new();
    if meta.is_file() {
        search.file(&fs, &mut searcher, &matcher, &root, cx);
    } else {
        let root_len = root.as_os_str().len();
        crate::walk::walk(&fs, &root, |path, kind| {
            if kind != Kind::File {
                return true;
            }
            if let Some(f) = &filter
                && !f.matches(crate::walk::below(path, root_len))
            {
                return true;
            }
            search.file(&fs, &mut searcher, &matcher, path, cx);
            !search.capped
        });
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
    mode: OutputMode,
    out: Budget,
    /// Lines written in content mode, files in the others.
    results: usize,
    capped: bool,
    files_matched: usize,
    /// The output line being built, reused.
    line: String,
}

impl Search {
    fn file(
        &mut self,
        fs: &Fs,
        searcher: &mut Searcher,
        matcher: &Candidates,
        path: &Path,
        cx: &Context,
    ) {
        let mut sink = FileSink {
            search: self,
            shown: Shown {
                path,
                cx,
                text: None,
            },
            matched: 0,
        };
        // A file that cannot be read is skipped, as one that vanished during the walk. Past
        // `MAX_FILE_BYTES` a file is not searched further: it is hardly source, and would take
        // the whole time budget.
        let Ok(file) = fs.open(path) else {
            return;
        };
        let _ = searcher.search_reader(matcher, file.take(MAX_FILE_BYTES), &mut sink);
        let FileSink {
            matched, mut shown, ..
        } = sink;
        if matched == 0 {
            return;
        }
        let shown = shown.get();
        self.files_matched += 1;
        match self.mode {
            OutputMode::Content => {}
            OutputMode::FilesWithMatches => {
                self.emit_str(shown);
            }
            OutputMode::Count => {
                let mut n = itoa::Buffer::new();
                self.line.clear();
                self.line.push_str(shown);
                self.line.push(':');
                self.line.push_str(n.format(matched));
                self.emit_line();
            }
        }
    }

    fn emit_str(&mut self, text: &str) -> bool {
        self.line.clear();
        self.line.push_str(text);
        self.emit_line()
    }

    /// Write `self.line` as one result; false once the results are capped.
    fn emit_line(&mut self) -> bool {
        if self.results >= MAX_RESULTS {
            self.capped = true;
            return false;
        }
        if !self.out.line(&self.line) {
            self.capped = true;
            return false;
        }
        self.results += 1;
        true
    }

    /// `path:line:text` for a match, `path-line-text` for context.
    fn content_line(&mut self, shown: &str, sep: char, number: Option<u64>, bytes: &[u8]) -> bool {
        let mut text = bytes;
        if let Some(t) = text.strip_suffix(b"\n") {
            text = t;
        }
        if let Some(t) = text.strip_suffix(b"\r") {
            text = t;
        }
        let mut n = itoa::Buffer::new();
        self.line.clear();
        self.line.push_str(shown);
        self.line.push(sep);
        self.line.push_str(n.format(number.unwrap_or(0)));
        self.line.push(sep);
        self.line.push_str(&String::from_utf8_lossy(text));
        self.emit_line()
    }
}

/// What the searcher reports for one file.
struct FileSink<'s, 'p> {
    search: &'s mut Search,
    shown: Shown<'p>,
    /// Matching lines so far.
    matched: u64,
}

/// A file's path as the output shows it, worked out when first needed: most files searched
/// never appear in the output.
struct Shown<'a> {
    path: &'a Path,
    cx: &'a Context,
    text: Option<String>,
}

impl Shown<'_> {
    fn get(&mut self) -> &str {
        self.text
            .get_or_insert_with(|| self.cx.display(self.path).into_owned())
    }
}

impl Sink for FileSink<'_, '_> {
    type Error = std::io::Error;

    fn matched(&mut self, _: &Searcher, m: &SinkMatch<'_>) -> Result<bool, std::io::Error> {
        self.matched += 1;
        Ok(match self.search.mode {
            // One match decides the file.
            OutputMode::FilesWithMatches => false,
            OutputMode::Count => true,
            OutputMode::Content => {
                self.search
                    .content_line(self.shown.get(), ':', m.line_number(), m.bytes())
            }
        })
    }

    fn context(&mut self, _: &Searcher, c: &SinkContext<'_>) -> Result<bool, std::io::Error> {
        Ok(self
            .search
            .content_line(self.shown.get(), '-', c.line_number(), c.bytes()))
    }

    /// Groups of lines that do not touch are separated by `--`, as grep does.
    fn context_break(&mut self, _: &Searcher) -> Result<bool, std::io::Error> {
        Ok(self.search.emit_str("--"))
    }
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
}
