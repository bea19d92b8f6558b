//! `rawko store export` and `rawko store import`: tasks moved between stores as JSON lines.

use std::io::{BufReader, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Args, Subcommand};

use crate::cli::{BadInput, Context};
use rawko_store::transfer::TransferError;

/// Move tasks between stores (this machine's and another's, or another backend's)
#[derive(Debug, Args)]
#[command(
    long_about = "Move tasks between stores (this machine's and another's, or another \
backend's).

The store is the workspace's SQLite file, or the PostgreSQL server RAWKO_STORE_URL (or \
`store: {url}` in your own config) names, which holds the tasks of every workspace that uses it. \
To move tasks from one to the other, export with one and import with the other:

  rawko store export -o tasks.jsonl
  RAWKO_STORE_URL=postgres://me@db.example/rawko rawko store import tasks.jsonl"
)]
pub struct StoreCmd {
    #[command(subcommand)]
    action: StoreAction,
}

#[derive(Debug, Subcommand)]
enum StoreAction {
    /// Write the store's tasks (or one) as JSON lines, every row with its id
    Export {
        /// Only this task (its id, or a unique prefix)
        #[arg(long)]
        task: Option<String>,
        /// Write to this file (replaced only once the export is whole) [default: standard
        /// output]
        #[arg(long, short)]
        output: Option<PathBuf>,
    },
    /// Read an export into the store, all of it or (on any error) nothing
    Import {
        /// The export, or `-` for standard input
        file: PathBuf,
    },
}

impl StoreCmd {
    pub async fn execute(self, cx: &Context) -> anyhow::Result<ExitCode> {
        let store = cx.open_store().await?;
        match self.action {
            StoreAction::Export { task, output } => {
                // A prefix names the task as `tasks show` takes it.
                let id = match &task {
                    Some(t) => Some(
                        store
                            .task(t)
                            .await
                            .map_err(|e| BadInput::new(e.to_string()))?
                            .id,
                    ),
                    None => None,
                };
                let moved = match &output {
                    None => {
                        let stdout = std::io::stdout();
                        let mut out = std::io::BufWriter::new(stdout.lock());
                        store
                            .export(id.as_deref(), &mut out)
                            .await
                            .map_err(transfer_error)?
                    }
                    Some(path) => {
                        let dir = match path.parent() {
                            Some(d) if !d.as_os_str().is_empty() => d,
                            _ => std::path::Path::new("."),
                        };
                        let mut file = tempfile::NamedTempFile::new_in(dir)
                            .with_context(|| format!("cannot write in {}", dir.display()))?;
                        let moved = {
                            let mut out = std::io::BufWriter::new(file.as_file_mut());
                            let moved = store
                                .export(id.as_deref(), &mut out)
                                .await
                                .map_err(transfer_error)?;
                            out.flush()
                                .with_context(|| format!("writing {}", path.display()))?;
                            moved
                        };
                        file.as_file()
                            .sync_all()
                            .with_context(|| format!("writing {}", path.display()))?;
                        file.persist(path)
                            .with_context(|| format!("writing {}", path.display()))?;
                        moved
                    }
                };
                eprintln!(
                    "exported {} task(s), {} row(s){}",
                    moved.tasks.len(),
                    moved.rows,
                    output
                        .as_ref()
                        .map(|p| format!(" to {}", p.display()))
                        .unwrap_or_default()
                );
            }
            StoreAction::Import { file } => {
                let moved = if file.as_os_str() == "-" {
                    let stdin = std::io::stdin();
                    store
                        .import(&mut stdin.lock())
                        .await
                        .map_err(transfer_error)?
                } else {
                    let f = std::fs::File::open(&file)
                        .map_err(|e| BadInput::new(format!("{}: {e}", file.display())))?;
                    store
                        .import(&mut BufReader::new(f))
                        .await
                        .map_err(|e| match e {
                            TransferError::Format { line, message } => BadInput::new(format!(
                                "{}:{line}: {message}; nothing was imported",
                                file.display()
                            ))
                            .into(),
                            e => transfer_error(e),
                        })?
                };
                eprintln!(
                    "imported {} task(s), {} row(s) into {}",
                    moved.tasks.len(),
                    moved.rows,
                    store.label()
                );
                for t in &moved.tasks {
                    println!("{t}");
                }
            }
        }
        Ok(ExitCode::SUCCESS)
    }
}

/// What the user handed rawko is bad input (exit status 2); a store that fails is not.
fn transfer_error(e: TransferError) -> anyhow::Error {
    match e {
        TransferError::Format { line, message } => BadInput::new(format!(
            "line {line} of the export: {message}; nothing was imported"
        ))
        .into(),
        TransferError::NoTask(_) => BadInput::new(e.to_string()).into(),
        e => e.into(),
    }
}
