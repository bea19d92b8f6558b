//! What install and update share: the trust flags, signature checking, showing a plugin's
//! requests with their risks, and turning the user's answer into grants.
//!
//! Grants come only from here: the `--yes` and `--grant` flags or the user's answer on the
//! terminal. Nothing the plugin, a workspace or a model says reaches this code.

use std::io::IsTerminal;
use std::path::PathBuf;

use clap::Args;

use crate::cli::trust::ask;
use crate::cli::{BadInput, Context};
use rawko_config::{self as config, Config};
use rawko_distribution::signature::{self, KeyRing, Signature, Signer, TrustedKey, Verdict};
use rawko_distribution::{Examined, Fetched, Grant, Manifest};

/// How much trust a plugin needs.
#[derive(Debug, Args)]
pub struct TrustArgs {
    /// The plugin's minisign signature [default: SOURCE.minisig, or the OCI manifest's]
    #[arg(long, value_name = "FILE")]
    pub signature: Option<PathBuf>,
    /// Also trust this minisign public key, for this command only; a signature by it is then
    /// required (repeatable)
    #[arg(long = "trusted-key", value_name = "FILE")]
    pub trusted_key: Vec<PathBuf>,
    /// Refuse the plugin unless a trusted key signed it (config: plugins.require_signature)
    #[arg(long)]
    pub require_signature: bool,
}

/// The user's answer to what a plugin asks for.
#[derive(Debug, Args)]
pub struct GrantArgs {
    /// Grant everything the plugin asks for, without asking
    #[arg(short, long)]
    pub yes: bool,
    /// Grant one capability the plugin asks for, e.g. fs.read=. or net.http=api.example.com
    /// (repeatable; what is not granted is denied)
    #[arg(long = "grant", value_name = "CAPABILITY")]
    pub grant: Vec<String>,
}

/// Check the plugin's signature as `trust` demands: a bad signature by a trusted key is always
/// an error; a missing or untrusted one is an error only when a signature is required.
pub fn check_signature(
    cx: &Context,
    trust: &TrustArgs,
    fetched: &Fetched,
) -> anyhow::Result<Option<Signer>> {
    let (text, origin) = match &trust.signature {
        Some(path) => (
            Some(signature::read_small(path).map_err(|e| BadInput::new(e.to_string()))?),
            Some(path.display().to_string()),
        ),
        None => (fetched.signature.clone(), fetched.signature_origin.clone()),
    };
    let sig = match (&text, &origin) {
        (Some(t), Some(o)) => Some(Signature::parse(t, o)?),
        (Some(t), None) => Some(Signature::parse(t, "the signature")?),
        _ => None,
    };
    let mut keys = KeyRing::new(&cx.dirs.data).keys();
    for path in &trust.trusted_key {
        keys.push(TrustedKey::read(path).map_err(|e| BadInput::new(e.to_string()))?);
    }
    // The user's own config only: whether to demand signatures is not a workspace's call. A
    // config that does not parse stops the install rather than quietly dropping the demand.
    let config_requires = Config::load(&cx.dirs.config.join(config::FILE_NAME))?
        .and_then(|c| c.plugins)
        .is_some_and(|p| p.require_signature);
    let required = trust.require_signature || !trust.trusted_key.is_empty() || config_requires;
    let verdict = signature::verify(&fetched.wasm, sig.as_ref(), &keys)?;
    match verdict {
        Verdict::Verified(signer) => Ok(Some(signer)),
        Verdict::UntrustedKey(id) if required => Err(anyhow::anyhow!(
            "refused: the plugin is signed by key {id}, which you do not trust (add the publisher's key with `rawko plugin keys add FILE`, or give it with --trusted-key)"
        )),
        Verdict::Unsigned if required => Err(anyhow::anyhow!(
            "refused: the plugin has no signature, and a signature by a trusted key is required{}",
            if trust.require_signature || !trust.trusted_key.is_empty() {
                ""
            } else {
                " (plugins.require_signature in your config)"
            }
        )),
        Verdict::UntrustedKey(id) => {
            crate::cli::print_err(&format!(
                "warning: signed by key {id}, which you do not trust; treating the plugin as unsigned"
            ))?;
            Ok(None)
        }
        Verdict::Unsigned => Ok(None),
    }
}

/// A description of `examined` for the user: what it is, where it is from, and each capability
/// with its reason and its risk.
pub fn describe(
    examined: &Examined,
    source: &str,
    signer: Option<&Signer>,
    only: Option<&[Grant]>,
) -> String {
    let m = &examined.manifest;
    let kinds: Vec<&str> = m.kinds.iter().map(|k| k.as_str()).collect();
    let mut out = format!(
        "{} {} ({})\n  {}\n",
        m.name,
        m.version,
        kinds.join(", "),
        m.description.replace('\n', "\n  ")
    );
    if let Some(p) = &m.publisher {
        out.push_str(&format!("  publisher: {p}\n"));
    }
    if let Some(l) = &m.license {
        out.push_str(&format!("  license:   {l}\n"));
    }
    out.push_str(&format!(
        "  source:    {source}\n  digest:    {}\n",
        examined.digest
    ));
    out.push_str(&format!(
        "  signature: {}\n",
        match signer {
            Some(s) => format!("verified, key {} ({})", s.key_id, s.trusted_comment),
            None => "none from a trusted key".into(),
        }
    ));
    let caps: Vec<_> = m
        .capabilities
        .iter()
        .filter(|c| only.is_none_or(|o| o.contains(&c.grant)))
        .collect();
    let denied = denied_and_ignored(examined);
    if caps.is_empty() {
        out.push_str(if only.is_some() {
            "It asks for nothing new.\n"
        } else {
            "It asks for no capabilities: no files, no network, no secrets, no commands.\n"
        });
        out.push_str(&denied);
        return out;
    }
    out.push_str(if only.is_some() {
        "It now also asks for:\n"
    } else {
        "It asks for:\n"
    });
    for c in &caps {
        out.push_str(&format!(
            "  {}\n      why:  {}\n      risk: it {}\n",
            c.grant,
            c.reason,
            c.grant.risk()
        ));
    }
    if let Some(combined) = combined_risk(&m.requested()) {
        out.push_str(&format!("Together: {combined}\n"));
    }
    out.push_str(&denied);
    out
}

