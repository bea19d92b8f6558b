//! Finding agents by name: the search path, an agent in effect, and the error for a name no agent
//! has, the same for every command that takes `--agent`.

use std::sync::Arc;

use crate::cli::{BadInput, Context};
use rawko_agents::Agent;
use rawko_agents::diag::printable;
use rawko_agents::registry::{Registry, SearchPath};

/// The error for a name no agent has, with the nearest name or the known ones.
pub(crate) fn unknown_agent(registry: &Registry, name: &str) -> BadInput {
    BadInput::new(registry.unknown(name))
}

/// An agent in effect, by name: an unknown name or a definition with errors is bad input.
pub(crate) fn usable_agent(cx: &Context, name: &str) -> Result<Arc<Agent>, BadInput> {
    let registry = Registry::load(&search_path(cx));
    let Some(entry) = registry.entry(name) else {
        return Err(unknown_agent(&registry, name));
    };
    registry.get(name).ok_or_else(|| {
        BadInput::new(printable(
            &format!(
                "agent '{name}' ({}) has errors; `rawko agents validate` shows them",
                entry.file.display
            ),
            false,
        ))
    })
}

pub(crate) fn search_path(cx: &Context) -> SearchPath {
    SearchPath::standard(cx.workspace(), &cx.dirs.config)
}
