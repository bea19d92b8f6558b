//! The `log` capability: plugins write to rawko's log, never to the terminal.
//!
//! Messages are attributed to the plugin, cut to a maximum length, and limited per call, so a
//! plugin cannot flood the log or forge lines that look like rawko's own.

use std::sync::Arc;

use wasmtime::component::{HasData, Linker};

use crate::bindings::log::{self as wit, Host, Level};
use crate::limits::{MAX_LOG_CALL_BYTES, MAX_LOG_MESSAGE_BYTES};

/// The `log` capability, for [`HasData`]: its host functions see a call's [`PluginLog`].
pub struct Log;

impl HasData for Log {
    type Data<'a> = &'a mut PluginLog;
}

/// Link the `log` import, its calls going to the [`PluginLog`] `get` projects from the store's
/// data.
pub fn add_to_linker<T: 'static>(
    linker: &mut Linker<T>,
    get: fn(&mut T) -> &mut PluginLog,
) -> wasmtime::Result<()> {
    wit::add_to_linker::<T, Log>(linker, get)
}

/// The log state of one call.
#[derive(Debug)]
pub struct PluginLog {
    plugin: Arc<str>,
    kept: usize,
    dropped_messages: usize,
}

impl PluginLog {
    pub fn new(plugin: Arc<str>) -> Self {
        PluginLog {
            plugin,
            kept: 0,
            dropped_messages: 0,
        }
    }

    pub fn plugin(&self) -> &str {
        &self.plugin
    }

    /// Record one message from the plugin.
    pub fn record(&mut self, level: Level, message: &str) {
        if self.kept >= MAX_LOG_CALL_BYTES {
            self.dropped_messages += 1;
            return;
        }
        let message = rawko_text::line(
            message,
            MAX_LOG_MESSAGE_BYTES.min(MAX_LOG_CALL_BYTES - self.kept),
        );
        self.kept += message.len();
        let plugin = &*self.plugin;
        match level {
            Level::Trace => tracing::trace!(target: "rawko::plugin", plugin, "{message}"),
            Level::Debug => tracing::debug!(target: "rawko::plugin", plugin, "{message}"),
            Level::Info => tracing::info!(target: "rawko::plugin", plugin, "{message}"),
            Level::Warn => tracing::warn!(target: "rawko::plugin", plugin, "{message}"),
            Level::Error => tracing::error!(target: "rawko::plugin", plugin, "{message}"),
        }
    }

    /// Report what the per-call cap dropped, once the call is over.
    pub fn finish(&self) {
        if self.dropped_messages > 0 {
            tracing::warn!(
                target: "rawko::plugin",
                plugin = &*self.plugin,
                "{} more log messages dropped (limit {MAX_LOG_CALL_BYTES} bytes per call)",
                self.dropped_messages
            );
        }
    }
}

impl Host for PluginLog {
    fn log(&mut self, level: Level, message: String) {
        self.record(level, &message);
    }
}
