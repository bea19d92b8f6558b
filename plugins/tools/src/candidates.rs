//! Finding the lines that may match a pattern, for patterns where a literal search does better
//! inside the sandbox than the regex engine's own.
//!
//! - **Several literals at the start**, as any case-insensitive word (`fixme` is 32 literals,
//!   `fixme` to `FIXME`). The regex engine looks for several literals at once with a SIMD
//!   algorithm (Teddy) only on x86-64 and AArch64; compiled to WebAssembly it falls back to an
//!   automaton that takes a step per byte of the haystack, which made a case-insensitive Grep
//!   three times slower than a case-sensitive one. Here, instead, the byte position in the
//!   literals that is rarest in source text (`x` or `X` for `fixme`) is searched with
//!   `memchr` (SIMD in WebAssembly too), and each hit is checked byte by byte against what the
//!   literals allow around it.
//! - **One literal at the start or the end** of every match (`get_unchecked`, or `_unchecked`
//!   for `fn\s+[a-z_]+_unchecked`). In WebAssembly, `memchr`'s substring search tests 16
//!   positions per step of its loop; here two of the literal's rarest bytes are tested at 64
//!   positions per step, and each hit is compared with the whole literal. Natively it is
//!   `memchr`'s own search.
//!
//! Only the line of a hit goes to the regex engine. The test is a necessary condition, never a
//! sufficient one: every match of the pattern starts with one of the literals (or ends with the
//! one literal), and no match spans lines, so every match's line holds a hit. A line that holds
//! a hit but does not match is left to the regex engine to reject.

use grep_matcher::{ByteSet, LineMatchKind, LineTerminator, Match, Matcher, NoError};
use grep_regex::{RegexCaptures, RegexMatcher};
use regex_syntax::hir::literal::{ExtractKind, Extractor};

/// A [`RegexMatcher`] whose candidate lines are found as described above, when the pattern
/// allows it; every other question goes to the regex matcher unchanged.
pub struct Candidates {
    regex: RegexMatcher,
    filter: Option<Filter>,
}

/// How candidate lines are found.
enum Filter {
    Rare(RareByte),
    Literal(Box<Literal>),
}

/// The byte position searched for, and what the literals allow at each position.
struct RareByte {
    /// The position in every literal that is searched for.
    offset: usize,
    /// The bytes found at `offset` in the literals: one to three.
    bytes: Vec<u8>,
    /// For each position up to the shortest literal's length, the bytes a literal has there.
    allowed: Vec<[bool; 256]>,
}

/// The literals every match of the pattern starts with (or ends with, for `ExtractKind::Suffix`),
/// if they are a finite set.
fn literals(pattern: &str, case_insensitive: bool, kind: ExtractKind) -> Option<Vec<Vec<u8>>> {
    let hir = regex_syntax::ParserBuilder::new()
        .case_insensitive(case_insensitive)
        .multi_line(true)
        .utf8(false)
        .build()
        .parse(pattern)
        .ok()?;
    let seq = Extractor::new().kind(kind).extract(&hir);
    Some(
        seq.literals()?
            .iter()
            .map(|l| l.as_bytes().to_vec())
            .collect(),
    )
}

/// How common a byte is in source text and prose: higher is more common, 0 for bytes outside
/// the list (rare).
fn commonness(b: u8) -> usize {
    const BY_FREQUENCY: &[u8] =
        b" e\ntasoirnl_dc(u)p.m,f;hg:=\"/b-y{}wv*k<>'x&0[]1#2!j|+q\\z?@3%$^~`";
    BY_FREQUENCY
        .iter()
        .position(|&c| c == b)
        .map_or(0, |i| BY_FREQUENCY.len() - i)
}

impl RareByte {
    fn new(literals: &[Vec<u8>]) -> Option<RareByte> {
        let shortest = literals.iter().map(Vec::len).min()?;
        let allowed: Vec<[bool; 256]> = (0..shortest)
            .map(|at| {
                let mut set = [false; 256];
                for l in literals {
                    set[usize::from(l[at])] = true;
                }
                set
            })
            .collect();
        let (offset, bytes) = allowed
            .iter()
            .enumerate()
            .map(|(at, set)| {
                let bytes: Vec<u8> = (0..=255u8).filter(|&b| set[usize::from(b)]).collect();
                (at, bytes)
            })
            .filter(|(_, bytes)| bytes.len() <= 3)
            .min_by_key(|(_, bytes)| bytes.iter().map(|&b| commonness(b)).sum::<usize>())?;
        Some(RareByte {
            offset,
            bytes,
            allowed,
        })
    }

