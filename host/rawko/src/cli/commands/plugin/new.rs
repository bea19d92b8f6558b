//! `rawko plugin new KIND NAME`: scaffold a plugin crate.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use crate::cli::{BadInput, Context, print_out};
use rawko_distribution::{Kind, scaffold};

/// Create a new plugin crate that builds with `cargo build --target wasm32-wasip2`
#[derive(Debug, Args)]
pub struct NewArgs {
    /// The kind of plugin: tool, adapter or bash-filter
    kind: String,
    /// The plugin's name: lowercase letters, digits and `-`
    name: String,
    /// Where to create it [default: ./NAME]
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// The guest SDK to build against: plugins/sdk in a rawko checkout [default: the checkout
    /// this rawko was built from]
    #[arg(long, env = "RAWKO_SDK", value_name = "DIR")]
    sdk: Option<PathBuf>,
}

pub fn new(cx: &Context, args: NewArgs) -> anyhow::Result<ExitCode> {
    let kind: Kind = args.kind.parse().map_err(BadInput::new)?;
    let dir = super::cwd(cx).join(args.dir.unwrap_or_else(|| PathBuf::from(&args.name)));
    let sdk = args.sdk.unwrap_or_else(scaffold::default_sdk);
    scaffold::create(kind, &args.name, &dir, &sdk).map_err(|e| match e {
        scaffold::ScaffoldError::Bad(m) => anyhow::Error::from(BadInput::new(m)),
        other => other.into(),
    })?;
    print_out(&format!(
        "created {} plugin `{}` in {}\n\n  cd {}\n  cargo build --target wasm32-wasip2 --release\n  rawko plugin install target/wasm32-wasip2/release/{}.wasm",
        kind,
        args.name,
        dir.display(),
        dir.display(),
        args.name.replace('-', "_")
    ))?;
    Ok(ExitCode::SUCCESS)
}
