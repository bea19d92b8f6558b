//! `Glob`: find files by name pattern, honouring `.gitignore`.

use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::Deserialize;

use crate::text::Budget;
use crate::walk::Kind;
use crate::{Context, Tool, ToolError};

/// Most paths returned by one call.
pub const MAX_RESULTS: usize = 1000;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GlobInput {
    /// A glob such as `src/**/*.rs` or `*.md`, relative to `path`. `*` stays within one
    /// directory, `**` crosses directories, `{a,b}` gives alternatives.
    pub pattern: String,
    /// The directory to search (default: the workspace root).
    pub path: Option<String>,
}

pub struct Glob;

impl Tool for Glob {
    const NAME: &'static str = "Glob";
    const DESCRIPTION: &'static str = "Find files whose path matches a glob pattern such as \
`src/**/*.rs`, searched from `path` (default: the workspace root). Files ignored by .gitignore and \
the .git directory are skipped. Returns matching file paths, sorted, at most 1000.";
    type Input = GlobInput;

    fn call(input: GlobInput, cx: &Context) -> Result<String, ToolError> {
        glob(&input, cx)
    }
}

pub fn glob(input: &GlobInput, cx: &Context) -> Result<String, ToolError> {
    let root = cx.readable(input.path.as_deref().unwrap_or("."))?;
    let pattern = relative_pattern(&input.pattern, &root)?;
    let glob = globset::GlobBuilder::new(&pattern)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map_err(|e| {
            ToolError::InvalidInput(format!("bad glob pattern {:?}: {e}", input.pattern))
        })?;
    let endings = Endings::of(glob.regex());
    let matcher = glob.compile_matcher();

    let meta = std::fs::metadata(&root).map_err(|e| ToolError::io(&root, &e))?;
    if !meta.is_dir() {
        return Err(ToolError::InvalidInput(format!(
            "{} is not a directory",
            cx.display(&root)
        )));
    }

    let mut found: Vec<PathBuf> = Vec::new();
    let mut truncated = false;
    let root_len = root.as_os_str().len();
    crate::walk::walk(&crate::walk::Fs::new(), &root, |path, kind| {
        if kind == Kind::Dir {
            return true;
        }
        let rel = crate::walk::below(path, root_len);
        if endings.allow(rel) && matcher.is_match(rel) {
            if found.len() == MAX_RESULTS * 10 {
                // Keep memory bounded on enormous trees; sorting a sample this large still
                // gives the first MAX_RESULTS in order often enough, and we say it was cut.
                truncated = true;
                return false;
            }
            found.push(path.to_path_buf());
        }
        true
    });
    found.sort();
    if found.is_empty() {
        return Ok(format!(
            "No files match {:?} under {}",
            input.pattern,
            cx.display(&root)
        ));
    }
    let total = found.len();
    let mut out = Budget::new(cx.max_output_bytes());
    let mut shown = 0;
    for p in found.iter().take(MAX_RESULTS) {
        if !out.line(&cx.display(p)) {
            break;
        }
        shown += 1;
    }
    let mut result = out.finish();
    if shown < total || truncated {
        let more = if truncated { "more than " } else { "" };
        result.push_str(&format!(
            "[showing {shown} of {more}{total} matches; narrow the pattern or the path]\n"
        ));
    }
    Ok(result)
}

/// What every path a glob matches ends with, when that is a short list of literals (`.rs` for
/// `**/*.rs`, `build.rs` for `**/build.rs`): a path that ends with none of them is passed over
/// without building the matcher's candidate, which on WASI converts and splits every path a walk
/// meets. A necessary condition only: what passes still goes to the matcher.
struct Endings(Option<Vec<Vec<u8>>>);

impl Endings {
    /// The endings of globset's regular expression for a glob, if it has a finite set of them.
    fn of(regex: &str) -> Endings {
        use regex_syntax::hir::literal::{ExtractKind, Extractor};

        let Ok(hir) = regex_syntax::ParserBuilder::new()
            .utf8(false)
            .dot_matches_new_line(true)
            .build()
            .parse(regex)
        else {
            return Endings(None);
        };
        let seq = Extractor::new().kind(ExtractKind::Suffix).extract(&hir);
        let Some(literals) = seq.literals() else {
            return Endings(None);
        };
        let mut endings: Vec<Vec<u8>> = literals.iter().map(|l| l.as_bytes().to_vec()).collect();
        // A path ending with `/build.rs` ends with `build.rs`: only the shortest are needed.
        endings.sort_by_key(Vec::len);
        let mut kept: Vec<Vec<u8>> = Vec::new();
        for e in endings {
            if !kept.iter().any(|k| e.ends_with(k)) {
                kept.push(e);
            }
        }
        // An empty ending allows every path; a separator in one could differ from what the
        // matcher sees where it reads `\` as `/` (outside Unix).
        let useful = kept.len() <= 8
            && kept
                .iter()
                .all(|e| !e.is_empty() && !e.contains(&b'/') && !e.contains(&b'\\'));
        Endings(useful.then_some(kept))
    }

    /// Whether `path` may match.
    fn allow(&self, path: &Path) -> bool {
        let Some(endings) = &self.0 else {
            return true;
        };
        let bytes = path.as_os_str().as_encoded_bytes();
        endings.iter().any(|e| bytes.ends_with(e))
    }
}

