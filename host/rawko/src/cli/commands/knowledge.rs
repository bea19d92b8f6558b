//! `rawko knowledge sync`, `status` and `query`: the repository's own knowledge, indexed in
//! `.rawko/knowledge.db` and searched by words (BM25), fused with embeddings when an adapter
//! provides them.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::json;

use crate::cli::{BadInput, Context, print_err, print_json, print_out};
use rawko_knowledge::{Embedder, Index, KnowledgeConfig, KnowledgeError, Progress, registry};

/// Index and search this repository's docs and source
#[derive(Debug, Args)]
#[command(
    long_about = "Index and search this repository's docs and source.\n\n\
The index lives in .rawko/knowledge.db (ignored by git). What is indexed, and how files are cut \
into chunks, comes from knowledge.yaml at the repository root (or .rawko/knowledge.yaml); \
without one, the repository's documentation and source files are indexed, .gitignore \
respected. Queries are searched as words (BM25); when knowledge.yaml names an adapter under \
`embeddings:` and the workspace is trusted, chunks are embedded too and the two rankings are \
fused.",
    after_help = "Examples:\n  rawko knowledge sync\n  rawko knowledge query \"how are plugins installed\" -k 5\n  rawko knowledge query --global retry backoff --json"
)]
pub struct KnowledgeCmd {
    #[command(subcommand)]
    action: Action,
}

