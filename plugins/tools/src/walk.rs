//! The directory walk every search tool uses, with `.gitignore` and `.ignore` files applied by
//! the `ignore` crate's matcher.
//!
//! The rules are those of ripgrep with `--hidden --no-require-git`: hidden files are searched,
//! `.gitignore` files apply whether or not the tree is a git repository (those of the directories
//! above the root too), `.ignore` files take precedence over them, a nearer file over a farther
//! one, `.git` itself is skipped and symlinks are not followed. Entries come depth-first, sorted
//! by name within each directory.
//!
//! Inside the sandbox, directories are listed through `wasi:filesystem` directly: the C
//! library's `readdir` asks the host for a hash of every entry's metadata (an inode number
//! nobody here reads), a stat per entry that doubled the cost of walking a tree.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};

/// What a directory entry is, as its directory says (symlinks are not followed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Symlink,
    /// A FIFO, socket, device, or something the filesystem does not say.
    Other,
}

/// The ignore files of one directory.
///
/// Their rules are built relative to `.` and given paths relative to the directory, cut from
/// the walk's paths by length: the matcher's own cut compares paths component by component
/// outside Unix, which was a fifth of a walk's time inside the sandbox.
struct Level {
    /// The length of the directory's path, in bytes.
    dir_len: usize,
    ignore: Option<Rc<Gitignore>>,
    gitignore: Option<Rc<Gitignore>>,
}

impl Level {
    /// The rules of `dir`, given which of the two files it holds.
    fn read(
        fs: &Fs,
        dir: &Path,
        has_ignore: bool,
        has_gitignore: bool,
        built: &mut Built,
    ) -> Level {
        Level {
            dir_len: dir.as_os_str().len(),
            ignore: has_ignore
                .then(|| built.rules(fs, &dir.join(".ignore")))
                .flatten(),
            gitignore: has_gitignore
                .then(|| built.rules(fs, &dir.join(".gitignore")))
                .flatten(),
        }
    }

    fn is_empty(&self) -> bool {
        self.ignore.is_none() && self.gitignore.is_none()
    }
}

/// The ignore files already built in one walk, by their contents. Many directories of a tree
/// hold the same file (each vendored crate's `/target`), and building the rules is most of
/// what a directory with one costs. Since rules are built relative to `.`, the same contents
/// give the same rules in any directory.
#[derive(Default)]
struct Built(HashMap<Vec<u8>, Option<Rc<Gitignore>>>);

impl Built {
    /// Files larger than this are built each time, read as they are parsed. (A project's own
    /// ignore files are a few hundred bytes; the cap bounds what the cache holds.)
    const LARGEST: u64 = 8 << 10;
    /// At most this many are kept: a hostile tree can hold as many different files as it
    /// likes, and each set of rules is kept only while the walk is below its directory.
    const MOST: usize = 256;

    /// The rules of the ignore file `file`; `None` if it has none.
    fn rules(&mut self, fs: &Fs, file: &Path) -> Option<Rc<Gitignore>> {
        let mut text = Vec::new();
        let read = fs
            .open(file)
            .and_then(|f| f.take(Self::LARGEST + 1).read_to_end(&mut text));
        if read.is_err() || text.len() as u64 > Self::LARGEST {
            // A file that cannot be read or holds a bad line still gives the rest of its
            // rules, as in ripgrep.
            let mut b = GitignoreBuilder::new(".");
            let _ = b.add(file);
            return b.build().ok().filter(|g| !g.is_empty()).map(Rc::new);
        }
        if let Some(rules) = self.0.get(&text) {
            return rules.clone();
        }
        let rules = parse(&text);
        if self.0.len() < Self::MOST {
            self.0.insert(text, rules.clone());
        }
        rules
    }
}

/// The rules in the text of an ignore file, read as `GitignoreBuilder::add` reads a file: line
/// by line, a byte-order mark before the first ignored, up to the first line that is not
/// UTF-8, and every good line kept when another is bad.
fn parse(text: &[u8]) -> Option<Rc<Gitignore>> {
    let mut b = GitignoreBuilder::new(".");
    let text = text.strip_suffix(b"\n").unwrap_or(text);
    for (i, line) in text.split(|&c| c == b'\n').enumerate() {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Ok(line) = std::str::from_utf8(line) else {
            break;
        };
        let line = if i == 0 {
            line.trim_start_matches('\u{feff}')
        } else {
            line
        };
        let _ = b.add_line(None, line);
    }
    b.build().ok().filter(|g| !g.is_empty()).map(Rc::new)
}

