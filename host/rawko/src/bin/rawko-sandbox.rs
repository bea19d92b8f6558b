//! `rawko-sandbox`: the kernel sandbox's helper, the reaper and the cgroup keeper, as a program
//! of their own beside `rawko`.
//!
//! Every native command rawko runs starts one of these first; the whole `rawko` binary has the
//! same roles, but loading it (its size, its relocations) costs milliseconds that this small
//! program does not. rawko uses it when it is installed beside it and falls back to itself.

use std::ffi::OsString;

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("rawko-sandbox: the kernel sandbox is Linux only");
    std::process::exit(2)
}

#[cfg(target_os = "linux")]
fn main() {
    let args: Vec<OsString> = std::env::args_os().collect();
    let role = args.get(1).and_then(|a| a.to_str()).unwrap_or("");
    let rest = args.get(2..).unwrap_or(&[]);
    match role {
        rawko_sandbox::policy::HELPER_ARG => rawko_sandbox::helper::main(rest),
        rawko_sandbox::reaper::REAPER_ARG => rawko_sandbox::reaper::main(rest),
        rawko_sandbox::pids::KEEPER_ARG => rawko_sandbox::pids::keeper_main(rest),
        _ => {
            eprintln!(
                "rawko-sandbox is started by rawko to confine the commands it runs; run `rawko` \
                 instead (see `rawko doctor`)"
            );
            std::process::exit(2)
        }
    }
}
