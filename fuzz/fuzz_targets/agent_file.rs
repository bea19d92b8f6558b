//! One agent file, in every dialect rawko reads: the first byte picks where the file is (which
//! decides between Claude Code, Copilot, opencode, rawko's own and DocLoom), the rest is its
//! text. Invariants: no panic; every diagnostic has a position (line and column from 1) and
//! renders as one bounded line with no control characters; a file that yields an agent has no
//! errors; the agent's name is a valid agent name.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use rawko_agents::{AgentOrigin, FileInfo, load_text, validate};

const PLACES: &[&str] = &[
    ".rawko/agents/a.yaml",
    ".rawko/agents/a.md",
    ".rawko/agents/d/agent.agent.yaml",
    ".claude/agents/team/a.md",
    ".github/agents/a.agent.md",
    ".opencode/agent/a.md",
];

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let path = PLACES[usize::from(pick) % PLACES.len()];
    // The host's tools as rawko knows them when it reads agents (this target does not link them).
    rawko_agents::catalogue::install_stand_ins();
    let loaded = load_text(
        text,
        FileInfo {
            path: Path::new(path),
            display: path,
            origin: AgentOrigin::Workspace,
        },
    );
    for d in &loaded.diagnostics {
        assert!(d.line >= 1 && d.column >= 1, "no position: {d:?}");
        let line = d.to_string();
        assert!(!line.contains(['\n', '\r', '\u{1b}', '\0']), "{line:?}");
        assert!(
            line.chars().count() <= 8192,
            "a diagnostic of {} chars",
            line.len()
        );
    }
    if let Some(agent) = &loaded.agent {
        assert!(!loaded.has_errors());
        assert!(validate::is_valid_name(&agent.name), "{:?}", agent.name);
    }
});
