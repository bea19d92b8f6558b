//! YAML into a small tree where every node and every key knows its line and column.
//!
//! Agent files are validated after parsing (a transition naming an agent that does not exist, a
//! regex that does not compile), and each of those problems must point at the offending line. A
//! serde deserializer forgets positions once it has produced a value and stops at the first
//! error, so agent files are parsed with `saphyr-parser`, whose events carry spans, into this
//! tree, and the dialect decoders read the tree.
//!
//! The tree is built under limits, because agent files may come from strangers: nesting depth,
//! the total number of nodes (which is what bounds an alias bomb: every alias is expanded by
//! copy and charged to the budget before it is copied), one document per file, and no tags
//! beyond YAML's own.

use std::collections::HashMap;

use saphyr_parser::{Event, Parser, ScalarStyle, Span};

use super::diag::{Pos, Problems};

/// Deepest nesting accepted; agent files need four or five levels.
pub const MAX_DEPTH: usize = 64;
/// Most nodes a file may expand to, aliases included.
pub const MAX_NODES: usize = 100_000;

const NESTED_TOO_DEEPLY: &str = "the YAML is nested too deeply";
const NESTING_HINT: &str = "an agent definition needs only a few levels of nesting";

/// A YAML node and where it starts.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub pos: Pos,
    pub value: Value,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Scalar(Scalar),
    Seq(Vec<Node>),
    Map(Vec<Entry>),
}

/// One `key: value` pair; keys are always text.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub key: String,
    pub key_pos: Pos,
    pub value: Node,
}

/// A scalar as written, resolved on demand with YAML 1.2's core schema.
#[derive(Debug, Clone, PartialEq)]
pub struct Scalar {
    pub text: String,
    /// Unquoted and not a block scalar: the only kind whose type comes from its text.
    pub plain: bool,
    /// `!!str` and the like, written out (`tag:yaml.org,2002:str`).
    pub core_tag: Option<String>,
}

/// What a scalar means.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Resolved<'a> {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(&'a str),
}

impl Scalar {
    pub fn resolve(&self) -> Resolved<'_> {
        let text = self.text.as_str();
        match self.core_tag.as_deref() {
            Some("str") => return Resolved::Str(text),
            Some("null") => return Resolved::Null,
            Some(_) => {}
            None if !self.plain => return Resolved::Str(text),
            None => {}
        }
        match text {
            "" | "~" | "null" | "Null" | "NULL" => return Resolved::Null,
            "true" | "True" | "TRUE" => return Resolved::Bool(true),
            "false" | "False" | "FALSE" => return Resolved::Bool(false),
            ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
                return Resolved::Float(f64::INFINITY);
            }
            "-.inf" | "-.Inf" | "-.INF" => return Resolved::Float(f64::NEG_INFINITY),
            ".nan" | ".NaN" | ".NAN" => return Resolved::Float(f64::NAN),
            _ => {}
        }
        if let Some(i) = parse_int(text) {
            return Resolved::Int(i);
        }
        if looks_like_float(text)
            && let Ok(f) = text.parse::<f64>()
        {
            return Resolved::Float(f);
        }
        Resolved::Str(text)
    }
}

fn parse_int(text: &str) -> Option<i64> {
    if let Some(hex) = text.strip_prefix("0x") {
        return i64::from_str_radix(hex, 16).ok();
    }
    if let Some(oct) = text.strip_prefix("0o") {
        return i64::from_str_radix(oct, 8).ok();
    }
    let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        // Out of range is still an integer, just not one we can hold: saturate so the caller
        // reports "too large" rather than "not a number".
        return Some(text.parse::<i64>().unwrap_or(if text.starts_with('-') {
            i64::MIN
        } else {
            i64::MAX
        }));
    }
    None
}

/// YAML 1.2 core floats: `[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?`.
fn looks_like_float(text: &str) -> bool {
    let t = text.strip_prefix(['-', '+']).unwrap_or(text);
    let (mantissa, exp) = match t.find(['e', 'E']) {
        Some(i) => (&t[..i], Some(&t[i + 1..])),
        None => (t, None),
    };
    let (int, frac) = match mantissa.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (mantissa, None),
    };
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    let mantissa_ok = match frac {
        Some(f) => digits(int) && digits(f) && !(int.is_empty() && f.is_empty()),
        None => !int.is_empty() && digits(int),
    };
    let exp_ok = match exp {
        Some(e) => {
            let e = e.strip_prefix(['-', '+']).unwrap_or(e);
            !e.is_empty() && digits(e)
        }
        None => true,
    };
    mantissa_ok && exp_ok
}

