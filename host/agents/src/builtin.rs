//! The default agents, shipped inside the binary.
//!
//! The files live in the repository's top-level `agents/` directory, where editors validate
//! them against the committed schema; they are compiled in with `include_str!`, so an installed
//! `rawko` is one self-contained file. `rawko init` copies them (and the schema they point to)
//! into a workspace's `.rawko/agents/`.

use std::path::{Path, PathBuf};

use super::{AgentOrigin, FileInfo, Loaded, load_text};

/// One shipped file: its name under `agents/` and its text.
#[derive(Debug, Clone, Copy)]
pub struct BuiltinFile {
    pub name: &'static str,
    pub text: &'static str,
}

/// The built-in agents, in the order a task usually meets them.
pub const AGENTS: &[BuiltinFile] = &[
    BuiltinFile {
        name: "pm.yaml",
        text: include_str!("../../../agents/pm.yaml"),
    },
    BuiltinFile {
        name: "researcher.yaml",
        text: include_str!("../../../agents/researcher.yaml"),
    },
    BuiltinFile {
        name: "planner.yaml",
        text: include_str!("../../../agents/planner.yaml"),
    },
    BuiltinFile {
        name: "developer.yaml",
        text: include_str!("../../../agents/developer.yaml"),
    },
    BuiltinFile {
        name: "tester.yaml",
        text: include_str!("../../../agents/tester.yaml"),
    },
    BuiltinFile {
        name: "reviewer.yaml",
        text: include_str!("../../../agents/reviewer.yaml"),
    },
    BuiltinFile {
        name: "debugger.yaml",
        text: include_str!("../../../agents/debugger.yaml"),
    },
];

/// The JSON Schema of the rawko YAML dialect, as committed (the built-in files point to it).
pub const SCHEMA: BuiltinFile = BuiltinFile {
    name: super::rawko::SCHEMA_PATH,
    text: include_str!("../../../agents/schema/rawko-agent.schema.json"),
};

/// Load every built-in agent. Their display paths are `<builtin>/NAME`.
pub fn load() -> Vec<Loaded> {
    AGENTS
        .iter()
        .map(|f| {
            let display = format!("<builtin>/{}", f.name);
            let path = Path::new("agents").join(f.name);
            load_text(
                f.text,
                FileInfo {
                    path: &path,
                    display: &display,
                    origin: AgentOrigin::Builtin,
                },
            )
        })
        .collect()
}

/// rawko's default command policy: the commands the built-in developer may run (reading the
/// repository, building, testing, formatting). An agent from a dialect where a bare `Bash`
/// means "any command" gets this instead.
pub fn default_commands() -> &'static [String] {
    static COMMANDS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    COMMANDS.get_or_init(|| {
        load()
            .into_iter()
            .filter_map(|l| l.agent)
            .find(|a| a.name == "developer")
            .and_then(|a| a.bash.allowed_commands.clone())
            .unwrap_or_default()
    })
}

/// Every file [`write_to`] writes, relative to the agents directory.
fn files() -> impl Iterator<Item = &'static BuiltinFile> {
    AGENTS.iter().chain(std::iter::once(&SCHEMA))
}

/// The files [`write_to`] would replace in `dir`.
pub fn existing(dir: &Path) -> Vec<PathBuf> {
    files()
        .map(|f| dir.join(f.name))
        .filter(|p| p.exists())
        .collect()
}

/// Write the built-in agents and the schema they point to into `dir` (for `rawko init`),
/// replacing what is there. Returns the paths written.
pub fn write_to(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    for f in files() {
        let path = dir.join(f.name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, f.text)?;
        written.push(path);
    }
    Ok(written)
}
