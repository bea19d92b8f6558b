//! The agents in effect: every definition on the search path, the winner for each name, and
//! what each winner shadows.
//!
//! Highest precedence first: the workspace's `.rawko/agents/`, the user's
//! `$XDG_CONFIG_HOME/rawko/agents`, then the built-ins. Within a directory, agent files are
//! `*.yaml`, `*.yml` and `*.md` directly inside it, plus DocLoom's `<folder>/agent.agent.yaml`
//! one level down. A file with errors still claims its name, so a broken workspace `planner`
//! is reported as broken rather than silently replaced by the built-in one.
//!
//! A [`Registry`] is immutable once built; the watcher builds a new one and swaps it in whole.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;
use sha2::{Digest, Sha256};

use super::diag::{Diagnostic, Severity};
use super::model::{Agent, AgentOrigin, Dialect};
use super::validate::Reference;
use super::{EXTENSIONS, FileInfo, Loaded, builtin, docloom, load_bytes, read_file, validate};

/// Most files read from one directory; a bound on what a hostile workspace can make rawko do.
pub const MAX_FILES_PER_DIR: usize = 10_000;

/// Where agent definitions are looked for, highest precedence first.
#[derive(Debug, Clone)]
pub struct SearchPath {
    /// Directories with the origin each stands for.
    pub dirs: Vec<(AgentOrigin, PathBuf)>,
    /// Whether the built-in agents come last.
    pub builtins: bool,
    /// The workspace root, so its files are shown relative to it.
    pub workspace: Option<PathBuf>,
}

impl SearchPath {
    /// The standard path: `<workspace>/.rawko/agents`, then the other tools' directories in the
    /// workspace (Claude Code's `.claude/agents`, Copilot's `.github/agents`, opencode's
    /// `.opencode/agent(s)`), `<config_dir>/agents`, `~/.claude/agents`, the built-ins.
    pub fn standard(workspace: &Path, config_dir: &Path) -> SearchPath {
        let mut dirs = vec![
            (AgentOrigin::Workspace, workspace_dir(workspace)),
            (AgentOrigin::Workspace, claude_dir(workspace)),
            (
                AgentOrigin::Workspace,
                workspace.join(".github").join("agents"),
            ),
            (
                AgentOrigin::Workspace,
                workspace.join(".opencode").join("agent"),
            ),
            (
                AgentOrigin::Workspace,
                workspace.join(".opencode").join("agents"),
            ),
            (AgentOrigin::User, config_dir.join("agents")),
        ];
        if let Some(home) = std::env::var_os("HOME").map(PathBuf::from)
            && !home.as_os_str().is_empty()
            && claude_dir(&home) != claude_dir(workspace)
        {
            dirs.push((AgentOrigin::User, claude_dir(&home)));
        }
        SearchPath {
            dirs,
            builtins: true,
            workspace: Some(workspace.to_path_buf()),
        }
    }

    /// How `path` is shown in messages: relative to the workspace when inside it, and
    /// printable whatever the file is called.
    pub fn display(&self, path: &Path) -> String {
        let shown = match &self.workspace {
            Some(ws) => path.strip_prefix(ws).unwrap_or(path),
            None => path,
        };
        super::diag::printable(&shown.display().to_string(), false).into_owned()
    }

    /// Every agent file on the path, in precedence order.
    pub fn files(&self) -> Vec<(AgentOrigin, PathBuf)> {
        let mut out = Vec::new();
        for (origin, dir) in &self.dirs {
            let found = if is_claude_dir(dir) {
                discover_claude(dir)
            } else if dir.ends_with(".github/agents") {
                // Copilot's directory holds other files too; its agents are `*.agent.md`.
                discover(dir)
                    .into_iter()
                    .filter(|p| {
                        p.file_name()
                            .and_then(|n| n.to_str())
                            .is_some_and(|n| n.to_ascii_lowercase().ends_with(".agent.md"))
                    })
                    .collect()
            } else {
                discover(dir)
            };
            out.extend(found.into_iter().map(|p| (*origin, p)));
        }
        out
    }
}

/// Claude Code's agents directory under `root` (a workspace or the home directory).
pub fn claude_dir(root: &Path) -> PathBuf {
    root.join(".claude").join("agents")
}

fn is_claude_dir(dir: &Path) -> bool {
    dir.ends_with(".claude/agents")
}

