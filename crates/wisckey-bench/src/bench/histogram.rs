//! Per-operation latency histogram for `--histogram` (hdrhistogram, 3 significant digits,
//! 1 ns .. 1 h) and its report block, printed in the same format by the peer programs
//! (`bench/peers/`, which keep every sample and sort it: their percentiles are exact, ours
//! are within 0.1%). Percentiles are nearest-rank: the smallest recorded value such that at
//! least p% of the samples are at or below it. One histogram per worker thread; the runner
//! merges them after the workers joined.

use hdrhistogram::Histogram;

/// Largest latency kept exactly (1 hour, in nanoseconds); longer ones are clamped to it.
const MAX_NANOS: u64 = 3_600_000_000_000;

/// Latencies of one benchmark, in nanoseconds.
#[derive(Debug, Clone)]
pub struct Latencies {
    hist: Histogram<u64>,
}

impl Latencies {
    pub fn new() -> Latencies {
        Latencies {
            hist: Histogram::new_with_bounds(1, MAX_NANOS, 3)
                .expect("constant bounds 1..1h with 3 digits are valid"),
        }
    }

    pub fn record_nanos(&mut self, nanos: u64) {
        self.hist.saturating_record(nanos.clamp(1, MAX_NANOS));
    }

    pub fn merge(&mut self, other: &Latencies) {
        // Both sides have the same bounds, so `add` cannot run out of range.
        self.hist
            .add(&other.hist)
            .expect("histograms with identical bounds always merge");
    }

    pub fn count(&self) -> u64 {
        self.hist.len()
    }

    /// Nearest-rank percentile `p` (0 < p <= 100), in microseconds. The rank is computed
    /// in integers (`ceil(count × p_in_100000ths / 100000)`, at least 1) so that the peers,
    /// which do the same on their sorted samples, pick the same sample without
    /// floating-point rounding differences.
    pub fn percentile_micros(&self, p: f64) -> f64 {
        let count = self.count();
        if count == 0 {
            return 0.0;
        }
        let per_100k = (p * 1000.0).round().clamp(1.0, 100_000.0) as u128;
        let rank = (u128::from(count) * per_100k).div_ceil(100_000).max(1) as u64;
        let mut seen = 0;
        for bucket in self.hist.iter_recorded() {
            seen += bucket.count_at_value();
            if seen >= rank {
                let value = self.hist.highest_equivalent(bucket.value_iterated_to());
                return value.min(self.hist.max()) as f64 / 1000.0;
            }
        }
        self.hist.max() as f64 / 1000.0
    }

    /// The report block, shared with the peers:
    /// ```text
    /// Microseconds per op:
    /// Count: N  Average: A  StdDev: S
    /// Min: m  Median: p50  Max: M
    /// Percentiles: P50: a P75: b P99: c P99.9: d P99.99: e
    /// ```
    pub fn report(&self) -> String {
        if self.hist.is_empty() {
            return "Microseconds per op:\nCount: 0\n".to_string();
        }
        let us = |nanos: u64| nanos as f64 / 1000.0;
        format!(
            "Microseconds per op:\nCount: {}  Average: {:.4}  StdDev: {:.2}\n\
             Min: {:.3}  Median: {:.3}  Max: {:.3}\n\
             Percentiles: P50: {:.2} P75: {:.2} P99: {:.2} P99.9: {:.2} P99.99: {:.2}\n",
            self.count(),
            self.hist.mean() / 1000.0,
            self.hist.stdev() / 1000.0,
            us(self.hist.min()),
            self.percentile_micros(50.0),
            us(self.hist.max()),
            self.percentile_micros(50.0),
            self.percentile_micros(75.0),
            self.percentile_micros(99.0),
            self.percentile_micros(99.9),
            self.percentile_micros(99.99),
        )
    }
}

impl Default for Latencies {
    fn default() -> Latencies {
        Latencies::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(actual: f64, expected: f64) -> bool {
        (actual - expected).abs() <= expected * 0.001 + 1e-9
    }

    #[test]
    fn percentiles_of_uniform_samples_are_nearest_rank() {
        let mut lat = Latencies::new();
        for micros in 1..=1000u64 {
            lat.record_nanos(micros * 1000);
        }
        assert_eq!(lat.count(), 1000);
        assert!(close(lat.percentile_micros(50.0), 500.0));
        assert!(close(lat.percentile_micros(99.0), 990.0));
        assert!(close(lat.percentile_micros(99.9), 999.0));
        assert!(close(lat.percentile_micros(100.0), 1000.0));
    }

    #[test]
    fn merge_adds_counts_and_keeps_tail() {
        let mut a = Latencies::new();
        let mut b = Latencies::new();
        for _ in 0..999 {
            a.record_nanos(2_000);
        }
        b.record_nanos(5_000_000);
        a.merge(&b);
        assert_eq!(a.count(), 1000);
        assert!(close(a.percentile_micros(99.0), 2.0));
        assert!(close(a.percentile_micros(100.0), 5000.0));
        let report = a.report();
        assert!(report.contains("Count: 1000"), "{report}");
        assert!(report.contains("P99: 2.00"), "{report}");
    }

    #[test]
    fn out_of_range_values_are_clamped_not_lost() {
        let mut lat = Latencies::new();
        lat.record_nanos(0);
        lat.record_nanos(u64::MAX);
        assert_eq!(lat.count(), 2);
        assert_eq!(
            Latencies::new().report(),
            "Microseconds per op:\nCount: 0\n"
        );
    }
}
