//! Command tools.
