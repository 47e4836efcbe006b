//! Tests of `scan`: order, torn and zero-filled tails, incomplete batches, holes.

use std::path::PathBuf;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::*;
use crate::fs::MemFs;
use crate::vlog::format::{encode_record, FLAG_LAST_IN_BATCH, FLAG_SYNCED_BEFORE, FORMAT_VERSION};
use crate::vlog::{BatchEntry, VlogWriter};

fn dir() -> PathBuf {
    PathBuf::from("/db")
}

fn opts(segment_size: u64) -> VlogOptions {
    VlogOptions::for_tests(segment_size, 256)
}

/// (first sequence, records' keys, pointers) per batch.
type Batches = Vec<(u64, Vec<Vec<u8>>, Vec<ValuePointer>)>;

fn replay_from(fs: &MemFs, start: LogPosition, o: &VlogOptions) -> Result<(Batches, LogPosition)> {
    let mut batches = Vec::new();
    let end = scan(fs, &dir(), start, o, &mut |b: &[ScannedRecord]| {
        batches.push((
            b[0].sequence,
            b.iter().map(|r| r.key.clone()).collect(),
            b.iter().map(|r| r.ptr).collect(),
        ));
        Ok(())
    })?;
    Ok((batches, end))
}

fn replay(fs: &MemFs, o: &VlogOptions) -> (Batches, LogPosition) {
    replay_from(fs, LogPosition::new(1, 0), o).expect("scan")
}

/// Writes `sizes.len()` batches (batch i has `sizes[i]` records) and syncs.
fn write_log(fs: &MemFs, o: &VlogOptions, sizes: &[usize]) -> (Batches, VlogWriter) {
    let mut w = VlogWriter::create(Arc::new(fs.clone()), dir(), 1, o.clone()).expect("create");
    let mut expected = Vec::new();
    let mut seq = 1;
    for (i, &n) in sizes.iter().enumerate() {
        let keys: Vec<Vec<u8>> = (0..n)
            .map(|j| format!("key-{i}-{j}").into_bytes())
            .collect();
        let value = vec![i as u8; 10 + 7 * i];
        let entries: Vec<BatchEntry<'_>> = keys
            .iter()
            .map(|k| BatchEntry {
                kind: ValueKind::Value,
                key: k,
                value: &value,
            })
            .collect();
        let ptrs = w.append_batch(seq, &entries).expect("append");
        expected.push((seq, keys, ptrs));
        seq += n as u64;
    }
    w.sync().expect("sync");
    (expected, w)
}

fn seg(n: u64) -> PathBuf {
    vlog_file_name(&dir(), n)
}

#[test]
fn batches_come_back_in_order_across_segments_and_from_a_midpoint() {
    let fs = MemFs::new();
    let o = opts(300);
    let (expected, w) = write_log(&fs, &o, &[1, 3, 2, 1, 4, 1, 2, 2]);
    assert!(w.active_segment() >= 3);
    let (batches, end) = replay(&fs, &o);
    assert_eq!(batches, expected);
    assert_eq!(end, w.end());
    let mid = expected[4].2[0];
    let (tail, end2) =
        replay_from(&fs, LogPosition::new(mid.segment, mid.offset), &o).expect("scan");
    assert_eq!(tail, expected[4..].to_vec());
    assert_eq!(end2, end);
}

#[test]
fn every_truncation_inside_the_last_batch_ends_the_log_before_it() {
    let fs = MemFs::new();
    let o = opts(1 << 20);
    let (expected, w) = write_log(&fs, &o, &[2, 1, 3]);
    let full = fs.contents(&seg(1)).expect("segment");
    let last = &expected[2].2;
    let (start, stop) = (last[0].offset, last[2].end());
    assert_eq!(stop, w.end().offset);
    for cut in start..stop {
        fs.set_contents(&seg(1), &full[..cut as usize])
            .expect("set_contents");
        let (batches, end) = replay(&fs, &o);
        assert_eq!(batches, expected[..2].to_vec(), "cut at {cut}");
        assert_eq!(end, LogPosition::new(1, start), "cut at {cut}");
    }
    fs.set_contents(&seg(1), &full).expect("set_contents");
    assert_eq!(replay(&fs, &o).1, w.end());
}

