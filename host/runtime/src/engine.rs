//! The one wasmtime engine a rawko process uses, and the clock that drives call deadlines.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use wasmtime::{
    Config, Enabled, Engine, InstanceAllocationStrategy, OptLevel, PoolingAllocationConfig,
};

use crate::limits::{MAX_CONCURRENT_INSTANCES, MAX_MEMORY, MAX_WASM_STACK};

/// How often the epoch advances; deadlines are measured in these ticks.
pub const TICK: Duration = Duration::from_millis(5);

/// Bytes of a linear memory kept mapped between calls and reset in place.
const KEEP_RESIDENT: usize = 32 << 20;

/// Build the engine: epoch interruption for deadlines, a pooling allocator so that a fresh
/// instance per call costs microseconds, and an explicit stack limit.
pub fn new_engine() -> anyhow::Result<Engine> {
    let mut pooling = PoolingAllocationConfig::default();
    pooling
        .total_component_instances(MAX_CONCURRENT_INSTANCES)
        .total_core_instances(MAX_CONCURRENT_INSTANCES * 8)
        .total_memories(MAX_CONCURRENT_INSTANCES * 2)
        .total_tables(MAX_CONCURRENT_INSTANCES * 8)
        .total_stacks(MAX_CONCURRENT_INSTANCES)
        .max_memory_size(MAX_MEMORY as usize)
        // A call dirties a few hundred KiB of a fresh instance's memory. Resetting just the
        // dirtied pages with memset (found with Linux's PAGEMAP_SCAN where the kernel has it)
        // keeps them mapped for the next call, instead of an madvise now and a page fault per
        // page next time.
        .pagemap_scan(Enabled::Auto)
        .linear_memory_keep_resident(KEEP_RESIDENT)
        .table_keep_resident(64 << 10);
    match Engine::new(&config(Some(pooling))) {
        Ok(engine) => Ok(engine),
        // Pooling reserves address space up front; where that is refused (a tight `ulimit -v`),
        // allocate on demand instead: slower to instantiate, otherwise the same.
        Err(e) => {
            tracing::debug!("pooling allocator unavailable ({e:#}); allocating on demand");
            Engine::new(&config(None)).map_err(|e| anyhow::anyhow!("{e:#}"))
        }
    }
}

fn config(pooling: Option<PoolingAllocationConfig>) -> Config {
    let mut cfg = Config::new();
    cfg.wasm_component_model(true)
        .epoch_interruption(true)
        .max_wasm_stack(MAX_WASM_STACK)
        .cranelift_opt_level(OptLevel::Speed)
        .parallel_compilation(true);
    if let Some(p) = pooling {
        cfg.allocation_strategy(InstanceAllocationStrategy::Pooling(p));
    }
    cfg
}

/// Epoch ticks that make up `timeout`, rounded up, plus one because the current tick may be
/// nearly over.
pub fn deadline_ticks(timeout: Duration) -> u64 {
    let tick = TICK.as_nanos();
    let ticks = timeout.as_nanos().div_ceil(tick);
    u64::try_from(ticks).unwrap_or(u64::MAX / 2) + 1
}

/// A thread that advances the engine's epoch every [`TICK`] until dropped.
#[derive(Debug)]
pub struct EpochTicker {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl EpochTicker {
    pub fn start(engine: &Engine) -> std::io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let engine = engine.weak();
        let flag = stop.clone();
        let handle = std::thread::Builder::new()
            .name("rawko-epoch".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    std::thread::park_timeout(TICK);
                    match engine.upgrade() {
                        Some(e) => e.increment_epoch(),
                        None => break,
                    }
                }
            })?;
        Ok(EpochTicker {
            stop,
            handle: Some(handle),
        })
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            h.thread().unpark();
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadlines_round_up() {
        assert_eq!(deadline_ticks(Duration::ZERO), 1);
        assert_eq!(deadline_ticks(TICK), 2);
        assert_eq!(deadline_ticks(TICK + Duration::from_nanos(1)), 3);
        assert_eq!(deadline_ticks(Duration::from_secs(30)), 6001);
    }
}
