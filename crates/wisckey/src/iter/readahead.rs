//! Parallel value reads for range scans (WiscKey §3.3.2). Keys come out of the LSM-tree in
//! order, but their values are scattered over the value log; reading them one by one costs a
//! device round trip each. During a forward scan the iterator reads keys ahead of the user
//! and hands the value-log reads of those keys to a pool of reader threads, so that many
//! reads are in flight at once and the device's internal parallelism is used.
//!
//! Owns: the reader pool of one database (`ReaderPool`, threads started on first use and
//! ended when the database is dropped) and the per-read result slot (`PendingRead`).
//! Invariants: a slot is completed exactly once, by its job, even if the job panics (the
//! slot then holds an error); a waiter never blocks on a slot whose job was not queued (a job
//! the pool cannot take runs on the caller's thread). Values are immutable once written, so
//! a read issued early returns what a read issued later would.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};

use crate::error::{Error, Result};

type Job = Box<dyn FnOnce() + Send + 'static>;

/// Reader threads shared by every iterator of one database.
pub(crate) struct ReaderPool {
    jobs: Mutex<Option<Sender<Job>>>,
    /// Joined on drop, so a closed database leaves no reader thread behind.
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for ReaderPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReaderPool").finish_non_exhaustive()
    }
}

impl ReaderPool {
    /// Starts `threads` reader threads (named `wisckey-read`). If none can be started the
    /// pool runs every job on the submitting thread.
    pub(crate) fn start(threads: usize) -> ReaderPool {
        let (sender, receiver) = channel::<Job>();
        let receiver = Arc::new(std::sync::Mutex::new(receiver));
        let mut handles = Vec::new();
        for _ in 0..threads {
            let receiver = Arc::clone(&receiver);
            let spawned = std::thread::Builder::new()
                .name("wisckey-read".to_string())
                .spawn(move || run_jobs(&receiver));
            if let Ok(handle) = spawned {
                handles.push(handle);
            }
        }
        ReaderPool {
            jobs: Mutex::new((!handles.is_empty()).then_some(sender)),
            threads: handles,
        }
    }

    /// Runs `job` on a reader thread, or here if the pool has none.
    pub(crate) fn submit(&self, job: Job) {
        let rejected = match &*self.jobs.lock() {
            Some(sender) => sender.send(job).err().map(|e| e.0),
            None => Some(job),
        };
        if let Some(job) = rejected {
            job();
        }
    }
}

impl Drop for ReaderPool {
    fn drop(&mut self) {
        // Closing the channel ends every reader once its job is done. Jobs hold the log
        // reader, never the database, so this never runs on a reader thread; the check
        // keeps a join of itself impossible all the same.
        self.jobs.lock().take();
        let me = std::thread::current().id();
        for handle in self.threads.drain(..) {
            if handle.thread().id() != me {
                let _ = handle.join();
            }
        }
    }
}

/// A reader thread: runs jobs until every sender is gone (the database was dropped).
fn run_jobs(receiver: &std::sync::Mutex<Receiver<Job>>) {
    loop {
        // A poisoned lock means another reader panicked while receiving (never while running
        // a job, which happens outside the lock); the receiver itself is intact.
        let next = match receiver.lock() {
            Ok(guard) => guard.recv(),
            Err(poisoned) => poisoned.into_inner().recv(),
        };
        match next {
            Ok(job) => job(),
            Err(_) => return,
        }
    }
}

enum SlotState {
    Waiting,
    Done(Result<Vec<u8>>),
    /// The result was handed out; asking again reads the value anew.
    Taken,
}

/// The result of one value read issued ahead of the iterator.
pub(crate) struct PendingRead {
    state: Mutex<SlotState>,
    done: Condvar,
    /// Set when the iterator moved elsewhere: a job not yet started skips its read.
    abandoned: AtomicBool,
}

impl PendingRead {
    pub(crate) fn new() -> Arc<PendingRead> {
        Arc::new(PendingRead {
            state: Mutex::new(SlotState::Waiting),
            done: Condvar::new(),
            abandoned: AtomicBool::new(false),
        })
    }

