//! Cutting a file into chunks: Markdown by heading, code by blank-line blocks up to a size, any
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
        Kind::Code => blocks(&lines, settings.code.max_lines),
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

/// Blocks separated by blank lines, joined while they fit in `max` lines; a longer block is
/// cut into windows of `max`.
fn blocks(lines: &[&str], max: usize) -> Vec<(usize, usize)> {
    let mut out: Vec<(usize, usize)> = Vec::new();
    let mut block_start: Option<usize> = None;
    let mut current: Option<(usize, usize)> = None;
    let mut push = |block: (usize, usize), current: &mut Option<(usize, usize)>| {
        let (s, e) = block;
        match current {
            Some((cs, _)) if e - *cs <= max => *current = Some((*cs, e)),
            _ => {
                if let Some(c) = current.take() {
                    out.push(c);
                }
                if e - s > max {
                    let mut pieces = windows(s, e, max, 0);
                    *current = pieces.pop();
                    out.extend(pieces);
                } else {
                    *current = Some((s, e));
                }
            }
        }
    };
    for (i, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            if let Some(s) = block_start.take() {
                push((s, i), &mut current);
            }
        } else if block_start.is_none() {
            block_start = Some(i);
        }
    }
    if let Some(s) = block_start {
        push((s, lines.len()), &mut current);
    }
    if let Some(c) = current {
        out.push(c);
    }
    out
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
