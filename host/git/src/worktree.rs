//! Reading and writing work-tree files by repository-relative path, never through a symbolic
//! link and never into `.git`: a tree or index a stranger wrote cannot steer a write elsewhere.

use std::io::ErrorKind;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use gix::bstr::{BStr, ByteSlice};
use gix::index::entry::Mode;

use crate::GitError;

/// The path of repository-relative `rela` under `root`, after checking each component: not
/// empty, `.`, `..` or `.git` (in any case), and no directory on the way a symbolic link.
pub fn resolve(root: &Path, rela: &BStr) -> Result<PathBuf, GitError> {
    let bad = || GitError::Denied(format!("refusing the path {:?}", rela.to_str_lossy()));
    if rela.is_empty() || rela.contains(&0) {
        return Err(bad());
    }
    let parts: Vec<&[u8]> = rela.split(|b| *b == b'/').collect();
    let mut path = root.to_path_buf();
    for (i, part) in parts.iter().enumerate() {
        if part.is_empty() || *part == b"." || *part == b".." || part.eq_ignore_ascii_case(b".git")
        {
            return Err(bad());
        }
        path.push(std::ffi::OsStr::from_bytes(part));
        if i + 1 < parts.len() {
            match std::fs::symlink_metadata(&path) {
                Ok(m) if m.file_type().is_symlink() => {
                    return Err(GitError::Denied(format!(
                        "{} is a symbolic link; the Git tool does not read or write through links",
                        path.display()
                    )));
                }
                _ => {}
            }
        }
    }
    Ok(path)
}

/// The file at `rela` as git would store it: its mode and content (a link's target), or `None`
/// when there is no file (or a directory) there.
pub fn read(root: &Path, rela: &BStr) -> Result<Option<(Mode, Vec<u8>)>, GitError> {
    let path = resolve(root, rela)?;
    let io = |e: std::io::Error| GitError::Failed(format!("{}: {e}", path.display()));
    let meta = match std::fs::symlink_metadata(&path) {
        Ok(m) => m,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(e)),
    };
    if meta.file_type().is_symlink() {
        let target = std::fs::read_link(&path).map_err(io)?;
        return Ok(Some((
            Mode::SYMLINK,
            target.as_os_str().as_bytes().to_vec(),
        )));
    }
    if !meta.is_file() {
        return Ok(None);
    }
    let mode = if meta.permissions().mode() & 0o111 != 0 {
        Mode::FILE_EXECUTABLE
    } else {
        Mode::FILE
    };
    Ok(Some((mode, std::fs::read(&path).map_err(io)?)))
}

/// Write `data` at `rela` with `mode`, creating directories on the way and replacing what is
/// there (a file or a link, never a directory).
pub fn write(root: &Path, rela: &BStr, mode: Mode, data: &[u8]) -> Result<(), GitError> {
    let path = resolve(root, rela)?;
    let io = |e: std::io::Error| GitError::Failed(format!("{}: {e}", path.display()));
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(io)?;
    }
    match std::fs::symlink_metadata(&path) {
        Ok(m) if m.is_dir() => {
            return Err(GitError::Failed(format!(
                "{} is a directory; it was not replaced",
                path.display()
            )));
        }
        Ok(_) => std::fs::remove_file(&path).map_err(io)?,
        Err(_) => {}
    }
    if mode == Mode::SYMLINK {
        std::os::unix::fs::symlink(std::ffi::OsStr::from_bytes(data), &path).map_err(io)?;
        return Ok(());
    }
    if mode == Mode::COMMIT {
        // A submodule: its directory is not the tool's to fill.
        return std::fs::create_dir_all(&path).map_err(io);
    }
    std::fs::write(&path, data).map_err(io)?;
    let bits = if mode == Mode::FILE_EXECUTABLE {
        0o755
    } else {
        0o644
    };
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(bits)).map_err(io)
}

/// Remove the file or link at `rela` and the directories it leaves empty.
pub fn remove(root: &Path, rela: &BStr) -> Result<(), GitError> {
    let path = resolve(root, rela)?;
    match std::fs::symlink_metadata(&path) {
        Ok(m) if m.is_dir() => return Ok(()),
        Ok(_) => std::fs::remove_file(&path)
            .map_err(|e| GitError::Failed(format!("{}: {e}", path.display())))?,
        Err(_) => return Ok(()),
    }
    let mut dir = path.parent();
    while let Some(d) = dir {
        if d == root || std::fs::remove_dir(d).is_err() {
            break;
        }
        dir = d.parent();
    }
    Ok(())
}

/// The index stat of the file at `rela`, for an entry that now matches it.
pub fn stat(root: &Path, rela: &BStr) -> gix::index::entry::Stat {
    resolve(root, rela)
        .ok()
        .and_then(|p| gix::index::fs::Metadata::from_path_no_follow(&p).ok())
        .and_then(|m| gix::index::entry::Stat::from_fs(&m).ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_out_of_the_tree_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        for bad in [
            "../x",
            "a/../../x",
            ".git/config",
            "a/.GIT/hooks/pre-commit",
            "",
            "a//b",
        ] {
            assert!(resolve(dir.path(), bad.into()).is_err(), "{bad}");
        }
        assert!(resolve(dir.path(), "a/b.txt".into()).is_ok());
    }

    #[test]
    fn a_write_does_not_follow_a_linked_directory() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("link")).unwrap();
        let err = write(dir.path(), "link/planted".into(), Mode::FILE, b"x").unwrap_err();
        assert!(err.to_string().contains("symbolic link"), "{err}");
        assert!(!outside.path().join("planted").exists());
    }

    #[test]
    fn write_read_and_remove_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "a/b/c.sh".into(),
            Mode::FILE_EXECUTABLE,
            b"echo\n",
        )
        .unwrap();
        let (mode, data) = read(dir.path(), "a/b/c.sh".into()).unwrap().unwrap();
        assert_eq!(mode, Mode::FILE_EXECUTABLE);
        assert_eq!(data, b"echo\n");
        remove(dir.path(), "a/b/c.sh".into()).unwrap();
        assert!(!dir.path().join("a").exists());
    }
}
