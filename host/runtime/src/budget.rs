//! Per-call budgets and the limiter that enforces the memory one.
//!
//! Every plugin call gets a wall-clock deadline, a memory limit and a result-size limit. When one
//! is broken the call ends with an error naming it, and only that call: the store is thrown away
//! and the host carries on.

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
const MAX_TABLE_ELEMENTS: usize = 1 << 20;

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
            BudgetKind::Stack => format!("{} KiB", super::engine::MAX_WASM_STACK >> 10),
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
        64
    }

    fn memories(&self) -> usize {
        16
    }

    fn tables(&self) -> usize {
        64
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