impl Node {
    /// How the node's type reads in a message: "text", "a number", "a list", ...
    pub fn kind(&self) -> &'static str {
        match &self.value {
            Value::Seq(_) => "a list",
            Value::Map(_) => "a mapping",
            Value::Scalar(s) => match s.resolve() {
                Resolved::Null => "nothing",
                Resolved::Bool(_) => "true/false",
                Resolved::Int(_) | Resolved::Float(_) => "a number",
                Resolved::Str(_) => "text",
            },
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(&self.value, Value::Scalar(s) if s.resolve() == Resolved::Null)
    }

    pub fn as_map(&self) -> Option<&[Entry]> {
        match &self.value {
            Value::Map(m) => Some(m),
            _ => None,
        }
    }

    /// The value under `key`, for a mapping.
    pub fn get(&self, key: &str) -> Option<&Node> {
        self.as_map()?
            .iter()
            .find(|e| e.key == key)
            .map(|e| &e.value)
    }

    /// The text of a scalar that resolves to a string.
    pub fn as_str(&self) -> Option<&str> {
        match &self.value {
            Value::Scalar(s) => match s.resolve() {
                Resolved::Str(t) => Some(t),
                _ => None,
            },
            _ => None,
        }
    }

    /// Move the node and everything in it down by `lines` (YAML that starts below the top of
    /// its file, like Markdown frontmatter).
    pub fn shift_lines(&mut self, lines: usize) {
        self.pos.line += lines;
        match &mut self.value {
            Value::Scalar(_) => {}
            Value::Seq(items) => items.iter_mut().for_each(|n| n.shift_lines(lines)),
            Value::Map(entries) => entries.iter_mut().for_each(|e| {
                e.key_pos.line += lines;
                e.value.shift_lines(lines);
            }),
        }
    }

    /// The node as JSON (for embedded JSON Schemas). Non-finite floats become null.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value as J;
        match &self.value {
            Value::Seq(items) => J::Array(items.iter().map(Node::to_json).collect()),
            Value::Map(entries) => J::Object(
                entries
                    .iter()
                    .map(|e| (e.key.clone(), e.value.to_json()))
                    .collect(),
            ),
            Value::Scalar(s) => match s.resolve() {
                Resolved::Null => J::Null,
                Resolved::Bool(b) => J::Bool(b),
                Resolved::Int(i) => J::from(i),
                Resolved::Float(f) => serde_json::Number::from_f64(f).map_or(J::Null, J::Number),
                Resolved::Str(t) => J::String(t.to_string()),
            },
        }
    }
}

/// Parse one YAML document. `None` when the text is not usable YAML; the reasons are in
/// `problems`. An empty document (nothing but comments) is a null scalar.
pub fn parse(text: &str, problems: &mut Problems) -> Option<Node> {
    let mut b = Builder::default();
    let mut parser = Parser::new_from_str(text);
    let mut documents = 0;
    while let Some(next) = parser.next_event() {
        let (event, span) = match next {
            Ok(e) => e,
            Err(e) => {
                let m = e.marker();
                let info = e.info();
                let pos = Pos::new(m.line(), m.col() + 1);
                if info.contains("recursion limit") {
                    problems.error(pos, NESTED_TOO_DEEPLY, Some(NESTING_HINT.into()));
                    return None;
                }
                let hint = if info.contains("tab") {
                    Some("indent with spaces: YAML does not allow tabs for indentation".into())
                } else {
                    None
                };
                problems.error(pos, format!("invalid YAML: {info}"), hint);
                return None;
            }
        };
        let pos = pos_of(&span);
        let step = match event {
            Event::StreamStart | Event::StreamEnd | Event::DocumentEnd | Event::Nothing => Ok(()),
            Event::DocumentStart(_) => {
                documents += 1;
                if documents > 1 {
                    Err((
                        pos,
                        "more than one YAML document in the file".to_string(),
                        Some("an agent file holds one definition; remove the second '---'".into()),
                    ))
                } else {
                    Ok(())
                }
            }
            Event::Scalar(text, style, anchor, tag) => {
                let core_tag = match tag {
                    None => Ok(None),
                    Some(t) if t.is_yaml_core_schema() => Ok(Some(t.suffix.clone())),
                    Some(t) => Err((
                        pos,
                        format!("unsupported YAML tag '{t}'"),
                        Some("agent files use plain YAML values".into()),
                    )),
                };
                core_tag.and_then(|core_tag| {
                    let node = Node {
                        pos,
                        value: Value::Scalar(Scalar {
                            text: text.into_owned(),
                            plain: style == ScalarStyle::Plain,
                            core_tag,
                        }),
                    };
                    b.finish_node(node, anchor, 1)
                })
            }
            Event::SequenceStart(anchor, tag) | Event::MappingStart(anchor, tag)
                if tag.as_ref().is_some_and(|t| !t.is_yaml_core_schema()) =>
            {
                let _ = anchor;
                Err((
                    pos,
                    format!("unsupported YAML tag '{}'", tag.expect("checked above")),
                    Some("agent files use plain YAML values".into()),
                ))
            }
            Event::SequenceStart(anchor, _) => b.open(Frame::Seq(pos, anchor, Vec::new())),
            Event::MappingStart(anchor, _) => b.open(Frame::Map {
                pos,
                anchor,
                entries: Vec::new(),
                key: None,
                seen: HashMap::new(),
                duplicates: Vec::new(),
            }),
            Event::SequenceEnd | Event::MappingEnd => b.close(problems),
            Event::Alias(id) => b.alias(id, pos),
        };
        if let Err((pos, message, hint)) = step {
            problems.error(pos, message, hint);
            return None;
        }
    }
    Some(b.root.unwrap_or(Node {
        pos: Pos::START,
        value: Value::Scalar(Scalar {
            text: String::new(),
            plain: true,
            core_tag: None,
        }),
    }))
}

