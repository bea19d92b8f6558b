//! The repositories indexed on this machine: `<data dir>/knowledge/repositories`, one absolute
//! path per line, for `rawko knowledge query --repo` and `--global`.

use std::path::{Path, PathBuf};

/// The list's file under the data directory.
pub fn file(data_dir: &Path) -> PathBuf {
    data_dir.join("knowledge").join("repositories")
}

/// The indexed repositories, in the order they were first indexed.
pub fn list(data_dir: &Path) -> Vec<PathBuf> {
    std::fs::read_to_string(file(data_dir))
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(PathBuf::from)
        .collect()
}

/// Add `root` to the list, if it is not on it; the list is replaced whole, so a reader never
/// sees half of it.
pub fn add(data_dir: &Path, root: &Path) -> std::io::Result<()> {
    let mut repos = list(data_dir);
    if repos.iter().any(|r| r == root) {
        return Ok(());
    }
    repos.push(root.to_path_buf());
    let path = file(data_dir);
    let dir = path.parent().expect("a file under a directory");
    std::fs::create_dir_all(dir)?;
    let mut text = String::new();
    for r in &repos {
        let Some(s) = r.to_str() else { continue };
        if s.contains('\n') {
            continue;
        }
        text.push_str(s);
        text.push('\n');
    }
    let tmp = dir.join(format!(".repositories.{}", std::process::id()));
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, &path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repositories_are_listed_once_in_order() {
        let data = tempfile::tempdir().unwrap();
        assert!(list(data.path()).is_empty());
        add(data.path(), Path::new("/a")).unwrap();
        add(data.path(), Path::new("/b")).unwrap();
        add(data.path(), Path::new("/a")).unwrap();
        assert_eq!(
            list(data.path()),
            vec![PathBuf::from("/a"), PathBuf::from("/b")]
        );
    }
}
