//! `Read`: a text file with numbered lines, a window at a time.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::text::{self, Budget};
use crate::{Context, Tool, ToolError};

/// Lines shown when the input gives no `limit`.
pub const DEFAULT_LIMIT: usize = 2000;
/// Longer lines are cut, so one minified file cannot fill the output.
pub const MAX_LINE_CHARS: usize = 2000;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadInput {
    /// The file to read: relative to the workspace root, or absolute inside a granted directory.
    pub path: String,
    /// The line number to start at (1 is the first line).
    #[schemars(range(min = 1))]
    pub offset: Option<u64>,
    /// How many lines to show (default 2000).
    #[schemars(range(min = 1))]
    pub limit: Option<u64>,
}

pub struct Read;

impl Tool for Read {
    const NAME: &'static str = "Read";
    const DESCRIPTION: &'static str = "Read a text file. Lines are numbered from 1 as `number<TAB>text`. \
By default up to 2000 lines from the start are shown; use `offset` (first line to show) and `limit` \
(number of lines) to read other parts of a long file. Lines over 2000 characters are cut. Binary \
files are refused.";
    type Input = ReadInput;

    fn call(input: ReadInput, cx: &Context) -> Result<String, ToolError> {
        read(&input, cx)
    }
}

pub fn read(input: &ReadInput, cx: &Context) -> Result<String, ToolError> {
    let path = cx.readable(&input.path)?;
    let shown = cx.display(&path).into_owned();
    let meta = std::fs::metadata(&path).map_err(|e| ToolError::io(&path, &e))?;
    if meta.is_dir() {
        return Err(ToolError::InvalidInput(format!(
            "{shown} is a directory; use LS to list it"
        )));
    }
    let bytes = std::fs::read(&path).map_err(|e| ToolError::io(&path, &e))?;
    if bytes.is_empty() {
        return Ok(format!("({shown} is empty)\n"));
    }
    if text::looks_binary(&bytes) {
        return Err(ToolError::InvalidInput(format!(
            "{shown} looks like a binary file ({} bytes); Read shows text files only",
            bytes.len()
        )));
    }
    let (content, lossy) = text::decode(&bytes);

    let offset = input.offset.unwrap_or(1).max(1);
    let offset = usize::try_from(offset).unwrap_or(usize::MAX);
    let limit = input
        .limit
        .map(|l| usize::try_from(l).unwrap_or(usize::MAX))
        .unwrap_or(DEFAULT_LIMIT)
        .max(1);

    let total_lines = count_lines(&content);
    if offset > total_lines {
        return Err(ToolError::InvalidInput(format!(
            "offset {offset} is past the end of {shown}, which has {total_lines} line{}",
            plural(total_lines)
        )));
    }

    // Size the buffer for the window we expect to show, capped by the budget.
    let mut out = Budget::with_capacity(cx.max_output_bytes(), content.len() + total_lines * 8);
    let mut last_shown = offset - 1;
    let mut cut_lines = 0usize;
    for (i, line) in content.split_inclusive('\n').enumerate().skip(offset - 1) {
        let n = i + 1;
        if n >= offset.saturating_add(limit) {
            break;
        }
        let line = line.strip_suffix('\n').unwrap_or(line);
        let line = line.strip_suffix('\r').unwrap_or(line);
        let (line, was_cut) = cut(line);
        // 7 for the number column and tab, 1 for the newline, plus the cut marker.
        if line.len() + 8 + 32 > out.remaining() {
            out.mark_full();
            break;
        }
        let buf = out.buf();
        text::push_line_number(buf, n);
        buf.push_str(line);
        if was_cut {
            cut_lines += 1;
            buf.push_str(" [line cut at 2000 characters]");
        }
        buf.push('\n');
        last_shown = n;
    }

    let budget_hit = out.is_full();
    let mut result = out.finish();
    if lossy {
        result.push_str(
            "[note: the file is not valid UTF-8; undecodable bytes are shown as \u{FFFD}]\n",
        );
    }
    if cut_lines > 0 {
        result.push_str(&format!(
            "[note: {cut_lines} line{} longer than {MAX_LINE_CHARS} characters were cut]\n",
            plural(cut_lines)
        ));
    }
    if last_shown < total_lines {
        let why = if budget_hit {
            " (output size limit reached)"
        } else {
            ""
        };
        result.push_str(&format!(
            "[showing lines {offset}-{last_shown} of {total_lines}{why}; use offset={} to read on]\n",
            last_shown + 1
        ));
    }
    Ok(result)
}

