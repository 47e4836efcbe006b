//! Tests of `VlogWriter`: buffering, rollover, the failure rules, reopen.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::*;
use crate::fs::{FaultFs, FaultKind, FaultOps, FsOp, MemFs, PowerLoss};
use crate::vlog::{extract_value, scan, LiveRange, ScannedRecord, VlogReader};

fn dir() -> PathBuf {
    PathBuf::from("/db")
}

fn opts(segment_size: u64, buffer_size: usize) -> VlogOptions {
    VlogOptions::for_tests(segment_size, buffer_size)
}

fn put<'a>(key: &'a [u8], value: &'a [u8]) -> BatchEntry<'a> {
    BatchEntry {
        kind: ValueKind::Value,
        key,
        value,
    }
}

/// `mem` holds the files; the writer works through `fault`, a `FaultFs` over it.
fn new_fs() -> (MemFs, Arc<FaultFs>) {
    let mem = MemFs::new();
    let fault = Arc::new(FaultFs::new(Arc::new(mem.clone())));
    (mem, fault)
}

fn new_writer(fs: &Arc<FaultFs>, o: VlogOptions) -> VlogWriter {
    VlogWriter::create(fs.clone(), dir(), 1, o).expect("create")
}

/// Length of a segment file as the file system holds it.
fn seg_len(mem: &MemFs, n: u64) -> u64 {
    mem.file_size(&seg_path(n)).expect("segment exists")
}

/// Arms: the `n`-th append from now writes half its bytes, then fails with ENOSPC.
fn fail_nth_append(fs: &FaultFs, n: u64) {
    fs.fail_at(
        n,
        FaultKind::NoSpacePartial,
        FaultOps::Only(&[FsOp::Append]),
        false,
    );
}

/// The recorded creations, directory syncs and data syncs, in call order.
fn durability_events(fs: &FaultFs) -> Vec<String> {
    let name = |p: &Path| p.file_name().map(|n| n.to_string_lossy().into_owned());
    fs.recorded()
        .into_iter()
        .filter_map(|(op, path)| match op {
            FsOp::Create => Some(format!("create {}", name(&path)?)),
            FsOp::SyncDir => Some("sync_dir".to_owned()),
            FsOp::SyncData => Some(format!("sync {}", name(&path)?)),
            _ => None,
        })
        .collect()
}

/// A replayed batch: first sequence number and the records' keys.
type Batch = (u64, Vec<Vec<u8>>);

/// All batches the log holds from its start, plus the end.
fn replay(fs: &MemFs, o: &VlogOptions) -> (Vec<Batch>, LogPosition) {
    let mut batches = Vec::new();
    let end = scan(
        fs,
        &dir(),
        LogPosition::new(1, 0),
        o,
        &mut |b: &[ScannedRecord]| {
            batches.push((b[0].sequence, b.iter().map(|r| r.key.clone()).collect()));
            Ok(())
        },
    )
    .expect("scan");
    (batches, end)
}

fn seg_path(n: u64) -> PathBuf {
    vlog_file_name(Path::new("/db"), n)
}

#[test]
fn appended_values_read_back_through_reader() {
    let (_mem, fs) = new_fs();
    let o = opts(1 << 20, 100);
    let mut w = new_writer(&fs, o.clone());
    let mut written = Vec::new();
    for i in 0..20u64 {
        let key = format!("key{i}").into_bytes();
        let value = vec![i as u8; (i * 37 % 300) as usize];
        let ptrs = w.append_batch(i + 1, &[put(&key, &value)]).expect("append");
        assert_eq!(ptrs[0].end(), w.end().offset);
        written.push((ptrs[0], key, value));
    }
    w.flush().expect("flush");
    assert_eq!(w.flushed_end(), w.end());
    let reader = VlogReader::new(fs.clone(), dir(), o);
    let live = LiveRange { end: w.end() };
    for (ptr, key, value) in &written {
        assert_eq!(&reader.read_value(ptr, key, live).expect("read"), value);
    }
}

#[test]
fn read_buffered_sees_records_before_flush() {
    let (mem, fs) = new_fs();
    let o = opts(1 << 20, 1 << 20);
    let mut w = new_writer(&fs, o.clone());
    let ptrs = w
        .append_batch(5, &[put(b"a", b"alpha"), put(b"b", b"beta")])
        .expect("append");
    assert_eq!(seg_len(&mem, 1), SEGMENT_HEADER_LEN);
    assert_eq!(w.flushed_end().offset, SEGMENT_HEADER_LEN);
    let bytes = w.read_buffered(&ptrs[1]).expect("buffered");
    assert_eq!(
        extract_value(&bytes, &ptrs[1], b"b", &o, "buf").expect("valid"),
        b"beta"
    );
    w.flush().expect("flush");
    assert!(w.read_buffered(&ptrs[1]).is_none());
    let reader = VlogReader::new(fs.clone(), dir(), o);
    let live = LiveRange { end: w.end() };
    assert_eq!(
        reader.read_value(&ptrs[0], b"a", live).expect("read"),
        b"alpha"
    );
}

