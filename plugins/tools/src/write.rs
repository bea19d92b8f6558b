//! `Write`: create or replace a whole file.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::{Context, Tool, ToolError};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteInput {
    /// The file to write: relative to the workspace root, or absolute inside a writable grant.
    /// Missing parent directories are created.
    pub path: String,
    /// The complete new content of the file.
    pub content: String,
}

pub struct Write;

impl Tool for Write {
    const NAME: &'static str = "Write";
    const DESCRIPTION: &'static str = "Write a file, replacing it if it exists and creating missing \
parent directories. Give the complete content. Prefer Edit for changing part of an existing file.";
    type Input = WriteInput;

    fn call(input: WriteInput, cx: &Context) -> Result<String, ToolError> {
        write(&input, cx)
    }
}

pub fn write(input: &WriteInput, cx: &Context) -> Result<String, ToolError> {
    let path = cx.writable(&input.path)?;
    let shown = cx.display(&path).into_owned();
    if path == cx.workspace() || input.path.ends_with('/') {
        return Err(ToolError::InvalidInput(format!(
            "{shown} names a directory; give a file path"
        )));
    }
    let existed = match std::fs::metadata(&path) {
        Ok(m) if m.is_dir() => {
            return Err(ToolError::InvalidInput(format!(
                "{shown} is a directory; give a file path"
            )));
        }
        Ok(_) => true,
        Err(_) => false,
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| ToolError::io(parent, &e))?;
    }
    std::fs::write(&path, input.content.as_bytes()).map_err(|e| ToolError::io(&path, &e))?;
    let lines = input.content.lines().count();
    Ok(format!(
        "{} {shown} ({} bytes, {lines} line{})",
        if existed { "Replaced" } else { "Created" },
        input.content.len(),
        if lines == 1 { "" } else { "s" }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::setup;
    use crate::{Access, Grant};

    fn input(path: &str, content: &str) -> WriteInput {
        WriteInput {
            path: path.into(),
            content: content.into(),
        }
    }

    #[test]
    fn creates_parents_and_replaces() {
        let (d, cx) = setup(&[]);
        let out = write(&input("a/b/c.txt", "hi\n"), &cx).unwrap();
        assert_eq!(out, "Created a/b/c.txt (3 bytes, 1 line)");
        assert_eq!(
            std::fs::read_to_string(d.path().join("a/b/c.txt")).unwrap(),
            "hi\n"
        );
        let out = write(&input("a/b/c.txt", ""), &cx).unwrap();
        assert!(out.starts_with("Replaced"));
        assert_eq!(
            std::fs::read_to_string(d.path().join("a/b/c.txt")).unwrap(),
            ""
        );
    }

    #[test]
    fn refuses_outside_grant_and_read_only() {
        let (d, cx) = setup(&[]);
        let err = write(&input("../escape.txt", "x"), &cx).unwrap_err();
        assert!(
            matches!(err, ToolError::Denied(ref m) if m.contains("outside")),
            "{err}"
        );
        let ro = Context::new(
            cx.workspace(),
            vec![Grant {
                path: cx.workspace().to_path_buf(),
                access: Access::ReadOnly,
            }],
            1024,
        );
        let err = write(&input("x.txt", "x"), &ro).unwrap_err();
        assert!(
            matches!(err, ToolError::Denied(ref m) if m.contains("read-only")),
            "{err}"
        );
        assert!(!d.path().join("x.txt").exists());
    }

    #[test]
    fn refuses_directories() {
        let (_d, cx) = setup(&[("dir/f", b"")]);
        assert!(matches!(
            write(&input("dir", "x"), &cx),
            Err(ToolError::InvalidInput(_))
        ));
        assert!(matches!(
            write(&input("new/", "x"), &cx),
            Err(ToolError::InvalidInput(_))
        ));
    }
}
