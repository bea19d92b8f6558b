//! Directory listings for `wasi:filesystem`, typed from the directory entries themselves.
//!
//! wasmtime-wasi's `read-directory` stats every entry to learn its type, one system call per
//! entry for what the kernel's `getdents` already says; walking a source tree (Glob, Grep, LS)
//! lists tens of thousands of entries. This replaces `read-directory` and the
//! `directory-entry-stream` resource with a listing that takes the type from the entry and
//! stats only where the filesystem does not say (`DT_UNKNOWN`). It reads the directory
//! through the same descriptor as wasmtime-wasi and returns the same entries and types: it
//! changes the cost, not what a plugin may see.

use cap_primitives::fs::{FileType, FileTypeExt};
use wasmtime::StoreContextMut;
use wasmtime::component::{Linker, Resource, ResourceType};
use wasmtime_wasi::filesystem::Descriptor;
use wasmtime_wasi::p2::bindings::filesystem::types::{self as wt, DescriptorType, ErrorCode};

use crate::HostState;

/// A directory's entries, read when the listing was asked for.
pub struct Entries(std::vec::IntoIter<Result<wt::DirectoryEntry, ErrorCode>>);

type Store<'a> = StoreContextMut<'a, HostState>;

/// Replace `read-directory` and its stream in `linker`. Call after WASI itself is in `linker`.
pub fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let mut inst = linker.instance("wasi:filesystem/types@0.2.12")?;
    inst.resource(
        "directory-entry-stream",
        ResourceType::host::<Entries>(),
        |mut store, rep| {
            store
                .data_mut()
                .table
                .delete(Resource::<Entries>::new_own(rep))?;
            Ok(())
        },
    )?;
    inst.func_wrap(
        "[method]descriptor.read-directory",
        |mut store: Store<'_>, (fd,): (Resource<Descriptor>,)| {
            let state = store.data_mut();
            let listed = match state.table.get(&fd)? {
                Descriptor::Dir(d) => list(&d.dir),
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
        |mut store: Store<'_>, (stream,): (Resource<Entries>,)| {
            let entries = store.data_mut().table.get_mut(&stream)?;
            Ok((entries.0.next().transpose(),))
        },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}

/// The entries of the directory open as `dir`, without `.` and `..`.
fn list(dir: &std::fs::File) -> Result<Vec<Result<wt::DirectoryEntry, ErrorCode>>, ErrorCode> {
    let entries = cap_primitives::fs::read_base_dir(dir).map_err(code)?;
    Ok(entries
        .map(|entry| {
            let entry = entry.map_err(code)?;
            let mut kind = entry.file_type().map_err(code)?;
            if !known(&kind) {
                kind = entry.metadata().map_err(code)?.file_type();
            }
            let name = entry
                .file_name()
                .into_string()
                .map_err(|_| ErrorCode::IllegalByteSequence)?;
            Ok(wt::DirectoryEntry {
                type_: descriptor_type(&kind),
                name,
            })
        })
        .collect())
}

/// Whether the entry said what it is (`DT_UNKNOWN` does not).
fn known(kind: &FileType) -> bool {
    kind.is_dir()
        || kind.is_file()
        || kind.is_symlink()
        || kind.is_block_device()
        || kind.is_char_device()
        || kind.is_fifo()
        || kind.is_socket()
}

/// The WASI type of an entry, as wasmtime-wasi reports it (FIFOs and sockets are `unknown`).
fn descriptor_type(kind: &FileType) -> DescriptorType {
    if kind.is_dir() {
        DescriptorType::Directory
    } else if kind.is_symlink() {
        DescriptorType::SymbolicLink
    } else if kind.is_file() {
        DescriptorType::RegularFile
    } else if kind.is_block_device() {
        DescriptorType::BlockDevice
    } else if kind.is_char_device() {
        DescriptorType::CharacterDevice
    } else {
        DescriptorType::Unknown
    }
}

/// The WASI error code for an I/O error, as wasmtime-wasi maps it.
fn code(e: std::io::Error) -> ErrorCode {
    wasmtime_wasi::p2::FsError::from(e)
        .downcast()
        .unwrap_or(ErrorCode::Io)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let mut got: Vec<(String, DescriptorType)> = list(&file)
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
}
