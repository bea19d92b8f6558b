//! `LS`: the entries of one directory.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::text::Budget;
use crate::{Context, Tool, ToolError};

/// Most entries listed by one call.
pub const MAX_ENTRIES: usize = 1000;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LsInput {
    /// The directory to list (default: the workspace root).
    pub path: Option<String>,
}

pub struct Ls;

impl Tool for Ls {
    const NAME: &'static str = "LS";
    const DESCRIPTION: &'static str = "List the entries of a directory (default: the workspace root), \
sorted by name. Directories end in `/`, symbolic links show their target, files show their size in \
bytes. At most 1000 entries.";
    type Input = LsInput;

    fn call(input: LsInput, cx: &Context) -> Result<String, ToolError> {
        ls(&input, cx)
    }
}

pub fn ls(input: &LsInput, cx: &Context) -> Result<String, ToolError> {
    let dir = cx.readable(input.path.as_deref().unwrap_or("."))?;
    let shown = cx.display(&dir).into_owned();
    let meta = std::fs::metadata(&dir).map_err(|e| ToolError::io(&dir, &e))?;
    if !meta.is_dir() {
        return Err(ToolError::InvalidInput(format!(
            "{shown} is a file, not a directory; use Read to see it"
        )));
    }
    let mut entries: Vec<(String, String)> = Vec::new();
    for entry in std::fs::read_dir(&dir).map_err(|e| ToolError::io(&dir, &e))? {
        let entry = entry.map_err(|e| ToolError::io(&dir, &e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let line = match entry.file_type() {
            Ok(t) if t.is_dir() => format!("{name}/"),
            Ok(t) if t.is_symlink() => match std::fs::read_link(entry.path()) {
                Ok(target) => format!("{name} -> {}", target.display()),
                Err(_) => format!("{name} -> ?"),
            },
            Ok(_) => match entry.metadata() {
                Ok(m) => format!("{name}  ({} bytes)", m.len()),
                Err(_) => name.clone(),
            },
            Err(_) => name.clone(),
        };
        entries.push((name, line));
    }
    if entries.is_empty() {
        return Ok(format!("({shown} is empty)\n"));
    }
    entries.sort();
    let total = entries.len();
    let mut out = Budget::new(cx.max_output_bytes());
    let mut listed = 0;
    for (_, line) in entries.iter().take(MAX_ENTRIES) {
        if !out.line(line) {
            break;
        }
        listed += 1;
    }
    let mut result = out.finish();
    if listed < total {
        result.push_str(&format!(
            "[showing {listed} of {total} entries; use Glob to find specific files]\n"
        ));
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::setup;

    #[test]
    fn lists_sorted_with_kinds() {
        let (d, cx) = setup(&[("b.txt", b"hello"), ("a/inner", b""), (".hidden", b"")]);
        #[cfg(unix)]
        std::os::unix::fs::symlink("b.txt", d.path().join("link")).unwrap();
        let out = ls(&LsInput { path: None }, &cx).unwrap();
        let mut want = ".hidden  (0 bytes)\na/\nb.txt  (5 bytes)\n".to_string();
        if cfg!(unix) {
            want.push_str("link -> b.txt\n");
        }
        assert_eq!(out, want);
    }

    #[test]
    fn files_missing_and_empty() {
        let (d, cx) = setup(&[("f", b"")]);
        std::fs::create_dir(d.path().join("empty")).unwrap();
        let p = |s: &str| LsInput {
            path: Some(s.into()),
        };
        assert!(matches!(ls(&p("f"), &cx), Err(ToolError::InvalidInput(_))));
        assert!(matches!(
            ls(&p("missing"), &cx),
            Err(ToolError::NotFound(_))
        ));
        assert_eq!(ls(&p("empty"), &cx).unwrap(), "(empty is empty)\n");
        assert!(matches!(ls(&p("/"), &cx), Err(ToolError::Denied(_))));
    }

    #[test]
    fn many_entries_are_capped() {
        let names: Vec<String> = (0..MAX_ENTRIES + 5).map(|i| format!("f{i:05}")).collect();
        let files: Vec<(&str, &[u8])> = names.iter().map(|n| (n.as_str(), &b""[..])).collect();
        let (_d, cx) = setup(&files);
        let out = ls(&LsInput { path: None }, &cx).unwrap();
        assert!(out.contains(&format!(
            "[showing {MAX_ENTRIES} of {} entries",
            MAX_ENTRIES + 5
        )));
    }
}
