//! The `rawko` command line: the helper modes the same binary serves, then the commands, which
//! live in the library (`rawko::cli`) so that this file rebuilds and links on its own.

use rawko::cli;

/// Large blocks (a long tool result) on huge pages where the kernel has them: see `rawko::alloc`.
#[global_allocator]
static ALLOCATOR: rawko::alloc::Allocator = rawko::alloc::Allocator;

fn main() -> std::process::ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let first = args.get(1);
    // The same binary is the kernel sandbox's helper (`rawko __sandbox POLICY PROGRAM ...`). It
    // must start before anything else, while the process has a single thread.
    #[cfg(target_os = "linux")]
    {
        if first.is_some_and(|a| a == rawko_sandbox::policy::HELPER_ARG) {
            rawko_sandbox::helper::main(&args[2..]);
        }
        // And the reaper of programs run without it (`rawko __reap PARENT PROGRAM ...`).
        if first.is_some_and(|a| a == rawko_sandbox::reaper::REAPER_ARG) {
            rawko_sandbox::reaper::main(&args[2..]);
        }
        // And the keeper that removes a task's process-limit cgroup once rawko is gone.
        if first.is_some_and(|a| a == rawko_sandbox::pids::KEEPER_ARG) {
            rawko_sandbox::pids::keeper_main(&args[2..]);
        }
        // And the holder of the namespaces its commands share (`rawko __namespaces`).
        if first.is_some_and(|a| a == rawko_sandbox::namespaces::HOLDER_ARG) {
            rawko_sandbox::helper::holder_main();
        }
    }
    // The installer's compiler (`rawko __compile CACHE_DIR FILE`), limited by its parent.
    if first.is_some_and(|a| a == cli::COMPILE_ARG) {
        return cli::compile_main(&args[2..]);
    }
    // The sandbox helper built into this binary (static, so quick to start), where it was built.
    #[cfg(rawko_static_helper)]
    rawko_sandbox::offer_helper(include_bytes!(concat!(
        env!("OUT_DIR"),
        "/rawko-sandbox-static"
    )));
    // The embedded plugins' digests, computed at build time, key their compiled forms.
    for b in rawko_builtins::ALL {
        rawko_runtime::cache::vouch(b.wasm, b.sha256);
    }
    // The host's tools complete the tool catalogue that agents are read against.
    rawko_toolset::host::install_catalogue();
    cli::main()
}
