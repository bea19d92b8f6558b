//! Reading typed fields out of a positioned YAML mapping, recording every problem.
//!
//! Each dialect decoder walks its mapping with a [`Fields`] reader: it asks for the keys it
//! knows, gets typed values with their positions, and at the end [`Fields::finish`] reports
//! every key nobody asked for, with a "did you mean" hint drawn from the keys that were asked
//! for. Wrong types are recorded and read as absent, so one pass finds every problem.

use super::diag::{Pos, Problems, Severity, did_you_mean};
use super::yaml::{Entry, Node, Resolved, Value};

/// A value and where it was written.
#[derive(Debug, Clone, PartialEq)]
pub struct Spanned<T> {
    pub value: T,
    pub pos: Pos,
}

impl<T> Spanned<T> {
    pub fn new(value: T, pos: Pos) -> Self {
        Spanned { value, pos }
    }
}

/// Whether unknown keys are errors (rawko's own dialects) or warnings (foreign dialects, whose
/// files should load unchanged even when they carry fields rawko does not use).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strictness {
    Strict,
    Lenient,
}

/// The keys of one mapping, read one by one.
pub struct Fields<'n> {
    /// What the mapping is, for messages: "the agent", "'tools'".
    what: String,
    pos: Pos,
    entries: &'n [Entry],
    used: Vec<bool>,
    known: Vec<&'static str>,
}