#[test]
fn rollover_at_target_size_never_splits_a_batch() {
    let (mem, fs) = new_fs();
    let o = opts(600, 128);
    let mut w = new_writer(&fs, o.clone());
    let mut expected = Vec::new();
    let mut seq = 1;
    for i in 0..40usize {
        let n = 1 + i % 4;
        let keys: Vec<Vec<u8>> = (0..n).map(|j| format!("k{i}-{j}").into_bytes()).collect();
        let value = vec![7u8; 20 + (i * 13) % 90];
        let entries: Vec<BatchEntry<'_>> = keys.iter().map(|k| put(k, &value)).collect();
        let ptrs = w.append_batch(seq, &entries).expect("append");
        assert!(
            ptrs.iter().all(|p| p.segment == ptrs[0].segment),
            "batch {i} split"
        );
        let batch_end = ptrs[n - 1].end();
        assert!(
            batch_end <= o.segment_size || ptrs[0].offset == SEGMENT_HEADER_LEN,
            "batch {i} crosses the target size without being alone in its segment"
        );
        expected.push((seq, keys));
        seq += n as u64;
    }
    w.sync().expect("sync");
    assert!(w.active_segment() > 3, "expected several rollovers");
    let (batches, end) = replay(&mem, &o);
    assert_eq!(batches, expected);
    assert_eq!(end, w.end());
    // A batch larger than a whole segment still goes somewhere: alone in a fresh segment.
    let big = vec![1u8; 1000];
    let ptrs = w
        .append_batch(seq, &[put(b"big", &big)])
        .expect("big batch");
    assert_eq!(ptrs[0].offset, SEGMENT_HEADER_LEN);
}

#[test]
fn enospc_mid_flush_truncates_back_and_later_writes_follow_without_garbage() {
    let (mem, fs) = new_fs();
    let o = opts(1 << 20, 1 << 20);
    let mut w = new_writer(&fs, o.clone());
    w.append_batch(1, &[put(b"a", b"1")]).expect("append a");
    w.sync().expect("sync a");
    let len_before = seg_len(&mem, 1);

    fail_nth_append(&fs, 1);
    w.append_batch(2, &[put(b"b", &[2u8; 300]), put(b"c", b"3")])
        .expect("buffered");
    let err = w.flush().expect_err("flush must fail");
    assert!(err.is_no_space(), "{err}");
    assert_eq!(seg_len(&mem, 1), len_before, "torn bytes left behind");
    assert_eq!(w.end(), w.flushed_end(), "failed batches must be discarded");

    // The same through the write-out inside append_batch (buffer over its size).
    let mut small = VlogWriter::open(fs.clone(), dir(), w.end(), opts(1 << 20, 64)).expect("open");
    drop(w);
    fail_nth_append(&fs, 1);
    let err = small
        .append_batch(4, &[put(b"d", &[4u8; 100])])
        .expect_err("write-out fails");
    assert!(err.is_no_space());
    assert_eq!(seg_len(&mem, 1), len_before);

    small
        .append_batch(5, &[put(b"e", &[5u8; 100])])
        .expect("later write");
    small.sync().expect("sync");
    let (batches, end) = replay(&mem, &o);
    assert_eq!(
        batches,
        vec![(1, vec![b"a".to_vec()]), (5, vec![b"e".to_vec()])]
    );
    assert_eq!(end, small.end());
}

#[test]
fn failed_truncate_rolls_and_recovery_skips_the_leftover_bytes() {
    let (mem, fs) = new_fs();
    let o = opts(1 << 20, 1 << 20);
    let mut w = new_writer(&fs, o.clone());
    w.append_batch(1, &[put(b"a", b"1")]).expect("append");
    w.sync().expect("sync");
    // Two small batches then a large one: the half write keeps both small ones whole.
    w.append_batch(2, &[put(b"b", b"2")]).expect("append");
    w.append_batch(3, &[put(b"c", b"3")]).expect("append");
    w.append_batch(4, &[put(b"d", &[9u8; 400])])
        .expect("append");
    // The append writes half and fails, and so does the `set_len` that would cut it off.
    let append_and_truncate = FaultOps::Only(&[FsOp::Append, FsOp::SetLen]);
    let calls_before = fs.calls_of(append_and_truncate);
    fs.fail_at(1, FaultKind::NoSpacePartial, append_and_truncate, true);
    assert!(w.flush().is_err());
    assert_eq!(fs.calls_of(append_and_truncate) - calls_before, 2);
    fs.clear();
    let junk_len = seg_len(&mem, 1);
    let two_small_records = 2 * record_len(1, 1) as u64;
    assert!(
        junk_len >= w.flushed_end().offset + two_small_records,
        "the test needs whole, checksum-valid records of failed batches left behind"
    );

    let ptrs = w
        .append_batch(5, &[put(b"e", b"5")])
        .expect("append after failure");
    assert_eq!(ptrs[0].segment, 2, "must not append behind the junk");
    w.sync().expect("sync");
    let (batches, end) = replay(&mem, &o);
    assert_eq!(
        batches,
        vec![(1, vec![b"a".to_vec()]), (5, vec![b"e".to_vec()])]
    );
    assert_eq!(end, w.end());
}

#[test]
fn rollover_makes_the_finished_segment_durable_before_the_next_gets_data() {
    let (_mem, fs) = new_fs();
    let o = opts(200, 1 << 20);
    let mut w = new_writer(&fs, o);
    w.append_batch(1, &[put(b"a", &[1u8; 100])])
        .expect("append");
    w.sync().expect("sync");
    let first_synced = w.synced_end();
    assert_eq!(first_synced, w.end());
    fs.record_calls(true);
    w.append_batch(2, &[put(b"b", &[2u8; 100])])
        .expect("append");
    w.append_batch(3, &[put(b"c", &[3u8; 100])])
        .expect("append");
    assert_eq!(w.active_segment(), 3);
    assert!(
        w.synced_end() > first_synced,
        "segment 2 synced at roll-over"
    );
    assert_eq!(w.synced_end().segment, 2);
    assert!(
        w.synced_end() < w.end(),
        "the record in segment 3 is not durable yet"
    );
    w.sync().expect("sync");
    assert_eq!(w.synced_end(), w.end());
    let events = durability_events(&fs);
    assert_eq!(
        events,
        vec![
            "create 000002.vlog",
            "sync_dir",
            "sync 000002.vlog",
            "create 000003.vlog",
            "sync_dir",
            "sync 000003.vlog",
        ]
    );
}

