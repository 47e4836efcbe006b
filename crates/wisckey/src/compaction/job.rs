//! The compaction job: executes a task chosen by the picker.
//!
//! A trivial move re-parents one file. Otherwise the inputs are merged and written to new
//! tables at the output level, dropping (1) versions shadowed by a newer version of the same
//! key that every live snapshot can see, and (2) deletion markers that every snapshot can
//! see and that cover no older data in deeper levels. Values behind pointers are never read
//! or rewritten: only keys and pointers move (§3.2). Outputs are cut at the target size, only
//! between different user keys, so no user key spans two files of one level.
//!
//! REQUIRE: the caller holds `DbInner::compaction_lock`.

use super::{CompactionTask, ShadowTracker};
use crate::db::background::{
    allocate_table_number, discard_failed_output, sweep_obsolete_files, table_options,
};
use crate::db::{latch_error, DbInner};
use crate::error::{Error, Result};
use crate::filename::table_file_name;
use crate::iter::{InternalIterator, MergingIterator};
use crate::key::{parse_internal_key, ValueKind};
use crate::sstable::TableBuilder;
use crate::version::{FileMeta, VersionEdit};

/// Index bytes at which a compaction output is cut whatever its size (the table builder
/// refuses an index past 4 GiB).
const OUTPUT_INDEX_CUT: usize = 1 << 30;

struct Output {
    builder: TableBuilder,
    meta: FileMeta,
}

/// Runs `task` and installs its result. Entries it leaves out were shadowed; the value-log
/// records they referenced were counted dead when the shadowing entry was flushed, so
/// compaction counts nothing.
pub(crate) fn run(inner: &DbInner, task: &CompactionTask) -> Result<()> {
    let mut edit = VersionEdit::default();
    for f in &task.inputs {
        edit.deleted_files.push((task.level, f.number));
    }
    for f in &task.next_inputs {
        edit.deleted_files.push((task.output_level, f.number));
    }
    if let Some(last) = task
        .inputs
        .iter()
        .map(|f| &f.largest)
        .max_by(|a, b| crate::key::compare_internal(a, b))
    {
        edit.compact_pointers.push((task.level, last.clone()));
    }

    let mut outputs = Vec::new();
    if task.is_trivial_move() {
        for f in &task.inputs {
            edit.new_files.push((task.output_level, FileMeta::clone(f)));
        }
    } else {
        let written = merge_inputs(inner, task, &mut outputs)
            .and_then(|metas| inner.fs.sync_dir(&inner.dir).map(|()| metas));
        match written {
            Ok(metas) => {
                for meta in metas {
                    edit.new_files.push((task.output_level, meta));
                }
            }
            Err(e) => {
                // Nothing refers to them: remove them now, not at the sweep after the next
                // success (on a full disk each retry would leave more).
                for &n in &outputs {
                    discard_failed_output(inner, n);
                }
                return Err(e);
            }
        }
    }
    let installed = crate::db::install_edit(inner, edit, |state| {
        for n in &outputs {
            state.pending_outputs.remove(n);
        }
    });
    if let Err(e) = installed {
        // The edit may have reached the manifest anyway: the outputs stay pending until the
        // next install succeeds (`outputs_of_failed_installs`). A full disk, or a moment
        // without file handles (a manifest roll creates a file), is retried by the caller
        // (the manifest is rewritten from memory next time, so the edit is either durable
        // with its outputs kept or superseded); anything else is latched so nothing builds
        // on an unknown state.
        (inner.state.lock().outputs_of_failed_installs).extend_from_slice(&outputs);
        if e.is_shortage() {
            return Err(e);
        }
        return Err(latch_error(inner, e));
    }
    sweep_obsolete_files(inner);
    Ok(())
}

/// Writes the merged, filtered inputs to new tables; returns their metadata. Every table
/// number allocated is pushed to `numbers` (even if writing it fails) so the caller can
/// remove them and release their numbers.
fn merge_inputs(
    inner: &DbInner,
    task: &CompactionTask,
    numbers: &mut Vec<u64>,
) -> Result<Vec<FileMeta>> {
    let version = inner.state.lock().versions.current();
    let oldest_snapshot = inner.snapshots.oldest_or_current(&inner.visible_seq);
    let children = task
        .inputs
        .iter()
        .chain(&task.next_inputs)
        .map(|f| inner.tables.iter(f.number, f.file_size))
        .collect::<Result<Vec<_>>>()?;
    let mut merged = MergingIterator::new(children);
    merged.seek_to_first();

    let mut current: Option<Output> = None;
    let mut finished: Vec<FileMeta> = Vec::new();
    let mut shadows = ShadowTracker::new(oldest_snapshot);
    while merged.valid() {
        let key = merged.key();
        let parsed = parse_internal_key(key)
            .ok_or_else(|| Error::corruption("compaction input", 0, "malformed internal key"))?;
        let (new_user_key, shadowed) = shadows.next(parsed.user_key, parsed.sequence);
        let drop_entry = shadowed
            || (parsed.kind == ValueKind::Deletion
                && parsed.sequence <= oldest_snapshot
                && !version.has_overlap_below(task.output_level, parsed.user_key));

        if !drop_entry {
            // Also well before the index reaches the builder's limit (4 GiB), which a huge
            // `target_file_size` with large keys would otherwise let it reach.
            let cut = current.as_ref().is_some_and(|o| {
                new_user_key
                    && (o.builder.estimated_size() >= inner.options.target_file_size
                        || o.builder.index_size_estimate() >= OUTPUT_INDEX_CUT)
            });
            if cut {
                if let Some(done) = current.take() {
                    finished.push(finish_one(done)?);
                }
            }
            if current.is_none() {
                let number = allocate_table_number(inner);
                numbers.push(number);
                let path = table_file_name(&inner.dir, number);
                let file = inner.fs.create(&path)?;
                current = Some(Output {
                    builder: TableBuilder::new(
                        file,
                        path.display().to_string(),
                        table_options(inner),
                    ),
                    meta: FileMeta {
                        number,
                        file_size: 0,
                        smallest: key.to_vec(),
                        largest: Vec::new(),
                    },
                });
            }
            if let Some(out) = current.as_mut() {
                out.builder.add(key, merged.value())?;
                out.meta.largest.clear();
                out.meta.largest.extend_from_slice(key);
            }
        }
        merged.next();
    }
    merged.status()?;
    if let Some(done) = current.take() {
        finished.push(finish_one(done)?);
    }
    Ok(finished)
}

fn finish_one(out: Output) -> Result<FileMeta> {
    let mut meta = out.meta;
    meta.file_size = out.builder.finish()?;
    Ok(meta)
}
