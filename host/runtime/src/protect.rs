//! The guard in front of `wasi:filesystem`: every call that changes what is at a path is
//! checked against the protected places of the call's grants ([`rawko_capability::Protected`])
//! before wasmtime-wasi runs it, and descriptors opened on protected paths are downgraded to
//! read-only.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rawko_capability::Protected;
use rawko_capability::protect::{Refusal, fd_path};
use wasmtime::StoreContextMut;
use wasmtime::component::{Linker, Resource, ResourceTable};
use wasmtime_wasi::FsPerms;
use wasmtime_wasi::filesystem::{Descriptor, WasiFilesystemCtxView};
use wasmtime_wasi::p2::bindings::filesystem::types::{
    self as wt, DescriptorFlags, ErrorCode, HostDescriptor, NewTimestamp, OpenFlags, PathFlags,
};

use crate::filesystem::{BLOCK_CURRENT_THREAD, replace_filesystem_types};

/// One call's guard: the paths no write may touch, and the plugin its refusals are logged for.
#[derive(Debug)]
pub struct ProtectCtx {
    /// Paths no write may touch (`.git`, `.rawko`); `None` when nothing is writable.
    protected: Option<Arc<Protected>>,
    plugin: Arc<str>,
}

impl ProtectCtx {
    pub fn new(plugin: Arc<str>, protected: Protected) -> Self {
        ProtectCtx {
            protected: (!protected.is_empty()).then(|| Arc::new(protected)),
            plugin,
        }
    }
}

/// What the guard sees of a store: its [`ProtectCtx`] and wasmtime-wasi's filesystem, which
/// runs the calls the guard lets through.
pub struct ProtectView<'a> {
    pub ctx: &'a ProtectCtx,
    pub fs: WasiFilesystemCtxView<'a>,
}

/// The directory a descriptor of this call stands for, if it is a directory.
fn dir_path(table: &ResourceTable, fd: &Resource<Descriptor>) -> Option<io::Result<PathBuf>> {
    match table.get(fd) {
        Ok(Descriptor::Dir(d)) => Some(fd_path(&*d.dir)),
        _ => None,
    }
}

/// The guard in front of a mutating WASI call: `Err` with the code to return instead of
/// running it.
fn guard(
    view: &ProtectView<'_>,
    fd: &Resource<Descriptor>,
    path: &str,
    follow_last: bool,
    ancestors: bool,
) -> Result<(), ErrorCode> {
    let Some(protected) = view.ctx.protected.as_deref() else {
        return Ok(());
    };
    // Not a directory: the call fails on its own.
    let Some(base) = dir_path(view.fs.table, fd) else {
        return Ok(());
    };
    let refusal = match base {
        Ok(base) => match protected.check(&base, Path::new(path), follow_last, ancestors) {
            Ok(()) => return Ok(()),
            Err(r) => r,
        },
        Err(e) => Refusal::Unresolved {
            path: PathBuf::from(path),
            message: e.to_string(),
        },
    };
    tracing::info!(target: "rawko::plugin", plugin = &*view.ctx.plugin, "{refusal}");
    Err(ErrorCode::NotPermitted)
}

/// A descriptor opened on a protected path is read-only, whatever grant it came through.
fn downgrade(view: &mut ProtectView<'_>, fd: &Resource<Descriptor>) {
    let Some(protected) = view.ctx.protected.as_deref() else {
        return;
    };
    let Ok(d) = view.fs.table.get_mut(fd) else {
        return;
    };
    let real = match d {
        Descriptor::Dir(dir) => fd_path(&*dir.dir),
        Descriptor::File(file) => fd_path(&*file.file),
    };
    // A path that cannot be found cannot be shown to be outside: read-only.
    if real.is_err() || real.is_ok_and(|r| protected.hit(&r, false).is_some()) {
        match d {
            Descriptor::Dir(dir) => dir.perms = FsPerms::ReadOnly,
            Descriptor::File(file) => file.perms = FsPerms::ReadOnly,
        }
    }
}

