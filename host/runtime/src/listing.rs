//! Directory listings for `wasi:filesystem`, typed from the directory entries themselves.
//!
//! wasmtime-wasi's `read-directory` stats every entry to learn its type, one system call per
//! entry for what the kernel's `getdents` already says; walking a source tree (Glob, Grep, LS)
//! lists tens of thousands of entries. This replaces `read-directory` and the
//! `directory-entry-stream` resource with a listing that takes the type from the entry and
//! stats only where the filesystem does not say (`DT_UNKNOWN`). It reads the directory
//! through the same descriptor as wasmtime-wasi and returns the same entries and types: it
//! changes the cost, not what a plugin may see.

use std::collections::HashSet;

use wasmtime::StoreContextMut;
use wasmtime::component::{Linker, Resource, ResourceTable, ResourceType};
use wasmtime_wasi::filesystem::Descriptor;
use wasmtime_wasi::p2::bindings::filesystem::types::{self as wt, DescriptorType, ErrorCode};

use crate::filesystem::{errno, replace_filesystem_types};

/// One call's listings: the handles of the directory descriptors listed so far.
#[derive(Debug, Default)]
pub struct ListingCtx {
    listed: HashSet<u32>,
}

/// What the listing functions see of a store: its [`ListingCtx`] and the resource table where
/// descriptors and listings are.
pub struct ListingView<'a> {
    pub ctx: &'a mut ListingCtx,
    pub table: &'a mut ResourceTable,
}

/// A directory's entries, read when the listing was asked for.
pub struct Entries(std::vec::IntoIter<Result<wt::DirectoryEntry, ErrorCode>>);

/// Replace `read-directory` and its stream in `linker`, with the view `get` projects from the
/// store's data. Call after WASI itself is in `linker`.
pub fn add_to_linker<T: 'static>(
    linker: &mut Linker<T>,
    get: fn(&mut T) -> ListingView<'_>,
) -> wasmtime::Result<()> {
    replace_filesystem_types(linker, |inst| {
        inst.resource(
            "directory-entry-stream",
            ResourceType::host::<Entries>(),
            move |mut store, rep| {
                get(store.data_mut())
                    .table
                    .delete(Resource::<Entries>::new_own(rep))?;
                Ok(())
            },
        )?;
        inst.func_wrap(
            "[method]descriptor.read-directory",
            move |mut store: StoreContextMut<'_, T>, (fd,): (Resource<Descriptor>,)| {
                let state = get(store.data_mut());
                // A descriptor listed before is rewound first; a fresh one starts at the beginning.
                // (A handle number used again by a later descriptor costs only a needless rewind.)
                let rewind = !state.ctx.listed.insert(fd.rep());
                let listed = match state.table.get(&fd)? {
                    Descriptor::Dir(d) => list(&d.dir, rewind),
                    Descriptor::File(_) => Err(ErrorCode::NotDirectory),
                };
                Ok((match listed {
                    Ok(entries) => Ok(state.table.push(Entries(entries.into_iter()))?),
                    Err(code) => Err(code),
                },))
            },
        )?;
        inst.func_wrap(
            "[method]directory-entry-stream.read-directory-entry",
            move |mut store: StoreContextMut<'_, T>, (stream,): (Resource<Entries>,)| {
                let entries = get(store.data_mut()).table.get_mut(&stream)?;
                Ok((entries.0.next().transpose(),))
            },
        )
    })
}

/// The entries of the directory open as `dir`, without `.` and `..`; `rewind` if this
/// descriptor was listed before.
///
/// They are read from the descriptor itself: nothing else reads from a directory descriptor,
/// a fresh one starts at the beginning, and one listed before is rewound. (cap-std opens the
/// directory again for each listing, twice, `.` for a position of its own and again inside
/// rustix, so a walk opened every directory three times.)
fn list(
    dir: &std::fs::File,
    rewind: bool,
) -> Result<Vec<Result<wt::DirectoryEntry, ErrorCode>>, ErrorCode> {
    use rustix::fs::SeekFrom;
    use rustix::io::Errno;
    use std::os::fd::AsFd;

    if rewind {
        match rustix::fs::seek(dir, SeekFrom::Start(0)) {
            // A descriptor opened as a path only fails here and in the read below.
            Ok(_) | Err(Errno::BADF) => {}
            Err(e) => return Err(errno(e)),
        }
    }
    // Room for at least one entry of any name (a name is at most 255 bytes).
    let mut buf = Vec::with_capacity(32 << 10);
    match entries(dir, dir.as_fd(), &mut buf) {
        // A descriptor opened as a path only (`O_PATH`, as the preopened directories are)
        // cannot be read: open the directory itself.
        Err(Errno::BADF) => {
            let opened = rustix::fs::openat(
                dir,
                c".",
                rustix::fs::OFlags::RDONLY
                    | rustix::fs::OFlags::DIRECTORY
                    | rustix::fs::OFlags::CLOEXEC,
                rustix::fs::Mode::empty(),
            )
            .map_err(errno)?;
            entries(dir, opened.as_fd(), &mut buf).map_err(errno)
        }
        listed => listed.map_err(errno),
    }
}

