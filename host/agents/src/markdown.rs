//! Markdown agent files: YAML frontmatter between `---` lines, then a body.
//!
//! Three dialects (rawko Markdown, kodelet, Claude Code) share this shape; they differ in the
//! frontmatter's fields and in how the system prompt comes out of the body.

use super::diag::{Pos, Problems};

/// The body of a subagent file as its system prompt; an empty body is an error.
pub fn body_prompt(body: &str, body_line: usize, p: &mut Problems) -> String {
    let prompt = body.trim();
    if prompt.is_empty() {
        p.error(
            Pos::new(body_line, 1),
            "no system prompt: the body below the frontmatter is empty",
            Some("write the agent's instructions below the closing '---'".into()),
        );
    }
    prompt.to_string()
}

/// A Markdown file split into its frontmatter and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Split<'t> {
    /// The YAML between the fences.
    pub yaml: &'t str,
    /// Lines before the YAML starts (the opening fence, and a BOM line if any): add to YAML
    /// line numbers to get file line numbers.
    pub yaml_line_offset: usize,
    pub body: &'t str,
    /// The file line the body starts on.
    pub body_line: usize,
}

/// Split `text`; a missing or unclosed frontmatter is recorded in `problems`.
pub fn split<'t>(text: &'t str, problems: &mut Problems) -> Option<Split<'t>> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = LineIter::new(text);
    let Some((first, _)) = lines.next() else {
        problems.error(
            Pos::START,
            "the file is empty",
            Some(FRONTMATTER_HINT.into()),
        );
        return None;
    };
    if first.trim_end() != "---" {
        problems.error(
            Pos::START,
            "no YAML frontmatter: a Markdown agent file starts with a '---' line",
            Some(FRONTMATTER_HINT.into()),
        );
        return None;
    }
    let yaml_start = lines.offset;
    let mut line_no = 1;
    while let Some((line, start)) = lines.next() {
        line_no += 1;
        let fence = line.trim_end();
        if fence == "---" || fence == "..." {
            let body_start = lines.offset;
            return Some(Split {
                yaml: &text[yaml_start..start],
                yaml_line_offset: 1,
                body: &text[body_start..],
                body_line: line_no + 1,
            });
        }
    }
    problems.error(
        Pos::START,
        "the frontmatter opened here is never closed",
        Some("add a line '---' after the YAML fields".into()),
    );
    None
}

const FRONTMATTER_HINT: &str = "write the fields between two '---' lines, then the prompt";

/// Lines of `text` with the byte offset each starts at; tracks the offset after the last line.
struct LineIter<'t> {
    text: &'t str,
    offset: usize,
}

impl<'t> LineIter<'t> {
    fn new(text: &'t str) -> Self {
        LineIter { text, offset: 0 }
    }

    fn next(&mut self) -> Option<(&'t str, usize)> {
        if self.offset >= self.text.len() {
            return None;
        }
        let start = self.offset;
        let rest = &self.text[start..];
        let (line, len) = match rest.find('\n') {
            Some(i) => (&rest[..i], i + 1),
            None => (rest, rest.len()),
        };
        self.offset += len;
        Some((line.strip_suffix('\r').unwrap_or(line), start))
    }
}

/// The `## System Prompt` section of `body` (up to the next heading of level one or two,
/// ignoring headings inside fenced code blocks), or `None` when there is no such section.
pub fn section<'t>(body: &'t str, title: &str) -> Option<&'t str> {
    let mut lines = LineIter::new(body);
    let mut fence: Option<&str> = None;
    let mut start: Option<usize> = None;
    while let Some((line, at)) = lines.next() {
        let trimmed = line.trim_start();
        if let Some(f) = fence {
            if trimmed.starts_with(f) {
                fence = None;
            }
            continue;
        }
        if trimmed.starts_with("```") {
            fence = Some("```");
            continue;
        }
        if trimmed.starts_with("~~~") {
            fence = Some("~~~");
            continue;
        }
        let level = heading_level(line);
        match start {
            None if level == Some(2) => {
                let text = line
                    .trim_start_matches('#')
                    .trim()
                    .trim_end_matches('#')
                    .trim();
                if text.eq_ignore_ascii_case(title) {
                    start = Some(lines.offset);
                }
            }
            Some(s) if level.is_some_and(|l| l <= 2) => return Some(&body[s..at]),
            _ => {}
        }
    }
    start.map(|s| &body[s..])
}

