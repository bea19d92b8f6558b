//! `rawko ask`: one question to one adapter instance, the reply printed. Handy for checking a
//! setup, and for recording a conversation to replay.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use clap::Args;
use rawko_plugin_sdk::llm::Message;

use crate::cli::{BadInput, Context, print_err, print_json, print_out, terminal_safe};
use rawko_adapters::{Adapter, OpenError, OpenOptions, Recorder};
use rawko_runtime::progress::{NoProgress, ProgressSink};

/// Ask an adapter one question and print the reply
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    rawko ask --adapter anthropic 'Say hello in five words'\n  \
    rawko ask --adapter local --record hello.jsonl 'What is 2 + 2?'\n\n\
    On a terminal the reply is shown as it streams in; --no-stream asks for it in one piece.")]
pub struct AskCmd {
    /// The question
    prompt: String,
    /// The adapter instance to ask (see `rawko adapters list`) [default: defaults.adapter from
    /// the config]
    #[arg(long, value_name = "NAME")]
    adapter: Option<String>,
    /// A system prompt
    #[arg(long, value_name = "TEXT", default_value = "")]
    system: String,
    /// Ask for the reply in one piece instead of streamed
    #[arg(long)]
    no_stream: bool,
    /// Write the exchange to FILE, in the format the replay adapter plays back (secrets redacted)
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
    /// Print JSON: {"ok", "adapter", "model", "text", "content", "stop_reason", "usage", "http",
    /// "duration_ms"} or {"ok": false, "error": {"code", "message"}}
    #[arg(long)]
    json: bool,
}

/// Prints text as it streams in, made safe for a terminal.
struct Live {
    printed: AtomicBool,
    ends_with_newline: AtomicBool,
}

impl ProgressSink for Live {
    fn text(&self, delta: &str) {
        // Model output must not move the cursor or restyle the terminal.
        let safe = terminal_safe(delta);
        let mut out = std::io::stdout().lock();
        if out
            .write_all(safe.as_bytes())
            .and_then(|()| out.flush())
            .is_ok()
            && !safe.is_empty()
        {
            self.printed.store(true, Ordering::Relaxed);
            self.ends_with_newline
                .store(safe.ends_with('\n'), Ordering::Relaxed);
        }
    }

    fn thinking(&self, _delta: &str) {}
}

impl AskCmd {
    pub async fn execute(self, cx: &Context) -> anyhow::Result<ExitCode> {
        let layers = cx.config_layers()?;
        let instances = cx.adapter_instances()?;
        let name = match &self.adapter {
            Some(n) => n.clone(),
            None => layers
                .merged()
                .defaults
                .and_then(|d| d.adapter)
                .ok_or_else(|| {
                    BadInput::new(format!(
                        "name an adapter with --adapter (available: {})",
                        instances.keys().cloned().collect::<Vec<_>>().join(", ")
                    ))
                })?,
        };
        let Some(instance) = instances.get(&name).cloned() else {
            return Err(BadInput::new(format!(
                "no adapter named `{name}` (available: {})",
                instances.keys().cloned().collect::<Vec<_>>().join(", ")
            ))
            .into());
        };
        let recorder =
            Recorder::for_flag(self.record.as_deref()).map_err(|e| BadInput::new(e.to_string()))?;
        let rt = cx.runtime()?;
        let env = |k: &str| std::env::var(k).ok();
        let mut adapter = match Adapter::open(&rt, instance, &env, OpenOptions::default()).await {
            Ok(a) => a,
            Err(e @ OpenError::Load(_)) => return Err(e.into()),
            Err(e) => {
                self.fail(&name, "setup", &e.to_string(), None)?;
                return Ok(ExitCode::from(1));
            }
        };
        if let Some(r) = recorder {
            adapter.record_to(r);
        }
        let mut request = adapter.request(&self.system, vec![Message::user(&self.prompt)], vec![]);
        request.stream = !self.no_stream;
        let live = Arc::new(Live {
            printed: AtomicBool::new(false),
            ends_with_newline: AtomicBool::new(false),
        });
        let show_live = request.stream && !self.json && std::io::stdout().is_terminal();
        let progress: Arc<dyn ProgressSink> = if show_live {
            live.clone()
        } else {
            Arc::new(NoProgress)
        };
        let started = Instant::now();
        let result = adapter.complete(&rt, request, progress).await;
        let stats = adapter.http_stats();
        let http = serde_json::json!({
            "requests": stats.requests,
            "attempts": stats.attempts,
            "retries": stats.retries,
            "redirects": stats.redirects,
        });
        match result {
            Ok(reply) => {
                if self.json {
                    print_json(&serde_json::json!({
                        "ok": true,
                        "adapter": name,
                        "model": reply.model,
                        "text": reply.text(),
                        "content": reply.content,
                        "stop_reason": reply.stop_reason.as_str(),
                        "usage": reply.usage,
                        "http": http,
                        "duration_ms": started.elapsed().as_secs_f64() * 1000.0,
                    }))?;
                } else if live.printed.load(Ordering::Relaxed) {
                    if !live.ends_with_newline.load(Ordering::Relaxed) {
                        print_out("\n")?;
                    }
                } else {
                    print_out(&reply.text())?;
                }
                Ok(ExitCode::SUCCESS)
            }
            Err(e) => {
                self.fail(&name, e.code(), &e.to_string(), Some(http))?;
                Ok(ExitCode::from(1))
            }
        }
    }

    fn fail(
        &self,
        adapter: &str,
        code: &str,
        message: &str,
        http: Option<serde_json::Value>,
    ) -> std::io::Result<()> {
        if self.json {
            print_json(&serde_json::json!({
                "ok": false,
                "adapter": adapter,
                "error": {"code": code, "message": message},
                "http": http,
            }))
        } else {
            print_err(&format!("error: adapter {adapter}: {message}"))
        }
    }
}
