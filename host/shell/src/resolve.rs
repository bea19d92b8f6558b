//! How a word becomes a program and a path becomes a file, decided once for the policy and the
//! executor alike.
//!
//! Programs are looked up on a `PATH` that rawko controls: the user's own, minus relative
//! entries and entries inside the workspace or a writable grant (where an agent could plant a
//! `ls` of its own). A program named by path is judged by what it is, not by what it is called:
//! `/bin/rm` and a symlink `./cat -> /usr/bin/rm` are both `rm`, while a `cat` the agent wrote
//! into the workspace is its absolute path and matches no pattern made for the real `cat`.

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::model::Program;

/// How long a bare name's `PATH` lookup is remembered. The directories searched are outside the
/// workspace and every writable grant, so nothing an agent does changes the answer; a program
/// the user installs meanwhile is found once this has passed.
const LOOKUP_TTL: Duration = Duration::from_secs(2);

/// Bare name -> when it was looked up, and the real path it found.
type LookupCache = HashMap<String, (Instant, Option<PathBuf>)>;

/// Resolves programs and paths for one workspace. Clones share the lookup cache.
#[derive(Debug, Clone)]
pub struct Resolver {
    path_dirs: Vec<PathBuf>,
    found: Arc<Mutex<LookupCache>>,
}

impl Resolver {
    /// A resolver over exactly these `PATH` directories.
    pub fn new(path_dirs: Vec<PathBuf>) -> Self {
        Resolver {
            path_dirs,
            found: Arc::default(),
        }
    }

    /// The process's own `PATH`, keeping only absolute directories outside every path in
    /// `untrusted` (the workspace and writable grants).
    pub fn from_env(untrusted: &[&Path]) -> Self {
        Self::from_path_var(&std::env::var_os("PATH").unwrap_or_default(), untrusted)
    }

    /// Like [`Resolver::from_env`], for the `PATH` value `raw`.
    pub fn from_path_var(raw: &std::ffi::OsStr, untrusted: &[&Path]) -> Self {
        let mut dirs: Vec<PathBuf> = Vec::new();
        for d in std::env::split_paths(raw) {
            if !d.is_absolute() {
                continue;
            }
            let real = d.canonicalize().unwrap_or_else(|_| normalize(&d));
            if untrusted
                .iter()
                .any(|u| real.starts_with(u) || d.starts_with(u))
            {
                continue;
            }
            if !dirs.contains(&d) {
                dirs.push(d);
            }
        }
        Resolver::new(dirs)
    }

    /// The directories searched, in order (the `PATH` commands run with).
    pub fn path_dirs(&self) -> &[PathBuf] {
        &self.path_dirs
    }

    /// Find a bare program name on `PATH`.
    fn lookup(&self, name: &str) -> Option<PathBuf> {
        if name.is_empty() || name.contains('/') || name == "." || name == ".." {
            return None;
        }
        self.path_dirs
            .iter()
            .map(|d| d.join(name))
            .find(|p| is_executable_file(p))
    }

    /// [`Resolver::lookup`], with symlinks resolved, remembered for [`LOOKUP_TTL`]: a command
    /// line names the same few programs again and again, and each lookup is a `stat` per `PATH`
    /// directory.
    fn find(&self, name: &str) -> Option<PathBuf> {
        let now = Instant::now();
        let mut cache = self.found.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((at, found)) = cache.get(name)
            && now.duration_since(*at) < LOOKUP_TTL
        {
            return found.clone();
        }
        let found = self.lookup(name).map(|p| p.canonicalize().unwrap_or(p));
        if cache.len() >= 1024 {
            cache.clear();
        }
        cache.insert(name.to_string(), (now, found.clone()));
        found
    }

