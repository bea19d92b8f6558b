//! `rawko plugin new KIND NAME`: scaffold a plugin crate.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use crate::cli::{BadInput, Context, print_out};
use rawko_distribution::{Kind, scaffold};

/// Create a new plugin project: a Rust crate (any kind), or a Python or JavaScript tool
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    rawko plugin new tool hello                  # Rust: cargo build --target wasm32-wasip2\n  \
    rawko plugin new tool hello --lang python    # Python: componentize-py, then rawko plugin pack\n  \
    rawko plugin new tool hello --lang js        # JavaScript: componentize-js, then rawko plugin pack\n\n\
    Each project builds as it is; its README has the commands that build and install it.")]
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
    /// The language: rust (any kind), python (tools, built with componentize-py) or js (tools,
    /// built with componentize-js)
    #[arg(long, value_name = "LANG", default_value = "rust")]
    lang: String,
}

pub fn new(cx: &Context, args: NewArgs) -> anyhow::Result<ExitCode> {
    let kind: Kind = args.kind.parse().map_err(BadInput::new)?;
    let dir = super::cwd(cx).join(args.dir.unwrap_or_else(|| PathBuf::from(&args.name)));
    let sdk = args.sdk.unwrap_or_else(scaffold::default_sdk);
    match args.lang.as_str() {
        "rust" => {}
        "python" | "js" => {
            if kind != Kind::Tool {
                return Err(BadInput::new(format!(
                    "{} projects are tool plugins; write adapters and bash filters in Rust (--lang rust)",
                    args.lang
                ))
                .into());
            }
            let wit = sdk
                .join("../../wit")
                .join(format!("since_v{}", rawko_wit::VERSION));
            let python = args.lang == "python";
            let created = if python {
                scaffold::create_python(&args.name, &dir, &wit)
            } else {
                scaffold::create_js(&args.name, &dir, &wit)
            };
            created.map_err(|e| match e {
                scaffold::ScaffoldError::Bad(m) => anyhow::Error::from(BadInput::new(m)),
                other => other.into(),
            })?;
            let (language, build) = if python {
                (
                    "Python",
                    "componentize-py -d wit -w tool componentize app -o",
                )
            } else {
                ("JavaScript", scaffold::JS_BUILD)
            };
            print_out(&format!(
                "created {language} tool plugin `{name}` in {d}\n\n  cd {d}\n  {build} {name}.component.wasm\n  \
                 rawko plugin pack {name}.component.wasm --manifest rawko-plugin.yaml -o {name}.wasm && rawko plugin install {name}.wasm",
                name = args.name,
                d = dir.display(),
            ))?;
            return Ok(ExitCode::SUCCESS);
        }
        other => {
            return Err(BadInput::new(format!(
                "no project template for `{}`: rust, python or js",
                rawko_text::line(other, 32)
            ))
            .into());
        }
    }
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
