//! Minimal SVG charts for the benchmark report: grouped bar charts (categories on the x
//! axis, one coloured bar per series, linear or log10 y axis) and step line charts (latency
//! CDFs, log x axis). Hand-written rather than a plotting crate: the report needs two chart
//! kinds, and plain SVG text keeps the CLI's build light and its output diffable.
//!
//! Invariants: every number written is finite (NaN / infinite / non-positive-on-log values
//! are dropped, never drawn); text is XML-escaped. Pure functions, no shared state.

use std::fmt::Write;

const WIDTH: f64 = 820.0;
const HEIGHT: f64 = 420.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 170.0;
const TOP: f64 = 40.0;
/// Room for category labels, slanted when they are wider than their group.
const BOTTOM: f64 = 110.0;
const COLOURS: [&str; 8] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
];

/// A grouped bar chart: `values[series][category]`, `None` where a cell is missing.
pub struct BarChart<'a> {
    pub title: &'a str,
    pub y_label: &'a str,
    pub categories: Vec<String>,
    pub series: Vec<(String, Vec<Option<f64>>)>,
    pub log_scale: bool,
    /// A horizontal reference line (e.g. 1.0 for normalised bars).
    pub reference: Option<f64>,
}

/// A line chart of (x, y) points per series; x on a log10 axis when `log_x`.
pub struct LineChart<'a> {
    pub title: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    pub series: Vec<(String, Vec<(f64, f64)>)>,
    pub log_x: bool,
}

pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Maps data values to a pixel span, linear or log10.
struct Axis {
    low: f64,
    high: f64,
    log: bool,
}

impl Axis {
    fn new(values: impl Iterator<Item = f64>, log: bool, from_zero: bool) -> Axis {
        let usable: Vec<f64> = values
            .filter(|v| v.is_finite() && (!log || *v > 0.0))
            .collect();
        let max = usable.iter().copied().fold(f64::MIN, f64::max);
        let min = usable.iter().copied().fold(f64::MAX, f64::min);
        if usable.is_empty() {
            return Axis {
                low: if log { 1.0 } else { 0.0 },
                high: 10.0,
                log,
            };
        }
        if log {
            let low = 10f64.powf(min.log10().floor());
            let high = 10f64.powf(max.log10().ceil()).max(low * 10.0);
            Axis { low, high, log }
        } else {
            let low = if from_zero { min.min(0.0) } else { min };
            let high = if max > low { max * 1.08 } else { low + 1.0 };
            Axis { low, high, log }
        }
    }

    /// Fraction 0..=1 along the axis, `None` when the value can't be placed.
    fn fraction(&self, value: f64) -> Option<f64> {
        if !value.is_finite() || (self.log && value <= 0.0) {
            return None;
        }
        let f = if self.log {
            (value.log10() - self.low.log10()) / (self.high.log10() - self.low.log10())
        } else {
            (value - self.low) / (self.high - self.low)
        };
        Some(f.clamp(0.0, 1.0))
    }

    fn ticks(&self) -> Vec<f64> {
        if self.log {
            let mut ticks = Vec::new();
            let mut t = self.low;
            while t <= self.high * 1.0001 {
                ticks.push(t);
                t *= 10.0;
            }
            ticks
        } else {
            let raw = (self.high - self.low) / 5.0;
            let magnitude = 10f64.powf(raw.log10().floor());
            let step = [1.0, 2.0, 5.0, 10.0]
                .iter()
                .map(|m| m * magnitude)
                .find(|s| *s >= raw)
                .unwrap_or(raw);
            let mut t = (self.low / step).ceil() * step;
            let mut ticks = Vec::new();
            while t <= self.high && ticks.len() < 20 {
                ticks.push(t);
                t += step;
            }
            ticks
        }
    }
}

pub fn format_number(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}K", v / 1e3)
    } else if a >= 100.0 || a == 0.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

fn frame(out: &mut String, title: &str) {
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="white"/>
<text x="{}" y="22" text-anchor="middle" font-size="15">{}</text>
"#,
        WIDTH / 2.0,
        escape(title)
    );
}

