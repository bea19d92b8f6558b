//! Cutting a file into chunks: Markdown by heading, code at item boundaries up to a size, any
//! other text by overlapping line windows. Every chunk is also capped in bytes, so a minified
//! file of one long line still gives chunks of a sane size.

use crate::config::Chunking;

/// A chunk's most bytes; a longer line is cut.
pub const MAX_CHUNK_BYTES: usize = 4096;

/// What a file is, for chunking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Markdown,
    Code,
    Text,
}

impl Kind {
    /// By the file's name.
    pub fn of(path: &str) -> Kind {
        let name = path.rsplit('/').next().unwrap_or(path);
        let ext = name
            .rsplit_once('.')
            .map(|(_, e)| e.to_ascii_lowercase())
            .unwrap_or_default();
        match ext.as_str() {
            "md" | "markdown" | "mdx" => Kind::Markdown,
            "txt" | "rst" | "adoc" | "org" | "" if !is_build_file(name) => Kind::Text,
            _ => Kind::Code,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Markdown => "markdown",
            Kind::Code => "code",
            Kind::Text => "text",
        }
    }
}

fn is_build_file(name: &str) -> bool {
    matches!(
        name,
        "Makefile" | "makefile" | "Dockerfile" | "Containerfile" | "Justfile" | "justfile"
    )
}

/// One piece of a file: lines `start_line..=end_line`, counting from 1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    pub start_line: usize,
    pub end_line: usize,
    pub text: String,
}

/// Cut `text` (the file at `path`) into chunks.
pub fn chunk(path: &str, text: &str, settings: &Chunking) -> Vec<Chunk> {
    let lines: Vec<&str> = text.lines().collect();
    let ranges = match Kind::of(path) {
        Kind::Markdown => markdown(&lines, settings.markdown.max_lines),
        Kind::Code => code(&lines, settings.code.max_lines),
        Kind::Text => windows(0, lines.len(), settings.text.lines, settings.text.overlap),
    };
    let mut out = Vec::new();
    for (start, end) in ranges {
        capped(&lines, start, end, &mut out);
    }
    out
}

/// Lines `start..end` as chunks of at most [`MAX_CHUNK_BYTES`], skipping blank ones.
fn capped(lines: &[&str], start: usize, end: usize, out: &mut Vec<Chunk>) {
    let mut current = String::new();
    let mut first = start;
    let flush = |current: &mut String, first: usize, last: usize, out: &mut Vec<Chunk>| {
        if !current.trim().is_empty() {
            out.push(Chunk {
                start_line: first + 1,
                end_line: last + 1,
                text: std::mem::take(current),
            });
        }
        current.clear();
    };
    for (i, line) in lines.iter().enumerate().take(end).skip(start) {
        let mut line: &str = line;
        // A line that does not fit alone is cut into pieces, each a chunk of its own.
        while line.len() > MAX_CHUNK_BYTES {
            flush(&mut current, first, i.saturating_sub(1).max(first), out);
            let cut = line.floor_char_boundary(MAX_CHUNK_BYTES);
            current.push_str(&line[..cut]);
            flush(&mut current, i, i, out);
            line = &line[cut..];
            first = i;
        }
        if !current.is_empty() && current.len() + line.len() + 1 > MAX_CHUNK_BYTES {
            flush(&mut current, first, i - 1, out);
            first = i;
        }
        if current.is_empty() {
            first = i;
        } else {
            current.push('\n');
        }
        current.push_str(line);
    }
    if end > 0 {
        flush(&mut current, first, end - 1, out);
    }
}

/// Sections that start at a heading (outside fenced code), each cut to `max` lines.
fn markdown(lines: &[&str], max: usize) -> Vec<(usize, usize)> {
    let mut starts = vec![0];
    let mut fence: Option<&str> = None;
    for (i, line) in lines.iter().enumerate() {
        let t = line.trim_start();
        let marker = if t.starts_with("```") {
            Some("```")
        } else if t.starts_with("~~~") {
            Some("~~~")
        } else {
            None
        };
        match (fence, marker) {
            (None, Some(m)) => fence = Some(m),
            (Some(f), Some(m)) if f == m => fence = None,
            (None, None) if i > 0 && is_heading(line) => starts.push(i),
            _ => {}
        }
    }
    starts.push(lines.len());
    let mut out = Vec::new();
    for pair in starts.windows(2) {
        out.extend(windows(pair[0], pair[1], max, 0));
    }
    out
}

fn is_heading(line: &str) -> bool {
    let hashes = line.bytes().take_while(|&b| b == b'#').count();
    (1..=6).contains(&hashes) && matches!(line.as_bytes().get(hashes), None | Some(b' ' | b'\t'))
}

