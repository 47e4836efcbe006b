//! `wisckey-bench report <results_dir>...`: turns results folders written by
//! bench/run-side-by-side.sh (and other scripts printing the same db_bench-style lines) into
//! REPORT.md plus SVG charts in the output folder (default: the first results folder).
//!
//! Reading is tolerant (unknown files and lines are skipped, see `parse`); writing touches
//! only REPORT.md and `*.svg` files this module names. Single-threaded.

mod markdown;
mod parse;
mod svg;

use std::path::{Path, PathBuf};

use clap::Args;
use parse::{Params, RunFile};

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Results folders (from bench/run-side-by-side.sh, run-ycsb.sh, ...).
    #[arg(required = true)]
    pub dirs: Vec<PathBuf>,
    /// Where REPORT.md and the charts go (default: the first results folder).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// bench/fio.sh's device.md (default: a device.md inside a results folder, if any).
    #[arg(long)]
    pub device: Option<PathBuf>,
}

/// One results folder, parsed.
pub struct ResultsDir {
    pub path: PathBuf,
    pub params: Params,
    pub params_text: String,
    pub runs: Vec<RunFile>,
    /// Raw outputs that hold no benchmark line (a phase killed by a script's timeout, or one
    /// that failed): (file name, its last non-empty line), so the report can say why a cell
    /// is empty instead of leaving it silently blank.
    pub without_result: Vec<(String, String)>,
}

impl ResultsDir {
    /// The value size of the folder: `VALUE_SIZE` from params, else the first run's header.
    pub fn value_size(&self) -> Option<u64> {
        self.params
            .get("VALUE_SIZE")
            .and_then(|v| v.parse().ok())
            .or_else(|| self.runs.iter().find_map(|r| r.value_size))
    }
}

pub fn run(args: &ReportArgs) -> Result<(), String> {
    let mut dirs = Vec::new();
    for dir in &args.dirs {
        dirs.push(read_dir(dir)?);
    }
    let device_path = args.device.clone().or_else(|| {
        args.dirs
            .iter()
            .map(|d| d.join("device.md"))
            .find(|p| p.is_file())
    });
    let device = match &device_path {
        Some(path) => Some(read_text(path)?),
        None => None,
    };
    let out = args.out.clone().unwrap_or_else(|| args.dirs[0].clone());
    std::fs::create_dir_all(&out).map_err(|e| format!("create {}: {e}", out.display()))?;
    let report = markdown::build(&dirs, device.as_deref(), &machine_description());
    for (name, svg) in &report.charts {
        write_text(&out.join(name), svg)?;
    }
    write_text(&out.join("REPORT.md"), &report.markdown)?;
    println!(
        "wrote REPORT.md and {} chart(s) to {}",
        report.charts.len(),
        out.display()
    );
    Ok(())
}

fn read_dir(dir: &Path) -> Result<ResultsDir, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("read {}: {e}", dir.display()))?;
    let mut names: Vec<String> = entries
        .filter_map(|entry| entry.ok())
        .filter(|entry| entry.path().is_file())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let params_text = match dir.join("params.txt") {
        p if p.is_file() => read_text(&p)?,
        _ => String::new(),
    };
    let mut runs = Vec::new();
    let mut without_result = Vec::new();
    for name in names {
        if matches!(name.as_str(), "params.txt" | "log.txt") {
            continue;
        }
        let Some((engine, _repeat, _phase)) = parse::split_file_name(&name) else {
            continue;
        };
        let text = read_text(&dir.join(&name))?;
        let run = parse::parse_run(&engine, &text);
        if run.results.is_empty() {
            let last = text.lines().rev().find(|l| !l.trim().is_empty());
            without_result.push((name, last.unwrap_or("(empty file)").trim().to_string()));
        } else {
            runs.push(run);
        }
    }
    Ok(ResultsDir {
        path: dir.to_path_buf(),
        params: parse::parse_params(&params_text),
        params_text,
        runs,
        without_result,
    })
}

fn read_text(path: &Path) -> Result<String, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("read {}: {e}", path.display()))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

fn write_text(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("write {}: {e}", path.display()))
}

