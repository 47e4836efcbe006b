//! Regression test (issue 10): the `state` lock was held across the manifest's append and
//! fsync, so every flush or compaction install stalled all reads (which take `state` for
//! their view) for an fsync. Here the manifest's fsync blocks until the test lets it go;
//! a read must complete meanwhile.

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use common::{HookFs, Hooks};
use parking_lot::Mutex;
use wisckey::{Db, Options, Result};

/// When armed, the next manifest fsync reports that it started and waits to be released.
#[derive(Debug, Default)]
struct BlockManifestSync {
    armed: AtomicBool,
    started: Mutex<Option<mpsc::Sender<()>>>,
    release: Mutex<Option<mpsc::Receiver<()>>>,
}

impl Hooks for BlockManifestSync {
    fn before_sync_data(&self, path: &Path) -> Result<()> {
        let is_manifest = path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("MANIFEST-"));
        if is_manifest && self.armed.swap(false, Ordering::SeqCst) {
            if let Some(started) = self.started.lock().take() {
                let _ = started.send(());
            }
            if let Some(release) = self.release.lock().take() {
                // Bounded, so a regression fails the test instead of hanging it.
                let _ = release.recv_timeout(Duration::from_secs(10));
            }
        }
        Ok(())
    }
}

#[test]
fn reads_proceed_while_the_manifest_is_being_synced() {
    let fs = HookFs::new(BlockManifestSync::default());
    let db =
        Arc::new(Db::open("/db", Options::small_for_tests(Arc::new(fs.clone()))).expect("open"));
    db.put(b"k", b"v").expect("put");
    let (started_tx, started_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel();
    *fs.hooks.started.lock() = Some(started_tx);
    *fs.hooks.release.lock() = Some(release_rx);
    fs.hooks.armed.store(true, Ordering::SeqCst);

    let flusher = {
        let db = Arc::clone(&db);
        std::thread::spawn(move || db.flush())
    };
    started_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the flush reached the manifest fsync");
    let (read_tx, read_rx) = mpsc::channel();
    let reader = {
        let db = Arc::clone(&db);
        std::thread::spawn(move || {
            let _ = read_tx.send(db.get(b"k"));
        })
    };
    let read = read_rx.recv_timeout(Duration::from_secs(5));
    let _ = release_tx.send(());
    reader.join().expect("reader");
    flusher.join().expect("flusher").expect("flush");
    let got = read.expect("a read completed while the manifest fsync was blocked");
    assert_eq!(got.expect("get"), Some(b"v".to_vec()));
}
