//! Agent definitions: seven file dialects loaded into one model, validated with errors that
//! point at the line, found on a search path, and reloaded while rawko runs.
//!
//! - [`model`]: the [`Agent`] every dialect becomes.
//! - [`load_file`] / [`load_text`]: read one file (size-capped), detect its [`Dialect`], decode
//!   it, and collect every problem as a [`Diagnostic`] (`file:line:column: what (hint)`).
//! - [`registry`]: the search path (workspace `.rawko/agents/`, the user's config directory,
//!   the built-ins), precedence and shadowing, and checks across agents.
//! - [`watch`]: hot reload with an atomic swap of the whole registry.
//! - [`builtin`]: the default agents shipped inside the binary.
//! - [`catalogue`]: the tools rawko itself provides, with their access class and ACP kind.

pub mod builtin;
pub mod catalogue;
mod claude;
mod decode;
pub mod diag;
mod docloom;
mod foreign;
pub mod graph;
mod kodelet;
mod markdown;
pub mod model;
pub mod rawko;
pub mod registry;
pub mod validate;
pub mod watch;
mod yaml;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use diag::{Diagnostic, Severity};
pub use model::{Agent, AgentOrigin, Dialect, Target};
pub use registry::{Registry, SearchPath};

use diag::{Pos, Problems};
use model::{AgentFile, Spans};

use yaml::Node;

/// Largest agent file read. A definition is a page or two; this leaves room for long prompts
/// and keeps a hostile file from costing more than a moment to reject.
pub const MAX_FILE_BYTES: u64 = 256 * 1024;

/// The file extensions agent files have.
pub const EXTENSIONS: &[&str] = &["yaml", "yml", "md"];

/// One agent file, loaded: the agent if it is usable, and every problem found.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub path: PathBuf,
    pub display: String,
    pub origin: AgentOrigin,
    /// The dialect, once detected.
    pub dialect: Option<Dialect>,
    /// The name the file defines, or tries to (its `name` field, else its file name), so a
    /// broken file still shadows a lower definition of the same agent instead of silently
    /// giving way to it.
    pub name: String,
    /// `None` when the file has errors.
    pub agent: Option<Arc<Agent>>,
    pub diagnostics: Vec<Diagnostic>,
    /// For a file with errors: the transitions that could still be read (event, target,
    /// position), so a wrong target is reported with the file's other problems.
    pub(crate) transitions: Vec<(&'static str, String, Pos)>,
}

impl Loaded {
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }
}

/// What a decoder needs to know about the file it reads.
#[derive(Debug, Clone, Copy)]
pub struct FileInfo<'a> {
    pub path: &'a Path,
    pub display: &'a str,
    pub origin: AgentOrigin,
}

impl FileInfo<'_> {
    /// The file name without its extension; for DocLoom's `agent.agent.yaml`, the folder name.
    pub fn stem(&self) -> &str {
        let file_name = self.path.file_name().and_then(|s| s.to_str()).unwrap_or("");
        if file_name == docloom::FILE_NAME {
            return self
                .path
                .parent()
                .and_then(Path::file_name)
                .and_then(|s| s.to_str())
                .unwrap_or("");
        }
        self.path.file_stem().and_then(|s| s.to_str()).unwrap_or("")
    }

    fn source(&self, dialect: Dialect, spans: Spans) -> AgentFile {
        AgentFile {
            path: self.path.to_path_buf(),
            display: self.display.to_string(),
            origin: self.origin,
            dialect,
            spans,
        }
    }
}

/// Read and load the agent file at `path`. Never fails: problems reading it are diagnostics.
pub fn load_file(path: &Path, display: &str, origin: AgentOrigin) -> Loaded {
    let info = FileInfo {
        path,
        display,
        origin,
    };
    match read_file(info, None) {
        Ok(bytes) => load_bytes(&bytes, info),
        Err(loaded) => *loaded,
    }
}

/// Load an agent from text already in memory (built-ins, tests).
pub fn load_text(text: &str, info: FileInfo<'_>) -> Loaded {
    load_bytes(text.as_bytes(), info)
}

/// The file's bytes, or a [`Loaded`] carrying the reason they cannot be read. With `confine`,
/// the file (after following links) must lie inside that directory: a workspace's agents
/// directory comes from whoever wrote the repository, and a link in it must not make rawko
/// read, and quote back, the user's files elsewhere.
pub(crate) fn read_file(
    info: FileInfo<'_>,
    confine: Option<&Path>,
) -> Result<Vec<u8>, Box<Loaded>> {
    let confined = match confine {
        None => Ok(()),
        Some(root) => match info.path.canonicalize() {
            Ok(real) if real.starts_with(root) => Ok(()),
            Ok(_) => Err((
                "the file links outside the workspace; it is not read".to_string(),
                Some("a workspace's agents must live inside the workspace".to_string()),
            )),
            Err(e) => Err((format!("cannot read the file: {e}"), None)),
        },
    };
    confined
        .and_then(|()| read_capped(info.path))
        .map_err(|(message, hint)| {
            let mut p = Problems::new();
            p.error(Pos::START, message, hint);
            Box::new(finish(info, None, info.stem().to_string(), None, p))
        })
}

