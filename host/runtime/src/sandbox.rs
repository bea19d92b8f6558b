//! One plugin call's store with its budgets armed, and how a failed call is classified.
//!
//! Every plugin kind runs its calls the same way: a fresh [`HostState`] and store, an epoch
//! deadline that traps running wasm, a host-side timeout for a call blocked in the host, the
//! memory limiter, and afterwards a [`Failure`] naming the budget that was broken or the trap.
//! The kinds differ only in what they call and how they word the error.

use std::sync::Arc;

use wasmtime::Store;

use crate::engine::deadline_ticks;
use crate::limits::{Budget, BudgetKind, DEADLINE_GRACE};
use crate::runtime::Runtime;
use crate::state::HostState;
use rawko_capability::{FsGrants, GrantError};

/// How a sandboxed call failed, before it is put into words.
#[derive(Debug)]
pub enum Failure {
    Budget(BudgetKind),
    Trap(String),
}

impl Failure {
    /// A trap's message with the tail of the plugin's stderr (where a panic message lands).
    pub fn with_stderr(message: String, stderr: &str) -> String {
        if stderr.is_empty() {
            message
        } else {
            format!("{message} (plugin stderr: {stderr})")
        }
    }
}

/// One call's store, with its budgets armed.
pub struct Sandbox {
    store: Store<HostState>,
    budget: Budget,
    stderr_tail: Option<String>,
}

impl Sandbox {
    pub fn new(
        rt: &Runtime,
        plugin: &Arc<str>,
        grants: &FsGrants,
        budget: Budget,
    ) -> Result<Self, GrantError> {
        let state = HostState::new(plugin.clone(), grants, &budget)?;
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

    /// The call's host state, to give it more than files (an adapter's network) before it runs.
    pub fn state_mut(&mut self) -> &mut HostState {
        self.store.data_mut()
    }

    /// Run `f` against the store under the call's deadline, and sort out why it failed if it
    /// did. A plugin blocked in the host past the deadline is abandoned: its future is dropped,
    /// which ends the call, and the store is discarded with the sandbox.
    pub async fn run<R>(
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

    /// The tail of the plugin's stderr from the last [`Sandbox::run`].
    pub fn stderr_tail(&mut self) -> String {
        self.stderr_tail.take().unwrap_or_default()
    }
}