fn pos_of(span: &Span) -> Pos {
    Pos::new(span.start.line(), span.start.col() + 1)
}

type Fatal = (Pos, String, Option<String>);

enum Frame {
    Seq(Pos, usize, Vec<Node>),
    Map {
        pos: Pos,
        anchor: usize,
        entries: Vec<Entry>,
        key: Option<(String, Pos)>,
        seen: HashMap<String, Pos>,
        duplicates: Vec<(String, Pos, Pos)>,
    },
}

#[derive(Default)]
struct Builder {
    stack: Vec<(Frame, usize)>,
    root: Option<Node>,
    /// Anchored nodes with the number of nodes each one holds.
    anchors: HashMap<usize, (Node, usize)>,
    nodes: usize,
}

impl Builder {
    fn charge(&mut self, nodes: usize, pos: Pos) -> Result<(), Fatal> {
        self.nodes = self.nodes.saturating_add(nodes);
        if self.nodes > MAX_NODES {
            return Err((
                pos,
                format!("the document expands to more than {MAX_NODES} values"),
                Some("YAML aliases (*name) that repeat large anchors multiply; an agent file needs only a few".into()),
            ));
        }
        Ok(())
    }

    fn open(&mut self, frame: Frame) -> Result<(), Fatal> {
        let pos = match &frame {
            Frame::Seq(pos, ..) | Frame::Map { pos, .. } => *pos,
        };
        if self.stack.len() >= MAX_DEPTH {
            return Err((pos, NESTED_TOO_DEEPLY.into(), Some(NESTING_HINT.into())));
        }
        self.charge(1, pos)?;
        let start = self.nodes;
        self.stack.push((frame, start));
        Ok(())
    }

    fn close(&mut self, problems: &mut Problems) -> Result<(), Fatal> {
        let (frame, start) = self
            .stack
            .pop()
            .expect("the parser balances start and end events");
        let size = self.nodes - start + 1;
        let (node, anchor) = match frame {
            Frame::Seq(pos, anchor, items) => (
                Node {
                    pos,
                    value: Value::Seq(items),
                },
                anchor,
            ),
            Frame::Map {
                pos,
                anchor,
                entries,
                duplicates,
                ..
            } => {
                for (key, first, again) in duplicates {
                    problems.error(
                        again,
                        format!("duplicate key '{key}'"),
                        Some(format!(
                            "it is already set on line {}; keep one",
                            first.line
                        )),
                    );
                }
                (
                    Node {
                        pos,
                        value: Value::Map(entries),
                    },
                    anchor,
                )
            }
        };
        self.place(node, anchor, size)
    }

    /// A finished scalar: charge it and place it.
    fn finish_node(&mut self, node: Node, anchor: usize, size: usize) -> Result<(), Fatal> {
        self.charge(size, node.pos)?;
        self.place(node, anchor, size)
    }

    fn alias(&mut self, id: usize, pos: Pos) -> Result<(), Fatal> {
        let Some((_, size)) = self.anchors.get(&id) else {
            return Err((
                pos,
                "alias to an anchor that is not finished yet".into(),
                Some("an alias may not refer to the mapping or list it is inside".into()),
            ));
        };
        let size = *size;
        // Charge before copying, so an alias bomb stops before it allocates.
        self.charge(size, pos)?;
        let mut copy = self.anchors[&id].0.clone();
        copy.pos = pos;
        self.place(copy, 0, size)
    }