#[test]
fn sync_failure_is_latched() {
    let (_mem, fs) = new_fs();
    let mut w = new_writer(&fs, opts(1 << 20, 1 << 20));
    w.append_batch(1, &[put(b"a", b"1")]).expect("append");
    fs.fail_at(1, FaultKind::Io, FaultOps::Only(&[FsOp::SyncData]), true);
    assert!(w.sync().is_err());
    fs.clear();
    assert!(w.sync().is_err(), "a retried fsync must not report success");
    assert!(w.append_batch(2, &[put(b"b", b"2")]).is_err());
    assert_eq!(w.synced_end(), LogPosition::new(1, 0));
}

#[test]
fn open_cuts_off_the_tail_and_continues() {
    let (mem, fs) = new_fs();
    let o = opts(1 << 20, 1 << 20);
    let mut w = new_writer(&fs, o.clone());
    w.append_batch(1, &[put(b"a", b"1")]).expect("append");
    w.sync().expect("sync");
    drop(w);
    let mut bytes = mem.contents(&seg_path(1)).expect("segment");
    bytes.extend_from_slice(&[0xee; 50]);
    mem.set_contents(&seg_path(1), &bytes)
        .expect("set_contents");
    let (_, end) = replay(&mem, &o);
    let mut w = VlogWriter::open(fs.clone(), dir(), end, o.clone()).expect("open");
    assert_eq!((w.end(), w.synced_end()), (end, end));
    assert_eq!(seg_len(&mem, 1), end.offset);
    w.append_batch(2, &[put(b"b", b"2")]).expect("append");
    w.sync().expect("sync");
    let (batches, _) = replay(&mem, &o);
    assert_eq!(batches.len(), 2);

    let beyond = LogPosition::new(1, end.offset + 1000);
    assert!(VlogWriter::open(fs.clone(), dir(), beyond, o.clone()).is_err());
    let in_header = LogPosition::new(1, 3);
    assert!(VlogWriter::open(fs.clone(), dir(), in_header, o.clone()).is_err());
    assert!(
        VlogWriter::create(fs.clone(), dir(), 1, o).is_err(),
        "must not clobber"
    );
}

#[test]
fn invalid_batches_are_rejected_without_writing() {
    let (_mem, fs) = new_fs();
    let mut w = new_writer(&fs, opts(1 << 20, 1 << 20));
    let long_key = [0u8; 65];
    let long_value = [0u8; 4097];
    let bad: Vec<(u64, Vec<BatchEntry<'_>>)> = vec![
        (1, vec![]),
        (1, vec![put(&long_key, b"")]),
        (1, vec![put(b"k", &long_value)]),
        (
            1,
            vec![BatchEntry {
                kind: ValueKind::Deletion,
                key: b"k",
                value: b"v",
            }],
        ),
        (
            1,
            vec![BatchEntry {
                kind: ValueKind::ValuePointer,
                key: b"k",
                value: b"v",
            }],
        ),
        (MAX_SEQUENCE, vec![put(b"k", b""), put(b"l", b"")]),
    ];
    for (seq, entries) in bad {
        let err = w.append_batch(seq, &entries).expect_err("must reject");
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    }
    assert_eq!(w.end(), LogPosition::new(1, SEGMENT_HEADER_LEN));
    assert!(VlogWriter::create(fs.clone(), dir(), 9, opts(10, 1)).is_err());
}

#[test]
fn failed_segment_creation_keeps_the_old_segment_and_retries() {
    let (mem, fs) = new_fs();
    let o = opts(200, 1 << 20);
    let mut w = new_writer(&fs, o.clone());
    w.append_batch(1, &[put(b"a", &[1u8; 100])])
        .expect("append");
    // The next batch needs a new segment: the flush of segment 1 succeeds, the header
    // write of segment 2 fails.
    fail_nth_append(&fs, 2);
    assert!(w.append_batch(2, &[put(b"b", &[2u8; 100])]).is_err());
    assert_eq!(w.active_segment(), 1);
    assert!(
        !fs.exists(&seg_path(2)).expect("exists"),
        "half-made segment removed"
    );
    let ptrs = w.append_batch(3, &[put(b"c", &[3u8; 100])]).expect("retry");
    assert_eq!(ptrs[0].segment, 2);
    w.sync().expect("sync");
    let (batches, end) = replay(&mem, &o);
    assert_eq!(
        batches,
        vec![(1, vec![b"a".to_vec()]), (3, vec![b"c".to_vec()])]
    );
    assert_eq!(end, w.end());
}

