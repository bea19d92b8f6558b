//! What the engine keeps of a task, behind one trait with two backends: the SQLite
//! [`TaskStore`] and the PostgreSQL [`PgStore`]. The engine names only this trait, so a backend
//! needs no change to it. Every write the engine makes is one call here, and each call is one
//! transaction in the backend, so a run stopped at any point resumes from what was written.
//!
//! The calls are asynchronous, as a server's store is; each returns a boxed `Send` future, so
//! the trait is usable as `dyn Store`. The SQLite store does its work, a few local writes, when
//! it is called, and hands back the finished result: a `TaskStore` belongs to one thread, and
//! a future that reached back into it could not be sent to another.
//!
//! [`AnyStore`], the store a command opened (either backend), has each call too, as a trait
//! method and as an async method of its own.

use std::future::Future;
use std::pin::Pin;

use crate::pg::PgStore;
use crate::{
    AnyStore, AuditEntry, Message, ModelCall, Reply, Result, Task, TaskStatus, TaskStore, ToolCall,
    Transition, Turn, Usage,
};

/// A store call's result, to await.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T>> + Send + 'a>>;

/// The trait, and its two implementations, from one list of calls.
macro_rules! store {
    ($l:lifetime; $( $(#[$doc:meta])* fn $name:ident(&self $(, $arg:ident: $ty:ty)*) -> $out:ty; )*) => {
        /// A task's durable record: its transitions, turns, messages, tool calls and audit rows.
        pub trait Store {
            $( $(#[$doc])* fn $name<$l>(&$l self $(, $arg: $ty)*) -> StoreFuture<$l, $out>; )*
        }

        impl Store for TaskStore {
            $( fn $name<$l>(&$l self $(, $arg: $ty)*) -> StoreFuture<$l, $out> {
                Box::pin(std::future::ready(TaskStore::$name(self $(, $arg)*)))
            } )*
        }

        impl Store for PgStore {
            $( fn $name<$l>(&$l self $(, $arg: $ty)*) -> StoreFuture<$l, $out> {
                Box::pin(PgStore::$name(self $(, $arg)*))
            } )*
        }

        impl Store for AnyStore {
            $( fn $name<$l>(&$l self $(, $arg: $ty)*) -> StoreFuture<$l, $out> {
                match self {
                    AnyStore::Sqlite(s) => Store::$name(s $(, $arg)*),
                    AnyStore::Pg(p) => Store::$name(p $(, $arg)*),
                }
            } )*
        }

        impl AnyStore {
            $( $(#[$doc])* pub async fn $name<$l>(&$l self $(, $arg: $ty)*) -> Result<$out> {
                Store::$name(self $(, $arg)*).await
            } )*
        }
    };
}

store! { 'a;
    fn task(&self, id: &'a str) -> Task;
    fn finish_task(&self, task: &'a str, status: TaskStatus, summary: &'a str) -> ();
    fn transition(&self, task: &'a str, t: &'a Transition, status: TaskStatus) -> ();
    /// Record `t` and, in the same transaction, the usage of the reply that decided it.
    fn transition_after(
        &self,
        task: &'a str,
        t: &'a Transition,
        status: TaskStatus,
        usage: Option<(i64, &'a str, &'a str, &'a Usage)>
    ) -> ();
    fn transitions(&self, task: &'a str) -> Vec<Transition>;
    fn turns(&self, task: &'a str) -> Vec<Turn>;
    fn start_turn(&self, task: &'a str, agent: &'a str, parent: Option<i64>) -> i64;
    fn open_turn(&self, task: &'a str, agent: &'a str) -> Option<Turn>;
    fn open_child_turn(&self, parent: i64, agent: &'a str) -> Option<Turn>;
    fn end_turn(
        &self,
        turn: i64,
        outcome: &'a str,
        summary: &'a str,
        output: Option<&'a serde_json::Value>
    ) -> ();
    fn bump_iterations(&self, turn: i64) -> i64;
    fn messages(&self, turn: i64) -> Vec<Message>;
    fn append_message(&self, turn: i64, role: &'a str, content: &'a serde_json::Value) -> i64;
    fn append_reply(
        &self,
        turn: i64,
        content: &'a serde_json::Value,
        adapter: &'a str,
        model: &'a str,
        usage: &'a Usage
    ) -> i64;
    fn tool_call(&self, turn: i64, call_id: &'a str) -> Option<ToolCall>;
    /// Record a finished tool call; false when the call was already recorded.
    fn record_tool_call(&self, call: &'a ToolCall) -> bool;
    fn tool_calls(&self, task: &'a str) -> Vec<ToolCall>;
    fn record_decision(&self, task: &'a str, entry: &'a AuditEntry) -> ();
    fn record_usage(&self, turn: i64, adapter: &'a str, model: &'a str, usage: &'a Usage) -> ();
    fn task_usage(&self, task: &'a str) -> Usage;
    /// Record the task's first traced run (a `traceparent`), unless it has one.
    fn set_trace(&self, task: &'a str, traceparent: &'a str) -> String;
    /// Record that a run of the task starts (its first or a resume); its id.
    fn start_run(&self, task: &'a str, trace: Option<&'a str>) -> i64;
    fn end_run(&self, task: &'a str, run: i64, status: &'a str) -> ();
    fn record_model_call(&self, call: &'a ModelCall) -> ();
    /// Record a model call with the turn's round trips so far and, when the model answered,
    /// its reply, usage and the audit rows decided with it, in one transaction; the reply's
    /// message id.
    fn record_answer(
        &self,
        task: &'a str,
        turn: i64,
        iterations: i64,
        call: &'a ModelCall,
        reply: Option<Reply<'a>>,
        decisions: &'a [AuditEntry]
    ) -> Option<i64>;
    /// Record a step's tool results message and, with it, the step's last tool call and the
    /// audit rows its run made.
    fn record_results(
        &self,
        task: &'a str,
        turn: i64,
        last: Option<&'a ToolCall>,
        decisions: &'a [AuditEntry],
        content: &'a serde_json::Value
    ) -> i64;
}