#[test]
fn zero_filled_tail_ends_the_log() {
    let fs = MemFs::new();
    let o = opts(1 << 20);
    let (expected, w) = write_log(&fs, &o, &[1, 2]);
    let mut bytes = fs.contents(&seg(1)).expect("segment");
    bytes.extend_from_slice(&[0u8; 5000]);
    fs.set_contents(&seg(1), &bytes).expect("set_contents");
    assert_eq!(replay(&fs, &o), (expected.clone(), w.end()));
    // Zeros over the last batch (a file system that extended the file but lost the data).
    let last_start = expected[1].2[0].offset as usize;
    bytes[last_start..].fill(0);
    fs.set_contents(&seg(1), &bytes).expect("set_contents");
    assert_eq!(
        replay(&fs, &o),
        (
            expected[..1].to_vec(),
            LogPosition::new(1, last_start as u64)
        )
    );
}

/// The search for synced records after the log's end steps over runs of zeros: a synced
/// batch right after zeroed synced data is still found (damage, not a torn tail), and a
/// tail of zeros alone is still a torn tail.
#[test]
fn zeroed_synced_data_before_a_synced_batch_is_damage() {
    for zeroed in [1usize, 21, 22, 23, 300] {
        let fs = MemFs::new();
        let o = opts(1 << 20);
        let mut w = VlogWriter::create(Arc::new(fs.clone()), dir(), 1, o.clone()).expect("create");
        let mut starts = Vec::new();
        for i in 0..3u64 {
            let key = format!("key-{i}");
            let value = vec![7u8; 400];
            let ptrs = w
                .append_batch(
                    i + 1,
                    &[BatchEntry {
                        kind: ValueKind::Value,
                        key: key.as_bytes(),
                        value: &value,
                    }],
                )
                .expect("append");
            w.sync().expect("sync");
            starts.push(ptrs[0]);
        }
        let original = fs.contents(&seg(1)).expect("segment");
        // Zeros over the end of batch 2 (synced), right up to batch 3's first byte.
        let (b2, b3) = (starts[1].offset as usize, starts[2].offset as usize);
        let mut bytes = original.clone();
        bytes[(b3 - zeroed).max(b2)..b3].fill(0);
        fs.set_contents(&seg(1), &bytes).expect("set_contents");
        let err = replay_from(&fs, LogPosition::new(1, 0), &o).expect_err("damage");
        assert!(err.is_corruption(), "{zeroed} zeros: {err}");
        // Zeros over batch 3 and a long run after it: a torn tail, the log ending before it.
        let mut bytes = original;
        bytes[b3..].fill(0);
        bytes.extend_from_slice(&vec![0u8; 300_000]);
        fs.set_contents(&seg(1), &bytes).expect("set_contents");
        let (batches, end) = replay(&fs, &o);
        assert_eq!(batches.len(), 2, "{zeroed} zeros");
        assert_eq!(end, LogPosition::new(1, b3 as u64));
    }
}

#[test]
fn batch_missing_its_last_record_is_dropped() {
    let fs = MemFs::new();
    let o = opts(1 << 20);
    let (expected, w) = write_log(&fs, &o, &[2]);
    let mut bytes = fs.contents(&seg(1)).expect("segment");
    encode_record(&mut bytes, 3, ValueKind::Value, 0, b"x", b"1");
    encode_record(&mut bytes, 4, ValueKind::Deletion, 0, b"y", b"");
    fs.set_contents(&seg(1), &bytes).expect("set_contents");
    assert_eq!(replay(&fs, &o), (expected, w.end()));
}