/// Lines in `s`, counting a last line without a newline.
fn count_lines(s: &str) -> usize {
    let newlines = memchr::memchr_iter(b'\n', s.as_bytes()).count();
    if s.ends_with('\n') {
        newlines
    } else {
        newlines + 1
    }
}

/// `line` cut to at most `MAX_LINE_CHARS` characters, on a character boundary.
fn cut(line: &str) -> (&str, bool) {
    if line.len() <= MAX_LINE_CHARS {
        return (line, false);
    }
    match line.char_indices().nth(MAX_LINE_CHARS) {
        Some((i, _)) => (&line[..i], true),
        None => (line, false),
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::testutil::setup;

    fn input(path: &str, offset: Option<u64>, limit: Option<u64>) -> ReadInput {
        ReadInput {
            path: path.into(),
            offset,
            limit,
        }
    }

    #[test]
    fn numbers_lines() {
        let (_d, cx) = setup(&[("a.txt", b"one\ntwo\r\nthree")]);
        let out = read(&input("a.txt", None, None), &cx).unwrap();
        assert_eq!(out, "     1\tone\n     2\ttwo\n     3\tthree\n");
    }

    #[test]
    fn offset_and_limit_window_a_file() {
        let body: String = (1..=100).map(|i| format!("line {i}\n")).collect();
        let (_d, cx) = setup(&[("a.txt", body.as_bytes())]);
        let out = read(&input("a.txt", Some(10), Some(3)), &cx).unwrap();
        assert!(out.starts_with("    10\tline 10\n    11\tline 11\n    12\tline 12\n"));
        assert!(out.contains("[showing lines 10-12 of 100; use offset=13 to read on]"));
        let err = read(&input("a.txt", Some(101), None), &cx).unwrap_err();
        assert!(matches!(err, ToolError::InvalidInput(m) if m.contains("past the end")));
    }

    #[test]
    fn empty_binary_and_non_utf8_files() {
        let (_d, cx) = setup(&[
            ("empty", b""),
            ("bin", b"\x7fELF\0\0\x01"),
            ("latin1", b"caf\xe9\n"),
        ]);
        assert_eq!(
            read(&input("empty", None, None), &cx).unwrap(),
            "(empty is empty)\n"
        );
        let err = read(&input("bin", None, None), &cx).unwrap_err();
        assert!(matches!(err, ToolError::InvalidInput(m) if m.contains("binary")));
        let out = read(&input("latin1", None, None), &cx).unwrap();
        assert!(out.contains("caf\u{FFFD}") && out.contains("not valid UTF-8"));
    }

    #[test]
    fn long_lines_are_cut_and_budget_is_kept() {
        let long = "x".repeat(5000);
        let many: String = (0..10_000).map(|_| "0123456789\n").collect();
        let (_d, mut cx) = setup(&[("long", long.as_bytes()), ("many", many.as_bytes())]);
        let out = read(&input("long", None, None), &cx).unwrap();
        assert!(out.contains("[line cut at 2000 characters]"));
        cx = Context::new(cx.workspace(), cx.grants().to_vec(), 4096);
        let out = read(&input("many", None, Some(10_000)), &cx).unwrap();
        assert!(out.len() <= 4096, "{} bytes", out.len());
        assert!(out.contains("output size limit reached"));
    }

    #[test]
    fn directories_and_missing_files() {
        let (_d, cx) = setup(&[("d/a", b"x")]);
        assert!(
            matches!(read(&input("d", None, None), &cx), Err(ToolError::InvalidInput(m)) if m.contains("LS"))
        );
        assert!(matches!(
            read(&input("nope", None, None), &cx),
            Err(ToolError::NotFound(_))
        ));
        assert!(matches!(
            read(&input("/etc/passwd", None, None), &cx),
            Err(ToolError::Denied(_))
        ));
    }
}
