//! `descriptor.read` for `wasi:filesystem`, without zeroing its buffer and with the end of the
//! file reported when the read reaches it.
//!
//! wasmtime-wasi's `read` zeroes a buffer of the size asked for before reading into it, makes
//! one `pread` of at most 64 KiB, and reports the end only on a read that returns nothing: a
//! plugin that does not know a file's size pays a second call to the host (or a stat) for
//! every file it reads whole. This one reads into uninitialised memory until the buffer is
//! full or the file ends, and says so in the same reply. The data are the same bytes from the
//! same descriptor; reads of directories and failures give the codes wasmtime-wasi gives.
//!
//! Its only state is the call's resource table, where the descriptors are.

use wasmtime::StoreContextMut;
use wasmtime::component::{Linker, Resource, ResourceTable};
use wasmtime_wasi::filesystem::Descriptor;
use wasmtime_wasi::p2::bindings::filesystem::types::ErrorCode;

use crate::filesystem::{errno, replace_filesystem_types};
use crate::limits::MAX_READ;

/// Replace `descriptor.read` in `linker`, reading descriptors from the table `get` projects
/// from the store's data. Call after WASI itself is in `linker`.
pub fn add_to_linker<T: 'static>(
    linker: &mut Linker<T>,
    get: fn(&mut T) -> &mut ResourceTable,
) -> wasmtime::Result<()> {
    replace_filesystem_types(linker, |inst| {
        inst.func_wrap(
            "[method]descriptor.read",
            move |mut store: StoreContextMut<'_, T>,
                  (fd, len, offset): (Resource<Descriptor>, u64, u64)| {
                let reply = match get(store.data_mut()).get(&fd)? {
                    Descriptor::File(f) => read_at(&f.file, len, offset),
                    Descriptor::Dir(_) => Err(ErrorCode::BadDescriptor),
                };
                Ok((reply,))
            },
        )
    })
}

/// Up to `len` bytes (at most [`MAX_READ`]) of `file` from `offset`, and whether the file ended
/// within them.
pub fn read_at(file: &std::fs::File, len: u64, offset: u64) -> Result<(Vec<u8>, bool), ErrorCode> {
    let want = usize::try_from(len.min(MAX_READ)).unwrap_or(0);
    if want == 0 {
        // As wasmtime-wasi: a read of nothing reports the end, or the descriptor's failure.
        return match rustix::io::pread(file, &mut [0u8; 0][..], offset) {
            Ok(_) => Ok((Vec::new(), true)),
            Err(e) => Err(errno(e)),
        };
    }
    let mut data: Vec<u8> = Vec::with_capacity(want);
    loop {
        let at = offset
            .checked_add(data.len() as u64)
            .ok_or(ErrorCode::Overflow)?;
        match rustix::io::pread(file, rustix::buffer::spare_capacity(&mut data), at) {
            // Nothing more: the end of the file.
            Ok(0) => return Ok((data, true)),
            Ok(_) if data.len() == want => return Ok((data, false)),
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            // What was read before the failure is returned; the next read meets it again.
            Err(_) if !data.is_empty() => return Ok((data, false)),
            Err(e) => return Err(errno(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::io::Write;

    #[test]
    fn reads_whole_files_and_says_where_they_end() {
        let mut f = tempfile::tempfile().unwrap();
        let text: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        f.write_all(&text).unwrap();
        // Asked for more than is there: all of it, and the end.
        assert_eq!(read_at(&f, 1 << 20, 0).unwrap(), (text.clone(), true));
        // Asked for exactly what is there: all of it; the end is not known yet.
        assert_eq!(read_at(&f, 200_000, 0).unwrap(), (text.clone(), false));
        assert_eq!(read_at(&f, 10, 200_000).unwrap(), (Vec::new(), true));
        // From the middle.
        assert_eq!(
            read_at(&f, 5, 1000).unwrap(),
            (text[1000..1005].to_vec(), false)
        );
        assert_eq!(read_at(&f, 0, 0).unwrap(), (Vec::new(), true));
        // Past the end; an offset past what the kernel takes is its error.
        assert_eq!(read_at(&f, 10, 300_000).unwrap(), (Vec::new(), true));
        assert!(matches!(read_at(&f, 10, u64::MAX), Err(ErrorCode::Invalid)));
    }

    /// A plugin asking for an enormous read gets at most [`MAX_READ`] bytes: the host never
    /// holds more for it than that.
    #[test]
    fn a_huge_length_is_capped() {
        let f = tempfile::tempfile().unwrap();
        f.set_len(3 * MAX_READ).unwrap();
        let (data, end) = read_at(&f, u64::MAX, 0).unwrap();
        assert_eq!((data.len() as u64, end), (MAX_READ, false));
    }

    #[test]
    fn failures_are_wasi_codes() {
        let dir = tempfile::tempdir().unwrap();
        let d = std::fs::File::open(dir.path()).unwrap();
        assert!(matches!(read_at(&d, 10, 0), Err(ErrorCode::IsDirectory)));
        let w = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(dir.path().join("w"))
            .unwrap();
        assert!(matches!(read_at(&w, 10, 0), Err(ErrorCode::BadDescriptor)));
    }
}
