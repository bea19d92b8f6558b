//! The rows that need no source checkout: each generates its input in the bench's temporary
//! directory and measures rawko against the same code compiled natively, a program on `PATH`,
//! or plainly reading the same files.

use std::path::Path;
use std::process::Command;

use rawko_agents::registry::{Registry, SearchPath};
use rawko_capability::{Access, FsGrants};
use rawko_runtime::ToolPlugin;
use rawko_shell::verdict::Decision;
use rawko_shell::{Policy, Resolver};
use rawko_toolset::chain::Chain;

use super::{Bench, Kind, Row, Skip, Target, agent_files, median, median_async, on_path, spawn};

/// The groups of rows [`rows`] runs, in order.
pub const GROUPS: &[&str] = &["call", "verdict", "read", "search", "discovery", "cli"];

/// The inputs [`rows`] generates, in words.
#[derive(Debug, Clone, Copy)]
pub struct Inputs {
    /// Bytes of the file `Read` reads.
    pub read_bytes: u64,
    /// Source files in the tree `Grep` searches.
    pub tree_files: usize,
}

impl Inputs {
    pub fn new(quick: bool) -> Inputs {
        if quick {
            Inputs {
                read_bytes: 1 << 20,
                tree_files: 200,
            }
        } else {
            Inputs {
                read_bytes: 10 << 20,
                tree_files: 2000,
            }
        }
    }
}

/// The rows of `groups` (names from [`GROUPS`]; none: all), on inputs generated for them.
pub async fn rows(b: &Bench, groups: &[String]) -> Vec<Row> {
    let wanted = |g: &str| groups.is_empty() || groups.iter().any(|w| w == g);
    let inputs = Inputs::new(b.quick);
    let mut rows = Vec::new();
    for &group in GROUPS.iter().filter(|g| wanted(g)) {
        match group {
            "call" => rows.extend(
                call_row(
                    b,
                    &b.tools,
                    "LS",
                    "{}",
                    "tool call, fresh sandbox (LS, empty dir)",
                )
                .await,
            ),
            "verdict" => rows.extend(verdict_rows(b).await),
            "read" => rows.extend(read_rows(b, inputs.read_bytes).await),
            "search" => match generate_tree(b, inputs.tree_files) {
                Ok(tree) => rows.extend(search_rows(b, &tree).await),
                Err(why) => rows.push(Row::new(
                    "search",
                    "Grep and Glob",
                    "rg -j1, and the same code natively",
                    Kind::Time,
                    Target::Scale,
                    Err(why),
                    Ok(Default::default()),
                )),
            },
            "discovery" => rows.extend(discovery_rows(b)),
            "cli" => rows.extend(cli_rows(b)),
            _ => unreachable!("every group in GROUPS has its rows"),
        }
    }
    rows
}

/// A tool call in a fresh sandbox against starting a process: `name` of `tool` on `input`, in
/// an empty directory.
pub async fn call_row(
    b: &Bench,
    tool: &ToolPlugin,
    name: &str,
    input: &str,
    figure: &str,
) -> Vec<Row> {
    let ours = match b.subdir("call") {
        Ok(root) => {
            median_async(b.samples(2000), async || {
                b.call(tool, name, input, &root, 1 << 20).await
            })
            .await
        }
        Err(e) => Err(e),
    };
    vec![Row::new(
        "call",
        figure,
        "spawn /bin/true",
        Kind::Time,
        Target::RatioAtMost(1.0),
        ours,
        b.spawn_true(),
    )]
}

/// The Bash tool's whole check of a command line: parse, resolve, the policy plugin's verdict.
pub async fn verdict_rows(b: &Bench) -> Vec<Row> {
    let line = "git log --oneline -20 | grep -v wip | head -5";
    let ours = async {
        let root = b.subdir("verdict")?;
        std::fs::create_dir_all(root.join("src")).map_err(Skip::doing("cannot make src/"))?;
        let chain = Chain::load(&b.rt, &[])
            .await
            .map_err(Skip::doing("cannot load the built-in bash filter"))?;
        let mut grants = FsGrants::none();
        grants
            .grant(&root, &root, Access::ReadOnly)
            .map_err(Skip::doing("cannot grant the directory"))?;
        let policy = Policy::new(
            &root,
            &grants,
            ["git *", "grep", "head"].map(String::from).to_vec(),
            vec![r"rm\s+-rf\s+/".into()],
        )
        .map_err(Skip::doing("bad policy"))?;
        let resolver = Resolver::from_env(&[&root]);
        median_async(b.samples(2000), async || {
            let r = chain.check(&b.rt, line, &policy, &resolver).await;
            if r.decision == Decision::Allow {
                Ok(())
            } else {
                Err(Skip(format!(
                    "the built-in filter did not allow `{line}` here: {}",
                    r.reason
                )))
            }
        })
        .await
    }
    .await;
    vec![Row::new(
        "verdict",
        "bash filter verdict, 3-stage pipeline",
        "spawn /bin/true",
        Kind::Time,
        Target::Under(std::time::Duration::from_micros(100)),
        ours,
        b.spawn_true(),
    )]
}