/// Defect: when the next segment's header could not be written and its file could not be
/// removed either, the writer went on appending to the old segment (a smaller batch that
/// did not need a roll). The leftover later file tells recovery the old segment was synced
/// whole, so a torn tail of those appends made a strict open refuse with damage. Now the
/// writer appends nothing more to it: the next batch tries the roll again.
#[test]
fn a_failed_segment_start_that_leaves_its_file_sends_later_batches_to_a_new_segment() {
    let (mem, fs) = new_fs();
    let o = opts(200, 1 << 20);
    let mut w = new_writer(&fs, o.clone());
    w.append_batch(1, &[put(b"a", &[1u8; 100])])
        .expect("append");
    // The write-out of segment 1 goes through; the header of segment 2 and the removal of
    // its file fail.
    fs.fail_at(
        2,
        FaultKind::Io,
        FaultOps::Only(&[FsOp::Append, FsOp::Remove]),
        true,
    );
    assert!(w.append_batch(2, &[put(b"b", &[2u8; 100])]).is_err());
    fs.clear();
    assert!(
        fs.exists(&seg_path(2)).expect("exists"),
        "the half-made segment is still there"
    );
    let old_len = seg_len(&mem, 1);
    // Small enough to fit in segment 1.
    let ptrs = w.append_batch(3, &[put(b"c", &[3u8; 10])]).expect("retry");
    assert_eq!(ptrs[0].segment, 2, "nothing more goes to segment 1");
    w.sync().expect("sync");
    assert_eq!(seg_len(&mem, 1), old_len);
    let (batches, end) = replay(&mem, &o);
    assert_eq!(
        batches,
        vec![(1, vec![b"a".to_vec()]), (3, vec![b"c".to_vec()])]
    );
    assert_eq!(end, w.end());
}

/// Hints to start write-back per segment, from the recorded calls.
fn write_back_hints(fs: &FaultFs) -> std::collections::BTreeMap<String, u64> {
    let mut hints = std::collections::BTreeMap::new();
    for (op, path) in fs.recorded() {
        if op == FsOp::StartWriteBack {
            let name = path.file_name().expect("file name").to_string_lossy();
            *hints.entry(name.into_owned()).or_insert(0) += 1;
        }
    }
    hints
}

#[test]
fn write_back_is_started_every_interval_of_written_out_bytes() {
    const INTERVAL: u64 = 16 << 10;
    const BUFFER: usize = 4 << 10;
    let (mem, fs) = new_fs();
    let o = VlogOptions {
        write_back_interval: INTERVAL,
        ..opts(64 << 10, BUFFER)
    };
    let mut w = new_writer(&fs, o.clone());
    fs.record_calls(true);
    let value = [7u8; 1000];
    for i in 0..300u64 {
        let key = format!("k{i:05}");
        w.append_batch(i + 1, &[put(key.as_bytes(), &value)])
            .expect("append");
    }
    w.sync().expect("sync");
    let hints = write_back_hints(&fs);
    let record = record_len(6, value.len()) as u64;
    // Segments 1..=4 are finished (~64 KiB each); each write-out adds one buffer's worth
    // (at most BUFFER + one record), so a hint covers [INTERVAL, INTERVAL + BUFFER + record).
    for segment in 1..=4u64 {
        let name = format!("{segment:06}.vlog");
        let len = seg_len(&mem, segment);
        let got = hints.get(&name).copied().unwrap_or(0);
        let at_least = len / (INTERVAL + BUFFER as u64 + record);
        let at_most = len / INTERVAL;
        assert!(
            (at_least..=at_most).contains(&got),
            "{name}: {got} hints for {len} bytes, expected {at_least}..={at_most} ({hints:?})"
        );
    }
    // The hints change nothing in what the log holds.
    let (batches, end) = replay(&mem, &o);
    assert_eq!(batches.len(), 300);
    assert_eq!(end, w.end());

    let (_mem, fs) = new_fs();
    let mut w = new_writer(
        &fs,
        VlogOptions {
            write_back_interval: 0,
            direct_writes: false,
            mapped_writes: false,
            zero_fill_size: 0,
            ..opts(64 << 10, BUFFER)
        },
    );
    fs.record_calls(true);
    for i in 0..100u64 {
        w.append_batch(i + 1, &[put(b"key", &value)])
            .expect("append");
    }
    w.sync().expect("sync");
    assert!(
        write_back_hints(&fs).is_empty(),
        "an interval of 0 turns the hints off"
    );
}

#[test]
fn a_failing_write_back_hint_fails_no_write() {
    let (mem, fs) = new_fs();
    let o = VlogOptions {
        write_back_interval: 4 << 10,
        ..opts(64 << 10, 4 << 10)
    };
    let mut w = new_writer(&fs, o.clone());
    fs.fail_at(
        1,
        FaultKind::Io,
        FaultOps::Only(&[FsOp::StartWriteBack]),
        true,
    );
    let value = [3u8; 1000];
    for i in 0..40u64 {
        w.append_batch(i + 1, &[put(b"key", &value)])
            .expect("a failed hint does not fail the append");
    }
    w.sync().expect("nor the sync");
    assert!(fs.calls_of(FaultOps::Only(&[FsOp::StartWriteBack])) > 0);
    let (batches, end) = replay(&mem, &o);
    assert_eq!(batches.len(), 40);
    assert_eq!(end, w.synced_end());
}

fn pipelined(segment_size: u64, buffer_size: usize) -> VlogOptions {
    VlogOptions {
        direct_writes: true,
        mapped_writes: false,
        zero_fill_size: 0,
        ..opts(segment_size, buffer_size)
    }
}

/// The value of `ptr`, from the writer's memory while it is there, else from the file:
/// whichever way, every appended record must be readable at once.
fn read_now(w: &VlogWriter, mem: &MemFs, ptr: &ValuePointer, key: &[u8], o: &VlogOptions) -> Vec<u8> {
    let bytes = match w.read_buffered(ptr) {
        Some(bytes) => bytes,
        None => {
            assert!(
                LogPosition::new(ptr.segment, ptr.end()) <= w.flushed_end()
                    || ptr.segment < w.active_segment(),
                "{ptr:?} neither in memory nor below the flushed end {:?}",
                w.flushed_end()
            );
            let file = mem.open_read(&seg_path(ptr.segment)).expect("segment");
            let mut bytes = vec![0; ptr.len as usize];
            file.read_exact_at(ptr.offset, &mut bytes, "segment")
                .expect("record in the file");
            bytes
        }
    };
    extract_value(&bytes, ptr, key, o, "read_now").expect("valid record")
}