type ReadError = (String, Option<String>);

fn read_capped(path: &Path) -> Result<Vec<u8>, ReadError> {
    // Follow symlinks, but read only regular files: a FIFO or a device would block or never end.
    let meta = std::fs::metadata(path).map_err(|e| (format!("cannot read the file: {e}"), None))?;
    if !meta.is_file() {
        return Err(("not a regular file".into(), None));
    }
    let too_big = |len: u64| {
        (
            format!("the file is {len} bytes; an agent definition may be at most {MAX_FILE_BYTES}"),
            Some("move long reference material out of the prompt".to_string()),
        )
    };
    if meta.len() > MAX_FILE_BYTES {
        return Err(too_big(meta.len()));
    }
    let file =
        std::fs::File::open(path).map_err(|e| (format!("cannot read the file: {e}"), None))?;
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| (format!("cannot read the file: {e}"), None))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(too_big(bytes.len() as u64));
    }
    Ok(bytes)
}

pub(crate) fn load_bytes(bytes: &[u8], info: FileInfo<'_>) -> Loaded {
    let mut p = Problems::new();
    let stem = info.stem().to_string();
    let text = match text_of(bytes, &mut p) {
        Some(t) => t,
        None => return finish(info, None, stem, None, p),
    };
    let ext = info
        .path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    match ext.as_str() {
        "yaml" | "yml" => load_yaml(text, info, stem, p),
        "md" | "markdown" => load_markdown(text, info, stem, p),
        _ => {
            p.error(
                Pos::START,
                "not an agent file",
                Some("agent files end in .yaml, .yml or .md".into()),
            );
            finish(info, None, stem, None, p)
        }
    }
}

