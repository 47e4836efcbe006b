//! Progress bars for long benchmark phases (indicatif), drawn on stderr so stdout keeps only
//! the report lines. Off (a hidden bar, whose updates cost nothing visible) when stderr is
//! not a terminal or `--quiet` is given. The bar is shared by the workers; indicatif
//! synchronizes it internally, and workers publish progress in steps (see `ops`).

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};

/// A bar for benchmark `name` that expects `total` operations.
pub fn bar(name: &str, total: u64, quiet: bool) -> ProgressBar {
    if quiet || total == 0 || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total);
    let style = ProgressStyle::with_template(
        "{prefix:>12} [{bar:30}] {human_pos}/{human_len} {per_sec} ETA {eta}",
    )
    .map(|s| s.progress_chars("=> "))
    .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar.set_prefix(name.to_string());
    bar
}