#[derive(Debug, Subcommand)]
enum Action {
    /// Bring the index up to date: only files whose content changed are read again
    Sync {
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
    /// What the index holds and when it was last synced
    Status {
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
    /// The passages that best match TEXT, best first
    Query {
        /// What to look for, as words (no query syntax)
        #[arg(required = true, num_args = 1.., value_name = "TEXT")]
        text: Vec<String>,
        /// How many results
        #[arg(short, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=100))]
        k: u16,
        /// Query another indexed repository instead of this workspace
        #[arg(long, value_name = "PATH", conflicts_with = "global")]
        repo: Option<PathBuf>,
        /// Query every repository indexed on this machine
        #[arg(short = 'g', long)]
        global: bool,
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
}

impl KnowledgeCmd {
    pub async fn execute(self, cx: &Context) -> anyhow::Result<ExitCode> {
        match self.action {
            Action::Sync { json } => {
                let root = cx.workspace().to_path_buf();
                let config = load_config(&root)?;
                let (embedder, mut embed_error) = match embedder(cx, &root, &config, true).await {
                    Ok(e) => (e, None),
                    Err(e) if e.downcast_ref::<BadInput>().is_some() => return Err(e),
                    Err(e) => (None, Some(format!("{e:#}"))),
                };
                let show = !json && std::io::stderr().is_terminal();
                let (mut report, status, embedded) = blocking(move || {
                    let mut index = Index::open(&root)?;
                    announce(&index);
                    let mut bar = Bar::new(show);
                    let report = index.sync(&config, None, &mut bar)?;
                    // Words first: what is committed stays searchable whatever the adapter does.
                    let embedded = match embedder {
                        Some(mut e) => index.embed_missing(&mut e, &mut bar).map_err(|e| match e {
                            KnowledgeError::Embedding(m) => m,
                            other => other.to_string(),
                        }),
                        None => Ok(0),
                    };
                    bar.finish();
                    Ok((report, index.status()?, embedded))
                })
                .await?;
                match embedded {
                    Ok(n) => report.embedded = n,
                    Err(e) => embed_error = Some(e),
                }
                if let Err(e) = registry::add(&cx.dirs.data, cx.workspace()) {
                    tracing::warn!("cannot list this repository for --global queries: {e}");
                }
                if json {
                    let mut value = serde_json::to_value(&report)?;
                    value["elapsed_ms"] = json!(report.elapsed.as_millis() as u64);
                    value["status"] = serde_json::to_value(&status)?;
                    value["embedding_error"] = json!(embed_error);
                    print_json(&value)?;
                } else {
                    print_out(&sync_summary(&report, &status))?;
                }
                if let Some(e) = embed_error {
                    print_err(&format!(
                        "error: embeddings: {e}\nThe index is complete for searching by words; the next sync embeds what is missing."
                    ))?;
                    return Ok(ExitCode::from(1));
                }
                Ok(ExitCode::SUCCESS)
            }
            Action::Status { json } => {
                let root = cx.workspace().to_path_buf();
                let config = load_config(&root)?;
                let status = blocking(move || match Index::open_existing(&root)? {
                    Some(index) => {
                        announce(&index);
                        index.status().map(Some)
                    }
                    None => Ok(None),
                })
                .await?;
                let Some(status) = status else {
                    if json {
                        print_json(&json!({ "indexed": false }))?;
                    } else {
                        print_out(
                            "No knowledge index in this workspace yet (build one with `rawko knowledge sync`).",
                        )?;
                    }
                    return Ok(ExitCode::SUCCESS);
                };
                if json {
                    let mut value = serde_json::to_value(&status)?;
                    value["indexed"] = json!(true);
                    value["config"] = json!(config.source);
                    print_json(&value)?;
                } else {
                    print_out(&status_text(cx.workspace(), &status, &config))?;
                }
                Ok(ExitCode::SUCCESS)
            }
            Action::Query {
                text,
                k,
                repo,
                global,
                json,
            } => {
                let text = text.join(" ");
                if rawko_knowledge::query_words(&text).is_empty() {
                    return Err(BadInput::new(
                        "the query has no words to search for (letters or digits)",
                    )
                    .into());
                }
                let roots: Vec<(PathBuf, bool)> = if global {
                    let repos = registry::list(&cx.dirs.data);
                    if repos.is_empty() {
                        return Err(BadInput::new(
                            "no repository is indexed on this machine yet (run `rawko knowledge sync` in one)",
                        )
                        .into());
                    }
                    repos.into_iter().map(|r| (r, true)).collect()
                } else if let Some(repo) = repo {
                    let root = repo
                        .canonicalize()
                        .map_err(|e| BadInput::new(format!("--repo {}: {e}", repo.display())))?;
                    vec![(root, true)]
                } else {
                    vec![(cx.workspace().to_path_buf(), false)]
                };
                let several = global;
                let mut hits = Vec::new();
                for (root, other) in roots {
                    if other && !root.join(rawko_knowledge::DB_FILE).is_file() {
                        let msg = format!(
                            "{} has no knowledge index (run `rawko knowledge sync` there)",
                            root.display()
                        );
                        if several {
                            print_err(&format!("warning: {msg}; skipped"))?;
                            continue;
                        }
                        return Err(BadInput::new(msg).into());
                    }
                    let config = load_config(&root)?;
                    let embedder = match embedder(cx, &root, &config, false).await {
                        Ok(e) => e,
                        Err(e) => {
                            print_err(&format!(
                                "warning: embeddings: {e:#}; searching by words only"
                            ))?;
                            None
                        }
                    };
                    let text = text.clone();
                    let k = usize::from(k);
                    let show = !json && std::io::stderr().is_terminal();
                    let root2 = root.clone();
                    let (mut found, warning) = blocking(move || {
                        let mut index = Index::open(&root2)?;
                        announce(&index);
                        // What changed since the last query is indexed first (words only): a
                        // stat of each file, none read unless its stamp moved. A first query
                        // builds the index.
                        let mut bar = Bar::new(show);
                        index.refresh(&config, &mut bar)?;
                        bar.finish();
                        let Some(mut embedder) = embedder else {
                            return Ok((index.query(&text, k, None)?, None));
                        };
                        match index.query(&text, k, Some(&mut embedder)) {
                            Err(KnowledgeError::Embedding(e)) => {
                                Ok((index.query(&text, k, None)?, Some(e)))
                            }
                            other => Ok((other?, None)),
                        }
                    })
                    .await?;
                    if let Some(w) = warning {
                        print_err(&format!("warning: embeddings: {w}; searched by words only"))?;
                    }
                    if several {
                        for h in &mut found {
                            h.repo = Some(root.clone());
                        }
                    }
                    hits.extend(found);
                }
                if several {
                    hits.sort_by(|a, b| b.score.total_cmp(&a.score));
                    hits.truncate(usize::from(k));
                }
                if json {
                    print_json(&json!({ "hits": hits }))?;
                } else if hits.is_empty() {
                    print_out("No matches.")?;
                } else {
                    print_out(&hits_text(&hits))?;
                }
                Ok(ExitCode::SUCCESS)
            }
        }
    }
}

/// Say on stderr when opening upgraded or rebuilt the index: the sync that follows reads every
/// file, and that should not look like a hang.
fn announce(index: &Index) {
    if let Some(line) = index.notice() {
        let _ = print_err(&format!("knowledge: {line}"));
    }
}

/// `knowledge.yaml` of `root`; a broken one is bad input.
fn load_config(root: &Path) -> anyhow::Result<KnowledgeConfig> {
    KnowledgeConfig::load(root).map_err(|e| BadInput::new(e.to_string()).into())
}

/// Run index work off the async thread, turning its errors into the command's: a refused path
/// or an unusable query is bad input.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, KnowledgeError> + Send + 'static,
) -> anyhow::Result<T> {
    match tokio::task::spawn_blocking(f).await? {
        Ok(v) => Ok(v),
        Err(e @ (KnowledgeError::Refused(_) | KnowledgeError::Query(_))) => {
            Err(BadInput::new(e.to_string()).into())
        }
        Err(e) => Err(e.into()),
    }
}

/// The embedder `config` asks for, if it may be used: the adapter must exist and the
/// repository must be trusted (its chunks go to that adapter's provider). `warn` says so on
/// stderr when it is withheld.
async fn embedder(
    cx: &Context,
    root: &Path,
    config: &KnowledgeConfig,
    warn: bool,
) -> anyhow::Result<Option<AdapterEmbedder>> {
    let Some(wanted) = &config.embeddings else {
        return Ok(None);
    };
    let trusted = if root == cx.workspace() {
        cx.workspace_trust().is_trusted()
    } else {
        matches!(
            rawko_config::trust::TrustStore::new(&cx.dirs.data).status(root),
            Ok(rawko_config::trust::Status::Trusted(_))
        )
    };
    if !trusted {
        if warn {
            print_err(&format!(
                "warning: {} asks for embeddings from the adapter `{}`, but {} is not trusted, so \
                 nothing is sent to it; the index is searched by words only (`rawko trust` \
                 to allow it)",
                config
                    .source
                    .as_deref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_else(|| "knowledge.yaml".into()),
                wanted.adapter,
                root.display()
            ))?;
        }
        return Ok(None);
    }
    AdapterEmbedder::new(cx, &wanted.adapter).await.map(Some)
}

/// Embeddings from an adapter instance, called from the blocking pool.
struct AdapterEmbedder {
    adapter: Arc<rawko_adapters::Adapter>,
    runtime: Arc<rawko_runtime::Runtime>,
    handle: tokio::runtime::Handle,
    model: String,
}

impl AdapterEmbedder {
    async fn new(cx: &Context, name: &str) -> anyhow::Result<AdapterEmbedder> {
        let instances = cx.adapter_instances()?;
        let Some(instance) = instances.get(name) else {
            let known: Vec<&str> = instances.keys().map(String::as_str).collect();
            return Err(BadInput::new(format!(
                "knowledge.yaml: embeddings.adapter `{name}` is not an adapter instance (known: {})",
                known.join(", ")
            ))
            .into());
        };
        let runtime = Arc::new(cx.runtime()?);
        let env = |k: &str| std::env::var(k).ok();
        let adapter = rawko_adapters::Adapter::open(
            &runtime,
            instance.clone(),
            &env,
            rawko_adapters::OpenOptions::default(),
        )
        .await?;
        let adapter = Arc::new(adapter);
        Ok(AdapterEmbedder {
            model: format!("{}/{}", instance.name, instance.model),
            adapter,
            runtime,
            handle: tokio::runtime::Handle::current(),
        })
    }
}

impl Embedder for AdapterEmbedder {
    fn model(&self) -> &str {
        &self.model
    }

    fn embed(&mut self, inputs: &[String]) -> Result<Vec<Vec<f32>>, String> {
        let adapter = self.adapter.clone();
        let runtime = self.runtime.clone();
        let inputs = inputs.to_vec();
        self.handle
            .block_on(async move { adapter.embed(&runtime, inputs).await })
            .map(|e| e.vectors)
            .map_err(|e| e.to_string())
    }
}

/// A progress bar on stderr, when it is a terminal.
struct Bar(Option<ProgressBar>);

impl Bar {
    fn new(show: bool) -> Bar {
        // Drawn from the first phase on, once it has a style and a length.
        Bar(show.then(|| ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden())))
    }

    fn finish(&self) {
        if let Some(pb) = &self.0 {
            pb.finish_and_clear();
        }
    }
}

impl Progress for Bar {
    fn phase(&mut self, name: &str, total: u64) {
        if let Some(pb) = &self.0 {
            pb.set_length(total);
            pb.set_position(0);
            pb.set_style(
                ProgressStyle::with_template("{msg:>10} [{bar:30}] {pos}/{len} ({eta})")
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> "),
            );
            pb.set_message(name.to_string());
            if pb.is_hidden() {
                pb.set_draw_target(ProgressDrawTarget::stderr());
            }
        }
    }

