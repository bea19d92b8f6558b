//! What is on disk now, cheaply: the files a sync considers, each with a stat stamp (size,
//! modification and change times, inode), so only files whose stamp moved are read again.
//!
//! A full walk reads every directory and applies `.gitignore`; it also records the stamps of the
//! directories it entered and of the ignore files it read. When none of those moved, no entry was
//! added, removed or renamed anywhere below, and no ignore rule changed, so the files are the
//! ones listed last time and only they are stat'ed (in parallel), with no directory read.
//!
//! Stamps are trusted only once they are older than the moment the listing began, less a margin
//! for coarse file system clocks: a file written in the same clock tick as it was seen could
//! change again without its stamp moving, so it is read again next time instead.

use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::config::KnowledgeConfig;

/// Deepest directory walked; deeper trees are not indexed below it.
const MAX_DEPTH: usize = 64;

/// How far back from the listing's start a stamp must be to be trusted: more than any file
/// system's timestamp granularity (FAT's is two seconds) and the lag of the kernel's coarse clock.
const SETTLE: Duration = Duration::from_secs(2);

/// Files stat'ed on one thread; longer lists are shared between threads.
const STATS_PER_THREAD: usize = 2048;

/// A modification time no stat gives: a stamp stored with it never matches, so its file is read
/// again.
pub const UNSETTLED: i64 = i64::MIN;

/// What a stat says about a file, enough to tell that it changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    pub size: i64,
    /// Nanoseconds since the epoch.
    pub mtime: i64,
    /// Nanoseconds since the epoch: moves on every write and on every change of metadata, and
    /// cannot be set back as the modification time can.
    pub ctime: i64,
    pub inode: i64,
}

impl Stamp {
    #[cfg(unix)]
    fn of(m: &std::fs::Metadata) -> Stamp {
        use std::os::unix::fs::MetadataExt;
        let ns = |s: i64, n: i64| s.saturating_mul(1_000_000_000).saturating_add(n);
        Stamp {
            size: m.size() as i64,
            mtime: ns(m.mtime(), m.mtime_nsec()),
            ctime: ns(m.ctime(), m.ctime_nsec()),
            inode: m.ino() as i64,
        }
    }

    #[cfg(unix)]
    #[allow(
        clippy::unnecessary_cast,
        reason = "the field types of `struct stat` differ between architectures"
    )]
    fn of_stat(st: &rustix::fs::Stat) -> Stamp {
        let ns = |s: i64, n: i64| s.saturating_mul(1_000_000_000).saturating_add(n);
        Stamp {
            size: st.st_size as i64,
            mtime: ns(st.st_mtime as i64, st.st_mtime_nsec as i64),
            ctime: ns(st.st_ctime as i64, st.st_ctime_nsec as i64),
            inode: st.st_ino as i64,
        }
    }

    #[cfg(not(unix))]
    fn of(m: &std::fs::Metadata) -> Stamp {
        let ns = |t: std::io::Result<SystemTime>| {
            t.ok()
                .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_nanos() as i64)
        };
        Stamp {
            size: m.len() as i64,
            mtime: ns(m.modified()),
            ctime: ns(m.created()),
            inode: 0,
        }
    }

    /// The stamp to store: itself when it is older than `since` by [`SETTLE`], else one that
    /// never matches.
    pub fn settled(self, since: i64) -> Stamp {
        let margin = SETTLE.as_nanos() as i64;
        if self.mtime.max(self.ctime) >= since.saturating_sub(margin) {
            Stamp {
                mtime: UNSETTLED,
                ..self
            }
        } else {
            self
        }
    }
}

/// Now, in nanoseconds since the epoch, to compare with stamps.
pub fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

/// A full walk's result.
pub struct Walked {
    /// The selected files, relative and `/`-separated, sorted by bytes, with their stamps (`None` when the
    /// file went away or stopped being a regular file since the directory was read).
    pub files: Vec<(String, Option<Stamp>)>,
    /// The directories entered and the ignore files that exist, with their stamps.
    pub watched: Vec<(String, Stamp)>,
}

