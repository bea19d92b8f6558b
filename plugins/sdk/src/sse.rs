//! Server-sent events, parsed incrementally as body chunks arrive.
//!
//! Providers stream replies as `text/event-stream`. Chunks split events, lines and even UTF-8
//! characters anywhere, so the parser keeps the unfinished line between calls and hands out
//! whole events only. It follows the WHATWG rules that matter here: `\n`, `\r\n` and `\r` end
//! lines, `:` starts a comment, `data` lines are joined with `\n`, a blank line dispatches, and
//! an event left unfinished when the stream ends is not an event.

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The `event:` field, if the event had one.
    pub event: Option<String>,
    /// The `data:` lines, joined with `\n`.
    pub data: String,
}

/// An incremental parser. Feed it chunks with [`Parser::feed`]; call [`Parser::finish`] at the
/// end of the body to learn whether the stream stopped mid-event.
#[derive(Debug, Default)]
pub struct Parser {
    /// Bytes of the line not yet ended.
    line: Vec<u8>,
    /// The previous chunk ended with `\r`, so a leading `\n` belongs to that line break.
    after_cr: bool,
    event: Option<String>,
    data: String,
    has_data: bool,
    /// Something was seen since the last dispatch (for truncation reports).
    pending: bool,
}

impl Parser {
    pub fn new() -> Self {
        Parser::default()
    }

    /// Parse `chunk` and return the events it completed, in order.
    pub fn feed(&mut self, chunk: &[u8]) -> Vec<Event> {
        let mut out = Vec::new();
        let mut rest = chunk;
        if self.after_cr {
            self.after_cr = false;
            if let Some(b'\n') = rest.first() {
                rest = &rest[1..];
            }
        }
        while let Some(i) = rest.iter().position(|&b| b == b'\n' || b == b'\r') {
            self.line.extend_from_slice(&rest[..i]);
            let was_cr = rest[i] == b'\r';
            rest = &rest[i + 1..];
            if was_cr {
                match rest.first() {
                    Some(b'\n') => rest = &rest[1..],
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
            let line = std::mem::take(&mut self.line);
            if let Some(e) = self.line_done(&line) {
                out.push(e);
            }
        }
        self.line.extend_from_slice(rest);
        if !self.line.is_empty() {
            self.pending = true;
        }
        out
    }

    /// The stream ended. `true` when it stopped in the middle of an event (a truncated stream);
    /// that partial event is discarded, as the standard says.
    pub fn finish(&mut self) -> bool {
        let truncated = self.pending || !self.line.is_empty();
        *self = Parser::default();
        truncated
    }

    fn line_done(&mut self, line: &[u8]) -> Option<Event> {
        if line.is_empty() {
            self.pending = false;
            let event = self.event.take();
            if !self.has_data {
                self.data.clear();
                return None;
            }
            self.has_data = false;
            return Some(Event {
                event,
                data: std::mem::take(&mut self.data),
            });
        }
        self.pending = true;
        if line[0] == b':' {
            return None;
        }
        let line = String::from_utf8_lossy(line);
        let (field, value) = match line.find(':') {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(' ').unwrap_or(v))
            }
            None => (&line[..], ""),
        };
        match field {
            "event" => self.event = Some(value.to_string()),
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            // `id` and `retry` matter to reconnecting browsers, not to one reply.
            _ => {}
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(chunks: &[&[u8]]) -> (Vec<Event>, bool) {
        let mut p = Parser::new();
        let mut out = Vec::new();
        for c in chunks {
            out.extend(p.feed(c));
        }
        (out, p.finish())
    }

    fn ev(event: Option<&str>, data: &str) -> Event {
        Event {
            event: event.map(str::to_string),
            data: data.to_string(),
        }
    }

    #[test]
    fn events_split_anywhere_come_out_whole() {
        let text = b"event: message_start\ndata: {\"a\":1}\n\n: keep-alive\n\ndata: x\ndata: y\n\n";
        let whole = all(&[text]);
        assert_eq!(
            whole.0,
            vec![ev(Some("message_start"), "{\"a\":1}"), ev(None, "x\ny")]
        );
        assert!(!whole.1);
        // Every split point, including inside the line breaks, gives the same events.
        for i in 0..text.len() {
            assert_eq!(all(&[&text[..i], &text[i..]]), whole, "split at {i}");
        }
    }

    #[test]
    fn all_three_line_endings_work() {
        let (events, truncated) = all(&[b"data: a\r\n\r\ndata: b\r\rdata: c\n\n"]);
        assert_eq!(events, vec![ev(None, "a"), ev(None, "b"), ev(None, "c")]);
        assert!(!truncated);
        // A `\r\n` split across chunks is one line break, not two.
        let (events, _) = all(&[b"data: a\r", b"\n\r", b"\n"]);
        assert_eq!(events, vec![ev(None, "a")]);
    }

    #[test]
    fn a_stream_cut_mid_event_is_reported_and_dropped() {
        let (events, truncated) = all(&[b"data: done\n\ndata: {\"half\":"]);
        assert_eq!(events, vec![ev(None, "done")]);
        assert!(truncated);
        let (_, truncated) = all(&[b"data: x\n"]);
        assert!(truncated, "no blank line after the last event");
    }

    #[test]
    fn field_without_colon_and_utf8_split_across_chunks() {
        let text = "data\n\ndata: é\n\n".as_bytes();
        let split = text.iter().position(|&b| b == 0xC3).unwrap() + 1;
        let (events, _) = all(&[&text[..split], &text[split..]]);
        assert_eq!(events, vec![ev(None, ""), ev(None, "é")]);
    }
}
