//! Finding the lines that may match a pattern that starts with one of several literals, such
//! as any case-insensitive word (`fixme` is 32 literals, `fixme` to `FIXME`).
//!
//! The regex engine looks for several literals at once with a SIMD algorithm (Teddy) only on
//! x86-64 and AArch64; compiled to WebAssembly it falls back to an automaton that takes a step
//! per byte of the haystack, which made a case-insensitive Grep three times slower than a
//! case-sensitive one. Here, instead, the byte position in the literals that is rarest in
//! source text (`x` or `X` for `fixme`) is searched with `memchr` (SIMD in WebAssembly too),
//! each hit is checked byte by byte against what the literals allow around it, and only the
//! line of a hit that passes goes to the regex engine.
//!
//! The check is a necessary condition, never a sufficient one: every match of the pattern
//! starts with one of the literals, so every match's line holds a hit that passes. A line that
//! passes but does not match is left to the regex engine to reject.

use grep_matcher::{ByteSet, LineMatchKind, LineTerminator, Match, Matcher, NoError};
use grep_regex::{RegexCaptures, RegexMatcher};
use regex_syntax::hir::literal::{ExtractKind, Extractor};

/// A [`RegexMatcher`] whose candidate lines are found as described above, when the pattern
/// allows it; every other question goes to the regex matcher unchanged.
pub struct Candidates {
    regex: RegexMatcher,
    rare: Option<RareByte>,
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

/// The literals the pattern can start with, when they make a good filter: a finite set of at
/// least two literals (a single one is already searched with `memmem`), none empty.
fn prefix_literals(pattern: &str, case_insensitive: bool) -> Option<Vec<Vec<u8>>> {
    let hir = regex_syntax::ParserBuilder::new()
        .case_insensitive(case_insensitive)
        .multi_line(true)
        .utf8(false)
        .build()
        .parse(pattern)
        .ok()?;
    let seq = Extractor::new().kind(ExtractKind::Prefix).extract(&hir);
    let literals: Vec<Vec<u8>> = seq
        .literals()?
        .iter()
        .map(|l| l.as_bytes().to_vec())
        .collect();
    (literals.len() >= 2 && literals.iter().all(|l| !l.is_empty())).then_some(literals)
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
        let rare = prefix_literals(pattern, case_insensitive).and_then(|l| RareByte::new(&l));
        Candidates { regex, rare }
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
        match &self.rare {
            Some(rare) => Ok(rare.find(haystack).map(LineMatchKind::Candidate)),
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

    #[test]
    fn case_insensitive_words_search_their_rarest_byte() {
        let m = matcher(r"fixme\(", true);
        let rare = m.rare.as_ref().expect("a filter");
        assert_eq!(rare.bytes, b"Xx");
        // A single literal is left to the regex engine's own substring search.
        assert!(matcher("fixme", false).rare.is_none());
        // So is a pattern whose start is not a finite set of literals.
        assert!(matcher(r"\w+_unchecked", true).rare.is_none());
        assert!(matcher("a*b", true).rare.is_none());
    }

    /// A model's pattern can be long: what the filter keeps stays bounded (the extractor cuts
    /// literals at 100 bytes and sets at 250 literals), and it still finds the line.
    #[test]
    fn a_long_pattern_keeps_the_filter_small() {
        let word = "fixmeabcdefghij".repeat(200);
        let m = matcher(&word, true);
        let rare = m.rare.as_ref().expect("a filter");
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
