//! The data a plugin call's store holds: its WASI context, its resources, its limiter and its
//! log, and for an adapter its network and progress reporting. One is built per call from the
//! call's grants and thrown away with the store.

use std::sync::Arc;

use wasmtime::component::ResourceTable;
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use super::log::PluginLog;
use super::stdio::CappedPipe;
use crate::http::HttpCtx;
use crate::limits::{Budget, CallLimiter, MAX_HANDLES, STDIO_CAP};
use crate::progress::ProgressCtx;
use rawko_capability::{Access, FsGrants, GrantError, Protected};

pub struct HostState {
    wasi: WasiCtx,
    pub(crate) table: ResourceTable,
    pub(crate) limiter: CallLimiter,
    pub(crate) log: PluginLog,
    pub(crate) stdout: CappedPipe,
    pub(crate) stderr: CappedPipe,
    /// The network, for an adapter call; `None` denies every request.
    pub(crate) http: Option<HttpCtx>,
    /// Where streamed text goes, for an adapter call; `None` drops it.
    pub(crate) progress: Option<ProgressCtx>,
    /// What a bash filter's `shell` import answers from; `None` for other plugin kinds.
    pub(crate) shell: Option<Arc<super::filter::ShellContext>>,
    /// Paths no write may touch (`.git`, `.rawko`); `None` when nothing is writable.
    pub(crate) protected: Option<Arc<Protected>>,
    /// The handles of the directory descriptors listed so far (see `listing`).
    pub(crate) listed: std::collections::HashSet<u32>,
}

/// Whether file operations block the calling thread (see [`HostState::new`]); the filesystem
/// guard's own opens make descriptors that behave the same.
pub(crate) const BLOCK_CURRENT_THREAD: bool = true;

impl HostState {
    /// The state for one call: only the granted directories, no environment, no arguments, no
    /// network, stdin at end-of-file, stdout and stderr captured.
    pub fn new(plugin: Arc<str>, grants: &FsGrants, budget: &Budget) -> Result<Self, GrantError> {
        let stdout = CappedPipe::new(STDIO_CAP);
        let stderr = CappedPipe::new(STDIO_CAP);
        let mut wasi = WasiCtxBuilder::new();
        // Blocking file operations run on the calling thread instead of bouncing through a
        // thread pool; calls are short and this is several times faster.
        wasi.allow_blocking_current_thread(BLOCK_CURRENT_THREAD)
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .stdout(stdout.clone())
            .stderr(stderr.clone());
        preopen(grants, &mut wasi)?;
        let protected = grants.protected();
        // Each open file, directory and stream is an entry here (and a file descriptor of
        // rawko's): a plugin gets a bounded number at once, not rawko's whole fd limit.
        let mut table = ResourceTable::new();
        table.set_max_capacity(MAX_HANDLES);
        Ok(HostState {
            protected: (!protected.is_empty()).then(|| Arc::new(protected)),
            wasi: wasi.build(),
            table,
            limiter: CallLimiter::new(budget.memory),
            log: PluginLog::new(plugin),
            stdout,
            stderr,
            http: None,
            progress: None,
            shell: None,
            listed: Default::default(),
        })
    }

    /// Send what the plugin printed to the log, and return the tail of its stderr (where a
    /// panic message ends up) for error reports.
    pub fn drain_stdio(&self) -> String {
        let plugin = self.log.plugin();
        let mut tail = String::new();
        for (name, pipe) in [("stdout", &self.stdout), ("stderr", &self.stderr)] {
            let (bytes, dropped) = pipe.take();
            if bytes.is_empty() {
                continue;
            }
            let text = String::from_utf8_lossy(&bytes);
            for line in text.lines() {
                let line = rawko_text::line(line, crate::limits::MAX_LOG_MESSAGE_BYTES);
                tracing::debug!(target: "rawko::plugin", plugin, stream = name, "{line}");
            }
            if dropped > 0 {
                tracing::debug!(
                    target: "rawko::plugin",
                    plugin,
                    stream = name,
                    "{dropped} more bytes dropped (limit {STDIO_CAP} bytes per call)"
                );
            }
            if name == "stderr" {
                // The last lines, minus Rust's hint about backtraces: for a panic, the
                // location and the message.
                let mut last: Vec<&str> = text
                    .lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty() && !l.starts_with("note: run with"))
                    .rev()
                    .take(2)
                    .collect();
                last.reverse();
                tail = rawko_text::line(&last.join(" "), 500).into_owned();
            }
        }
        self.log.finish();
        tail
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// Preopen every grant, under its own path, with its access.
fn preopen(grants: &FsGrants, wasi: &mut WasiCtxBuilder) -> Result<(), GrantError> {
    for g in grants.iter() {
        let perms = match g.access() {
            Access::ReadOnly => FsPerms::ReadOnly,
            Access::ReadWrite => FsPerms::ReadWrite,
        };
        // `FsGrants::grant` checked that the path is UTF-8.
        let guest = g.path().to_str().unwrap_or_default();
        wasi.preopened_dir(g.path(), guest, perms)
            .map_err(|e| GrantError::Preopen {
                path: g.path().to_path_buf(),
                message: format!("{e:#}"),
            })?;
    }
    Ok(())
}

/// The store as host functions see it.
pub(crate) type Store<'a> = wasmtime::StoreContextMut<'a, HostState>;

/// Replace functions of `wasi:filesystem/types` in `linker`, which WASI itself is already in,
/// with the definitions `add` puts in the instance.
pub(crate) fn replace_filesystem_types(
    linker: &mut wasmtime::component::Linker<HostState>,
    add: impl FnOnce(&mut wasmtime::component::LinkerInstance<'_, HostState>) -> wasmtime::Result<()>,
) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let added = linker
        .instance("wasi:filesystem/types@0.2.12")
        .and_then(|mut inst| add(&mut inst));
    linker.allow_shadowing(false);
    added
}
