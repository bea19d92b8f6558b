//! `knowledge.yaml`: which files of a repository are indexed, how they are cut into chunks, and
//! which adapter embeds them.
//!
//! ```yaml
//! include: ["docs/**", "src/**/*.rs", "*.md"]   # without: the repository's docs and source
//! exclude: ["docs/archive/**"]
//! max_file_bytes: 1048576
//! chunking:
//!   markdown: { max_lines: 80 }       # split at headings, long sections cut at this size
//!   code: { max_lines: 60 }           # blank-line blocks, joined up to this size
//!   text: { lines: 40, overlap: 10 }  # line windows
//! embeddings: { adapter: embed }      # an adapter instance from the user's config
//! ```
//!
//! A glob without `/` matches a file name in any directory (as in `.gitignore`); one with `/`
//! matches the path from the repository root. `.gitignore` is always respected, and `.git/` and
//! `.rawko/` are never indexed.

use std::path::{Path, PathBuf};

use globset::{Glob, GlobBuilder, GlobSet, GlobSetBuilder};
use serde::Deserialize;

use crate::KnowledgeError;

/// The file, at the repository root.
pub const FILE_NAME: &str = "knowledge.yaml";

/// Largest `knowledge.yaml` read.
const MAX_CONFIG_BYTES: u64 = 256 << 10;

/// Deepest nesting it may have; it needs three levels.
const MAX_DEPTH: usize = 8;

/// Files larger than this are skipped unless the config says otherwise.
pub const DEFAULT_MAX_FILE_BYTES: u64 = 1 << 20;

/// What is indexed when there is no `knowledge.yaml`: documentation and source, by extension or
/// name.
const DEFAULT_INCLUDE: &[&str] = &[
    // docs
    "*.md",
    "*.markdown",
    "*.mdx",
    "*.rst",
    "*.txt",
    "*.adoc",
    "*.org",
    // source
    "*.rs",
    "*.py",
    "*.pyi",
    "*.js",
    "*.mjs",
    "*.cjs",
    "*.jsx",
    "*.ts",
    "*.tsx",
    "*.go",
    "*.c",
    "*.h",
    "*.cc",
    "*.cpp",
    "*.cxx",
    "*.hpp",
    "*.hh",
    "*.java",
    "*.kt",
    "*.kts",
    "*.scala",
    "*.rb",
    "*.php",
    "*.cs",
    "*.fs",
    "*.swift",
    "*.m",
    "*.mm",
    "*.sh",
    "*.bash",
    "*.zsh",
    "*.fish",
    "*.ps1",
    "*.lua",
    "*.pl",
    "*.pm",
    "*.r",
    "*.jl",
    "*.ex",
    "*.exs",
    "*.erl",
    "*.hrl",
    "*.hs",
    "*.ml",
    "*.mli",
    "*.clj",
    "*.cljs",
    "*.dart",
    "*.zig",
    "*.nim",
    "*.v",
    "*.sv",
    "*.vhd",
    "*.sql",
    "*.proto",
    "*.graphql",
    "*.wit",
    "*.nix",
    "*.tf",
    "*.html",
    "*.css",
    "*.scss",
    "*.vue",
    "*.svelte",
    "*.toml",
    "*.yaml",
    "*.yml",
    "*.ini",
    "*.cfg",
    "*.cmake",
    "*.gradle",
    "Makefile",
    "makefile",
    "*.mk",
    "Dockerfile",
    "Containerfile",
    "CMakeLists.txt",
    "Justfile",
    "justfile",
];

/// Never indexed by default, though they match the above: generated, and large.
const DEFAULT_EXCLUDE: &[&str] = &[
    "Cargo.lock",
    "package-lock.json",
    "yarn.lock",
    "pnpm-lock.yaml",
    "poetry.lock",
    "uv.lock",
    "Gemfile.lock",
    "composer.lock",
    "go.sum",
    "*.min.js",
    "*.min.css",
];

/// How one kind of file is cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sections {
    /// A chunk's most lines.
    pub max_lines: usize,
}

/// Line windows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Windows {
    pub lines: usize,
    pub overlap: usize,
}

/// `chunking:`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Chunking {
    pub markdown: Sections,
    pub code: Sections,
    pub text: Windows,
}

impl Default for Chunking {
    fn default() -> Self {
        Chunking {
            markdown: Sections { max_lines: 80 },
            code: Sections { max_lines: 60 },
            text: Windows {
                lines: 40,
                overlap: 10,
            },
        }
    }
}