#[test]
fn invalid_record_followed_by_valid_later_segment_is_a_hole() {
    let fs = MemFs::new();
    let o = opts(150);
    let (expected, _w) = write_log(&fs, &o, &[1, 1, 1, 1, 1, 1, 1, 1]);
    assert_eq!(expected[0].2[0].segment, 1);
    assert!(expected.last().map(|b| b.2[0].segment) > Some(2));
    let mut bytes = fs.contents(&seg(1)).expect("segment");
    let victim = expected[0].2[0].offset as usize + 25;
    bytes[victim] ^= 0x40;
    fs.set_contents(&seg(1), &bytes).expect("set_contents");
    let err = replay_from(&fs, LogPosition::new(1, 0), &o).expect_err("hole");
    assert!(err.is_corruption(), "{err}");
    // A later segment that is missing entirely is a hole too.
    let fs = MemFs::new();
    let (_, _w) = write_log(&fs, &o, &[1, 1, 1, 1, 1, 1, 1, 1]);
    fs.remove(&seg(2)).expect("remove");
    assert!(replay_from(&fs, LogPosition::new(1, 0), &o)
        .expect_err("gap")
        .is_corruption());
}

#[test]
fn later_segments_without_valid_batches_are_garbage_not_holes() {
    let fs = MemFs::new();
    let o = opts(1 << 20);
    let (expected, w) = write_log(&fs, &o, &[1, 2]);
    // A crash while creating segment 2.
    fs.set_contents(&seg(2), &[0u8; 10]).expect("set_contents");
    assert_eq!(replay(&fs, &o), (expected.clone(), w.end()));
    // A segment 3 holding only a torn record cannot follow that: the writer syncs a segment
    // whole before it creates the next, so segment 2's header would have been durable.
    let mut torn = SegmentHeader {
        version: crate::vlog::FORMAT_VERSION,
        segment: 3,
        prev_segment_end: 0,
    }
    .encode();
    encode_record(
        &mut torn,
        9,
        ValueKind::Value,
        FLAG_LAST_IN_BATCH,
        b"k",
        b"v",
    );
    torn.pop();
    fs.set_contents(&seg(3), &torn).expect("set_contents");
    let err = replay_from(&fs, LogPosition::new(1, 0), &o).expect_err("damage");
    assert!(err.to_string().contains("does not verify"), "{err}");
    // A freshly rolled, still empty segment 2 is where the log continues.
    let header = SegmentHeader {
        version: crate::vlog::FORMAT_VERSION,
        segment: 2,
        prev_segment_end: w.end().offset,
    }
    .encode();
    fs.set_contents(&seg(2), &header).expect("set_contents");
    fs.remove(&seg(3)).expect("remove");
    assert_eq!(
        replay(&fs, &o),
        (expected, LogPosition::new(2, SEGMENT_HEADER_LEN))
    );
}

/// A segment an open started after cutting the log has `prev_segment_end` 0 when written by
/// an older build: where the records before it reach their segment's end, the log goes on
/// into it; where they do not, a later segment proves the bytes past them were synced.
#[test]
fn a_successor_whose_header_does_not_say_continues_a_log_that_reaches_its_end() {
    let fs = MemFs::new();
    let o = opts(1 << 20);
    let (expected, w) = write_log(&fs, &o, &[1, 2]);
    let mut next = SegmentHeader {
        version: crate::vlog::FORMAT_VERSION,
        segment: 2,
        prev_segment_end: 0,
    }
    .encode();
    encode_record(
        &mut next,
        9,
        ValueKind::Value,
        FLAG_LAST_IN_BATCH,
        b"k",
        b"v",
    );
    fs.set_contents(&seg(2), &next).expect("set_contents");
    let (batches, end) = replay(&fs, &o);
    assert_eq!(batches.len(), expected.len() + 1, "segment 2's batch replays");
    assert_eq!(end, LogPosition::new(2, next.len() as u64));
    assert_eq!(batches[..expected.len()], expected[..]);
    // Bytes past segment 1's records: damage, since segment 2 exists.
    let mut first = fs.contents(&seg(1)).expect("contents");
    first.extend_from_slice(&[0xa5; 40]);
    fs.set_contents(&seg(1), &first).expect("set_contents");
    assert!(replay_from(&fs, LogPosition::new(1, 0), &o)
        .expect_err("damage")
        .is_corruption());
    drop(w);
}