/// Subfolders of a Claude Code agents directory searched, at most.
const CLAUDE_DEPTH: usize = 4;

/// Claude Code's agent files: `*.md` in `dir` and its subfolders, sorted.
pub fn discover_claude(dir: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
        let Ok(read) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in read.flatten().take(MAX_FILES_PER_DIR) {
            if out.len() >= MAX_FILES_PER_DIR {
                return;
            }
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if name.starts_with('.') || name.ends_with('~') {
                continue;
            }
            let path = entry.path();
            let Ok(meta) = std::fs::metadata(&path) else {
                continue;
            };
            if meta.is_dir() {
                if depth < CLAUDE_DEPTH {
                    walk(&path, depth + 1, out);
                }
            } else if name.to_ascii_lowercase().ends_with(".md")
                && !name.eq_ignore_ascii_case("readme.md")
            {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, 0, &mut out);
    out.sort();
    out
}

/// A workspace's own agents directory.
pub fn workspace_dir(workspace: &Path) -> PathBuf {
    workspace.join(".rawko").join("agents")
}

/// The agent files in `dir`, sorted: agent files directly inside, and `agent.agent.yaml` in
/// each subfolder. Hidden files, editor backups and `README.md` are not agents.
pub fn discover(dir: &Path) -> Vec<PathBuf> {
    let Ok(read) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in read.flatten().take(MAX_FILES_PER_DIR) {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.starts_with('.') || name.starts_with('#') || name.ends_with('~') {
            continue;
        }
        let path = entry.path();
        // Follow symlinks for the type, as the reader will.
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        if meta.is_dir() {
            let inner = path.join(docloom::FILE_NAME);
            if inner.is_file() {
                out.push(inner);
            }
        } else if is_agent_file_name(name) {
            out.push(path);
        }
    }
    out.sort();
    out
}

/// Whether a file name looks like an agent file.
pub fn is_agent_file_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower != "readme.md"
        && Path::new(&lower)
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| EXTENSIONS.contains(&e))
}

/// How a name's winning definition stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Loaded and valid.
    Ok,
    /// The file has errors now; the last good version (from before an edit) stays in use.
    Stale,
    /// Unusable: the file has errors and there is no earlier good version, or the agent
    /// refers to agents that do not exist.
    Invalid,
}

/// A definition file, as listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileRef {
    pub path: PathBuf,
    /// The path as shown in messages.
    #[serde(rename = "file")]
    pub display: String,
    pub origin: AgentOrigin,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dialect: Option<Dialect>,
}

impl FileRef {
    fn of(l: &Loaded) -> FileRef {
        FileRef {
            path: l.path.clone(),
            display: l.display.clone(),
            origin: l.origin,
            dialect: l.dialect,
        }
    }
}

/// One agent name: the definition in effect and the ones it hides.
#[derive(Debug, Clone)]
pub struct Entry {
    pub name: String,
    pub file: FileRef,
    pub status: Status,
    /// The agent in use (`Ok`, `Stale`), or the parsed agent whose references are broken
    /// (`Invalid` after cross-checks); `None` when the file does not load.
    pub agent: Option<Arc<Agent>>,
    /// Lower-precedence definitions of the same name.
    pub shadows: Vec<FileRef>,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Stale => "stale",
            Status::Invalid => "invalid",
        }
    }
}

impl Entry {
    pub fn is_usable(&self) -> bool {
        matches!(self.status, Status::Ok | Status::Stale)
    }
}

/// The agents in effect, with every problem found on the way.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    entries: BTreeMap<String, Entry>,
    files: Vec<Loaded>,
    diagnostics: Vec<Diagnostic>,
    generation: u64,
}

impl Registry {
    /// Load everything on `search`.
    pub fn load(search: &SearchPath) -> Registry {
        Loader::new(search.clone()).load(None)
    }

    /// A usable agent by name: a snapshot that stays valid however the files change later.
    pub fn get(&self, name: &str) -> Option<Arc<Agent>> {
        self.entries
            .get(name)
            .filter(|e| e.is_usable())
            .and_then(|e| e.agent.clone())
    }

    pub fn entry(&self, name: &str) -> Option<&Entry> {
        self.entries.get(name)
    }

