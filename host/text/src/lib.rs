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
//! keeps them, and [`write_block`] writes the same to a writer as it goes, for results of many
//! megabytes. JSON output needs none of this: JSON escaping is exact.

use std::borrow::Cow;
use std::io::{self, Write};

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

/// Whether a character starting with byte `b` may be shown escaped: the C0 controls and DEL,
/// and the first bytes of every UTF-8 sequence for a C1 control (`0xc2`) or a deceptive
/// character (`0xd8`, `0xe2`, `0xef`). A search over bytes needs this, because most text has
/// none of them and can be written as it is; `every_escaped_character_starts_with_a_candidate`
/// checks it against [`escaped`] for every character there is.
const fn candidate(b: u8, keep_breaks: bool) -> bool {
    match b {
        b'\n' | b'\t' => !keep_breaks,
        0x00..=0x1f | 0x7f | 0xc2 | 0xd8 | 0xe2 | 0xef => true,
        _ => false,
    }
}

const fn candidates(keep_breaks: bool) -> [bool; 256] {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        table[b] = candidate(b as u8, keep_breaks);
        b += 1;
    }
    table
}

static BLOCK_CANDIDATES: [bool; 256] = candidates(true);
static LINE_CANDIDATES: [bool; 256] = candidates(false);

/// Bytes looked at together: a loop over a fixed chunk with no early exit is one the compiler
/// turns into vector compares.
const CHUNK: usize = 64;

/// Whether `chunk` may hold a [`candidate`]: a control byte or any byte from 0x7f up. Coarser
/// than the table (every non-ASCII byte passes), so that it compiles to a handful of vector
/// instructions; the table then finds the exact byte.
#[inline]
fn chunk_may_hold<const KEEP_BREAKS: bool>(chunk: &[u8; CHUNK]) -> bool {
    let mut hit = false;
    for &b in chunk {
        let control = b < 0x20 && !(KEEP_BREAKS && (b == b'\n' || b == b'\t'));
        hit |= control | (b >= 0x7f);
    }
    hit
}

/// The first [`candidate`] byte of `bytes`, looked for a chunk at a time.
#[inline]
fn next_candidate<const KEEP_BREAKS: bool>(bytes: &[u8]) -> Option<usize> {
    let table = if KEEP_BREAKS {
        &BLOCK_CANDIDATES
    } else {
        &LINE_CANDIDATES
    };
    let find = |run: &[u8]| run.iter().position(|&b| table[b as usize]);
    let mut at = 0;
    let mut chunks = bytes.chunks_exact(CHUNK);
    for chunk in &mut chunks {
        let chunk: &[u8; CHUNK] = chunk.try_into().expect("chunks_exact gives whole chunks");
        if chunk_may_hold::<KEEP_BREAKS>(chunk)
            && let Some(i) = find(chunk)
        {
            return Some(at + i);
        }
        at += CHUNK;
    }
    find(chunks.remainder()).map(|i| at + i)
}

/// `text` in pieces, each given to `emit` in order: runs of `text` as they are, and each
/// escaped character's escape. Their concatenation is exactly what [`render_chars`] makes with
/// no cap; this finds the few places that need an escape with a search over bytes instead of
/// looking at every character.
fn pieces<E>(
    text: &str,
    keep_breaks: bool,
    emit: impl FnMut(&str) -> Result<(), E>,
) -> Result<(), E> {
    if keep_breaks {
        pieces_with::<true, E>(text, emit)
    } else {
        pieces_with::<false, E>(text, emit)
    }
}

fn pieces_with<const KEEP_BREAKS: bool, E>(
    text: &str,
    mut emit: impl FnMut(&str) -> Result<(), E>,
) -> Result<(), E> {
    let bytes = text.as_bytes();
    // The run not yet emitted starts at `start`; the search goes on from `at`.
    let (mut start, mut at) = (0, 0);
    while let Some(i) = next_candidate::<KEEP_BREAKS>(&bytes[at..]) {
        let i = at + i;
        // A candidate byte is ASCII or the first byte of a sequence, so a boundary.
        let c = text[i..]
            .chars()
            .next()
            .expect("a candidate starts a character");
        at = i + c.len_utf8();
        if escaped(c, KEEP_BREAKS) {
            if start < i {
                emit(&text[start..i])?;
            }
            let mut buf = [0u8; 12];
            let mut n = 0;
            for e in c.escape_default() {
                n += e.encode_utf8(&mut buf[n..]).len();
            }
            emit(std::str::from_utf8(&buf[..n]).expect("escapes are ASCII"))?;
            start = at;
        }
    }
    if start < text.len() {
        emit(&text[start..])?;
    }
    Ok(())
}

