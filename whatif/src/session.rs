//! A what-if session: every setting run side by side (each with its own simulator and
//! clock), judged, charted and written out. The command and the convergence benchmark both
//! call [`what_if`].

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use flink_autoscale_simulator::Scenario;
use serde::Serialize;

use crate::chart::svg;
use crate::report::{figures, Figures};
use crate::run::{run, Run, Setting};

/// What to try.
pub struct Request<'a> {
    pub scenario: &'a Scenario,
    /// How the scenario is named in the output.
    pub scenario_label: String,
    pub settings: Vec<Setting>,
    pub hours: f64,
    pub poll: Duration,
    /// Judged from this hour of each run on.
    pub judge_from_hour: f64,
    pub lag_threshold_s: f64,
    /// Charts and `whatif.json` go here, if set.
    pub out: Option<&'a Path>,
}

/// What came out.
#[derive(Debug, Serialize)]
pub struct Outcome {
    pub scenario: String,
    pub hours: f64,
    pub poll_seconds: u64,
    pub judge_from_hour: f64,
    pub settings: Vec<Figures>,
    pub charts: Vec<PathBuf>,
    /// The runs themselves, to judge other spans (not written out).
    #[serde(skip)]
    pub runs: Vec<Run>,
}

pub async fn what_if(req: Request<'_>) -> anyhow::Result<Outcome> {
    if req.judge_from_hour >= req.hours {
        bail!(
            "judging from hour {} leaves nothing of a {} h run",
            req.judge_from_hour,
            req.hours
        );
    }
    if let Some(out) = req.out {
        std::fs::create_dir_all(out).with_context(|| format!("--out {}", out.display()))?;
    }
    let hours = req.hours;
    let bars = indicatif::MultiProgress::new();
    let terminal = std::io::stderr().is_terminal();
    let runs = req.settings.iter().map(|setting| {
        let bar = terminal.then(|| {
            let b = bars.add(indicatif::ProgressBar::new(hours.ceil() as u64));
            b.set_style(
                indicatif::ProgressStyle::with_template(
                    "{prefix:>30} [{bar:40}] {pos}/{len} simulated hours",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            b.set_prefix(setting.label.clone());
            b
        });
        let label = setting.label.clone();
        async move {
            let mut last_day = 0;
            let result = run(req.scenario, setting, hours, req.poll, |done| {
                let h = (done * hours).round() as u64;
                match &bar {
                    Some(b) => b.set_position(h),
                    // Plain lines when not on a terminal: one a simulated day.
                    None => {
                        let day = (h / 24) as usize;
                        if day > last_day {
                            last_day = day;
                            eprintln!("{label}: {h} of {hours:.0} simulated hours");
                        }
                    }
                }
            })
            .await;
            if let Some(b) = bar {
                b.finish();
            }
            result
        }
    });
    let runs = futures_util::future::join_all(runs).await;
    let mut settings = Vec::new();
    let mut charts = Vec::new();
    let runs: Vec<Run> = runs.into_iter().collect::<anyhow::Result<_>>()?;
    for r in &runs {
        let scenario = r.setting.apply(req.scenario);
        let truth = scenario.truth(&r.job_id).context("the scenario's job")?;
        settings.push(figures(r, &truth, req.judge_from_hour, req.lag_threshold_s));
        if let Some(out) = req.out {
            let file = out.join(format!("{}.svg", slug(&r.setting.label)));
            let title = format!("{}: {}", truth.name(), r.setting.label);
            std::fs::write(&file, svg(r, &truth, &title))
                .with_context(|| format!("writing {}", file.display()))?;
            charts.push(file);
        }
    }
    let outcome = Outcome {
        scenario: req.scenario_label,
        hours,
        poll_seconds: req.poll.as_secs(),
        judge_from_hour: req.judge_from_hour,
        settings,
        charts,
        runs,
    };
    if let Some(out) = req.out {
        let file = out.join("whatif.json");
        std::fs::write(&file, serde_json::to_vec_pretty(&outcome)?)
            .with_context(|| format!("writing {}", file.display()))?;
    }
    Ok(outcome)
}

/// A file name for a setting's label.
fn slug(label: &str) -> String {
    let s: String = label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect();
    s.trim_matches('-').to_string()
}
