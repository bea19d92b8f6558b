//! Text helpers shared by the tools: binary detection, decoding, numbered output, and an output
//! buffer that stops at the call's budget instead of overflowing it.

use crate::Context;

/// How many leading bytes are inspected to decide that a file is binary.
pub const SNIFF_LEN: usize = 8192;

/// A file is treated as binary when a NUL byte appears near its start, as git and grep do.
pub fn looks_binary(bytes: &[u8]) -> bool {
    memchr::memchr(0, &bytes[..bytes.len().min(SNIFF_LEN)]).is_some()
}

/// Append `n` right-aligned in six columns, then a tab: the `cat -n` layout models know.
#[inline]
pub fn push_line_number(out: &mut String, n: usize) {
    const PAD: &str = "      ";
    let mut digits = itoa::Buffer::new();
    let digits = digits.format(n);
    out.push_str(&PAD[digits.len().min(PAD.len())..]);
    out.push_str(digits);
    out.push('\t');
}

/// The `cat -n` number column for consecutive lines: counting up in place is much cheaper than
/// formatting each number, and the common case is a copy of a few bytes.
#[derive(Debug, Default)]
pub struct LineNumber {
    text: String,
    value: usize,
}

impl LineNumber {
    /// Make this the column for line `n`.
    pub fn set(&mut self, n: usize) {
        if n == self.value + 1 && self.value != 0 && self.increment() {
            self.value = n;
            return;
        }
        self.text.clear();
        push_line_number(&mut self.text, n);
        self.value = n;
    }

    /// Add one to the digits in place; false when a new digit would be needed past the padding.
    fn increment(&mut self) -> bool {
        // SAFETY: the column holds only ASCII spaces, digits and a tab, and every edit below
        // replaces one ASCII byte with another, so the string stays valid UTF-8.
        let bytes = unsafe { self.text.as_bytes_mut() };
        let mut i = bytes.len().saturating_sub(1);
        while i > 0 {
            i -= 1;
            match bytes[i] {
                b'9' => bytes[i] = b'0',
                b' ' => {
                    bytes[i] = b'1';
                    return true;
                }
                d => {
                    bytes[i] = d + 1;
                    return true;
                }
            }
        }
        false
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }
}

/// Collects output up to a byte budget, keeping room for a closing notice. Where the call
/// takes pieces of its result ([`Context::emits`]), [`Budget::spill`] hands over what has
/// been collected, and the budget counts it as spent.
pub struct Budget {
    out: String,
    limit: usize,
    full: bool,
    /// Bytes already handed over by `spill`.
    sent: usize,
}

/// How much [`Budget::spill`] lets collect before handing it over: large enough that a piece
/// costs the host little, small enough that the buffer stays in cache and is reused.
pub const SPILL_BYTES: usize = 256 * 1024;

/// Bytes kept free for the notice that says output was cut.
const NOTICE_ROOM: usize = 256;

impl Budget {
    pub fn new(max_output_bytes: usize) -> Self {
        Budget {
            out: String::new(),
            limit: max_output_bytes.saturating_sub(NOTICE_ROOM).max(1),
            full: false,
            sent: 0,
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
        if self.full || self.sent + self.out.len() + line.len() + 1 > self.limit {
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
        self.limit.saturating_sub(self.sent + self.out.len())
    }

    /// Hand what has been collected over to the host, if the call takes pieces and there is at
    /// least [`SPILL_BYTES`] of it; the buffer is then reused. The notice room stays reserved,
    /// so whatever the budget refuses can still be said at the end.
    pub fn spill(&mut self, cx: &Context) {
        if self.out.len() >= SPILL_BYTES && cx.emit(&self.out) {
            self.sent += self.out.len();
            self.out.clear();
        }
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
    fn line_numbers_count_up_in_place() {
        let mut n = LineNumber::default();
        let mut want = String::new();
        for i in [
            1, 2, 9, 10, 11, 99, 100, 99_999, 100_000, 999_999, 1_000_000, 1_000_001, 5,
        ] {
            n.set(i);
            want.clear();
            push_line_number(&mut want, i);
            assert_eq!(n.as_str(), want, "line {i}");
        }
        // Every step of a long run matches the formatter.
        let mut n = LineNumber::default();
        for i in 1..=120_000 {
            n.set(i);
            want.clear();
            push_line_number(&mut want, i);
            assert_eq!(n.as_str(), want);
        }
    }

    #[test]
    fn budget_refuses_past_the_limit() {
        let mut b = Budget::new(NOTICE_ROOM + 10);
        assert!(b.line("12345"));
        assert!(!b.line("123456"));
        assert!(!b.line("1"), "once full, stays full");
        assert_eq!(b.finish(), "12345\n");
    }

    /// Spilled pieces count against the budget, and what is spilled plus what is returned is
    /// exactly what would have been collected without spilling.
    #[test]
    fn spilled_output_counts_against_the_budget() {
        let limit = 3 * SPILL_BYTES;
        let (cx, collected) = Context::new("/ws", Vec::new(), limit).collecting();
        let mut spilling = Budget::new(limit);
        let mut whole = Budget::new(limit);
        let line = "x".repeat(1000);
        let mut n = 0;
        while spilling.line(&line) {
            assert!(whole.line(&line));
            spilling.spill(&cx);
            n += 1;
        }
        assert!(!whole.line(&line), "both refuse at the same line");
        assert!(n > 2 * SPILL_BYTES / 1001, "{n} lines");
        assert_eq!(spilling.remaining(), whole.remaining());
        let handed = collected.take();
        assert!(handed.len() >= SPILL_BYTES);
        assert_eq!(handed + &spilling.finish(), whole.finish());
        // A context that takes no pieces keeps everything in the buffer.
        let plain = Context::new("/ws", Vec::new(), limit);
        let mut kept = Budget::new(limit);
        for _ in 0..300 {
            kept.line(&line);
            kept.spill(&plain);
        }
        assert_eq!(kept.finish().len(), 300 * 1001);
    }

    #[test]
    fn nul_means_binary() {
        assert!(looks_binary(b"abc\0def"));
        assert!(!looks_binary("héllo\n".as_bytes()));
    }
}
