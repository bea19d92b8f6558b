//! Every limit a plugin call runs under, in one place: the per-call budgets (time, memory,
//! result size) and the limiter that enforces the memory one, the engine's fixed ceilings
//! (stack, instances, tables), and the caps each capability puts on what a plugin may hand the
//! host (log lines, progress text, stdio, reads, handles, tool lists, filter verdicts).
//!
//! When a budget is broken the call ends with an error naming it, and only that call: the store
//! is thrown away and the host carries on. The other caps cut or refuse what is over them.

use std::time::Duration;

use wasmtime::ResourceLimiter;

/// Default wall-clock deadline of one call.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// Default memory limit of one call, across all of the instance's linear memories.
pub const DEFAULT_MEMORY: u64 = 256 << 20;
/// Default largest result of one call.
pub const DEFAULT_OUTPUT: u64 = 1 << 20;
/// The largest memory limit the engine is configured for (all of wasm32's address space).
pub const MAX_MEMORY: u64 = 4 << 30;
/// Table elements one instance may grow to; far above what compilers emit.
pub const MAX_TABLE_ELEMENTS: usize = 1 << 20;
/// Core instances one call's component may create.
pub const MAX_INSTANCES_PER_CALL: usize = 64;
/// Linear memories one call's component may create.
pub const MAX_MEMORIES_PER_CALL: usize = 16;
/// Tables one call's component may create.
pub const MAX_TABLES_PER_CALL: usize = 64;

/// Wasm stack a call may use before it traps with a stack overflow.
pub const MAX_WASM_STACK: usize = 1 << 20;
/// Plugin instances that may be alive at once (each call has its own).
pub const MAX_CONCURRENT_INSTANCES: u32 = 64;
/// Extra time the host waits past a deadline for the epoch trap before abandoning the call
/// (only a plugin blocked inside a host call, such as a sleep or a request, gets that far).
pub const DEADLINE_GRACE: Duration = Duration::from_millis(100);

/// Most resources (open files and directories, streams, pollables) one call may hold at once.
pub const MAX_HANDLES: usize = 512;
/// Bytes of a plugin's stdout, and of its stderr, kept per call.
pub const STDIO_CAP: usize = 64 * 1024;
/// Longest log message kept; the rest is cut.
pub const MAX_LOG_MESSAGE_BYTES: usize = 4096;
/// Total bytes of log messages kept from one call.
pub const MAX_LOG_CALL_BYTES: usize = 64 * 1024;
/// Bytes of progress text kept from one call; the rest is dropped.
pub const MAX_PROGRESS_BYTES: usize = 4 << 20;
/// The most one `descriptor.read` returns: the host holds it until it is copied into the plugin.
pub const MAX_READ: u64 = 1 << 20;

/// Budget for asking a tool plugin what it provides.
pub const DESCRIBE_BUDGET: Budget = Budget {
    timeout: Duration::from_secs(10),
    memory: DEFAULT_MEMORY,
    output: 4 << 20,
};
/// Most tools one plugin may provide: each is offered to the model on every turn.
pub const MAX_TOOLS: usize = 64;
/// Longest tool name, as the WIT documents.
pub const MAX_TOOL_NAME: usize = 64;
/// Longest tool description, in bytes.
pub const MAX_DESCRIPTION_BYTES: usize = 4096;
/// Largest input schema, as JSON.
pub const MAX_SCHEMA_BYTES: usize = 32 << 10;

/// What one bash-filter call may spend.
pub const FILTER_BUDGET: Budget = Budget {
    timeout: Duration::from_secs(10),
    memory: 128 << 20,
    output: 1 << 20,
};
/// Longest reason or rule kept from a bash filter.
pub const MAX_FILTER_TEXT: usize = 2000;

/// What one call may spend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Wall-clock time from the start of instantiation to the result.
    pub timeout: Duration,
    /// Bytes of linear memory, summed over the instance's memories.
    pub memory: u64,
    /// Bytes of the result handed back to the host.
    pub output: u64,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            timeout: DEFAULT_TIMEOUT,
            memory: DEFAULT_MEMORY,
            output: DEFAULT_OUTPUT,
        }
    }
}

impl Budget {
    /// The budget with the memory limit clamped to what the engine supports.
    pub fn clamped(mut self) -> Self {
        self.memory = self.memory.min(MAX_MEMORY);
        self
    }
}

/// Which budget a call broke, for error messages and the audit log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BudgetKind {
    Time,
    Memory,
    Stack,
    Output,
}

impl std::fmt::Display for BudgetKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BudgetKind::Time => "time",
            BudgetKind::Memory => "memory",
            BudgetKind::Stack => "stack",
            BudgetKind::Output => "output size",
        })
    }
}

impl BudgetKind {
    /// The stable machine-readable code of a call stopped by this budget (`budget_time`), for
    /// `--json` output and the audit log.
    pub fn code(self) -> &'static str {
        match self {
            BudgetKind::Time => "budget_time",
            BudgetKind::Memory => "budget_memory",
            BudgetKind::Stack => "budget_stack",
            BudgetKind::Output => "budget_output",
        }
    }

    /// The limit of this kind in `budget`, in words (`300 ms`, `64 MiB`).
    pub fn limit(self, budget: &Budget) -> String {
        match self {
            BudgetKind::Time => format!("{} ms", budget.timeout.as_millis()),
            BudgetKind::Memory => format!("{} MiB", budget.memory >> 20),
            BudgetKind::Stack => format!("{} KiB", MAX_WASM_STACK >> 10),
            BudgetKind::Output => format!("{} bytes", budget.output),
        }
    }
}

/// Enforces the memory budget, and remembers that it did so the failure can be named even
/// though the guest sees only a failed `memory.grow` (and usually traps afterwards).
#[derive(Debug)]
pub struct CallLimiter {
    limit: usize,
    /// Bytes of linear memory currently held, over all memories.
    used: usize,
    exceeded: bool,
}

impl CallLimiter {
    pub fn new(limit: u64) -> Self {
        CallLimiter {
            limit: usize::try_from(limit).unwrap_or(usize::MAX),
            used: 0,
            exceeded: false,
        }
    }

    /// Whether the guest asked for more memory than its budget.
    pub fn exceeded(&self) -> bool {
        self.exceeded
    }
}

impl ResourceLimiter for CallLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let after = self.used - current.min(self.used) + desired;
        if after > self.limit {
            self.exceeded = true;
            return Ok(false);
        }
        self.used = after;
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }

    fn instances(&self) -> usize {
        MAX_INSTANCES_PER_CALL
    }

    fn memories(&self) -> usize {
        MAX_MEMORIES_PER_CALL
    }

    fn tables(&self) -> usize {
        MAX_TABLES_PER_CALL
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_is_summed_over_memories_and_refusal_is_remembered() {
        let mut l = CallLimiter::new(100);
        assert!(l.memory_growing(0, 60, None).unwrap());
        // A second memory may only have what is left.
        assert!(!l.memory_growing(0, 50, None).unwrap());
        assert!(l.exceeded());
        assert!(l.memory_growing(0, 40, None).unwrap());
        // Growing the first memory counts only the difference.
        assert!(!l.memory_growing(60, 61, None).unwrap());
    }

    #[test]
    fn budgets_clamp_to_the_engine() {
        let b = Budget {
            memory: u64::MAX,
            ..Budget::default()
        };
        assert_eq!(b.clamped().memory, MAX_MEMORY);
    }
}
