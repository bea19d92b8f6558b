//! Writing results to stdout. A closed pipe (`rawko tools list | head -1`) is not an error.

use std::io::Write;

/// Print `text` to stdout, adding a final newline if it lacks one.
pub fn print_out(text: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    let result = out.write_all(text.as_bytes()).and_then(|()| {
        if text.is_empty() || text.ends_with('\n') {
            Ok(())
        } else {
            out.write_all(b"\n")
        }
    });
    ignore_broken_pipe(result.and_then(|()| out.flush()))
}

/// `text` made safe to show on a terminal: line breaks kept, every other control character (an
/// escape sequence could move the cursor, retitle the window or fake other output) shown
/// escaped. For text that came from a model, a tool, a file or a store a stranger may have made.
pub fn terminal_safe(text: &str) -> String {
    text.split('\n')
        .map(|line| rawko_runtime::log::sanitize(line, usize::MAX))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Print `value` as pretty JSON on stdout.
pub fn print_json(value: &serde_json::Value) -> std::io::Result<()> {
    let text = serde_json::to_string_pretty(value).map_err(std::io::Error::other)?;
    print_out(&text)
}

fn ignore_broken_pipe(result: std::io::Result<()>) -> std::io::Result<()> {
    match result {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}