    /// Where the next searched byte is in `haystack`, from `at`.
    fn next_hit(&self, haystack: &[u8], at: usize) -> Option<usize> {
        let rest = haystack.get(at..)?;
        let found = match self.bytes[..] {
            [a] => memchr::memchr(a, rest),
            [a, b] => memchr::memchr2(a, b, rest),
            [a, b, c] => memchr::memchr3(a, b, c, rest),
            _ => unreachable!("one to three bytes"),
        };
        found.map(|i| at + i)
    }

    /// The start of the first place in `haystack` where one of the literals may begin.
    fn find(&self, haystack: &[u8]) -> Option<usize> {
        let mut at = self.offset;
        while let Some(hit) = self.next_hit(haystack, at) {
            let start = hit - self.offset;
            let fits = haystack
                .get(start..start + self.allowed.len())
                .is_some_and(|window| {
                    window
                        .iter()
                        .zip(&self.allowed)
                        .all(|(&b, set)| set[usize::from(b)])
                });
            if fits {
                return Some(start);
            }
            at = hit + 1;
        }
        None
    }
}

impl Candidates {
    /// `regex` built from `pattern` with `case_insensitive`, and multi-line on.
    pub fn new(regex: RegexMatcher, pattern: &str, case_insensitive: bool) -> Candidates {
        let prefixes = literals(pattern, case_insensitive, ExtractKind::Prefix);
        let filter = match prefixes {
            // Several literals, none empty.
            Some(l) if l.len() >= 2 => l
                .iter()
                .all(|l| !l.is_empty())
                .then(|| RareByte::new(&l))
                .flatten()
                .map(Filter::Rare),
            // One literal at the start, or one at the end: the longer, if long enough to be
            // rare.
            prefixes => {
                let suffixes = literals(pattern, case_insensitive, ExtractKind::Suffix);
                [prefixes, suffixes]
                    .into_iter()
                    .flatten()
                    .filter_map(|mut l| (l.len() == 1).then(|| l.remove(0)))
                    .filter(|l| l.len() >= Literal::SHORTEST)
                    .max_by_key(Vec::len)
                    .map(|l| Filter::Literal(Box::new(Literal::new(l))))
            }
        };
        Candidates { regex, filter }
    }
}

/// One literal that every match holds, searched for whole.
struct Literal {
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    needle: Vec<u8>,
    /// Two positions in the literal whose bytes are rarest, tested first.
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    pair: (usize, usize),
    #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
    finder: memchr::memmem::Finder<'static>,
}

impl Literal {
    /// Literals shorter than this are left to the regex engine.
    const SHORTEST: usize = 3;

    fn new(needle: Vec<u8>) -> Literal {
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        {
            let rarest = |skip: Option<usize>| {
                (0..needle.len())
                    .filter(|&i| Some(i) != skip)
                    // A second byte equal to the first tells nothing more.
                    .min_by_key(|&i| {
                        let same = skip.is_some_and(|s| needle[s] == needle[i]);
                        (same, commonness(needle[i]))
                    })
                    .unwrap_or(0)
            };
            let first = rarest(None);
            let second = rarest(Some(first));
            Literal {
                pair: (first, second),
                needle,
            }
        }
        #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
        {
            Literal {
                finder: memchr::memmem::Finder::new(&needle).into_owned(),
            }
        }
    }

    #[cfg(test)]
    fn needle(&self) -> &[u8] {
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        return &self.needle;
        #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
        return self.finder.needle();
    }

    /// Where the literal first starts in `haystack`.
    #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
    fn find(&self, haystack: &[u8]) -> Option<usize> {
        self.finder.find(haystack)
    }

