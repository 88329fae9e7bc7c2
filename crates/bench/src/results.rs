//! The results of a `ulnet bench` run: raw per-round measurements and the views (tables,
//! plots) to derive from them. `results.json` is this structure serialised; every figure
//! in a report is computed from its `measurements` by [`crate::summary`], never stored
//! as a summary, so a reader can recompute each one (docs/bench.md has the schema).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The schema version written into `results.json`; bumped on incompatible changes.
pub const SCHEMA_VERSION: u32 = 1;

/// A whole run: where it ran and each experiment's raw results.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Results {
    /// [`SCHEMA_VERSION`] at the time of writing.
    pub schema: u32,
    /// The machine, the code and the run's parameters.
    pub meta: Meta,
    /// One entry per experiment run, in run order.
    pub experiments: Vec<ExperimentResult>,
}

/// Where and how a run happened.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Meta {
    /// Start of the run, UTC, RFC 3339.
    pub started: String,
    /// Wall-clock seconds the whole run took.
    pub elapsed_s: f64,
    /// `git describe`-style commit of the checkout (with `-dirty` if it had changes).
    pub commit: String,
    /// The kernel release (`uname -r`).
    pub kernel: String,
    /// The CPU model (`/proc/cpuinfo`).
    pub cpu_model: String,
    /// Online CPUs.
    pub cores: u32,
    /// `quick`, `default`, `full` or `smoke`.
    pub profile: String,
    /// Rounds per system and case.
    pub rounds: u32,
    /// The command line.
    pub command: String,
    /// How generator and system under test were placed on cores.
    pub pinning: String,
    /// Anything else worth keeping (TSC, clocksource, ...).
    pub extra: BTreeMap<String, String>,
}

/// What kind of system produced a measurement.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum SystemKind {
    /// The Linux kernel's own stack or system calls (the baseline).
    Kernel,
    /// ulnet.
    Ulnet,
    /// A bare channel or mechanism with no protocol work (a ceiling, not a contender).
    Channel,
}

/// One system compared in an experiment.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct System {
    /// Stable identifier (`kernel-default`, `ulnet-xdp`, ...).
    pub id: String,
    /// What a reader sees in tables.
    pub label: String,
    /// Kernel, ulnet or bare channel.
    pub kind: SystemKind,
    /// True for ulnet rows that bypass the public socket API (an application inside the
    /// runtime loop); tables label them "engine only".
    pub engine_only: bool,
    /// Setup as key/value: channel, mode (native/generic, copy/zero-copy, multi-buffer),
    /// MTU, offloads, wait mode, ...
    pub setup: BTreeMap<String, String>,
}

/// One point of an experiment (a direction, an MTU, an offered load, ...).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Case {
    /// Stable identifier within the experiment.
    pub id: String,
    /// What a reader sees.
    pub label: String,
    /// Numeric parameters (plots take their x values from these).
    pub params: BTreeMap<String, f64>,
}

/// One measured round of one system on one case.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Measurement {
    /// [`Case::id`].
    pub case: String,
    /// [`System::id`].
    pub system: String,
    /// Round number, from 0.
    pub round: u32,
    /// Position in the run's order within the experiment (shows the alternation).
    pub seq: u32,
    /// The figures of this round, by metric name (see [`Metric`] for units).
    pub metrics: BTreeMap<String, f64>,
}

/// A metric's name, how to print it and what it means.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Metric {
    /// The key in [`Measurement::metrics`].
    pub key: String,
    /// Column header, unit included.
    pub label: String,
    /// Digits after the decimal point.
    pub digits: u8,
    /// Whether more is better (for the ratio's wording); `None` when neither.
    pub higher_is_better: Option<bool>,
}