/// Code, cut at item boundaries: a piece starts after a blank line (or a closing bracket) at
/// the shallowest indentation where there is one, so a doc comment, attribute or decorator
/// stays with the item it documents and a body with the item it belongs to. Pieces are joined
/// while they fit in `max` lines and [`MAX_CHUNK_BYTES`]; an item too large is cut at its own
/// inner boundaries, and one with none into windows of `max` lines.
fn code(lines: &[&str], max: usize) -> Vec<(usize, usize)> {
    let mut offsets = Vec::with_capacity(lines.len() + 1);
    offsets.push(0usize);
    for l in lines {
        offsets.push(offsets.last().copied().unwrap_or(0) + l.len() + 1);
    }
    let cut = Cut {
        lines,
        offsets,
        max: max.max(1),
    };
    let mut out = Vec::new();
    if let Some((s, e)) = cut.trim(0, lines.len()) {
        cut.pieces(s, e, &mut out);
    }
    out
}

struct Cut<'a> {
    lines: &'a [&'a str],
    /// Byte offset of each line's start, and one past the last.
    offsets: Vec<usize>,
    max: usize,
}

impl Cut<'_> {
    fn fits(&self, start: usize, end: usize) -> bool {
        end - start <= self.max && self.offsets[end] - self.offsets[start] <= MAX_CHUNK_BYTES + 1
    }

    /// `start..end` without blank lines at either end; `None` if all blank.
    fn trim(&self, mut start: usize, mut end: usize) -> Option<(usize, usize)> {
        while start < end && self.lines[start].trim().is_empty() {
            start += 1;
        }
        while end > start && self.lines[end - 1].trim().is_empty() {
            end -= 1;
        }
        (start < end).then_some((start, end))
    }

    /// Where an item may start: a line after a blank one or after a closing bracket, that
    /// neither closes nor continues what came before.
    fn boundary(&self, i: usize) -> bool {
        let line = self.lines[i];
        let t = line.trim_start();
        if t.is_empty() || is_closing(t) || continues(t) {
            return false;
        }
        let prev = self.lines[i - 1];
        let p = prev.trim_start();
        p.is_empty() || (is_closing(p) && indent(prev) <= indent(line))
    }

    /// Push the pieces of non-blank-ended `start..end`, each fitting unless it has no boundary.
    fn pieces(&self, start: usize, end: usize, out: &mut Vec<(usize, usize)>) {
        if self.fits(start, end) {
            out.push((start, end));
            return;
        }
        let candidates: Vec<usize> = (start + 1..end).filter(|&i| self.boundary(i)).collect();
        let Some(level) = candidates.iter().map(|&i| indent(self.lines[i])).min() else {
            out.extend(windows(start, end, self.max, 0));
            return;
        };
        let mut starts: Vec<usize> = vec![start];
        starts.extend(
            candidates
                .into_iter()
                .filter(|&i| indent(self.lines[i]) == level),
        );
        starts.push(end);
        let mut units = Vec::new();
        for pair in starts.windows(2) {
            if let Some((s, e)) = self.trim(pair[0], pair[1]) {
                self.pieces(s, e, &mut units);
            }
        }
        // Whole items side by side share a chunk while they fit.
        let mut current: Option<(usize, usize)> = None;
        for (s, e) in units {
            current = match current {
                Some((cs, _)) if self.fits(cs, e) => Some((cs, e)),
                Some(c) => {
                    out.push(c);
                    Some((s, e))
                }
                None => Some((s, e)),
            };
        }
        out.extend(current);
    }
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

/// A line that closes a block: `}`, `)`, `]`, or `end`.
fn is_closing(t: &str) -> bool {
    t.starts_with(['}', ')', ']'])
        || (t.starts_with("end") && !t[3..].starts_with(|c: char| c.is_alphanumeric() || c == '_'))
}

/// A line that goes on with the statement above it, however far apart: `else`, `catch`, ...
fn continues(t: &str) -> bool {
    [
        "else", "elif", "except", "finally", "catch", "rescue", "ensure",
    ]
    .iter()
    .any(|k| {
        t.strip_prefix(k)
            .is_some_and(|rest| !rest.starts_with(|c: char| c.is_alphanumeric() || c == '_'))
    })
}

/// Longest identifier split into words; longer runs are data (hashes, base64), not names.
const MAX_IDENTIFIER: usize = 64;

