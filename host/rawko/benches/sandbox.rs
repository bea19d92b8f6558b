//! What the kernel sandbox costs per command: `/bin/true` started directly, under the reaper
//! alone (mode `full`), and through the sandbox helper (the static one built into rawko, the
//! `rawko-sandbox` beside it, or `rawko` itself; namespaces, a fresh `/proc`, landlock), in the
//! read-only and workspace-write modes. Prints a table with the ratio and the extra time.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rawko_sandbox::{Mode, Policy};

const RUNS: usize = 200;

fn time(mut make: impl FnMut() -> Command) -> (Duration, Duration) {
    let mut samples: Vec<Duration> = (0..RUNS)
        .map(|_| {
            let mut c = make();
            c.stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            let t = Instant::now();
            let status = c.status().expect("spawn");
            let took = t.elapsed();
            assert!(status.success(), "the command failed");
            took
        })
        .collect();
    samples.sort();
    (samples[RUNS / 2], samples[RUNS * 9 / 10])
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

fn main() {
    let launcher = Path::new(env!("CARGO_BIN_EXE_rawko"));
    let ws = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let home = std::env::home_dir();
    let program = Path::new("/bin/true");
    // The static helper rawko embeds, offered as rawko's `main` offers it.
    #[cfg(rawko_static_helper)]
    rawko_sandbox::offer_helper(include_bytes!(concat!(
        env!("OUT_DIR"),
        "/rawko-sandbox-static"
    )));
    let builtin = rawko_sandbox::builtin_helper_program();
    let (base, base90) = time(|| Command::new(program));
    println!(
        "sandbox set-up per command, {RUNS} runs of /bin/true, {} cores",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    println!("| how | median | p90 | ratio | extra (median) |");
    println!("|---|---|---|---|---|");
    println!(
        "| unsandboxed spawn | {} | {} | 1.0x | - |",
        ms(base),
        ms(base90)
    );
    let (med, p90) = time(|| rawko_sandbox::reaper::command(launcher, program, "true", &[]));
    println!(
        "| unconfined, under the reaper (full, --no-sandbox) | {} | {} | {:.1}x | {} |",
        ms(med),
        ms(p90),
        med.as_secs_f64() / base.as_secs_f64(),
        ms(med.saturating_sub(base))
    );
    for (mode, network) in [
        (Mode::ReadOnly, false),
        (Mode::WorkspaceWrite, false),
        (Mode::WorkspaceWrite, true),
    ] {
        let mut policy = Policy::new(mode, ws.path(), tmp.path(), home.as_deref());
        policy.network = network;
        // The static helper built into rawko (what rawko uses where the build made it), the
        // dynamically linked one beside the binary (what it uses otherwise), then `rawko`
        // itself in its place (where neither is there).
        let beside = launcher.with_file_name(rawko_sandbox::HELPER_PROGRAM);
        let mut helpers = vec![
            ("rawko-sandbox beside rawko", beside.clone()),
            ("rawko itself", launcher.to_path_buf()),
        ];
        if let Some(builtin) = &builtin {
            helpers.insert(0, ("the static helper built in", builtin.clone()));
        }
        for (by, exe) in &helpers {
            let (med, p90) = time(|| {
                let via = policy.command(launcher, program, "true", &[]);
                let mut c = Command::new(exe);
                c.args(via.get_args());
                c
            });
            println!(
                "| sandboxed by {by}, {mode}, network {} | {} | {} | {:.1}x | {} |",
                if network { "on" } else { "off" },
                ms(med),
                ms(p90),
                med.as_secs_f64() / base.as_secs_f64(),
                ms(med.saturating_sub(base))
            );
        }
    }
}
