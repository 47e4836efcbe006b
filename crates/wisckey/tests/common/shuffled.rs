//! Shared by the clustering tests (`cluster_values.rs`, `auto_cluster.rs`, which include it
//! with `#[path]`): keys put in a shuffled order, so that their values lie in the log in
//! an order unrelated to key order, and the model and scans to check them against.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use wisckey::Db;

use crate::common::{HookFs, LogReads};

pub type Model = BTreeMap<Vec<u8>, Vec<u8>>;

pub fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

pub fn value(i: u32, round: u32) -> Vec<u8> {
    // 260-320 bytes: behind a pointer, several per 4 KiB page.
    format!("value-{i}-{round}-").repeat(20).into_bytes()
}

/// `n` keys put in an order shuffled with `seed`, flushed.
pub fn load_shuffled(db: &Db, n: u32, seed: u64) -> Model {
    let mut order: Vec<u32> = (0..n).collect();
    order.shuffle(&mut SmallRng::seed_from_u64(seed));
    let mut model = Model::new();
    for i in order {
        db.put(key(i), value(i, 0)).expect("put");
        model.insert(key(i), value(i, 0));
    }
    db.flush().expect("flush");
    model
}

pub fn read_all(db: &Db) -> Model {
    db.range::<&[u8], _>(..)
        .expect("range")
        .collect::<wisckey::Result<Model>>()
        .expect("scan")
}

/// A full scan's value-log reads (background work running meanwhile adds its own),
/// checking it shows `model`.
pub fn scan_reads(db: &Db, fs: &HookFs<LogReads>, model: &Model) -> usize {
    let before = fs.hooks.reads.load(Ordering::SeqCst);
    assert_eq!(&read_all(db), model);
    fs.hooks.reads.load(Ordering::SeqCst) - before
}