/// The files under `root` that `config` selects, with stamps, sorted by path. The walk respects `.gitignore`,
/// follows no symlink, skips hidden entries, `.git/` and `.rawko/`, and stops at [`MAX_DEPTH`].
pub fn walk(root: &Path, config: &KnowledgeConfig) -> Walked {
    let mut files = Vec::new();
    let mut dirs: Vec<String> = Vec::new();
    let walker = ignore::WalkBuilder::new(root)
        .hidden(true)
        .git_ignore(true)
        .git_exclude(true)
        .git_global(false)
        .parents(false)
        .require_git(false)
        .ignore(true)
        .follow_links(false)
        .max_depth(Some(MAX_DEPTH))
        .sort_by_file_name(|a, b| a.cmp(b))
        .build();
    for entry in walker {
        let Ok(entry) = entry else { continue };
        let Some(kind) = entry.file_type() else {
            continue;
        };
        let Ok(rel) = entry.path().strip_prefix(root) else {
            continue;
        };
        let Some(rel) = rel.to_str() else { continue };
        let rel = rel.replace(std::path::MAIN_SEPARATOR, "/");
        if rel == ".git"
            || rel == ".rawko"
            || rel.starts_with(".git/")
            || rel.starts_with(".rawko/")
        {
            continue;
        }
        if kind.is_dir() {
            dirs.push(rel);
        } else if kind.is_file() && config.selects(&rel) {
            files.push(rel);
        }
    }
    // What decides the listing besides the directories themselves: the ignore files they hold,
    // and the repository's own excludes. One that does not exist yet changes its directory when
    // it is created.
    let mut candidates: Vec<String> = Vec::with_capacity(dirs.len() * 3 + 3);
    for d in &dirs {
        candidates.push(d.clone());
        for name in [".gitignore", ".ignore"] {
            candidates.push(join(d, name));
        }
    }
    let git = root.join(".git");
    if git.join("info/exclude").is_file() {
        candidates.extend([".git/info".to_string(), ".git/info/exclude".to_string()]);
    } else if git.join("info").is_dir() {
        candidates.push(".git/info".to_string());
    } else if git.is_dir() {
        candidates.push(".git".to_string());
    }
    let stamps = stat_all(root, &candidates, Want::FileOrDir);
    let watched = candidates
        .into_iter()
        .zip(stamps)
        .filter_map(|(p, s)| Some((p, s?)))
        .collect();
    // Sorted as the index keeps them (the walk's order puts `a/b/x` before `a/b.rs`).
    files.sort_unstable();
    let stamps = stat_all(root, &files, Want::File);
    Walked {
        files: files.into_iter().zip(stamps).collect(),
        watched,
    }
}

fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

/// Whether every entry of `watched` still has its stamp: then no directory gained, lost or
/// renamed an entry and no ignore rule changed since the walk that recorded them.
pub fn unchanged(root: &Path, watched: &[(String, Stamp)]) -> bool {
    let paths: Vec<&str> = watched.iter().map(|(p, _)| p.as_str()).collect();
    let now = stat_all(root, &paths, Want::FileOrDir);
    !watched.is_empty()
        && watched
            .iter()
            .zip(now)
            .all(|((_, then), now)| now == Some(*then))
}

/// What a stat must find for a stamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Want {
    File,
    FileOrDir,
}

/// The stamp of each of `rels` under `root` (not following symlinks), `None` where there is
/// nothing of the kind wanted. Long lists are stat'ed on several threads.
pub fn stat_all<S: AsRef<str> + Sync>(root: &Path, rels: &[S], want: Want) -> Vec<Option<Stamp>> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(rels.len().div_ceil(STATS_PER_THREAD))
        .min(8);
    let mut out = vec![None; rels.len()];
    if threads < 2 {
        stat_part(root, rels, want, &mut out);
        return out;
    }
    // Each thread fills its own share of one buffer, so nothing is copied after; this thread
    // takes the first share.
    let per = rels.len().div_ceil(threads);
    let failed: Vec<usize> = std::thread::scope(|s| {
        let mut parts = rels.chunks(per).zip(out.chunks_mut(per));
        let first = parts.next();
        let others: Vec<_> = parts
            .map(|(part, into)| s.spawn(move || stat_part(root, part, want, into)))
            .collect();
        if let Some((part, into)) = first {
            stat_part(root, part, want, into);
        }
        others
            .into_iter()
            .enumerate()
            .filter_map(|(i, handle)| handle.join().is_err().then_some(i + 1))
            .collect()
    });
    // A thread that died stat'ed nothing: do its share here.
    for i in failed {
        let range = i * per..((i + 1) * per).min(rels.len());
        stat_part(root, &rels[range.clone()], want, &mut out[range]);
    }
    out
}

