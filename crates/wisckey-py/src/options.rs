//! `DB(path, **options)`: keyword options onto `engine::Options`. Names are the engine's
//! field names; the engine validates values at open (`InvalidArgumentError`), a name it
//! does not have is refused here. Values of Python types the engine does not have are
//! converted here: a duration is a float of seconds, an enum the snake_case name of its
//! variant (as the engine's reports spell them); a value no engine value matches is an
//! `InvalidArgumentError`, a value of the wrong type a `TypeError`.

use std::time::Duration;

use engine::{RecoveryMode, VictimOrder};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::InvalidArgumentError;

/// The options `DB` accepts, in the order the error message lists them.
const NAMES: &[&str] = &[
    "value_threshold",
    "vlog_segment_size",
    "vlog_buffer_size",
    "vlog_flush_interval",
    "vlog_preallocate_size",
    "vlog_write_back_interval",
    "vlog_direct_writes",
    "vlog_zero_fill_size",
    "write_through_to_os",
    "vlog_mapped_writes",
    "memtable_size",
    "memtable_max_log_bytes",
    "max_immutable_memtables",
    "block_size",
    "block_restart_interval",
    "block_cache_size",
    "value_cache_size",
    "table_preload_size",
    "bloom_bits_per_key",
    "max_open_tables",
    "target_file_size",
    "level1_max_bytes",
    "l0_compaction_trigger",
    "l0_slowdown_trigger",
    "l0_stop_trigger",
    "scan_readahead_entries",
    "scan_readahead_threads",
    "recovery_mode",
    "gc_space_amp_target",
    "gc_victim_order",
    "auto_cluster_ratio",
    "disk_reserve_size",
    "max_batch_size",
];

/// Engine options for `DB(path, create_if_missing, error_if_exists, **options)`.
pub(crate) fn from_kwargs(
    create_if_missing: bool,
    error_if_exists: bool,
    kwargs: Option<&Bound<'_, PyDict>>,
) -> PyResult<engine::Options> {
    let mut options = engine::Options {
        create_if_missing,
        error_if_exists,
        ..engine::Options::default()
    };
    for (name, value) in kwargs.iter().flat_map(|d| d.iter()) {
        apply(&mut options, &name.extract::<String>()?, &value)?;
    }
    Ok(options)
}

fn apply(options: &mut engine::Options, name: &str, value: &Bound<'_, PyAny>) -> PyResult<()> {
    match name {
        "value_threshold" => options.value_threshold = value.extract()?,
        "vlog_segment_size" => options.vlog_segment_size = value.extract()?,
        "vlog_buffer_size" => options.vlog_buffer_size = value.extract()?,
        "vlog_flush_interval" => options.vlog_flush_interval = seconds(name, value)?,
        "vlog_preallocate_size" => options.vlog_preallocate_size = value.extract()?,
        "vlog_write_back_interval" => options.vlog_write_back_interval = value.extract()?,
        "vlog_direct_writes" => options.vlog_direct_writes = value.extract()?,
        "vlog_zero_fill_size" => options.vlog_zero_fill_size = value.extract()?,
        "write_through_to_os" => options.write_through_to_os = value.extract()?,
        "vlog_mapped_writes" => options.vlog_mapped_writes = value.extract()?,
        "memtable_size" => options.memtable_size = value.extract()?,
        "memtable_max_log_bytes" => options.memtable_max_log_bytes = value.extract()?,
        "max_immutable_memtables" => options.max_immutable_memtables = value.extract()?,
        "block_size" => options.block_size = value.extract()?,
        "block_restart_interval" => options.block_restart_interval = value.extract()?,
        "block_cache_size" => options.block_cache_size = value.extract()?,
        "value_cache_size" => options.value_cache_size = value.extract()?,
        "table_preload_size" => options.table_preload_size = value.extract()?,
        "bloom_bits_per_key" => options.bloom_bits_per_key = value.extract()?,
        "max_open_tables" => options.max_open_tables = value.extract()?,
        "target_file_size" => options.target_file_size = value.extract()?,
        "level1_max_bytes" => options.level1_max_bytes = value.extract()?,
        "l0_compaction_trigger" => options.l0_compaction_trigger = value.extract()?,
        "l0_slowdown_trigger" => options.l0_slowdown_trigger = value.extract()?,
        "l0_stop_trigger" => options.l0_stop_trigger = value.extract()?,
        "scan_readahead_entries" => options.scan_readahead_entries = value.extract()?,
        "scan_readahead_threads" => options.scan_readahead_threads = value.extract()?,
        "recovery_mode" => options.recovery_mode = one_of(name, value, RECOVERY_MODES)?,
        "gc_space_amp_target" => options.gc_space_amp_target = value.extract()?,
        "gc_victim_order" => options.gc_victim_order = one_of(name, value, VICTIM_ORDERS)?,
        "auto_cluster_ratio" => options.auto_cluster_ratio = value.extract()?,
        "disk_reserve_size" => options.disk_reserve_size = value.extract()?,
        "max_batch_size" => options.max_batch_size = value.extract()?,
        other => {
            return Err(InvalidArgumentError::new_err(format!(
                "unknown option '{other}' (options: {})",
                NAMES.join(", ")
            )))
        }
    }
    Ok(())
}

const RECOVERY_MODES: &[(&str, RecoveryMode)] = &[
    ("strict", RecoveryMode::Strict),
    ("salvage_prefix", RecoveryMode::SalvagePrefix),
];

const VICTIM_ORDERS: &[(&str, VictimOrder)] = &[
    ("cost_benefit", VictimOrder::CostBenefit),
    ("oldest_first", VictimOrder::OldestFirst),
];

/// A duration given in seconds (an int or a float). The engine sets the lower bound
/// (checked at open); what no `Duration` can hold is refused here.
fn seconds(name: &str, value: &Bound<'_, PyAny>) -> PyResult<Duration> {
    let seconds: f64 = value.extract()?;
    Duration::try_from_secs_f64(seconds).map_err(|_| {
        InvalidArgumentError::new_err(format!(
            "{name} must be a finite number of seconds, at least 0 (got {seconds})"
        ))
    })
}

/// The engine value named `value` (a str) in `choices`.
fn one_of<T: Copy>(name: &str, value: &Bound<'_, PyAny>, choices: &[(&str, T)]) -> PyResult<T> {
    let given: String = value.extract()?;
    match choices.iter().find(|(choice, _)| *choice == given) {
        Some(&(_, chosen)) => Ok(chosen),
        None => {
            let names: Vec<String> = choices.iter().map(|(c, _)| format!("'{c}'")).collect();
            Err(InvalidArgumentError::new_err(format!(
                "{name} must be one of {}, not {given:?}",
                names.join(", ")
            )))
        }
    }
}