    fn advance(&mut self, n: u64) {
        if let Some(pb) = &self.0 {
            pb.inc(n);
        }
    }
}

fn sync_summary(r: &rawko_knowledge::SyncReport, s: &rawko_knowledge::Status) -> String {
    let mut out = format!(
        "Indexed {}: {} new, {} changed, {} removed, {} unchanged files; {} chunks written",
        s.root.display(),
        r.new,
        r.changed,
        r.removed,
        r.unchanged,
        r.chunks_written
    );
    if r.embedded > 0 {
        out.push_str(&format!(", {} embedded", r.embedded));
    }
    out.push_str(&format!(" ({:.2} s).", r.elapsed.as_secs_f64()));
    let skipped: Vec<String> = [
        (r.skipped_binary, "binary"),
        (r.skipped_large, "too large"),
        (r.skipped_unreadable, "unreadable"),
    ]
    .iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, why)| format!("{n} {why}"))
    .collect();
    if !skipped.is_empty() {
        out.push_str(&format!("\nSkipped: {}.", skipped.join(", ")));
    }
    if r.rechunked {
        out.push_str("\nknowledge.yaml changed since the last sync: every file was cut again.");
    }
    out.push_str(&format!(
        "\nThe index holds {} files in {} chunks.",
        s.files, s.chunks
    ));
    out
}

