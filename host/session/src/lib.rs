//! A run session: the engine's traits bound to the real things, assembled once per task.
//!
//! `rawko-fsm` knows agents, models, tools, external agents and the task store only through
//! traits; this crate composes their implementations: the agent registry (a snapshot: a run
//! keeps the agents it started with), the adapter instances from `config.yaml` opened on first
//! use ([`llms`]), the wasm tool plugins, the host tools and MCP servers under each agent's own
//! capabilities ([`tools`]), external coding agents over ACP or their command lines
//! ([`external`]), and the workspace's trust decision.
//!
//! Capabilities are decided here, per call, from the agent definition and the trust decision,
//! never from anything a model or a tool wrote: an agent that cannot write gets read-only
//! grants; an agent from an untrusted workspace's `.rawko/agents` gets read-only tools only.

pub mod external;
pub mod llms;
pub mod run;
pub mod tools;

use std::sync::Arc;

use rawko_agents::model::Agent;
use rawko_agents::registry::Registry;
use rawko_fsm::AgentLookup;
use rawko_fsm::events::EventSink;

pub use llms::{AdapterLlm, SessionLlms, agent_model, instance_name};
pub use tools::{
    MAX_RESULT_CHARS, SessionTools, command_tool_spec, read_only_tools, tool_budget,
    untrusted_agent,
};

/// An event sink the adapter's progress callbacks can hold.
pub type SharedSink = Arc<dyn EventSink + Send + Sync>;

/// The agents a run works with: a registry snapshot.
pub struct Agents(pub Registry);

impl AgentLookup for Agents {
    fn agent(&self, name: &str) -> Option<Arc<Agent>> {
        self.0.get(name)
    }
}