/// The bytes as UTF-8 text without NUL, or the first place they are not.
fn text_of<'b>(bytes: &'b [u8], p: &mut Problems) -> Option<&'b str> {
    let (valid, bad_at) = match std::str::from_utf8(bytes) {
        Ok(t) => (t, t.find('\0')),
        Err(e) => {
            let valid = std::str::from_utf8(&bytes[..e.valid_up_to()]).expect("valid prefix");
            (valid, Some(valid.find('\0').unwrap_or(valid.len())))
        }
    };
    let Some(at) = bad_at else {
        return Some(valid);
    };
    let before = &valid[..at.min(valid.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    p.error(
        Pos::new(line, column),
        "this is not a text file (it has bytes that are not UTF-8 text)",
        Some("agent files are UTF-8 YAML or Markdown".into()),
    );
    None
}

fn load_yaml(text: &str, info: FileInfo<'_>, stem: String, mut p: Problems) -> Loaded {
    if text.trim().is_empty() {
        p.error(
            Pos::START,
            "the file is empty",
            Some("an agent needs at least name, systemPrompt and transitions".into()),
        );
        return finish(info, None, stem, None, p);
    }
    let Some(root) = yaml::parse(text, &mut p) else {
        return finish(info, None, stem, None, p);
    };
    if root.is_null() {
        p.error(
            Pos::START,
            "the file is empty (it has only comments)",
            Some("an agent needs at least name, systemPrompt and transitions".into()),
        );
        return finish(info, None, stem, None, p);
    }
    let is_docloom = root.get("apiVersion").is_some() || root.get("kind").is_some();
    let (dialect, claimed) = if is_docloom {
        let claimed = root
            .get("metadata")
            .and_then(|m| m.get("name"))
            .and_then(Node::as_str);
        (Dialect::Docloom, claimed)
    } else {
        (Dialect::RawkoYaml, root.get("name").and_then(Node::as_str))
    };
    let name = claimed.map(str::to_string).unwrap_or(stem);
    let agent = match dialect {
        Dialect::Docloom => docloom::decode(&root, &info, &mut p),
        _ => rawko::decode_yaml(&root, &info, &mut p),
    };
    let mut loaded = finish(info, Some(dialect), name, agent, p);
    if loaded.agent.is_none() && dialect.is_rawko() {
        loaded.transitions = transitions_in(&root);
    }
    loaded
}

fn load_markdown(text: &str, info: FileInfo<'_>, stem: String, mut p: Problems) -> Loaded {
    let Some(split) = markdown::split(text, &mut p) else {
        return finish(info, None, stem, None, p);
    };
    let mut strict = Problems::new();
    strict.set_line_offset(split.yaml_line_offset);
    let parsed = yaml::parse(split.yaml, &mut strict);
    let root = match parsed {
        Some(root) if !strict.has_errors() => {
            p.absorb(strict);
            root
        }
        _ => match markdown::tolerant(split.yaml).filter(|(root, _)| {
            foreign::dialect_of(info.path).is_none() && detect_markdown(root) == Dialect::ClaudeCode
        }) {
            // Claude Code reads such frontmatter line by line; so does rawko, and says so.
            Some((root, keys)) => {
                p.warn(
                    Pos::new(split.yaml_line_offset + 1, 1),
                    format!(
                        "the frontmatter is not valid YAML ({}); it was read line by line as \
                         Claude Code reads it: {}",
                        strict.first_error().unwrap_or("a syntax error"),
                        keys.join(", ")
                    ),
                    Some("quote values that contain ': ', and indent continued lines".into()),
                );
                root
            }
            None => {
                p.absorb(strict);
                return finish(info, None, stem, None, p);
            }
        },
    };
    if root.is_null() {
        p.error(
            Pos::new(2, 1),
            "the frontmatter is empty",
            Some("it needs at least 'name' and 'description'".into()),
        );
        return finish(info, None, stem, None, p);
    }
    let mut root = root;
    root.shift_lines(split.yaml_line_offset);
    let dialect = foreign::dialect_of(info.path).unwrap_or_else(|| detect_markdown(&root));
    let given = root.get("name").and_then(Node::as_str);
    // The name a broken file still claims, by the same rule its decoder names agents by.
    let name = match dialect {
        Dialect::Copilot | Dialect::Opencode => {
            foreign::by_file(foreign::agent_stem(&info), given, false).0
        }
        Dialect::Kodelet => foreign::by_file(&stem, given, !kodelet::is_recipe(info.path, &root)).0,
        _ => given.map(str::to_string).unwrap_or(stem),
    };
    let (body, body_line) = (split.body, split.body_line);
    let agent = match dialect {
        Dialect::Kodelet => kodelet::decode(&root, body, body_line, &info, &mut p),
        Dialect::ClaudeCode => claude::decode(&root, body, body_line, &info, &mut p),
        Dialect::Copilot => foreign::decode_copilot(&root, body, body_line, &info, &mut p),
        Dialect::Opencode => foreign::decode_opencode(&root, body, body_line, &info, &mut p),
        _ => rawko::decode_markdown(&root, body, body_line, &info, &mut p),
    };
    let mut loaded = finish(info, Some(dialect), name, agent, p);
    if loaded.agent.is_none() && dialect.is_rawko() {
        loaded.transitions = transitions_in(&root);
    }
    loaded
}

/// The transition targets written in a rawko file's tree, whatever else is wrong with it.
fn transitions_in(root: &Node) -> Vec<(&'static str, String, Pos)> {
    let Some(t) = root.get("transitions") else {
        return Vec::new();
    };
    ["onSuccess", "onFailure", "onMaxIterations"]
        .into_iter()
        .filter_map(|event| {
            let node = t.get(event)?;
            let target = node.as_str()?;
            validate::is_valid_name(target).then(|| (event, target.to_string(), node.pos))
        })
        .collect()
}

/// Which Markdown dialect a frontmatter is written in: rawko's own fields win, then kodelet's
/// provider and recipe fields; anything else is read as a Claude Code subagent.
fn detect_markdown(root: &Node) -> Dialect {
    const RAWKO: &[&str] = &[
        "displayName",
        "whenToUse",
        "systemPrompt",
        "transitions",
        "limits",
        "adapter",
        "outputSchema",
    ];
    let has = |k: &str| root.get(k).is_some();
    let tools_is_map = root.get("tools").is_some_and(|t| t.as_map().is_some());
    if RAWKO.iter().any(|k| has(k)) || tools_is_map {
        Dialect::RawkoMarkdown
    } else if kodelet::MARKERS.iter().any(|k| has(k)) {
        Dialect::Kodelet
    } else {
        Dialect::ClaudeCode
    }
}

fn finish(
    info: FileInfo<'_>,
    dialect: Option<Dialect>,
    name: String,
    agent: Option<Agent>,
    p: Problems,
) -> Loaded {
    let has_errors = p.has_errors();
    let diagnostics = p.into_diagnostics(info.display);
    Loaded {
        path: info.path.to_path_buf(),
        display: info.display.to_string(),
        origin: info.origin,
        dialect,
        name: agent.as_ref().map_or(name, |a| a.name.clone()),
        agent: if has_errors {
            None
        } else {
            agent.map(Arc::new)
        },
        diagnostics,
        transitions: Vec::new(),
    }
}

#[cfg(test)]
mod tests;