/// Bytes past the log's end: `count` copies of a record header that passes a header's
/// checks but claims a 65,000-byte value its checksum does not match, with `flags`, then
/// 70,000 bytes of 0x5a (what the claims reach into).
fn append_header_like_bytes(fs: &MemFs, flags: u8, count: usize) {
    let mut fake = Vec::new();
    fake.extend_from_slice(&0xdead_beef_u32.to_le_bytes());
    fake.extend_from_slice(&1u32.to_le_bytes());
    fake.extend_from_slice(&65_000u32.to_le_bytes());
    fake.extend_from_slice(&7u64.to_le_bytes());
    fake.extend_from_slice(&[ValueKind::Value as u8, flags]);
    assert_eq!(fake.len(), RECORD_HEADER_LEN);
    let mut bytes = fs.contents(&seg(1)).expect("contents");
    for _ in 0..count {
        bytes.extend_from_slice(&fake);
    }
    bytes.extend(std::iter::repeat_n(0x5a, 70_000));
    fs.set_contents(&seg(1), &bytes).expect("set_contents");
}

/// Bytes past the log's end that look like record headers carrying `FLAG_SYNCED_BEFORE`
/// but fail their checksums (values built that way) made the search for a synced record
/// past the end checksum each candidate's whole claimed length, without end; it gives up
/// after a budget, and calls that damage (it could not rule out a synced record).
#[test]
fn a_search_past_the_end_through_record_like_bytes_gives_up_and_calls_it_damage() {
    let fs = MemFs::new();
    let o = VlogOptions {
        max_value_size: 64 << 10,
        ..opts(1 << 20)
    };
    let (_, w) = write_log(&fs, &o, &[1, 2]);
    append_header_like_bytes(&fs, FLAG_SYNCED_BEFORE, 5000);
    let err = replay_from(&fs, LogPosition::new(1, 0), &o).expect_err("damage");
    assert!(err.to_string().contains("gave up"), "{err}");
    drop(w);
}

/// Defect: the same search gave up, and called the end damage, over candidates *without*
/// the flag too, though only a flagged record says the bytes were synced. A torn record's
/// own value is walked byte by byte, so a torn write of user data that looks like
/// unflagged headers (sparse data: one non-zero byte where a header's key length lies
/// claims up to 64 KiB) made a strict open refuse after an ordinary crash. Now such
/// candidates stop being checked once they cost their budget, the search goes on for
/// flagged ones, and the end is a torn tail.
#[test]
fn record_like_bytes_without_the_synced_flag_past_the_end_are_a_torn_tail() {
    let fs = MemFs::new();
    let o = VlogOptions {
        max_value_size: 64 << 10,
        ..opts(1 << 20)
    };
    let (expected, w) = write_log(&fs, &o, &[1, 2]);
    let end = fs.contents(&seg(1)).expect("contents").len() as u64;
    append_header_like_bytes(&fs, 0, 5000);
    let (batches, at) = replay_from(&fs, LogPosition::new(1, 0), &o).expect("a torn tail");
    assert_eq!(batches, expected);
    assert_eq!(at, LogPosition::new(1, end));
    drop(w);

    // The torn write of a sparse value: its record is cut short, and its value holds a
    // 0xFF every 22 bytes (each one, at a header's second key-length byte, claims a
    // 65,280-byte key: ~65 KB of checksumming per 22 bytes, far over the budget).
    let fs = MemFs::new();
    let o = VlogOptions {
        max_key_size: 64 << 10,
        max_value_size: 2 << 20,
        ..opts(4 << 20)
    };
    let (expected, mut w) = write_log(&fs, &o, &[1, 2]);
    let end = fs.contents(&seg(1)).expect("contents").len() as u64;
    let sparse: Vec<u8> = (0..(1usize << 20))
        .map(|i| if i % 22 == 0 { 0xFF } else { 0 })
        .collect();
    w.append_batch(
        100,
        &[BatchEntry {
            kind: ValueKind::Value,
            key: b"sparse",
            value: &sparse,
        }],
    )
    .expect("append");
    w.sync().expect("sync");
    let bytes = fs.contents(&seg(1)).expect("contents");
    let cut = end as usize + (bytes.len() - end as usize) * 3 / 4;
    fs.set_contents(&seg(1), &bytes[..cut]).expect("set_contents");
    let (batches, at) = replay_from(&fs, LogPosition::new(1, 0), &o).expect("a torn tail");
    assert_eq!(batches, expected);
    assert_eq!(at, LogPosition::new(1, end));
    drop(w);
}

