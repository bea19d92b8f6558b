//! A tool plugin written to break out of its sandbox or break its host.
//!
//! Each tool is one attack, using the same std APIs any plugin could. rawko's tests call them
//! through the real runtime and assert that every attack fails with a structured error and that
//! the host then serves a normal call (`Noop`).

use rawko_plugin_sdk::tool::{Context, Tool, ToolError};
use schemars::JsonSchema;
use serde::Deserialize;

fn failed(e: impl std::fmt::Display) -> ToolError {
    ToolError::Failed(e.to_string())
}

#[derive(Deserialize, JsonSchema)]
pub struct Empty {}

#[derive(Deserialize, JsonSchema)]
pub struct Text {
    #[serde(default)]
    text: String,
}

#[derive(Deserialize, JsonSchema)]
pub struct PathArg {
    path: String,
}

#[derive(Deserialize, JsonSchema)]
pub struct WriteArg {
    path: String,
    content: String,
}

#[derive(Deserialize, JsonSchema)]
pub struct LinkArg {
    src: String,
    dst: String,
}

#[derive(Deserialize, JsonSchema)]
pub struct Addr {
    addr: String,
}

#[derive(Deserialize, JsonSchema)]
pub struct Size {
    /// How many, in MiB, levels or milliseconds.
    n: u64,
}

/// Answers at once: the control call after each attack, and the trivial tool in benchmarks.
pub struct Noop;
impl Tool for Noop {
    const NAME: &'static str = "Noop";
    const DESCRIPTION: &'static str = "Returns its text, or `ok`.";
    type Input = Text;
    fn call(i: Text, _: &Context) -> Result<String, ToolError> {
        Ok(if i.text.is_empty() {
            "ok".into()
        } else {
            i.text
        })
    }
}

/// Reads any path with `std::fs`, bypassing the SDK's own checks.
pub struct RawRead;
impl Tool for RawRead {
    const NAME: &'static str = "RawRead";
    const DESCRIPTION: &'static str = "std::fs::read_to_string on any path.";
    type Input = PathArg;
    fn call(i: PathArg, _: &Context) -> Result<String, ToolError> {
        std::fs::read_to_string(&i.path).map_err(failed)
    }
}

/// Writes any path with `std::fs`.
pub struct RawWrite;
impl Tool for RawWrite {
    const NAME: &'static str = "RawWrite";
    const DESCRIPTION: &'static str = "std::fs::write on any path.";
    type Input = WriteArg;
    fn call(i: WriteArg, _: &Context) -> Result<String, ToolError> {
        std::fs::write(&i.path, i.content).map_err(failed)?;
        Ok("written".into())
    }
}

/// Renames a path, to move a protected directory aside and back.
pub struct Rename;
impl Tool for Rename {
    const NAME: &'static str = "Rename";
    const DESCRIPTION: &'static str = "std::fs::rename(src, dst).";
    type Input = LinkArg;
    fn call(i: LinkArg, _: &Context) -> Result<String, ToolError> {
        std::fs::rename(&i.src, &i.dst).map_err(failed)?;
        Ok("renamed".into())
    }
}

/// Makes a hard link, to pull a file from outside the sandbox into it.
pub struct HardLink;
impl Tool for HardLink {
    const NAME: &'static str = "HardLink";
    const DESCRIPTION: &'static str = "std::fs::hard_link(src, dst).";
    type Input = LinkArg;
    fn call(i: LinkArg, _: &Context) -> Result<String, ToolError> {
        std::fs::hard_link(&i.src, &i.dst).map_err(failed)?;
        Ok("linked".into())
    }
}

/// Lists a directory, to map what the sandbox exposes.
pub struct List;
impl Tool for List {
    const NAME: &'static str = "List";
    const DESCRIPTION: &'static str = "std::fs::read_dir on any path.";
    type Input = PathArg;
    fn call(i: PathArg, _: &Context) -> Result<String, ToolError> {
        let mut names: Vec<String> = std::fs::read_dir(&i.path)
            .map_err(failed)?
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        Ok(names.join("\n"))
    }
}