/// `embeddings:`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Embeddings {
    /// An adapter instance's name.
    pub adapter: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    include: Option<Vec<String>>,
    #[serde(default)]
    exclude: Vec<String>,
    max_file_bytes: Option<u64>,
    #[serde(default)]
    chunking: Chunking,
    embeddings: Option<Embeddings>,
}

/// A repository's knowledge settings.
#[derive(Debug, Clone)]
pub struct KnowledgeConfig {
    /// Where they came from; `None` for the defaults.
    pub source: Option<PathBuf>,
    pub include: Vec<String>,
    pub exclude: Vec<String>,
    pub max_file_bytes: u64,
    pub chunking: Chunking,
    pub embeddings: Option<Embeddings>,
    selector: Selector,
}

impl KnowledgeConfig {
    /// The settings with no file.
    pub fn defaults() -> KnowledgeConfig {
        KnowledgeConfig::build(None, File::default()).expect("the default globs are valid")
    }

    /// `knowledge.yaml` at `root`, else `.rawko/knowledge.yaml`, else the defaults.
    pub fn load(root: &Path) -> Result<KnowledgeConfig, KnowledgeError> {
        for candidate in [root.join(FILE_NAME), root.join(".rawko").join(FILE_NAME)] {
            // A symlink could point anywhere; the file must be the repository's own.
            match std::fs::symlink_metadata(&candidate) {
                Ok(m) if m.file_type().is_file() => {
                    if m.len() > MAX_CONFIG_BYTES {
                        return Err(KnowledgeError::Config {
                            path: candidate,
                            line: 1,
                            column: 1,
                            message: format!("larger than {MAX_CONFIG_BYTES} bytes"),
                        });
                    }
                    let text = std::fs::read_to_string(&candidate).map_err(|e| {
                        KnowledgeError::Config {
                            path: candidate.clone(),
                            line: 1,
                            column: 1,
                            message: e.to_string(),
                        }
                    })?;
                    return KnowledgeConfig::parse(&candidate, &text);
                }
                Ok(_) => {
                    return Err(KnowledgeError::Config {
                        path: candidate,
                        line: 1,
                        column: 1,
                        message: "is not a regular file".into(),
                    });
                }
                Err(_) => continue,
            }
        }
        Ok(KnowledgeConfig::defaults())
    }

    /// Parse `text`, naming `path` in errors.
    pub fn parse(path: &Path, text: &str) -> Result<KnowledgeConfig, KnowledgeError> {
        let error = |line, column, message: String| KnowledgeError::Config {
            path: path.to_path_buf(),
            line,
            column,
            message,
        };
        if let Some((line, column)) = rawko_config::yaml_too_deep(text, MAX_DEPTH) {
            return Err(error(
                line,
                column,
                format!("nested more than {MAX_DEPTH} levels deep"),
            ));
        }
        let file: File = if text.trim().is_empty() {
            File::default()
        } else {
            yaml_serde::from_str(text).map_err(|e| {
                let (line, column) = e
                    .location()
                    .map(|l| (l.line(), l.column()))
                    .unwrap_or((1, 1));
                error(line, column, e.to_string())
            })?
        };
        KnowledgeConfig::build(Some(path.to_path_buf()), file)
            .map_err(|message| error(1, 1, message))
    }

    fn build(source: Option<PathBuf>, file: File) -> Result<KnowledgeConfig, String> {
        let c = &file.chunking;
        if c.markdown.max_lines == 0 || c.code.max_lines == 0 || c.text.lines == 0 {
            return Err("chunking: a chunk needs at least one line".into());
        }
        if c.text.overlap >= c.text.lines {
            return Err(format!(
                "chunking.text: overlap ({}) must be less than lines ({})",
                c.text.overlap, c.text.lines
            ));
        }
        if let Some(e) = &file.embeddings
            && e.adapter.trim().is_empty()
        {
            return Err("embeddings.adapter is empty".into());
        }
        let include: Vec<String> = match file.include {
            Some(list) => list,
            None => DEFAULT_INCLUDE.iter().map(|s| s.to_string()).collect(),
        };
        let mut exclude = file.exclude;
        exclude.extend(DEFAULT_EXCLUDE.iter().map(|s| s.to_string()));
        let selector = Selector {
            include: glob_set(&include, "include")?,
            exclude: glob_set(&exclude, "exclude")?,
        };
        Ok(KnowledgeConfig {
            source,
            include,
            exclude,
            max_file_bytes: file.max_file_bytes.unwrap_or(DEFAULT_MAX_FILE_BYTES),
            chunking: file.chunking,
            embeddings: file.embeddings,
            selector,
        })
    }

