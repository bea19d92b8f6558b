//! Hot reload: watch the agent directories, reload what changed, and swap the registry whole.
//!
//! Readers take an `Arc<Registry>` snapshot (or an `Arc<Agent>` from one) and keep it as long
//! as they like: work in progress keeps the definition it started with, and only work that
//! starts after a reload sees the new one. The watcher thread builds each new registry
//! completely before swapping it in under a write lock held only for the pointer swap, so no
//! reader ever sees a half-updated registry. A file that breaks keeps its last good version in
//! use (marked stale) and the error is reported; deleting a file lets the next definition of
//! the name (a user or built-in one) take over.
//!
//! File events can be lost or arrive out of order (an agents directory replaced by a rename
//! while its old watch is torn down, an event queue overflow), so the watcher also looks at
//! the files' modification stamps every few seconds; a reload that finds nothing changed
//! swaps nothing and reports nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use notify::event::{AccessKind, AccessMode};
use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher as _};
use serde::Serialize;

use super::diag::Diagnostic;
use super::model::Agent;
use super::registry::{DirId, Loader, Registry, Scan, SearchPath, Status, dir_id};

/// How long the files must be quiet before a reload: editors save in several steps (write a
/// temporary file, rename it over the old one), and one reload should see the end result.
const QUIET: Duration = Duration::from_millis(60);
/// A reload happens at least this often while changes keep coming.
const MAX_WAIT: Duration = Duration::from_millis(500);
/// How far above an agents directory to watch for it to appear or be replaced
/// (`.rawko/agents` -> `.rawko` -> the workspace).
const ANCESTORS: usize = 2;
/// How often the files are checked when no event came: the safety net for lost events.
const RESCAN: Duration = Duration::from_secs(2);

/// The registry in effect, swapped whole on every reload.
#[derive(Debug)]
pub struct SharedRegistry {
    current: RwLock<Arc<Registry>>,
}

impl SharedRegistry {
    pub fn new(registry: Registry) -> SharedRegistry {
        SharedRegistry {
            current: RwLock::new(Arc::new(registry)),
        }
    }

    /// The registry as it is now; later reloads do not change it.
    pub fn snapshot(&self) -> Arc<Registry> {
        self.current
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// A usable agent as it is defined now.
    pub fn get(&self, name: &str) -> Option<Arc<Agent>> {
        self.snapshot().get(name)
    }

    fn swap(&self, registry: Arc<Registry>) {
        *self
            .current
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = registry;
    }
}

/// What one reload changed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReloadEvent {
    /// The new registry's generation.
    pub generation: u64,
    pub changes: Vec<Change>,
    /// Problems in files that changed in this reload, and new problems across agents.
    pub diagnostics: Vec<Diagnostic>,
}

/// A change to one agent name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Change {
    pub name: String,
    pub kind: ChangeKind,
    /// The file now in effect for the name (or the one removed).
    pub file: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ChangeKind {
    /// A new name.
    Added,
    /// A new definition of a known name (an edit, or another file taking over).
    Updated,
    /// The name is gone.
    Removed,
    /// The file broke; the last good version stays in use.
    Kept,
    /// The name has no usable definition any more.
    Invalid,
    /// A definition that was broken or stale is usable again.
    Restored,
}

impl ChangeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Added => "added",
            ChangeKind::Updated => "updated",
            ChangeKind::Removed => "removed",
            ChangeKind::Kept => "kept",
            ChangeKind::Invalid => "invalid",
            ChangeKind::Restored => "restored",
        }
    }
}

impl ReloadEvent {
    /// What changed between `old` and `new`; `None` when nothing did.
    pub fn between(old: &Registry, new: &Registry) -> Option<ReloadEvent> {
        let mut changes = Vec::new();
        for e in new.entries() {
            let kind = match old.entry(&e.name) {
                None if e.is_usable() => Some(ChangeKind::Added),
                None => Some(ChangeKind::Invalid),
                Some(o) => match (o.status, e.status) {
                    (_, Status::Invalid) if o.status != Status::Invalid => {
                        Some(ChangeKind::Invalid)
                    }
                    (Status::Ok, Status::Stale) => Some(ChangeKind::Kept),
                    (Status::Invalid | Status::Stale, Status::Ok) => Some(ChangeKind::Restored),
                    (Status::Invalid, Status::Stale) => Some(ChangeKind::Kept),
                    _ if o.file.path != e.file.path => Some(ChangeKind::Updated),
                    (Status::Ok, Status::Ok) => match (&o.agent, &e.agent) {
                        (Some(a), Some(b)) if !Arc::ptr_eq(a, b) && a != b => {
                            Some(ChangeKind::Updated)
                        }
                        _ => None,
                    },
                    _ => None,
                },
            };
            if let Some(kind) = kind {
                changes.push(Change {
                    name: e.name.clone(),
                    kind,
                    file: e.file.display.clone(),
                });
            }
        }
        for o in old.entries() {
            if new.entry(&o.name).is_none() {
                changes.push(Change {
                    name: o.name.clone(),
                    kind: ChangeKind::Removed,
                    file: o.file.display.clone(),
                });
            }
        }
        // Problems that are new: in files that changed, or across agents.
        let diagnostics: Vec<Diagnostic> = new
            .diagnostics()
            .iter()
            .filter(|d| !old.diagnostics().contains(d))
            .cloned()
            .collect();
        if changes.is_empty() && diagnostics.is_empty() {
            return None;
        }
        Some(ReloadEvent {
            generation: new.generation(),
            changes,
            diagnostics,
        })
    }
}