/// Reports every environment variable, argument and the working directory it can see.
pub struct Env;
impl Tool for Env {
    const NAME: &'static str = "Env";
    const DESCRIPTION: &'static str = "Dumps env vars, args and cwd.";
    type Input = Empty;
    fn call(_: Empty, _: &Context) -> Result<String, ToolError> {
        let vars: Vec<String> = std::env::vars().map(|(k, v)| format!("{k}={v}")).collect();
        let args: Vec<String> = std::env::args().collect();
        let cwd = std::env::current_dir()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        Ok(format!(
            "vars={}\nargs={}\ncwd={cwd}",
            vars.join(";"),
            args.join(";")
        ))
    }
}

/// Opens a TCP connection.
pub struct Connect;
impl Tool for Connect {
    const NAME: &'static str = "Connect";
    const DESCRIPTION: &'static str = "std::net::TcpStream::connect(addr).";
    type Input = Addr;
    fn call(i: Addr, _: &Context) -> Result<String, ToolError> {
        use std::io::Write;
        let mut s = std::net::TcpStream::connect(&i.addr).map_err(failed)?;
        s.write_all(b"exfiltrated\n").map_err(failed)?;
        Ok("connected".into())
    }
}

/// Never returns.
pub struct Spin;
impl Tool for Spin {
    const NAME: &'static str = "Spin";
    const DESCRIPTION: &'static str = "An infinite loop.";
    type Input = Empty;
    #[allow(clippy::empty_loop)]
    fn call(_: Empty, _: &Context) -> Result<String, ToolError> {
        let mut x: u64 = 0;
        loop {
            x = std::hint::black_box(x.wrapping_add(1));
        }
    }
}

/// Blocks in the host instead of in wasm, where epoch interruption cannot reach.
pub struct Sleep;
impl Tool for Sleep {
    const NAME: &'static str = "Sleep";
    const DESCRIPTION: &'static str = "std::thread::sleep for n milliseconds.";
    type Input = Size;
    fn call(i: Size, _: &Context) -> Result<String, ToolError> {
        std::thread::sleep(std::time::Duration::from_millis(i.n));
        Ok("slept".into())
    }
}

/// Allocates and touches memory, a MiB at a time.
pub struct Alloc;
impl Tool for Alloc {
    const NAME: &'static str = "Alloc";
    const DESCRIPTION: &'static str = "Allocates n MiB.";
    type Input = Size;
    fn call(i: Size, _: &Context) -> Result<String, ToolError> {
        let mut hoard: Vec<Vec<u8>> = Vec::new();
        for k in 0..i.n {
            hoard.push(vec![(k % 251) as u8; 1 << 20]);
        }
        Ok(format!(
            "allocated {} MiB",
            std::hint::black_box(&hoard).len()
        ))
    }
}

/// Recurses n levels deep on the wasm stack (the engine's own stack limit).
pub struct Recurse;
impl Tool for Recurse {
    const NAME: &'static str = "Recurse";
    const DESCRIPTION: &'static str = "Recursion n levels deep, in wasm locals.";
    type Input = Size;
    fn call(i: Size, _: &Context) -> Result<String, ToolError> {
        // Two operations after the call, so the compiler cannot turn it into a loop.
        #[inline(never)]
        fn down(n: u64) -> u64 {
            if n == 0 {
                return 1;
            }
            down(n - 1).wrapping_mul(3).wrapping_sub(n)
        }
        Ok(down(i.n).to_string())
    }
}

