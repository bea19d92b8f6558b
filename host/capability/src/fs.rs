//! Filesystem grants (`fs.read`, `fs.write`), and the WASI preopens they become.
//!
//! A grant is a directory, resolved to its real path when it is made. Inside the sandbox it is
//! preopened under that same absolute path, read-only or read-write; paths outside every grant
//! do not exist there. The sandbox (cap-std, under wasmtime-wasi) refuses `..`, absolute paths
//! and symlinks that lead out of a preopen, so a grant holds whatever the plugin does.
//!
//! Writes under `.git/` and `.rawko/` are refused inside every writable grant
//! ([`super::protect`]).
//!
//! Grants do not nest to restrict: a read-only directory inside a read-write grant is reachable
//! for writing through the wider grant (`rw/x/../ro/f`), so adding the narrower grant changes
//! nothing and it is dropped rather than given the appearance of protection.

use std::path::{Path, PathBuf};

use super::protect::Protected;

/// What a grant allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Access {
    /// Read files, list directories.
    ReadOnly,
    /// Also create, write, rename and remove.
    ReadWrite,
}

impl std::fmt::Display for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Access::ReadOnly => "read-only",
            Access::ReadWrite => "read-write",
        })
    }
}

/// One granted directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FsGrant {
    path: PathBuf,
    access: Access,
}

impl FsGrant {
    /// The directory, absolute and free of symlinks.
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn access(&self) -> Access {
        self.access
    }
}

/// Why a path could not be granted.
#[derive(Debug, thiserror::Error)]
pub enum GrantError {
    #[error("cannot grant {path}: {source}")]
    Resolve {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "cannot grant {path}: it is not a directory (grants are directories; grant the directory that holds it)"
    )]
    NotADirectory { path: PathBuf },
    #[error("cannot grant {path}: the path is not valid UTF-8")]
    NotUtf8 { path: PathBuf },
    #[error("cannot open granted directory {path} for the sandbox: {message}")]
    Preopen { path: PathBuf, message: String },
}

/// The set of directories one call may use.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FsGrants {
    grants: Vec<FsGrant>,
    /// Workspaces whose `.git` and `.rawko` stay read-only even inside a writable grant (every
    /// writable grant is treated as one too; see [`super::protect`]).
    workspaces: Vec<PathBuf>,
}

impl FsGrants {
    /// No filesystem access at all.
    pub fn none() -> Self {
        FsGrants::default()
    }

    /// Grant `path` (absolute, or relative to `base`) with `access`. The directory must exist;
    /// it is resolved to its real path, so a symlink grants its target.
    pub fn grant(&mut self, base: &Path, path: &Path, access: Access) -> Result<(), GrantError> {
        let joined = base.join(path);
        let real = joined
            .canonicalize()
            .map_err(|source| GrantError::Resolve {
                path: joined.clone(),
                source,
            })?;
        if !real.is_dir() {
            return Err(GrantError::NotADirectory { path: joined });
        }
        if real.to_str().is_none() {
            return Err(GrantError::NotUtf8 { path: real });
        }
        self.insert(real, access);
        Ok(())
    }

    fn insert(&mut self, path: PathBuf, access: Access) {
        if self
            .grants
            .iter()
            .any(|g| path.starts_with(&g.path) && g.access >= access)
        {
            return;
        }
        self.grants
            .retain(|g| !(g.path.starts_with(&path) && access >= g.access));
        self.grants.push(FsGrant { path, access });
        self.grants.sort_by(|a, b| a.path.cmp(&b.path));
    }

    /// What both `self` and `limit` allow: for each pair of overlapping grants, the deeper
    /// directory with the narrower access. This is how a call's grants are held to what the user
    /// granted an installed plugin.
    pub fn intersect(&self, limit: &FsGrants) -> FsGrants {
        let mut out = FsGrants::none();
        for a in &self.grants {
            for b in &limit.grants {
                let path = if a.path.starts_with(&b.path) {
                    &a.path
                } else if b.path.starts_with(&a.path) {
                    &b.path
                } else {
                    continue;
                };
                out.insert(path.clone(), a.access.min(b.access));
            }
        }
        for w in self.workspaces.iter().chain(&limit.workspaces) {
            out.protect_workspace(w);
        }
        out
    }

    /// Keep `workspace`'s `.git` and `.rawko` read-only, even when a grant names them.
    pub fn protect_workspace(&mut self, workspace: &Path) {
        let real = workspace
            .canonicalize()
            .unwrap_or_else(|_| workspace.to_path_buf());
        if !self.workspaces.contains(&real) {
            self.workspaces.push(real);
        }
    }

    /// What no write may touch: `.git` and `.rawko` below every writable grant and protected
    /// workspace. Empty when nothing is writable.
    pub fn protected(&self) -> Protected {
        if !self.grants.iter().any(|g| g.access == Access::ReadWrite) {
            return Protected::default();
        }
        let writable = self
            .grants
            .iter()
            .filter(|g| g.access == Access::ReadWrite)
            .map(|g| g.path.clone());
        Protected::new(self.workspaces.iter().cloned().chain(writable))
    }