/// Something the watcher reports.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "lowercase")]
pub enum Report {
    /// A reload changed something.
    Reload(ReloadEvent),
    /// The file watcher itself had a problem (a directory could not be watched, events were
    /// lost); rawko rescans, but says so.
    Warning { message: String },
}

#[derive(Debug, thiserror::Error)]
#[error("cannot watch the agent directories: {0}")]
pub struct WatchError(#[from] notify::Error);

enum Msg {
    /// Something changed at these paths (none: unknown, rescan everything).
    Changed(Vec<PathBuf>),
    Error(String),
    Stop,
}

/// Watches the search path and keeps a [`SharedRegistry`] current. Dropping it stops watching.
pub struct Watcher {
    shared: Arc<SharedRegistry>,
    tx: Sender<Msg>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Watcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watcher").finish_non_exhaustive()
    }
}

impl Watcher {
    /// Load the search path, start watching it, and call `on_report` (on the watcher's thread)
    /// for every reload that changes something.
    pub fn start(
        search: SearchPath,
        on_report: impl FnMut(Report) + Send + 'static,
    ) -> Result<Watcher, WatchError> {
        let mut loader = Loader::new(search);
        let shared = Arc::new(SharedRegistry::new(loader.load(None)));
        let (tx, rx) = mpsc::channel();
        let dirs: Vec<PathBuf> = loader
            .search()
            .dirs
            .iter()
            .map(|(_, d)| d.clone())
            .collect();
        let events_tx = tx.clone();
        let relevant_dirs = dirs.clone();
        let notifier = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
            let msg = match res {
                Ok(event) if is_relevant(&event, &relevant_dirs) => Msg::Changed(event.paths),
                Ok(_) => return,
                Err(e) => Msg::Error(e.to_string()),
            };
            let _ = events_tx.send(msg);
        })?;
        let mut worker = Worker {
            loader,
            shared: shared.clone(),
            notifier,
            armed: BTreeMap::new(),
            rearm: BTreeSet::new(),
            dirs,
            on_report: Box::new(on_report),
        };
        // Watch before the first reload could be needed, then catch anything that changed
        // between the initial load and the watches being in place.
        if worker.arm() {
            worker.reload();
        }
        let thread = std::thread::Builder::new()
            .name("rawko-agents-watch".into())
            .spawn(move || worker.run(rx))
            .map_err(|e| WatchError(notify::Error::io(e)))?;
        Ok(Watcher {
            shared,
            tx,
            thread: Some(thread),
        })
    }

    /// The registry this watcher keeps current.
    pub fn registry(&self) -> Arc<SharedRegistry> {
        self.shared.clone()
    }

    /// Reload now, as if a file had changed.
    pub fn rescan(&self) {
        let _ = self.tx.send(Msg::Changed(Vec::new()));
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        let _ = self.tx.send(Msg::Stop);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Whether an event can change an agent: our own reads (access events) cannot, and neither
/// can changes outside the agent directories (seen while watching a parent for a directory
/// to appear).
fn is_relevant(event: &notify::Event, dirs: &[PathBuf]) -> bool {
    if event.need_rescan() {
        return true;
    }
    match event.kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => {}
        EventKind::Access(_) => return false,
        _ => {}
    }
    event.paths.is_empty()
        || event
            .paths
            .iter()
            .any(|p| dirs.iter().any(|d| p.starts_with(d) || d.starts_with(p)))
}