impl<'n> Fields<'n> {
    /// Start reading `node`, which must be a mapping; otherwise the problem is recorded.
    pub fn of(node: &'n Node, what: impl Into<String>, p: &mut Problems) -> Option<Fields<'n>> {
        let what = what.into();
        match &node.value {
            Value::Map(entries) => Some(Fields {
                what,
                pos: node.pos,
                entries,
                used: vec![false; entries.len()],
                known: Vec::new(),
            }),
            _ => {
                p.error(
                    node.pos,
                    format!(
                        "{what} must be a mapping of 'key: value' lines, found {}",
                        node.kind()
                    ),
                    None,
                );
                None
            }
        }
    }

    pub fn pos(&self) -> Pos {
        self.pos
    }

    /// The entry for `key`, if present; marks it known and used. A null value counts as
    /// absent, as it does in serde.
    pub fn entry(&mut self, key: &'static str) -> Option<&'n Entry> {
        self.known.push(key);
        let i = self.entries.iter().position(|e| e.key == key)?;
        self.used[i] = true;
        let e = &self.entries[i];
        if e.value.is_null() { None } else { Some(e) }
    }

    /// Whether `key` is written at all (even as null), without marking it used.
    pub fn has(&self, key: &str) -> bool {
        self.entries.iter().any(|e| e.key == key)
    }

    pub fn node(&mut self, key: &'static str) -> Option<&'n Node> {
        self.entry(key).map(|e| &e.value)
    }

    /// Report a missing required key at the mapping.
    pub fn missing(&self, key: &str, p: &mut Problems, hint: Option<String>) {
        let written_null = self.has(key);
        let message = if written_null {
            format!("'{key}' has no value")
        } else {
            format!("missing required field '{key}' in {}", self.what)
        };
        let pos = self
            .entries
            .iter()
            .find(|e| e.key == key)
            .map_or(self.pos, |e| e.key_pos);
        p.error(pos, message, hint);
    }

    pub fn string(&mut self, key: &'static str, p: &mut Problems) -> Option<Spanned<String>> {
        let e = self.entry(key)?;
        string_of(&e.value, key, p)
    }

    pub fn required_string(
        &mut self,
        key: &'static str,
        p: &mut Problems,
    ) -> Option<Spanned<String>> {
        let v = self.string(key, p);
        if v.is_none() && !self.is_set(key) {
            self.missing(key, p, None);
        }
        v
    }

    /// A whole number in `min..=max`.
    pub fn uint(
        &mut self,
        key: &'static str,
        min: u64,
        max: u64,
        p: &mut Problems,
    ) -> Option<Spanned<u64>> {
        let e = self.entry(key)?;
        uint_of(&e.value, key, min, max, p)
    }

    pub fn bool(&mut self, key: &'static str, p: &mut Problems) -> Option<Spanned<bool>> {
        let e = self.entry(key)?;
        if let Value::Scalar(s) = &e.value.value
            && let Resolved::Bool(b) = s.resolve()
        {
            return Some(Spanned::new(b, e.value.pos));
        }
        p.error(
            e.value.pos,
            format!("'{key}' must be true or false, found {}", e.value.kind()),
            None,
        );
        None
    }

    /// A switch: `on` or `off`, or true or false.
    pub fn on_off(&mut self, key: &'static str, p: &mut Problems) -> Option<Spanned<bool>> {
        let e = self.entry(key)?;
        let node = &e.value;
        if let Value::Scalar(s) = &node.value {
            match s.resolve() {
                Resolved::Bool(b) => return Some(Spanned::new(b, node.pos)),
                Resolved::Str("on") => return Some(Spanned::new(true, node.pos)),
                Resolved::Str("off") => return Some(Spanned::new(false, node.pos)),
                _ => {}
            }
        }
        let found = match node.as_str() {
            Some(t) => format!("'{}'", t.escape_debug()),
            None => node.kind().to_string(),
        };
        p.error(
            node.pos,
            format!("'{key}' must be on or off, found {found}"),
            Some(format!("write '{key}: on' or '{key}: off'")),
        );
        None
    }

    /// A list of text items; with `comma_string`, a single `a, b, c` string is accepted too.
    pub fn string_list(
        &mut self,
        key: &'static str,
        comma_string: bool,
        p: &mut Problems,
    ) -> Option<Spanned<Vec<Spanned<String>>>> {
        let e = self.entry(key)?;
        string_list_of(&e.value, key, comma_string, p)
    }

    /// Whether the entry for `key` exists with a non-null value (used after a typed read came
    /// back empty, to tell "missing" from "wrong type").
    pub fn is_set(&self, key: &str) -> bool {
        self.entries
            .iter()
            .any(|e| e.key == key && !e.value.is_null())
    }

    /// Report every key nobody asked for.
    pub fn finish(self, strictness: Strictness, p: &mut Problems) {
        for (e, used) in self.entries.iter().zip(&self.used) {
            if *used {
                continue;
            }
            let suggestion = did_you_mean(&e.key, &self.known);
            let (severity, hint) = match (strictness, suggestion) {
                (Strictness::Strict, Some(s)) => (Severity::Error, format!("did you mean '{s}'?")),
                (Strictness::Strict, None) => (
                    Severity::Error,
                    format!("{} takes: {}", self.what, self.known.join(", ")),
                ),
                (Strictness::Lenient, Some(s)) => {
                    (Severity::Warning, format!("ignored; did you mean '{s}'?"))
                }
                (Strictness::Lenient, None) => (
                    Severity::Warning,
                    "rawko does not use it; ignored".to_string(),
                ),
            };
            let hint = if e.key == "<<" {
                "YAML merge keys are not supported; write the fields out".to_string()
            } else {
                hint
            };
            p.push(
                severity,
                e.key_pos,
                format!("unknown field '{}'", e.key),
                Some(hint),
            );
        }
    }
}

/// `node` as text; numbers and booleans are not silently turned into text.
pub fn string_of(node: &Node, key: &str, p: &mut Problems) -> Option<Spanned<String>> {
    match &node.value {
        Value::Scalar(s) => match s.resolve() {
            Resolved::Str(t) => Some(Spanned::new(t.to_string(), node.pos)),
            Resolved::Null => None,
            _ => {
                p.error(
                    node.pos,
                    format!("'{key}' must be text, found {}", node.kind()),
                    Some(format!("quote it: \"{}\"", s.text)),
                );
                None
            }
        },
        _ => {
            p.error(
                node.pos,
                format!("'{key}' must be text, found {}", node.kind()),
                None,
            );
            None
        }
    }
}

pub fn uint_of(
    node: &Node,
    key: &str,
    min: u64,
    max: u64,
    p: &mut Problems,
) -> Option<Spanned<u64>> {
    let bad = |p: &mut Problems, found: String| {
        p.error(
            node.pos,
            format!("'{key}' must be a whole number from {min} to {max}, found {found}"),
            None,
        );
    };
    match &node.value {
        Value::Scalar(s) => match s.resolve() {
            Resolved::Int(i) if i >= 0 && (i as u64) >= min && (i as u64) <= max => {
                Some(Spanned::new(i as u64, node.pos))
            }
            Resolved::Int(i) => {
                bad(p, i.to_string());
                None
            }
            Resolved::Float(f) => {
                bad(p, f.to_string());
                None
            }
            Resolved::Null => None,
            _ => {
                bad(p, node.kind().to_string());
                None
            }
        },
        _ => {
            bad(p, node.kind().to_string());
            None
        }
    }
}

pub fn string_list_of(
    node: &Node,
    key: &str,
    comma_string: bool,
    p: &mut Problems,
) -> Option<Spanned<Vec<Spanned<String>>>> {
    match &node.value {
        Value::Seq(items) => {
            let mut out = Vec::with_capacity(items.len());
            for item in items {
                match item.as_str() {
                    Some(t) => out.push(Spanned::new(t.to_string(), item.pos)),
                    None => p.error(
                        item.pos,
                        format!("every item of '{key}' must be text, found {}", item.kind()),
                        None,
                    ),
                }
            }
            Some(Spanned::new(out, node.pos))
        }
        Value::Scalar(_) if comma_string => {
            let Some(text) = node.as_str() else {
                p.error(
                    node.pos,
                    format!(
                        "'{key}' must be a list or a comma-separated string, found {}",
                        node.kind()
                    ),
                    None,
                );
                return None;
            };
            let items = text
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|s| Spanned::new(s.to_string(), node.pos))
                .collect();
            Some(Spanned::new(items, node.pos))
        }
        _ => {
            let hint = node.as_str().map(|t| format!("write it as a list: [{t}]"));
            p.error(
                node.pos,
                format!("'{key}' must be a list, found {}", node.kind()),
                hint,
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml;

    fn tree(text: &str) -> Node {
        let mut p = Problems::new();
        yaml::parse(text, &mut p).unwrap()
    }

    fn messages(p: Problems) -> Vec<String> {
        p.into_diagnostics("f")
            .iter()
            .map(|d| d.to_string())
            .collect()
    }

    #[test]
    fn every_problem_is_reported_in_one_pass() {
        let n = tree("name: 12\ntool: [Read]\nlimit: 3\ncount: -1\n");
        let mut p = Problems::new();
        let mut f = Fields::of(&n, "the agent", &mut p).unwrap();
        assert!(f.string("name", &mut p).is_none());
        assert!(f.required_string("systemPrompt", &mut p).is_none());
        let _ = f.string_list("tools", false, &mut p);
        let _ = f.uint("limits", 1, 10, &mut p);
        let _ = f.uint("count", 1, 10, &mut p);
        f.finish(Strictness::Strict, &mut p);
        let m = messages(p);
        assert_eq!(m.len(), 5, "{m:#?}");
        assert_eq!(
            m[0],
            "f:1:7: 'name' must be text, found a number (quote it: \"12\")"
        );
        assert_eq!(
            m[1],
            "f:1:1: missing required field 'systemPrompt' in the agent"
        );
        assert!(m[2].starts_with("f:4:8: 'count' must be a whole number from 1 to 10, found -1"));
        assert_eq!(m[3], "f:2:1: unknown field 'tool' (did you mean 'tools'?)");
        assert_eq!(
            m[4],
            "f:3:1: unknown field 'limit' (did you mean 'limits'?)"
        );
    }

    #[test]
    fn lenient_unknown_fields_are_warnings() {
        let n = tree("name: a\ncolor: blue\n");
        let mut p = Problems::new();
        let mut f = Fields::of(&n, "the agent", &mut p).unwrap();
        let _ = f.string("name", &mut p);
        f.finish(Strictness::Lenient, &mut p);
        assert!(!p.has_errors());
        assert_eq!(
            messages(p),
            ["f:2:1: warning: unknown field 'color' (rawko does not use it; ignored)"]
        );
    }

    #[test]
    fn comma_strings_split_into_lists() {
        let n = tree("tools: Read, Grep ,Glob\n");
        let mut p = Problems::new();
        let mut f = Fields::of(&n, "x", &mut p).unwrap();
        let l = f.string_list("tools", true, &mut p).unwrap();
        let names: Vec<_> = l.value.iter().map(|s| s.value.as_str()).collect();
        assert_eq!(names, ["Read", "Grep", "Glob"]);
    }
}