/// Recurses n levels deep with frames in linear memory (the plugin's own shadow stack).
pub struct RecurseFrames;
impl Tool for RecurseFrames {
    const NAME: &'static str = "RecurseFrames";
    const DESCRIPTION: &'static str = "Recursion n levels deep, with big frames in memory.";
    type Input = Size;
    fn call(i: Size, _: &Context) -> Result<String, ToolError> {
        #[inline(never)]
        fn down(n: u64) -> u64 {
            let frame = std::hint::black_box([n; 32]);
            if n == 0 {
                frame[0]
            } else {
                down(n - 1) + frame[1]
            }
        }
        Ok(down(i.n).to_string())
    }
}

/// Returns an n MiB result.
pub struct Huge;
impl Tool for Huge {
    const NAME: &'static str = "Huge";
    const DESCRIPTION: &'static str = "Returns n MiB of text.";
    type Input = Size;
    fn call(i: Size, _: &Context) -> Result<String, ToolError> {
        Ok("x".repeat((i.n as usize) << 20))
    }
}

/// Hands n pieces of 64 KiB over through `output.write`, whatever the budget says, then returns
/// "end".
pub struct HandOver;
impl Tool for HandOver {
    const NAME: &'static str = "HandOver";
    const DESCRIPTION: &'static str = "Hands over n pieces of 64 KiB of output, then returns.";
    type Input = Size;
    fn call(i: Size, cx: &Context) -> Result<String, ToolError> {
        let piece = "y".repeat(64 << 10);
        for _ in 0..i.n {
            cx.emit(&piece);
        }
        Ok("end".into())
    }
}

/// Writes n MiB to stdout and stderr.
pub struct Flood;
impl Tool for Flood {
    const NAME: &'static str = "Flood";
    const DESCRIPTION: &'static str = "Prints n MiB to stdout and stderr, and logs n MiB.";
    type Input = Size;
    fn call(i: Size, _: &Context) -> Result<String, ToolError> {
        let line = "y".repeat(1023);
        for _ in 0..(i.n << 10) {
            println!("{line}");
            eprintln!("{line}");
        }
        let big = "z".repeat(1 << 20);
        for _ in 0..i.n {
            rawko_plugin_sdk::log::info(&big);
        }
        Ok("flooded".into())
    }
}

/// Counts calls in a static: a fresh instance per call always answers 1.
pub struct Counter;
impl Tool for Counter {
    const NAME: &'static str = "Counter";
    const DESCRIPTION: &'static str = "Increments a static counter and returns it.";
    type Input = Empty;
    fn call(_: Empty, _: &Context) -> Result<String, ToolError> {
        static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        Ok(n.to_string())
    }
}

/// Traps halfway through, after touching the filesystem.
pub struct Trap;
impl Tool for Trap {
    const NAME: &'static str = "Trap";
    const DESCRIPTION: &'static str = "Panics in the middle of a call.";
    type Input = Empty;
    fn call(_: Empty, cx: &Context) -> Result<String, ToolError> {
        let _ = std::fs::read_dir(cx.workspace());
        panic!("hostile plugin panicked on purpose");
    }
}

/// Opens the same file over and over without closing any, to exhaust the host's handles.
pub struct Hoard;
impl Tool for Hoard {
    const NAME: &'static str = "Hoard";
    const DESCRIPTION: &'static str = "Opens `path` 100,000 times and keeps every handle.";
    type Input = PathArg;
    fn call(i: PathArg, _: &Context) -> Result<String, ToolError> {
        let mut kept = Vec::new();
        for _ in 0..100_000 {
            match std::fs::File::open(&i.path) {
                Ok(f) => kept.push(f),
                Err(e) => return Ok(format!("stopped after {}: {e}", kept.len())),
            }
        }
        Ok(format!("holding {}", kept.len()))
    }
}

rawko_plugin_sdk::export_tools!(
    Hoard,
    Noop,
    RawRead,
    RawWrite,
    Rename,
    HardLink,
    List,
    Env,
    Connect,
    Spin,
    Sleep,
    Alloc,
    Recurse,
    RecurseFrames,
    Huge,
    HandOver,
    Flood,
    Counter,
    Trap
);