/// What the component imports that rawko denies whatever the grants (its toolchain imports
/// them anyway), and what it exports that rawko never calls.
fn denied_and_ignored(examined: &Examined) -> String {
    let mut out = String::new();
    let denied = examined.info.denied_imports();
    if !denied.is_empty() {
        out.push_str(
            "Denied whatever you grant (its toolchain imports them; rawko refuses every use):\n",
        );
        for d in denied {
            let how = if d.starts_with("wasi:sockets/") {
                "no network: every socket, connection and name lookup is refused"
            } else {
                "every call stops the plugin with an error"
            };
            out.push_str(&format!("  {d}  denied ({how})\n"));
        }
    }
    let foreign = examined.info.foreign_exports();
    if !foreign.is_empty() {
        let names: Vec<String> = foreign.iter().map(|f| format!("`{f}`")).collect();
        out.push_str(&format!(
            "Ignored: it also exports {}, which rawko never calls.\n",
            names.join(", ")
        ));
    }
    out
}

/// The risk of capabilities taken together: reading plus a way out is exfiltration.
fn combined_risk(grants: &[Grant]) -> Option<String> {
    let reads: Vec<&str> = grants
        .iter()
        .filter_map(|g| match g {
            Grant::FsRead(p) | Grant::FsWrite(p) => Some(p.as_str()),
            _ => None,
        })
        .collect();
    let hosts: Vec<&str> = grants
        .iter()
        .filter_map(|g| match g {
            Grant::NetHttp(h) => Some(h.as_str()),
            _ => None,
        })
        .collect();
    if reads.is_empty() || hosts.is_empty() {
        return None;
    }
    let place = if reads.contains(&".") {
        "your workspace".to_string()
    } else {
        reads.join(", ")
    };
    Some(format!(
        "it reads {place} and can reach {}: it could send your code there.",
        hosts.join(", ")
    ))
}

/// Parse `--grant` values, each of which must be something the plugin asks for.
pub fn parse_grants(args: &GrantArgs, manifest: &Manifest) -> anyhow::Result<Vec<Grant>> {
    let requested = manifest.requested();
    let mut out = Vec::new();
    for g in &args.grant {
        let grant: Grant = g
            .parse::<Grant>()
            .map_err(|e| BadInput::new(format!("--grant {g}: {e}")))?;
        if !requested.contains(&grant) {
            let asked: Vec<String> = requested.iter().map(ToString::to_string).collect();
            return Err(BadInput::new(format!(
                "--grant {grant}: {} does not ask for that (it asks for: {})",
                manifest.name,
                if asked.is_empty() {
                    "nothing".into()
                } else {
                    asked.join(", ")
                }
            ))
            .into());
        }
        if !out.contains(&grant) {
            out.push(grant);
        }
    }
    Ok(out)
}

/// Decide what to grant. `new` are the requests that need an answer now (everything on a first
/// install, only what is new on an update); `kept` are grants that carry over. `shown` has been
/// printed to stderr already.
pub fn decide(
    args: &GrantArgs,
    manifest: &Manifest,
    new: &[Grant],
    kept: Vec<Grant>,
    action: &str,
) -> anyhow::Result<Vec<Grant>> {
    let explicit = parse_grants(args, manifest)?;
    let mut grants = kept;
    let add = |g: Grant, grants: &mut Vec<Grant>| {
        if !grants.contains(&g) {
            grants.push(g);
        }
    };
    if args.yes {
        for g in manifest.requested() {
            add(g, &mut grants);
        }
    } else if !explicit.is_empty() {
        for g in explicit {
            add(g, &mut grants);
        }
    } else if !new.is_empty() {
        if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
            let flags: Vec<String> = new.iter().map(|g| format!("--grant {g}")).collect();
            return Err(BadInput::new(format!(
                "{action} {} needs your consent for the capabilities above, and there is no terminal to ask on; \
                 rerun with --yes to grant them all, or choose with {}",
                manifest.name,
                flags.join(" ")
            ))
            .into());
        }
        if !ask(&format!(
            "Grant these and {action} {}? [y/N] ",
            manifest.name
        ))? {
            anyhow::bail!("not {}: you declined", past(action));
        }
        for g in new {
            add(g.clone(), &mut grants);
        }
    }
    grants.sort();
    Ok(grants)
}

fn past(action: &str) -> &'static str {
    if action == "update" {
        "updated"
    } else {
        "installed"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reading_plus_network_is_called_out() {
        let r = combined_risk(&[
            Grant::FsRead(".".into()),
            Grant::NetHttp("api.example.com".into()),
        ])
        .unwrap();
        assert_eq!(
            r,
            "it reads your workspace and can reach api.example.com: it could send your code there."
        );
        assert!(combined_risk(&[Grant::FsRead(".".into())]).is_none());
    }
}