#[test]
fn headers_are_checked() {
    let fs = MemFs::new();
    let o = opts(1 << 20);
    let (_, _w) = write_log(&fs, &o, &[1]);
    let good = fs.contents(&seg(1)).expect("segment");
    // A newer build's header: its version, checksummed with it.
    let mut newer = good.clone();
    newer[8..12].copy_from_slice(&(FORMAT_VERSION + 1).to_le_bytes());
    let crc = crate::checksum::mask(crate::checksum::crc32c(&newer[..28]));
    newer[28..32].copy_from_slice(&crc.to_le_bytes());
    fs.set_contents(&seg(1), &newer).expect("set_contents");
    let err = replay_from(&fs, LogPosition::new(1, 0), &o).expect_err("newer");
    assert!(matches!(err, Error::UnsupportedVersion { .. }), "{err}");
    let mut magic = good.clone();
    magic[0] ^= 0xff;
    fs.set_contents(&seg(1), &magic).expect("set_contents");
    assert!(replay_from(&fs, LogPosition::new(1, 0), &o)
        .expect_err("magic")
        .is_corruption());
    fs.set_contents(&seg(1), &good).expect("set_contents");
    let missing = replay_from(&fs, LogPosition::new(7, 0), &o).expect_err("missing");
    assert!(missing.is_corruption());
}

#[test]
fn random_logs_cut_anywhere_recover_exactly_the_complete_batches() {
    let seed = 0x5eed_0001_u64;
    let mut rng = SmallRng::seed_from_u64(seed);
    for round in 0..60 {
        let fs = MemFs::new();
        let o = opts(rng.gen_range(200..2000));
        let sizes: Vec<usize> = (0..rng.gen_range(1..25))
            .map(|_| rng.gen_range(1..5))
            .collect();
        let (expected, w) = write_log(&fs, &o, &sizes);
        let last = w.active_segment();
        let full = fs.contents(&seg(last)).expect("segment");
        let cut = rng.gen_range(SEGMENT_HEADER_LEN as usize..=full.len());
        fs.set_contents(&seg(last), &full[..cut])
            .expect("set_contents");
        let survivors: Batches = expected
            .iter()
            .filter(|b| b.2[0].segment < last || b.2.last().is_some_and(|p| p.end() <= cut as u64))
            .cloned()
            .collect();
        // Earlier segments and the last header are intact, so the log continues into the
        // last segment and ends after its last surviving batch (or right after its header).
        let want_end = survivors
            .last()
            .and_then(|b| b.2.last())
            .filter(|p| p.segment == last)
            .map_or(LogPosition::new(last, SEGMENT_HEADER_LEN), |p| {
                LogPosition::new(last, p.end())
            });
        let got = replay_from(&fs, LogPosition::new(1, 0), &o);
        let ok = matches!(&got, Ok((b, e)) if *b == survivors && *e == want_end);
        assert!(
            ok,
            "seed {seed:#x} round {round}: cut {cut} of segment {last}: {got:?}"
        );
    }
}