    /// Whether the file at `rel` (relative to the root, `/`-separated) is indexed.
    pub fn selects(&self, rel: &str) -> bool {
        self.selector.include.is_match(rel) && !self.selector.exclude.is_match(rel)
    }

    /// Whether nothing below the directory `rel` can be selected because it is excluded whole.
    pub fn excludes_dir(&self, rel: &str) -> bool {
        self.selector.exclude.is_match(rel)
    }

    /// A digest of everything that changes what the index holds, so a changed config re-chunks.
    pub fn fingerprint(&self) -> String {
        format!(
            "{:?}|{:?}|{}|{:?}",
            self.include, self.exclude, self.max_file_bytes, self.chunking
        )
    }
}

#[derive(Debug, Clone)]
struct Selector {
    include: GlobSet,
    exclude: GlobSet,
}

fn glob_set(globs: &[String], field: &str) -> Result<GlobSet, String> {
    let mut set = GlobSetBuilder::new();
    for g in globs {
        let pattern = g.trim_start_matches("./");
        if pattern.is_empty() {
            return Err(format!("{field}: an empty glob"));
        }
        // As in .gitignore: a glob with no `/` names files in any directory, one ending in `/`
        // a directory and everything below it.
        let anchored = pattern.trim_start_matches('/');
        let pattern = if !pattern.contains('/') {
            format!("**/{pattern}")
        } else if let Some(dir) = anchored.strip_suffix('/') {
            format!("{dir}/**")
        } else {
            anchored.to_string()
        };
        let glob: Glob = GlobBuilder::new(&pattern)
            .literal_separator(true)
            .build()
            .map_err(|e| format!("{field}: {g:?} is not a glob: {}", e.kind()))?;
        set.add(glob);
    }
    set.build().map_err(|e| format!("{field}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<KnowledgeConfig, KnowledgeError> {
        KnowledgeConfig::parse(Path::new("knowledge.yaml"), text)
    }

    #[test]
    fn defaults_select_docs_and_source_but_not_lockfiles() {
        let c = KnowledgeConfig::defaults();
        for yes in [
            "README.md",
            "src/main.rs",
            "a/b/c.py",
            "docs/x.rst",
            "Makefile",
        ] {
            assert!(c.selects(yes), "{yes}");
        }
        for no in [
            "Cargo.lock",
            "web/package-lock.json",
            "logo.png",
            "a.min.js",
            "data.bin",
        ] {
            assert!(!c.selects(no), "{no}");
        }
    }

    #[test]
    fn globs_follow_gitignore_rules() {
        let c = parse("include: ['docs/**', '*.rs', 'notes/']\nexclude: ['docs/old/**']").unwrap();
        assert!(c.selects("docs/a.md"));
        assert!(c.selects("docs/deep/er/a.txt"));
        assert!(!c.selects("docs/old/a.md"));
        assert!(c.selects("x/y/z.rs"));
        assert!(c.selects("notes/today.txt"));
        assert!(!c.selects("src/a.py"));
        // `*` does not cross directories.
        let c = parse("include: ['src/*.rs']").unwrap();
        assert!(c.selects("src/a.rs"));
        assert!(!c.selects("src/x/a.rs"));
    }

    #[test]
    fn bad_files_are_refused_with_a_position() {
        for (text, needle) in [
            ("include: 3", "include"),
            ("includes: []", "unknown field"),
            ("include: ['a[']", "is not a glob"),
            ("include: ['']", "empty glob"),
            ("chunking: {text: {lines: 10, overlap: 10}}", "overlap"),
            ("chunking: {code: {max_lines: 0}}", "at least one line"),
            ("embeddings: {adapter: ''}", "empty"),
            ("embeddings: {adapter: x, model: y}", "unknown field"),
        ] {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.contains(needle), "{text}: {e}");
            assert!(e.starts_with("knowledge.yaml:"), "{e}");
        }
        let deep = format!("include: {}", "[".repeat(10_000));
        let e = parse(&deep).unwrap_err().to_string();
        assert!(e.contains("nested more than"), "{e}");
        let e = parse("chunking:\n  code:\n    max_lines: many\n").unwrap_err();
        let KnowledgeError::Config { line, .. } = e else {
            panic!()
        };
        assert_eq!(line, 3);
    }

    #[test]
    fn an_empty_file_is_the_defaults_and_excludes_add_to_none() {
        let c = parse("").unwrap();
        assert!(c.selects("src/lib.rs"));
        let c = parse("exclude: ['gen/**']").unwrap();
        assert!(!c.selects("gen/a.rs"));
        assert!(c.selects("src/a.rs"));
    }
}