fn render(text: &str, max_chars: usize, keep_breaks: bool) -> Cow<'_, str> {
    if max_chars != usize::MAX {
        return render_chars(text, max_chars, keep_breaks);
    }
    let mut out: Option<String> = None;
    let _ = pieces(text, keep_breaks, |piece| {
        match &mut out {
            // The first piece is the whole text when nothing needs escaping: no copy.
            None if std::ptr::eq(piece, text) => {}
            None => out = Some(String::with_capacity(text.len() + 16) + piece),
            Some(s) => s.push_str(piece),
        }
        Ok::<(), std::convert::Infallible>(())
    });
    match out {
        Some(s) => Cow::Owned(s),
        None => Cow::Borrowed(text),
    }
}

/// [`render`] a character at a time: for a cap, which is counted in characters as shown.
fn render_chars(text: &str, max_chars: usize, keep_breaks: bool) -> Cow<'_, str> {
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

/// Write `text` to `out` as [`block`] with no cap shows it, without building it first: the runs
/// between escapes go to `out` as they are, so a writer that buffers sees few, large writes.
pub fn write_block<W: Write + ?Sized>(out: &mut W, text: &str) -> io::Result<()> {
    pieces(text, true, |piece| out.write_all(piece.as_bytes()))
}

/// [`write_block`] for bytes that may not be UTF-8: as [`block`] shows
/// `String::from_utf8_lossy(bytes)`, each invalid sequence one `\u{fffd}`.
pub fn write_block_lossy<W: Write + ?Sized>(out: &mut W, bytes: &[u8]) -> io::Result<()> {
    for chunk in bytes.utf8_chunks() {
        write_block(out, chunk.valid())?;
        if !chunk.invalid().is_empty() {
            out.write_all(
                char::REPLACEMENT_CHARACTER
                    .encode_utf8(&mut [0; 4])
                    .as_bytes(),
            )?;
        }
    }
    Ok(())
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

    /// A small deterministic generator, so a failure names its seed and repeats.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    /// Pieces an attacker or an ordinary file puts in text: terminal sequences, C1 controls,
    /// deceptive characters, and harmless characters that share their first byte.
    const PIECES: &[&str] = &[
        "\x1b",
        "\x1b[31m",
        "\x1b[2J\x1b[H",
        "\x1b]0;pwned\x07",
        "\x1b]8;;http://x\x1b\\",
        "\x1bP1$r\x1b\\",
        "\u{9b}31m",
        "\u{9d}0;t\u{9c}",
        "\u{85}",
        "\u{80}",
        "\u{9f}",
        "\r",
        "\r\n",
        "\n",
        "\t",
        "\x7f",
        "\0",
        "\x08\x0b\x0c",
        "\u{202e}",
        "\u{202a}",
        "\u{2066}",
        "\u{2069}",
        "\u{200b}",
        "\u{200f}",
        "\u{2060}",
        "\u{2064}",
        "\u{feff}",
        "\u{61c}",
        // First bytes shared with escaped characters, not escaped themselves.
        "\u{a0}",
        "\u{bf}",
        "\u{600}",
        "\u{63f}",
        "\u{2010}",
        "\u{2028}",
        "\u{2065}",
        "\u{206a}",
        "\u{fefe}",
        "\u{ff01}",
        "\u{fffd}",
        "é",
        "✓",
        "😀",
        " ",
        "x",
        "fn main() {}",
    ];

    fn random_text(rng: &mut Rng) -> String {
        let mut s = String::new();
        for _ in 0..rng.below(80) {
            if rng.below(3) == 0 {
                // Plain runs of every length around a chunk, so sequences fall across chunks.
                s.push_str(&"a".repeat(rng.below(3 * CHUNK)));
            } else {
                s.push_str(PIECES[rng.below(PIECES.len())]);
            }
        }
        s
    }

    fn fast(text: &str, keep_breaks: bool) -> String {
        let mut out = String::new();
        let _ = pieces(text, keep_breaks, |p| {
            out.push_str(p);
            Ok::<(), ()>(())
        });
        out
    }

    fn check_same(text: &str, why: &str) {
        for keep in [true, false] {
            let slow = render_chars(text, usize::MAX, keep);
            assert_eq!(
                fast(text, keep),
                slow,
                "{why}, keep_breaks {keep}: {text:?}"
            );
            assert_eq!(render(text, usize::MAX, keep), slow, "{why}: {text:?}");
        }
        let mut written = Vec::new();
        write_block(&mut written, text).unwrap();
        assert_eq!(
            written,
            block(text, usize::MAX).as_bytes(),
            "{why}: {text:?}"
        );
    }

    #[test]
    fn every_escaped_character_starts_with_a_candidate() {
        for c in (0..=char::MAX as u32).filter_map(char::from_u32) {
            let first = c.encode_utf8(&mut [0; 4]).as_bytes()[0];
            for keep in [true, false] {
                if escaped(c, keep) {
                    assert!(candidate(first, keep), "{c:?} (keep_breaks {keep})");
                }
            }
        }
    }

    #[test]
    fn the_byte_search_shows_what_the_character_loop_shows() {
        for seed in 1..3000u64 {
            let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
            check_same(&random_text(&mut rng), &format!("seed {seed}"));
        }
        // Every piece at every offset across two chunk boundaries, and at the very end.
        for piece in PIECES {
            for at in 0..2 * CHUNK + 2 {
                let text = format!("{}{piece}{}", "a".repeat(at), "b".repeat(CHUNK - 1));
                check_same(&text, &format!("{piece:?} at {at}"));
                check_same(&format!("{}{piece}", "a".repeat(at)), "at the end");
            }
        }
        // Text that is nothing but escapes, and text with none.
        check_same(&"\x1b[2J".repeat(10_000), "all escapes");
        check_same(&"\u{202e}".repeat(1000), "all overrides");
        check_same(&"lorem ipsum\t".repeat(10_000), "clean");
        check_same("", "empty");
    }

    #[test]
    fn bytes_that_are_not_utf8_are_shown_as_the_lossy_string_would_be() {
        let cases: &[&[u8]] = &[
            b"caf\xe9\n",
            b"\xe2\x80",
            b"\xe2\x80\xae",
            b"\xe2\x80\x1b[31m",
            b"\xc2",
            b"\xc2\x9b31m",
            b"\xc2\x1b",
            b"\xc0\x80\xed\xa0\x80\xf4\x90\x80\x80",
            b"\x80\x80\xbf",
            b"\xef\xbb",
            b"\xef\xbb\xbf!",
            b"\xff\xfe\x1b]0;t\x07",
        ];
        let mut inputs: Vec<Vec<u8>> = cases.iter().map(|c| c.to_vec()).collect();
        for seed in 1..2000u64 {
            let mut rng = Rng(seed.wrapping_mul(0x2545_f491_4f6c_dd1d));
            let mut bytes = random_text(&mut rng).into_bytes();
            // Break some sequences: random bytes written over random places.
            for _ in 0..rng.below(6) {
                if !bytes.is_empty() {
                    let at = rng.below(bytes.len());
                    bytes[at] = rng.next() as u8;
                }
            }
            inputs.push(bytes);
        }
        for bytes in inputs {
            let mut written = Vec::new();
            write_block_lossy(&mut written, &bytes).unwrap();
            let lossy = String::from_utf8_lossy(&bytes);
            let expected = render_chars(&lossy, usize::MAX, true);
            assert_eq!(written, expected.as_bytes(), "{bytes:?}");
        }
    }

    #[test]
    fn clean_text_is_written_in_one_piece() {
        /// Counts the writes it is given.
        struct Writes(usize, usize);
        impl Write for Writes {
            fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
                self.0 += 1;
                self.1 += buf.len();
                Ok(buf.len())
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let text = "     1\tsome line of a file, é and ✓\n".repeat(100_000);
        let mut w = Writes(0, 0);
        write_block(&mut w, &text).unwrap();
        assert_eq!((w.0, w.1), (1, text.len()));
        // One escape in the middle: the run before, the escape, the run after.
        let text = format!("{text}\x1b{text}");
        let mut w = Writes(0, 0);
        write_block(&mut w, &text).unwrap();
        assert_eq!(w.0, 3);
    }
}
