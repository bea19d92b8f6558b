//! The shell parser under a time budget.
//!
//! brush-parser's PEG and word parsers backtrack, and some inputs take them exponential time:
//! every shape the fuzzers found is refused before parsing (see `parse`), but no check in front
//! of a parser can know every shape. So each parse runs on a worker thread of the calling
//! thread's own and is waited for at most [`PARSE_BUDGET`]. A parse that overruns is abandoned
//! with its worker (a thread cannot be stopped from outside; it ends when the parse does) and
//! the command is refused; the next parse gets a fresh worker. At most [`MAX_ABANDONED`] workers
//! may be left running at once; beyond that every parse is refused until one finishes, so a
//! hostile model cannot take more than that many cores.

use std::any::Any;
use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::time::Duration;

/// The longest a parse is waited for. Commands people and models write parse in well under a
/// millisecond.
pub const PARSE_BUDGET: Duration = Duration::from_secs(2);

/// Most abandoned parses left running at once.
pub const MAX_ABANDONED: usize = 4;

static ABANDONED: AtomicUsize = AtomicUsize::new(0);

type Job = Box<dyn FnOnce() + Send>;

struct Worker {
    jobs: Sender<Job>,
    /// Set when the worker is abandoned; it then counts itself out of [`ABANDONED`] at its end.
    abandoned: Arc<AtomicBool>,
}

thread_local! {
    static WORKER: RefCell<Option<Worker>> = const { RefCell::new(None) };
}

/// Why a budgeted run gave no result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overrun {
    /// It took longer than the budget.
    TooSlow,
    /// Too many earlier runs are still going; this one was not started.
    Exhausted,
}

fn spawn_worker() -> Option<Worker> {
    let (jobs, rx) = mpsc::channel::<Job>();
    let abandoned = Arc::new(AtomicBool::new(false));
    let flag = abandoned.clone();
    std::thread::Builder::new()
        .name("rawko-shell-parse".into())
        .spawn(move || {
            while let Ok(job) = rx.recv() {
                job();
            }
            if flag.load(Ordering::SeqCst) {
                ABANDONED.fetch_sub(1, Ordering::SeqCst);
            }
        })
        .ok()?;
    Some(Worker { jobs, abandoned })
}

/// Run `f` on this thread's parse worker and wait at most `budget` for it. A panic in `f` is
/// resumed here.
pub fn run<T: Send + 'static>(
    budget: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Overrun> {
    if ABANDONED.load(Ordering::SeqCst) >= MAX_ABANDONED {
        return Err(Overrun::Exhausted);
    }
    let (tx, rx) = mpsc::sync_channel::<Result<T, Box<dyn Any + Send>>>(1);
    let job: Job = Box::new(move || {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
        let _ = tx.send(r);
    });
    let sent = WORKER.with(|slot| {
        let mut slot = slot.borrow_mut();
        if slot.is_none() {
            *slot = spawn_worker();
        }
        match slot.as_ref() {
            Some(w) => w.jobs.send(job).map_err(|e| e.0),
            None => Err(job),
        }
    });
    if let Err(job) = sent {
        // No worker thread could be started: parse here, without a budget.
        job();
    }
    match rx.recv_timeout(budget) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(panic)) => std::panic::resume_unwind(panic),
        Err(RecvTimeoutError::Timeout) => {
            WORKER.with(|slot| {
                if let Some(w) = slot.borrow_mut().take() {
                    w.abandoned.store(true, Ordering::SeqCst);
                    ABANDONED.fetch_add(1, Ordering::SeqCst);
                }
            });
            Err(Overrun::TooSlow)
        }
        // The worker died without answering (it cannot: the job catches panics).
        Err(RecvTimeoutError::Disconnected) => {
            WORKER.with(|slot| slot.borrow_mut().take());
            Err(Overrun::TooSlow)
        }
    }
}

/// Tests that abandon runs take this lock: they share the process-wide count. A run a test
/// abandoned may still be going when the next starts, so they count from what they find.
#[cfg(test)]
pub(crate) static TEST_SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slow_run_is_abandoned_and_the_next_gets_a_fresh_worker() {
        let _serial = TEST_SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let before = ABANDONED.load(Ordering::SeqCst);
        let started = std::time::Instant::now();
        let r = run(Duration::from_millis(50), || {
            std::thread::sleep(Duration::from_millis(400));
            1
        });
        assert_eq!(r, Err(Overrun::TooSlow));
        assert!(started.elapsed() < Duration::from_millis(300));
        assert_eq!(run(Duration::from_secs(5), || 2), Ok(2));
        assert_eq!(ABANDONED.load(Ordering::SeqCst), before + 1);
        // Once the slow one ends, it no longer counts.
        std::thread::sleep(Duration::from_millis(600));
        assert_eq!(ABANDONED.load(Ordering::SeqCst), before);
    }

    #[test]
    fn panics_come_back_to_the_caller() {
        let _serial = TEST_SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let r = std::panic::catch_unwind(|| run(Duration::from_secs(5), || panic!("boom")));
        assert!(r.is_err());
        assert_eq!(run(Duration::from_secs(5), || 3), Ok(3));
    }

    /// A caller that keeps sending parses that never end takes at most MAX_ABANDONED threads:
    /// beyond them, runs are refused without starting, until the stuck ones end.
    #[test]
    fn no_more_than_the_cap_of_stuck_runs_is_left_running() {
        let _serial = TEST_SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let stuck = || std::thread::sleep(Duration::from_millis(500));
        let before = ABANDONED.load(Ordering::SeqCst);
        assert!(before < MAX_ABANDONED);
        for _ in before..MAX_ABANDONED {
            assert_eq!(run(Duration::from_millis(10), stuck), Err(Overrun::TooSlow));
        }
        assert_eq!(ABANDONED.load(Ordering::SeqCst), MAX_ABANDONED);
        let started = std::time::Instant::now();
        assert_eq!(run(Duration::from_secs(5), || 4), Err(Overrun::Exhausted));
        assert!(started.elapsed() < Duration::from_millis(100));
        std::thread::sleep(Duration::from_millis(700));
        assert_eq!(run(Duration::from_secs(5), || 5), Ok(5));
    }
}