type Reply<T> = wasmtime::Result<(Result<T, ErrorCode>,)>;

/// Run a `wasi:filesystem` call, or return `code` without running it.
async fn then<T, D: 'static>(
    store: &mut StoreContextMut<'_, D>,
    get: fn(&mut D) -> ProtectView<'_>,
    checked: Result<(), ErrorCode>,
    call: impl AsyncFnOnce(&mut WasiFilesystemCtxView<'_>) -> wasmtime_wasi::p2::FsResult<T>,
) -> Reply<T> {
    if let Err(code) = checked {
        return Ok((Err(code),));
    }
    let view = get(store.data_mut());
    let mut fs = view.fs;
    match call(&mut fs).await {
        Ok(v) => Ok((Ok(v),)),
        Err(e) => Ok((Err(wt::Host::convert_error_code(&mut fs, e)?),)),
    }
}

fn follows(flags: PathFlags) -> bool {
    flags.contains(PathFlags::SYMLINK_FOLLOW)
}

/// Whether an open only reads: nothing created, truncated or written, no flag but `directory`.
fn reads_only(oflags: OpenFlags, flags: DescriptorFlags) -> bool {
    OpenFlags::DIRECTORY.contains(oflags) && DescriptorFlags::READ.contains(flags)
}

/// An open that only reads, done here rather than by wasmtime-wasi, for speed and for FIFOs.
///
/// The path is resolved beneath the directory descriptor by cap-primitives, as wasmtime-wasi
/// resolves it. The open is non-blocking, so a FIFO cannot stall it (nor a terminal become the
/// process's own), and what it opened must be a regular file or a directory: a FIFO, socket or
/// device is closed again and refused. One open and one stat, where a stat ahead of
/// wasmtime-wasi's own open took five system calls; walking a tree opens every directory, and
/// searching one every file. A directory asked for as one is opened `O_DIRECTORY`, which the
/// kernel refuses for anything else, and needs no stat. (`O_NONBLOCK` changes nothing for
/// regular files and directories.)
fn open_read(
    table: &mut ResourceTable,
    fd: &Resource<Descriptor>,
    path_flags: PathFlags,
    path: &str,
    oflags: OpenFlags,
) -> wasmtime_wasi::p2::FsResult<Resource<Descriptor>> {
    use cap_fs_ext::{FollowSymlinks, OpenOptionsFollowExt};
    use cap_primitives::fs::OpenOptionsExt;
    use wasmtime_wasi::filesystem::{Dir, File, OpenMode};

    let (dir, perms) = match table.get(fd)? {
        Descriptor::Dir(d) => (d.dir.clone(), d.perms),
        Descriptor::File(_) => return Err(ErrorCode::NotDirectory.into()),
    };
    // Asked for a directory, the kernel refuses anything else (`O_DIRECTORY`), so the kind
    // needs no stat: walking a tree opens every directory.
    let dir_only = oflags.contains(OpenFlags::DIRECTORY);
    let mut opts = cap_primitives::fs::OpenOptions::new();
    opts.read(true)
        .custom_flags(
            libc::O_NONBLOCK | libc::O_NOCTTY | if dir_only { libc::O_DIRECTORY } else { 0 },
        )
        .follow(if follows(path_flags) {
            FollowSymlinks::Yes
        } else {
            FollowSymlinks::No
        });
    let file = cap_primitives::fs::open(&dir, Path::new(path), &opts)?;
    if dir_only {
        let dir = Dir::new(file, perms, OpenMode::READ, BLOCK_CURRENT_THREAD);
        return Ok(table.push(Descriptor::Dir(dir))?);
    }
    let kind = file.metadata()?.file_type();
    let opened = if kind.is_dir() {
        Descriptor::Dir(Dir::new(file, perms, OpenMode::READ, BLOCK_CURRENT_THREAD))
    } else if kind.is_file() {
        Descriptor::File(File::new(file, perms, OpenMode::READ, BLOCK_CURRENT_THREAD))
    } else {
        return Err(ErrorCode::Unsupported.into());
    };
    Ok(table.push(opened)?)
}