/// Whether `path` is ignored by the rules of `levels` (outermost first).
fn ignored(levels: &[Level], path: &Path, is_dir: bool) -> bool {
    let (mut by_ignore, mut by_gitignore) = (Match::None, Match::None);
    for level in levels.iter().rev() {
        let rel = below(path, level.dir_len);
        if by_ignore.is_none()
            && let Some(g) = &level.ignore
        {
            by_ignore = g.matched(rel, is_dir);
        }
        if by_gitignore.is_none()
            && let Some(g) = &level.gitignore
        {
            by_gitignore = g.matched(rel, is_dir);
        }
        if !by_ignore.is_none() {
            break;
        }
    }
    if by_ignore.is_none() {
        by_gitignore.is_ignore()
    } else {
        by_ignore.is_ignore()
    }
}

/// The part of `path` below the directory whose path is its first `dir_len` bytes, without the
/// separator: what `path.strip_prefix(dir)` gives for a path the walk built from `dir`, cut by
/// length rather than compared component by component.
pub fn below(path: &Path, dir_len: usize) -> &Path {
    let bytes = path.as_os_str().as_encoded_bytes();
    let cut = if dir_len == 0 {
        0
    } else if bytes.get(dir_len) == Some(&b'/') {
        dir_len + 1
    } else if bytes.get(dir_len - 1) == Some(&b'/') {
        dir_len
    } else {
        return path;
    };
    // SAFETY: `cut` is 0 or just after a `/`, and the encoding allows a split right after an
    // ASCII character (see `OsStr::from_encoded_bytes_unchecked`).
    Path::new(unsafe { OsStr::from_encoded_bytes_unchecked(&bytes[cut..]) })
}

/// Directories below the root the walk descends into at most: far deeper than any source tree,
/// and it keeps a hostile one from exhausting the plugin's stack.
pub const MAX_DEPTH: usize = 256;

/// Visit every entry below the directory `root` that no ignore file excludes, with its path
/// (`root` joined with the names below it) and kind. `visit` returns false to end the walk.
/// Directories that cannot be listed are skipped, and so is what lies below [`MAX_DEPTH`].
pub fn walk(fs: &Fs, root: &Path, mut visit: impl FnMut(&Path, Kind) -> bool) {
    // The rules of the directories above the root apply below it too.
    let mut levels: Vec<Level> = Vec::new();
    let mut built = Built::default();
    let ancestors: Vec<&Path> = root.ancestors().skip(1).collect();
    for dir in ancestors.into_iter().rev() {
        let level = Level::read(
            fs,
            dir,
            dir.join(".ignore").is_file(),
            dir.join(".gitignore").is_file(),
            &mut built,
        );
        if !level.is_empty() {
            levels.push(level);
        }
    }
    let mut path = root.to_path_buf();
    let _ = descend(fs, &mut path, 0, &mut levels, &mut built, &mut visit);
}

/// Walk the directory at `path`; false once `visit` has asked to stop.
fn descend(
    fs: &Fs,
    path: &mut PathBuf,
    depth: usize,
    levels: &mut Vec<Level>,
    built: &mut Built,
    visit: &mut impl FnMut(&Path, Kind) -> bool,
) -> bool {
    let Ok(mut entries) = fs.list(path) else {
        return true;
    };
    entries.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    let has = |name: &str| entries.iter().any(|(n, k)| n == name && *k == Kind::File);
    let level = Level::read(fs, path, has(".ignore"), has(".gitignore"), built);
    let pushed = !level.is_empty();
    if pushed {
        levels.push(level);
    }
    let mut go_on = true;
    for (name, kind) in &entries {
        if name == ".git" {
            continue;
        }
        let len = path.as_os_str().len();
        path.push(OsStr::new(name));
        if !ignored(levels, path, *kind == Kind::Dir) {
            go_on = visit(path, *kind)
                && (*kind != Kind::Dir
                    || depth >= MAX_DEPTH
                    || descend(fs, path, depth + 1, levels, built, visit));
        }
        cut_back(path, len);
        if !go_on {
            break;
        }
    }
    if pushed {
        levels.pop();
    }
    go_on
}

