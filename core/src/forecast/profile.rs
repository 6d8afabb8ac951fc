//! The learned input-rate profile of a job's sources.
//!
//! Observations (a rate over an interval) accumulate into the current 15-minute bucket; when
//! time moves into the next bucket, the finished one is folded into two tables: by time of
//! day (96 buckets) and by day of week (7 × 96, Monday first, UTC). Each bucket is a decayed
//! weighted mean: an observation's weight halves every `half_life_ms`, so a changed pattern
//! takes over within a few half-lives. Before folding, the bucket is scored against what each
//! table predicted for it; a day of scores tells how far the profile can be trusted. A third
//! reading, the time-of-day table scaled to how the last two hours compared with it, follows
//! a known shape at a new level (a weekend day before a week of history exists).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::Forecast;

/// Format version of a serialized profile; a profile of another version is relearned.
pub const PROFILE_VERSION: u32 = 1;
/// Length of one bucket.
pub const BUCKET_MS: u64 = 15 * 60_000;
const DAY_BUCKETS: u64 = 96;
const WEEK_BUCKETS: u64 = 7 * DAY_BUCKETS;
const WEEK_MS: u64 = WEEK_BUCKETS * BUCKET_MS;
/// A bucket is learned only if at least a third of it was observed.
const MIN_COVERAGE_MS: u64 = BUCKET_MS / 3;
/// The last two hours: a profile that is off right now is not trusted either.
const RECENT_BUCKETS: u64 = 8;
/// A profile must have predicted at least six hours of the last day before it is trusted:
/// half a day kept the second day of a daily cycle reactive (8 rescales instead of 5 on the
/// diurnal what-if scenario).
const MIN_SCORED_BUCKETS: usize = (DAY_BUCKETS / 4) as usize;

/// Every source's profile. Plain serde data; the agent keeps it in its durable state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadProfile {
    pub version: u32,
    sources: BTreeMap<String, SourceProfile>,
}

impl Default for LoadProfile {
    fn default() -> Self {
        LoadProfile {
            version: PROFILE_VERSION,
            sources: BTreeMap::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SourceProfile {
    /// Start of the first observation.
    first_ms: u64,
    /// By time of day: 96 buckets.
    daily: Vec<Bucket>,
    /// By day of week: 7 × 96 buckets, Monday 00:00 UTC first.
    weekly: Vec<Bucket>,
    /// The last day of finished buckets, with what each table had predicted for them.
    scored: Vec<Scored>,
    /// The bucket being observed now. Not persisted: at most one bucket is lost on restart.
    #[serde(skip)]
    pending: Option<Pending>,
}

/// A decayed weighted mean: `[mean, weight, last update ms]`; weight 0 means no data.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
struct Bucket(f64, f64, u64);

impl Bucket {
    fn value(&self) -> Option<f64> {
        (self.1 > 0.0).then_some(self.0)
    }

    fn add(&mut self, x: f64, at_ms: u64, half_life_ms: u64) {
        let old = if self.1 > 0.0 && half_life_ms > 0 {
            let age = at_ms.saturating_sub(self.2) as f64;
            self.1 * 0.5f64.powf(age / half_life_ms as f64)
        } else {
            0.0
        };
        *self = Bucket((self.0 * old + x) / (old + 1.0), old + 1.0, at_ms);
    }
}

/// `[bucket number, observed rate, daily prediction, weekly prediction]`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
struct Scored(u64, f64, Option<f64>, Option<f64>);

#[derive(Debug, Clone, Copy, PartialEq)]
struct Pending {
    bucket: u64,
    rate_ms: f64,
    covered_ms: u64,
    /// End of the latest observation: an interval that starts before it was seen already.
    last_ms: u64,
}

/// Which table a forecast reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Table {
    Daily,
    Weekly,
    /// The time-of-day table scaled by how the last two hours compared with it: a day with
    /// the usual shape at another level (a weekend day before a week of history exists).
    Scaled,
}

impl Table {
    fn label(self) -> &'static str {
        match self {
            Table::Daily => "time-of-day",
            Table::Weekly => "day-of-week",
            Table::Scaled => "time-of-day scaled to the last 2 h",
        }
    }
}

/// Index of an absolute bucket number in the weekly table (1970-01-01 was a Thursday).
fn week_index(bucket: u64) -> usize {
    let weekday = (bucket / DAY_BUCKETS + 3) % 7;
    (weekday * DAY_BUCKETS + bucket % DAY_BUCKETS) as usize
}

impl SourceProfile {
    fn new(first_ms: u64) -> Self {
        SourceProfile {
            first_ms,
            daily: vec![Bucket::default(); DAY_BUCKETS as usize],
            weekly: vec![Bucket::default(); WEEK_BUCKETS as usize],
            scored: Vec::new(),
            pending: None,
        }
    }

