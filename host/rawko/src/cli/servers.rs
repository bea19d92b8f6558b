//! The MCP servers a workspace configures, started and approved: the commands that offer tools
//! (`run`, `tools`, `tool`, `acp`) all take the same servers with the same consent.

use std::rc::Rc;

use crate::cli::{BadInput, Context, print_err};
use rawko_mcp::client::{Connection, Launch as McpLaunch, ServerSpec, Servers, Source};
use rawko_mcp::consent::{Consents, PrivateEndpoint};

/// The configured MCP servers, started and approved, for a run.
pub(crate) async fn mcp_servers(cx: &Context, yes: bool) -> anyhow::Result<Rc<Servers>> {
    let specs = configured_servers(cx)?;
    Ok(Rc::new(connect_servers(cx, &specs, yes).await?))
}

/// The MCP servers in effect: the user's config, then, once the workspace is trusted, its
/// config and Claude Code's `.mcp.json` (a name the user's config defines stays the user's; an
/// entry of the user's without `command` or `url` adjusts the `.mcp.json` server of its name).
/// A server whose config is wrong is bad input.
pub(crate) fn configured_servers(cx: &Context) -> anyhow::Result<Vec<ServerSpec>> {
    let layers = cx.config_layers()?;
    let user = layers.user_only().mcp;
    let mut specs = Vec::new();
    let mut adjustments = std::collections::BTreeMap::new();
    for (name, cfg) in &user {
        if rawko_mcp::client::is_adjustment(name, cfg).map_err(|e| BadInput::new(e.to_string()))? {
            adjustments.insert(name.clone(), cfg.clone());
            continue;
        }
        specs.push(
            ServerSpec::from_config(name, cfg, Source::User)
                .map_err(|e| BadInput::new(e.to_string()))?,
        );
    }
    if let Some((_, ws)) = &layers.workspace {
        // What `effective` kept of the workspace's servers: only there when trusted.
        for (name, cfg) in &ws.mcp {
            specs.push(
                ServerSpec::from_config(name, cfg, Source::Workspace)
                    .map_err(|e| BadInput::new(e.to_string()))?,
            );
        }
    }
    let dot_mcp = cx.workspace().join(".mcp.json");
    if cx.workspace_trust().is_trusted() && dot_mcp.is_file() {
        let text = rawko_capability::fs::read_regular(&dot_mcp, 1 << 20)
            .map_err(|e| BadInput::new(format!("{}: {e}", dot_mcp.display())))?;
        let text = String::from_utf8_lossy(&text);
        for (name, cfg) in
            rawko_mcp::client::from_mcp_json(&text).map_err(|e| BadInput::new(e.to_string()))?
        {
            if specs.iter().any(|s| s.name == name) {
                continue;
            }
            let cfg = match adjustments.get(&name) {
                Some(by) => rawko_mcp::client::adjusted(cfg, by),
                None => cfg,
            };
            specs.push(
                ServerSpec::from_config(&name, &cfg, Source::McpJson)
                    .map_err(|e| BadInput::new(e.to_string()))?,
            );
        }
    } else if dot_mcp.is_file() {
        tracing::info!(".mcp.json is ignored until you trust the workspace (`rawko trust`)");
    }
    Ok(specs)
}

/// Start and connect the servers in `specs` and keep those the user approved: approved before
/// as they are now, approved here with `yes`, or on a terminal when asked. The others are left
/// out with a warning saying why.
pub(crate) async fn connect_servers(
    cx: &Context,
    specs: &[ServerSpec],
    yes: bool,
) -> anyhow::Result<Servers> {
    if specs.is_empty() {
        return Ok(Servers::default());
    }
    let launch = McpLaunch {
        launcher: std::env::current_exe()
            .map_err(|e| anyhow::anyhow!("cannot find the rawko binary to run the sandbox: {e}"))?,
        unconfined: cx.no_sandbox,
        workspace: cx.workspace().to_path_buf(),
        path_dirs: rawko_shell::Resolver::from_env(&[cx.workspace()])
            .path_dirs()
            .to_vec(),
    };
    if cx.no_sandbox {
        print_err(
            "warning: --no-sandbox: MCP servers run without the kernel sandbox; they can read \
             your home directory, use the network and write anywhere you can",
        )?;
    }
    let mut consents = Consents::load(&cx.dirs.data).map_err(|e| BadInput::new(e.to_string()))?;
    // Servers on loopback or private addresses are decided on before anything reaches them.
    let mut reachable = Vec::new();
    let mut left_out = Vec::new();
    for spec in specs {
        let mut spec = spec.clone();
        if let Some(endpoint) = spec.private_endpoint().await {
            match decide_private(cx, &spec, &endpoint, &consents, yes)? {
                Ok(admitted) => spec.admit(admitted),
                Err(why) => {
                    left_out.push((spec.name.clone(), why));
                    continue;
                }
            }
        }
        reachable.push(spec);
    }
    let note = crate::cli::output::SlowNote::after_a_second("starting the MCP servers…");
    let mut servers = Servers::connect(&reachable, &launch).await;
    drop(note);
    servers.failed.extend(left_out);
    let mut refused = Vec::new();
    for c in &servers.connected {
        let fp = c.fingerprint();
        let private = c.spec.admitted.as_ref();
        if consents.given(&c.spec.name, &fp) {
            // Approved before; an address decided on just now is kept with it.
            if private.is_some() && consents.private(&c.spec.name) != private {
                consents
                    .give(&c.spec.name, &fp, private)
                    .map_err(|e| anyhow::anyhow!(e.to_string()))?;
            }
            continue;
        }
        let changed = consents.changed(&c.spec.name, &fp);
        if yes || ask(c, changed)? {
            consents
                .give(&c.spec.name, &fp, private)
                .map_err(|e| anyhow::anyhow!(e.to_string()))?;
        } else {
            refused.push((
                c.spec.name.clone(),
                format!(
                    "{} and not approved: approve it on a terminal, or with --yes",
                    if changed {
                        "changed since you approved it"
                    } else {
                        "new"
                    }
                ),
            ));
        }
    }
    for (name, why) in refused {
        servers.drop_server(&name, why).await;
    }
    for (name, why) in &servers.failed {
        print_err(&format!(
            "warning: MCP server `{}` left out: {}",
            rawko_text::line(name, 64),
            rawko_text::block(why, 2_000)
        ))?;
    }
    Ok(servers)
}

