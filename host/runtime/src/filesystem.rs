//! What the `wasi:filesystem` replacements (`protect`, `listing`, `reading`) share: how they put
//! their functions in place of wasmtime-wasi's, how their descriptors block, and how they word
//! an I/O failure as WASI does.

use wasmtime::component::{Linker, LinkerInstance};
use wasmtime_wasi::p2::bindings::filesystem::types::ErrorCode;

/// Whether file operations block the calling thread: WASI is built with it for every call, and
/// the filesystem guard's own opens make descriptors that behave the same.
pub const BLOCK_CURRENT_THREAD: bool = true;

/// Replace functions of `wasi:filesystem/types` in `linker`, which WASI itself is already in,
/// with the definitions `add` puts in the instance.
pub fn replace_filesystem_types<T: 'static>(
    linker: &mut Linker<T>,
    add: impl FnOnce(&mut LinkerInstance<'_, T>) -> wasmtime::Result<()>,
) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let added = linker
        .instance("wasi:filesystem/types@0.2.12")
        .and_then(|mut inst| add(&mut inst));
    linker.allow_shadowing(false);
    added
}

/// The WASI error code for a system call's failure, as wasmtime-wasi maps it.
pub fn errno(e: rustix::io::Errno) -> ErrorCode {
    code(e.into())
}

/// The WASI error code for an I/O error, as wasmtime-wasi maps it.
fn code(e: std::io::Error) -> ErrorCode {
    wasmtime_wasi::p2::FsError::from(e)
        .downcast()
        .unwrap_or(ErrorCode::Io)
}
