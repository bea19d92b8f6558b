//! `rawko plugin install SOURCE` and `rawko plugin update NAME`.
//!
//! Both run the same checks in the same order, before anything is written: fetch, digest,
//! manifest against component, signature, compile and describe, consent. Only then is the plugin
//! committed to the store, component first and lockfile last.

use std::collections::BTreeSet;
use std::process::ExitCode;

use clap::Args;

use super::consent::{self, GrantArgs, TrustArgs};
use crate::cli::{BadInput, Context, print_err, print_out};
use rawko_distribution::signature::Signer;
use rawko_distribution::{
    self as distribution, Entry, Examined, Fetched, Grant, Kind, PluginStore, Source,
};
use rawko_runtime::ToolPlugin;

/// Install a plugin from a file, an https URL or an OCI registry
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    rawko plugin install ./hello.wasm\n  \
    rawko plugin install https://example.com/hello.wasm --sha256 3f2a...\n  \
    rawko plugin install oci://ghcr.io/someone/hello:1.0 --require-signature\n  \
    rawko plugin install oci://ghcr.io/someone/hello@sha256:3f2a... --grant fs.read=.\n\n\
    rawko shows what the plugin asks for and what that risks, and asks before installing. \
    Without a terminal, grant with --yes (everything it asks for) or --grant (each one).")]
pub struct InstallArgs {
    /// A .wasm file, an https:// URL, or oci://REGISTRY/REPOSITORY:TAG (or @sha256:DIGEST)
    source: String,
    /// Refuse unless the plugin's SHA-256 digest is this
    #[arg(long, value_name = "HEX")]
    sha256: Option<String>,
    #[command(flatten)]
    trust: TrustArgs,
    #[command(flatten)]
    grants: GrantArgs,
    #[command(flatten)]
    registry: super::RegistryArgs,
}

/// Update an installed plugin from where it was installed from
#[derive(Debug, Args)]
#[command(
    after_help = "A new version that asks for more than the installed one stops and asks \
    again (or needs --yes / --grant). One signed by another key than the installed version is \
    refused unless --allow-new-signer, and a lower version unless --allow-downgrade."
)]
pub struct UpdateArgs {
    /// The installed plugin
    name: String,
    /// Fetch the new version from here instead of the recorded source (which then becomes it)
    #[arg(long, value_name = "SOURCE")]
    from: Option<String>,
    /// Refuse unless the new version's SHA-256 digest is this
    #[arg(long, value_name = "HEX")]
    sha256: Option<String>,
    /// Accept a new version signed by a different key than the installed one
    #[arg(long)]
    allow_new_signer: bool,
    /// Accept a version lower than the installed one (an old version may have known holes)
    #[arg(long)]
    allow_downgrade: bool,
    #[command(flatten)]
    trust: TrustArgs,
    #[command(flatten)]
    grants: GrantArgs,
    #[command(flatten)]
    registry: super::RegistryArgs,
}

/// A fetched plugin that passed every check except consent.
struct Candidate {
    fetched: Fetched,
    examined: Examined,
    signer: Option<Signer>,
}

/// Fetch `source` and run every check that needs no answer from the user.
async fn prepare(
    cx: &Context,
    source: &Source,
    sha256: Option<&str>,
    trust: &TrustArgs,
) -> anyhow::Result<Candidate> {
    let expected = sha256
        .map(distribution::parse_digest)
        .transpose()
        .map_err(|e| BadInput::new(e.to_string()))?;
    let fetched = distribution::fetch(source)
        .await
        .map_err(|e| anyhow::anyhow!("cannot fetch the plugin: {e}"))?;
    let digest = format!("sha256:{}", rawko_distribution::sha256_hex(&fetched.wasm));
    if let Some(expected) = expected
        && expected != digest
    {
        anyhow::bail!(
            "refused: {source} has digest {digest}, not the {expected} you asked for; nothing was installed"
        );
    }
    let examined = distribution::examine(&fetched.wasm)
        .map_err(|e| anyhow::anyhow!("refused: {source}: {e}"))?;
    let name = &examined.manifest.name;
    if rawko_builtins::is_builtin_name(name) {
        anyhow::bail!(
            "refused: `{name}` is the name of a plugin built into rawko; an installed plugin may not take it"
        );
    }
    let signer = consent::check_signature(cx, trust, &fetched)?;
    precompile(cx, &examined, &fetched.wasm).await?;
    Ok(Candidate {
        fetched,
        examined,
        signer,
    })
}