/// Cut `path` back to its first `len` bytes, the length it had before a name was pushed: what
/// `PathBuf::pop` does, without parsing the path's components again (outside Unix that parse
/// was a tenth of a walk's time).
fn cut_back(path: &mut PathBuf, len: usize) {
    let mut bytes = std::mem::take(path).into_os_string().into_encoded_bytes();
    bytes.truncate(len);
    // SAFETY: the cut is where a name was pushed: right before the `/` added ahead of it, or
    // right before the name itself, which is UTF-8; the encoding allows a split at either.
    *path = PathBuf::from(unsafe { std::ffi::OsString::from_encoded_bytes_unchecked(bytes) });
}

pub use sys::{File, Fs};

/// What an open file is.
#[derive(Debug, Clone, Copy)]
pub struct Meta {
    pub is_dir: bool,
    pub len: u64,
}

#[cfg(target_os = "wasi")]
mod sys {
    //! Listing and reading through `wasi:filesystem`, from the preopened directory that holds
    //! the path.

    use std::io;
    use std::path::Path;

    use wasip2::filesystem::types::{
        Descriptor, DescriptorFlags, DescriptorType, ErrorCode, OpenFlags, PathFlags,
    };

    use super::{Kind, Meta};

    /// A file open for reading, read at an offset it keeps: no C library descriptor, so opening
    /// costs one call to the host and reading one per block. The host says when a read reached
    /// the end of the file, so a small file read whole takes one read and no stat; once its
    /// size has been asked for, the file is read up to that size only.
    pub struct File {
        file: Descriptor,
        offset: u64,
        /// What the file was when first asked.
        meta: Option<Meta>,
        /// Whether a read reached the end.
        ended: bool,
        /// The last block read from the host; what is not taken yet starts at `ahead_at`.
        ahead: Vec<u8>,
        ahead_at: usize,
    }

    impl File {
        /// What the file was when first asked.
        pub fn metadata(&mut self) -> io::Result<Meta> {
            if let Some(meta) = self.meta {
                return Ok(meta);
            }
            let stat = self.file.stat().map_err(error)?;
            let meta = Meta {
                is_dir: stat.type_ == DescriptorType::Directory,
                len: stat.size,
            };
            self.meta = Some(meta);
            Ok(meta)
        }

        /// The next block of at most `max` bytes, as the host hands it over; empty at the end.
        pub fn read_block(&mut self, max: usize) -> io::Result<&[u8]> {
            // What an earlier read left comes first.
            if self.ahead_at == self.ahead.len() {
                self.ahead = self.read_at_most(max)?;
                self.ahead_at = 0;
            }
            let start = self.ahead_at;
            self.ahead_at += max.min(self.ahead.len() - start);
            Ok(&self.ahead[start..self.ahead_at])
        }

        fn read_at_most(&mut self, max: usize) -> io::Result<Vec<u8>> {
            let mut want = u64::try_from(max).unwrap_or(u64::MAX);
            if let Some(meta) = self.meta {
                want = want.min(meta.len.saturating_sub(self.offset));
            }
            if want == 0 || self.ended {
                return Ok(Vec::new());
            }
            let (data, end) = self.file.read(want, self.offset).map_err(error)?;
            self.ended = end || data.is_empty();
            self.offset += data.len() as u64;
            Ok(data)
        }
    }

    /// What a small read asks the host for: the rest is kept for the next reads. (A search
    /// first reads three bytes, to look for a byte-order mark; without this, each file cost a
    /// second read from the host.)
    const READ_AHEAD: usize = 64 << 10;