    /// What to tell someone who asked for `name`, which no file defines: the nearest name, or
    /// the names there are. Printable on a terminal whatever `name` holds.
    pub fn unknown(&self, name: &str) -> String {
        let names: Vec<&str> = self.entries().map(|e| e.name.as_str()).collect();
        let hint = match super::diag::did_you_mean(name, &names) {
            Some(s) => format!("did you mean '{s}'?"),
            None => format!("known agents: {}", names.join(", ")),
        };
        super::diag::printable(&format!("no agent named '{name}' ({hint})"), false).into_owned()
    }

    /// Every name, sorted.
    pub fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.entries.values()
    }

    /// The usable agents, sorted by name.
    pub fn agents(&self) -> impl Iterator<Item = &Arc<Agent>> {
        self.entries
            .values()
            .filter(|e| e.is_usable())
            .filter_map(|e| e.agent.as_ref())
    }

    /// Every file read, in precedence order.
    pub fn files(&self) -> &[Loaded] {
        &self.files
    }

    /// Every problem in every file, then the ones across files.
    pub fn diagnostics(&self) -> &[Diagnostic] {
        &self.diagnostics
    }

    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }

    /// Counts up by one with every reload.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Build from loaded files in precedence order. For a file that now has errors, the agent
    /// `previous` had from the same file stays in use (marked stale).
    pub fn build(files: Vec<Loaded>, previous: Option<&Registry>) -> Registry {
        let mut entries: BTreeMap<String, Entry> = BTreeMap::new();
        let mut diagnostics: Vec<Diagnostic> = Vec::new();
        for l in &files {
            diagnostics.extend(l.diagnostics.iter().cloned());
            match entries.get_mut(&l.name) {
                Some(e) if e.file.origin == l.origin => {
                    // Two files of one origin claim a name (in one directory, or in
                    // `.rawko/agents` and `.claude/agents`): the first on the search path wins,
                    // and the user should know which.
                    diagnostics.push(Diagnostic {
                        file: l.display.clone(),
                        line: l
                            .agent
                            .as_ref()
                            .map_or(1, |a| a.source.spans.name.line.max(1)),
                        column: l
                            .agent
                            .as_ref()
                            .map_or(1, |a| a.source.spans.name.column.max(1)),
                        severity: Severity::Warning,
                        message: format!(
                            "agent '{}' is also defined in {}, which is used",
                            l.name, e.file.display
                        ),
                        hint: Some(
                            "rename one of them; the first on the search path wins \
                             (.rawko/agents before .claude/agents)"
                                .into(),
                        ),
                    });
                    e.shadows.push(FileRef::of(l));
                }
                Some(e) => e.shadows.push(FileRef::of(l)),
                None => {
                    let (status, agent) = match &l.agent {
                        Some(a) => (Status::Ok, Some(a.clone())),
                        None => match previous.and_then(|p| p.last_good(&l.name, &l.path)) {
                            Some(a) => (Status::Stale, Some(a)),
                            None => (Status::Invalid, None),
                        },
                    };
                    entries.insert(
                        l.name.clone(),
                        Entry {
                            name: l.name.clone(),
                            file: FileRef::of(l),
                            status,
                            agent,
                            shadows: Vec::new(),
                        },
                    );
                }
            }
        }
        let usable: BTreeMap<String, Arc<Agent>> = entries
            .values()
            .filter(|e| e.is_usable())
            .filter_map(|e| e.agent.clone().map(|a| (e.name.clone(), a)))
            .collect();
        let known: BTreeSet<String> = entries.keys().cloned().collect();
        // Transitions of usable agents, and of winners that failed to load, so a wrong target
        // is reported together with the file's other problems.
        let mut refs: Vec<Reference> = usable.values().flat_map(|a| Reference::of(a)).collect();
        let by_path: HashMap<(&Path, AgentOrigin), &Loaded> = files
            .iter()
            .map(|l| ((l.path.as_path(), l.origin), l))
            .collect();
        for e in entries.values().filter(|e| e.agent.is_none()) {
            if let Some(l) = by_path.get(&(e.file.path.as_path(), e.file.origin)) {
                refs.extend(l.transitions.iter().map(|(event, target, pos)| Reference {
                    file: l.display.clone(),
                    event,
                    target: target.clone(),
                    pos: *pos,
                }));
            }
        }
        let cross = validate::cross_check(&usable, &refs, &known);
        let broken: HashSet<&str> = cross
            .iter()
            .filter(|d| d.is_error())
            .map(|d| d.file.as_str())
            .collect();
        for e in entries.values_mut() {
            if e.is_usable() && broken.contains(e.file.display.as_str()) {
                e.status = Status::Invalid;
            }
        }
        diagnostics.extend(cross);
        Registry {
            entries,
            files,
            diagnostics,
            generation: previous.map_or(0, |p| p.generation + 1),
        }
    }

    /// The agent in use for `name` if it came from `path`.
    fn last_good(&self, name: &str, path: &Path) -> Option<Arc<Agent>> {
        let e = self.entries.get(name)?;
        (e.file.path == path && e.is_usable())
            .then(|| e.agent.clone())
            .flatten()
    }
}