/// Compile the plugin into the cache (so its first use is fast), and for a tool plugin ask it
/// for its tools, which must be the ones its manifest lists. The compilation itself runs in a
/// child process held to [`COMPILE_TIME`] and [`COMPILE_MEMORY`]: the component is a
/// stranger's, and one crafted to make the compiler run away costs a refusal, not the machine.
async fn precompile(cx: &Context, examined: &Examined, wasm: &[u8]) -> anyhow::Result<()> {
    compile_in_child(cx, wasm).await?;
    let rt = cx.runtime()?;
    let m = &examined.manifest;
    if m.kinds.contains(&Kind::Tool) {
        let plugin = ToolPlugin::load(&rt, &m.name, wasm)
            .await
            .map_err(|e| anyhow::anyhow!("refused: {e}"))?;
        let actual: BTreeSet<&str> = plugin.tools().iter().map(|t| t.name.as_str()).collect();
        let declared: BTreeSet<&str> = m.provides.tools.iter().map(String::as_str).collect();
        if actual != declared {
            anyhow::bail!(
                "refused: the manifest lists tools [{}], but the plugin provides [{}]",
                declared.into_iter().collect::<Vec<_>>().join(", "),
                actual.into_iter().collect::<Vec<_>>().join(", ")
            );
        }
    } else {
        rt.cache()
            .load(rt.engine(), wasm)
            .map_err(|e| anyhow::anyhow!("refused: not a valid component: {e:#}"))?;
    }
    Ok(())
}

/// Wall-clock (and CPU) time a plugin's compilation may take.
const COMPILE_TIME: std::time::Duration = std::time::Duration::from_secs(120);
/// Memory a plugin's compilation may write (RLIMIT_DATA).
const COMPILE_MEMORY: u64 = 4 << 30;