    pub fn iter(&self) -> impl Iterator<Item = &FsGrant> {
        self.grants.iter()
    }

    pub fn is_empty(&self) -> bool {
        self.grants.is_empty()
    }

    /// The widest access any grant gives to the absolute `path`.
    pub fn access(&self, path: &Path) -> Option<Access> {
        self.grants
            .iter()
            .filter(|g| path.starts_with(&g.path))
            .map(|g| g.access)
            .max()
    }
}

impl FsGrants {
    /// Read the file at `path` (absolute, or relative to `base`) through the grant that holds
    /// it, as the sandbox would: resolved beneath the granted directory by cap-primitives, so
    /// `..` and symlinks cannot lead out of it, opened without blocking (a FIFO cannot stall
    /// the read) and refused unless it is a regular file of at most `max` bytes.
    pub fn read_file(&self, base: &Path, path: &Path, max: u64) -> Result<Vec<u8>, ReadError> {
        use cap_fs_ext::{FollowSymlinks, OpenOptionsFollowExt};
        use cap_primitives::fs::OpenOptionsExt;
        use std::io::Read;
        let abs = base.join(path);
        let shown = || abs.display().to_string();
        let io = |path: String| move |source| ReadError::Io { path, source };
        let grant = self
            .grants
            .iter()
            .filter(|g| abs.starts_with(&g.path))
            .max_by_key(|g| g.path.as_os_str().len())
            .ok_or_else(|| ReadError::Outside(shown()))?;
        let rel = abs.strip_prefix(&grant.path).unwrap_or(Path::new("."));
        let dir = std::fs::File::open(&grant.path).map_err(io(grant.path.display().to_string()))?;
        let mut opts = cap_primitives::fs::OpenOptions::new();
        opts.read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
            .follow(FollowSymlinks::Yes);
        let file = cap_primitives::fs::open(&dir, rel, &opts).map_err(|e| {
            if e.kind() == std::io::ErrorKind::PermissionDenied
                || e.raw_os_error() == Some(libc::EXDEV)
            {
                ReadError::Escapes {
                    path: shown(),
                    grant: grant.path.display().to_string(),
                }
            } else {
                io(shown())(e)
            }
        })?;
        let meta = file.metadata().map_err(io(shown()))?;
        if !meta.is_file() {
            return Err(ReadError::NotAFile(shown()));
        }
        if meta.len() > max {
            return Err(ReadError::TooLarge {
                path: shown(),
                size: meta.len(),
                max,
            });
        }
        let mut out = Vec::with_capacity(meta.len() as usize);
        file.take(max + 1)
            .read_to_end(&mut out)
            .map_err(io(shown()))?;
        if out.len() as u64 > max {
            return Err(ReadError::Grew { path: shown(), max });
        }
        Ok(out)
    }
}

