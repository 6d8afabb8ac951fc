//! One SVG chart per setting, written by hand (no plotting dependency): the input rate and
//! the job's capacity over time, the parallelism of each vertex, and the lag.

use std::fmt::Write;

use flink_autoscale_simulator::JobTruth;

use crate::run::Run;

const WIDTH: f64 = 960.0;
const PANEL: f64 = 200.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 40.0;
const GAP: f64 = 50.0;
const COLOURS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf",
];

/// The job's capacity in input terms: the input rate it sustains at parallelism `p`.
fn capacity(truth: &JobTruth, t_s: f64, p: &[u32]) -> f64 {
    let input = truth.input_rates(t_s);
    let flows = truth.flows(&input);
    let total: f64 = input.iter().sum();
    if total <= 0.0 {
        return f64::NAN;
    }
    p.iter()
        .enumerate()
        .filter(|(v, _)| flows[*v] > 0.0)
        .map(|(v, p)| truth.capacity(v, *p) * total / flows[v])
        .fold(f64::INFINITY, f64::min)
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

struct Panel {
    top: f64,
    max_y: f64,
    hours: f64,
}

impl Panel {
    fn x(&self, t_s: f64) -> f64 {
        LEFT + (WIDTH - LEFT - RIGHT) * t_s / 3600.0 / self.hours.max(1e-9)
    }

    fn y(&self, v: f64) -> f64 {
        self.top + PANEL - PANEL * (v / self.max_y.max(1e-9)).clamp(0.0, 1.05)
    }

    fn frame(&self, out: &mut String, title: &str, unit: &str) {
        let _ = write!(
            out,
            r##"<text x="{LEFT}" y="{}" font-size="13" font-weight="bold">{}</text>"##,
            self.top - 8.0,
            escape(title)
        );
        let _ = write!(
            out,
            r##"<rect x="{LEFT}" y="{}" width="{}" height="{PANEL}" fill="none" stroke="#888"/>"##,
            self.top,
            WIDTH - LEFT - RIGHT
        );
        for i in 0..=4 {
            let v = self.max_y * f64::from(i) / 4.0;
            let y = self.y(v);
            let _ = write!(
                out,
                r##"<line x1="{LEFT}" x2="{}" y1="{y:.1}" y2="{y:.1}" stroke="#eee"/><text x="{}" y="{:.1}" font-size="10" text-anchor="end">{}</text>"##,
                WIDTH - RIGHT,
                LEFT - 4.0,
                y + 3.0,
                if v >= 1000.0 {
                    format!("{:.0}k", v / 1000.0)
                } else {
                    format!("{v:.0}")
                }
            );
        }
        let step = if self.hours > 48.0 { 24.0 } else { 6.0 };
        let mut h = 0.0;
        while h <= self.hours + 1e-9 {
            let x = self.x(h * 3600.0);
            let _ = write!(
                out,
                r##"<line x1="{x:.1}" x2="{x:.1}" y1="{}" y2="{}" stroke="#eee"/><text x="{x:.1}" y="{}" font-size="10" text-anchor="middle">{h:.0} h</text>"##,
                self.top,
                self.top + PANEL,
                self.top + PANEL + 12.0
            );
            h += step;
        }
        let _ = write!(
            out,
            r##"<text x="12" y="{}" font-size="10" transform="rotate(-90 12 {})" text-anchor="middle">{}</text>"##,
            self.top + PANEL / 2.0,
            self.top + PANEL / 2.0,
            escape(unit)
        );
    }

    fn line(&self, out: &mut String, points: &[(f64, f64)], colour: &str, step: bool) {
        let mut d = String::with_capacity(points.len() * 16);
        let mut started = false;
        for (t, v) in points.iter().filter(|p| p.1.is_finite()) {
            let (x, y) = (self.x(*t), self.y(*v));
            let _ = match (started, step) {
                (false, _) => write!(d, "M{x:.1},{y:.1}"),
                (true, true) => write!(d, "H{x:.1}V{y:.1}"),
                (true, false) => write!(d, "L{x:.1},{y:.1}"),
            };
            started = true;
        }
        let _ = write!(
            out,
            r##"<path d="{d}" fill="none" stroke="{colour}" stroke-width="1.2"/>"##
        );
    }

    fn legend(&self, out: &mut String, i: usize, label: &str, colour: &str) {
        let x = LEFT + 10.0 + 180.0 * i as f64;
        let y = self.top + 14.0;
        let _ = write!(
            out,
            r##"<rect x="{x}" y="{}" width="12" height="3" fill="{colour}"/><text x="{}" y="{y}" font-size="10">{}</text>"##,
            y - 4.0,
            x + 16.0,
            escape(label)
        );
    }
}

/// The SVG document for one run.
pub fn svg(run: &Run, truth: &JobTruth, title: &str) -> String {
    let hours = run.minutes.last().map_or(1.0, |m| m.t_s / 3600.0);
    let height = TOP + 3.0 * (PANEL + GAP);
    let mut out = format!(
        r##"<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif"><rect width="100%" height="100%" fill="white"/><text x="{LEFT}" y="20" font-size="15" font-weight="bold">{}</text>"##,
        escape(title)
    );
    let rate: Vec<(f64, f64)> = run.minutes.iter().map(|m| (m.t_s, m.input_rate)).collect();
    let cap: Vec<(f64, f64)> = run
        .minutes
        .iter()
        .map(|m| (m.t_s, capacity(truth, m.t_s, &m.parallelism)))
        .collect();
    let max_rate = rate
        .iter()
        .chain(cap.iter())
        .map(|p| p.1)
        .filter(|v| v.is_finite())
        .fold(1.0, f64::max);
    let p1 = Panel {
        top: TOP + 20.0,
        max_y: max_rate * 1.05,
        hours,
    };
    p1.frame(&mut out, "input rate and the job's capacity", "records/s");
    p1.line(&mut out, &rate, COLOURS[0], false);
    p1.line(&mut out, &cap, COLOURS[1], true);
    p1.legend(&mut out, 0, "input rate", COLOURS[0]);
    p1.legend(&mut out, 1, "capacity (input the job sustains)", COLOURS[1]);
    let max_p = run
        .minutes
        .iter()
        .flat_map(|m| m.parallelism.iter())
        .copied()
        .max()
        .unwrap_or(1);
    let p2 = Panel {
        top: p1.top + PANEL + GAP,
        max_y: f64::from(max_p) * 1.1,
        hours,
    };
    p2.frame(&mut out, "parallelism per vertex", "subtasks");
    for (v, name) in run.vertex_names.iter().enumerate() {
        let colour = COLOURS[v % COLOURS.len()];
        let points: Vec<(f64, f64)> = run
            .minutes
            .iter()
            .map(|m| (m.t_s, f64::from(m.parallelism.get(v).copied().unwrap_or(0))))
            .collect();
        p2.line(&mut out, &points, colour, true);
        p2.legend(&mut out, v, name, colour);
    }
    let lag: Vec<(f64, f64)> = run.minutes.iter().map(|m| (m.t_s, m.lag_s)).collect();
    let max_lag = lag.iter().map(|p| p.1).fold(1.0, f64::max);
    let p3 = Panel {
        top: p2.top + PANEL + GAP,
        max_y: max_lag * 1.1,
        hours,
    };
    p3.frame(&mut out, "lag", "seconds of input");
    p3.line(&mut out, &lag, COLOURS[3], false);
    out.push_str("</svg>\n");
    out
}
