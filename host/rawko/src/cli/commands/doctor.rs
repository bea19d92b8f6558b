//! `rawko doctor`: what this machine's kernel offers the sandbox, and what each sandbox mode
//! enforces here.

use std::process::ExitCode;

use clap::Args;

use crate::cli::{Context, print_json, print_out};
use rawko_sandbox::probe::{Support, probe};
use rawko_sandbox::{Limits, Mode, pids};

/// Show what the kernel supports and what each sandbox mode enforces on this machine
#[derive(Debug, Args)]
#[command(
    after_help = "Every native command rawko starts (Bash, DocLoom command tools) runs in the \
    kernel sandbox of its agent's mode. The check runs the sandbox helper once. Exit status 1 \
    when the sandbox cannot work here, so native commands would be refused (unless \
    --no-sandbox)."
)]
pub struct DoctorCmd {
    /// Print the findings as JSON
    #[arg(long)]
    json: bool,
}

impl DoctorCmd {
    pub async fn execute(self, cx: &Context) -> anyhow::Result<ExitCode> {
        let store = store_state(cx).await;
        let launcher = std::env::current_exe()?;
        let support = probe(&launcher);
        let shared_namespaces = rawko_sandbox::namespaces::shared(&launcher).is_some();
        let helper = rawko_sandbox::helper_kind(&launcher);
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "unknown".into());
        let ok = support.missing_for(Mode::ReadOnly).is_none();
        if self.json {
            let modes: Vec<serde_json::Value> = Mode::ALL
                .iter()
                .map(|m| {
                    serde_json::json!({
                        "mode": m.as_str(),
                        "enforced": support.missing_for(*m).is_none(),
                        "missing": support.missing_for(*m),
                        "summary": summary(*m),
                    })
                })
                .collect();
            print_json(&serde_json::json!({
                "kernel": kernel,
                "landlock_abi": support.landlock_abi,
                "max_user_namespaces": support.max_user_namespaces,
                "helper": support.helper.as_ref().err(),
                "shared_namespaces": shared_namespaces,
                "helper_program": helper,
                "limits": Limits::default(),
                "process_limit": process_limit(),
                "traces": crate::cli::telemetry::state(),
                "store": store,
                "modes": modes,
            }))?;
        } else {
            print_out(&report(
                &kernel,
                &support,
                helper,
                shared_namespaces,
                &store,
            ))?;
        }
        Ok(if ok {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        })
    }
}

/// Where the task store is and, for a server, whether rawko can use it.
async fn store_state(cx: &Context) -> serde_json::Value {
    let location = match cx.store_location() {
        Ok(l) => l,
        Err(e) => return serde_json::json!({ "error": format!("{e:#}") }),
    };
    let backend = if location.is_shared() {
        "postgres"
    } else {
        "sqlite"
    };
    let mut v = serde_json::json!({ "backend": backend, "location": location.label() });
    if location.is_shared() {
        match rawko_store::AnyStore::open(&location).await {
            Ok(_) => v["usable"] = true.into(),
            Err(e) => {
                v["usable"] = false.into();
                v["error"] = e.to_string().into();
            }
        }
    }
    v
}

fn report(
    kernel: &str,
    s: &Support,
    helper: &str,
    shared_namespaces: bool,
    store: &serde_json::Value,
) -> String {
    let mut out = format!("kernel: Linux {kernel}\n");
    out.push_str(&match s.landlock_abi {
        Some(abi) => format!(
            "landlock: ABI {abi} (files{}{})\n",
            if abi >= 4 { ", TCP" } else { "" },
            if abi >= 6 {
                ", signals and abstract sockets"
            } else {
                ""
            }
        ),
        None => "landlock: not available\n".into(),
    });
    out.push_str(&match s.max_user_namespaces {
        Some(0) => "user namespaces: off (/proc/sys/user/max_user_namespaces is 0)\n".into(),
        Some(n) => format!("user namespaces: available (up to {n})\n"),
        None => "user namespaces: unknown\n".into(),
    });
    out.push_str(&match &s.helper {
        Ok(()) => format!("sandbox helper: works ({helper})\n"),
        Err(e) => format!("sandbox helper: fails: {e}\n"),
    });
    out.push_str(if shared_namespaces {
        "namespaces: one user and one empty network namespace, shared by rawko's commands\n"
    } else {
        "namespaces: made for each command (sharing them needs landlock ABI 6)\n"
    });
    let (mechanism, _, failed) = pids::in_force();
    out.push_str(&format!(
        "processes: at most {} at once per command and per task, by {}{}\n",
        pids::DEFAULT_MAX,
        mechanism.describe(),
        failed.map(|e| format!(" ({e})")).unwrap_or_default()
    ));
    let traces = crate::cli::telemetry::state();
    out.push_str(&match traces["endpoint"].as_str() {
        Some(e) => format!(
            "traces: sent to {e} (OTLP http/protobuf){}\n",
            if traces["content"] == true {
                ", with content (secrets redacted)"
            } else {
                ", without content"
            }
        ),
        None => "traces: off (no OTEL_EXPORTER_OTLP_ENDPOINT, no otel: in your config)\n".into(),
    });
    out.push_str(
        &match (store["backend"].as_str(), store["location"].as_str()) {
            (Some("postgres"), Some(at)) => match store["error"].as_str() {
                None => format!("task store: PostgreSQL {at} (reachable, schema checked)\n"),
                Some(e) => format!("task store: CANNOT BE USED: {e}\n"),
            },
            (Some(_), Some(at)) => format!("task store: SQLite {at}\n"),
            _ => format!(
                "task store: {}\n",
                store["error"].as_str().unwrap_or("unknown")
            ),
        },
    );
    out.push_str("\nmodes:\n");
    for m in Mode::ALL {
        let state = match s.missing_for(m) {
            None => "enforced".to_string(),
            Some(missing) => format!("NOT AVAILABLE: needs {missing}"),
        };
        out.push_str(&format!("  {m:<16} {state}\n      {}\n", summary(m)));
    }
    out
}

/// What bounds the processes of a command here, after the probe has run one.
fn process_limit() -> serde_json::Value {
    let (mechanism, groups, failed) = pids::in_force();
    serde_json::json!({
        "mechanism": mechanism,
        "max": pids::DEFAULT_MAX,
        "groups": groups,
        "why_not_cgroup": failed,
    })
}

fn summary(mode: Mode) -> String {
    let l = Limits::default();
    let limits = format!(
        "limits: {} s of CPU, {} GiB of memory, files up to {} GiB, {} open files, {} processes at once",
        l.cpu_secs,
        l.memory >> 30,
        l.file_size >> 30,
        l.open_files,
        l.processes
    );
    match mode {
        Mode::ReadOnly => format!(
            "reads: the workspace, system and toolchain paths (not ~/.ssh, ~/.aws, ~/.gnupg, \
             rawko's own directories, /etc/shadow); writes: a private temporary directory only; \
             network: off unless the agent is trusted and says `network: on`; rawko and other \
             processes: invisible (own PID namespace); every process it starts ends with it; \
             {limits}"
        ),
        Mode::WorkspaceWrite => format!(
            "as read-only, and writes inside the workspace, except .git/hooks, .git/config, \
             .git/info and .rawko, which stay read-only; {limits}"
        ),
        Mode::Full => "no kernel confinement: only from your own config or --no-sandbox".into(),
    }
}
