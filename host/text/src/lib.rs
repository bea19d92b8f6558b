//! Text from outside, made safe to show on a terminal.
//!
//! Models, plugins, tool output, agent files, configs, task stores and repositories are written
//! by someone else, and rawko prints what they say: names, descriptions, summaries, errors that
//! quote a value, the command a filter asks the user to approve. A terminal obeys what it is
//! sent, so an escape sequence in any of them could move the cursor, clear the screen, retitle
//! the window, hide text or fake other output, and a carriage return could overwrite the start
//! of a line (the command the user is asked to approve, say). Bidirectional-override and
//! invisible format characters can make text read differently from what it is.
//!
//! This is the one sanitiser every such string goes through before it reaches a terminal:
//! control characters (C0, DEL and C1) and those format characters are shown escaped
//! (`\u{1b}`, `\r`, `\u{202e}`), and text is cut to a width with `…`. [`line`] escapes line
//! breaks and tabs too, for one-line places (table cells, prompts, list entries); [`block`]
//! keeps them. JSON output needs none of this: JSON escaping is exact.

use std::borrow::Cow;

/// Characters that are not control characters but change how text reads: the
/// bidirectional embeddings, overrides and isolates, and the directional and zero-width marks.
fn deceptive(c: char) -> bool {
    matches!(
        c,
        '\u{061c}'
            | '\u{200b}'..='\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{2069}'
            | '\u{feff}'
    )
}

/// Whether `c` is shown escaped; `keep_breaks` keeps `\n` and `\t` as they are.
fn escaped(c: char, keep_breaks: bool) -> bool {
    (c.is_control() && !(keep_breaks && (c == '\n' || c == '\t'))) || deceptive(c)
}

fn render(text: &str, max_chars: usize, keep_breaks: bool) -> Cow<'_, str> {
    let clean = !text.chars().any(|c| escaped(c, keep_breaks));
    if clean && (max_chars == usize::MAX || text.chars().nth(max_chars).is_none()) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len().min(max_chars.saturating_mul(4)));
    let mut chars = 0usize;
    for c in text.chars() {
        let piece: Cow<'_, str> = if escaped(c, keep_breaks) {
            Cow::Owned(c.escape_default().to_string())
        } else {
            let mut buf = [0u8; 4];
            Cow::Owned(c.encode_utf8(&mut buf).to_string())
        };
        let n = piece.chars().count();
        if chars + n > max_chars {
            out.push('…');
            return Cow::Owned(out);
        }
        out.push_str(&piece);
        chars += n;
    }
    Cow::Owned(out)
}

/// `text` as one line of at most `max_chars` characters (escapes counted as shown): every
/// control character, line breaks and tabs included, shown escaped; cut with `…`.
pub fn line(text: &str, max_chars: usize) -> Cow<'_, str> {
    render(text, max_chars, false)
}

/// `text` with its line breaks and tabs kept and every other control or deceptive format
/// character shown escaped, at most `max_chars` characters (`usize::MAX`: no cap), cut with `…`.
pub fn block(text: &str, max_chars: usize) -> Cow<'_, str> {
    render(text, max_chars, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_controls_are_shown_not_obeyed() {
        let evil = "ok\x1b]0;pwned\x07\x1b[2J\r\u{9b}31mdone\x7f";
        let shown = block(evil, usize::MAX);
        assert_eq!(
            shown,
            "ok\\u{1b}]0;pwned\\u{7}\\u{1b}[2J\\r\\u{9b}31mdone\\u{7f}"
        );
        assert!(!shown.chars().any(|c| c.is_control()));
        assert_eq!(line("a\nb\tc", 80), "a\\nb\\tc");
        assert_eq!(block("a\nb\tc", 80), "a\nb\tc");
    }

    #[test]
    fn text_that_reads_differently_from_what_it_is_is_shown_escaped() {
        // "rm -rf ~ #" written right to left after an override would read as something else.
        let s = line("echo safe\u{202e}~ fr- mr\u{2066}", 80);
        assert_eq!(s, "echo safe\\u{202e}~ fr- mr\\u{2066}");
        assert_eq!(line("a\u{200b}b", 80), "a\\u{200b}b");
        // Ordinary text, accents and emoji included, is left alone and not copied.
        assert!(matches!(line("héllo wörld ✓", 80), Cow::Borrowed(_)));
    }

    #[test]
    fn long_text_is_cut_to_the_width_escapes_included() {
        assert_eq!(line("abcdef", 3), "abc…");
        assert_eq!(line("ab\x1bcdef", 6), "ab…");
        assert_eq!(line("ééééé", 5), "ééééé");
        assert_eq!(line("éééééé", 5), "ééééé…");
        let huge = "x".repeat(1 << 20);
        assert_eq!(line(&huge, 80).chars().count(), 81);
    }
}