/// `Some(n)` for an ATX heading `#…# text` of level n (at most three leading spaces).
fn heading_level(line: &str) -> Option<usize> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    if indent > 3 {
        return None;
    }
    let rest = &line[indent..];
    let hashes = rest.len() - rest.trim_start_matches('#').len();
    if !(1..=6).contains(&hashes) {
        return None;
    }
    let after = &rest[hashes..];
    (after.is_empty() || after.starts_with([' ', '\t'])).then_some(hashes)
}

/// Frontmatter read the way Claude Code falls back to when it is not valid YAML: one
/// `key: value` per line, the value being everything after the first `: ` (so it may contain
/// `: ` itself), and lines that do not start a key continuing the value before them. Returns
/// the mapping and the keys read, or `None` when no line starts a key.
pub fn tolerant(yaml: &str) -> Option<(super::yaml::Node, Vec<String>)> {
    use super::yaml::{Entry, Node, Scalar, Value};
    let mut entries: Vec<Entry> = Vec::new();
    for (i, line) in yaml.lines().enumerate() {
        let line_no = i + 1;
        let trimmed = line.trim_end();
        if trimmed.trim().is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let key_end = trimmed.find(':').filter(|&at| {
            at > 0
                && !line.starts_with([' ', '\t'])
                && trimmed[..at]
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        });
        match key_end {
            Some(at) => {
                let value = unquote(trimmed[at + 1..].trim());
                entries.push(Entry {
                    key: trimmed[..at].to_string(),
                    key_pos: Pos::new(line_no, 1),
                    value: Node {
                        pos: Pos::new(line_no, at + 2),
                        value: Value::Scalar(Scalar {
                            text: value.to_string(),
                            plain: false,
                            core_tag: None,
                        }),
                    },
                });
            }
            None => {
                let last = entries.last_mut()?;
                if let Value::Scalar(s) = &mut last.value.value {
                    if !s.text.is_empty() {
                        s.text.push('\n');
                    }
                    s.text.push_str(trimmed.trim());
                }
            }
        }
    }
    if entries.is_empty() {
        return None;
    }
    let keys = entries.iter().map(|e| e.key.clone()).collect();
    Some((
        Node {
            pos: Pos::new(1, 1),
            value: Value::Map(entries),
        },
        keys,
    ))
}

/// A value without the quotes around it, when it is wholly quoted.
fn unquote(v: &str) -> &str {
    for q in ['"', '\''] {
        if v.len() >= 2 && v.starts_with(q) && v.ends_with(q) {
            return &v[1..v.len() - 1];
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_frontmatter_and_body_with_line_numbers() {
        let mut p = Problems::new();
        let s = split("---\nname: a\n---\nBody\n", &mut p).unwrap();
        assert_eq!(s.yaml, "name: a\n");
        assert_eq!(s.yaml_line_offset, 1);
        assert_eq!(s.body, "Body\n");
        assert_eq!(s.body_line, 4);
        let s = split("---\r\nname: a\r\n---\r\n", &mut p).unwrap();
        assert_eq!(s.yaml, "name: a\r\n");
        assert_eq!(s.body, "");
    }

    #[test]
    fn unclosed_and_missing_frontmatter_are_errors() {
        for (text, want) in [
            ("---\nname: a\nbody\n", "never closed"),
            ("# Title\n", "no YAML frontmatter"),
            ("", "empty"),
        ] {
            let mut p = Problems::new();
            assert!(split(text, &mut p).is_none());
            let d = p.into_diagnostics("f.md");
            assert!(d[0].to_string().contains(want), "{d:?}");
            assert_eq!((d[0].line, d[0].column), (1, 1));
        }
    }

    #[test]
    fn the_system_prompt_section_ends_at_the_next_heading_outside_code() {
        let body = "# Dev\nintro\n## System Prompt\nDo this.\n```md\n## not a heading\n```\n### Sub\nmore\n## Notes\nignored\n";
        assert_eq!(
            section(body, "System Prompt").unwrap(),
            "Do this.\n```md\n## not a heading\n```\n### Sub\nmore\n"
        );
        assert_eq!(
            section("## system prompt ##\nx\n", "System Prompt"),
            Some("x\n")
        );
        assert_eq!(section("no sections\n", "System Prompt"), None);
    }
}
