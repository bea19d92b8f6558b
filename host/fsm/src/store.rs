//! What the engine keeps of a task, behind one trait: the SQLite [`TaskStore`] is one backend,
//! and the engine names only this trait, so another backend needs no change to it. Every write
//! the engine makes is one call here, and each call is one transaction in the backend, so a run
//! stopped at any point resumes from what was written.

use rawko_store::{
    AuditEntry, Message, ModelCall, Result, Task, TaskStatus, TaskStore, ToolCall, Transition,
    Turn, Usage,
};

/// A task's durable record: its transitions, turns, messages, tool calls and audit rows.
pub trait Store {
    fn task(&self, id: &str) -> Result<Task>;
    fn finish_task(&self, task: &str, status: TaskStatus, summary: &str) -> Result<()>;
    fn transition(&self, task: &str, t: &Transition, status: TaskStatus) -> Result<()>;
    /// Record `t` and, in the same transaction, the usage of the reply that decided it.
    fn transition_after(
        &self,
        task: &str,
        t: &Transition,
        status: TaskStatus,
        usage: Option<(i64, &str, &str, &Usage)>,
    ) -> Result<()>;
    fn transitions(&self, task: &str) -> Result<Vec<Transition>>;
    fn turns(&self, task: &str) -> Result<Vec<Turn>>;
    fn start_turn(&self, task: &str, agent: &str, parent: Option<i64>) -> Result<i64>;
    fn open_turn(&self, task: &str, agent: &str) -> Result<Option<Turn>>;
    fn open_child_turn(&self, parent: i64, agent: &str) -> Result<Option<Turn>>;
    fn end_turn(
        &self,
        turn: i64,
        outcome: &str,
        summary: &str,
        output: Option<&serde_json::Value>,
    ) -> Result<()>;
    fn bump_iterations(&self, turn: i64) -> Result<i64>;
    fn messages(&self, turn: i64) -> Result<Vec<Message>>;
    fn append_message(&self, turn: i64, role: &str, content: &serde_json::Value) -> Result<i64>;
    fn append_reply(
        &self,
        turn: i64,
        content: &serde_json::Value,
        adapter: &str,
        model: &str,
        usage: &Usage,
    ) -> Result<i64>;
    fn tool_call(&self, turn: i64, call_id: &str) -> Result<Option<ToolCall>>;
    /// Record a finished tool call; false when the call was already recorded.
    fn record_tool_call(&self, call: &ToolCall) -> Result<bool>;
    fn tool_calls(&self, task: &str) -> Result<Vec<ToolCall>>;
    fn record_decision(&self, task: &str, entry: &AuditEntry) -> Result<()>;
    fn record_usage(&self, turn: i64, adapter: &str, model: &str, usage: &Usage) -> Result<()>;
    fn task_usage(&self, task: &str) -> Result<Usage>;
    /// Record the task's first traced run (a `traceparent`), unless it has one.
    fn set_trace(&self, task: &str, traceparent: &str) -> Result<String>;
    /// Record that a run of the task starts (its first or a resume); its id.
    fn start_run(&self, task: &str, trace: Option<&str>) -> Result<i64>;
    fn end_run(&self, task: &str, run: i64, status: &str) -> Result<()>;
    fn record_model_call(&self, call: &ModelCall) -> Result<()>;
}

impl Store for TaskStore {
    fn task(&self, id: &str) -> Result<Task> {
        TaskStore::task(self, id)
    }
    fn finish_task(&self, task: &str, status: TaskStatus, summary: &str) -> Result<()> {
        TaskStore::finish_task(self, task, status, summary)
    }
    fn transition(&self, task: &str, t: &Transition, status: TaskStatus) -> Result<()> {
        TaskStore::transition(self, task, t, status)
    }
    fn transition_after(
        &self,
        task: &str,
        t: &Transition,
        status: TaskStatus,
        usage: Option<(i64, &str, &str, &Usage)>,
    ) -> Result<()> {
        TaskStore::transition_after(self, task, t, status, usage)
    }
    fn transitions(&self, task: &str) -> Result<Vec<Transition>> {
        TaskStore::transitions(self, task)
    }
    fn turns(&self, task: &str) -> Result<Vec<Turn>> {
        TaskStore::turns(self, task)
    }
    fn start_turn(&self, task: &str, agent: &str, parent: Option<i64>) -> Result<i64> {
        TaskStore::start_turn(self, task, agent, parent)
    }
    fn open_turn(&self, task: &str, agent: &str) -> Result<Option<Turn>> {
        TaskStore::open_turn(self, task, agent)
    }
    fn open_child_turn(&self, parent: i64, agent: &str) -> Result<Option<Turn>> {
        TaskStore::open_child_turn(self, parent, agent)
    }
    fn end_turn(
        &self,
        turn: i64,
        outcome: &str,
        summary: &str,
        output: Option<&serde_json::Value>,
    ) -> Result<()> {
        TaskStore::end_turn(self, turn, outcome, summary, output)
    }
    fn bump_iterations(&self, turn: i64) -> Result<i64> {
        TaskStore::bump_iterations(self, turn)
    }
    fn messages(&self, turn: i64) -> Result<Vec<Message>> {
        TaskStore::messages(self, turn)
    }
    fn append_message(&self, turn: i64, role: &str, content: &serde_json::Value) -> Result<i64> {
        TaskStore::append_message(self, turn, role, content)
    }
    fn append_reply(
        &self,
        turn: i64,
        content: &serde_json::Value,
        adapter: &str,
        model: &str,
        usage: &Usage,
    ) -> Result<i64> {
        TaskStore::append_reply(self, turn, content, adapter, model, usage)
    }
    fn tool_call(&self, turn: i64, call_id: &str) -> Result<Option<ToolCall>> {
        TaskStore::tool_call(self, turn, call_id)
    }
    fn record_tool_call(&self, call: &ToolCall) -> Result<bool> {
        TaskStore::record_tool_call(self, call)
    }
    fn tool_calls(&self, task: &str) -> Result<Vec<ToolCall>> {
        TaskStore::tool_calls(self, task)
    }
    fn record_decision(&self, task: &str, entry: &AuditEntry) -> Result<()> {
        TaskStore::record_decision(self, task, entry)
    }
    fn record_usage(&self, turn: i64, adapter: &str, model: &str, usage: &Usage) -> Result<()> {
        TaskStore::record_usage(self, turn, adapter, model, usage)
    }
    fn task_usage(&self, task: &str) -> Result<Usage> {
        TaskStore::task_usage(self, task)
    }
    fn set_trace(&self, task: &str, traceparent: &str) -> Result<String> {
        TaskStore::set_trace(self, task, traceparent)
    }
    fn start_run(&self, task: &str, trace: Option<&str>) -> Result<i64> {
        TaskStore::start_run(self, task, trace)
    }
    fn end_run(&self, task: &str, run: i64, status: &str) -> Result<()> {
        TaskStore::end_run(self, task, run, status)
    }
    fn record_model_call(&self, call: &ModelCall) -> Result<()> {
        TaskStore::record_model_call(self, call)
    }
}