/// Loads the search path, re-parsing only what changed since the last load (the watcher calls
/// it on every change).
#[derive(Debug)]
pub struct Loader {
    search: SearchPath,
    /// What each file loaded to last time, and how to tell whether it changed since.
    cache: HashMap<PathBuf, Cached>,
    builtins: Vec<Loaded>,
}

#[derive(Debug, Clone)]
struct Cached {
    stamp: Option<Stamp>,
    digest: [u8; 32],
    loaded: Loaded,
}

/// Cheap evidence that a file is unchanged: length, modification time and file identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    len: u64,
    modified: std::time::SystemTime,
    id: u64,
}

impl Stamp {
    fn of(path: &Path) -> Option<Stamp> {
        let m = std::fs::metadata(path).ok()?;
        #[cfg(unix)]
        let id = std::os::unix::fs::MetadataExt::ino(&m);
        #[cfg(not(unix))]
        let id = 0;
        Some(Stamp {
            len: m.len(),
            modified: m.modified().ok()?,
            id,
        })
    }
}

/// How carefully [`Loader::load`] looks for changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scan {
    /// Read every file and compare contents: after a change was reported.
    Full,
    /// Trust length, modification time and identity; read only files whose differ, and not
    /// those modified in the last moment (they may be half written). The watcher's periodic
    /// check, a safety net for lost events.
    Quick,
}

impl Loader {
    pub fn new(search: SearchPath) -> Loader {
        let builtins = if search.builtins {
            builtin::load()
        } else {
            Vec::new()
        };
        Loader {
            search,
            cache: HashMap::new(),
            builtins,
        }
    }

    pub fn search(&self) -> &SearchPath {
        &self.search
    }

    /// Read the search path and build a registry, keeping `previous`'s good versions of files
    /// that are now broken.
    pub fn load(&mut self, previous: Option<&Registry>) -> Registry {
        self.load_files(previous, Scan::Full, true)
            .expect("a forced load always builds")
    }

    /// Like [`Loader::load`], but `None` when no file was added, removed or changed since the
    /// last load (and `previous` is given), so callers can keep the registry they have.
    pub fn reload(&mut self, previous: Option<&Registry>, scan: Scan) -> Option<Registry> {
        self.load_files(previous, scan, false)
    }

    fn load_files(
        &mut self,
        previous: Option<&Registry>,
        scan: Scan,
        force: bool,
    ) -> Option<Registry> {
        // A directory replaced while it is read (an editor or a script swapping a whole
        // agents directory by rename) would give a mix of two versions; read again until the
        // directories are the same before and after.
        let mut attempt = 0;
        let (files, cache, changed) = loop {
            let before = self.search.dir_ids();
            let result = self.scan(if attempt == 0 { scan } else { Scan::Full });
            attempt += 1;
            if attempt >= MAX_SCAN_ATTEMPTS || self.search.dir_ids() == before {
                break result;
            }
        };
        self.cache = cache;
        if !changed && !force && previous.is_some() {
            return None;
        }
        let mut files = files;
        files.extend(self.builtins.iter().cloned());
        Some(Registry::build(files, previous))
    }