    fn has_week_before(&self, bucket: u64) -> bool {
        bucket * BUCKET_MS >= self.first_ms.saturating_add(WEEK_MS)
    }

    fn predict(&self, table: Table, bucket: u64) -> Option<f64> {
        match table {
            Table::Daily => self.daily[(bucket % DAY_BUCKETS) as usize].value(),
            Table::Scaled => Some(
                self.daily[(bucket % DAY_BUCKETS) as usize].value()? * self.level_before(bucket)?,
            ),
            Table::Weekly if self.has_week_before(bucket) => {
                self.weekly[week_index(bucket)].value()
            }
            Table::Weekly => None,
        }
    }

    fn fold(&mut self, p: Pending, half_life_ms: u64) {
        let rate = p.rate_ms / p.covered_ms as f64;
        let (daily, weekly) = (
            self.predict(Table::Daily, p.bucket),
            self.predict(Table::Weekly, p.bucket),
        );
        self.scored.push(Scored(p.bucket, rate, daily, weekly));
        self.scored
            .retain(|s| s.0 + DAY_BUCKETS > p.bucket && s.0 <= p.bucket);
        let at_ms = p.bucket * BUCKET_MS;
        self.daily[(p.bucket % DAY_BUCKETS) as usize].add(rate, at_ms, half_life_ms);
        self.weekly[week_index(p.bucket)].add(rate, at_ms, half_life_ms);
    }

    /// How the two hours of scored buckets before `bucket` compared with what the
    /// time-of-day table predicted for them when they were scored (observed over predicted);
    /// `None` with fewer than half of them predicted.
    fn level_before(&self, bucket: u64) -> Option<f64> {
        self.level(bucket, |s| s.2)
    }

    /// The same comparison against the time-of-day table as it stands now, which already
    /// holds those buckets: the level at which the table's coming day is forecast.
    fn level_now(&self, bucket: u64) -> Option<f64> {
        self.level(bucket, |s| self.daily[(s.0 % DAY_BUCKETS) as usize].value())
    }

    fn level(&self, bucket: u64, predicted_for: impl Fn(&Scored) -> Option<f64>) -> Option<f64> {
        let from = bucket.saturating_sub(RECENT_BUCKETS);
        let (mut observed, mut predicted, mut n) = (0.0, 0.0, 0);
        for s in self.scored.iter().filter(|s| s.0 >= from && s.0 < bucket) {
            if let Some(p) = predicted_for(s) {
                observed += s.1;
                predicted += p;
                n += 1;
            }
        }
        (2 * n >= RECENT_BUCKETS as usize && predicted > 0.0).then(|| observed / predicted)
    }

    /// Relative error `Σ|predicted − observed| / Σ observed` of `table` over the scored
    /// buckets after `from_bucket`, and how many buckets it predicted.
    fn error(&self, table: Table, from_bucket: u64) -> (f64, usize) {
        let (mut diff, mut total, mut n) = (0.0, 0.0, 0);
        for s in self.scored.iter().filter(|s| s.0 >= from_bucket) {
            let predicted = match table {
                Table::Daily => s.2,
                Table::Weekly => s.3,
                Table::Scaled => s.2.zip(self.level_before(s.0)).map(|(p, l)| p * l),
            };
            if let Some(p) = predicted {
                diff += (p - s.1).abs();
                total += s.1;
                n += 1;
            }
        }
        let error = if total > 0.0 {
            diff / total
        } else if diff > 0.0 {
            f64::INFINITY
        } else {
            0.0
        };
        (error, n)
    }

