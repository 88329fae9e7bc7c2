//! Summaries derived from raw rounds: median, minimum and maximum of each metric per case
//! and system, ratios of medians between systems of the same case (the tables), and the
//! median of each round's own ratio (the verdicts: [`Summary::paired`]). Reports print
//! nothing else; `tests/report.rs` checks these against hand-computed values.

use std::collections::BTreeMap;

use crate::results::ExperimentResult;

/// Median, extremes and count of one metric over the rounds of one system on one case.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stat {
    /// The median (the mean of the middle two for an even count).
    pub median: f64,
    /// The smallest round.
    pub min: f64,
    /// The largest round.
    pub max: f64,
    /// How many rounds had the metric.
    pub n: usize,
}

impl Stat {
    /// The statistics of `values`; `None` if empty or any is not finite.
    pub fn of(values: &[f64]) -> Option<Stat> {
        if values.is_empty() || values.iter().any(|v| !v.is_finite()) {
            return None;
        }
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Stat {
            median,
            min: v[0],
            max: v[n - 1],
            n,
        })
    }
}

/// The median of `v` (the mean of the middle two for an even count); NaN when empty.
pub fn median(v: &[f64]) -> f64 {
    Stat::of(v).map_or(f64::NAN, |s| s.median)
}

/// Every metric's statistics of one experiment, keyed by (case, system, metric).
#[derive(Debug, Clone, Default)]
pub struct Summary {
    stats: BTreeMap<(String, String, String), Stat>,
    /// Each round's value, by round number (the first measurement of a round).
    rounds: BTreeMap<(String, String, String), BTreeMap<u32, f64>>,
}

impl Summary {
    /// Summarises the raw rounds of `r`.
    pub fn of(r: &ExperimentResult) -> Summary {
        let mut values: BTreeMap<(String, String, String), Vec<f64>> = BTreeMap::new();
        let mut rounds: BTreeMap<(String, String, String), BTreeMap<u32, f64>> = BTreeMap::new();
        for m in &r.measurements {
            for (k, v) in &m.metrics {
                let key = (m.case.clone(), m.system.clone(), k.clone());
                rounds
                    .entry(key.clone())
                    .or_default()
                    .entry(m.round)
                    .or_insert(*v);
                values.entry(key).or_default().push(*v);
            }
        }
        Summary {
            stats: values
                .into_iter()
                .filter_map(|(k, v)| Stat::of(&v).map(|s| (k, s)))
                .collect(),
            rounds,
        }
    }

    /// The statistics of `metric` for `system` on `case`.
    pub fn get(&self, case: &str, system: &str, metric: &str) -> Option<Stat> {
        self.stats
            .get(&(case.to_owned(), system.to_owned(), metric.to_owned()))
            .copied()
    }

    /// The median of `metric` for `system` on `case`.
    pub fn median(&self, case: &str, system: &str, metric: &str) -> Option<f64> {
        self.get(case, system, metric).map(|s| s.median)
    }

    /// `system`'s median of `metric` over `baseline`'s, on `case`; `None` if either is
    /// missing or the baseline is zero.
    pub fn ratio(&self, case: &str, system: &str, baseline: &str, metric: &str) -> Option<f64> {
        let a = self.median(case, system, metric)?;
        let b = self.median(case, baseline, metric)?;
        (b != 0.0).then_some(a / b)
    }

    /// The median, over the rounds that measured both, of `system`'s `metric` over
    /// `baseline`'s in the same round, on `case`. The systems alternate within a round,
    /// so a round is a pair run moments apart: a slow phase of the host that spans a
    /// whole round moves both sides of its pair, where it moves only one side's median in
    /// [`Summary::ratio`] (which can then set one system's slow rounds against the
    /// other's fast ones). `None` when no round has both (or a baseline is zero).
    pub fn paired_ratio(
        &self,
        case: &str,
        system: &str,
        baseline: &str,
        metric: &str,
    ) -> Option<f64> {
        let key = |sys: &str| (case.to_owned(), sys.to_owned(), metric.to_owned());
        let a = self.rounds.get(&key(system))?;
        let b = self.rounds.get(&key(baseline))?;
        let ratios: Vec<f64> = a
            .iter()
            .filter_map(|(round, x)| {
                let y = *b.get(round)?;
                (y != 0.0).then_some(x / y)
            })
            .collect();
        Stat::of(&ratios).map(|s| s.median)
    }

    /// The ratio a verdict is judged on: [`Summary::paired_ratio`] where rounds pair,
    /// else [`Summary::ratio`] (systems measured in different rounds).
    pub fn paired(&self, case: &str, system: &str, baseline: &str, metric: &str) -> Option<f64> {
        self.paired_ratio(case, system, baseline, metric)
            .or_else(|| self.ratio(case, system, baseline, metric))
    }

    /// Every (case, system, metric) with statistics, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str, &str, Stat)> {
        self.stats
            .iter()
            .map(|((c, s, m), st)| (c.as_str(), s.as_str(), m.as_str(), *st))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::Measurement;
    use std::collections::BTreeMap;

    #[test]
    fn paired_ratio_is_the_median_of_each_rounds_ratio() {
        let mut r = ExperimentResult::new("x", "-", "pairs");
        // Round 1 is slow for both; round 2 only for the system (a phase change inside
        // the round), which the median of the three pairs leaves out.
        let rows = [
            ("u", [6.0, 8.4, 8.5]),
            ("k", [8.6, 12.3, 8.5]),
            ("other", [1.0, 1.0, 1.0]),
        ];
        for (sys, v) in rows {
            for (round, x) in v.into_iter().enumerate() {
                r.measurements.push(Measurement {
                    case: "tcp".into(),
                    system: sys.into(),
                    round: round as u32,
                    seq: 0,
                    metrics: BTreeMap::from([("p50".to_owned(), x)]),
                });
            }
        }
        let s = Summary::of(&r);
        let p = s.paired_ratio("tcp", "u", "k", "p50").unwrap();
        // Pairs 0.698, 0.683 and 1.0: the median is round 0's.
        assert!((p - 6.0 / 8.6).abs() < 1e-12, "{p}");
        // The ratio of medians takes the system's slow rounds against the baseline's
        // fast ones.
        let m = s.ratio("tcp", "u", "k", "p50").unwrap();
        assert!((m - 8.4 / 8.6).abs() < 1e-12, "{m}");
        assert_eq!(s.paired_ratio("tcp", "u", "missing", "p50"), None);
        assert_eq!(s.paired_ratio("udp", "u", "k", "p50"), None);
        assert_eq!(s.paired("tcp", "u", "k", "p50"), Some(p));
        // Rounds that do not pair (one system measured in rounds the other missed):
        // the ratio of medians.
        r.measurements
            .retain(|m| !(m.system == "k" && m.round == 0));
        r.measurements
            .iter_mut()
            .filter(|m| m.system == "other")
            .for_each(|m| m.round += 10);
        let s = Summary::of(&r);
        assert_eq!(s.paired_ratio("tcp", "other", "k", "p50"), None);
        assert_eq!(
            s.paired("tcp", "other", "k", "p50"),
            s.ratio("tcp", "other", "k", "p50")
        );
        // Only the rounds both measured pair: 0.683 and 1.0.
        let p = s.paired_ratio("tcp", "u", "k", "p50").unwrap();
        assert!((p - (8.4 / 12.3 + 1.0) / 2.0).abs() < 1e-12, "{p}");
    }
}
