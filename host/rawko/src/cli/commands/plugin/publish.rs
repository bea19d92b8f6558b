//! `rawko plugin publish FILE oci://...`: push a plugin as a CNCF wasm OCI artifact.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use crate::cli::{BadInput, Context, print_out};
use rawko_distribution::oci::{self, Artifact, Reference};
use rawko_distribution::signature::{self, Signature};
use rawko_distribution::{self as distribution, fetch::MAX_PLUGIN_BYTES};

/// Push a plugin to an OCI registry (config application/vnd.wasm.config.v0+json, one
/// application/wasm layer)
#[derive(Debug, Args)]
#[command(after_help = "Example:\n  \
    minisign -Sm hello.wasm && rawko plugin publish hello.wasm oci://ghcr.io/you/hello:0.1.0\n\n\
    The registry may ask for a login: set RAWKO_REGISTRY_USERNAME and RAWKO_REGISTRY_PASSWORD.")]
pub struct PublishArgs {
    /// The plugin (.wasm), which must carry a valid manifest
    file: PathBuf,
    /// Where to push it: oci://REGISTRY/REPOSITORY:TAG
    target: String,
    /// A minisign signature to publish with it [default: FILE.minisig, if it exists]
    #[arg(long, value_name = "FILE")]
    signature: Option<PathBuf>,
    #[command(flatten)]
    registry: super::RegistryArgs,
}

pub async fn publish(cx: &Context, args: PublishArgs) -> anyhow::Result<ExitCode> {
    let mut reference = Reference::parse(&args.target).map_err(|e| BadInput::new(e.to_string()))?;
    args.registry.apply(cx, &mut reference)?;
    if reference.tag.is_none() || reference.digest.is_some() {
        return Err(BadInput::new("publish to a tag: oci://REGISTRY/REPOSITORY:TAG").into());
    }
    let path = super::cwd(cx).join(&args.file);
    let meta =
        std::fs::metadata(&path).map_err(|e| BadInput::new(format!("{}: {e}", path.display())))?;
    if meta.len() > MAX_PLUGIN_BYTES {
        return Err(BadInput::new(format!(
            "{}: larger than {MAX_PLUGIN_BYTES} bytes",
            path.display()
        ))
        .into());
    }
    let wasm =
        std::fs::read(&path).map_err(|e| BadInput::new(format!("{}: {e}", path.display())))?;
    let examined = distribution::examine(&wasm)
        .map_err(|e| anyhow::anyhow!("refusing to publish {}: {e}", path.display()))?;
    let sig_path = args
        .signature
        .clone()
        .unwrap_or_else(|| distribution::with_suffix(&path, ".minisig"));
    let signature = if args.signature.is_some() || sig_path.exists() {
        let text = signature::read_small(&sig_path).map_err(|e| BadInput::new(e.to_string()))?;
        // Refuse to publish a signature that is not one.
        Signature::parse(&text, &sig_path.display().to_string())?;
        Some(text)
    } else {
        None
    };
    let m = &examined.manifest;
    let mut annotations = BTreeMap::new();
    annotations.insert("org.opencontainers.image.title".to_string(), m.name.clone());
    annotations.insert(
        "org.opencontainers.image.version".to_string(),
        m.version.to_string(),
    );
    annotations.insert(
        "org.opencontainers.image.description".to_string(),
        m.description.clone(),
    );
    if let Some(l) = &m.license {
        annotations.insert("org.opencontainers.image.licenses".to_string(), l.clone());
    }
    let artifact = Artifact {
        wasm: &wasm,
        imports: examined.info.imports.clone(),
        exports: examined.info.exports.clone(),
        author: m.publisher.clone(),
        annotations,
        signature: signature.clone(),
    };
    let mut client = oci::Client::new(&reference)?;
    let digest = client
        .push(&reference, &artifact)
        .await
        .map_err(|e| anyhow::anyhow!("cannot publish: {e}"))?;
    print_out(&format!(
        "published {} {} to {reference}{}\n  manifest: {}\n  plugin:   {}",
        m.name,
        m.version,
        if signature.is_some() {
            " with its signature"
        } else {
            ""
        },
        reference.pinned(&digest),
        examined.digest
    ))?;
    Ok(ExitCode::SUCCESS)
}
