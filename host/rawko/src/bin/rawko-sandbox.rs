//! `rawko-sandbox`: the kernel sandbox's helper, the reaper and the cgroup keeper, as a program
//! of their own beside `rawko`.
//!
//! Every native command rawko runs starts one of these first; the whole `rawko` binary has the
//! same roles, but loading it (its size, its relocations) costs milliseconds that this small
//! program does not. rawko uses it when it is installed beside it and falls back to itself.

//!
//! It starts without the Rust runtime's set-up (`#![no_main]`): no check of the standard
//! descriptors, no SIGPIPE disposition, no stack guard read from `/proc/self/maps`, none of which
//! a process that confines itself and execs needs, and each of which every command paid for.
#![cfg_attr(all(target_os = "linux", not(test)), no_main)]

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("rawko-sandbox: the kernel sandbox is Linux only");
    std::process::exit(2)
}

/// The C entry point, with the arguments as exec passed them.
///
/// # Safety
/// Called by the C runtime only: `argv` holds `argc` pointers to NUL-terminated strings.
/// (A test build has the test harness's `main` instead.)
#[cfg(all(target_os = "linux", not(test)))]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn main(argc: libc::c_int, argv: *const *const libc::c_char) -> libc::c_int {
    use std::ffi::{CStr, OsString};
    use std::os::unix::ffi::OsStringExt;
    let args: Vec<OsString> = (0..usize::try_from(argc).unwrap_or(0))
        .map(|i| {
            // SAFETY: exec gives `argc` pointers to NUL-terminated strings in `argv`.
            let arg = unsafe { CStr::from_ptr(*argv.add(i)) };
            OsString::from_vec(arg.to_bytes().to_vec())
        })
        .collect();
    let role = args.get(1).and_then(|a| a.to_str()).unwrap_or("");
    let rest = args.get(2..).unwrap_or(&[]);
    match role {
        rawko_sandbox::policy::HELPER_ARG => rawko_sandbox::helper::main(rest),
        rawko_sandbox::reaper::REAPER_ARG => rawko_sandbox::reaper::main(rest),
        rawko_sandbox::pids::KEEPER_ARG => rawko_sandbox::pids::keeper_main(rest),
        rawko_sandbox::namespaces::HOLDER_ARG => rawko_sandbox::helper::holder_main(),
        _ => {
            eprintln!(
                "rawko-sandbox is started by rawko to confine the commands it runs; run `rawko` \
                 instead (see `rawko doctor`)"
            );
            2
        }
    }
}
