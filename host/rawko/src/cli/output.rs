//! Writing results to stdout. A closed pipe (`rawko tools list | head -1`) is not an error.
//!
//! A tool's result can be many megabytes (a whole file read), so text goes out as it is made
//! safe: the sanitiser writes the runs between escapes straight into one buffered, locked
//! stdout, and JSON is serialised into the same kind of writer, never built as a string first.

use std::io::{BufWriter, Write};

/// Bytes gathered before a write to stdout: the pieces between escapes are often small.
const BUFFER: usize = 64 << 10;

/// Print `text` to stdout, made safe for a terminal ([`terminal_safe`]), adding a final newline
/// if it lacks one. Everything rawko prints for people goes through here or [`print_err`].
pub fn print_out(text: &str) -> std::io::Result<()> {
    let stdout = std::io::stdout();
    write_safe(&mut BufWriter::with_capacity(BUFFER, stdout.lock()), text)
}

/// A tool's result printed as it is made: pieces from the call (through its
/// [`OutputSink`](rawko_runtime::OutputSink)) go on a queue to a thread that makes each safe and
/// writes it to one locked, buffered stdout, so the tool never waits for a slow reader and the
/// reader works while the tool does. The queue holds at most what the call's output budget lets
/// through.
pub struct Printer {
    queue: std::sync::mpsc::Sender<String>,
    writer: std::thread::JoinHandle<std::io::Result<Printed>>,
}

/// What a [`Printer`] wrote.
#[derive(Debug, Clone, Copy, Default)]
struct Printed {
    bytes: u64,
    ends_with_newline: bool,
}

/// The sending end of a [`Printer`]'s queue, as a call's sink.
struct Queue(std::sync::mpsc::Sender<String>);

impl rawko_runtime::OutputSink for Queue {
    fn write(&self, piece: String) {
        // The writer only stops when stdout failed; the pieces then have nowhere to go.
        let _ = self.0.send(piece);
    }
}

impl Printer {
    pub fn start() -> std::io::Result<Printer> {
        let (queue, pieces) = std::sync::mpsc::channel::<String>();
        let writer = std::thread::Builder::new()
            .name("rawko-print".into())
            .spawn(move || {
                let stdout = std::io::stdout();
                let mut out = BufWriter::with_capacity(BUFFER, stdout.lock());
                let mut printed = Printed::default();
                for piece in pieces {
                    if piece.is_empty() {
                        continue;
                    }
                    rawko_text::write_block(&mut out, &piece)?;
                    printed.bytes += piece.len() as u64;
                    printed.ends_with_newline = piece.ends_with('\n');
                }
                if printed.bytes > 0 && !printed.ends_with_newline {
                    out.write_all(b"\n")?;
                }
                out.flush()?;
                Ok(printed)
            })?;
        Ok(Printer { queue, writer })
    }

    /// Where the call hands its pieces.
    pub fn sink(&self) -> std::sync::Arc<dyn rawko_runtime::OutputSink> {
        std::sync::Arc::new(Queue(self.queue.clone()))
    }

    /// Print `last` after the pieces, end with a newline if anything was printed, and wait for
    /// all of it to be written. Returns the bytes of text printed (before escaping). A reader
    /// that went away is not an error.
    pub fn finish(self, last: String) -> std::io::Result<u64> {
        let _ = self.queue.send(last);
        drop(self.queue);
        let printed = self
            .writer
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("the printing thread panicked")));
        ignore_broken_pipe(printed).map(|p| p.bytes)
    }
}

/// Print `text` to stderr like [`print_out`]: made safe for a terminal.
pub fn print_err(text: &str) -> std::io::Result<()> {
    let stderr = std::io::stderr();
    write_safe(&mut BufWriter::with_capacity(BUFFER, stderr.lock()), text)
}

/// `text` made safe as it is written (line breaks kept, so it ends with one exactly when
/// `text` does), then a final newline if it lacks one, then flushed.
fn write_safe(out: &mut impl Write, text: &str) -> std::io::Result<()> {
    let result = rawko_text::write_block(out, text).and_then(|()| {
        if text.is_empty() || text.ends_with('\n') {
            Ok(())
        } else {
            out.write_all(b"\n")
        }
    });
    ignore_broken_pipe(result.and_then(|()| out.flush()))
}

/// `text` made safe to show on a terminal: line breaks and tabs kept, every other control
/// character (an escape sequence could move the cursor, retitle the window or fake other
/// output) and every deceptive format character shown escaped, by the one sanitiser
/// ([`rawko_text`]). For text that came from a model, a tool, a file or a store a stranger may
/// have made.
pub fn terminal_safe(text: &str) -> String {
    rawko_text::block(text, usize::MAX).into_owned()
}

/// A note on stderr if something takes longer than a second (compiling plugins on first use,
/// say), so a terminal never sits silent; nothing when it is quick or stderr is not a terminal.
pub struct SlowNote {
    done: Option<std::sync::mpsc::Sender<()>>,
}