    /// A bucket's forecast, with a missing bucket filled from its neighbours.
    fn value(&self, table: Table, bucket: u64) -> f64 {
        if let Some(v) = self.predict(table, bucket) {
            return v;
        }
        for d in 1..=2 {
            let around: Vec<f64> = [bucket.saturating_sub(d), bucket + d]
                .into_iter()
                .filter_map(|b| self.predict(table, b))
                .collect();
            if !around.is_empty() {
                return around.iter().copied().fold(f64::MIN, f64::max);
            }
        }
        f64::NAN
    }
}

/// How one source's forecast stands.
struct Judgement {
    table: Table,
    confident: bool,
    detail: String,
}

impl LoadProfile {
    /// Adds one observation: `source` received `rate` records/s over `(from_ms, to_ms]`.
    /// Returns true when a bucket was finished and folded in, the only change worth persisting.
    pub fn observe(
        &mut self,
        source: &str,
        from_ms: u64,
        to_ms: u64,
        rate: f64,
        half_life_ms: u64,
    ) -> bool {
        if to_ms <= from_ms || !rate.is_finite() || rate < 0.0 {
            return false;
        }
        let bucket = (from_ms / 2 + to_ms / 2) / BUCKET_MS;
        let dt = (to_ms - from_ms).min(BUCKET_MS);
        let sp = self
            .sources
            .entry(source.to_string())
            .or_insert_with(|| SourceProfile::new(from_ms));
        let mut folded = false;
        match sp.pending {
            // Seen already, or out of order.
            Some(p) if from_ms < p.last_ms || p.bucket > bucket => return false,
            Some(p) if p.bucket == bucket => {
                sp.pending = Some(Pending {
                    bucket,
                    rate_ms: p.rate_ms + rate * dt as f64,
                    covered_ms: p.covered_ms + dt,
                    last_ms: to_ms,
                });
                return false;
            }
            Some(p) if p.covered_ms >= MIN_COVERAGE_MS => {
                sp.fold(p, half_life_ms);
                folded = true;
            }
            // Too little of the bucket was seen to learn from it.
            Some(_) | None => {}
        }
        sp.pending = Some(Pending {
            bucket,
            rate_ms: rate * dt as f64,
            covered_ms: dt,
            last_ms: to_ms,
        });
        folded
    }

    /// Forgets sources that are no longer in the job.
    pub fn retain_sources(&mut self, keep: impl Fn(&str) -> bool) -> bool {
        let before = self.sources.len();
        self.sources.retain(|id, _| keep(id));
        self.sources.len() != before
    }

