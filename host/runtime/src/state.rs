//! The data a plugin call's store holds: its WASI context and resource table, one context per
//! rawko capability (log, http, progress, shell, the filesystem guard and listings), its memory
//! limiter and captured stdio. One is built per call from the call's grants and thrown away with
//! the store. Each capability's host functions reach only the projection of it that
//! [`HostState`] hands their `add_to_linker`.

use std::sync::Arc;

use wasmtime::component::ResourceTable;
use wasmtime_wasi::filesystem::WasiFilesystemCtxView;
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use crate::filesystem::BLOCK_CURRENT_THREAD;
use crate::http::{HttpCtx, HttpView};
use crate::limits::{Budget, CallLimiter, MAX_HANDLES, MAX_LOG_MESSAGE_BYTES, STDIO_CAP};
use crate::listing::{ListingCtx, ListingView};
use crate::log::PluginLog;
use crate::output::OutputCtx;
use crate::progress::ProgressCtx;
use crate::protect::{ProtectCtx, ProtectView};
use crate::shell::ShellCtx;
use crate::stdio::CappedPipe;
use rawko_capability::{Access, FsGrants, GrantError};

/// A call's store data: one context per capability, each reached by the capability's host
/// functions only through its projection below (what `Runtime` passes to the capability's
/// `add_to_linker`), and the call's limiter and captured stdio.
pub struct HostState {
    wasi: WasiCtx,
    table: ResourceTable,
    pub(crate) limiter: CallLimiter,
    log: PluginLog,
    stdout: CappedPipe,
    stderr: CappedPipe,
    /// The network, for an adapter call; without a client it denies every request.
    pub(crate) http: HttpCtx,
    /// Where streamed text goes, for an adapter call; without a sink it is dropped.
    pub(crate) progress: ProgressCtx,
    /// What a bash filter's `shell` import answers from; empty for other plugin kinds.
    pub(crate) shell: ShellCtx,
    /// Where a tool's pieces of output go: gathered for the result, up to the call's output
    /// budget, unless the caller passes them on as they come.
    pub(crate) output: OutputCtx,
    protect: ProtectCtx,
    listing: ListingCtx,
}

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
        // Each open file, directory and stream is an entry here (and a file descriptor of
        // rawko's): a plugin gets a bounded number at once, not rawko's whole fd limit.
        let mut table = ResourceTable::new();
        table.set_max_capacity(MAX_HANDLES);
        Ok(HostState {
            protect: ProtectCtx::new(plugin.clone(), grants.protected()),
            wasi: wasi.build(),
            table,
            limiter: CallLimiter::new(budget.memory),
            log: PluginLog::new(plugin),
            stdout,
            stderr,
            http: HttpCtx::default(),
            progress: ProgressCtx::default(),
            shell: ShellCtx::default(),
            output: OutputCtx::gathering(budget.output),
            listing: ListingCtx::default(),
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
                let line = rawko_text::line(line, MAX_LOG_MESSAGE_BYTES);
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

/// The projections: what each capability's host functions see of a call's store.
impl HostState {
    /// The `log` capability's context.
    pub fn log(&mut self) -> &mut PluginLog {
        &mut self.log
    }

    /// The `http` capability's context and the table its responses live in.
    pub fn http(&mut self) -> HttpView<'_> {
        HttpView {
            ctx: &mut self.http,
            table: &mut self.table,
        }
    }

    /// The `progress` capability's context.
    pub fn progress(&mut self) -> &mut ProgressCtx {
        &mut self.progress
    }

    /// The `output` capability's context.
    pub fn output(&mut self) -> &mut OutputCtx {
        &mut self.output
    }

    /// The `shell` capability's context.
    pub fn shell(&mut self) -> &mut ShellCtx {
        &mut self.shell
    }

    /// The filesystem guard's context and the WASI filesystem it lets calls through to.
    pub fn protect(&mut self) -> ProtectView<'_> {
        ProtectView {
            ctx: &self.protect,
            fs: WasiFilesystemCtxView {
                ctx: self.wasi.filesystem(),
                table: &mut self.table,
            },
        }
    }

    /// The directory listings' context and the table where descriptors and listings are.
    pub fn listing(&mut self) -> ListingView<'_> {
        ListingView {
            ctx: &mut self.listing,
            table: &mut self.table,
        }
    }

    /// The resource table, where the reads find their descriptors.
    pub fn table(&mut self) -> &mut ResourceTable {
        &mut self.table
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
