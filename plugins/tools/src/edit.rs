//! `Edit`: replace an exact string in a file, refusing ambiguous or missing matches.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::{Context, Tool, ToolError, text};

/// Lines of the edited file shown around the change.
const SNIPPET_CONTEXT: usize = 3;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditInput {
    /// The file to change: relative to the workspace root, or absolute inside a writable grant.
    pub path: String,
    /// The exact text to replace, including whitespace and indentation. It must occur exactly
    /// once unless `replace_all` is set. Empty to create a file that does not exist yet.
    pub old_string: String,
    /// The text to put in its place.
    pub new_string: String,
    /// Replace every occurrence instead of requiring exactly one.
    #[serde(default)]
    pub replace_all: bool,
}

pub struct Edit;

impl Tool for Edit {
    const NAME: &'static str = "Edit";
    const DESCRIPTION: &'static str = "Replace exact text in a file. `old_string` must match the file \
exactly (whitespace included) and occur exactly once; include surrounding lines to make it unique, \
or set `replace_all` to change every occurrence. Read the file first. With an empty `old_string`, \
creates a file that does not exist yet.";
    type Input = EditInput;

    fn call(input: EditInput, cx: &Context) -> Result<String, ToolError> {
        edit(&input, cx)
    }
}

pub fn edit(input: &EditInput, cx: &Context) -> Result<String, ToolError> {
    let path = cx.writable(&input.path)?;
    let shown = cx.display(&path).into_owned();

    if input.old_string.is_empty() {
        return create(input, cx, &path, &shown);
    }
    if input.old_string == input.new_string {
        return Err(ToolError::InvalidInput(
            "old_string and new_string are the same; there is nothing to change".into(),
        ));
    }

    let bytes = std::fs::read(&path).map_err(|e| ToolError::io(&path, &e))?;
    if text::looks_binary(&bytes) {
        return Err(ToolError::InvalidInput(format!(
            "{shown} looks like a binary file; Edit changes text files only"
        )));
    }
    let content = String::from_utf8(bytes).map_err(|_| {
        ToolError::InvalidInput(format!(
            "{shown} is not valid UTF-8; Edit would corrupt it, so it changes UTF-8 files only"
        ))
    })?;

    let count = content.matches(input.old_string.as_str()).count();
    match count {
        0 => {
            return Err(ToolError::InvalidInput(format!(
                "old_string was not found in {shown}; it must match exactly, including whitespace \
                 and indentation (Read the file to copy it)"
            )));
        }
        1 => {}
        n if !input.replace_all => {
            return Err(ToolError::InvalidInput(format!(
                "old_string occurs {n} times in {shown}; include more surrounding lines to make \
                 it unique, or set replace_all to change all {n}"
            )));
        }
        _ => {}
    }

    let first = content.find(input.old_string.as_str()).unwrap_or(0);
    let updated = if input.replace_all {
        content.replace(input.old_string.as_str(), &input.new_string)
    } else {
        content.replacen(input.old_string.as_str(), &input.new_string, 1)
    };
    std::fs::write(&path, updated.as_bytes()).map_err(|e| ToolError::io(&path, &e))?;

    let mut out = format!(
        "Edited {shown}: replaced {count} occurrence{}.\n",
        if count == 1 { "" } else { "s" }
    );
    out.push_str(&snippet(&updated, first, input.new_string.len()));
    Ok(out)
}

fn create(
    input: &EditInput,
    cx: &Context,
    path: &std::path::Path,
    shown: &str,
) -> Result<String, ToolError> {
    if path.exists() {
        return Err(ToolError::InvalidInput(format!(
            "{shown} already exists; an empty old_string only creates new files. Give the text to \
             replace, or use Write to replace the whole file"
        )));
    }
    crate::write::write(
        &crate::write::WriteInput {
            path: input.path.clone(),
            content: input.new_string.clone(),
        },
        cx,
    )
}