fn status_text(ws: &Path, s: &rawko_knowledge::Status, config: &KnowledgeConfig) -> String {
    let db = s.database.strip_prefix(ws).unwrap_or(&s.database);
    let mut out = format!(
        "index:      {} ({} KiB)\nfiles:      {}\nchunks:     {}\n",
        db.display(),
        s.bytes.div_ceil(1024),
        s.files,
        s.chunks
    );
    out.push_str(&format!(
        "last sync:  {}\n",
        match (&s.last_sync, s.interrupted) {
            (_, true) => "interrupted (the next `rawko knowledge sync` completes it)".to_string(),
            (Some(t), false) => t.clone(),
            (None, false) => "never".to_string(),
        }
    ));
    for (model, n) in &s.embeddings {
        out.push_str(&format!("embeddings: {n} vectors from {model}\n"));
    }
    out.push_str(&format!(
        "config:     {}",
        match &config.source {
            Some(p) => p.strip_prefix(ws).unwrap_or(p).display().to_string(),
            None => "none (the repository's docs and source)".to_string(),
        }
    ));
    out
}

/// Lines of a chunk shown per hit; `--json` has the whole text.
const SHOWN_LINES: usize = 6;

fn hits_text(hits: &[rawko_knowledge::Hit]) -> String {
    let mut out = String::new();
    for (i, h) in hits.iter().enumerate() {
        let place = match &h.repo {
            Some(r) => format!("{}/{}", r.display(), h.path),
            None => h.path.clone(),
        };
        out.push_str(&format!(
            "{}. {}:{}-{}  (score {:.3})\n",
            i + 1,
            rawko_text::line(&place, 200),
            h.start_line,
            h.end_line,
            h.score
        ));
        let lines: Vec<&str> = h.text.lines().collect();
        for l in lines.iter().take(SHOWN_LINES) {
            out.push_str(&format!("   {}\n", rawko_text::line(l, 160)));
        }
        if lines.len() > SHOWN_LINES {
            out.push_str(&format!("   … {} more lines\n", lines.len() - SHOWN_LINES));
        }
    }
    out
}
