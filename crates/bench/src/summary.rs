//! Summaries derived from raw rounds: median, minimum and maximum of each metric per case
//! and system, and ratios of medians between systems of the same case. Reports print
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
}

impl Summary {
    /// Summarises the raw rounds of `r`.
    pub fn of(r: &ExperimentResult) -> Summary {
        let mut values: BTreeMap<(String, String, String), Vec<f64>> = BTreeMap::new();
        for m in &r.measurements {
            for (k, v) in &m.metrics {
                values
                    .entry((m.case.clone(), m.system.clone(), k.clone()))
                    .or_default()
                    .push(*v);
            }
        }
        Summary {
            stats: values
                .into_iter()
                .filter_map(|(k, v)| Stat::of(&v).map(|s| (k, s)))
                .collect(),
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

    /// Every (case, system, metric) with statistics, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str, &str, Stat)> {
        self.stats
            .iter()
            .map(|((c, s, m), st)| (c.as_str(), s.as_str(), m.as_str(), *st))
    }
}