/// Guard a `wasi:filesystem` method that takes a descriptor and one path, following no symlink
/// in the last component.
macro_rules! guard_path_op {
    ($inst:expr, $get:expr, $wrapped:expr, $name:literal, $method:ident, ancestors: $ancestors:expr) => {
        $wrapped.push($name);
        let get = $get;
        $inst.func_wrap_async(
            $name,
            move |mut store: StoreContextMut<'_, T>, (fd, path): (Resource<Descriptor>, String)| {
                Box::new(async move {
                    let checked = guard(&get(store.data_mut()), &fd, &path, false, $ancestors);
                    then(&mut store, get, checked, async |v| {
                        v.$method(fd, path).await
                    })
                    .await
                })
            },
        )?
    };
}

/// Put the guard in front of every `wasi:filesystem/types` function that changes what is at a
/// path, with the view `get` projects from the store's data. Call after WASI itself is in
/// `linker`; it replaces those functions' definitions.
pub fn add_to_linker<T: Send + 'static>(
    linker: &mut Linker<T>,
    get: fn(&mut T) -> ProtectView<'_>,
) -> wasmtime::Result<()> {
    let mut wrapped: Vec<&str> = Vec::new();
    replace_filesystem_types(linker, |inst| {
        wrapped.push("[method]descriptor.open-at");
        inst.func_wrap_async(
            "[method]descriptor.open-at",
            move |mut store: StoreContextMut<'_, T>,
                  (fd, path_flags, path, oflags, flags): (
                Resource<Descriptor>,
                PathFlags,
                String,
                OpenFlags,
                DescriptorFlags,
            )| {
                Box::new(async move {
                    if reads_only(oflags, flags) {
                        let opened = open_read(
                            get(store.data_mut()).fs.table,
                            &fd,
                            path_flags,
                            &path,
                            oflags,
                        );
                        let reply = match opened {
                            Ok(opened) => (Ok(opened),),
                            Err(e) => {
                                let mut fs = get(store.data_mut()).fs;
                                (Err(wt::Host::convert_error_code(&mut fs, e)?),)
                            }
                        };
                        if let (Ok(opened),) = &reply {
                            downgrade(&mut get(store.data_mut()), opened);
                        }
                        return Ok(reply);
                    }
                    let writes = oflags.intersects(OpenFlags::CREATE | OpenFlags::TRUNCATE)
                        || flags
                            .intersects(DescriptorFlags::WRITE | DescriptorFlags::MUTATE_DIRECTORY);
                    let mut checked = if writes {
                        guard(
                            &get(store.data_mut()),
                            &fd,
                            &path,
                            follows(path_flags),
                            false,
                        )
                    } else {
                        Ok(())
                    };
                    // Opening a FIFO blocks until someone opens its other end, and reading a device
                    // may never end: neither is a file a plugin has any business with, and a
                    // repository can ship a FIFO. Refused before the open that would block.
                    if checked.is_ok() {
                        let at = Resource::<Descriptor>::new_borrow(fd.rep());
                        let mut fs = get(store.data_mut()).fs;
                        let stat = fs.stat_at(at, path_flags, path.clone()).await;
                        // (WASI reports a FIFO or socket as `unknown`.)
                        if let Ok(stat) = stat
                            && !matches!(
                                stat.type_,
                                wt::DescriptorType::RegularFile
                                    | wt::DescriptorType::Directory
                                    | wt::DescriptorType::SymbolicLink
                            )
                        {
                            checked = Err(ErrorCode::Unsupported);
                        }
                    }
                    let reply = then(&mut store, get, checked, async |v| {
                        v.open_at(fd, path_flags, path, oflags, flags).await
                    })
                    .await?;
                    if let (Ok(opened),) = &reply {
                        downgrade(&mut get(store.data_mut()), opened);
                    }
                    Ok(reply)
                })
            },
        )?;
        wrapped.push("[method]descriptor.set-times-at");
        inst.func_wrap_async(
            "[method]descriptor.set-times-at",
            move |mut store: StoreContextMut<'_, T>,
                  (fd, path_flags, path, atim, mtim): (
                Resource<Descriptor>,
                PathFlags,
                String,
                NewTimestamp,
                NewTimestamp,
            )| {
                Box::new(async move {
                    let checked = guard(
                        &get(store.data_mut()),
                        &fd,
                        &path,
                        follows(path_flags),
                        false,
                    );
                    then(&mut store, get, checked, async |v| {
                        v.set_times_at(fd, path_flags, path, atim, mtim).await
                    })
                    .await
                })
            },
        )?;
        wrapped.push("[method]descriptor.link-at");
        inst.func_wrap_async(
            "[method]descriptor.link-at",
            move |mut store: StoreContextMut<'_, T>,
                  (fd, old_flags, old_path, new_fd, new_path): (
                Resource<Descriptor>,
                PathFlags,
                String,
                Resource<Descriptor>,
                String,
            )| {
                Box::new(async move {
                    // A new name for a protected file would be a way to write it.
                    let checked = guard(
                        &get(store.data_mut()),
                        &fd,
                        &old_path,
                        follows(old_flags),
                        false,
                    )
                    .and_then(|()| guard(&get(store.data_mut()), &new_fd, &new_path, false, false));
                    then(&mut store, get, checked, async |v| {
                        v.link_at(fd, old_flags, old_path, new_fd, new_path).await
                    })
                    .await
                })
            },
        )?;
        wrapped.push("[method]descriptor.rename-at");
        inst.func_wrap_async(
            "[method]descriptor.rename-at",
            move |mut store: StoreContextMut<'_, T>,
                  (fd, old_path, new_fd, new_path): (
                Resource<Descriptor>,
                String,
                Resource<Descriptor>,
                String,
            )| {
                Box::new(async move {
                    let checked = guard(&get(store.data_mut()), &fd, &old_path, false, true)
                        .and_then(|()| {
                            guard(&get(store.data_mut()), &new_fd, &new_path, false, true)
                        });
                    then(&mut store, get, checked, async |v| {
                        v.rename_at(fd, old_path, new_fd, new_path).await
                    })
                    .await
                })
            },
        )?;
        wrapped.push("[method]descriptor.symlink-at");
        inst.func_wrap_async(
            "[method]descriptor.symlink-at",
            move |mut store: StoreContextMut<'_, T>,
                  (fd, old_path, new_path): (Resource<Descriptor>, String, String)| {
                Box::new(async move {
                    let checked = guard(&get(store.data_mut()), &fd, &new_path, false, false);
                    then(&mut store, get, checked, async |v| {
                        v.symlink_at(fd, old_path, new_path).await
                    })
                    .await
                })
            },
        )?;
        guard_path_op!(inst, get, wrapped, "[method]descriptor.create-directory-at", create_directory_at, ancestors: false);
        guard_path_op!(inst, get, wrapped, "[method]descriptor.remove-directory-at", remove_directory_at, ancestors: true);
        guard_path_op!(inst, get, wrapped, "[method]descriptor.unlink-file-at", unlink_file_at, ancestors: true);
        Ok(())
    })?;
    wrapped.sort_unstable();
    let mut expected = GUARDED.to_vec();
    expected.sort_unstable();
    if wrapped != expected {
        return Err(wasmtime::format_err!(
            "the filesystem guard wraps {wrapped:?}, but GUARDED lists {expected:?}"
        ));
    }
    Ok(())
}