fn y_axis(out: &mut String, axis: &Axis, label: &str) {
    let plot_h = HEIGHT - TOP - BOTTOM;
    for tick in axis.ticks() {
        if let Some(f) = axis.fraction(tick) {
            let y = TOP + plot_h * (1.0 - f);
            let _ = writeln!(
                out,
                r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
                WIDTH - RIGHT,
                LEFT - 6.0,
                y + 4.0,
                format_number(tick)
            );
        }
    }
    let _ = writeln!(
        out,
        r#"<text transform="translate(18 {:.1}) rotate(-90)" text-anchor="middle">{}</text><line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{:.1}" stroke="black"/><line x1="{LEFT}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="black"/>"#,
        TOP + plot_h / 2.0,
        escape(label),
        HEIGHT - BOTTOM,
        HEIGHT - BOTTOM,
        WIDTH - RIGHT,
        HEIGHT - BOTTOM
    );
}

fn legend(out: &mut String, names: &[&str]) {
    for (i, name) in names.iter().enumerate() {
        let y = TOP + 10.0 + i as f64 * 20.0;
        let x = WIDTH - RIGHT + 15.0;
        let _ = writeln!(
            out,
            r#"<rect x="{x}" y="{:.1}" width="12" height="12" fill="{}"/><text x="{}" y="{y:.1}">{}</text>"#,
            y - 10.0,
            COLOURS[i % COLOURS.len()],
            x + 18.0,
            escape(name)
        );
    }
}