#[test]
fn pipelined_write_outs_keep_every_record_readable_and_replay_whole() {
    let (mem, fs) = new_fs();
    // A small buffer: a write-out every few batches, so most appends find one in flight.
    let o = pipelined(16 << 10, 700);
    let mut w = new_writer(&fs, o.clone());
    let mut written = Vec::new();
    let mut expected = Vec::new();
    let mut seq = 1;
    for i in 0..400u64 {
        let n = 1 + (i % 3) as usize;
        let keys: Vec<Vec<u8>> = (0..n).map(|j| format!("k{i}-{j}").into_bytes()).collect();
        let values: Vec<Vec<u8>> = (0..n)
            .map(|j| vec![(i + j as u64) as u8; ((i * 53 + j as u64 * 11) % 400) as usize])
            .collect();
        let entries: Vec<BatchEntry<'_>> =
            keys.iter().zip(&values).map(|(k, v)| put(k, v)).collect();
        let ptrs = w.append_batch(seq, &entries).expect("append");
        expected.push((seq, keys.clone()));
        seq += n as u64;
        for ((ptr, key), value) in ptrs.into_iter().zip(keys).zip(values) {
            written.push((ptr, key, value));
        }
        if i % 50 == 0 {
            for (ptr, key, value) in &written {
                assert_eq!(&read_now(&w, &mem, ptr, key, &o), value, "{ptr:?}");
            }
        }
    }
    w.sync().expect("sync");
    assert_eq!(w.flushed_end(), w.end(), "sync writes out what is in flight");
    assert!(w.active_segment() > 3, "the test should roll over several times");
    for n in 1..w.active_segment() {
        // A finished segment ends at its last record: no padding left behind.
        let last_end = written
            .iter()
            .filter(|(ptr, _, _)| ptr.segment == n)
            .map(|(ptr, _, _)| ptr.end())
            .max()
            .expect("records in every finished segment");
        assert_eq!(seg_len(&mem, n), last_end, "segment {n}");
    }
    let (batches, end) = replay(&mem, &o);
    assert_eq!(batches, expected);
    assert_eq!(end, w.end());
}

#[test]
fn a_failed_pipelined_write_out_fails_a_later_call_and_is_cut_off() {
    let (mem, fs) = new_fs();
    let o = pipelined(1 << 20, 256);
    let mut w = new_writer(&fs, o.clone());
    w.append_batch(1, &[put(b"a", &[1u8; 300])]).expect("append a");
    w.sync().expect("sync a");
    let synced = w.synced_end();

    // The next write-out fails half-way, on the write-out thread: the call that hands it
    // over succeeds, the next one that needs the file reports it.
    fail_nth_append(&fs, 1);
    w.append_batch(2, &[put(b"b", &[2u8; 300])])
        .expect("handed over");
    let err = w
        .append_batch(3, &[put(b"c", &[3u8; 300])])
        .and_then(|_| w.sync())
        .expect_err("the failed write-out surfaces");
    assert!(err.is_no_space(), "{err}");
    assert_eq!(w.end(), w.flushed_end(), "nothing after the failure is kept");
    assert_eq!(w.flushed_end(), synced, "cut back to before the failed write-out");
    assert_eq!(seg_len(&mem, 1), synced.offset, "torn bytes left behind");

    w.append_batch(4, &[put(b"d", &[4u8; 300])])
        .expect("later write");
    w.sync().expect("sync d");
    let (batches, end) = replay(&mem, &o);
    assert_eq!(
        batches,
        vec![(1, vec![b"a".to_vec()]), (4, vec![b"d".to_vec()])]
    );
    assert_eq!(end, w.end());
}

fn zero_filled(segment_size: u64, fill: u64) -> VlogOptions {
    VlogOptions {
        zero_fill_size: fill,
        ..opts(segment_size, 1 << 20)
    }
}

#[test]
fn sync_writes_write_zeros_ahead_and_overwrite_them() {
    const FILL: u64 = 8 << 10;
    let (mem, fs) = new_fs();
    let o = zero_filled(1 << 20, FILL);
    let mut w = new_writer(&fs, o.clone());
    fs.record_calls(true);
    let value = [5u8; 300];
    let mut fills = Vec::new();
    for i in 0..60u64 {
        let key = format!("k{i:03}");
        w.append_batch(i + 1, &[put(key.as_bytes(), &value)])
            .expect("append");
        w.sync_write().expect("sync write");
        let end = w.end().offset;
        assert_eq!(w.synced_end(), w.end());
        // The file runs past the records by zeros: at least half the fill is left.
        let len = seg_len(&mem, 1);
        assert!(
            len >= end + FILL / 2 && len <= end + FILL,
            "after write {i}: file {len} bytes, records end at {end}"
        );
        let bytes = mem.contents(&seg_path(1)).expect("segment");
        assert!(bytes[end as usize..].iter().all(|&b| b == 0));
        fills.push(len);
    }
    fills.dedup();
    let zero_fills = fs
        .recorded()
        .iter()
        .filter(|(op, _)| *op == FsOp::ZeroFill)
        .count();
    // 60 records of 326 bytes: ~19.5 KiB of log, topped up every ~4 KiB.
    assert_eq!(zero_fills, fills.len());
    assert!((4..=7).contains(&zero_fills), "{zero_fills} fills: {fills:?}");
    // Every record reads back, and a replay ends at the last record, not in the zeros.
    let (batches, end) = replay(&mem, &o);
    assert_eq!(batches.len(), 60);
    assert_eq!(end, w.end());
}