    /// Resolve `argv0` as written, for a command running in `cwd`.
    pub fn program(&self, argv0: &str, cwd: &Path) -> Program {
        if argv0 == "cd" {
            return Program {
                name: "cd".into(),
                path: None,
            };
        }
        if !argv0.contains('/') {
            return Program {
                name: argv0.to_string(),
                path: self.find(argv0),
            };
        }
        let lexical = normalize(&cwd.join(argv0));
        let Some(real) = lexical
            .canonicalize()
            .ok()
            .filter(|p| is_executable_file(p))
        else {
            return Program {
                name: lexical.to_string_lossy().into_owned(),
                path: None,
            };
        };
        // The name it was called by, then the name of the file it really is: whichever finds
        // this same file on PATH is the name policies know it by.
        let same_on_path = |name: Option<&std::ffi::OsStr>| -> Option<String> {
            let name = name?.to_str()?;
            (self.find(name)? == real).then(|| name.to_string())
        };
        let name = same_on_path(lexical.file_name())
            .or_else(|| same_on_path(real.file_name()))
            .unwrap_or_else(|| real.to_string_lossy().into_owned());
        Program {
            name,
            path: Some(real),
        }
    }

    /// Where a file operation on `path`, from `cwd`, lands: absolute, lexically normalised, and
    /// with symlinks resolved in the longest part of it that exists.
    pub fn path(&self, path: &str, cwd: &Path) -> PathBuf {
        resolve_path(path, cwd)
    }
}

/// See [`Resolver::path`].
pub fn resolve_path(path: &str, cwd: &Path) -> PathBuf {
    let lexical = normalize(&cwd.join(path));
    let mut existing = lexical.as_path();
    let mut rest: Vec<&std::ffi::OsStr> = Vec::new();
    loop {
        if let Ok(real) = existing.canonicalize() {
            let mut out = real;
            for part in rest.iter().rev() {
                out.push(part);
            }
            return out;
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name);
                existing = parent;
            }
            _ => return lexical,
        }
    }
}

pub use rawko_plugin_sdk::path::normalize;

fn is_executable_file(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_symlinks_resolve_to_what_they_are() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let bin = root.join("bin");
        std::fs::create_dir(&bin).unwrap();
        for name in ["rm", "cat"] {
            let p = bin.join(name);
            std::fs::write(&p, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let ws = root.join("ws");
        std::fs::create_dir(&ws).unwrap();
        std::os::unix::fs::symlink(bin.join("rm"), ws.join("cat")).unwrap();
        std::fs::write(ws.join("ls"), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(ws.join("ls"), std::fs::Permissions::from_mode(0o755)).unwrap();

        let r = Resolver::new(vec![bin.clone()]);
        assert_eq!(r.program("rm", &ws).name, "rm");
        assert_eq!(r.program(&format!("{}/rm", bin.display()), &ws).name, "rm");
        assert_eq!(r.program("../bin/./rm", &ws).name, "rm");
        // A symlink named `cat` to rm is rm.
        assert_eq!(r.program("./cat", &ws).name, "rm");
        // A file of its own is its path, whatever it is called.
        let own = r.program("./ls", &ws);
        assert_eq!(own.name, ws.join("ls").to_string_lossy());
        assert!(r.program("ls", &ws).path.is_none());
        assert!(r.program("./missing", &ws).path.is_none());
    }

    #[test]
    fn untrusted_path_entries_are_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        let inside = ws.join("node_modules/.bin");
        std::fs::create_dir_all(&inside).unwrap();
        let raw = std::env::join_paths([
            PathBuf::from("bin"),
            inside.clone(),
            PathBuf::from("/usr/bin"),
            ws.join("sub/../node_modules/.bin"),
            PathBuf::from("/usr/bin"),
        ])
        .unwrap();
        let r = Resolver::from_path_var(&raw, &[&ws]);
        assert_eq!(r.path_dirs(), [PathBuf::from("/usr/bin")]);
    }

    #[test]
    fn resolve_path_follows_existing_symlinks_only() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("real")).unwrap();
        std::os::unix::fs::symlink(root.join("real"), root.join("link")).unwrap();
        assert_eq!(
            resolve_path("link/new/file", &root),
            root.join("real/new/file")
        );
        assert_eq!(resolve_path("../x", &root.join("real")), root.join("x"));
        assert_eq!(
            resolve_path("/etc/../etc/x", &root),
            PathBuf::from("/etc/x")
        );
    }
}