    /// Read the search path once: the files, the cache to keep, and whether anything changed.
    fn scan(&self, scan: Scan) -> (Vec<Loaded>, HashMap<PathBuf, Cached>, bool) {
        let mut files = Vec::new();
        let mut cache = HashMap::new();
        let mut changed = false;
        for (origin, path) in self.search.files() {
            let display = self.search.display(&path);
            let info = FileInfo {
                path: &path,
                display: &display,
                origin,
            };
            let stamp = Stamp::of(&path);
            let old = self.cache.get(&path).filter(|c| c.loaded.origin == origin);
            if scan == Scan::Quick {
                let unchanged = old.is_some_and(|c| stamp.is_some() && c.stamp == stamp);
                // A file written a moment ago may be half written; its own change event
                // brings a full reload once the writing is done.
                let settling =
                    stamp.is_some_and(|s| s.modified.elapsed().is_ok_and(|age| age < SETTLE));
                if unchanged || settling {
                    if let Some(c) = old {
                        files.push(c.loaded.clone());
                        cache.insert(path, c.clone());
                    }
                    continue;
                }
            }
            let confine = match origin {
                AgentOrigin::Workspace => self.search.workspace.as_deref(),
                _ => None,
            };
            let (digest, loaded) = match read_file(info, confine) {
                // Unreadable (too large, not a regular file): remembered like any other result,
                // so an unchanged one does not count as a change every time.
                Err(failed) => {
                    changed |= old.is_none_or(|c| c.loaded.diagnostics != failed.diagnostics);
                    ([0; 32], *failed)
                }
                Ok(bytes) => {
                    let digest: [u8; 32] = Sha256::digest(&bytes).into();
                    let loaded = match old {
                        Some(c) if c.digest == digest => c.loaded.clone(),
                        _ => {
                            changed = true;
                            load_bytes(&bytes, info)
                        }
                    };
                    (digest, loaded)
                }
            };
            cache.insert(
                path.clone(),
                Cached {
                    stamp,
                    digest,
                    loaded: loaded.clone(),
                },
            );
            files.push(loaded);
        }
        // Files that were there last time and are gone now.
        changed |= self.cache.keys().any(|k| !cache.contains_key(k));
        (files, cache, changed)
    }
}

/// How long a quick scan leaves a just-modified file alone.
const SETTLE: std::time::Duration = std::time::Duration::from_millis(500);

/// How often a load is repeated when a directory is replaced while it is read.
const MAX_SCAN_ATTEMPTS: usize = 5;

/// Which directory a path names (device and inode), to notice one replaced by another.
pub(crate) type DirId = (u64, u64);

#[cfg(unix)]
pub(crate) fn dir_id(path: &Path) -> Option<DirId> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    m.is_dir().then(|| (m.dev(), m.ino()))
}

/// Elsewhere only whether the directory exists is compared.
#[cfg(not(unix))]
pub(crate) fn dir_id(path: &Path) -> Option<DirId> {
    path.is_dir().then_some((0, 0))
}