/// Options do not bound the zero fill or the preallocation chunk: the largest sizes mean
/// "to the segment's end" (once their sums overflowed: a panic in a build with overflow
/// checks, no zeros and no reservation past the group without).
#[test]
fn the_largest_zero_fill_and_preallocation_reach_the_segments_end() {
    const SEGMENT: u64 = 64 << 10;
    let (mem, fs) = new_fs();
    let o = VlogOptions {
        preallocate_size: u64::MAX,
        ..zero_filled(SEGMENT, u64::MAX)
    };
    let mut w = new_writer(&fs, o.clone());
    w.reserve(record_len(1, 100) as u64).expect("reserve");
    w.append_batch(1, &[put(b"k", &[1u8; 100])]).expect("append");
    w.sync_write().expect("sync write");
    assert_eq!(seg_len(&mem, 1), SEGMENT, "zeros written to the segment's end");
    assert_eq!(w.reserved_to, SEGMENT, "space reserved to the segment's end");
    w.finish().expect("finish");
    assert_eq!(seg_len(&mem, 1), w.end().offset);
    let (batches, _) = replay(&mem, &o);
    assert_eq!(batches, vec![(1, vec![b"k".to_vec()])]);
}

/// With a segment of no practical size limit, "to the segment's end" asked the file
/// system to reserve up to `u64::MAX` (refused: every put failed) and wrote zeros until
/// the disk was full, inside a sync write. Both now stop `MAX_AHEAD` past the records.
#[test]
fn a_segment_without_a_size_limit_reserves_and_zero_fills_at_most_max_ahead() {
    let (_mem, fs) = new_fs();
    let o = VlogOptions {
        preallocate_size: u64::MAX,
        ..zero_filled(u64::MAX, u64::MAX)
    };
    let mut w = new_writer(&fs, o);
    // The zeros are never written here (1 GiB in memory): the fill fails, which the
    // writer tolerates, and what it asked for is what it records as zeroed.
    fs.fail_at(1, FaultKind::Io, FaultOps::Only(&[FsOp::ZeroFill]), true);
    w.reserve(record_len(1, 100) as u64).expect("reserve");
    w.append_batch(1, &[put(b"k", &[1u8; 100])]).expect("append");
    w.sync_write().expect("sync write");
    let end = w.end().offset;
    assert!(
        w.reserved_to > end && w.reserved_to <= end + MAX_AHEAD,
        "reserved to {} for records ending at {end}",
        w.reserved_to
    );
    assert!(
        w.zeroed_to > end && w.zeroed_to <= end + MAX_AHEAD,
        "zeros asked for up to {} for records ending at {end}",
        w.zeroed_to
    );
}

#[test]
fn plain_syncs_and_loads_write_no_zeros() {
    let (mem, fs) = new_fs();
    let o = zero_filled(1 << 20, 8 << 10);
    let mut w = new_writer(&fs, o);
    for i in 0..20u64 {
        w.append_batch(i + 1, &[put(format!("k{i}").as_bytes(), &[1u8; 100])])
            .expect("append");
        w.sync().expect("sync");
    }
    assert_eq!(seg_len(&mem, 1), w.end().offset);
    assert_eq!(fs.calls_of(FaultOps::Only(&[FsOp::ZeroFill])), 0);

    // A sync write that covers 1/16 of the fill size or more (a bulk `Db::sync`, GC's
    // relocations, many large writes in one group) writes none.
    let big = [2u8; 520];
    w.append_batch(21, &[put(b"big", &big)]).expect("append");
    w.sync_write().expect("sync write");
    assert_eq!(seg_len(&mem, 1), w.end().offset);
    assert_eq!(fs.calls_of(FaultOps::Only(&[FsOp::ZeroFill])), 0);

    // Off (0): sync writes write none either.
    {
        let o = zero_filled(1 << 20, 0);
        let (mem, fs) = new_fs();
        let mut w = new_writer(&fs, o);
        w.append_batch(1, &[put(b"k", &[1u8; 100])]).expect("append");
        w.sync_write().expect("sync write");
        assert_eq!(fs.calls_of(FaultOps::Only(&[FsOp::ZeroFill])), 0);
        w.finish().expect("finish");
        assert_eq!(seg_len(&mem, 1), w.end().offset);
    }
}

#[test]
fn finished_segments_and_a_closed_log_end_at_their_last_record() {
    // Buffered, and with direct writes (pipelined write-outs of full buffers between the
    // sync writes; `MemFs` writes "direct" files like any other).
    for direct_writes in [false, true] {
        let (mem, fs) = new_fs();
        let o = VlogOptions {
            direct_writes,
            buffer_size: 1024,
            ..zero_filled(8 << 10, 4 << 10)
        };
        let mut w = new_writer(&fs, o.clone());
        let mut ends = std::collections::BTreeMap::new();
        for i in 0..80u64 {
            let ptrs = w
                .append_batch(i + 1, &[put(format!("k{i:03}").as_bytes(), &[9u8; 200])])
                .expect("append");
            ends.insert(ptrs[0].segment, ptrs[0].end());
            if i % 3 != 0 {
                w.sync_write().expect("sync write");
            }
        }
        w.sync_write().expect("sync write");
        let last = w.active_segment();
        assert!(last >= 3, "the test should roll over");
        for n in 1..last {
            assert_eq!(seg_len(&mem, n), ends[&n], "segment {n} keeps zeros");
        }
        assert!(
            seg_len(&mem, last) > w.end().offset,
            "zeros ahead before close"
        );
        w.finish().expect("finish");
        assert_eq!(seg_len(&mem, last), w.end().offset);
        assert_eq!(replay(&mem, &o).0.len(), 80, "direct_writes {direct_writes}");
    }
}