/// The `wasi:filesystem/types` functions that change what is at a path, each wrapped by
/// [`add_to_linker`] (which fails if it wraps another set).
pub const GUARDED: &[&str] = &[
    "[method]descriptor.open-at",
    "[method]descriptor.set-times-at",
    "[method]descriptor.link-at",
    "[method]descriptor.rename-at",
    "[method]descriptor.symlink-at",
    "[method]descriptor.create-directory-at",
    "[method]descriptor.remove-directory-at",
    "[method]descriptor.unlink-file-at",
];

/// The other `wasi:filesystem/types` functions, and why each needs no guard. Together with
/// [`GUARDED`] this must name every function of the interface: a WASI update that adds one
/// fails the test below until someone decides which list it belongs in.
pub const UNGUARDED: &[(&str, &str)] = &[
    ("[method]descriptor.read", "reads"),
    ("[method]descriptor.read-via-stream", "reads"),
    ("[method]descriptor.read-directory", "reads"),
    ("[method]descriptor.readlink-at", "reads"),
    ("[method]descriptor.stat", "reads"),
    ("[method]descriptor.stat-at", "reads"),
    ("[method]descriptor.metadata-hash", "reads"),
    ("[method]descriptor.metadata-hash-at", "reads"),
    ("[method]descriptor.is-same-object", "reads"),
    ("[method]descriptor.get-flags", "reads"),
    ("[method]descriptor.get-type", "reads"),
    (
        "[method]descriptor.advise",
        "a hint about an open descriptor",
    ),
    ("[method]descriptor.sync", "flushes an open descriptor"),
    ("[method]descriptor.sync-data", "flushes an open descriptor"),
    (
        "[method]descriptor.write",
        "open descriptors on protected paths are read-only",
    ),
    (
        "[method]descriptor.write-via-stream",
        "open descriptors on protected paths are read-only",
    ),
    (
        "[method]descriptor.append-via-stream",
        "open descriptors on protected paths are read-only",
    ),
    (
        "[method]descriptor.set-size",
        "open descriptors on protected paths are read-only",
    ),
    (
        "[method]descriptor.set-times",
        "open descriptors on protected paths are read-only",
    ),
    (
        "[method]directory-entry-stream.read-directory-entry",
        "reads",
    ),
    ("filesystem-error-code", "reads an error"),
];