    /// Runs `read` unless abandoned and completes the slot with its result. A panic in
    /// `read` completes the slot with an error instead of leaving waiters blocked.
    pub(crate) fn complete_with(&self, read: impl FnOnce() -> Result<Vec<u8>>) {
        let result = if self.abandoned.load(Ordering::Relaxed) {
            Err(Error::Aborted(
                "read-ahead abandoned before it ran".to_string(),
            ))
        } else {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(read)).unwrap_or_else(|_| {
                Err(Error::Internal(
                    "a value read panicked in a reader thread".to_string(),
                ))
            })
        };
        *self.state.lock() = SlotState::Done(result);
        self.done.notify_all();
    }

    /// Whether the iterator moved on without this read.
    pub(crate) fn is_abandoned(&self) -> bool {
        self.abandoned.load(Ordering::Relaxed)
    }

    pub(crate) fn abandon(&self) {
        self.abandoned.store(true, Ordering::Relaxed);
    }

    /// Waits for the read and takes its result; `None` if it was already taken.
    pub(crate) fn take(&self) -> Option<Result<Vec<u8>>> {
        let mut state = self.state.lock();
        while matches!(*state, SlotState::Waiting) {
            self.done.wait(&mut state);
        }
        match std::mem::replace(&mut *state, SlotState::Taken) {
            SlotState::Done(result) => Some(result),
            SlotState::Taken | SlotState::Waiting => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn jobs_run_on_reader_threads_and_complete_their_slots() {
        let pool = ReaderPool::start(4);
        let slots: Vec<_> = (0..32u8)
            .map(|i| {
                let slot = PendingRead::new();
                let job_slot = Arc::clone(&slot);
                pool.submit(Box::new(move || job_slot.complete_with(|| Ok(vec![i; 3]))));
                slot
            })
            .collect();
        for (i, slot) in slots.iter().enumerate() {
            assert_eq!(
                slot.take().expect("first take").expect("ok"),
                vec![i as u8; 3]
            );
            assert!(slot.take().is_none(), "a result is handed out once");
        }
    }

    #[test]
    fn reads_overlap_on_the_pool() {
        let pool = ReaderPool::start(8);
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let slots: Vec<_> = (0..8)
            .map(|_| {
                let slot = PendingRead::new();
                let (job_slot, running, most) =
                    (Arc::clone(&slot), Arc::clone(&running), Arc::clone(&most));
                pool.submit(Box::new(move || {
                    job_slot.complete_with(|| {
                        let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        std::thread::sleep(std::time::Duration::from_millis(50));
                        running.fetch_sub(1, Ordering::SeqCst);
                        Ok(Vec::new())
                    })
                }));
                slot
            })
            .collect();
        for slot in &slots {
            slot.take().expect("result").expect("ok");
        }
        assert!(most.load(Ordering::SeqCst) > 1, "reads ran one at a time");
    }

    #[test]
    fn a_panicking_read_completes_its_slot_with_an_error() {
        let pool = ReaderPool::start(1);
        let slot = PendingRead::new();
        let job_slot = Arc::clone(&slot);
        pool.submit(Box::new(move || {
            job_slot.complete_with(|| panic!("injected"));
        }));
        assert!(slot.take().expect("completed").is_err());
        // The pool still works after the panic was caught.
        let again = PendingRead::new();
        let job_slot = Arc::clone(&again);
        pool.submit(Box::new(move || job_slot.complete_with(|| Ok(vec![7]))));
        assert_eq!(again.take().expect("completed").expect("ok"), vec![7]);
    }

    #[test]
    fn an_abandoned_read_is_skipped_and_a_pool_without_threads_runs_jobs_inline() {
        let pool = ReaderPool::start(0);
        let slot = PendingRead::new();
        slot.abandon();
        let job_slot = Arc::clone(&slot);
        let ran = Arc::new(AtomicBool::new(false));
        let ran_in_job = Arc::clone(&ran);
        pool.submit(Box::new(move || {
            job_slot.complete_with(|| {
                ran_in_job.store(true, Ordering::SeqCst);
                Ok(Vec::new())
            })
        }));
        assert!(slot.take().expect("completed").is_err());
        assert!(!ran.load(Ordering::SeqCst), "abandoned read still ran");
    }
}