#[test]
fn after_a_power_cut_the_zeros_are_a_torn_tail_and_synced_writes_survive() {
    for (seed, mode) in [
        (0, PowerLoss::DropUnsynced),
        (11, PowerLoss::TornTail { seed: 11 }),
        (12, PowerLoss::TornTail { seed: 12 }),
        (13, PowerLoss::TornTail { seed: 13 }),
    ] {
        let (mem, fs) = new_fs();
        let o = zero_filled(1 << 20, 4 << 10);
        let mut w = new_writer(&fs, o.clone());
        for i in 0..30u64 {
            w.append_batch(i + 1, &[put(format!("k{i:03}").as_bytes(), &[3u8; 150])])
                .expect("append");
            w.sync_write().expect("sync write");
        }
        let synced = w.synced_end();
        // Unsynced writes over the zeros, then the power goes.
        for i in 30..40u64 {
            w.append_batch(i + 1, &[put(format!("k{i:03}").as_bytes(), &[4u8; 150])])
                .expect("append");
        }
        w.flush().expect("flush");
        let after = mem.power_loss_image(mode);
        let (batches, end) = replay(&after, &o);
        assert!(end >= synced, "seed {seed}: lost synced writes");
        assert!(batches.len() >= 30 && batches.len() <= 40, "seed {seed}");
        for (n, (seq, _)) in batches.iter().enumerate() {
            assert_eq!(*seq, n as u64 + 1, "seed {seed}: a hole");
        }
        // Reopening cuts the zeros with the torn tail and appends after the last record.
        let after: Arc<dyn FileSystem> = Arc::new(after);
        let mut w = VlogWriter::open(Arc::clone(&after), dir(), end, o.clone()).expect("open");
        assert_eq!(after.file_size(&seg_path(1)).expect("size"), end.offset);
        w.append_batch(100, &[put(b"again", b"v")]).expect("append");
        w.sync_write().expect("sync write");
        assert_eq!(w.synced_end(), w.end());
    }
}

#[test]
fn the_buffer_keeps_room_for_large_groups_and_gives_an_outsized_one_back() {
    let (_mem, fs) = new_fs();
    let buffer_size = 4 << 10;
    let mut w = new_writer(&fs, opts(16 << 20, buffer_size));
    let value = [7u8; 4000];
    let group = |w: &mut VlogWriter, first: u64, n: u64| {
        let keys: Vec<String> = (0..n).map(|i| format!("k{}", first + i)).collect();
        let entries: Vec<BatchEntry> = keys.iter().map(|k| put(k.as_bytes(), &value)).collect();
        w.append_batch(first, &entries).expect("append");
        w.sync_write().expect("sync write");
    };
    // Groups of ~64 KiB, 16 times the buffer size, one after another: the room one needed
    // stays for the next rather than being given back and allocated again.
    group(&mut w, 1, 16);
    let room = w.buf.capacity();
    assert!(room >= 16 * 4000, "capacity {room}");
    for round in 1..5 {
        group(&mut w, 1 + 16 * round, 16);
        assert_eq!(w.buf.capacity(), room, "round {round}");
    }
    // A small group after them: the outsized room goes back.
    group(&mut w, 1000, 1);
    assert!(
        w.buf.capacity() <= 2 * buffer_size,
        "capacity {} after a small group",
        w.buf.capacity()
    );
}

/// With direct writes too, whose write-outs hand the buffer to a thread and get it back as
/// the spare: the spare kept a whole outsized group's room for good.
#[test]
fn room_kept_for_the_next_group_is_bounded() {
    for base in [opts(1 << 30, 4 << 10), pipelined(1 << 30, 4 << 10)] {
        let (_mem, fs) = new_fs();
        let o = VlogOptions {
            max_value_size: 8 << 20,
            ..base
        };
        let mut w = new_writer(&fs, o);
        // Nine 8 MiB values in one group: 72 MiB written out at once, from a buffer grown
        // to about 128 MiB. Keeping room for all of it would leave that; at most
        // RETAINED_BUFFER_MAX stays (capacity up to twice that before it is cut).
        let value = vec![3u8; 8 << 20];
        let keys: Vec<String> = (0..9).map(|i| format!("big{i}")).collect();
        let entries: Vec<BatchEntry> = keys.iter().map(|k| put(k.as_bytes(), &value)).collect();
        w.append_batch(1, &entries).expect("append");
        w.sync_write().expect("sync write");
        assert!(
            w.buf.capacity() <= 2 * RETAINED_BUFFER_MAX
                && w.spare.capacity() <= 2 * RETAINED_BUFFER_MAX,
            "capacities {} and {} (spare) after a 72 MiB group, direct writes {}",
            w.buf.capacity(),
            w.spare.capacity(),
            w.opts.direct_writes
        );
    }
}

