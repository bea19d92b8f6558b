//! rawko's first-party file tools, compiled into one sandboxed component.
//!
//! Every tool reaches the filesystem only through the directories its call was granted; the
//! checks here exist to give the model a clear message, while the sandbox enforces the same
//! boundary whatever this code does. The tool logic is plain Rust over `std::fs`, so the same
//! functions also run natively (benchmarks compare the two).

mod candidates;
pub mod edit;
pub mod glob;
pub mod grep;
pub mod ls;
pub mod read;
mod text;
pub mod walk;
pub mod write;

pub use rawko_plugin_sdk::tool::{Access, Context, Grant, Tool, ToolError};

#[cfg(target_os = "wasi")]
rawko_plugin_sdk::export_tools!(
    read::Read,
    write::Write,
    edit::Edit,
    glob::Glob,
    grep::Grep,
    ls::Ls
);

// `rawko-plugin.yaml`: what the plugin is and needs, read by `rawko plugin inspect`.
rawko_plugin_sdk::manifest!();

#[cfg(test)]
mod testutil {
    use crate::{Access, Context, Grant};

    /// A temporary workspace holding `files`, and a context granting it read-write.
    pub fn setup(files: &[(&str, &[u8])]) -> (tempfile::TempDir, Context) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for (name, content) in files {
            let p = root.join(name);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, content).unwrap();
        }
        let cx = Context::new(
            &root,
            vec![Grant {
                path: root.clone(),
                access: Access::ReadWrite,
            }],
            1 << 20,
        );
        (dir, cx)
    }
}