/// The entries read from `fd`, a descriptor on the directory `dir`, with `buf` for the kernel's
/// records. `Err` only if the first read fails; a later failure ends the list with its code.
fn entries(
    dir: &std::fs::File,
    fd: std::os::fd::BorrowedFd<'_>,
    buf: &mut Vec<u8>,
) -> Result<Vec<Result<wt::DirectoryEntry, ErrorCode>>, rustix::io::Errno> {
    use rustix::fs::{AtFlags, FileType, RawDir};

    let mut records = RawDir::new(fd, buf.spare_capacity_mut());
    let mut listed = Vec::new();
    let mut first = true;
    while let Some(entry) = records.next() {
        let entry = match entry {
            Ok(entry) => entry,
            Err(e) if first => return Err(e),
            Err(e) => {
                // The stream ends at its first error.
                listed.push(Err(errno(e)));
                break;
            }
        };
        first = false;
        let name = entry.file_name();
        if matches!(name.to_bytes(), b"." | b"..") {
            continue;
        }
        let mut kind = entry.file_type();
        if kind == FileType::Unknown {
            // The filesystem does not say (`DT_UNKNOWN`): ask, without following a symlink.
            match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(stat) => kind = FileType::from_raw_mode(stat.st_mode),
                Err(e) => {
                    listed.push(Err(errno(e)));
                    continue;
                }
            }
        }
        listed.push(match name.to_str() {
            Ok(name) => Ok(wt::DirectoryEntry {
                type_: descriptor_type(kind),
                name: name.to_owned(),
            }),
            Err(_) => Err(ErrorCode::IllegalByteSequence),
        });
    }
    Ok(listed)
}

/// The WASI type of an entry, as wasmtime-wasi reports it (FIFOs and sockets are `unknown`).
fn descriptor_type(kind: rustix::fs::FileType) -> DescriptorType {
    use rustix::fs::FileType;
    match kind {
        FileType::Directory => DescriptorType::Directory,
        FileType::Symlink => DescriptorType::SymbolicLink,
        FileType::RegularFile => DescriptorType::RegularFile,
        FileType::BlockDevice => DescriptorType::BlockDevice,
        FileType::CharacterDevice => DescriptorType::CharacterDevice,
        _ => DescriptorType::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::os::unix::fs::OpenOptionsExt;

    #[test]
    fn lists_names_and_types_without_dot_entries() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("file.txt"), "x").unwrap();
        std::os::unix::fs::symlink("file.txt", dir.path().join("link")).unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let file = std::fs::File::open(dir.path()).unwrap();
        // A fresh descriptor, and the same descriptor listed again, rewound.
        assert_eq!(list(&file, false).unwrap().len(), 4);
        assert_eq!(list(&file, true).unwrap().len(), 4);
        // A descriptor opened as a path only (as preopened directories are) lists the same.
        let path_only = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
            .open(dir.path())
            .unwrap();
        assert_eq!(list(&path_only, false).unwrap().len(), 4);
        assert_eq!(list(&path_only, true).unwrap().len(), 4);
        let mut got: Vec<(String, DescriptorType)> = list(&file, true)
            .unwrap()
            .into_iter()
            .map(|e| e.unwrap())
            .map(|e| (e.name, e.type_))
            .collect();
        got.sort_by(|a, b| a.0.cmp(&b.0));
        let want = [
            ("fifo", DescriptorType::Unknown),
            ("file.txt", DescriptorType::RegularFile),
            ("link", DescriptorType::SymbolicLink),
            ("sub", DescriptorType::Directory),
        ];
        assert_eq!(got.len(), want.len(), "{got:?}");
        for ((name, kind), (want_name, want_kind)) in got.iter().zip(want) {
            assert_eq!(name, want_name);
            assert!(
                std::mem::discriminant(kind) == std::mem::discriminant(&want_kind),
                "{name}: {kind:?}"
            );
        }
    }

    /// A directory whose entries take many reads of the kernel's listing comes whole, and again
    /// whole when listed a second time.
    #[test]
    fn lists_a_directory_larger_than_one_read() {
        let dir = tempfile::tempdir().unwrap();
        let long = "n".repeat(200);
        for i in 0..1000 {
            std::fs::write(dir.path().join(format!("{long}{i}")), "").unwrap();
        }
        let file = std::fs::File::open(dir.path()).unwrap();
        for _ in 0..2 {
            let mut names: Vec<String> = list(&file, true)
                .unwrap()
                .into_iter()
                .map(|e| e.unwrap().name)
                .collect();
            names.sort();
            names.dedup();
            assert_eq!(names.len(), 1000);
        }
    }

    /// Descriptors open on `dir` in this process.
    fn open_on(dir: &std::path::Path) -> usize {
        std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .flatten()
            .filter(|e| std::fs::read_link(e.path()).is_ok_and(|target| target == dir))
            .count()
    }

    /// A plugin that lists directories over and over (a walk of a huge tree, or a hostile loop)
    /// does not pile up descriptors: a listing's own open of an `O_PATH` descriptor is closed
    /// when the listing is done.
    #[test]
    fn listings_leave_no_descriptor_open() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::write(root.join("a"), "").unwrap();
        let file = std::fs::File::open(&root).unwrap();
        let path_only = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
            .open(&root)
            .unwrap();
        assert_eq!(open_on(&root), 2);
        for _ in 0..1000 {
            assert_eq!(list(&file, true).unwrap().len(), 1);
            assert_eq!(list(&path_only, true).unwrap().len(), 1);
        }
        assert_eq!(open_on(&root), 2, "listings left descriptors open");
    }
}