    /// What the profile expects from `now_ms` on, `steps` buckets long. It is confident when
    /// every source's chosen table erred by at most `max_error` over the last day and over
    /// the last two hours, after predicting at least half of the last day.
    pub fn forecast(&self, now_ms: u64, steps: usize, max_error: f64) -> Forecast {
        let now_bucket = now_ms / BUCKET_MS;
        let mut forecast = Forecast {
            start_ms: now_bucket * BUCKET_MS,
            step_ms: BUCKET_MS,
            sources: BTreeMap::new(),
            confident: !self.sources.is_empty(),
            detail: String::new(),
        };
        if self.sources.is_empty() {
            forecast.detail = "no load history yet".into();
        }
        let mut details = Vec::new();
        for (id, sp) in &self.sources {
            let j = judge(sp, now_bucket, max_error);
            forecast.confident &= j.confident;
            // A scaled forecast keeps today's level for the whole day ahead.
            let (table, level) = match j.table {
                Table::Scaled => (Table::Daily, sp.level_now(now_bucket).unwrap_or(1.0)),
                t => (t, 1.0),
            };
            let curve = (0..steps as u64)
                .map(|i| sp.value(table, now_bucket + i) * level)
                .collect();
            forecast.sources.insert(id.clone(), curve);
            details.push(if self.sources.len() > 1 {
                format!("{id}: {}", j.detail)
            } else {
                j.detail
            });
        }
        if !details.is_empty() {
            forecast.detail = details.join("; ");
        }
        forecast
    }
}

fn judge(sp: &SourceProfile, now_bucket: u64, max_error: f64) -> Judgement {
    let day_from = now_bucket.saturating_sub(DAY_BUCKETS);
    let recent_from = now_bucket.saturating_sub(RECENT_BUCKETS);
    // The table that erred least over the last day among those that predicted enough of it
    // (on a tie the plainer one, min_by keeps the first); the time-of-day one while learning.
    let candidates =
        [Table::Weekly, Table::Daily, Table::Scaled].map(|t| (t, sp.error(t, day_from)));
    let (table, (error, scored)) = candidates
        .iter()
        .filter(|(_, e)| e.1 >= MIN_SCORED_BUCKETS)
        .min_by(|a, b| a.1 .0.total_cmp(&b.1 .0))
        .copied()
        .unwrap_or(candidates[1]);
    let (recent, _) = sp.error(table, recent_from);
    let pct = |x: f64| 100.0 * x;
    if scored < MIN_SCORED_BUCKETS {
        return Judgement {
            table,
            confident: false,
            detail: format!(
                "learning: {scored} of the last day's {DAY_BUCKETS} quarter-hours predicted, {MIN_SCORED_BUCKETS} needed"
            ),
        };
    }
    let worst = error.max(recent);
    let confident = worst <= max_error;
    let detail = format!(
        "{} profile erred {:.1} % over the last day and {:.1} % over the last 2 h ({} flink-autoscale.prediction.max-error {:.1} %)",
        table.label(),
        pct(error),
        pct(recent),
        if confident { "within" } else { "above" },
        pct(max_error)
    );
    Judgement {
        table,
        confident,
        detail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: u64 = 60_000;
    const DAY_MS: u64 = DAY_BUCKETS * BUCKET_MS;
    /// A Monday, 00:00 UTC (2027-01-04).
    const MONDAY: u64 = 1_799_020_800_000;

    /// Feeds `days` of one-minute observations of `rate(t)`.
    fn learn(p: &mut LoadProfile, from: u64, days: u64, rate: impl Fn(u64) -> f64) {
        let mut t = from;
        while t < from + days * DAY_MS {
            p.observe("src", t, t + MIN, rate(t), DAY_MS);
            t += MIN;
        }
    }

    fn daily_wave(t: u64) -> f64 {
        let phase = (t % DAY_MS) as f64 / DAY_MS as f64 * std::f64::consts::TAU;
        1000.0 + 900.0 * phase.sin()
    }

    #[test]
    fn monday_is_the_first_day_of_the_weekly_table() {
        assert_eq!(week_index(MONDAY / BUCKET_MS), 0);
        assert_eq!(week_index(MONDAY / BUCKET_MS + 95), 95);
        assert_eq!(week_index((MONDAY + 6 * DAY_MS) / BUCKET_MS), 6 * 96);
    }

    #[test]
    fn buckets_fold_when_time_moves_on_and_need_coverage() {
        let mut p = LoadProfile::default();
        assert!(!p.observe("src", MONDAY, MONDAY + 10 * MIN, 100.0, DAY_MS));
        assert!(!p.observe("src", MONDAY + 10 * MIN, MONDAY + 14 * MIN, 200.0, DAY_MS));
        // Into the next bucket: the first (14 of 15 minutes seen) is folded.
        assert!(p.observe("src", MONDAY + 15 * MIN, MONDAY + 16 * MIN, 1.0, DAY_MS));
        let sp = &p.sources["src"];
        let expected = (100.0 * 10.0 + 200.0 * 4.0) / 14.0;
        assert!((sp.daily[0].0 - expected).abs() < 1e-9, "{:?}", sp.daily[0]);
        // A bucket seen for 1 of 15 minutes is not learned.
        assert!(!p.observe("src", MONDAY + 40 * MIN, MONDAY + 41 * MIN, 1.0, DAY_MS));
        assert_eq!(p.sources["src"].daily[1].1, 0.0);
        // Bad input and intervals seen already are ignored.
        assert!(!p.observe("src", MONDAY + 40 * MIN, MONDAY + 41 * MIN, 1e6, DAY_MS));
        assert!(!p.observe("src", MONDAY, MONDAY, 1.0, DAY_MS));
        assert!(!p.observe("src", MONDAY, MONDAY + MIN, f64::NAN, DAY_MS));
    }

    #[test]
    fn a_repeating_day_becomes_a_confident_forecast() {
        let mut p = LoadProfile::default();
        learn(&mut p, MONDAY, 1, daily_wave);
        let f = p.forecast(MONDAY + DAY_MS, 96, 0.15);
        assert!(!f.confident, "one day is learning only: {}", f.detail);
        assert!(f.detail.starts_with("learning"), "{}", f.detail);
        learn(&mut p, MONDAY + DAY_MS, 1, daily_wave);
        let now = MONDAY + 2 * DAY_MS;
        let f = p.forecast(now, 96, 0.15);
        assert!(f.confident, "{}", f.detail);
        assert_eq!(f.start_ms, now);
        // The forecast at 06:00 (the wave's peak) is about 1,900.
        let at_six = f.sources["src"][24];
        assert!((at_six - 1900.0).abs() < 20.0, "{at_six}");
    }

    #[test]
    fn a_changed_pattern_loses_confidence_then_is_relearned() {
        let mut p = LoadProfile::default();
        learn(&mut p, MONDAY, 3, daily_wave);
        // The peak moves from 06:00 to 18:00: the profile is off and says so.
        let shifted = |t| daily_wave(t + DAY_MS / 2);
        learn(&mut p, MONDAY + 3 * DAY_MS, 1, shifted);
        let f = p.forecast(MONDAY + 4 * DAY_MS, 96, 0.15);
        assert!(!f.confident, "{}", f.detail);
        assert!(f.detail.contains("above"), "{}", f.detail);
        // Within a few days (half-life one day) it is trusted again.
        learn(&mut p, MONDAY + 4 * DAY_MS, 3, shifted);
        let f = p.forecast(MONDAY + 7 * DAY_MS, 96, 0.15);
        assert!(f.confident, "{}", f.detail);
        assert!((f.sources["src"][72] - 1900.0).abs() < 200.0);
    }

    #[test]
    fn the_same_shape_at_another_level_is_scaled_at_once() {
        let mut p = LoadProfile::default();
        learn(&mut p, MONDAY, 3, daily_wave);
        // The load doubles and keeps its shape: after two hours the scaled table has it.
        let doubled = |t| 2.0 * daily_wave(t);
        learn(&mut p, MONDAY + 3 * DAY_MS, 1, doubled);
        let f = p.forecast(MONDAY + 4 * DAY_MS, 96, 0.15);
        assert!(f.confident, "{}", f.detail);
        assert!(f.detail.starts_with("time-of-day scaled"), "{}", f.detail);
        assert!((f.sources["src"][24] - 3800.0).abs() < 200.0);
        // Without the change the plain table is kept.
        let mut p = LoadProfile::default();
        learn(&mut p, MONDAY, 4, daily_wave);
        let f = p.forecast(MONDAY + 4 * DAY_MS, 96, 0.15);
        assert!(f.detail.starts_with("time-of-day profile"), "{}", f.detail);
    }

    #[test]
    fn weekends_are_learned_once_a_week_of_history_exists() {
        // Weekdays follow the wave, weekends run at a third of it.
        let weekly = |t: u64| {
            let weekday = ((t - MONDAY) / DAY_MS) % 7;
            daily_wave(t) * if weekday >= 5 { 0.33 } else { 1.0 }
        };
        let mut p = LoadProfile::default();
        learn(&mut p, MONDAY, 6, weekly);
        // Sunday morning: the time-of-day table mixes weekdays and Saturday; scaled to
        // Saturday's level it predicts the weekend day.
        let sunday = MONDAY + 6 * DAY_MS;
        let f = p.forecast(sunday, 96, 0.15);
        assert!(f.confident, "{}", f.detail);
        assert!(f.detail.starts_with("time-of-day scaled"), "{}", f.detail);
        let at_six = f.sources["src"][24];
        assert!((at_six - 0.33 * 1900.0).abs() < 60.0, "{at_six}");
        learn(&mut p, sunday, 8, weekly);
        // The second Tuesday: the day-of-week table predicted the whole last day.
        let f = p.forecast(MONDAY + 14 * DAY_MS, 96, 0.15);
        assert!(f.confident, "{}", f.detail);
        assert!(f.detail.starts_with("day-of-week"), "{}", f.detail);
        // And on Saturday of the third week it expects the weekend, not a weekday.
        learn(&mut p, MONDAY + 14 * DAY_MS, 5, weekly);
        let f = p.forecast(MONDAY + 19 * DAY_MS, 96, 0.15);
        assert!(f.confident, "{}", f.detail);
        let at_six = f.sources["src"][24];
        assert!((at_six - 0.33 * 1900.0).abs() < 50.0, "{at_six}");
    }

    #[test]
    fn profiles_round_trip_through_json_without_the_pending_bucket() {
        let mut p = LoadProfile::default();
        learn(&mut p, MONDAY, 1, daily_wave);
        let text = serde_json::to_string(&p).unwrap();
        let back: LoadProfile = serde_json::from_str(&text).unwrap();
        assert_eq!(back.version, PROFILE_VERSION);
        assert_eq!(back.sources["src"].daily, p.sources["src"].daily);
        assert!(back.sources["src"].pending.is_none());
    }
}
