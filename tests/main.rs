//! rawko's integration tests, one binary for all of them (linking is the slow part).
//!
//! - `sandbox`: hostile plugins against the real runtime, in-process, so each attack can be
//!   followed by a normal call to the same host.
//! - `cli_tools`: the real `rawko` binary calling the real first-party tools.
//! - `acp`: external coding agents over ACP as states (a scripted agent that reads, writes, runs
//!   terminals, asks permission and attacks its grants), coding CLIs, and `rawko acp` driven by
//!   a scripted editor.
//! - `adapters`: the first-party adapters through the real HTTP capability against the scripted
//!   model server: replies, tool calls, streaming, usage, malformed output, recorded fixtures,
//!   recording and replay.
//! - `grep_vs_rg`: the `Grep` tool against ripgrep on one fixture tree: same files, same lines.
//! - `http_attacks`: a hostile adapter against the HTTP capability's grant and secrets.
//! - `http_faults`: retries, backoff and timeouts, with the attempts counted.
//! - `cli_adapters`: `rawko adapters` and `rawko ask` through the real binary.
//! - `plugin_install`: `rawko plugin ...` against real files, a loopback HTTP server, a real OCI
//!   registry and real minisign signatures.
//! - `plugin_languages`: a Python tool built with componentize-py, packed, installed and called;
//!   the Python project template built as its README says.
//! - `installed_plugins`: installed adapters and bash filters named in config, used by `rawko
//!   ask`, `rawko adapters` and `rawko bash check` with exactly the grants given at install.
//! - `shell`: bypass payloads against the real parser and the built-in policy plugin.
//! - `cli_bash`: `rawko bash check` and the `Bash` tool through the real binary: verdicts,
//!   exit codes, and what running a command does and does not do.
//! - `cli_agent_tools`: `tools list --agent` and `tool call --agent` with each agent's capabilities.
//! - `agent_dialects`: Claude Code's agent directories and an agent's own model, end to end.
//! - `cli_agents`: `rawko init` and `rawko agents` on every dialect and on hostile files.
//! - `agents_watch`: hot reload, in process and through `rawko agents watch`.
//! - `context_window`: a 300-step run inside a small window, and the task token budget.
//! - `demo`: `rawko demo`, offline, through the real binary.
//! - `first_hour`: what a new user trips over, fixed.
//! - `graphs`: `rawko agents graph` and `rawko tasks show --format mermaid|dot`, read by
//!   Graphviz.
//! - `git_tool`: the `Git` tool against a repository whose config names programs for every
//!   hook git has, and against planted pointers to other repositories.
//! - `knowledge`: `rawko knowledge` sync, resync, branch switches, a killed sync, known hits, hybrid
//!   ranking against a scripted embeddings server, and a hostile corpus.
//! - `mcp_servers`: MCP servers as tools: the reference server from npm over stdio and HTTP,
//!   consent, `.mcp.json` and trust, and a hostile server's attacks.
//! - `mcp_serve`: `rawko mcp serve` driven by the Python `mcp` client over stdio and streamable
//!   HTTP: the agent's tools, its grants and sandbox, the audit log, the bearer token.
//! - `run_crash`: `rawko run` killed with SIGKILL at several points, then `rawko resume`.
//! - `run_scenarios`: `rawko run` end to end, one folder per scenario under `tests/scenarios/`.
//! - `store_leases`: a task's lease between hosts (`RAWKO_HOST_ID`), judged by the store's clock,
//!   held by one process's identity; `rawko tasks list --all` over several workspaces.
//! - `temporal`: `rawko run --remote` against real `rawko worker`s on a Temporal dev server and
//!   the PostgreSQL team store; a worker killed with SIGKILL while it holds tasks.
//! - `tls_attacks`: HTTPS servers whose certificate does not verify (self-signed, for another
//!   name, expired), refused by an adapter, `rawko plugin install` (a URL and an OCI registry)
//!   and an MCP server over HTTP; the same server with a certificate from a trusted CA, used.
//! - `trust_boundary`: a stranger's repository attacking the trust boundary: config, task store,
//!   agents.

mod support;

mod acp;
mod adapters;
mod agent_dialects;
mod agents_watch;
mod cli_adapters;
mod cli_agent_tools;
mod cli_agents;
mod cli_bash;
mod cli_tools;
mod context_window;
mod demo;
mod first_hour;
mod git_tool;
mod graphs;
mod grep_vs_rg;
mod http_attacks;
mod http_faults;
mod installed_plugins;
mod kernel_sandbox;
mod knowledge;
mod mcp_serve;
mod mcp_servers;
mod plugin_install;
mod plugin_languages;
mod regressions;
mod run_crash;
mod run_scenarios;
mod sandbox;
mod shell;
mod snapshots;
mod store_leases;
mod store_postgres;
mod store_transfer;
mod telemetry;
mod temporal;
mod test_plugins;
mod tls_attacks;
mod trust_boundary;
mod ui;
mod ui_browser;
