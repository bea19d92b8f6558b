//! Text helpers shared by the tools: binary detection, decoding, numbered output, and an output
//! buffer that stops at the call's budget instead of overflowing it.

use std::borrow::Cow;

/// How many leading bytes are inspected to decide that a file is binary.
const SNIFF_LEN: usize = 8192;

/// A file is treated as binary when a NUL byte appears near its start, as git and grep do.
pub fn looks_binary(bytes: &[u8]) -> bool {
    memchr::memchr(0, &bytes[..bytes.len().min(SNIFF_LEN)]).is_some()
}

/// Decode text, replacing invalid UTF-8 rather than refusing it. Returns whether anything was
/// replaced, so the tool can say so.
pub fn decode(bytes: &[u8]) -> (Cow<'_, str>, bool) {
    match std::str::from_utf8(bytes) {
        Ok(s) => (Cow::Borrowed(s), false),
        Err(_) => (String::from_utf8_lossy(bytes), true),
    }
}

/// Append `n` right-aligned in six columns, then a tab: the `cat -n` layout models know.
pub fn push_line_number(out: &mut String, n: usize) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut v = n;
    loop {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    let len = digits.len() - i;
    for _ in len..6 {
        out.push(' ');
    }
    // The digits are ASCII.
    out.push_str(std::str::from_utf8(&digits[i..]).unwrap_or("?"));
    out.push('\t');
}

/// Collects output up to a byte budget, keeping room for a closing notice.
pub struct Budget {
    out: String,
    limit: usize,
    full: bool,
}

/// Bytes kept free for the notice that says output was cut.
const NOTICE_ROOM: usize = 256;

impl Budget {
    pub fn new(max_output_bytes: usize) -> Self {
        Budget {
            out: String::new(),
            limit: max_output_bytes.saturating_sub(NOTICE_ROOM).max(1),
            full: false,
        }
    }

    pub fn with_capacity(max_output_bytes: usize, capacity: usize) -> Self {
        let mut b = Budget::new(max_output_bytes);
        b.out.reserve(capacity.min(b.limit));
        b
    }

    /// Append a line (a newline is added). Returns false, appending nothing, once the budget
    /// would be exceeded; every later call also returns false.
    pub fn line(&mut self, line: &str) -> bool {
        if self.full || self.out.len() + line.len() + 1 > self.limit {
            self.full = true;
            return false;
        }
        self.out.push_str(line);
        self.out.push('\n');
        true
    }

    /// Whether some output was refused.
    pub fn is_full(&self) -> bool {
        self.full
    }

    /// Room left before the budget is reached.
    pub fn remaining(&self) -> usize {
        self.limit.saturating_sub(self.out.len())
    }

    /// Direct access for hot loops that check `remaining` themselves.
    pub fn buf(&mut self) -> &mut String {
        &mut self.out
    }

    pub fn mark_full(&mut self) {
        self.full = true;
    }

    pub fn finish(self) -> String {
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_numbers_are_cat_n_style() {
        let mut s = String::new();
        push_line_number(&mut s, 7);
        push_line_number(&mut s, 1234567);
        assert_eq!(s, "     7\t1234567\t");
    }

    #[test]
    fn budget_refuses_past_the_limit() {
        let mut b = Budget::new(NOTICE_ROOM + 10);
        assert!(b.line("12345"));
        assert!(!b.line("123456"));
        assert!(!b.line("1"), "once full, stays full");
        assert_eq!(b.finish(), "12345\n");
    }

    #[test]
    fn nul_means_binary() {
        assert!(looks_binary(b"abc\0def"));
        assert!(!looks_binary("héllo\n".as_bytes()));
    }
}
