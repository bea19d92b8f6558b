//! What the engine keeps of a task, behind one trait ([`Store`], in the store's crate): the
//! SQLite and the PostgreSQL stores are its two backends, and the engine names only the trait,
//! so another backend needs no change to it. Every write the engine makes is one call, awaited,
//! and each call is one transaction in the backend, so a run stopped at any point resumes from
//! what was written.

pub use rawko_store::{Store, StoreFuture};
