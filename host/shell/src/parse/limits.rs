//! The checks in front of the parser. brush-parser's time grows exponentially with some shapes
//! of text (unclosed parentheses, nested expansions, here-document bodies full of expansions) and
//! its tokenizer loops on malformed here-documents; these scans over the raw text refuse such
//! commands before the parser sees them, erring on the side of refusing.

use super::ParseError;

/// Most expansions that open a bracket (`$(`, `$((`, `$[`, `${`, and backquotes) an expanded
/// here-document body may hold (`<<'EOF'` bodies are not expanded and have no limit).
pub const MAX_HERE_SUBSTITUTIONS: usize = 6;

/// Why an expanded here-document body is not handed to brush-parser's word parser, whose
/// backtracking is exponential in the expansions it finds unclosed: one left open, or more than
/// [`MAX_HERE_SUBSTITUTIONS`] of them (quotes inside an expansion can hide a closing bracket
/// from this scan but not from the parser, so the count bounds what the scan cannot see).
pub(super) fn here_body_too_complex(text: &str) -> Option<String> {
    let b = text.as_bytes();
    // The closing brackets still awaited, innermost last (`$((` awaits two).
    let mut open: Vec<u8> = Vec::new();
    let mut count = 0usize;
    let mut i = 0;
    while i < b.len() {
        match (b[i], b.get(i + 1).copied()) {
            (b'\\', _) => i += 1,
            (b'`', _) => count += 1,
            (b'$', Some(b'(')) if b.get(i + 2) == Some(&b'(') => {
                count += 1;
                open.extend([b')', b')']);
                i += 2;
            }
            (b'$', Some(c @ (b'(' | b'[' | b'{'))) => {
                count += 1;
                open.push(match c {
                    b'(' => b')',
                    b'[' => b']',
                    _ => b'}',
                });
                i += 1;
            }
            (b'(', _) if !open.is_empty() => open.push(b')'),
            (c @ (b')' | b']' | b'}'), _) if open.last() == Some(&c) => {
                open.pop();
            }
            _ => {}
        }
        i += 1;
    }
    if count > MAX_HERE_SUBSTITUTIONS {
        return Some(format!(
            "has more than {MAX_HERE_SUBSTITUTIONS} expansions (quote its delimiter, <<'EOF', to keep the text as it is)"
        ));
    }
    (!open.is_empty())
        .then(|| "opens an expansion (`$(`, `$((`, `$[`, `${`) it does not close".to_string())
}

/// An over-estimate of how deeply `s` nests: brackets, keywords that open compound commands,
/// and backticks, counted without regard to quoting.
/// The most `(` open at once that do not open a command substitution (`$(`, which is not
/// ambiguous), wherever they are (quotes included: a refusal errs on the safe side).
pub(super) fn paren_depth(s: &str) -> usize {
    open_at_once(s, '(', ')', |prev| prev != '$')
}

/// The most `${` open at once (other braces do not count, but close what they opened).
pub(super) fn expansion_depth(s: &str) -> usize {
    open_at_once(s, '{', '}', |prev| prev == '$')
}

/// The most `open` characters open at once among those `counted` says count (by the character
/// before each); every `close` closes the latest `open`, counted or not.
fn open_at_once(s: &str, open: char, close: char, counted: impl Fn(char) -> bool) -> usize {
    let (mut stack, mut depth, mut max) = (Vec::new(), 0usize, 0usize);
    let mut prev = ' ';
    for c in s.chars() {
        if c == open {
            let counts = counted(prev);
            stack.push(counts);
            if counts {
                depth += 1;
                max = max.max(depth);
            }
        } else if c == close && stack.pop() == Some(true) {
            depth -= 1;
        }
        prev = c;
    }
    max
}

/// Every `<<` here-document (not `<<<`) has a delimiter that is not empty once its quotes and
/// backslashes are removed, and a later line that is that delimiter (after leading tabs, for
/// `<<-`).
pub(super) fn check_here_documents(s: &str) -> Result<(), ParseError> {
    let chars: Vec<char> = s.chars().collect();
    let mut i = 0;
    while i + 1 < chars.len() {
        let here = chars[i] == '<'
            && chars[i + 1] == '<'
            && chars.get(i + 2) != Some(&'<')
            && (i == 0 || chars[i - 1] != '<');
        if !here {
            i += 1;
            continue;
        }
        let mut j = i + 2;
        let strip_tabs = chars.get(j) == Some(&'-');
        if strip_tabs {
            j += 1;
        }
        while matches!(chars.get(j), Some(' ' | '\t')) {
            j += 1;
        }
        let start = j;
        while let Some(&c) = chars.get(j) {
            if c.is_whitespace() || ";&|<>()".contains(c) {
                break;
            }
            j += 1;
        }
        let word: String = chars[start..j]
            .iter()
            .filter(|c| !matches!(c, '\'' | '"' | '\\'))
            .collect();
        if word.is_empty() {
            return Err(ParseError::EmptyHereDelimiter);
        }
        let rest: String = chars[j..].iter().collect();
        let ended = rest.split('\n').skip(1).any(|line| {
            let line = line.strip_suffix('\r').unwrap_or(line);
            let line = if strip_tabs {
                line.trim_start_matches('\t')
            } else {
                line
            };
            line == word
        });
        if !ended {
            return Err(ParseError::UnterminatedHereDocument(word));
        }
        i = j;
    }
    Ok(())
}

pub(super) fn nesting_depth(s: &str) -> usize {
    let (mut depth, mut max, mut ticks) = (0usize, 0usize, 0usize);
    let mut word = String::new();
    let flush = |word: &mut String, depth: &mut usize, max: &mut usize| {
        match word.as_str() {
            "if" | "while" | "until" | "for" | "case" | "select" | "coproc" | "function" => {
                *depth += 1;
                *max = (*max).max(*depth);
            }
            "fi" | "done" | "esac" => *depth = depth.saturating_sub(1),
            _ => {}
        }
        word.clear();
    };
    for c in s.chars() {
        if c.is_alphanumeric() || c == '_' {
            word.push(c);
            continue;
        }
        flush(&mut word, &mut depth, &mut max);
        match c {
            '(' | '{' | '[' => {
                depth += 1;
                max = max.max(depth);
            }
            ')' | '}' | ']' => depth = depth.saturating_sub(1),
            '`' => ticks += 1,
            _ => {}
        }
    }
    flush(&mut word, &mut depth, &mut max);
    max.max(ticks / 2)
}