/// The tools' own code run outside the sandbox, reading `root`.
fn native_cx(root: &Path, output: u64) -> rawko_tools::Context {
    rawko_tools::Context::new(
        root,
        vec![rawko_tools::Grant {
            path: root.to_path_buf(),
            access: rawko_tools::Access::ReadOnly,
        }],
        output as usize,
    )
}

/// `Read` of a file of `size` bytes, every line numbered: against the same code compiled
/// natively, and for scale against `cat -n` and reading the file.
pub async fn read_rows(b: &Bench, size: u64) -> Vec<Row> {
    let input = r#"{"path":"big.txt","limit":100000000}"#;
    let output = 64 << 20;
    let made = b.subdir("read").and_then(|root| {
        let line = format!("{}\n", "x".repeat(79));
        std::fs::write(root.join("big.txt"), line.repeat((size / 80) as usize))
            .map_err(Skip::doing("cannot write the file to read"))?;
        Ok(root)
    });
    let root = match made {
        Ok(root) => root,
        Err(why) => {
            return vec![Row::new(
                "read",
                "Read",
                "same Read code, native",
                Kind::Time,
                Target::Scale,
                Err(why),
                Ok(Default::default()),
            )];
        }
    };
    let ours = median_async(b.samples(20), async || {
        b.call(&b.tools, "Read", input, &root, output).await
    })
    .await;
    let cx = native_cx(&root, output);
    let native = serde_json::from_str::<rawko_tools::read::ReadInput>(input)
        .map_err(Skip::doing("bad Read input"))
        .and_then(|parsed| {
            median(b.samples(20), || {
                rawko_tools::read::read(&parsed, &cx)
                    .map(drop)
                    .map_err(Skip::doing("native Read failed"))
            })
        });
    let path = root.join("big.txt");
    let cat = median(b.samples(20), || {
        spawn(Command::new("cat").arg("-n").arg(&path))
    });
    let plain = median(b.samples(20), || {
        std::fs::read(&path)
            .map(drop)
            .map_err(Skip::doing("cannot read the file"))
    });
    // The whole process as a user runs it, its output read from a pipe, as `cat -n`'s is.
    let max_output = output.to_string();
    let whole = median(b.samples(20), || {
        spawn(&mut b.rawko(
            &root,
            &[
                "tool",
                "call",
                "Read",
                "--read",
                ".",
                "--max-output",
                &max_output,
                "--input",
                input,
            ],
        ))
    });
    let mib = size >> 20;
    let figure = format!("Read, {mib} MiB file, all lines (throughput)");
    vec![
        Row::new(
            "read",
            format!("rawko tool call Read, {mib} MiB (whole process)"),
            "cat -n, subprocess",
            Kind::Throughput(size),
            Target::ShareAtLeast(0.5),
            whole,
            cat.clone(),
        ),
        Row::new(
            "read",
            &figure,
            "same Read code, native",
            Kind::Throughput(size),
            Target::ShareAtLeast(0.5),
            ours.clone(),
            native,
        ),
        Row::new(
            "read",
            &figure,
            "cat -n, subprocess",
            Kind::Throughput(size),
            Target::Scale,
            ours.clone(),
            cat,
        ),
        Row::new(
            "read",
            &figure,
            "std::fs::read, no numbering",
            Kind::Throughput(size),
            Target::Scale,
            ours.clone(),
            plain,
        ),
    ]
}

/// A tree of `files` small Rust sources in ten directories, with a few rare words for the
/// search rows to find.
pub fn generate_tree(b: &Bench, files: usize) -> Result<std::path::PathBuf, Skip> {
    let root = b.subdir("tree")?;
    let write = |p: &Path, text: &str| {
        std::fs::create_dir_all(p.parent().unwrap_or(&root))
            .and_then(|()| std::fs::write(p, text))
            .map_err(Skip::doing(format!("cannot write {}", p.display())))
    };
    for i in 0..files {
        let body: String = (0..100)
            .map(|l| format!("fn f{i}_{l}(x: u32) -> u32 {{ x + {l} }} // todo\n"))
            .collect();
        write(&root.join(format!("m{}/f{i}.rs", i % 10)), &body)?;
    }
    write(
        &root.join("m1/extra_unchecked.rs"),
        "fn get_unchecked() {}\n",
    )?;
    write(&root.join("m2/build.rs"), "fn main() {}\n")?;
    write(&root.join("m3/notes.md"), "FixMe(later): one\n")?;
    Ok(root)
}