/// [`stat_all`] on this thread, into `out` (as long as `rels`). Each directory is opened once
/// (a path descriptor) and its files stat'ed by name, so the kernel resolves one component per
/// file, not the whole path.
#[cfg(unix)]
fn stat_part<S: AsRef<str>>(root: &Path, rels: &[S], want: Want, out: &mut [Option<Stamp>]) {
    use rustix::fs::{AtFlags, FileType, Mode, OFlags};
    let mut dir: Option<(&str, Option<rustix::fd::OwnedFd>)> = None;
    for (rel, out) in rels.iter().zip(out) {
        let rel = rel.as_ref();
        let (parent, name) = rel.rsplit_once('/').unwrap_or(("", rel));
        if name.is_empty() {
            *out = stat_path(&root.join(rel), want);
            continue;
        }
        if dir.as_ref().is_none_or(|(d, _)| *d != parent) {
            let fd = rustix::fs::open(
                root.join(parent),
                OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .ok();
            dir = Some((parent, fd));
        }
        let stamp = dir
            .as_ref()
            .and_then(|(_, fd)| fd.as_ref())
            .and_then(|fd| rustix::fs::statat(fd, name, AtFlags::SYMLINK_NOFOLLOW).ok())
            .filter(|st| {
                let kind = FileType::from_raw_mode(st.st_mode);
                kind.is_file() || (want == Want::FileOrDir && kind.is_dir())
            })
            .map(|st| Stamp::of_stat(&st));
        *out = stamp;
    }
}

#[cfg(not(unix))]
fn stat_part<S: AsRef<str>>(root: &Path, rels: &[S], want: Want, out: &mut [Option<Stamp>]) {
    for (rel, out) in rels.iter().zip(out) {
        *out = stat_path(&root.join(rel.as_ref()), want);
    }
}

fn stat_path(path: &Path, want: Want) -> Option<Stamp> {
    std::fs::symlink_metadata(path)
        .ok()
        .filter(|m| m.is_file() || (want == Want::FileOrDir && m.is_dir()))
        .map(|m| Stamp::of(&m))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stamp_is_trusted_only_once_it_is_older_than_the_listing_by_the_margin() {
        let s = Stamp {
            size: 3,
            mtime: 10_000_000_000,
            ctime: 10_000_000_000,
            inode: 7,
        };
        assert_eq!(s.settled(13_000_000_000), s);
        assert_eq!(s.settled(12_000_000_000).mtime, UNSETTLED);
        // A change time close to the listing is enough to distrust it.
        let late = Stamp {
            ctime: 11_500_000_000,
            ..s
        };
        assert_eq!(late.settled(13_000_000_000).mtime, UNSETTLED);
        assert_ne!(late.settled(13_000_000_000), late);
    }

    #[test]
    fn a_walk_watches_its_directories_and_ignore_files_and_sees_them_move() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::write(root.join("a/b/x.md"), "x").unwrap();
        std::fs::write(root.join("a/.gitignore"), "gen/\n").unwrap();
        std::fs::write(root.join("a/y.bin"), "y").unwrap();
        let w = walk(root, &KnowledgeConfig::defaults());
        let files: Vec<&str> = w.files.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(files, ["a/b/x.md"]);
        assert!(w.files[0].1.is_some());
        let watched: Vec<&str> = w.watched.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(watched, ["", "a", "a/.gitignore", "a/b"]);
        assert!(unchanged(root, &w.watched));
        // A new file deep down changes its directory; an edited ignore file changes itself.
        // (Past a tick of the file system's clock: within one, only `settled` protects.)
        let tick = || std::thread::sleep(Duration::from_millis(50));
        tick();
        std::fs::write(root.join("a/b/z.md"), "z").unwrap();
        assert!(!unchanged(root, &w.watched));
        let w = walk(root, &KnowledgeConfig::defaults());
        tick();
        std::fs::write(root.join("a/.gitignore"), "gem/\n").unwrap();
        assert!(!unchanged(root, &w.watched));
        assert!(!unchanged(root, &[]));
    }

    #[test]
    fn long_lists_are_stated_in_parallel_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let rels: Vec<String> = (0..5000).map(|i| format!("f{i}")).collect();
        for r in rels.iter().step_by(2) {
            std::fs::write(dir.path().join(r), r).unwrap();
        }
        let stamps = stat_all(dir.path(), &rels, Want::File);
        assert_eq!(stamps.len(), rels.len());
        for (i, (r, s)) in rels.iter().zip(&stamps).enumerate() {
            assert_eq!(s.is_some(), i % 2 == 0, "{r}");
            if let Some(s) = s {
                assert_eq!(s.size as usize, r.len());
            }
        }
    }
}
