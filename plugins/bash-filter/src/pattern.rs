//! `allowedCommands` patterns, matched word by word.
//!
//! `git status` allows exactly `git status`; `git *` allows git with any arguments; a pattern of
//! one word (`ls`) allows that program with any arguments. Inside a word, `*` matches any
//! characters and `?` one. The first word names the program: a bare name matches the program's
//! policy name (so `cat` never matches `./cat`), a word with a `/` matches the file it resolves
//! to. Leading `NAME=value` words match the command's environment assignments, which must
//! otherwise be absent.

/// One parsed pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    pub raw: String,
    words: Vec<String>,
    /// Any further words are allowed (a trailing `*`, or a one-word pattern).
    open: bool,
}

/// The command as patterns see it.
#[derive(Debug, Clone, Copy)]
pub struct Subject<'a> {
    /// Environment assignments, literal.
    pub assignments: &'a [String],
    /// The program's policy name.
    pub name: &'a str,
    /// The program's file, if resolved.
    pub path: Option<&'a str>,
    /// The arguments known before it runs, up to the first one that is not.
    pub args: &'a [String],
    /// More arguments follow that are only known when it runs.
    pub open_ended: bool,
}

impl Pattern {
    pub fn parse(raw: &str) -> Option<Pattern> {
        let mut words: Vec<String> = raw.split_whitespace().map(str::to_string).collect();
        if words.is_empty() {
            return None;
        }
        let program_words = words.iter().take_while(|w| is_assignment(w)).count();
        let open = if words.len() > program_words + 1 && words.last().is_some_and(|w| w == "*") {
            words.pop();
            true
        } else {
            words.len() == program_words + 1
        };
        Some(Pattern {
            raw: raw.to_string(),
            words,
            open,
        })
    }

    /// Whether `s` matches. `resolve` turns a pattern word with a `/` into the file it names.
    pub fn matches(&self, s: &Subject<'_>, resolve: &dyn Fn(&str) -> String) -> bool {
        let n_assign = self.words.iter().take_while(|w| is_assignment(w)).count();
        if n_assign != s.assignments.len()
            || !self.words[..n_assign]
                .iter()
                .zip(s.assignments)
                .all(|(p, a)| wildcard(p, a))
        {
            return false;
        }
        let Some(program) = self.words.get(n_assign) else {
            return false;
        };
        let program_ok = if program.contains('/') {
            s.path.is_some_and(|p| resolve(program) == p)
        } else {
            wildcard(program, s.name)
        };
        if !program_ok {
            return false;
        }
        let rest = &self.words[n_assign + 1..];
        if s.args.len() < rest.len() {
            return false;
        }
        if !rest.iter().zip(s.args).all(|(p, a)| wildcard(p, a)) {
            return false;
        }
        self.open || (s.args.len() == rest.len() && !s.open_ended)
    }
}

fn is_assignment(w: &str) -> bool {
    match w.split_once('=') {
        Some((name, _)) => {
            !name.is_empty()
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !name.starts_with(|c: char| c.is_ascii_digit())
        }
        None => false,
    }
}

/// `*` and `?` wildcards; linear, backtracking only to the last `*`.
pub fn wildcard(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || (p[pi] != '*' && p[pi] == t[ti])) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi + 1, ti));
            pi += 1;
        } else if let Some((after, from)) = star {
            pi = after;
            ti = from + 1;
            star = Some((after, from + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subject<'a>(name: &'a str, args: &'a [String], open_ended: bool) -> Subject<'a> {
        Subject {
            assignments: &[],
            name,
            path: None,
            args,
            open_ended,
        }
    }

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    fn m(pattern: &str, name: &str, a: &str) -> bool {
        let a = args(a);
        Pattern::parse(pattern)
            .unwrap()
            .matches(&subject(name, &a, false), &|s| s.to_string())
    }

    #[test]
    fn patterns_match_word_by_word() {
        assert!(m("git status", "git", "status"));
        assert!(!m("git status", "git", "status --porcelain"));
        assert!(m("git *", "git", "commit -m x"));
        assert!(m("git *", "git", ""));
        assert!(!m("git *", "gitx", "status"));
        assert!(m("ls", "ls", "-la src"));
        assert!(m("npm test", "npm", "test"));
        assert!(!m("npm test", "npm", "install"));
        assert!(m("cargo t*", "cargo", "test"));
        assert!(!m("cat", "/work/cat", ""));
    }

    #[test]
    fn open_ended_commands_need_an_open_pattern() {
        let a = args("status");
        let s = subject("git", &a, true);
        assert!(
            !Pattern::parse("git status")
                .unwrap()
                .matches(&s, &|x| x.into())
        );
        assert!(Pattern::parse("git *").unwrap().matches(&s, &|x| x.into()));
    }

    #[test]
    fn assignments_must_be_in_the_pattern() {
        let a = args("test");
        let assignments = vec!["RUST_LOG=debug".to_string()];
        let s = Subject {
            assignments: &assignments,
            name: "cargo",
            path: None,
            args: &a,
            open_ended: false,
        };
        assert!(
            !Pattern::parse("cargo *")
                .unwrap()
                .matches(&s, &|x| x.into())
        );
        assert!(
            Pattern::parse("RUST_LOG=* cargo test")
                .unwrap()
                .matches(&s, &|x| x.into())
        );
    }

    #[test]
    fn wildcards_are_linear() {
        assert!(wildcard("a*b?d", "axxbcd"));
        assert!(!wildcard(&"*a".repeat(30), &"a".repeat(29)));
    }
}