/// A pattern relative to `root`: absolute patterns under `root` are made relative.
fn relative_pattern(pattern: &str, root: &Path) -> Result<String, ToolError> {
    if pattern.is_empty() {
        return Err(ToolError::InvalidInput("pattern is empty".into()));
    }
    if !pattern.starts_with('/') {
        return Ok(pattern.strip_prefix("./").unwrap_or(pattern).to_string());
    }
    let root = root.to_string_lossy();
    match pattern.strip_prefix(root.as_ref()) {
        Some(rest) if rest.starts_with('/') => Ok(rest[1..].to_string()),
        _ => Err(ToolError::InvalidInput(format!(
            "absolute pattern {pattern:?} is not inside the search directory {root}; give a \
             relative pattern and set `path`"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::setup;

    fn endings(pattern: &str) -> (Endings, globset::GlobMatcher) {
        let glob = globset::GlobBuilder::new(pattern)
            .literal_separator(true)
            .backslash_escape(true)
            .build()
            .unwrap();
        (Endings::of(glob.regex()), glob.compile_matcher())
    }

    #[test]
    fn endings_are_what_every_match_ends_with() {
        let shown = |p: &str| {
            endings(p).0.0.map(|e| {
                e.iter()
                    .map(|e| String::from_utf8(e.clone()).unwrap())
                    .collect::<Vec<_>>()
            })
        };
        assert_eq!(shown("**/build.rs"), Some(vec!["build.rs".to_string()]));
        assert_eq!(shown("*.rs"), Some(vec![".rs".to_string()]));
        assert_eq!(
            shown("src/**/*.{rs,toml}"),
            Some(vec![".rs".to_string(), ".toml".to_string()])
        );
        assert_eq!(shown("Cargo.*"), None);
        assert_eq!(shown("src/**"), None);
        // No path the matcher takes is passed over.
        let paths = [
            "build.rs",
            "a/build.rs",
            "a/b/build.rs",
            "xbuild.rs",
            "main.rs",
            "src/a/b.toml",
            "src/x.rs",
            "Cargo.toml",
            "a.txt",
            "b.txt",
            "d/a.txt",
            ".gitignore",
            "d/.gitignore",
            "abc",
            "x/y/z",
            "été/ü.rs",
            "a\\build.rs",
        ];
        for pattern in [
            "**/build.rs",
            "*.rs",
            "**/*.rs",
            "src/**/*.{rs,toml}",
            "Cargo.*",
            "**/[ab].txt",
            "a?c",
            "**/.gitignore",
            "x/**",
            "**/*",
            "**/ü.rs",
            "*build.rs",
            "**/\\*.rs",
        ] {
            let (endings, matcher) = endings(pattern);
            for path in paths {
                let path = Path::new(path);
                assert!(
                    !matcher.is_match(path) || endings.allow(path),
                    "{pattern:?} matches {path:?}, which its endings pass over"
                );
            }
        }
    }

    fn input(pattern: &str, path: Option<&str>) -> GlobInput {
        GlobInput {
            pattern: pattern.into(),
            path: path.map(Into::into),
        }
    }

    #[test]
    fn matches_sorted_and_respects_gitignore() {
        let (_d, cx) = setup(&[
            ("src/b.rs", b""),
            ("src/a.rs", b""),
            ("src/nested/c.rs", b""),
            ("src/notes.md", b""),
            ("target/gen.rs", b""),
            (".gitignore", b"target/\n"),
            (".git/config", b""),
        ]);
        let out = glob(&input("src/**/*.rs", None), &cx).unwrap();
        assert_eq!(out, "src/a.rs\nsrc/b.rs\nsrc/nested/c.rs\n");
        let out = glob(&input("src/*.rs", None), &cx).unwrap();
        assert_eq!(
            out, "src/a.rs\nsrc/b.rs\n",
            "`*` must not cross directories"
        );
        let out = glob(&input("**/*.rs", None), &cx).unwrap();
        assert!(!out.contains("target"), "{out}");
        let out = glob(&input("**/config", None), &cx).unwrap();
        assert!(out.starts_with("No files match"), ".git is skipped: {out}");
    }

    #[test]
    fn searches_from_path_and_accepts_absolute_patterns() {
        let (_d, cx) = setup(&[("src/a.rs", b""), ("b.rs", b"")]);
        let out = glob(&input("*.rs", Some("src")), &cx).unwrap();
        assert_eq!(out, "src/a.rs\n");
        let abs = format!("{}/src/*.rs", cx.workspace().display());
        assert_eq!(glob(&input(&abs, None), &cx).unwrap(), "src/a.rs\n");
        assert!(matches!(
            glob(&input("/elsewhere/*.rs", None), &cx),
            Err(ToolError::InvalidInput(_))
        ));
    }

    #[test]
    fn bad_patterns_and_paths() {
        let (_d, cx) = setup(&[("a", b"")]);
        assert!(
            matches!(glob(&input("[", None), &cx), Err(ToolError::InvalidInput(m)) if m.contains("bad glob"))
        );
        assert!(matches!(
            glob(&input("", None), &cx),
            Err(ToolError::InvalidInput(_))
        ));
        assert!(matches!(
            glob(&input("*", Some("a")), &cx),
            Err(ToolError::InvalidInput(_))
        ));
        assert!(matches!(
            glob(&input("*", Some("../..")), &cx),
            Err(ToolError::Denied(_))
        ));
    }
}