/// The words inside the compound identifiers of `text`, lowercased, each once:
/// `reconcileLedgerDrift` gives `reconcile ledger drift`, `parseHTTPHeader2` gives
/// `parse http header 2`. The index's tokenizer already splits at `_`, `-`, `.` and other
/// punctuation, so only changes of case and between letters and digits are cut here.
pub fn identifier_words(text: &str) -> String {
    let mut seen: std::collections::HashSet<&str> = std::collections::HashSet::new();
    let mut out = String::new();
    let mut parts: Vec<&str> = Vec::new();
    for token in text.split(|c: char| !c.is_alphanumeric()) {
        if token.len() < 2 || token.len() > MAX_IDENTIFIER || !seen.insert(token) {
            continue;
        }
        parts.clear();
        split_identifier(token, &mut parts);
        if parts.len() < 2 {
            continue;
        }
        for part in &parts {
            if !out.is_empty() {
                out.push(' ');
            }
            out.extend(part.chars().flat_map(char::to_lowercase));
        }
    }
    out
}

/// Cut `token` where its case turns from lower to upper, where an acronym ends (`HTTPServer`),
/// and between letters and digits.
pub(crate) fn split_identifier<'a>(token: &'a str, parts: &mut Vec<&'a str>) {
    let chars: Vec<(usize, char)> = token.char_indices().collect();
    let mut from = 0;
    for i in 1..chars.len() {
        let (at, c) = chars[i];
        let p = chars[i - 1].1;
        let next_lower = chars.get(i + 1).is_some_and(|&(_, n)| n.is_lowercase());
        let cut = (p.is_lowercase() && c.is_uppercase())
            || (p.is_uppercase() && c.is_uppercase() && next_lower)
            || (p.is_alphabetic() && c.is_numeric())
            || (p.is_numeric() && c.is_alphabetic());
        if cut {
            parts.push(&token[from..at]);
            from = at;
        }
    }
    parts.push(&token[from..]);
}