/// The lines around the byte range `[start, start + len)` of `content`, numbered.
fn snippet(content: &str, start: usize, len: usize) -> String {
    let first_line = content[..start].matches('\n').count();
    let last_line = first_line + content[start..start + len].matches('\n').count();
    let from = first_line.saturating_sub(SNIPPET_CONTEXT);
    let to = last_line + SNIPPET_CONTEXT;
    let mut out = String::new();
    for (i, line) in content.lines().enumerate().skip(from).take(to - from + 1) {
        text::push_line_number(&mut out, i + 1);
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::setup;

    fn input(path: &str, old: &str, new: &str, all: bool) -> EditInput {
        EditInput {
            path: path.into(),
            old_string: old.into(),
            new_string: new.into(),
            replace_all: all,
        }
    }

    #[test]
    fn replaces_a_unique_match_and_shows_it() {
        let (d, cx) = setup(&[("f.rs", b"fn a() {}\nfn b() {}\n")]);
        let out = edit(&input("f.rs", "fn b()", "fn c()", false), &cx).unwrap();
        assert!(
            out.starts_with("Edited f.rs: replaced 1 occurrence."),
            "{out}"
        );
        assert!(out.contains("     2\tfn c() {}"), "{out}");
        assert_eq!(
            std::fs::read_to_string(d.path().join("f.rs")).unwrap(),
            "fn a() {}\nfn c() {}\n"
        );
    }

    #[test]
    fn ambiguous_match_is_refused_unless_replace_all() {
        let (d, cx) = setup(&[("f", b"x x x")]);
        let err = edit(&input("f", "x", "y", false), &cx).unwrap_err();
        assert!(
            matches!(err, ToolError::InvalidInput(ref m) if m.contains("occurs 3 times")),
            "{err}"
        );
        assert_eq!(
            std::fs::read_to_string(d.path().join("f")).unwrap(),
            "x x x"
        );
        edit(&input("f", "x", "y", true), &cx).unwrap();
        assert_eq!(
            std::fs::read_to_string(d.path().join("f")).unwrap(),
            "y y y"
        );
    }

    #[test]
    fn missing_match_and_no_op_are_refused() {
        let (_d, cx) = setup(&[("f", b"abc")]);
        assert!(
            matches!(edit(&input("f", "zzz", "y", false), &cx), Err(ToolError::InvalidInput(m)) if m.contains("not found"))
        );
        assert!(matches!(
            edit(&input("f", "abc", "abc", false), &cx),
            Err(ToolError::InvalidInput(_))
        ));
        assert!(matches!(
            edit(&input("nope", "a", "b", false), &cx),
            Err(ToolError::NotFound(_))
        ));
    }

    #[test]
    fn binary_and_non_utf8_files_are_left_alone() {
        let (d, cx) = setup(&[("bin", b"a\0b"), ("latin1", b"caf\xe9")]);
        assert!(matches!(
            edit(&input("bin", "a", "b", false), &cx),
            Err(ToolError::InvalidInput(_))
        ));
        assert!(
            matches!(edit(&input("latin1", "caf", "tea", false), &cx), Err(ToolError::InvalidInput(m)) if m.contains("UTF-8"))
        );
        assert_eq!(std::fs::read(d.path().join("latin1")).unwrap(), b"caf\xe9");
    }

    #[test]
    fn empty_old_string_creates_only_new_files() {
        let (d, cx) = setup(&[("exists", b"keep")]);
        edit(&input("new.txt", "", "hello", false), &cx).unwrap();
        assert_eq!(
            std::fs::read_to_string(d.path().join("new.txt")).unwrap(),
            "hello"
        );
        assert!(matches!(
            edit(&input("exists", "", "x", false), &cx),
            Err(ToolError::InvalidInput(_))
        ));
        assert_eq!(
            std::fs::read_to_string(d.path().join("exists")).unwrap(),
            "keep"
        );
    }
}