    /// Where the literal first starts in `haystack`.
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    fn find(&self, haystack: &[u8]) -> Option<usize> {
        use core::arch::wasm32::{
            u8x16_bitmask, u8x16_eq, u8x16_splat, v128, v128_and, v128_any_true, v128_load, v128_or,
        };

        let n = self.needle.len();
        // The last position the literal can start at.
        let last = haystack.len().checked_sub(n)?;
        let (i1, i2) = self.pair;
        let (b1, b2) = (self.needle[i1], self.needle[i2]);
        let (v1, v2) = (u8x16_splat(b1), u8x16_splat(b2));
        let whole = |at: usize| haystack[at..at + n] == self.needle[..];
        let mut at = 0;
        // 64 starting positions per step, while all of them can hold the literal.
        while at + 64 <= last + 1 {
            // SAFETY: each load reads 16 bytes from `at + k + i` with `k <= 48` and `i < n`; the
            // last byte read is at most `at + 63 + n - 1 <= last + n - 1 = haystack.len() - 1`.
            // `v128_load` takes unaligned addresses.
            let hits: [v128; 4] = unsafe {
                let p = haystack.as_ptr().add(at);
                let test = |k: usize| {
                    v128_and(
                        u8x16_eq(v128_load(p.add(k + i1).cast()), v1),
                        u8x16_eq(v128_load(p.add(k + i2).cast()), v2),
                    )
                };
                [test(0), test(16), test(32), test(48)]
            };
            if v128_any_true(v128_or(
                v128_or(hits[0], hits[1]),
                v128_or(hits[2], hits[3]),
            )) {
                for (k, hit) in hits.iter().enumerate() {
                    let mut bits = u8x16_bitmask(*hit);
                    while bits != 0 {
                        let start = at + 16 * k + bits.trailing_zeros() as usize;
                        if whole(start) {
                            return Some(start);
                        }
                        bits &= bits - 1;
                    }
                }
            }
            at += 64;
        }
        (at..=last)
            .find(|&start| haystack[start + i1] == b1 && haystack[start + i2] == b2 && whole(start))
    }
}

impl Matcher for Candidates {
    type Captures = RegexCaptures;
    type Error = NoError;

    fn find_at(&self, haystack: &[u8], at: usize) -> Result<Option<Match>, NoError> {
        self.regex.find_at(haystack, at)
    }

    fn new_captures(&self) -> Result<RegexCaptures, NoError> {
        self.regex.new_captures()
    }

    fn capture_count(&self) -> usize {
        self.regex.capture_count()
    }

    fn capture_index(&self, name: &str) -> Option<usize> {
        self.regex.capture_index(name)
    }

    fn try_find_iter<F, E>(&self, haystack: &[u8], matched: F) -> Result<Result<(), E>, NoError>
    where
        F: FnMut(Match) -> Result<bool, E>,
    {
        self.regex.try_find_iter(haystack, matched)
    }

    fn captures_at(
        &self,
        haystack: &[u8],
        at: usize,
        caps: &mut RegexCaptures,
    ) -> Result<bool, NoError> {
        self.regex.captures_at(haystack, at, caps)
    }

    fn shortest_match_at(&self, haystack: &[u8], at: usize) -> Result<Option<usize>, NoError> {
        self.regex.shortest_match_at(haystack, at)
    }

    fn non_matching_bytes(&self) -> Option<&ByteSet> {
        self.regex.non_matching_bytes()
    }

    fn line_terminator(&self) -> Option<LineTerminator> {
        self.regex.line_terminator()
    }

