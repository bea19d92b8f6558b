//! Glob expansion, done by rawko rather than a shell, and only inside the workspace.
//!
//! A word's characters carry whether they were quoted, because `"*.rs"` is a file name and
//! `*.rs` a pattern. Expansion happens before the policy sees the command, so a file named
//! `-rf` or `--output=x` in the workspace shows up as the argument it will become; results that
//! would read as options (start with `-`) are written `./-rf`.

use std::path::{Path, PathBuf};

/// One character of a word, and whether it was quoted or escaped.
pub type QChar = (char, bool);

/// Most paths one pattern may expand to.
pub const MAX_MATCHES: usize = 10_000;

/// Whether the unquoted characters of `word` make a glob pattern, as bash sees one: `*`, `?`,
/// or a `[` with a closing `]` after at least one character.
pub fn is_pattern(word: &[QChar]) -> bool {
    word.iter().enumerate().any(|(i, &(c, quoted))| {
        !quoted
            && match c {
                '*' | '?' => true,
                '[' => class_end(word, i).is_some(),
                _ => false,
            }
    })
}

/// Whether the unquoted characters of `word` contain a brace expansion (`{a,b}`, `{1..3}`).
pub fn has_brace_expansion(word: &[QChar]) -> bool {
    let mut open: Vec<usize> = Vec::new();
    for (i, &(c, quoted)) in word.iter().enumerate() {
        if quoted {
            continue;
        }
        match c {
            '{' => open.push(i),
            '}' => {
                if let Some(start) = open.pop() {
                    let inner = &word[start + 1..i];
                    let comma = inner.iter().any(|&(c, q)| c == ',' && !q);
                    let range = inner
                        .windows(2)
                        .any(|w| w[0] == ('.', false) && w[1] == ('.', false));
                    if comma || range {
                        return true;
                    }
                }
            }
            _ => {}
        }
    }
    false
}

/// Why a pattern cannot be expanded here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GlobError {
    OutsideWorkspace,
    TooMany,
}

/// Expand `word` against the filesystem from `cwd`. `Ok(None)`: no match, and the word stays
/// as written (bash's default). Every directory read must lie inside `workspace`.
pub fn expand(
    word: &[QChar],
    cwd: &Path,
    workspace: &Path,
) -> Result<Option<Vec<String>>, GlobError> {
    let absolute = word.first() == Some(&('/', false)) || word.first() == Some(&('/', true));
    let components: Vec<&[QChar]> = word.split(|&(c, _)| c == '/').collect();
    // Candidates: (filesystem path, text as it will be written).
    let mut current: Vec<(PathBuf, String)> = vec![if absolute {
        (PathBuf::from("/"), String::new())
    } else {
        (cwd.to_path_buf(), String::new())
    }];
    let last = components.len() - 1;
    for (i, comp) in components.iter().enumerate() {
        if i == 0 && absolute {
            continue;
        }
        let sep = if i == 0 || (i == 1 && absolute) {
            if absolute { "/" } else { "" }
        } else {
            "/"
        };
        if comp.is_empty() {
            // `a//b` or a trailing `/`: keep the separator.
            for (_, text) in &mut current {
                text.push_str(sep);
            }
            continue;
        }
        let mut next = Vec::new();
        if is_pattern(comp) {
            for (dir, text) in &current {
                let real = dir.canonicalize().unwrap_or_else(|_| dir.clone());
                if !real.starts_with(workspace) {
                    return Err(GlobError::OutsideWorkspace);
                }
                let Ok(entries) = std::fs::read_dir(dir) else {
                    continue;
                };
                let mut names: Vec<String> = entries
                    .filter_map(|e| e.ok())
                    .filter_map(|e| e.file_name().into_string().ok())
                    .filter(|n| !n.starts_with('.') || comp.first().map(|q| q.0) == Some('.'))
                    .filter(|n| matches(comp, &n.chars().collect::<Vec<_>>()))
                    .collect();
                names.sort();
                for n in names {
                    let path = dir.join(&n);
                    if i != last && !path.is_dir() {
                        continue;
                    }
                    next.push((path, format!("{text}{sep}{n}")));
                    if next.len() > MAX_MATCHES {
                        return Err(GlobError::TooMany);
                    }
                }
            }
        } else {
            let lit: String = comp.iter().map(|q| q.0).collect();
            for (dir, text) in &current {
                let path = dir.join(&lit);
                if i == last || path.is_dir() {
                    next.push((path, format!("{text}{sep}{lit}")));
                }
            }
        }
        current = next;
        if current.is_empty() {
            return Ok(None);
        }
    }
    Ok(Some(
        current
            .into_iter()
            .map(|(_, text)| {
                if text.starts_with('-') {
                    format!("./{text}")
                } else {
                    text
                }
            })
            .collect(),
    ))
}

/// The index of the `]` closing a class opened at `open`, if there is one.
fn class_end(p: &[QChar], open: usize) -> Option<usize> {
    let mut i = open + 1;
    if i < p.len() && !p[i].1 && (p[i].0 == '!' || p[i].0 == '^') {
        i += 1;
    }
    // A `]` right after the opening (or the negation) is a member, not the end.
    if i < p.len() && p[i].0 == ']' {
        i += 1;
    }
    while i < p.len() {
        if p[i] == (']', false) {
            return Some(i);
        }
        i += 1;
    }
    None
}