/// Whether server `spec`, whose URL leads to the loopback or private `endpoint` alone, may be
/// reached there: `Ok(endpoint admitted)`, or `Err(why not, and what to do)`. The user's own
/// servers say so in the user's config; a server a trusted workspace brings is reached where
/// the user's consent admitted it before, or is asked about (on a terminal; `--yes` approves),
/// the answer kept with the consent to its tools.
fn decide_private(
    cx: &Context,
    spec: &ServerSpec,
    endpoint: &PrivateEndpoint,
    consents: &Consents,
    yes: bool,
) -> anyhow::Result<Result<PrivateEndpoint, String>> {
    let name = rawko_text::line(&spec.name, 64);
    let url = rawko_text::line(&endpoint.url, 200);
    let where_ = endpoint.describe();
    let user_config = cx.dirs.config.join(rawko_config::FILE_NAME);
    let snippet = format!("  mcp:\n    {name}:\n      allow_private_network: true");
    let reached_only = format!("{url} is {where_}, which rawko reaches only when you say so");
    if spec.source == Source::User {
        return Ok(Err(format!(
            "{reached_only}: add `allow_private_network: true` to it in your config, {}:\n{snippet}",
            user_config.display()
        )));
    }
    if let Some(before) = consents.private(&spec.name)
        && before.covers(endpoint)
    {
        return Ok(Ok(before.clone()));
    }
    let from = match spec.source {
        Source::McpJson => "the workspace's .mcp.json",
        _ => "the workspace's .rawko/config.yaml",
    };
    if yes {
        print_err(&format!(
            "MCP server `{name}`: {reached_only}; it comes from {from}, and --yes approves it \
             there (remembered with your consent, until its address changes)"
        ))?;
        return Ok(Ok(endpoint.clone()));
    }
    if ask_private(&format!("MCP server `{name}`: {reached_only}"), from)? {
        return Ok(Ok(endpoint.clone()));
    }
    let instead = match spec.source {
        Source::McpJson => format!(
            "or allow it for good in your config, {}:\n{snippet}",
            user_config.display()
        ),
        _ => format!(
            "or add `allow_private_network: true` to it in {}",
            cx.workspace()
                .join(".rawko")
                .join(rawko_config::FILE_NAME)
                .display()
        ),
    };
    Ok(Err(format!(
        "{reached_only}, and it comes from {from}: approve it on a terminal or with --yes \
         (remembered with your consent, until its address changes), {instead}"
    )))
}

/// Ask on the terminal whether to reach a server at a loopback or private address
/// (`question` says which); `false` without a terminal.
fn ask_private(question: &str, from: &str) -> anyhow::Result<bool> {
    use std::io::{BufRead, IsTerminal, Write};
    if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
        return Ok(false);
    }
    let mut err = std::io::stderr().lock();
    write!(
        err,
        "{question}; it comes from {from}. Reach it there, to see its tools? [y/N] "
    )?;
    err.flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes"))
}

/// Ask on the terminal whether to use server `c`, showing what it is, where (when that is a
/// loopback or private address) and its tools; `false` without a terminal.
fn ask(c: &Connection, changed: bool) -> anyhow::Result<bool> {
    use std::io::{BufRead, IsTerminal, Write};
    if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
        return Ok(false);
    }
    let mut err = std::io::stderr().lock();
    let at = c
        .spec
        .admitted
        .as_ref()
        .map(|p| format!(", {}", p.describe()))
        .unwrap_or_default();
    writeln!(
        err,
        "MCP server `{}` ({}{at}) {} {} tool(s):",
        rawko_text::line(&c.spec.name, 64),
        rawko_text::line(&c.spec.identity(), 200),
        if changed {
            "has changed since you approved it; it now offers"
        } else {
            "is new; it offers"
        },
        c.tools.len()
    )?;
    for t in &c.tools {
        writeln!(
            err,
            "  {}  {}",
            t.name,
            rawko_text::line(t.description.lines().next().unwrap_or(""), 100)
        )?;
    }
    write!(err, "Let agents use it? [y/N] ")?;
    err.flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes"))
}
