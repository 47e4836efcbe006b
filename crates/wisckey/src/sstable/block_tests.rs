//! Tests for the block builder, decoder and iterator.

use std::sync::Arc;

use super::*;
use crate::key::{make_internal_key, ValueKind};
use crate::sstable::block_builder::BlockBuilder;

fn build(entries: &[(Vec<u8>, Vec<u8>)], restart_interval: usize) -> Arc<Block> {
    let mut b = BlockBuilder::new(restart_interval);
    for (k, v) in entries {
        b.add(k, v);
    }
    let est = b.size_estimate();
    let data = b.finish();
    assert_eq!(data.len(), est);
    Arc::new(Block::new(data, Arc::from("test"), 0).expect("valid block"))
}

/// Keys with long shared prefixes, several versions of some user keys.
fn sample_entries(n: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    for i in 0..n {
        let user = format!("user-key-prefix-{:05}", i / 2);
        let seq = 1000 - (i % 2) as u64; // newer version first
        out.push((
            make_internal_key(user.as_bytes(), seq, ValueKind::Value),
            format!("value-{i}").into_bytes(),
        ));
    }
    out
}

fn collect_forward(it: &mut BlockIter) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    it.seek_to_first();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next();
    }
    it.status().expect("no corruption");
    out
}

#[test]
fn empty_block_has_no_entries() {
    let block = build(&[], 16);
    let mut it = block.iter();
    it.seek_to_first();
    assert!(!it.valid());
    it.seek_to_last();
    assert!(!it.valid());
    it.seek(b"anything");
    assert!(!it.valid());
    it.status().expect("ok");
}

#[test]
fn single_entry_and_empty_user_key() {
    let k = make_internal_key(b"", 7, ValueKind::Value);
    let block = build(&[(k.clone(), b"v".to_vec())], 16);
    let mut it = block.iter();
    it.seek_to_last();
    assert!(it.valid());
    assert_eq!((it.key(), it.value()), (&k[..], &b"v"[..]));
    it.prev();
    assert!(!it.valid());
    it.seek(&k);
    assert_eq!(it.key(), &k[..]);
    it.next();
    assert!(!it.valid());
    it.status().expect("ok");
}

#[test]
fn many_entries_round_trip_for_several_restart_intervals() {
    let entries = sample_entries(500);
    for interval in [1, 2, 16, 1000] {
        let block = build(&entries, interval);
        assert_eq!(
            collect_forward(&mut block.iter()),
            entries,
            "interval {interval}"
        );
    }
}

#[test]
fn prefix_compression_shrinks_block() {
    let entries = sample_entries(200);
    let raw: usize = entries.iter().map(|(k, v)| k.len() + v.len()).sum();
    assert!(build(&entries, 16).size() < raw);
}

#[test]
fn seek_to_every_key_and_between_keys() {
    let entries = sample_entries(300);
    let block = build(&entries, 16);
    let mut it = block.iter();
    for (i, (k, v)) in entries.iter().enumerate() {
        it.seek(k);
        assert!(it.valid(), "seek to key {i}");
        assert_eq!((it.key(), it.value()), (&k[..], &v[..]));
        // A seek key for the same user key with a larger sequence lands on this entry
        // when it is the newest version.
        if i % 2 == 0 {
            let user = crate::key::user_key(k);
            it.seek(&crate::key::seek_key(user, 5000));
            assert_eq!(it.key(), &k[..]);
            // Between two user keys: lands on the next user key's newest version.
            let mut between = user.to_vec();
            between.push(0);
            it.seek(&crate::key::seek_key(&between, 5000));
            match entries.get(i + 2) {
                Some((next, _)) => assert_eq!(it.key(), &next[..]),
                None => assert!(!it.valid()),
            }
        }
    }
    it.seek(&crate::key::seek_key(b"zzz", 1));
    assert!(!it.valid());
    it.seek(&crate::key::seek_key(b"", 1));
    assert_eq!(it.key(), &entries[0].0[..]);
    it.status().expect("ok");
}