impl SearchPath {
    fn dir_ids(&self) -> Vec<Option<DirId>> {
        self.dirs.iter().map(|(_, d)| dir_id(d)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "name: NAME\nsystemPrompt: p\ntransitions: {onSuccess: done}\n";

    fn write(dir: &Path, rel: &str, text: &str) {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    fn search(ws: &Path, user: &Path) -> SearchPath {
        SearchPath::standard(ws, user)
    }

    #[test]
    fn higher_precedence_wins_and_lists_what_it_shadows() {
        let ws = tempfile::tempdir().unwrap();
        let user = tempfile::tempdir().unwrap();
        write(
            ws.path(),
            ".rawko/agents/planner.yaml",
            &GOOD.replace("NAME", "planner"),
        );
        write(
            user.path(),
            "agents/planner.md",
            "---\nname: planner\ndescription: d\n---\nUser planner.\n",
        );
        write(
            user.path(),
            "agents/helper.md",
            "---\ndescription: d\n---\nHelp.\n",
        );
        let r = Registry::load(&search(ws.path(), user.path()));
        assert!(!r.has_errors(), "{:#?}", r.diagnostics());
        let e = r.entry("planner").unwrap();
        assert_eq!(e.file.origin, AgentOrigin::Workspace);
        assert_eq!(e.file.display, ".rawko/agents/planner.yaml");
        let shadowed: Vec<_> = e.shadows.iter().map(|s| s.origin).collect();
        assert_eq!(shadowed, [AgentOrigin::User, AgentOrigin::Builtin]);
        assert_eq!(r.get("helper").unwrap().source.dialect, Dialect::ClaudeCode);
        assert_eq!(r.entry("tester").unwrap().file.origin, AgentOrigin::Builtin);
    }

    #[test]
    fn a_broken_override_claims_its_name_instead_of_falling_back() {
        let ws = tempfile::tempdir().unwrap();
        let user = tempfile::tempdir().unwrap();
        write(
            ws.path(),
            ".rawko/agents/planner.yaml",
            "name: planner\ntool: [Read]\n",
        );
        let r = Registry::load(&search(ws.path(), user.path()));
        let e = r.entry("planner").unwrap();
        assert_eq!(e.status, Status::Invalid);
        assert_eq!(e.file.origin, AgentOrigin::Workspace);
        assert!(r.get("planner").is_none());
        assert!(r.has_errors());
    }

    #[test]
    fn transitions_must_name_existing_agents() {
        let ws = tempfile::tempdir().unwrap();
        let user = tempfile::tempdir().unwrap();
        write(
            ws.path(),
            ".rawko/agents/a.yaml",
            "name: a\nsystemPrompt: p\ntransitions:\n  onSuccess: testr\n",
        );
        let r = Registry::load(&search(ws.path(), user.path()));
        let msgs: Vec<String> = r.diagnostics().iter().map(|d| d.to_string()).collect();
        assert!(
            msgs.iter().any(|m| m
                == ".rawko/agents/a.yaml:4:14: 'onSuccess' names agent 'testr', which does not exist (did you mean 'tester'?)"),
            "{msgs:#?}"
        );
        assert_eq!(r.entry("a").unwrap().status, Status::Invalid);
    }

    #[test]
    fn cycles_without_exit_are_warnings() {
        let ws = tempfile::tempdir().unwrap();
        let user = tempfile::tempdir().unwrap();
        let both = |me: &str, other: &str| {
            format!(
                "name: {me}\nsystemPrompt: p\ntransitions:\n  onSuccess: {other}\n  onFailure: {other}\n  onMaxIterations: {other}\n"
            )
        };
        write(ws.path(), ".rawko/agents/ping.yaml", &both("ping", "pong"));
        write(ws.path(), ".rawko/agents/pong.yaml", &both("pong", "ping"));
        write(
            ws.path(),
            ".rawko/agents/x.yaml",
            "name: x\nsystemPrompt: p\ntransitions:\n  onSuccess: y\n",
        );
        write(
            ws.path(),
            ".rawko/agents/y.yaml",
            "name: y\nsystemPrompt: p\ntransitions:\n  onSuccess: x\n",
        );
        let r = Registry::load(&search(ws.path(), user.path()));
        assert!(!r.has_errors(), "{:#?}", r.diagnostics());
        let warnings: Vec<String> = r
            .diagnostics()
            .iter()
            .filter(|d| d.severity == Severity::Warning)
            .map(|d| d.to_string())
            .collect();
        assert_eq!(warnings.len(), 3, "{warnings:#?}");
        assert!(
            warnings.iter().any(|w| w.contains("(x -> y -> x)")),
            "{warnings:#?}"
        );
        assert!(
            warnings.iter().any(|w| w.starts_with(
                ".rawko/agents/ping.yaml:4:14: warning: a task in 'ping' can never finish"
            )),
            "{warnings:#?}"
        );
        // A warning leaves the agents usable.
        assert!(r.get("ping").is_some());
    }

    #[test]
    fn a_name_defined_twice_is_resolved_by_precedence_with_a_warning() {
        let ws = tempfile::tempdir().unwrap();
        let user = tempfile::tempdir().unwrap();
        write(
            ws.path(),
            ".rawko/agents/a.yaml",
            &GOOD.replace("NAME", "dup"),
        );
        write(
            ws.path(),
            ".rawko/agents/b.yaml",
            &GOOD.replace("NAME", "dup"),
        );
        // Claude Code's directory, subfolders included, comes after rawko's own.
        write(
            ws.path(),
            ".claude/agents/team/dup.md",
            "---\nname: dup\ndescription: d\n---\nBody\n",
        );
        write(
            ws.path(),
            ".claude/agents/team/deep/helper.md",
            "---\nname: helper\ndescription: helps\n---\nYou help.\n",
        );
        let r = Registry::load(&SearchPath::standard(ws.path(), user.path()));
        let texts: Vec<String> = r.diagnostics().iter().map(|d| d.to_string()).collect();
        assert!(
            texts.contains(&".rawko/agents/b.yaml:1:7: warning: agent 'dup' is also defined in .rawko/agents/a.yaml, which is used (rename one of them; the first on the search path wins (.rawko/agents before .claude/agents))".to_string()),
            "{texts:#?}"
        );
        assert!(!r.has_errors(), "{texts:#?}");
        assert_eq!(r.entry("dup").unwrap().file.display, ".rawko/agents/a.yaml");
        assert_eq!(
            r.entry("helper").unwrap().file.display,
            ".claude/agents/team/deep/helper.md"
        );
        assert_eq!(
            r.entry("helper").unwrap().file.origin,
            AgentOrigin::Workspace
        );
    }

    #[test]
    fn copilot_and_opencode_agents_are_found_where_those_tools_keep_them() {
        let ws = tempfile::tempdir().unwrap();
        let user = tempfile::tempdir().unwrap();
        write(
            ws.path(),
            ".github/agents/triage.agent.md",
            "---\ndescription: Triages issues.\n---\nYou triage.\n",
        );
        // Not an agent: Copilot's directory holds other files too.
        write(
            ws.path(),
            ".github/agents/notes.md",
            "---\nname: notes\n---\nx\n",
        );
        write(
            ws.path(),
            ".opencode/agent/writer.md",
            "---\ndescription: Writes.\n---\nYou write.\n",
        );
        write(
            ws.path(),
            ".opencode/agents/tester2.md",
            "---\ndescription: Tests.\ntools:\n  write: false\n---\nYou test.\n",
        );
        let r = Registry::load(&SearchPath::standard(ws.path(), user.path()));
        let texts: Vec<String> = r.diagnostics().iter().map(|d| d.to_string()).collect();
        assert!(!r.has_errors(), "{texts:#?}");
        for (name, dialect) in [
            ("triage", Dialect::Copilot),
            ("writer", Dialect::Opencode),
            ("tester2", Dialect::Opencode),
        ] {
            let e = r.entry(name).unwrap_or_else(|| panic!("{name} not found"));
            assert_eq!(e.file.dialect, Some(dialect), "{name}");
            assert_eq!(e.file.origin, AgentOrigin::Workspace, "{name}");
        }
        assert!(r.entry("notes").is_none());
        assert!(!r.get("tester2").unwrap().may_call("Write"));
    }

    #[cfg(unix)]
    #[test]
    fn workspace_links_that_lead_outside_are_not_read() {
        let ws = tempfile::tempdir().unwrap();
        let ws_root = ws.path().canonicalize().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let secret = outside.path().join("secret.yaml");
        std::fs::write(
            &secret,
            "name: 12345-secret-value
",
        )
        .unwrap();
        let agents = ws_root.join(".rawko/agents");
        std::fs::create_dir_all(&agents).unwrap();
        std::os::unix::fs::symlink(&secret, agents.join("steal.yaml")).unwrap();
        // A link that stays inside the workspace is fine.
        write(
            &ws_root,
            "shared/inside.yaml",
            &GOOD.replace("NAME", "inside"),
        );
        std::os::unix::fs::symlink(
            ws_root.join("shared/inside.yaml"),
            agents.join("inside.yaml"),
        )
        .unwrap();
        let r = Registry::load(&search(&ws_root, outside.path()));
        let all: String = r.diagnostics().iter().map(|d| format!("{d}\n")).collect();
        assert!(
            all.contains(".rawko/agents/steal.yaml:1:1: the file links outside the workspace"),
            "{all}"
        );
        assert!(!all.contains("12345-secret-value"), "{all}");
        assert!(r.get("inside").is_some(), "{all}");
    }

    #[test]
    fn docloom_folders_hidden_files_and_readmes() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a.yaml", "");
        write(dir.path(), "README.md", "");
        write(dir.path(), ".hidden.yaml", "");
        write(dir.path(), "notes.txt", "");
        write(dir.path(), "backup.yaml~", "");
        write(dir.path(), "csharp/agent.agent.yaml", "");
        write(dir.path(), "csharp/other.yaml", "");
        write(dir.path(), "schema/rawko-agent.schema.json", "");
        let found: Vec<_> = discover(dir.path())
            .into_iter()
            .map(|p| p.strip_prefix(dir.path()).unwrap().display().to_string())
            .collect();
        assert_eq!(found, ["a.yaml", "csharp/agent.agent.yaml"]);
    }
}