#[test]
fn a_reserved_group_stays_in_one_segment_and_a_failed_one_is_discarded_whole() {
    // Two batches of one group that together pass the segment's target size: once, the
    // second rolled to a new segment, syncing the first for good, so a failure of the
    // group could not take the first back (it came back after a restart).
    let (mem, fs) = new_fs();
    let o = opts(600, 4096);
    let mut w = new_writer(&fs, o.clone());
    w.append_batch(1, &[put(b"a", &[1u8; 100])]).expect("a");
    w.sync().expect("sync a");
    let value = vec![2u8; 300];
    w.reserve(2 * record_len(1, value.len()) as u64)
        .expect("reserve");
    let start = w.end();
    assert_eq!(start.segment, 2, "the group crosses: it starts a new segment");
    let b = w.append_batch(2, &[put(b"b", &value)]).expect("b");
    let c = w.append_batch(3, &[put(b"c", &value)]).expect("c");
    assert_eq!((b[0].segment, c[0].segment), (2, 2), "the group rolled midway");
    assert!(c[0].end() > o.segment_size, "the test must cross the target size");
    fs.fail_at(1, FaultKind::Io, FaultOps::Only(&[FsOp::SyncData]), true);
    w.sync_write().expect_err("the group's sync fails");
    w.discard_failed_group(start);
    let (batches, _) = replay(&mem, &o);
    assert_eq!(batches, vec![(1, vec![b"a".to_vec()])], "a failed group came back");
    // Without a reservation the old rule holds: a batch that would cross rolls first.
    let (_mem, fs) = new_fs();
    let mut w = new_writer(&fs, o.clone());
    w.append_batch(1, &[put(b"b", &value)]).expect("b");
    let c = w.append_batch(2, &[put(b"c", &value)]).expect("c");
    assert_eq!(c[0].segment, 2);
}

/// A temporary directory on the real file system, and that file system.
#[cfg(target_os = "linux")]
fn posix_dir() -> (tempfile::TempDir, PathBuf, Arc<dyn FileSystem>) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().to_path_buf();
    (tmp, dir, Arc::new(crate::fs::PosixFs::new()))
}

/// Mapped write-outs on the real file system (`PosixFs` maps; `MemFs` would append): every
/// flushed record reads back at once through the reader's own handle, finished segments
/// end exactly at their last record, and a writer dropped without `finish` (a kill) leaves
/// zeros past the records that replay reads as the log's end.
#[test]
#[cfg(target_os = "linux")]
fn mapped_write_outs_read_back_at_once_and_finished_segments_end_at_their_records() {
    let (_tmp, dir, fs) = posix_dir();
    let o = VlogOptions {
        mapped_writes: true,
        preallocate_size: 64 << 10,
        ..opts(256 << 10, 64 << 10)
    };
    let reader = VlogReader::new(fs.clone(), dir.clone(), o.clone());
    let mut w = VlogWriter::create(fs.clone(), dir.clone(), 1, o.clone()).expect("create");
    let mut seq = 1;
    let mut write = |w: &mut VlogWriter, count: u64| {
        for _ in 0..count {
            let key = format!("key{seq}").into_bytes();
            let value = vec![(seq % 251) as u8; 900 + (seq % 200) as usize];
            w.reserve(record_len(key.len(), value.len()) as u64)
                .expect("reserve");
            let ptr = w.append_batch(seq, &[put(&key, &value)]).expect("append")[0];
            // Write-through: each batch reaches the OS before the next.
            w.flush().expect("flush");
            let live = LiveRange { end: w.end() };
            assert_eq!(reader.read_value(&ptr, &key, live).expect("read"), value);
            seq += 1;
        }
    };
    write(&mut w, 700);
    assert!(w.active_segment() >= 3, "the test rolls over segments");
    let active = w.active_segment();
    for segment in 1..active {
        // The next segment's header records where this one ends.
        let mut header = [0u8; SEGMENT_HEADER_LEN as usize];
        let next = vlog_file_name(&dir, segment + 1);
        (fs.open_read(&next).expect("next"))
            .read_exact_at(0, &mut header, "next")
            .expect("header");
        let recorded_end = SegmentHeader::decode(&header, "next")
            .expect("decode")
            .prev_segment_end;
        assert_eq!(
            fs.file_size(&vlog_file_name(&dir, segment)).expect("size"),
            recorded_end,
            "finished segment {segment} ends at its last record"
        );
    }
    let active_path = vlog_file_name(&dir, active);
    assert_eq!(
        fs.file_size(&active_path).expect("size") > w.end().offset,
        crate::fs::mapped_appends_supported(&dir),
        "the active segment's size runs ahead of its records where appends are mapped"
    );
    w.finish().expect("finish");
    assert_eq!(fs.file_size(&active_path).expect("size"), w.end().offset);

    // A kill: the writer goes away without `finish`, the zeros ahead stay in the file.
    let end = w.end();
    drop(w);
    let mut w = VlogWriter::open(fs.clone(), dir.clone(), end, o.clone()).expect("reopen");
    write(&mut w, 50);
    let killed_end = w.end();
    w.flush().expect("flush");
    drop(w);
    let mut batches = 0;
    let scanned = scan(fs.as_ref(), &dir, LogPosition::new(1, 0), &o, &mut |_| {
        batches += 1;
        Ok(())
    })
    .expect("scan");
    assert_eq!(batches, 750);
    assert_eq!(scanned, killed_end);
}

/// Sync writes with mapped write-outs write the plain way (`append_to_sync`): nothing is
/// allocated or made writable ahead, which the sync would only write out as zeros.
#[test]
#[cfg(target_os = "linux")]
fn sync_writes_are_not_mapped() {
    let (_tmp, dir, fs) = posix_dir();
    let o = VlogOptions {
        mapped_writes: true,
        ..opts(1 << 20, 64 << 10)
    };
    let mut w = VlogWriter::create(fs.clone(), dir.clone(), 1, o).expect("create");
    for seq in 1..=100u64 {
        w.append_batch(seq, &[put(b"key", &[5u8; 1000])])
            .expect("append");
        w.sync_write().expect("sync write");
    }
    assert_eq!(
        fs.file_size(&vlog_file_name(&dir, 1)).expect("size"),
        w.end().offset,
        "no zeros ahead of synced records"
    );
}