/// Windows of `size` lines over `start..end`, each starting `size - overlap` after the last.
fn windows(start: usize, end: usize, size: usize, overlap: usize) -> Vec<(usize, usize)> {
    let step = size.saturating_sub(overlap).max(1);
    let mut out = Vec::new();
    let mut s = start;
    while s < end {
        let e = (s + size).min(end);
        out.push((s, e));
        if e == end {
            break;
        }
        s += step;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cut(path: &str, text: &str) -> Vec<(usize, usize)> {
        chunk(path, text, &Chunking::default())
            .into_iter()
            .map(|c| (c.start_line, c.end_line))
            .collect()
    }

    #[test]
    fn markdown_is_cut_at_headings_but_not_inside_code_fences() {
        let text = "intro\n# One\na\n```\n# not a heading\n```\n## Two\nb\n#nohash\n";
        assert_eq!(cut("a.md", text), vec![(1, 1), (2, 6), (7, 9)]);
        let chunks = chunk("a.md", text, &Chunking::default());
        assert!(chunks[1].text.starts_with("# One"));
    }

    #[test]
    fn code_blocks_are_joined_up_to_the_cap_and_long_ones_cut() {
        let mut text = String::new();
        for i in 0..10 {
            text.push_str(&format!("fn f{i}() {{\n    {i}\n}}\n\n"));
        }
        // Ten 3-line blocks, 4 lines apart: joined while a chunk spans at most 60 lines.
        assert_eq!(cut("a.rs", &text), vec![(1, 39)]);
        let long: String = (0..150).map(|i| format!("x{i}\n")).collect();
        assert_eq!(cut("a.rs", &long), vec![(1, 60), (61, 120), (121, 150)]);
    }

    #[test]
    fn a_doc_comment_stays_with_its_item_and_bodies_are_not_cut_at_inner_blank_lines() {
        let mut text = String::from("//! Module.\n\nuse std::io;\n\n");
        // Twelve functions of eleven lines, each with a blank line inside its body.
        for f in 0..12 {
            text.push_str(&format!(
                "/// Doc of f{f}.\n#[inline]\npub fn f{f}() -> u32 {{\n    let a = {f};\n\n    \
                 let b = a + 1;\n    let c = b * 2;\n\n    c\n}}\n\n"
            ));
        }
        let chunks = chunk("a.rs", &text, &Chunking::default());
        assert!(chunks.len() >= 3, "{chunks:?}");
        for c in &chunks {
            let first = c.text.lines().next().unwrap();
            assert!(
                first.starts_with("///") || first.starts_with("//!"),
                "a chunk starts at its doc comment: {c:?}"
            );
            assert_eq!(c.text.lines().last(), Some("}"), "{c:?}");
            assert!(c.end_line - c.start_line < 60);
        }
        // The blank-line blocks of before cut functions in half.
        let f5 = chunks.iter().find(|c| c.text.contains("fn f5()")).unwrap();
        assert!(f5.text.contains("/// Doc of f5.") && f5.text.contains("    c\n}"));
    }

    #[test]
    fn large_items_are_cut_at_their_own_members_and_languages_keep_their_comments() {
        // A class too large for one chunk: cut between its methods, each with its decorator
        // and comment, never inside one.
        let mut py = String::from("import os\n\n\nclass Big:\n    \"\"\"A big class.\"\"\"\n");
        for m in 0..20 {
            py.push_str(&format!(
                "\n    # Method {m}.\n    @staticmethod\n    def m{m}(x):\n        \"\"\"Do {m}.\"\"\"\n        y = x\n\n        return y\n"
            ));
        }
        for c in chunk("a.py", &py, &Chunking::default()) {
            let first = c.text.lines().next().unwrap().trim_start();
            assert!(
                ["import", "class", "# Method"]
                    .iter()
                    .any(|p| first.starts_with(p)),
                "{c:?}"
            );
        }
        // Go: a comment right above `func`; JavaScript: `/** */` above a function.
        let go = "package x\n\n// Add adds.\nfunc Add(a, b int) int {\n\treturn a + b\n}\n\n// Sub subtracts.\nfunc Sub(a, b int) int {\n\treturn a - b\n}\n";
        let chunks = chunk(
            "x.go",
            go,
            &Chunking {
                code: crate::config::Sections { max_lines: 5 },
                ..Chunking::default()
            },
        );
        let starts: Vec<&str> = chunks
            .iter()
            .map(|c| c.text.lines().next().unwrap())
            .collect();
        assert_eq!(starts, ["package x", "// Add adds.", "// Sub subtracts."]);
        let js = "/**\n * Sum.\n */\nexport function sum(a) {\n  return a;\n}\n/** Neg. */\nfunction neg(a) {\n  return -a;\n}\n";
        let chunks = chunk(
            "x.js",
            js,
            &Chunking {
                code: crate::config::Sections { max_lines: 6 },
                ..Chunking::default()
            },
        );
        let starts: Vec<&str> = chunks
            .iter()
            .map(|c| c.text.lines().next().unwrap())
            .collect();
        assert_eq!(starts, ["/**", "/** Neg. */"]);
    }

    #[test]
    fn compound_identifiers_give_their_words_once() {
        assert_eq!(
            identifier_words("fn reconcileLedgerDrift() { reconcileLedgerDrift(); }"),
            "reconcile ledger drift"
        );
        assert_eq!(
            identifier_words("parseHTTPHeader2 utf8"),
            "parse http header 2 utf 8"
        );
        // Plain words, snake_case (the tokenizer splits it) and data give nothing.
        assert_eq!(
            identifier_words("plain words reconcile_ledger_drift HTTP"),
            ""
        );
        assert_eq!(identifier_words(&"aB".repeat(40)), "");
        assert_eq!(identifier_words("ÉtéHiver"), "été hiver");
    }

    #[test]
    fn text_is_cut_into_overlapping_windows() {
        let text: String = (0..100).map(|i| format!("line {i}\n")).collect();
        assert_eq!(cut("a.txt", &text), vec![(1, 40), (31, 70), (61, 100)]);
    }

    #[test]
    fn a_huge_line_becomes_bounded_chunks_cut_on_char_boundaries() {
        let text = format!("short\n{}\nend\n", "é".repeat(10_000));
        let chunks = chunk("a.js", &text, &Chunking::default());
        assert!(chunks.len() >= 5, "{}", chunks.len());
        for c in &chunks {
            assert!(c.text.len() <= MAX_CHUNK_BYTES);
        }
        assert_eq!(chunks[0].text, "short");
        assert_eq!(chunks.last().unwrap().text.lines().last(), Some("end"));
    }

    #[test]
    fn blank_and_empty_files_give_no_chunks() {
        assert!(cut("a.rs", "").is_empty());
        assert!(cut("a.md", "\n\n   \n").is_empty());
        assert!(cut("a.txt", "\n\n").is_empty());
    }

    #[test]
    fn kinds_by_name() {
        assert_eq!(Kind::of("docs/A.MD"), Kind::Markdown);
        assert_eq!(Kind::of("LICENSE"), Kind::Text);
        assert_eq!(Kind::of("x/Makefile"), Kind::Code);
        assert_eq!(Kind::of("notes.txt"), Kind::Text);
        assert_eq!(Kind::of("a.rs"), Kind::Code);
    }
}