    impl io::Read for File {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.ahead_at == self.ahead.len() {
                if buf.len() >= READ_AHEAD {
                    let data = self.read_at_most(buf.len())?;
                    buf[..data.len()].copy_from_slice(&data);
                    return Ok(data.len());
                }
                self.ahead = self.read_at_most(READ_AHEAD)?;
                self.ahead_at = 0;
            }
            let n = buf.len().min(self.ahead.len() - self.ahead_at);
            buf[..n].copy_from_slice(&self.ahead[self.ahead_at..self.ahead_at + n]);
            self.ahead_at += n;
            Ok(n)
        }
    }

    /// The directories the call was granted, as the host preopened them.
    pub struct Fs {
        preopens: Vec<(Descriptor, String)>,
    }

    impl Fs {
        pub fn new() -> Fs {
            Fs {
                preopens: wasip2::filesystem::preopens::get_directories(),
            }
        }
    }

    impl Default for Fs {
        fn default() -> Fs {
            Fs::new()
        }
    }

    impl Fs {
        /// Open the regular file at `path` for reading.
        pub fn open(&self, path: &Path) -> io::Result<File> {
            let (base, rel) = self.preopen_of(path)?;
            let file = base
                .open_at(
                    PathFlags::SYMLINK_FOLLOW,
                    rel,
                    OpenFlags::empty(),
                    DescriptorFlags::READ,
                )
                .map_err(error)?;
            Ok(File {
                file,
                offset: 0,
                meta: None,
                ended: false,
                ahead: Vec::new(),
                ahead_at: 0,
            })
        }

        /// The entries of the directory `dir`, with their kinds, in no particular order.
        pub fn list(&self, dir: &Path) -> io::Result<Vec<(String, Kind)>> {
            let (base, rel) = self.preopen_of(dir)?;
            let opened;
            let dir = if rel.is_empty() {
                base
            } else {
                opened = base
                    .open_at(
                        PathFlags::SYMLINK_FOLLOW,
                        rel,
                        OpenFlags::DIRECTORY,
                        DescriptorFlags::READ,
                    )
                    .map_err(error)?;
                &opened
            };
            let stream = dir.read_directory().map_err(error)?;
            let mut entries = Vec::new();
            while let Some(e) = stream.read_directory_entry().map_err(error)? {
                let kind = match e.type_ {
                    DescriptorType::RegularFile => Kind::File,
                    DescriptorType::Directory => Kind::Dir,
                    DescriptorType::SymbolicLink => Kind::Symlink,
                    _ => Kind::Other,
                };
                entries.push((e.name, kind));
            }
            Ok(entries)
        }

        /// The preopened directory that holds `path` (the deepest, as the C library picks),
        /// and the rest of the path below it.
        fn preopen_of<'a>(&self, path: &'a Path) -> io::Result<(&Descriptor, &'a str)> {
            let text = path
                .to_str()
                .ok_or_else(|| error(ErrorCode::IllegalByteSequence))?;
            self.preopens
                .iter()
                .filter_map(|(d, at)| {
                    let rest = text.strip_prefix(at.trim_end_matches('/'))?;
                    if rest.is_empty() {
                        Some((d, at.len(), ""))
                    } else {
                        rest.strip_prefix('/')
                            .map(|r| (d, at.len(), r.trim_start_matches('/')))
                    }
                })
                .max_by_key(|(_, len, _)| *len)
                .map(|(d, _, rest)| (d, rest))
                .ok_or_else(|| error(ErrorCode::NotPermitted))
        }
    }

    fn error(code: ErrorCode) -> io::Error {
        let kind = match code {
            ErrorCode::NoEntry => io::ErrorKind::NotFound,
            ErrorCode::Access | ErrorCode::NotPermitted => io::ErrorKind::PermissionDenied,
            ErrorCode::NotDirectory => io::ErrorKind::NotADirectory,
            ErrorCode::IsDirectory => io::ErrorKind::IsADirectory,
            // The host refuses to open FIFOs, sockets and devices with this code.
            ErrorCode::Unsupported => io::ErrorKind::Unsupported,
            _ => io::ErrorKind::Other,
        };
        io::Error::new(kind, format!("{code:?}"))
    }
}

#[cfg(not(target_os = "wasi"))]
mod sys {
    //! Listing through `std::fs`, for the native build the benchmarks compare with.

    use std::io;
    use std::path::Path;

    use super::{Kind, Meta};

    /// The filesystem as this process sees it.
    #[derive(Default)]
    pub struct Fs;

    /// A file open for reading, and the buffer its blocks are read into.
    pub struct File(std::fs::File, Vec<u8>);

    impl File {
        /// What the file is now.
        pub fn metadata(&self) -> io::Result<Meta> {
            let m = self.0.metadata()?;
            Ok(Meta {
                is_dir: m.is_dir(),
                len: m.len(),
            })
        }