/// A table to derive: for each case and system, the median (min–max) of each metric,
/// and the ratio of each system to the baseline on the first metric.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TableView {
    /// Title above the table.
    pub title: String,
    /// Cases shown, in order (empty: all).
    pub cases: Vec<String>,
    /// Systems shown, in order (empty: all).
    pub systems: Vec<String>,
    /// Metric columns.
    pub metrics: Vec<Metric>,
    /// Ratio columns: `ratio_metric` of each system over each baseline system's, same case.
    pub baselines: Vec<String>,
    /// The metric the ratios are taken on (defaults to the first metric).
    pub ratio_metric: Option<String>,
}

/// How a plot draws its lines.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum PlotKind {
    /// One line per system through the cases' x values (sweeps).
    Lines,
    /// One group of bars per case, one bar per system (medians with min–max whiskers).
    Bars,
}

/// A plot to derive.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PlotView {
    /// File stem of the SVG/PNG (unique in the run once prefixed with the experiment).
    pub id: String,
    /// Title.
    pub title: String,
    /// Lines or bars.
    pub kind: PlotKind,
    /// Cases drawn, in order (empty: all).
    pub cases: Vec<String>,
    /// Systems drawn (empty: all).
    pub systems: Vec<String>,
    /// For [`PlotKind::Lines`]: the [`Case::params`] key that gives x.
    pub x_param: Option<String>,
    /// The x axis label.
    pub x_label: String,
    /// The metric on y.
    pub y: Metric,
    /// A second metric drawn on the right axis (dashed), e.g. CPU beside throughput.
    pub y2: Option<Metric>,
    /// Logarithmic x axis.
    pub x_log: bool,
}

/// A view of the measurements.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "snake_case", tag = "view")]
pub enum View {
    /// A table.
    Table(TableView),
    /// A plot.
    Plot(PlotView),
}

/// One experiment's results.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ExperimentResult {
    /// The experiment's name (`hurd-tcp`, ...).
    pub name: String,
    /// The seed document it re-runs (`000`, ...).
    pub seed: String,
    /// One-line title.
    pub title: String,
    /// The exact parameters, as text.
    pub params: BTreeMap<String, String>,
    /// Every system that took part.
    pub systems: Vec<System>,
    /// Every case.
    pub cases: Vec<Case>,
    /// Raw rounds, in run order.
    pub measurements: Vec<Measurement>,
    /// Tables and plots to derive.
    pub views: Vec<View>,
    /// What a reader should know (method, caveats), one sentence each.
    pub notes: Vec<String>,
    /// Measurements that failed, with the reason; an experiment with errors still reports
    /// what it measured.
    pub errors: Vec<String>,
    /// Wall-clock seconds the experiment took.
    pub elapsed_s: f64,
}

impl ExperimentResult {
    /// An empty result for `name`.
    pub fn new(name: &str, seed: &str, title: &str) -> Self {
        ExperimentResult {
            name: name.into(),
            seed: seed.into(),
            title: title.into(),
            params: BTreeMap::new(),
            systems: Vec::new(),
            cases: Vec::new(),
            measurements: Vec::new(),
            views: Vec::new(),
            notes: Vec::new(),
            errors: Vec::new(),
            elapsed_s: 0.0,
        }
    }

    /// The system `id`, if it took part.
    pub fn system(&self, id: &str) -> Option<&System> {
        self.systems.iter().find(|s| s.id == id)
    }

    /// The case `id`.
    pub fn case(&self, id: &str) -> Option<&Case> {
        self.cases.iter().find(|c| c.id == id)
    }
}

impl Metric {
    /// A metric where more is better.
    pub fn more(key: &str, label: &str, digits: u8) -> Self {
        Metric {
            key: key.into(),
            label: label.into(),
            digits,
            higher_is_better: Some(true),
        }
    }

    /// A metric where less is better (CPU, latency).
    pub fn less(key: &str, label: &str, digits: u8) -> Self {
        Metric {
            key: key.into(),
            label: label.into(),
            digits,
            higher_is_better: Some(false),
        }
    }

    /// A metric that is neither (a count, an offered load).
    pub fn plain(key: &str, label: &str, digits: u8) -> Self {
        Metric {
            key: key.into(),
            label: label.into(),
            digits,
            higher_is_better: None,
        }
    }
}
