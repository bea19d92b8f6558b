//! `rawko plugin pack`: embed a manifest in a component built by any toolchain.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use crate::cli::{BadInput, Context, print_out};
use rawko_distribution::{self as distribution, fetch::MAX_PLUGIN_BYTES};

/// Embed a rawko-plugin.yaml manifest in a component built with any toolchain
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    componentize-py -d wit -w tool componentize app -o tool.wasm\n  \
    rawko plugin pack tool.wasm --manifest rawko-plugin.yaml -o my-tool.wasm\n  \
    rawko plugin install my-tool.wasm\n\n\
    The manifest is checked, and held against the component's imports and exports, before \
    anything is written. Sign the packed file (minisign -Sm my-tool.wasm), not the component: \
    the manifest is part of what the signature covers.")]
pub struct PackArgs {
    /// The component (.wasm), as its toolchain built it
    component: PathBuf,
    /// The manifest to embed (the rawko-plugin.yaml format)
    #[arg(long, value_name = "FILE")]
    manifest: PathBuf,
    /// Where to write the plugin
    #[arg(short, long, value_name = "OUT.wasm")]
    output: PathBuf,
}

pub fn pack(cx: &Context, args: PackArgs) -> anyhow::Result<ExitCode> {
    let base = super::cwd(cx);
    let read = |p: &PathBuf, max: u64| {
        let path = base.join(p);
        rawko_capability::fs::read_regular(&path, max)
            .map_err(|e| BadInput::new(format!("{}: {e}", path.display())))
    };
    let component = read(&args.component, MAX_PLUGIN_BYTES)?;
    let manifest = read(&args.manifest, 1 << 20)?;
    let packed = distribution::pack(&component, &manifest).map_err(|e| {
        BadInput::new(format!(
            "cannot pack {}: {e}",
            base.join(&args.component).display()
        ))
    })?;
    let out = base.join(&args.output);
    let tmp = out.with_extension("wasm.tmp");
    std::fs::write(&tmp, &packed)
        .and_then(|()| std::fs::rename(&tmp, &out))
        .map_err(|e| anyhow::anyhow!("{}: {e}", out.display()))?;
    let examined = distribution::examine(&packed)?;
    print_out(&format!(
        "packed {} {} ({}) into {}\n  install: rawko plugin install {}",
        examined.manifest.name,
        examined.manifest.version,
        examined.digest,
        out.display(),
        out.display()
    ))?;
    Ok(ExitCode::SUCCESS)
}