/// Compile `wasm` into the component cache in `rawko __compile`, a child process with its time
/// and memory limited; a child that fails or overruns refuses the plugin.
async fn compile_in_child(cx: &Context, wasm: &[u8]) -> anyhow::Result<()> {
    let exe = std::env::current_exe()
        .map_err(|e| anyhow::anyhow!("cannot find the rawko binary to compile with: {e}"))?;
    let file = tempfile::NamedTempFile::new()
        .and_then(|mut f| {
            std::io::Write::write_all(&mut f, wasm)?;
            Ok(f)
        })
        .map_err(|e| anyhow::anyhow!("cannot stage the plugin for compilation: {e}"))?;
    let mut cmd = tokio::process::Command::new(exe);
    cmd.arg(crate::cli::COMPILE_ARG)
        .arg(&cx.dirs.cache)
        .arg(file.path())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    #[cfg(target_os = "linux")]
    {
        let cpu = COMPILE_TIME.as_secs();
        // SAFETY: between fork and exec only setrlimit and prctl run, both async-signal-safe.
        unsafe {
            cmd.pre_exec(move || {
                let limit = |resource, value: u64| {
                    let r = libc::rlimit {
                        rlim_cur: value,
                        rlim_max: value,
                    };
                    if libc::setrlimit(resource, &r) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                };
                limit(libc::RLIMIT_DATA, COMPILE_MEMORY)?;
                limit(libc::RLIMIT_CPU, cpu)?;
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
                Ok(())
            });
        }
    }
    let started = std::time::Instant::now();
    let child = cmd
        .spawn()
        .map_err(|e| anyhow::anyhow!("cannot start the compiler process: {e}"))?;
    let out = match tokio::time::timeout(COMPILE_TIME, child.wait_with_output()).await {
        Ok(out) => out.map_err(|e| anyhow::anyhow!("the compiler process: {e}"))?,
        Err(_) => anyhow::bail!(
            "refused: compiling the plugin took longer than {} s",
            COMPILE_TIME.as_secs()
        ),
    };
    if !out.status.success() {
        use std::os::unix::process::ExitStatusExt;
        let why = match out.status.signal() {
            Some(libc::SIGXCPU) | Some(libc::SIGKILL) => format!(
                "compiling it ran out of its {} s of CPU time",
                COMPILE_TIME.as_secs()
            ),
            Some(sig) => format!("the compiler process was killed by signal {sig}"),
            None => {
                rawko_text::block(String::from_utf8_lossy(&out.stderr).trim(), 2_000).into_owned()
            }
        };
        anyhow::bail!("refused: {why}");
    }
    tracing::info!(
        "compiled the plugin ahead of time in {} ms",
        started.elapsed().as_millis()
    );
    Ok(())
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn entry(c: &Candidate, source: &Source, grants: Vec<Grant>) -> Entry {
    let m = &c.examined.manifest;
    Entry {
        version: m.version.to_string(),
        kinds: m.kinds.clone(),
        description: m.description.clone(),
        digest: c.examined.digest.clone(),
        source: source.to_string(),
        resolved: c.fetched.resolved.clone(),
        signer: c.signer.clone(),
        requested: m.requested(),
        grants,
        wit: c.examined.wit.to_string(),
        installed_at: now(),
    }
}

pub async fn install(cx: &Context, args: InstallArgs) -> anyhow::Result<ExitCode> {
    let mut source =
        Source::parse(&args.source, &super::cwd(cx)).map_err(|e| BadInput::new(e.to_string()))?;
    args.registry.apply_to(cx, &mut source)?;
    let store = PluginStore::new(&cx.dirs.data);
    let candidate = prepare(cx, &source, args.sha256.as_deref(), &args.trust).await?;
    let name = candidate.examined.manifest.name.clone();

    // The lockfile pins what is installed: the same name from other bytes is an update, which
    // must be asked for by name.
    if let Some(installed) = store.get(&name)?
        && installed.entry.digest != candidate.examined.digest
    {
        anyhow::bail!(
            "refused: {name} is installed with digest {} (pinned in the lockfile), but {source} now has {}; \
             if you expect a new version, run `rawko plugin update {name}`",
            installed.entry.digest,
            candidate.examined.digest
        );
    }

    refuse_tool_conflicts(&store, &candidate.examined)?;
    print_err(&consent::describe(
        &candidate.examined,
        &source.to_string(),
        candidate.signer.as_ref(),
        None,
    ))?;
    let requested = candidate.examined.manifest.requested();
    let grants = consent::decide(
        &args.grants,
        &candidate.examined.manifest,
        &requested,
        Vec::new(),
        "install",
    )?;
    let lock = store.lock()?;
    store.sweep_orphans(&lock);
    // Checked again under the lock, in case another rawko installed it meanwhile.
    if let Some(installed) = store.get(&name)?
        && installed.entry.digest != candidate.examined.digest
    {
        anyhow::bail!(
            "refused: {name} was installed by another rawko meanwhile; run `rawko plugin update {name}`"
        );
    }
    let e = entry(&candidate, &source, grants);
    report(&name, &e);
    store.commit(&lock, &name, &candidate.fetched.wasm, e)?;
    Ok(ExitCode::SUCCESS)
}

/// Refuse a plugin that provides a tool name rawko, a built-in plugin or another installed
/// plugin already provides: which tool a model reaches must not depend on install order.
fn refuse_tool_conflicts(store: &PluginStore, candidate: &Examined) -> anyhow::Result<()> {
    let mine = &candidate.manifest.provides.tools;
    if mine.is_empty() {
        return Ok(());
    }
    let mut taken: Vec<(String, String)> = vec![("Bash".into(), "rawko itself".into())];
    for b in rawko_builtins::BUILTIN_TOOL_PLUGINS {
        if let Ok(e) = rawko_distribution::examine(b.wasm) {
            for t in e.manifest.provides.tools {
                taken.push((t, format!("the built-in plugin {}", b.name)));
            }
        }
    }
    for p in store.installed()? {
        if p.name == candidate.manifest.name || !p.kinds().contains(&Kind::Tool) {
            continue;
        }
        if let Ok(wasm) = p.wasm()
            && let Ok(e) = rawko_distribution::examine(&wasm)
        {
            for t in e.manifest.provides.tools {
                taken.push((t, format!("plugin {}", p.name)));
            }
        }
    }
    for t in mine {
        if let Some((_, who)) = taken.iter().find(|(name, _)| name == t) {
            anyhow::bail!(
                "refused: {} provides tool `{t}`, which {who} already provides; a tool has one \
                 provider (remove the other plugin first with `rawko plugin remove NAME`, if it is \
                 one you installed)",
                candidate.manifest.name
            );
        }
    }
    Ok(())
}

fn report(name: &str, e: &Entry) {
    let granted: Vec<String> = e.grants.iter().map(ToString::to_string).collect();
    let denied: Vec<String> = e
        .requested
        .iter()
        .filter(|g| !e.grants.contains(g))
        .map(ToString::to_string)
        .collect();
    let mut text = format!("installed {name} {} ({})", e.version, e.digest);
    text.push_str(&format!(
        "\n  granted: {}",
        if granted.is_empty() {
            "nothing".into()
        } else {
            granted.join(", ")
        }
    ));
    if !denied.is_empty() {
        text.push_str(&format!("\n  denied:  {}", denied.join(", ")));
    }
    let _ = print_out(&text);
}

pub async fn update(cx: &Context, args: UpdateArgs) -> anyhow::Result<ExitCode> {
    let store = PluginStore::new(&cx.dirs.data);
    let Some(installed) = store.get(&args.name)? else {
        return Err(BadInput::new(format!(
            "no installed plugin named `{}` (see `rawko plugin list`)",
            args.name
        ))
        .into());
    };
    let old = installed.entry;
    let source_text = args.from.as_deref().unwrap_or(&old.source);
    let mut source =
        Source::parse(source_text, &super::cwd(cx)).map_err(|e| BadInput::new(e.to_string()))?;
    args.registry.apply_to(cx, &mut source)?;
    let candidate = prepare(cx, &source, args.sha256.as_deref(), &args.trust).await?;
    let m = &candidate.examined.manifest;
    if m.name != args.name {
        anyhow::bail!(
            "refused: {source} is the plugin `{}`, not `{}`",
            m.name,
            args.name
        );
    }
    if candidate.examined.digest == old.digest {
        print_out(&format!(
            "{} {} is up to date ({})",
            args.name, old.version, old.digest
        ))?;
        return Ok(ExitCode::SUCCESS);
    }
    if let Ok(old_version) = semver::Version::parse(&old.version)
        && m.version < old_version
        && !args.allow_downgrade
    {
        anyhow::bail!(
            "refused: {source} has {} {}, older than the installed {old_version}; an old version \
             may have holes the new one fixed. Rerun with --allow-downgrade to go back",
            args.name,
            m.version
        );
    }
    refuse_tool_conflicts(&store, &candidate.examined)?;
    if let Some(old_signer) = &old.signer {
        let same = candidate
            .signer
            .as_ref()
            .is_some_and(|s| s.key_id == old_signer.key_id);
        if !same && !args.allow_new_signer {
            anyhow::bail!(
                "refused: the installed {} was signed by key {}, but the new version is {}; \
                 if the publisher really changed keys, rerun with --allow-new-signer",
                args.name,
                old_signer.key_id,
                match &candidate.signer {
                    Some(s) => format!("signed by key {}", s.key_id),
                    None => "not signed by a trusted key".into(),
                }
            );
        }
    }
    let requested = m.requested();
    let new: Vec<Grant> = requested
        .iter()
        .filter(|g| !old.requested.contains(g))
        .cloned()
        .collect();
    // Grants carry over where the new version still asks for them.
    let kept: Vec<Grant> = old
        .grants
        .iter()
        .filter(|g| requested.contains(g))
        .cloned()
        .collect();
    print_err(&format!(
        "updating {} {} -> {}",
        args.name, old.version, m.version
    ))?;
    print_err(&consent::describe(
        &candidate.examined,
        &source.to_string(),
        candidate.signer.as_ref(),
        Some(&new),
    ))?;
    let grants = consent::decide(&args.grants, m, &new, kept, "update")?;
    let lock = store.lock()?;
    store.sweep_orphans(&lock);
    let current = store.get(&args.name)?.map(|p| p.entry.digest);
    if current.as_deref() != Some(old.digest.as_str()) {
        anyhow::bail!(
            "refused: {} changed while updating; run the update again",
            args.name
        );
    }
    let e = entry(&candidate, &source, grants);
    report(&args.name, &e);
    store.commit(&lock, &args.name, &candidate.fetched.wasm, e)?;
    Ok(ExitCode::SUCCESS)
}