/// Grep (a literal, a regex, a case-insensitive pattern) and Glob over `tree`, against ripgrep
/// (`rg -j1`: one thread, the same walk settings as Grep) when it is on `PATH`, and against the
/// same code natively.
pub async fn search_rows(b: &Bench, tree: &Path) -> Vec<Row> {
    let rg_available = on_path("rg");
    let cases: [(&str, &str, &[&str]); 3] = [
        (
            "literal, files",
            r#"{"pattern":"get_unchecked","output_mode":"files_with_matches"}"#,
            &["-l", "get_unchecked"],
        ),
        (
            "regex, counts",
            r#"{"pattern":"fn\\s+[a-z_]+_unchecked","output_mode":"count"}"#,
            &["-c", r"fn\s+[a-z_]+_unchecked"],
        ),
        (
            "case-insensitive, lines",
            r#"{"pattern":"fixme\\(","output_mode":"content","case_insensitive":true}"#,
            &["-n", "-i", r"fixme\("],
        ),
    ];
    let output = 16 << 20;
    let cx = native_cx(tree, output);
    let mut rows = Vec::new();
    for (what, input, rg_args) in cases {
        let ours = median_async(b.samples(5), async || {
            b.call(&b.tools, "Grep", input, tree, output).await
        })
        .await;
        let rg = if rg_available {
            median(b.samples(5), || {
                spawn(
                    Command::new("rg")
                        .args([
                            "--no-config",
                            "-j1",
                            "--hidden",
                            "--no-require-git",
                            "--no-ignore-global",
                            "--no-ignore-exclude",
                            "--glob",
                            "!.git",
                            "--no-heading",
                            "--with-filename",
                            "--color",
                            "never",
                        ])
                        .args(rg_args)
                        .current_dir(tree),
                )
            })
        } else {
            Err(Skip("rg is not on PATH".into()))
        };
        let native = serde_json::from_str::<rawko_tools::grep::GrepInput>(input)
            .map_err(Skip::doing("bad Grep input"))
            .and_then(|parsed| {
                median(b.samples(5), || {
                    rawko_tools::grep::grep(&parsed, &cx)
                        .map(drop)
                        .map_err(Skip::doing("native Grep failed"))
                })
            });
        rows.push(Row::new(
            "search",
            format!("Grep, {what}"),
            "rg -j1, subprocess",
            Kind::Time,
            Target::RatioAtMost(2.0),
            ours.clone(),
            rg,
        ));
        rows.push(Row::new(
            "search",
            format!("Grep, {what}"),
            "same Grep code, native",
            Kind::Time,
            Target::RatioAtMost(1.5),
            ours,
            native,
        ));
    }

    let input = r#"{"pattern":"**/build.rs"}"#;
    let ours = median_async(b.samples(5), async || {
        b.call(&b.tools, "Glob", input, tree, output).await
    })
    .await;
    let native = serde_json::from_str::<rawko_tools::glob::GlobInput>(input)
        .map_err(Skip::doing("bad Glob input"))
        .and_then(|parsed| {
            median(b.samples(5), || {
                rawko_tools::glob::glob(&parsed, &cx)
                    .map(drop)
                    .map_err(Skip::doing("native Glob failed"))
            })
        });
    rows.push(Row::new(
        "search",
        "Glob, **/build.rs",
        "same Glob code, native",
        Kind::Time,
        Target::RatioAtMost(1.5),
        ours,
        native,
    ));
    rows
}

/// Discovering, parsing and validating 1,000 agent files against only reading them.
pub fn discovery_rows(b: &Bench) -> Vec<Row> {
    rawko_toolset::host::install_catalogue();
    let made = b.subdir("agents").and_then(|root| {
        agent_files::write(&root).map_err(Skip::doing("cannot write the agent files"))?;
        Ok(root)
    });
    let (ours, theirs) = match made {
        Ok(root) => {
            let search = SearchPath::standard(&root, &root.join("no-user-config"));
            let ours = median(b.samples(20), || {
                let r = Registry::load(&search);
                if r.has_errors() {
                    Err(Skip("the generated agent files did not all load".into()))
                } else {
                    Ok(())
                }
            });
            let agents = root.join(".rawko/agents");
            let theirs = median(b.samples(20), || {
                read_all(&agents).map_err(Skip::doing("cannot read the agent files"))
            });
            (ours, theirs)
        }
        Err(why) => (Err(why), Ok(Default::default())),
    };
    vec![Row::new(
        "discovery",
        format!("agent discovery, {} files", agent_files::FILES),
        "read the same files",
        Kind::Time,
        Target::Under(std::time::Duration::from_millis(200)),
        ours,
        theirs,
    )]
}

/// Read every file under `dir`.
fn read_all(dir: &Path) -> std::io::Result<()> {
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        if e.file_type()?.is_dir() {
            read_all(&e.path())?;
        } else {
            std::fs::read(e.path())?;
        }
    }
    Ok(())
}

/// `rawko tools list` as a user runs it, components cached, against the binary doing nothing.
pub fn cli_rows(b: &Bench) -> Vec<Row> {
    let (ours, version) = match b.subdir("cli") {
        Ok(root) => (
            median(b.samples(20), || {
                spawn(&mut b.rawko(&root, &["tools", "list"]))
            }),
            median(b.samples(20), || spawn(&mut b.rawko(&root, &["--version"]))),
        ),
        Err(why) => (Err(why), Ok(Default::default())),
    };
    vec![Row::new(
        "cli",
        "rawko tools list, warm cache (wall)",
        "rawko --version",
        Kind::Time,
        Target::Under(std::time::Duration::from_millis(30)),
        ours,
        version,
    )]
}