    fn place(&mut self, node: Node, anchor: usize, size: usize) -> Result<(), Fatal> {
        if anchor != 0 {
            self.anchors.insert(anchor, (node.clone(), size));
        }
        match self.stack.last_mut() {
            None => {
                self.root = Some(node);
                Ok(())
            }
            Some((Frame::Seq(_, _, items), _)) => {
                items.push(node);
                Ok(())
            }
            Some((
                Frame::Map {
                    entries,
                    key,
                    seen,
                    duplicates,
                    ..
                },
                _,
            )) => match key.take() {
                None => match &node.value {
                    Value::Scalar(s) => {
                        *key = Some((s.text.clone(), node.pos));
                        Ok(())
                    }
                    _ => Err((
                        node.pos,
                        "a mapping key must be plain text, not a list or mapping".into(),
                        None,
                    )),
                },
                Some((k, key_pos)) => {
                    if let Some(first) = seen.get(&k) {
                        duplicates.push((k, *first, key_pos));
                    } else {
                        seen.insert(k.clone(), key_pos);
                        entries.push(Entry {
                            key: k,
                            key_pos,
                            value: node,
                        });
                    }
                    Ok(())
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_ok(text: &str) -> Node {
        let mut p = Problems::new();
        let node = parse(text, &mut p);
        assert!(!p.has_errors(), "{:?}", p.into_diagnostics("t"));
        node.unwrap()
    }

    fn parse_err(text: &str) -> String {
        let mut p = Problems::new();
        let _ = parse(text, &mut p);
        assert!(p.has_errors(), "expected an error for {text:?}");
        p.into_diagnostics("t")
            .iter()
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn keys_and_values_know_their_positions() {
        let n = parse_ok("name: planner\ntools:\n  allowed: [Read, Grep]\n");
        let m = n.as_map().unwrap();
        assert_eq!(m[1].key, "tools");
        assert_eq!(m[1].key_pos, Pos::new(2, 1));
        let allowed = n.get("tools").unwrap().as_map().unwrap();
        assert_eq!(allowed[0].key_pos, Pos::new(3, 3));
        let Value::Seq(items) = &allowed[0].value.value else {
            panic!()
        };
        assert_eq!(items[1].pos, Pos::new(3, 19));
        assert_eq!(items[1].as_str(), Some("Grep"));
    }

    #[test]
    fn scalars_resolve_with_the_core_schema() {
        let n = parse_ok("a: 12\nb: '12'\nc: yes\nd: true\ne: ~\nf: 1.5e3\ng: !!str 7\nh: 0x1f\n");
        let r = |k: &str| match &n.get(k).unwrap().value {
            Value::Scalar(s) => format!("{:?}", s.resolve()),
            _ => unreachable!(),
        };
        assert_eq!(r("a"), "Int(12)");
        assert_eq!(r("b"), "Str(\"12\")");
        assert_eq!(r("c"), "Str(\"yes\")");
        assert_eq!(r("d"), "Bool(true)");
        assert_eq!(r("e"), "Null");
        assert_eq!(r("f"), "Float(1500.0)");
        assert_eq!(r("g"), "Str(\"7\")");
        assert_eq!(r("h"), "Int(31)");
    }

    #[test]
    fn duplicate_keys_name_both_lines() {
        let e = parse_err("name: a\ntools: {}\nname: b\n");
        assert!(
            e.contains("t:3:1: duplicate key 'name' (it is already set on line 1"),
            "{e}"
        );
    }

    #[test]
    fn tabs_get_a_hint() {
        let e = parse_err("name: a\ntools:\n\tallowed: [Read]\n");
        assert!(e.contains("indent with spaces"), "{e}");
        assert!(e.starts_with("t:3:"), "{e}");
    }

    #[test]
    fn an_alias_bomb_stops_at_the_budget() {
        let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..12 {
            let prev = i - 1;
            text.push_str(&format!(
                "a{i}: &a{i} [*a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}]\n"
            ));
        }
        let e = parse_err(&text);
        assert!(e.contains("expands to more than"), "{e}");
    }

    #[test]
    fn deep_nesting_is_refused_without_recursion() {
        let text = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        let e = parse_err(&text);
        assert!(e.contains("nested too deeply"), "{e}");
        let mut block = String::new();
        for i in 0..80 {
            block.push_str(&" ".repeat(i * 2));
            block.push_str("k:\n");
        }
        let e = parse_err(&block);
        assert!(e.contains("nested too deeply"), "{e}");
    }

    #[test]
    fn second_documents_and_foreign_tags_are_refused() {
        assert!(parse_err("a: 1\n---\nb: 2\n").contains("more than one YAML document"));
        assert!(parse_err("a: !python/object x\n").contains("unsupported YAML tag"));
    }

    #[test]
    fn aliases_are_copied_with_their_use_position() {
        let n = parse_ok("base: &b [Read, Grep]\nother: *b\n");
        let other = n.get("other").unwrap();
        assert_eq!(other.pos, Pos::new(2, 8));
        assert_eq!(other.to_json(), serde_json::json!(["Read", "Grep"]));
    }

    #[test]
    fn empty_text_is_null() {
        assert!(parse_ok("# only a comment\n").is_null());
        assert!(parse_ok("").is_null());
    }
}
