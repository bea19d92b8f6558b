//! `rawko adapters check`: whether an adapter instance can work, before a run depends on it.
//!
//! Each instance is checked in the order a run would fail: its configuration, its credential,
//! its plugin, and (unless offline) its endpoint, through the same grant, resolver and
//! credential injection a completion uses. Nothing falls back to another adapter.

use rawko_plugin_sdk::recording;

use super::{Adapter, AdapterInstance, CredentialSpec, OpenError, OpenOptions};
use rawko_capability::http::{HttpError, Outgoing};
use rawko_runtime::Runtime;

/// One thing found about an instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub ok: bool,
    /// `credential`, `plugin`, `endpoint`, `recording`, `grant`.
    pub what: &'static str,
    pub message: String,
}

/// All findings about one instance.
#[derive(Debug, Clone)]
pub struct Report {
    pub adapter: String,
    pub findings: Vec<Finding>,
}

impl Report {
    pub fn ok(&self) -> bool {
        self.findings.iter().all(|f| f.ok)
    }
}

fn finding(ok: bool, what: &'static str, message: impl Into<String>) -> Finding {
    Finding {
        ok,
        what,
        message: message.into(),
    }
}

/// Check `instance`. `offline` skips the request to its endpoint.
pub async fn check(
    rt: &Runtime,
    instance: &AdapterInstance,
    env: &dyn Fn(&str) -> Option<String>,
    offline: bool,
    options: OpenOptions,
) -> Report {
    let mut findings = Vec::new();
    for w in &instance.withheld {
        findings.push(finding(false, "grant", format!("withheld: {w}")));
    }
    match &instance.credential {
        CredentialSpec::None => {}
        CredentialSpec::Env { var, .. } => match env(var) {
            Some(v) if !v.trim().is_empty() => {
                findings.push(finding(true, "credential", format!("${var} is set")))
            }
            _ => findings.push(finding(
                false,
                "credential",
                format!("${var} is not set; it must hold the API key"),
            )),
        },
        CredentialSpec::Withheld { reason, .. } => {
            findings.push(finding(false, "credential", reason.clone()))
        }
    }
    if let Some(rec) = &instance.recording {
        match std::fs::read_to_string(rec) {
            Ok(text) => match recording::parse(&text) {
                Ok(ex) => findings.push(finding(
                    true,
                    "recording",
                    format!("{}: {} exchanges", rec.display(), ex.len()),
                )),
                Err(e) => findings.push(finding(
                    false,
                    "recording",
                    format!("{}: {e}", rec.display()),
                )),
            },
            Err(e) => findings.push(finding(
                false,
                "recording",
                format!("{}: {e}", rec.display()),
            )),
        }
    }
    let adapter = match Adapter::open(rt, instance.clone(), env, options).await {
        Ok(a) => {
            findings.push(finding(
                true,
                "plugin",
                format!("{} loads", instance.plugin.name()),
            ));
            a
        }
        Err(OpenError::Load(e)) => {
            findings.push(finding(false, "plugin", e.to_string()));
            return report(instance, findings);
        }
        // Reported above; nothing to reach the endpoint with.
        Err(OpenError::MissingCredential { .. } | OpenError::Withheld { .. }) => {
            return report(instance, findings);
        }
        Err(e) => {
            findings.push(finding(false, "setup", e.to_string()));
            return report(instance, findings);
        }
    };
    if offline {
        return report(instance, findings);
    }
    if let (Some(http), Some((path, headers))) = (adapter.http(), instance.plugin.check()) {
        let url = format!("{}/{path}", instance.base_url.trim_end_matches('/'));
        let req = Outgoing {
            method: reqwest::Method::GET,
            url: url.clone(),
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            body: Default::default(),
            timeout: Some(std::time::Duration::from_secs(20).min(instance.timeout)),
        };
        let f = match http.send(req).await {
            Ok(resp) => match resp.status {
                200..=299 => finding(true, "endpoint", format!("{url} answered {}", resp.status)),
                401 | 403 => finding(
                    false,
                    "endpoint",
                    format!("{url} refused the credential ({})", resp.status),
                ),
                s => finding(
                    true,
                    "endpoint",
                    format!("{url} is reachable (it answered {s})"),
                ),
            },
            Err(HttpError::Denied(m)) => finding(false, "endpoint", format!("denied: {m}")),
            Err(e) => finding(false, "endpoint", format!("{url}: {e}")),
        };
        findings.push(f);
    }
    report(instance, findings)
}

fn report(instance: &AdapterInstance, findings: Vec<Finding>) -> Report {
    Report {
        adapter: instance.name.clone(),
        findings,
    }
}