        /// The next block of at most `max` bytes; empty at the end.
        pub fn read_block(&mut self, max: usize) -> io::Result<&[u8]> {
            let mut buf = std::mem::take(&mut self.1);
            buf.resize(max, 0);
            let n = io::Read::read(self, &mut buf);
            self.1 = buf;
            Ok(&self.1[..n?])
        }
    }

    impl io::Read for File {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            loop {
                match self.0.read(buf) {
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    other => return other,
                }
            }
        }
    }

    impl Fs {
        pub fn new() -> Fs {
            Fs
        }

        /// Open the file at `path` for reading.
        pub fn open(&self, path: &Path) -> io::Result<File> {
            Ok(File(std::fs::File::open(path)?, Vec::new()))
        }

        /// The entries of the directory `dir`, with their kinds, in no particular order.
        pub fn list(&self, dir: &Path) -> io::Result<Vec<(String, Kind)>> {
            let mut entries = Vec::new();
            for e in std::fs::read_dir(dir)? {
                let e = e?;
                let Ok(name) = e.file_name().into_string() else {
                    continue;
                };
                let t = e.file_type()?;
                let kind = if t.is_file() {
                    Kind::File
                } else if t.is_dir() {
                    Kind::Dir
                } else if t.is_symlink() {
                    Kind::Symlink
                } else {
                    Kind::Other
                };
                entries.push((name, kind));
            }
            Ok(entries)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rules built from an ignore file's text in memory are those `GitignoreBuilder::add` builds
    /// from the file: byte-order mark, CRLF, comments, negations, directories only, escapes, a
    /// bad pattern among good ones, a line that is not UTF-8 and what follows it.
    #[test]
    fn rules_from_text_are_the_rules_from_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let texts: [&[u8]; 6] = [
            b"\xef\xbb\xbf/target\r\n*.log\r\n!keep.log\r\n# c\r\nbuild/\r\n",
            b"a\\#b\n\\!x\n  spaced  \ntrail\\ \n**/deep/**\n[\nz{a,b}\n",
            b"first\n\xff\xfe bad\nafter\n",
            b"no-newline-at-end",
            b"",
            b"\n\n*.rs\n!main.rs\nsrc/**/gen\n",
        ];
        let paths = [
            ("target", true),
            ("x.log", false),
            ("keep.log", false),
            ("build", true),
            ("build", false),
            ("a#b", false),
            ("!x", false),
            ("spaced", false),
            ("trail ", false),
            ("q/deep/r/s", false),
            ("[", false),
            ("za", false),
            ("first", false),
            ("after", false),
            ("no-newline-at-end", false),
            ("lib.rs", false),
            ("main.rs", false),
            ("src/a/gen", true),
        ];
        for (i, text) in texts.iter().enumerate() {
            let file = dir.path().join(format!("ignore{i}"));
            std::fs::write(&file, text).unwrap();
            let mut b = GitignoreBuilder::new(".");
            let _ = b.add(&file);
            let from_file = b.build().unwrap();
            let from_text = parse(text);
            for (path, is_dir) in paths {
                let want = from_file.matched(path, is_dir);
                let got = from_text
                    .as_ref()
                    .map_or(Match::None, |g| g.matched(path, is_dir));
                assert_eq!(
                    (want.is_ignore(), want.is_whitelist()),
                    (got.is_ignore(), got.is_whitelist()),
                    "{path:?} under {:?}",
                    String::from_utf8_lossy(text)
                );
            }
        }
    }

    /// A tree with more different ignore files than the cache keeps (a hostile one can hold any
    /// number): the cache stops at its bound, and every file still gives its rules.
    #[test]
    fn the_cache_of_built_rules_is_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let fs = Fs::new();
        let mut built = Built::default();
        for i in 0..Built::MOST + 50 {
            let file = dir.path().join(format!("ignore{i}"));
            std::fs::write(&file, format!("only{i}\n")).unwrap();
            let rules = built.rules(&fs, &file).unwrap();
            assert!(rules.matched(format!("only{i}"), false).is_ignore());
            assert!(built.0.len() <= Built::MOST);
        }
        assert_eq!(built.0.len(), Built::MOST);
    }

    /// The same contents are built once per walk; a file too large to keep is still read.
    #[test]
    fn ignore_files_are_built_once_by_contents() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b, big) = (
            dir.path().join("a"),
            dir.path().join("b"),
            dir.path().join("big"),
        );
        std::fs::write(&a, "/target\n").unwrap();
        std::fs::write(&b, "/target\n").unwrap();
        let mut text = "#\n".repeat(5_000);
        text.push_str("huge\n");
        std::fs::write(&big, text).unwrap();
        let mut built = Built::default();
        let fs = Fs::new();
        let (ra, rb) = (built.rules(&fs, &a).unwrap(), built.rules(&fs, &b).unwrap());
        assert!(Rc::ptr_eq(&ra, &rb));
        assert!(ra.matched("target", true).is_ignore());
        let rbig = built.rules(&fs, &big).unwrap();
        assert!(rbig.matched("huge", false).is_ignore());
        assert_eq!(built.0.len(), 1);
    }

    #[test]
    fn below_is_strip_prefix_for_paths_the_walk_builds() {
        for (dir, path) in [
            ("/w/proj", "/w/proj/src/main.rs"),
            ("/w/proj/", "/w/proj/src/main.rs"),
            ("/", "/w/été/x"),
            ("/w/été", "/w/été/ü.rs"),
            ("", "a/b"),
            ("a", "a/.gitignore"),
        ] {
            let (dir, path) = (Path::new(dir), Path::new(path));
            assert_eq!(
                below(path, dir.as_os_str().len()),
                path.strip_prefix(dir).unwrap(),
                "{path:?} below {dir:?}"
            );
        }
    }

    fn collect(root: &Path) -> Vec<String> {
        let mut out = Vec::new();
        walk(&Fs::new(), root, |p, k| {
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            out.push(if k == Kind::Dir {
                format!("{rel}/")
            } else {
                rel
            });
            true
        });
        out
    }

    fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (name, body) in files {
            let p = dir.path().join(name);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, body).unwrap();
        }
        dir
    }

    #[test]
    fn depth_first_sorted_with_hidden_files_and_without_git() {
        let d = tree(&[
            ("b.txt", ""),
            ("a/z.rs", ""),
            ("a/y/x.rs", ""),
            (".hidden", ""),
            (".git/config", ""),
        ]);
        let root = d.path().canonicalize().unwrap();
        assert_eq!(
            collect(&root),
            [".hidden", "a/", "a/y/", "a/y/x.rs", "a/z.rs", "b.txt"]
        );
    }

    #[test]
    fn ignore_files_nearer_win_and_dot_ignore_beats_gitignore() {
        let d = tree(&[
            (".gitignore", "*.log\nbuild/\n"),
            ("keep.log", ""),
            ("sub/.gitignore", "!keep.log\n"),
            ("sub/keep.log", ""),
            ("sub/other.log", ""),
            ("build/out.rs", ""),
            (".ignore", "secret.txt\n"),
            ("secret.txt", ""),
            ("two/.gitignore", "!secret.txt\n"),
            ("two/secret.txt", ""),
            ("three/.ignore", "!*.log\n"),
            ("three/a.log", ""),
        ]);
        let root = d.path().canonicalize().unwrap();
        let got = collect(&root);
        let want = [
            ".gitignore",
            ".ignore",
            "sub/",
            "sub/.gitignore",
            "sub/keep.log",
            "three/",
            "three/.ignore",
            "three/a.log",
            "two/",
            "two/.gitignore",
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn a_tree_deeper_than_the_limit_is_walked_to_the_limit() {
        let d = tempfile::tempdir().unwrap();
        let mut deep = d.path().canonicalize().unwrap();
        for _ in 0..MAX_DEPTH + 10 {
            deep.push("d");
        }
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::write(deep.join("f"), "").unwrap();
        let dirs = collect(&d.path().canonicalize().unwrap());
        assert_eq!(
            dirs.len(),
            MAX_DEPTH + 1,
            "the root's child and MAX_DEPTH below it"
        );
    }

    #[test]
    fn rules_above_the_root_apply_and_the_walk_can_stop() {
        let d = tree(&[
            (".gitignore", "*.tmp\n"),
            ("src/a.tmp", ""),
            ("src/b.rs", ""),
        ]);
        let src = d.path().canonicalize().unwrap().join("src");
        assert_eq!(collect(&src), ["b.rs"]);
        let mut seen = 0;
        walk(&Fs::new(), &d.path().canonicalize().unwrap(), |_, _| {
            seen += 1;
            false
        });
        assert_eq!(seen, 1);
    }
}
