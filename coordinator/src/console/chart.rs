//! A small step chart of parallelism over time, as inline SVG rendered here (no script, no
//! inline style: colours come from the stylesheet's `s0`..`s7` classes).

use super::html::escape;
use super::time;

/// One line of the chart: a vertex's parallelism from each time on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Series {
    pub name: String,
    /// (Unix ms, parallelism), in time order.
    pub points: Vec<(i64, u32)>,
}

const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 220.0;
const LEFT: f64 = 44.0;
const RIGHT: f64 = 12.0;
const TOP: f64 = 12.0;
const BOTTOM: f64 = 28.0;
/// Distinct colours before they repeat.
const COLOURS: usize = 8;

/// The chart up to `end_ms`, and its legend; empty when no series has a point.
pub fn parallelism(series: &[Series], end_ms: i64) -> String {
    let times = series.iter().flat_map(|s| s.points.iter().map(|p| p.0));
    let Some(start) = times.clone().min() else {
        return String::new();
    };
    let end = end_ms.max(times.max().unwrap_or(start)).max(start + 1);
    let top = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .max()
        .unwrap_or(1)
        .max(1);
    let x = |t: i64| LEFT + (t - start) as f64 / (end - start) as f64 * (WIDTH - LEFT - RIGHT);
    let y = |p: u32| TOP + (1.0 - f64::from(p) / f64::from(top)) * (HEIGHT - TOP - BOTTOM);

    let mut svg = format!(
        "<svg class=\"chart\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" role=\"img\" \
         aria-label=\"Parallelism per vertex over time\"><title>Parallelism per vertex over time</title>"
    );
    for p in [0, top.div_ceil(2), top] {
        svg.push_str(&format!(
            "<line class=\"grid\" x1=\"{LEFT}\" x2=\"{:.1}\" y1=\"{y:.1}\" y2=\"{y:.1}\"/>\
             <text class=\"axis\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{p}</text>",
            WIDTH - RIGHT,
            LEFT - 6.0,
            y(p) + 4.0,
            y = y(p),
        ));
    }
    // Seconds on the axis when the whole chart spans less than an hour.
    let seconds = end - start < 3_600_000;
    for (t, anchor) in [
        (start, "start"),
        ((start + end) / 2, "middle"),
        (end, "end"),
    ] {
        svg.push_str(&format!(
            "<text class=\"axis\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"{anchor}\">{}</text>",
            x(t),
            HEIGHT - 8.0,
            time::clock(t, seconds),
        ));
    }
    let mut legend = String::from("<ul class=\"legend\">");
    for (i, s) in series.iter().enumerate() {
        let Some(&(t0, p0)) = s.points.first() else {
            continue;
        };
        let mut d = format!("M{:.1},{:.1}", x(t0), y(p0));
        for &(t, p) in &s.points[1..] {
            d.push_str(&format!("H{:.1}V{:.1}", x(t), y(p)));
        }
        d.push_str(&format!("H{:.1}", x(end)));
        let class = format!("s{}", i % COLOURS);
        svg.push_str(&format!(
            "<path class=\"series {class}\" d=\"{d}\"><title>{}</title></path>",
            escape(&s.name)
        ));
        legend.push_str(&format!(
            "<li><span class=\"swatch {class}\"></span>{} <b>{}</b></li>",
            escape(&s.name),
            s.points.last().map_or(p0, |p| p.1)
        ));
    }
    svg.push_str("</svg>");
    legend.push_str("</ul>");
    format!(
        "<figure class=\"chart\">{svg}{legend}<figcaption>{} to {}</figcaption></figure>",
        time::utc(start),
        time::utc(end)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_follow_the_points_and_names_are_escaped() {
        let series = vec![Series {
            name: "Enrich <x>".into(),
            points: vec![(0, 2), (50_000, 4)],
        }];
        let svg = parallelism(&series, 100_000);
        // From x=44 at 2, a step at the middle up to 4 (the top), then flat to the end.
        assert!(svg.contains("d=\"M44.0,102.0H376.0V12.0H708.0\""), "{svg}");
        assert!(svg.contains("Enrich &lt;x&gt; <b>4</b>"), "{svg}");
        assert!(!svg.contains("style="), "no inline style under the CSP");
        assert_eq!(parallelism(&[], 0), "");
    }
}