/// Why [`FsGrants::read_file`] read nothing.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{0} is outside the workspace and every granted directory")]
    Outside(String),
    #[error("{path} leads outside {grant}")]
    Escapes { path: String, grant: String },
    #[error("{0} is not a regular file (a directory, FIFO, socket or device)")]
    NotAFile(String),
    #[error("{path} has {size} bytes; at most {max} are read")]
    TooLarge { path: String, size: u64, max: u64 },
    #[error("{path} grew past {max} bytes while it was read")]
    Grew { path: String, max: u64 },
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// Read the file at `path` (symbolic links followed), refusing what is not a regular file (a
/// FIFO would block the read for ever, a device could be endless) and anything larger than
/// `max` bytes, without reading past `max`. For files a workspace or a download supplies.
pub fn read_regular(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let meta = std::fs::metadata(path)?;
    if !meta.is_file() {
        return Err(std::io::Error::other(
            "not a regular file (a FIFO, socket, device or directory)",
        ));
    }
    let too_large =
        |len: u64| std::io::Error::other(format!("{len} bytes or more; at most {max} are read"));
    if meta.len() > max {
        return Err(too_large(meta.len()));
    }
    let mut out = Vec::with_capacity(meta.len() as usize);
    std::fs::File::open(path)?
        .take(max + 1)
        .read_to_end(&mut out)?;
    if out.len() as u64 > max {
        return Err(too_large(out.len() as u64));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_granted_read_stays_inside_its_grant() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path().canonicalize().unwrap();
        let ws = root.join("ws");
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        std::fs::write(ws.join("sub/f.txt"), "inside").unwrap();
        std::fs::write(root.join("outside"), "secret").unwrap();
        std::os::unix::fs::symlink(root.join("outside"), ws.join("link")).unwrap();
        std::os::unix::fs::symlink("sub/f.txt", ws.join("ok-link")).unwrap();
        let mut g = FsGrants::none();
        g.grant(&ws, &ws, Access::ReadOnly).unwrap();
        assert_eq!(
            g.read_file(&ws, Path::new("sub/f.txt"), 100).unwrap(),
            b"inside"
        );
        assert_eq!(
            g.read_file(&ws, &ws.join("ok-link"), 100).unwrap(),
            b"inside"
        );
        for bad in ["../outside", "link", "sub/../../outside"] {
            let e = g
                .read_file(&ws, Path::new(bad), 100)
                .unwrap_err()
                .to_string();
            assert!(!e.contains("secret"), "{bad}: {e}");
        }
        let e = g
            .read_file(&ws, &root.join("outside"), 100)
            .unwrap_err()
            .to_string();
        assert!(e.contains("outside the workspace"), "{e}");
        let e = g
            .read_file(&ws, Path::new("/etc/passwd"), 1 << 20)
            .unwrap_err()
            .to_string();
        assert!(e.contains("outside the workspace"), "{e}");
        assert!(
            g.read_file(&ws, Path::new("sub"), 100)
                .unwrap_err()
                .to_string()
                .contains("not a regular file")
        );
        assert!(
            g.read_file(&ws, Path::new("sub/f.txt"), 3)
                .unwrap_err()
                .to_string()
                .contains("at most 3")
        );
    }

    #[test]
    fn only_regular_files_of_bounded_size_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"12345").unwrap();
        assert_eq!(read_regular(&file, 5).unwrap(), b"12345");
        assert!(
            read_regular(&file, 4)
                .unwrap_err()
                .to_string()
                .contains("at most 4")
        );
        let fifo = dir.path().join("pipe");
        assert!(
            std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&fifo, &link).unwrap();
        for p in [&fifo, &link, &dir.path().to_path_buf()] {
            let e = read_regular(p, 100).unwrap_err().to_string();
            assert!(e.contains("not a regular file"), "{e}");
        }
    }

    fn grants(list: &[(&Path, Access)]) -> FsGrants {
        let mut g = FsGrants::none();
        for (p, a) in list {
            g.grant(Path::new("/"), p, *a).unwrap();
        }
        g
    }

    #[test]
    fn grants_resolve_symlinks_and_refuse_files() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().canonicalize().unwrap();
        std::fs::create_dir(real.join("sub")).unwrap();
        std::fs::write(real.join("file"), "x").unwrap();
        std::os::unix::fs::symlink(real.join("sub"), real.join("link")).unwrap();

        let mut g = FsGrants::none();
        g.grant(&real, Path::new("link"), Access::ReadOnly).unwrap();
        assert_eq!(g.iter().next().unwrap().path(), real.join("sub"));
        assert!(matches!(
            g.grant(&real, Path::new("file"), Access::ReadOnly),
            Err(GrantError::NotADirectory { .. })
        ));
        assert!(matches!(
            g.grant(&real, Path::new("missing"), Access::ReadOnly),
            Err(GrantError::Resolve { .. })
        ));
    }

    #[test]
    fn covered_grants_are_dropped_and_wider_ones_absorb() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let sub = root.join("sub");
        std::fs::create_dir(&sub).unwrap();

        // Read-only inside read-write adds nothing.
        let g = grants(&[(&root, Access::ReadWrite), (&sub, Access::ReadOnly)]);
        assert_eq!(g.iter().count(), 1);
        // Read-write inside read-only is kept: it is the only way to write there.
        let g = grants(&[(&root, Access::ReadOnly), (&sub, Access::ReadWrite)]);
        assert_eq!(g.iter().count(), 2);
        assert_eq!(g.access(&sub.join("f")), Some(Access::ReadWrite));
        assert_eq!(g.access(&root.join("f")), Some(Access::ReadOnly));
        // A wider grant added later absorbs the narrower one.
        let g = grants(&[(&sub, Access::ReadOnly), (&root, Access::ReadOnly)]);
        assert_eq!(
            g.iter().map(|g| g.path()).collect::<Vec<_>>(),
            vec![root.as_path()]
        );
        // Sibling prefixes are not containment.
        assert_eq!(g.access(Path::new(&format!("{}x", root.display()))), None);
    }

    #[test]
    fn intersections_take_the_deeper_path_and_the_narrower_access() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let sub = root.join("sub");
        let other = root.join("other");
        std::fs::create_dir(&sub).unwrap();
        std::fs::create_dir(&other).unwrap();

        let call = grants(&[(&root, Access::ReadWrite)]);
        let limit = grants(&[(&sub, Access::ReadOnly)]);
        let g = call.intersect(&limit);
        assert_eq!(g.access(&sub.join("f")), Some(Access::ReadOnly));
        assert_eq!(g.access(&root.join("f")), None);
        assert_eq!(g, limit.intersect(&call));

        let call = grants(&[(&sub, Access::ReadWrite), (&other, Access::ReadOnly)]);
        let limit = grants(&[(&root, Access::ReadWrite)]);
        assert_eq!(call.intersect(&limit), call);
        assert!(call.intersect(&FsGrants::none()).is_empty());
        assert_eq!(g.access(Path::new(&format!("{}x", root.display()))), None);
    }
}
