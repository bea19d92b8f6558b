//! `Read`: a text file with numbered lines, a window at a time.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::text::{self, Budget, SNIFF_LEN};
use crate::walk::Fs;
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

/// Bytes read from the file at a time. The file is never held whole: only the output is.
const CHUNK: usize = 256 * 1024;

pub fn read(input: &ReadInput, cx: &Context) -> Result<String, ToolError> {
    let path = cx.readable(&input.path)?;
    let shown = cx.display(&path).into_owned();
    // One open serves both the directory check and the read.
    // The host refuses to open what is not a file or directory (a FIFO would block the read).
    let mut file = Fs::new().open(&path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::Unsupported {
            ToolError::InvalidInput(format!(
                "{shown} is not a regular file (a FIFO, socket or device); Read reads files"
            ))
        } else {
            ToolError::io(&path, &e)
        }
    })?;
    let meta = file.metadata().map_err(|e| ToolError::io(&path, &e))?;
    if meta.is_dir {
        return Err(ToolError::InvalidInput(format!(
            "{shown} is a directory; use LS to list it"
        )));
    }
    let offset = usize::try_from(input.offset.unwrap_or(1).max(1)).unwrap_or(usize::MAX);
    let limit = input
        .limit
        .map(|l| usize::try_from(l).unwrap_or(usize::MAX))
        .unwrap_or(DEFAULT_LIMIT)
        .max(1);
    let mut window = Window {
        first: offset,
        end: offset.saturating_add(limit),
        // About 8 bytes of numbering per line on top of the text: half as much again covers
        // lines down to 16 bytes (source code's are short) without the buffer doubling, and
        // reserved pages cost nothing until written. Capped by the budget, and where the call
        // takes the result in pieces, by what collects between two of them (a block's lines).
        out: Budget::with_capacity(cx.max_output_bytes(), {
            let whole = usize::try_from(meta.len).unwrap_or(0).saturating_mul(3) / 2;
            match cx.emits() {
                true => whole.min(text::SPILL_BYTES + 2 * CHUNK),
                false => whole,
            }
        }),
        line_no: 0,
        last_shown: offset - 1,
        cut_lines: 0,
        lossy: false,
        open: true,
        number: text::LineNumber::default(),
    };

    // Blocks are taken as the host hands them over; only a line split between two blocks is
    // copied, to join its halves.
    let mut partial: Vec<u8> = Vec::new();
    let mut total_bytes = 0u64;
    // A small file needs a small block: zeroing a whole chunk would cost more than reading it.
    let block_size = usize::try_from(meta.len)
        .unwrap_or(CHUNK)
        .saturating_add(1)
        .clamp(4096, CHUNK);
    loop {
        let block = file
            .read_block(block_size)
            .map_err(|e| ToolError::io(&path, &e))?;
        let start = total_bytes;
        total_bytes += block.len() as u64;
        if start < SNIFF_LEN as u64 {
            let sniffed = &block[..block.len().min(SNIFF_LEN - start as usize)];
            if text::looks_binary(sniffed) {
                return Err(ToolError::InvalidInput(format!(
                    "{shown} looks like a binary file ({} bytes); Read shows text files only",
                    meta.len
                )));
            }
        }
        if block.is_empty() {
            if !partial.is_empty() {
                window.lines(&partial);
            }
            break;
        }
        let mut rest = block;
        if !partial.is_empty() {
            // Finish the line the last block left open.
            match memchr::memchr(b'\n', rest) {
                Some(nl) => {
                    partial.extend_from_slice(&rest[..=nl]);
                    window.lines(&partial);
                    partial.clear();
                    rest = &rest[nl + 1..];
                }
                None => {
                    partial.extend_from_slice(rest);
                    continue;
                }
            }
        }
        // Every complete line of the block, then keep the start of the next.
        let complete = memchr::memrchr(b'\n', rest).map_or(0, |i| i + 1);
        if complete > 0 {
            window.lines(&rest[..complete]);
        }
        partial.extend_from_slice(&rest[complete..]);
        // Hand the lines so far over, so the result is never held whole.
        window.out.spill(cx);
    }

    if total_bytes == 0 {
        return Ok(format!("({shown} is empty)\n"));
    }
    let total_lines = window.line_no;
    if offset > total_lines {
        return Err(ToolError::InvalidInput(format!(
            "offset {offset} is past the end of {shown}, which has {total_lines} line{}",
            plural(total_lines)
        )));
    }
    let Window {
        out,
        last_shown,
        cut_lines,
        lossy,
        ..
    } = window;
    let budget_hit = out.is_full();
    let mut result = out.finish();
    if lossy {
        result.push_str(
            "[note: the file is not valid UTF-8; undecodable bytes are shown as \u{FFFD}]\n",
        );
    }
    if cut_lines > 0 {
        result.push_str(&format!(
            "[note: {cut_lines} line{} longer than {MAX_LINE_CHARS} characters {} cut]\n",
            plural(cut_lines),
            if cut_lines == 1 { "was" } else { "were" }
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

/// The lines being shown, and the count of all lines.
struct Window {
    /// First line shown (1-based), and the line after the last one asked for.
    first: usize,
    end: usize,
    out: Budget,
    /// Lines seen so far.
    line_no: usize,
    last_shown: usize,
    cut_lines: usize,
    lossy: bool,
    /// Still taking lines into the output (false once past `end` or the budget).
    open: bool,
    number: text::LineNumber,
}

impl Window {
    /// Take `block`: whole lines, each ending in a newline except possibly the file's last.
    fn lines(&mut self, block: &[u8]) {
        // Nothing in this block can be shown: just count it.
        if !self.open {
            self.line_no += count_lines(block);
            return;
        }
        match simdutf8::basic::from_utf8(block) {
            Ok(text) => self.text_lines(text),
            Err(_) => {
                self.lossy = true;
                for line in block.split_inclusive(|b| *b == b'\n') {
                    self.text_lines(&String::from_utf8_lossy(line));
                }
            }
        }
    }

    fn text_lines(&mut self, text: &str) {
        let bytes = text.as_bytes();
        let mut pos = 0usize;
        loop {
            pos += self.plain_lines(&bytes[pos..]);
            if pos >= bytes.len() {
                return;
            }
            // One line that needs more than a number, or the end of the window or budget.
            let newline = memchr::memchr(b'\n', &bytes[pos..]).map(|i| pos + i);
            self.line_no += 1;
            if self.open && self.line_no >= self.first {
                if self.line_no >= self.end {
                    self.open = false;
                } else {
                    // `pos` and the newline are ASCII positions, so char boundaries.
                    self.show(&text[pos..newline.map_or(bytes.len(), |i| i + 1)]);
                }
            }
            if !self.open {
                // Count the rest of the block without looking at each line.
                if let Some(nl) = newline {
                    self.line_no += count_lines(&bytes[nl + 1..]);
                }
                return;
            }
            pos = newline.map_or(bytes.len(), |i| i + 1);
        }
    }

    /// Show the lines at the start of `text` that need nothing but their number: inside the
    /// window, ending in a newline without a `\r` before it, at most `MAX_LINE_CHARS` bytes,
    /// within the budget, and numbered with the usual seven-byte column. Returns where the
    /// first line it did not show starts. What it appends is what `show` would; it is the loop
    /// most of a large file goes through, kept in locals (in WebAssembly, every field of `self`
    /// read or written in a loop is a trip to memory).
    fn plain_lines(&mut self, text: &[u8]) -> usize {
        let Window {
            first,
            end,
            out,
            line_no,
            last_shown,
            open,
            number,
            ..
        } = self;
        if !*open || *line_no + 1 < *first {
            return 0;
        }
        let limit = out.remaining() + out.buf().len();
        let (first, end) = (*first, *end);
        // SAFETY: only whole lines of `text` are appended, split at newlines; `text` is
        // UTF-8 (`text_lines` has a `str`), so what is appended is too.
        let buf = unsafe { out.buf().as_mut_vec() };
        let mut n = *line_no;
        let mut pos = 0;
        while let Some(len) = memchr::memchr(b'\n', &text[pos..]) {
            let next = n + 1;
            if next < first
                || next >= end
                || len > MAX_LINE_CHARS
                || (len > 0 && text[pos + len - 1] == b'\r')
                || buf.len() + len + 8 + 32 > limit
            {
                break;
            }
            number.set(next);
            let Ok(column) = <&[u8; 7]>::try_from(number.as_str().as_bytes()) else {
                break;
            };
            buf.extend_from_slice(column);
            buf.extend_from_slice(&text[pos..=pos + len]);
            n = next;
            pos += len + 1;
        }
        if n != *line_no {
            *line_no = n;
            *last_shown = n;
        }
        pos
    }

    /// Append line `self.line_no`, given with its newline (if it has one).
    fn show(&mut self, with_newline: &str) {
        let line = with_newline.strip_suffix('\n').unwrap_or(with_newline);
        let stripped = line.strip_suffix('\r');
        let (text, was_cut) = cut(stripped.unwrap_or(line));
        // The number column and tab, the newline, and room for the cut marker.
        if text.len() + 8 + 32 > self.out.remaining() {
            self.out.mark_full();
            self.open = false;
            return;
        }
        self.number.set(self.line_no);
        let buf = self.out.buf();
        let column = self.number.as_str();
        match <&[u8; 7]>::try_from(column.as_bytes()) {
            // The usual width (lines up to 999,999), copied as a fixed size: a copy of a length
            // known only at run time is a call out of the sandbox in WebAssembly.
            // SAFETY: `column` is a `str`, so its bytes are UTF-8.
            Ok(fixed) => unsafe { buf.as_mut_vec() }.extend_from_slice(fixed),
            Err(_) => buf.push_str(column),
        }
        if was_cut {
            self.cut_lines += 1;
            buf.push_str(text);
            buf.push_str(" [line cut at 2000 characters]\n");
        } else if stripped.is_none() && line.len() < with_newline.len() {
            // The common case: the line and its newline in one copy.
            buf.push_str(with_newline);
        } else {
            buf.push_str(text);
            buf.push('\n');
        }
        self.last_shown = self.line_no;
    }
}

/// Lines in `block`, counting a last line without a newline.
fn count_lines(block: &[u8]) -> usize {
    let newlines = memchr::memchr_iter(b'\n', block).count();
    if block.is_empty() || block.ends_with(b"\n") {
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

    /// Plain lines (numbered as they are) and lines that need more (a `\r`, a cut, no newline at
    /// the end, a wider number column) mixed: every one as `cat -n` would show it.
    #[test]
    fn plain_and_other_lines_mixed_read_as_numbered_text() {
        let mut body = String::new();
        for i in 0..3000 {
            body.push_str(&match i % 7 {
                0 => format!("crlf {i}\r\n"),
                1 => "\n".to_string(),
                2 => format!("{}\n", "é".repeat(i % 50)),
                _ => format!("plain line {i}\n"),
            });
        }
        body.push_str("last, without a newline");
        let (_d, cx) = setup(&[("a.txt", body.as_bytes())]);
        let out = read(&input("a.txt", None, Some(10_000)), &cx).unwrap();
        let want: String = body
            .split('\n')
            .enumerate()
            .map(|(i, l)| format!("{:>6}\t{}\n", i + 1, l.strip_suffix('\r').unwrap_or(l)))
            .collect();
        assert_eq!(out, want);
        // A window from the middle.
        let out = read(&input("a.txt", Some(1000), Some(5)), &cx).unwrap();
        let want: String = want
            .lines()
            .skip(999)
            .take(5)
            .map(|l| format!("{l}\n"))
            .collect();
        assert!(out.starts_with(&want), "{out}");
    }

    /// Past line 999,999 the number column is a character wider.
    #[test]
    fn the_number_column_widens_past_a_million_lines() {
        let body = "x\n".repeat(1_000_002);
        let (_d, cx) = setup(&[("a.txt", body.as_bytes())]);
        let out = read(&input("a.txt", Some(999_998), Some(4)), &cx).unwrap();
        assert!(
            out.starts_with("999998\tx\n999999\tx\n1000000\tx\n1000001\tx\n"),
            "{out}"
        );
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
    fn chunk_boundaries_do_not_change_the_output() {
        // Lines of every length around the chunk size, one longer than a chunk, multi-byte
        // characters straddling chunk edges, CRLF endings and no final newline.
        let mut body = String::new();
        let mut n = 0usize;
        while body.len() < 3 * CHUNK {
            n += 1;
            let len = (n * 7919) % 700;
            body.push_str(&"é".repeat(len / 2));
            body.push_str(if n.is_multiple_of(5) { "\r\n" } else { "\n" });
        }
        body.push_str(&"x".repeat(CHUNK + 17));
        body.push_str("\nlast");
        let (_d, mut cx) = setup(&[("f", body.as_bytes())]);
        cx = Context::new(cx.workspace(), cx.grants().to_vec(), 64 << 20);
        let out = read(&input("f", None, Some(1_000_000)), &cx).unwrap();

        let mut want = String::new();
        let mut cut_count = 0;
        for (i, line) in body.split('\n').enumerate() {
            let line = line.strip_suffix('\r').unwrap_or(line);
            let (line, was_cut) = cut(line);
            want.push_str(&format!("{:>6}\t{line}", i + 1));
            if was_cut {
                cut_count += 1;
                want.push_str(" [line cut at 2000 characters]");
            }
            want.push('\n');
        }
        assert_eq!(cut_count, 1);
        want.push_str("[note: 1 line longer than 2000 characters was cut]\n");
        assert_eq!(out.len(), want.len());
        assert!(out == want, "outputs differ");
    }

    /// A call that takes its result in pieces gets the same text as one that does not: the
    /// pieces handed over, then what is returned; and the pieces are of bounded size, so the
    /// result was never held whole.
    #[test]
    fn a_result_handed_over_in_pieces_is_the_whole_result() {
        let body: String = (0..200_000)
            .map(|i| format!("line {i} of the file\n"))
            .collect();
        let (_d, cx) = setup(&[("big.txt", body.as_bytes())]);
        let cx = Context::new(cx.workspace(), cx.grants().to_vec(), 64 << 20);
        let whole = read(&input("big.txt", Some(3), Some(150_000)), &cx).unwrap();
        assert!(
            whole.ends_with("use offset=150003 to read on]\n"),
            "{}",
            &whole[whole.len() - 200..]
        );

        let (streaming, collected) = cx.clone().collecting();
        let rest = read(&input("big.txt", Some(3), Some(150_000)), &streaming).unwrap();
        let handed = collected.take();
        assert!(
            handed.len() > whole.len() / 2,
            "{} bytes handed over",
            handed.len()
        );
        assert!(
            rest.len() < 2 * text::SPILL_BYTES,
            "{} bytes returned",
            rest.len()
        );
        assert!(
            handed + &rest == whole,
            "the pieces differ from the whole result"
        );

        // Within a small budget the cut comes at the same line either way.
        let small = Context::new(cx.workspace(), cx.grants().to_vec(), 600_000);
        let whole = read(&input("big.txt", None, Some(150_000)), &small).unwrap();
        let (streaming, collected) = small.collecting();
        let rest = read(&input("big.txt", None, Some(150_000)), &streaming).unwrap();
        assert!(whole.contains("(output size limit reached)"));
        assert!(collected.take() + &rest == whole);
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