#[test]
fn backward_iteration_across_restart_points() {
    let entries = sample_entries(101);
    for interval in [1, 3, 16] {
        let block = build(&entries, interval);
        let mut it = block.iter();
        it.seek_to_last();
        let mut back = Vec::new();
        while it.valid() {
            back.push((it.key().to_vec(), it.value().to_vec()));
            it.prev();
        }
        back.reverse();
        assert_eq!(back, entries, "interval {interval}");
        // Zig-zag: next then prev returns to the same entry.
        it.seek(&entries[50].0);
        it.next();
        it.prev();
        assert_eq!(it.key(), &entries[50].0[..]);
        it.prev();
        assert_eq!(it.key(), &entries[49].0[..]);
        it.status().expect("ok");
    }
}

#[test]
fn bad_restart_arrays_are_rejected() {
    let good = build(&sample_entries(40), 4).data.clone();
    let name: Arc<str> = Arc::from("t");
    assert!(Block::new(vec![1, 2], name.clone(), 0).is_err());
    let mut huge_count = good.clone();
    let n = huge_count.len();
    huge_count[n - 4..].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(Block::new(huge_count, name.clone(), 0).is_err());
    let mut zero_count = good.clone();
    zero_count[n - 4..].copy_from_slice(&0u32.to_le_bytes());
    assert!(Block::new(zero_count, name.clone(), 0).is_err());
    let mut unordered = good.clone();
    unordered[n - 8..n - 4].copy_from_slice(&0u32.to_le_bytes());
    assert!(Block::new(unordered, name, 0).is_err());
}

/// Arbitrary byte damage (no checksum here) must never panic: every operation either
/// yields entries or reports Corruption.
#[test]
fn damaged_blocks_never_panic() {
    use rand::{rngs::SmallRng, Rng, SeedableRng};
    let seed = 0x5eed_b10c;
    let good = build(&sample_entries(60), 4).data.clone();
    let mut rng = SmallRng::seed_from_u64(seed);
    for round in 0..2000 {
        let mut data = good.clone();
        for _ in 0..rng.gen_range(1..4) {
            let i = rng.gen_range(0..data.len());
            data[i] = rng.gen();
        }
        if rng.gen_bool(0.1) {
            data.truncate(rng.gen_range(0..data.len()));
        }
        let Ok(block) = Block::new(data, Arc::from("t"), 0) else {
            continue;
        };
        let block = Arc::new(block);
        let mut it = block.iter();
        let mut steps = 0;
        it.seek_to_first();
        while it.valid() && steps < 1000 {
            it.next();
            steps += 1;
        }
        it.seek_to_last();
        while it.valid() && steps < 2000 {
            it.prev();
            steps += 1;
        }
        it.seek(&make_internal_key(
            b"user-key-prefix-00010",
            3,
            ValueKind::Value,
        ));
        if !it.valid() {
            if let Err(e) = it.status() {
                assert!(e.is_corruption(), "seed {seed:#x} round {round}: {e}");
            }
        }
    }
}

/// After a damaged entry ended a scan, a positioning call starts over: a seek to an
/// undamaged key is valid again (the error stuck, and every later seek of a table iterator
/// over a damaged index block failed).
#[test]
fn a_seek_after_damage_starts_over() {
    let entries = sample_entries(8);
    let good = build(&entries, 4);
    let mut it = good.iter();
    it.seek_to_last();
    let last_entry = it.current;
    let mut data = good.data.clone();
    // The last entry's `shared` length: more than any key before it.
    data[last_entry] = 0x7f;
    let damaged = Arc::new(Block::new(data, Arc::from("t"), 0).expect("restarts intact"));
    let mut it = damaged.iter();
    it.seek_to_first();
    let mut seen = 0;
    while it.valid() {
        seen += 1;
        it.next();
    }
    assert_eq!(seen, entries.len() - 1, "the damaged last entry ends the scan");
    assert!(it.status().expect_err("damage reported").is_corruption());
    it.seek(&entries[0].0);
    assert!(it.valid(), "{:?}", it.status());
    assert_eq!(it.key(), &entries[0].0[..]);
    it.status().expect("the new path has no damage");
    it.seek_to_first();
    assert!(it.valid());
    it.seek_to_last();
    assert!(!it.valid(), "damage on the new path is met again");
    assert!(it.status().is_err());
}