/// CPU model, cores, memory and kernel of the machine writing the report (the runs are
/// assumed to have been made on it; the report says so).
fn machine_description() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|l| l.trim_start_matches([' ', '\t', ':']).to_string())
        .unwrap_or_else(|| "unknown CPU".to_string());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem_gib = std::fs::read_to_string("/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|l| l.split_whitespace().next()?.parse::<f64>().ok())
        .map_or_else(|| "?".to_string(), |kib| format!("{:.1}", kib / 1048576.0));
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!(
        "{model}, {cores} cores available, {mem_gib} GiB RAM, Linux {}",
        kernel.trim()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn committed(dir: &str) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../bench/results")
            .join(dir)
    }

    /// The report over `dirs`, written into a temporary folder (kept alive by the returned
    /// handle, for the charts), and its REPORT.md.
    fn report_over(dirs: Vec<PathBuf>) -> (tempfile::TempDir, String) {
        let out = tempfile::tempdir().expect("tempdir");
        let args = ReportArgs {
            dirs,
            out: Some(out.path().to_path_buf()),
            device: None,
        };
        run(&args).expect("report");
        let report = std::fs::read_to_string(out.path().join("REPORT.md")).expect("REPORT.md");
        (out, report)
    }

    #[test]
    fn report_of_final_run_has_tables_and_charts() {
        let (out, report) = report_over(vec![committed("final-2m")]);
        assert!(report.contains("| wisckey | 186609 |"), "{report}");
        assert!(report.contains("leveldb"), "{report}");
        assert!(out.path().join("throughput.svg").is_file());
        assert!(out.path().join("write-amplification.svg").is_file());
    }

    #[test]
    fn several_folders_with_different_value_sizes_chart_by_value_size() {
        let (_out, report) = report_over(vec![committed("small"), committed("final-2m")]);
        assert!(report.contains("small"), "{report}");
        assert!(report.contains("final-2m"), "{report}");
    }

    #[test]
    fn each_value_size_chart_is_linked_once_however_many_folders() {
        let suite = "suite-20261123T072017Z";
        let (out, report) = report_over(
            ["v256", "v1024", "v4096"]
                .iter()
                .map(|d| committed(&format!("{suite}/{d}")))
                .collect(),
        );
        let link = "(throughput-readrandom-by-value-size.svg)";
        assert_eq!(report.matches(link).count(), 1, "{report}");
        assert!(out
            .path()
            .join("throughput-readrandom-by-value-size.svg")
            .is_file());
        // The read-only variant has no load figures, so it has no series in the load chart.
        let fill =
            std::fs::read_to_string(out.path().join("throughput-fillrandom-by-value-size.svg"))
                .expect("fillrandom chart");
        assert!(fill.contains(">rocksdb-blob<"), "{fill}");
        assert!(!fill.contains("wisckey-noreadahead"), "{fill}");
    }

    #[test]
    fn overwrites_with_gc_running_are_in_the_amplification_table() {
        // The 2026-11-30 evening suite: wisckey-gc and wisckey-nogc overwrite a preloaded DB
        // (run-suite.sh's GC_VARIANTS); their unmeasured preloads are .log files. Two
        // folders: the table then lists only some phases.
        let (_out, report) = report_over(
            ["v1024", "v4096"]
                .iter()
                .map(|d| committed(&format!("suite-20261130T185129Z/{d}")))
                .collect(),
        );
        let amplification = report
            .split("## Amplification and CPU")
            .nth(1)
            .expect("an amplification section");
        for engine in ["wisckey-gc", "wisckey-nogc"] {
            assert!(
                amplification.contains(&format!("| overwrite (v1024) | {engine} |")),
                "{amplification}"
            );
            // Only the measured overwrite: the preload's fillrandom is not read.
            assert!(
                !amplification.contains(&format!("| fillrandom (v1024) | {engine} |")),
                "{amplification}"
            );
        }
    }

    #[test]
    fn missing_folder_is_an_error_not_a_panic() {
        let args = ReportArgs {
            dirs: vec![PathBuf::from("/nonexistent/wisckey-report")],
            out: None,
            device: None,
        };
        assert!(run(&args).is_err());
    }
}
