//! `rawko plugin inspect NAME|SOURCE`: everything rawko knows about a plugin, without installing
//! or running it.

use std::process::ExitCode;

use clap::Args;

use super::consent;
use crate::cli::{BadInput, Context, print_json, print_out};
use rawko_distribution::signature::{self, KeyRing, Signature, Verdict};
use rawko_distribution::{self as distribution, Fetched, PluginStore, Source};

/// Show a plugin's manifest, WIT world, imports and exports, capabilities, digest and signer
#[derive(Debug, Args)]
pub struct InspectArgs {
    /// An installed plugin's name, or a .wasm file, https URL or oci:// reference
    target: String,
    /// Print JSON
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    registry: super::RegistryArgs,
}

pub async fn inspect(cx: &Context, args: InspectArgs) -> anyhow::Result<ExitCode> {
    let store = PluginStore::new(&cx.dirs.data);
    let installed = store.get(&args.target)?;
    let (fetched, source) = match &installed {
        Some(p) => (
            Fetched {
                wasm: p.wasm()?,
                signature: None,
                signature_origin: None,
                resolved: p.entry.resolved.clone(),
            },
            p.entry.source.clone(),
        ),
        None => {
            let mut source = Source::parse(&args.target, &super::cwd(cx))
                .map_err(|e| BadInput::new(e.to_string()))?;
            args.registry.apply_to(cx, &mut source)?;
            let fetched = distribution::fetch(&source)
                .await
                .map_err(|e| anyhow::anyhow!("cannot fetch the plugin: {e}"))?;
            (fetched, source.to_string())
        }
    };
    let digest = format!("sha256:{}", rawko_distribution::sha256_hex(&fetched.wasm));
    let info = distribution::ComponentInfo::read(&fetched.wasm)?;
    let manifest = info.manifest();
    let check = manifest
        .as_ref()
        .map_err(ToString::to_string)
        .and_then(|m| info.check(m).map_err(|e| e.to_string()));
    let signer = match &installed {
        Some(p) => p
            .entry
            .signer
            .as_ref()
            .map(|s| format!("{} ({})", s.key_id, s.trusted_comment)),
        None => match &fetched.signature {
            None => None,
            Some(text) => {
                let sig = Signature::parse(text, "the signature")?;
                match signature::verify(
                    &fetched.wasm,
                    Some(&sig),
                    &KeyRing::new(&cx.dirs.data).keys(),
                )? {
                    Verdict::Verified(s) => {
                        Some(format!("{} ({}), trusted", s.key_id, s.trusted_comment))
                    }
                    Verdict::UntrustedKey(id) => Some(format!("{id}, not a trusted key")),
                    Verdict::Unsigned => None,
                }
            }
        },
    };
    let world = manifest.as_ref().ok().map(|m| {
        m.kinds
            .iter()
            .map(|k| {
                format!(
                    "rawko:plugin/{k}@{}",
                    check.as_ref().map_or("?".into(), ToString::to_string)
                )
            })
            .collect::<Vec<_>>()
    });

    if args.json {
        print_json(&serde_json::json!({
            "source": source,
            "digest": digest,
            "resolved": fetched.resolved,
            "installed": installed.as_ref().map(|p| &p.entry),
            "manifest": manifest.as_ref().ok(),
            "manifest_error": manifest.as_ref().err().map(ToString::to_string),
            "check": match &check { Ok(_) => serde_json::Value::String("ok".into()), Err(e) => serde_json::Value::String(e.clone()) },
            "world": world,
            "imports": info.imports,
            "exports": info.exports,
            "signer": signer,
        }))?;
        return Ok(ExitCode::SUCCESS);
    }

    // The facts about the component, indented under its header; then what it asks for.
    let mut facts = String::new();
    let mut head = String::new();
    let mut asks = String::new();
    match &manifest {
        Ok(m) => {
            let examined = distribution::Examined {
                info: info.clone(),
                manifest: m.clone(),
                wit: check
                    .clone()
                    .unwrap_or_else(|_| semver::Version::new(0, 0, 0)),
                digest: digest.clone(),
            };
            let described = consent::describe(&examined, &source, None, None);
            match described.find("\nIt asks for") {
                Some(i) => {
                    head.push_str(&described[..=i]);
                    asks.push_str(&described[i + 1..]);
                }
                None => head.push_str(&described),
            }
            facts.push_str(&format!(
                "  wit:       {} (the manifest accepts {})\n",
                world.unwrap_or_default().join(", "),
                m.wit
            ));
        }
        Err(e) => head.push_str(&format!("{source}\n  digest: {digest}\n  manifest: {e}\n")),
    }
    facts.push_str(&format!(
        "  signer:    {}\n",
        signer.as_deref().unwrap_or("none")
    ));
    if let Some(p) = &installed {
        let g: Vec<String> = p.entry.grants.iter().map(ToString::to_string).collect();
        facts.push_str(&format!(
            "  installed: yes; granted {}\n",
            if g.is_empty() {
                "nothing".into()
            } else {
                g.join(", ")
            }
        ));
    }
    if let Err(e) = &check
        && manifest.is_ok()
    {
        facts.push_str(&format!("  REFUSED:   {e}\n"));
    }
    let mut out = format!("{head}{facts}{asks}");
    out.push_str("imports:\n");
    for i in &info.imports {
        out.push_str(&format!("  {i}\n"));
    }
    out.push_str("exports:\n");
    for e in &info.exports {
        out.push_str(&format!("  {e}\n"));
    }
    print_out(&out)?;
    Ok(ExitCode::SUCCESS)
}