/// Defect (issue 10): replay held every value of a batch in memory, so recovery needed as
/// much memory as the largest batch ever written. Large values are now checked, not copied.
#[test]
fn scan_does_not_copy_values_at_or_above_the_copy_limit() {
    let fs = MemFs::new();
    let o = opts(1 << 20);
    let mut w = VlogWriter::create(Arc::new(fs.clone()), dir(), 1, o.clone()).expect("create");
    let big = vec![9u8; 4000];
    let entries = [
        BatchEntry {
            kind: ValueKind::Value,
            key: b"big",
            value: &big,
        },
        BatchEntry {
            kind: ValueKind::Value,
            key: b"small",
            value: b"tiny",
        },
    ];
    w.append_batch(1, &entries).expect("append");
    w.sync().expect("sync");
    let mut seen = Vec::new();
    let segments = [1u64];
    scan_segments(
        &fs,
        &dir(),
        &segments,
        false,
        LogPosition::new(1, 0),
        &o,
        64,
        &mut |batch| {
            seen.extend(
                batch
                    .iter()
                    .map(|r| (r.key.clone(), r.value.clone(), r.value_len)),
            );
            Ok(())
        },
    )
    .expect("scan");
    assert_eq!(
        seen,
        vec![
            (b"big".to_vec(), Vec::new(), 4000),
            (b"small".to_vec(), b"tiny".to_vec(), 4)
        ]
    );
}

/// Writes `n` single-record batches of random values (100..1,100 bytes) into segment 1
/// (large enough for all) and returns their pointers, in log order.
fn write_random_records(fs: &MemFs, o: &VlogOptions, n: usize, seed: u64) -> Vec<ValuePointer> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut w = VlogWriter::create(Arc::new(fs.clone()), dir(), 1, o.clone()).expect("create");
    let mut ptrs = Vec::new();
    for i in 0..n {
        let key = format!("k{i:05}").into_bytes();
        let value: Vec<u8> = (0..rng.gen_range(100..1100)).map(|_| rng.gen()).collect();
        let entry = BatchEntry {
            kind: ValueKind::Value,
            key: &key,
            value: &value,
        };
        ptrs.extend(w.append_batch(1 + i as u64, &[entry]).expect("append"));
    }
    w.sync().expect("sync");
    assert!(ptrs.iter().all(|p| p.segment == 1), "one segment");
    ptrs
}

fn sample(
    fs: &MemFs,
    o: &VlogOptions,
    punched: &BTreeMap<u64, u64>,
    windows: u64,
    window_bytes: u64,
) -> (Vec<ValuePointer>, SampleCoverage) {
    let mut seen = Vec::new();
    let coverage =
        sample_segment_records(fs, &dir(), 1, punched, windows, window_bytes, o, &mut |r| {
            seen.push(r.ptr);
            Ok(())
        })
        .expect("sample");
    (seen, coverage)
}

/// GC's sample: a segment that fits the budget is read whole (exactly); a larger one is
/// read in windows that start at true record boundaries found by search, cover every part
/// of the segment, never read a record twice and step over punched ranges.
#[test]
fn samples_read_windows_spread_over_the_segment_from_true_record_boundaries() {
    let fs = MemFs::new();
    let o = opts(4 << 20);
    let written = write_random_records(&fs, &o, 2000, 7);
    let len = fs.file_size(&seg(1)).expect("size");

    let (whole, coverage) = sample(&fs, &o, &NO_PUNCHED_RANGES, 4, len);
    assert_eq!(whole, written, "a segment within the budget is read whole");
    assert!(coverage.complete);

    let (windows, window_bytes) = (16u64, 8 << 10);
    let (seen, coverage) = sample(&fs, &o, &NO_PUNCHED_RANGES, windows, window_bytes);
    assert!(!coverage.complete);
    assert!(
        seen.iter().all(|p| written.contains(p)),
        "only true records"
    );
    assert!(
        seen.windows(2).all(|w| w[0].offset < w[1].offset),
        "no record twice"
    );
    let handed: u64 = seen.iter().map(|p| u64::from(p.len)).sum();
    assert!(
        handed <= windows * (window_bytes + 1200),
        "{handed} bytes read"
    );
    let stratum = (len - SEGMENT_HEADER_LEN) / windows;
    for i in 0..windows {
        let (lo, hi) = (
            SEGMENT_HEADER_LEN + i * stratum,
            SEGMENT_HEADER_LEN + (i + 1) * stratum,
        );
        assert!(
            seen.iter().any(|p| p.offset >= lo && p.offset < hi),
            "stratum {i} ({lo}..{hi}) was not sampled"
        );
    }

    // Punch ~10 KB of records around the middle of stratum 3, where its window would start.
    let middle = SEGMENT_HEADER_LEN + 3 * stratum + stratum / 2;
    let first = written
        .iter()
        .position(|p| p.end() > middle - 6000)
        .expect("a record");
    let (start, end) = (written[first].offset, written[first + 16].end());
    assert!(start < middle - window_bytes / 2 && end > middle - window_bytes / 2);
    let punched = BTreeMap::from([(start, end)]);
    let (seen, _) = sample(&fs, &o, &punched, windows, window_bytes);
    assert!(
        seen.iter().all(|p| written.contains(p)),
        "only true records"
    );
    assert!(
        seen.iter().all(|p| p.end() <= start || p.offset >= end),
        "a punched record was read"
    );
    assert!(
        seen.iter().any(|p| p.offset == end),
        "the window resumes at the punched range's end"
    );
}

