//! Messages to the host's log.
//!
//! A plugin has no terminal: what it prints goes to a size-capped buffer the host logs. These
//! functions send a message with a level instead, so it can be filtered like the host's own.

/// How much a message matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}

/// Send one message to the host's log.
pub fn log(level: Level, message: &str) {
    // Each plugin kind has its own generated bindings; the `log` interface is the same in all.
    #[cfg(all(feature = "adapter", not(feature = "tool")))]
    use crate::__private::adapter::bindings::rawko::plugin::log as wit;
    #[cfg(all(
        feature = "bash-filter",
        not(any(feature = "tool", feature = "adapter"))
    ))]
    use crate::__private::bash_filter::bindings::rawko::plugin::log as wit;
    #[cfg(feature = "tool")]
    use crate::__private::tool::bindings::rawko::plugin::log as wit;
    #[cfg(any(feature = "tool", feature = "adapter", feature = "bash-filter"))]
    {
        let level = match level {
            Level::Trace => wit::Level::Trace,
            Level::Debug => wit::Level::Debug,
            Level::Info => wit::Level::Info,
            Level::Warn => wit::Level::Warn,
            Level::Error => wit::Level::Error,
        };
        wit::log(level, message);
    }
    #[cfg(not(any(feature = "tool", feature = "adapter", feature = "bash-filter")))]
    {
        let _ = (level, message);
    }
}

/// Log at debug level.
pub fn debug(message: &str) {
    log(Level::Debug, message);
}

/// Log at info level.
pub fn info(message: &str) {
    log(Level::Info, message);
}

/// Log at warn level.
pub fn warn(message: &str) {
    log(Level::Warn, message);
}