pub fn bar_chart(chart: &BarChart) -> String {
    let mut out = String::new();
    frame(&mut out, chart.title);
    let all = chart
        .series
        .iter()
        .flat_map(|(_, values)| values.iter().flatten().copied())
        .chain(chart.reference);
    let axis = Axis::new(all, chart.log_scale, true);
    y_axis(&mut out, &axis, chart.y_label);
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let group_w = plot_w / chart.categories.len().max(1) as f64;
    let bar_w = group_w * 0.8 / chart.series.len().max(1) as f64;
    let base = axis.fraction(axis.low).unwrap_or(0.0);
    let widest = chart
        .categories
        .iter()
        .map(|c| c.chars().count())
        .max()
        .unwrap_or(0);
    let slanted = widest as f64 * 7.0 > group_w;
    for (c, category) in chart.categories.iter().enumerate() {
        let group_x = LEFT + group_w * c as f64;
        let (x, y) = (group_x + group_w / 2.0, HEIGHT - BOTTOM + 18.0);
        let placement = if slanted {
            format!(r#"text-anchor="end" transform="rotate(-25 {x:.1} {y:.1})""#)
        } else {
            r#"text-anchor="middle""#.to_string()
        };
        let _ = writeln!(
            out,
            r#"<text x="{x:.1}" y="{y:.1}" {placement}>{}</text>"#,
            escape(category)
        );
        for (s, (_, values)) in chart.series.iter().enumerate() {
            let Some(value) = values.get(c).copied().flatten() else {
                continue;
            };
            let Some(f) = axis.fraction(value) else {
                continue;
            };
            let x = group_x + group_w * 0.1 + bar_w * s as f64;
            let top = TOP + plot_h * (1.0 - f);
            let height = plot_h * (f - base);
            let _ = writeln!(
                out,
                r#"<rect x="{x:.1}" y="{top:.1}" width="{:.1}" height="{height:.1}" fill="{}"><title>{}</title></rect><text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="9">{}</text>"#,
                bar_w * 0.92,
                COLOURS[s % COLOURS.len()],
                format_number(value),
                x + bar_w * 0.46,
                top - 3.0,
                format_number(value)
            );
        }
    }
    if let Some(f) = chart.reference.and_then(|r| axis.fraction(r)) {
        let y = TOP + plot_h * (1.0 - f);
        let _ = writeln!(
            out,
            r#"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="black" stroke-dasharray="4 3"/>"#,
            WIDTH - RIGHT
        );
    }
    let names: Vec<&str> = chart.series.iter().map(|(n, _)| n.as_str()).collect();
    legend(&mut out, &names);
    out.push_str("</svg>\n");
    out
}

pub fn line_chart(chart: &LineChart) -> String {
    let mut out = String::new();
    frame(&mut out, chart.title);
    let xs = chart
        .series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|(x, _)| *x));
    let ys = chart
        .series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|(_, y)| *y));
    let x_axis = Axis::new(xs, chart.log_x, false);
    let y_axis_scale = Axis::new(ys.chain([0.0]), false, true);
    y_axis(&mut out, &y_axis_scale, chart.y_label);
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    for tick in x_axis.ticks() {
        if let Some(f) = x_axis.fraction(tick) {
            let _ = writeln!(
                out,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
                LEFT + plot_w * f,
                HEIGHT - BOTTOM + 18.0,
                format_number(tick)
            );
        }
    }
    let _ = writeln!(
        out,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
        LEFT + plot_w / 2.0,
        HEIGHT - 15.0,
        escape(chart.x_label)
    );
    for (s, (_, points)) in chart.series.iter().enumerate() {
        let coords: Vec<String> = points
            .iter()
            .filter_map(|(x, y)| {
                let fx = x_axis.fraction(*x)?;
                let fy = y_axis_scale.fraction(*y)?;
                Some(format!(
                    "{:.1},{:.1}",
                    LEFT + plot_w * fx,
                    TOP + plot_h * (1.0 - fy)
                ))
            })
            .collect();
        let _ = writeln!(
            out,
            r#"<polyline fill="none" stroke="{}" stroke-width="2" points="{}"/>"#,
            COLOURS[s % COLOURS.len()],
            coords.join(" ")
        );
    }
    let names: Vec<&str> = chart.series.iter().map(|(n, _)| n.as_str()).collect();
    legend(&mut out, &names);
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_bars(log_scale: bool) -> String {
        bar_chart(&BarChart {
            title: "t <&>",
            y_label: "ops/s",
            categories: vec!["fillrandom".into(), "readrandom".into()],
            series: vec![
                ("a".into(), vec![Some(100.0), Some(f64::NAN)]),
                ("b".into(), vec![None, Some(0.0)]),
            ],
            log_scale,
            reference: Some(1.0),
        })
    }

    #[test]
    fn bars_are_well_formed_and_skip_unplottable_values() {
        for log_scale in [false, true] {
            let svg = sample_bars(log_scale);
            assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
            assert!(svg.contains("t &lt;&amp;&gt;"), "title escaped");
            assert!(!svg.contains("NaN") && !svg.contains("inf"), "{svg}");
            let bars = svg.matches("<rect x=").count() - 2; // minus the two legend swatches
            let expected = if log_scale { 1 } else { 2 }; // 0.0 has no place on a log axis
            assert_eq!(bars, expected, "log={log_scale}");
        }
    }

    #[test]
    fn taller_value_gets_taller_bar() {
        let svg = bar_chart(&BarChart {
            title: "",
            y_label: "",
            categories: vec!["x".into()],
            series: vec![
                ("a".into(), vec![Some(10.0)]),
                ("b".into(), vec![Some(40.0)]),
            ],
            log_scale: false,
            reference: None,
        });
        let heights: Vec<f64> = svg
            .split("height=\"")
            .skip(2) // the root element's and the background's
            .filter_map(|s| s.split('"').next()?.parse().ok())
            .collect();
        assert!(heights[0] < heights[1], "{heights:?}");
        assert!((heights[1] / heights[0] - 4.0).abs() < 0.05, "{heights:?}");
    }

    #[test]
    fn line_chart_draws_one_polyline_per_series() {
        let svg = line_chart(&LineChart {
            title: "cdf",
            x_label: "us",
            y_label: "fraction",
            series: vec![
                ("a".into(), vec![(1.0, 0.0), (10.0, 0.5), (1000.0, 1.0)]),
                ("b".into(), vec![(0.0, 0.0), (5.0, 1.0)]),
            ],
            log_x: true,
        });
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(!svg.contains("NaN"));
    }

    #[test]
    fn number_formatting_is_compact() {
        assert_eq!(format_number(186609.0), "187K");
        assert_eq!(format_number(2_500_000.0), "2.5M");
        assert_eq!(format_number(1.037), "1.04");
        assert_eq!(format_number(0.5), "0.500");
    }
}