/// A window's search for a record start inside a value whose every fourth byte offset looks
/// like a record header (kind 1, no flags, 64 KiB key and value lengths) checksums a
/// bounded number of bytes, where trying every candidate would checksum ~128 KiB per
/// offset (gigabytes per window).
#[test]
fn a_search_through_header_like_values_is_bounded() {
    let fs = MemFs::new();
    let o = VlogOptions {
        max_key_size: 1 << 20,
        max_value_size: 4 << 20,
        ..opts(16 << 20)
    };
    let mut w = VlogWriter::create(Arc::new(fs.clone()), dir(), 1, o.clone()).expect("create");
    let value: Vec<u8> = [1u8, 0, 1, 0].repeat(1 << 20);
    let entry = BatchEntry {
        kind: ValueKind::Value,
        key: b"tokens",
        value: &value,
    };
    let ptrs = w.append_batch(1, &[entry]).expect("append");
    w.sync().expect("sync");
    let path = seg(1);
    let name = path.display().to_string();
    let file = fs.open_read(&path).expect("open");
    let len = file.len().expect("len");
    let mut scan = SegmentScan::new(file, &name, 1, len, &o);
    scan.read_chunk = 64 << 10;
    let inside = ptrs[0].offset + 4096;
    let found = scan
        .record_boundary_in(inside, inside + (1 << 20))
        .expect("search");
    assert_eq!(found, None, "no record starts inside the value");
    // The budget (16 windows) and at most one candidate more (~128 KiB).
    assert!(
        scan.searched_bytes <= 16 * (64 << 10) + (1 << 18),
        "{} bytes checksummed",
        scan.searched_bytes
    );
}

/// Records larger than a window's whole search budget are still found: only candidates
/// that fail their checksums count against it.
#[test]
fn windows_find_records_larger_than_their_search_budget() {
    let fs = MemFs::new();
    let o = VlogOptions {
        max_value_size: 4 << 20,
        ..opts(64 << 20)
    };
    let mut rng = SmallRng::seed_from_u64(11);
    let mut w = VlogWriter::create(Arc::new(fs.clone()), dir(), 1, o.clone()).expect("create");
    let mut written = Vec::new();
    for i in 0..12u64 {
        let key = format!("big{i}").into_bytes();
        let value: Vec<u8> = (0..(3 << 19)).map(|_| rng.gen()).collect();
        let entry = BatchEntry {
            kind: ValueKind::Value,
            key: &key,
            value: &value,
        };
        written.extend(w.append_batch(1 + i, &[entry]).expect("append"));
    }
    w.sync().expect("sync");
    let (seen, coverage) = sample(&fs, &o, &NO_PUNCHED_RANGES, 16, 64 << 10);
    assert!(!coverage.complete);
    assert!(
        seen.iter().all(|p| written.contains(p)),
        "only true records"
    );
    assert!(seen.len() >= 4, "{} records of 1.5 MiB sampled", seen.len());
}