#[cfg(test)]
mod tests {
    use super::*;

    /// Every function the WIT gives `wasi:filesystem/types` is either guarded or listed as
    /// needing no guard, so a new WASI function cannot slip past the guard unnoticed.
    #[test]
    fn every_filesystem_function_is_guarded_or_accounted_for() {
        let iface = rawko_wit::interface("wasi:filesystem/types").expect("in the WIT");
        let mut known: Vec<&str> = GUARDED
            .iter()
            .copied()
            .chain(UNGUARDED.iter().map(|(f, _)| *f))
            .collect();
        known.sort_unstable();
        let mut declared = iface.functions.to_vec();
        declared.sort_unstable();
        assert_eq!(known, declared);
    }

    /// The guard wraps exactly what [`GUARDED`] lists (it refuses to link otherwise).
    #[test]
    fn the_guard_links() {
        let engine = wasmtime::Engine::new(&wasmtime::Config::new()).unwrap();
        struct Data {
            wasi: wasmtime_wasi::WasiCtx,
            table: ResourceTable,
            guard: ProtectCtx,
        }
        impl wasmtime_wasi::WasiView for Data {
            fn ctx(&mut self) -> wasmtime_wasi::WasiCtxView<'_> {
                wasmtime_wasi::WasiCtxView {
                    ctx: &mut self.wasi,
                    table: &mut self.table,
                }
            }
        }
        fn view(d: &mut Data) -> ProtectView<'_> {
            ProtectView {
                ctx: &d.guard,
                fs: WasiFilesystemCtxView {
                    ctx: d.wasi.filesystem(),
                    table: &mut d.table,
                },
            }
        }
        let mut linker = Linker::<Data>::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).unwrap();
        add_to_linker(&mut linker, view).unwrap();
    }
}