    fn find_candidate_line(&self, haystack: &[u8]) -> Result<Option<LineMatchKind>, NoError> {
        match &self.filter {
            Some(Filter::Rare(rare)) => Ok(rare.find(haystack).map(LineMatchKind::Candidate)),
            Some(Filter::Literal(literal)) => {
                Ok(literal.find(haystack).map(LineMatchKind::Candidate))
            }
            None => self.regex.find_candidate_line(haystack),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use grep_regex::RegexMatcherBuilder;

    fn matcher(pattern: &str, case_insensitive: bool) -> Candidates {
        let regex = RegexMatcherBuilder::new()
            .multi_line(true)
            .line_terminator(Some(b'\n'))
            .case_insensitive(case_insensitive)
            .build(pattern)
            .unwrap();
        Candidates::new(regex, pattern, case_insensitive)
    }

    fn rare(m: &Candidates) -> &RareByte {
        match &m.filter {
            Some(Filter::Rare(rare)) => rare,
            _ => panic!("no filter on several literals"),
        }
    }

    fn literal(m: &Candidates) -> Option<&[u8]> {
        match &m.filter {
            Some(Filter::Literal(l)) => Some(l.needle()),
            _ => None,
        }
    }

    #[test]
    fn case_insensitive_words_search_their_rarest_byte() {
        let m = matcher(r"fixme\(", true);
        assert_eq!(rare(&m).bytes, b"Xx");
        // A pattern whose start and end are not finite sets of literals is left to the regex
        // engine.
        assert!(matcher(r"\w+_unchecked", true).filter.is_none());
        assert!(matcher("a*b", true).filter.is_none());
    }

    #[test]
    fn one_literal_is_searched_whole_from_the_start_or_the_end() {
        assert_eq!(
            literal(&matcher("get_unchecked", false)),
            Some(&b"get_unchecked"[..])
        );
        // The end is longer than the start.
        assert_eq!(
            literal(&matcher(r"fn\s+[a-z_]+_unchecked", false)),
            Some(&b"_unchecked"[..])
        );
        assert_eq!(literal(&matcher(r"^impl\b.*", false)), Some(&b"impl"[..]));
        // Too short to be rare, or no literal at either end.
        assert_eq!(literal(&matcher("fn", false)), None);
        assert_eq!(literal(&matcher(r"\w+", false)), None);
    }

    /// The literal search finds the first place the literal starts, wherever it lies in the
    /// haystack (in the 64-byte steps, between them, or in the tail after them), and nothing
    /// where it is absent or cut off by the end.
    #[test]
    fn the_literal_search_finds_the_first_start() {
        let m = matcher("get_unchecked", false);
        let Some(Filter::Literal(l)) = &m.filter else {
            panic!("no literal filter")
        };
        for len in [0, 12, 13, 63, 64, 76, 77, 128, 200, 1000] {
            for at in 0..=len {
                let mut hay = vec![b'g'; len + 13];
                // Decoys: the two tested bytes without the rest.
                for (i, b) in hay.iter_mut().enumerate() {
                    if i % 7 == 3 {
                        *b = b'k';
                    }
                }
                hay[at..at + 13].copy_from_slice(b"get_unchecked");
                let want = (0..=len).find(|&i| &hay[i..i + 13] == b"get_unchecked");
                assert_eq!(l.find(&hay), want, "len {len} at {at}");
                assert_eq!(l.find(&hay[..at + 12]), None, "cut off, len {len} at {at}");
            }
        }
        assert_eq!(l.find(b""), None);
    }

    /// One long literal is searched by its first 100 bytes at most (the extractor's cut), and
    /// the line is still found.
    #[test]
    fn a_long_literal_is_searched_by_a_bounded_part() {
        let word = "abcdefghij".repeat(500);
        let m = matcher(&word, false);
        let needle = literal(&m).expect("a literal filter");
        assert!(needle.len() <= 100, "{} bytes", needle.len());
        let text = format!("nothing here\nxx{word}\n");
        let line = text.find('\n').unwrap() + 1;
        let found = m.find_candidate_line(text.as_bytes()).unwrap();
        assert!(matches!(found, Some(LineMatchKind::Candidate(i)) if i >= line));
    }

    /// A model's pattern can be long: what the filter keeps stays bounded (the extractor cuts
    /// literals at 100 bytes and sets at 250 literals), and it still finds the line.
    #[test]
    fn a_long_pattern_keeps_the_filter_small() {
        let word = "fixmeabcdefghij".repeat(200);
        let m = matcher(&word, true);
        let rare = rare(&m);
        assert!(
            rare.allowed.len() <= 100,
            "{} positions",
            rare.allowed.len()
        );
        let text = format!("nothing here\n{}\n", word.to_uppercase());
        let line = text.find('\n').unwrap() + 1;
        let found = m.find_candidate_line(text.as_bytes()).unwrap();
        assert!(matches!(found, Some(LineMatchKind::Candidate(i)) if i >= line));
    }

    /// Every line that matches holds a candidate: for each line the regex matches, searching
    /// from the start of that line finds a candidate within it.
    #[test]
    fn no_matching_line_is_skipped() {
        let text = "fn main() {}\n// FixMe(later) x\nfixme without paren\n  FIXME( now\nxx FIXMe(\n\
                    Straße and STRASSE\nétÉ été ÉTÉ\nerror: Warn\nkelvin \u{212A}elvin\n";
        for (pattern, insensitive) in [
            (r"fixme\(", true),
            ("straße", true),
            ("été", true),
            ("error|warn", true),
            ("kelvin", true),
            ("fix|main", false),
            ("(?i)x{2}", false),
            ("Elvin", false),
            (r"[A-Z]\w+elvin", false),
            (r"été\b", false),
        ] {
            let m = matcher(pattern, insensitive);
            let mut start = 0;
            for line in text.split_inclusive('\n') {
                let end = start + line.len();
                let matches = m.regex.find(line.as_bytes()).unwrap().is_some();
                let candidate = match m.find_candidate_line(&text.as_bytes()[start..]).unwrap() {
                    Some(LineMatchKind::Candidate(i) | LineMatchKind::Confirmed(i)) => {
                        start + i < end
                    }
                    None => false,
                };
                assert!(
                    !matches || candidate,
                    "{pattern:?} matches {line:?}, which was skipped"
                );
                start = end;
            }
        }
    }
}
