//! What every plugin call shares, whatever the plugin kind: compiling and linking a component,
//! and the store a single call runs in with its budgets armed.

use std::sync::Arc;
use std::time::Duration;

use wasmtime::Store;
use wasmtime::component::{InstancePre, Linker};

use super::budget::{Budget, BudgetKind};
use super::cache::Compiled;
use super::engine::deadline_ticks;
use super::{HostState, Runtime, RuntimeError};
use crate::capability::FsGrants;

/// Extra time the host waits past a deadline for the epoch trap before abandoning the call
/// (only a plugin blocked inside a host call, such as a sleep, gets that far).
const DEADLINE_GRACE: Duration = Duration::from_millis(100);

/// Compile `wasm` (or load it from the cache) and link it against `linker`.
pub(crate) fn prepare(
    rt: &Runtime,
    linker: &Linker<HostState>,
    name: &str,
    wasm: &[u8],
) -> Result<(Compiled, InstancePre<HostState>), RuntimeError> {
    let fail = |message: String| RuntimeError::Load {
        plugin: name.to_string(),
        message,
    };
    let compiled = rt
        .cache()
        .load(rt.engine(), wasm)
        .map_err(|e| fail(format!("not a valid WebAssembly component: {e:#}")))?;
    let pre = linker
        .instantiate_pre(&compiled.component)
        .map_err(|e| fail(format!("needs an import rawko does not provide: {e:#}")))?;
    Ok((compiled, pre))
}

/// How a sandboxed call failed, before it is put into words.
pub(crate) enum Failure {
    Budget(BudgetKind),
    Trap(String),
}

impl Failure {
    /// The broken limit, in words.
    pub(crate) fn limit(kind: BudgetKind, budget: &Budget) -> String {
        match kind {
            BudgetKind::Time => format!("{} ms", budget.timeout.as_millis()),
            BudgetKind::Memory => format!("{} MiB", budget.memory >> 20),
            BudgetKind::Stack => format!("{} KiB", super::engine::MAX_WASM_STACK >> 10),
            BudgetKind::Output => format!("{} bytes", budget.output),
        }
    }
}

/// One call's store, with its budgets armed.
pub(crate) struct Sandbox {
    pub(crate) store: Store<HostState>,
    budget: Budget,
    stderr_tail: Option<String>,
}

impl Sandbox {
    pub(crate) fn new(
        rt: &Runtime,
        plugin: &Arc<str>,
        grants: &FsGrants,
        budget: Budget,
    ) -> Result<Self, String> {
        let state = HostState::new(plugin.clone(), grants, &budget).map_err(|e| e.to_string())?;
        let mut store = Store::new(rt.engine(), state);
        store.limiter(|s| &mut s.limiter);
        store.set_epoch_deadline(deadline_ticks(budget.timeout));
        store.epoch_deadline_trap();
        Ok(Sandbox {
            store,
            budget,
            stderr_tail: None,
        })
    }

    /// Run `f` against the store under the call's deadline, and sort out why it failed if it
    /// did. A plugin blocked in the host past the deadline is abandoned: its future is dropped,
    /// which ends the call, and the store is discarded with the sandbox.
    pub(crate) async fn run<R>(
        &mut self,
        f: impl AsyncFnOnce(&mut Store<HostState>) -> wasmtime::Result<R>,
    ) -> Result<R, Failure> {
        let limit = self.budget.timeout + DEADLINE_GRACE;
        let outcome = tokio::time::timeout(limit, f(&mut self.store)).await;
        self.stderr_tail = Some(self.store.data().drain_stdio());
        match outcome {
            Err(_elapsed) => Err(Failure::Budget(BudgetKind::Time)),
            Ok(Ok(r)) => Ok(r),
            Ok(Err(e)) => Err(self.classify(e)),
        }
    }

    fn classify(&self, e: wasmtime::Error) -> Failure {
        if self.store.data().limiter.exceeded() {
            return Failure::Budget(BudgetKind::Memory);
        }
        tracing::debug!("plugin call failed: {e:?}");
        match e.downcast_ref::<wasmtime::Trap>() {
            Some(wasmtime::Trap::Interrupt) => Failure::Budget(BudgetKind::Time),
            Some(wasmtime::Trap::StackOverflow) => Failure::Budget(BudgetKind::Stack),
            Some(trap) => Failure::Trap(trap.to_string()),
            None => Failure::Trap(format!("{:#}", e.root_cause())),
        }
    }

    pub(crate) fn stderr_tail(&mut self) -> String {
        self.stderr_tail.take().unwrap_or_default()
    }
}