struct Worker {
    loader: Loader,
    shared: Arc<SharedRegistry>,
    notifier: RecommendedWatcher,
    /// What is watched now, how, and which directory it was (a directory replaced by a rename
    /// has the same path but is not the one being watched).
    armed: BTreeMap<PathBuf, (RecursiveMode, Option<DirId>)>,
    /// Watched directories that an event says were created, moved or removed: their watch is
    /// renewed whatever their identity says (inode numbers are reused).
    rearm: BTreeSet<PathBuf>,
    dirs: Vec<PathBuf>,
    on_report: Box<dyn FnMut(Report) + Send>,
}

impl Worker {
    fn run(mut self, rx: Receiver<Msg>) {
        loop {
            let scan = match rx.recv_timeout(RESCAN) {
                Ok(Msg::Changed(paths)) => {
                    self.note(&paths);
                    Scan::Full
                }
                Ok(Msg::Error(e)) => {
                    self.warn(format!("file watcher: {e}"));
                    Scan::Full
                }
                Err(RecvTimeoutError::Timeout) => Scan::Quick,
                Ok(Msg::Stop) | Err(RecvTimeoutError::Disconnected) => return,
            };
            if scan == Scan::Full {
                // Wait for the burst of events one save makes to end.
                let start = Instant::now();
                loop {
                    match rx.recv_timeout(QUIET) {
                        Ok(Msg::Changed(paths)) => {
                            self.note(&paths);
                            if start.elapsed() >= MAX_WAIT {
                                break;
                            }
                        }
                        Ok(Msg::Error(e)) => self.warn(format!("file watcher: {e}")),
                        Err(RecvTimeoutError::Timeout) => break,
                        Ok(Msg::Stop) | Err(RecvTimeoutError::Disconnected) => return,
                    }
                }
            }
            self.reload_with(scan);
            // A directory that appeared or was replaced gets a new watch; rescan in case files
            // changed in it before the watch was in place.
            while self.arm() {
                self.reload_with(Scan::Full);
            }
        }
    }

    /// Remember which watched directories an event touched (itself or an ancestor).
    fn note(&mut self, paths: &[PathBuf]) {
        for p in paths {
            for d in &self.dirs {
                if d.starts_with(p) {
                    self.rearm.insert(d.clone());
                }
            }
        }
    }

    fn reload(&mut self) {
        self.reload_with(Scan::Full);
    }

    fn reload_with(&mut self, scan: Scan) {
        let old = self.shared.snapshot();
        let Some(new) = self.loader.reload(Some(&old), scan) else {
            return;
        };
        let new = Arc::new(new);
        self.shared.swap(new.clone());
        if let Some(event) = ReloadEvent::between(&old, &new) {
            (self.on_report)(Report::Reload(event));
        }
    }

    fn warn(&mut self, message: String) {
        (self.on_report)(Report::Warning { message });
    }

    /// Bring the watches in line with what exists: each agent directory recursively, or, while
    /// it is missing, its nearest existing ancestor (not recursively) to see it appear.
    /// Returns whether a new directory watch was added.
    fn arm(&mut self) -> bool {
        let mut wanted: BTreeMap<PathBuf, RecursiveMode> = BTreeMap::new();
        for dir in &self.dirs {
            // The parent too, so the directory being created, renamed or replaced is seen
            // even when its own watch goes stale.
            if dir.is_dir() {
                wanted.insert(dir.clone(), RecursiveMode::Recursive);
            }
            let mut up: &Path = dir;
            for _ in 0..ANCESTORS {
                let Some(parent) = up.parent() else { break };
                if parent.is_dir() {
                    wanted
                        .entry(parent.to_path_buf())
                        .or_insert(RecursiveMode::NonRecursive);
                    break;
                }
                up = parent;
            }
        }
        let rearm = std::mem::take(&mut self.rearm);
        let stale: Vec<PathBuf> = self
            .armed
            .iter()
            .filter(|(p, (m, id))| {
                wanted.get(*p) != Some(m)
                    || id.is_none()
                    || dir_id(p) != *id
                    || (*m == RecursiveMode::Recursive && rearm.contains(*p))
            })
            .map(|(p, _)| p.clone())
            .collect();
        for p in stale {
            let _ = self.notifier.unwatch(&p);
            self.armed.remove(&p);
        }
        let mut added_dir = false;
        for (path, mode) in wanted {
            if self.armed.contains_key(&path) {
                continue;
            }
            let id = dir_id(&path);
            match self.notifier.watch(&path, mode) {
                Ok(()) => {
                    added_dir |= mode == RecursiveMode::Recursive;
                    self.armed.insert(path, (mode, id));
                }
                Err(e) => self.warn(format!("cannot watch {}: {e}", path.display())),
            }
        }
        added_dir
    }
}