/// One element of a compiled pattern.
enum Tok<'a> {
    Star,
    Any,
    Class(&'a [QChar]),
    Lit(char),
}

fn compile(p: &[QChar]) -> Vec<Tok<'_>> {
    let mut toks = Vec::with_capacity(p.len());
    let mut i = 0;
    while i < p.len() {
        match p[i] {
            ('*', false) => {
                if !matches!(toks.last(), Some(Tok::Star)) {
                    toks.push(Tok::Star);
                }
            }
            ('?', false) => toks.push(Tok::Any),
            ('[', false) => {
                if let Some(end) = class_end(p, i) {
                    toks.push(Tok::Class(&p[i + 1..end]));
                    i = end;
                } else {
                    toks.push(Tok::Lit('['));
                }
            }
            (c, _) => toks.push(Tok::Lit(c)),
        }
        i += 1;
    }
    toks
}

/// Whether `name` matches the pattern `p` (one path component). Linear in practice: only the
/// last `*` is ever backtracked to, so hostile patterns (`*a*a*a*a*b`) stay cheap.
pub fn matches(p: &[QChar], name: &[char]) -> bool {
    let toks = compile(p);
    let (mut ti, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < name.len() {
        if let Some(t) = toks.get(ti) {
            let one = match t {
                Tok::Star => {
                    star = Some((ti + 1, ni));
                    ti += 1;
                    continue;
                }
                Tok::Any => true,
                Tok::Class(class) => in_class(class, name[ni]),
                Tok::Lit(c) => *c == name[ni],
            };
            if one {
                ti += 1;
                ni += 1;
                continue;
            }
        }
        match star {
            Some((after, from)) => {
                ti = after;
                ni = from + 1;
                star = Some((after, from + 1));
            }
            None => return false,
        }
    }
    toks[ti..].iter().all(|t| matches!(t, Tok::Star))
}

fn in_class(class: &[QChar], c: char) -> bool {
    let (negated, class) = match class.first() {
        Some(&('!', false)) | Some(&('^', false)) => (true, &class[1..]),
        _ => (false, class),
    };
    let mut found = false;
    let mut i = 0;
    while i < class.len() {
        let lo = class[i].0;
        if i + 2 < class.len() && class[i + 1] == ('-', false) {
            let hi = class[i + 2].0;
            if lo <= c && c <= hi {
                found = true;
            }
            i += 3;
        } else {
            if lo == c {
                found = true;
            }
            i += 1;
        }
    }
    found != negated
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Vec<QChar> {
        s.chars().map(|c| (c, false)).collect()
    }

    fn m(p: &str, n: &str) -> bool {
        matches(&q(p), &n.chars().collect::<Vec<_>>())
    }

    #[test]
    fn patterns_match_like_bash() {
        assert!(m("*.rs", "main.rs"));
        assert!(!m("*.rs", "main.rsx"));
        assert!(m("a?c", "abc"));
        assert!(m("[a-c]x", "bx"));
        assert!(!m("[!a-c]x", "bx"));
        assert!(m("[]]", "]"));
        assert!(m("[", "["));
        assert!(m("*a*b", "xaxxb"));
        assert!(!m("*a*a*a*a*a*a*a*a*a*a*a*b", &"a".repeat(200)));
        assert!(!is_pattern(&q("[")));
        assert!(is_pattern(&q("x[ab]")));
        // Quoted characters are literal.
        let quoted: Vec<QChar> = "*.rs".chars().map(|c| (c, true)).collect();
        assert!(!is_pattern(&quoted));
    }

    #[test]
    fn brace_expansions_are_recognised() {
        assert!(has_brace_expansion(&q("{rm,-rf,x}")));
        assert!(has_brace_expansion(&q("file{,.bak}")));
        assert!(has_brace_expansion(&q("{1..3}")));
        assert!(!has_brace_expansion(&q("{}")));
        assert!(!has_brace_expansion(&q("{a}")));
        let mut quoted = q("{a,b}");
        quoted[2].1 = true;
        assert!(!has_brace_expansion(&quoted));
    }

    #[test]
    fn expansion_stays_in_the_workspace_and_defuses_options() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        std::fs::create_dir(ws.join("src")).unwrap();
        for f in ["src/a.rs", "src/b.rs", "src/.hidden.rs", "-rf", "notes.txt"] {
            std::fs::write(ws.join(f), "").unwrap();
        }
        assert_eq!(
            expand(&q("src/*.rs"), &ws, &ws).unwrap().unwrap(),
            ["src/a.rs", "src/b.rs"]
        );
        assert_eq!(
            expand(&q("*"), &ws, &ws).unwrap().unwrap(),
            ["./-rf", "notes.txt", "src"]
        );
        assert_eq!(expand(&q("*.none"), &ws, &ws).unwrap(), None);
        assert_eq!(
            expand(&q("/etc/*"), &ws, &ws),
            Err(GlobError::OutsideWorkspace)
        );
        assert_eq!(
            expand(&q("../*"), &ws.join("src"), &ws.join("src")),
            Err(GlobError::OutsideWorkspace)
        );
        assert_eq!(
            expand(&q("*/a.rs"), &ws, &ws).unwrap().unwrap(),
            ["src/a.rs"]
        );
    }
}
