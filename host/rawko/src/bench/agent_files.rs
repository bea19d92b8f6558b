//! 1,000 agent files in all five dialects: what `rawko bench` and the `agents` and `table`
//! benchmarks discover.

/// Files in the benchmark's agent directory.
pub const FILES: usize = 1000;

/// One agent file per dialect; each copy gets its own name.
pub fn file(i: usize) -> (String, String) {
    match i % 5 {
        0 => (
            format!("a{i}.yaml"),
            format!(
                "name: a{i}\ndisplayName: Agent {i}\nwhenToUse: Benchmark agent {i}.\nsystemPrompt: |\n  You are agent {i}.\n  Read the code, then finish.\ntools:\n  allowed: [Read, Glob, Grep, LS, Bash]\n  blocked: [Write]\n  bashFilter:\n    allowedCommands: [\"git status\", \"cargo test *\"]\n    blockedPatterns: ['\\bgit\\s+push{i}\\b', '\\brm\\s+-rf{i}']\ntransitions:\n  onSuccess: {next}\n  onFailure: failed\n  onMaxIterations: escalated\nlimits:\n  maxIterations: 20\n  timeout: 600000\n",
                next = if i + 5 < FILES {
                    format!("a{}", i + 5)
                } else {
                    "done".into()
                }
            ),
        ),
        1 => (
            format!("a{i}.md"),
            format!(
                "---\nname: a{i}\nwhenToUse: Benchmark agent {i}.\ntools:\n  allowed: [Read, Grep]\ntransitions:\n  onSuccess: done\n---\n# Agent {i}\n\n## System Prompt\nYou are agent {i}. Read and report.\n\n## Notes\nNot part of the prompt.\n"
            ),
        ),
        2 => (
            format!("a{i}.md"),
            format!(
                "---\nname: a{i}\ndescription: Reviews pull requests.\nprovider: openai\nmodel: o3\nreasoning_effort: high\nmax_tokens: 16000\nallowed_tools: [file_read, grep_tool, bash]\nallowed_commands: [\"git *\", \"npm test\"]\n---\nYou review pull request {i}.\n"
            ),
        ),
        3 => (
            format!("d{i}/agent.agent.yaml"),
            format!(
                "apiVersion: docloom.io/v1alpha1\nkind: Agent\nmetadata:\n  name: a{i}\n  description: Analyzes repositories.\nspec:\n  tools:\n    - name: list_projects\n      description: Lists projects.\n      command: analyzer\n      args: [list_projects, \"${{SOURCE_PATH}}\"]\n    - name: get_file\n      description: Reads one file.\n      command: analyzer\n      args: [get_file, \"${{FILE_PATH}}\"]\n  parameters:\n    - name: file_path\n      type: string\n      required: false\n      description: A file.\n"
            ),
        ),
        _ => (
            format!("a{i}.md"),
            format!(
                "---\nname: a{i}\ndescription: Finds code.\ntools: Read, Grep, Glob\nmodel: sonnet\n---\nYou find code for task {i}.\n"
            ),
        ),
    }
}

/// Write the 1,000 files under `dir/.rawko/agents`; returns each file's path and text.
pub fn write(dir: &std::path::Path) -> std::io::Result<Vec<(String, String)>> {
    let agents = dir.join(".rawko/agents");
    let texts: Vec<_> = (0..FILES).map(file).collect();
    for (rel, text) in &texts {
        let p = agents.join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(p, text)?;
    }
    Ok(texts)
}