impl SlowNote {
    pub fn after_a_second(text: &'static str) -> SlowNote {
        use std::io::IsTerminal;
        if !std::io::stderr().is_terminal() {
            return SlowNote { done: None };
        }
        let (done, wait) = std::sync::mpsc::channel::<()>();
        std::thread::spawn(move || {
            if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                wait.recv_timeout(std::time::Duration::from_secs(1))
            {
                eprintln!("{text}");
            }
        });
        SlowNote { done: Some(done) }
    }
}

impl Drop for SlowNote {
    fn drop(&mut self) {
        if let Some(d) = self.done.take() {
            let _ = d.send(());
        }
    }
}

/// Print `value` as pretty JSON on stdout, exactly: JSON escaping keeps it safe.
pub fn print_json(value: &serde_json::Value) -> std::io::Result<()> {
    let stdout = std::io::stdout();
    let mut out = BufWriter::with_capacity(BUFFER, stdout.lock());
    let result = serde_json::to_writer_pretty(&mut out, value)
        .map_err(std::io::Error::from)
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush());
    ignore_broken_pipe(result)
}

fn ignore_broken_pipe<T: Default>(result: std::io::Result<T>) -> std::io::Result<T> {
    match result {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(T::default()),
        other => other,
    }
}

/// Widest a table cell is shown, in characters; longer text is cut with `…`. Names, paths and
/// descriptions in a table come from files a stranger may have written.
pub const MAX_CELL_CHARS: usize = 80;

/// `text` as one table cell: control characters (tabs and line breaks too) shown escaped, and at
/// most `max` characters, the last of them `…` when cut.
pub fn cell(text: &str, max: usize) -> String {
    let clean = rawko_text::line(text, usize::MAX);
    if clean.chars().count() <= max {
        return clean.into_owned();
    }
    let mut cut: String = clean.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// A table for a terminal: a header and rows of cells, each cell made safe and capped with
/// [`cell`], columns padded by characters (not bytes), trailing blanks trimmed. A row is never
/// wider than the columns times [`MAX_CELL_CHARS`] plus their gaps, whatever the cells held.
#[derive(Debug)]
pub struct Table {
    rows: Vec<Vec<String>>,
    /// Free lines after a row: (the row's index, columns to indent past, text).
    notes: Vec<(usize, usize, String)>,
}

impl Table {
    pub fn new(header: &[&str]) -> Self {
        Table {
            rows: vec![header.iter().map(|h| h.to_string()).collect()],
            notes: Vec::new(),
        }
    }

    /// A line under the last row, starting in column `skip` (its text made safe and capped).
    pub fn note(&mut self, skip: usize, text: &str) {
        let at = self.rows.len() - 1;
        self.notes.push((at, skip, cell(text, MAX_CELL_CHARS * 2)));
    }

    /// Add a row; missing cells are blank, extra cells are dropped.
    pub fn row<S: AsRef<str>>(&mut self, cells: impl IntoIterator<Item = S>) {
        let n = self.rows[0].len();
        let mut row: Vec<String> = cells
            .into_iter()
            .take(n)
            .map(|c| cell(c.as_ref(), MAX_CELL_CHARS))
            .collect();
        row.resize(n, String::new());
        self.rows.push(row);
    }

    pub fn render(&self) -> String {
        let n = self.rows[0].len();
        let widths: Vec<usize> = (0..n)
            .map(|i| {
                self.rows
                    .iter()
                    .map(|r| r[i].chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut out = String::new();
        for (at, r) in self.rows.iter().enumerate() {
            let mut line = String::new();
            for (i, (c, w)) in r.iter().zip(&widths).enumerate() {
                if i > 0 {
                    line.push_str("  ");
                }
                line.push_str(c);
                if i + 1 < n {
                    line.extend(std::iter::repeat_n(' ', w - c.chars().count()));
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
            for (_, skip, text) in self.notes.iter().filter(|(row, ..)| *row == at) {
                let indent: usize = widths.iter().take(*skip).map(|w| w + 2).sum();
                out.extend(std::iter::repeat_n(' ', indent));
                out.push_str(text);
                out.push('\n');
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_are_escaped_and_capped() {
        assert_eq!(cell("a\x1b[2Jb\tc\nd", 80), "a\\u{1b}[2Jb\\tc\\nd");
        let long = "é".repeat(100_000);
        let c = cell(&long, 10);
        assert_eq!(c.chars().count(), 10);
        assert!(c.ends_with('…'));
    }

    #[test]
    fn rows_are_bounded_and_aligned_by_characters() {
        let mut t = Table::new(&["NAME", "X"]);
        t.row(["é".repeat(100_000), "1".into()]);
        t.row(["ab".to_string(), "2".into()]);
        let out = t.render();
        for line in out.lines() {
            assert!(line.chars().count() <= 2 * MAX_CELL_CHARS + 2, "{line}");
        }
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[0],
            format!("NAME{}  X", " ".repeat(MAX_CELL_CHARS - 4))
        );
        assert_eq!(lines[2], format!("ab{}  2", " ".repeat(MAX_CELL_CHARS - 2)));
    }
}
