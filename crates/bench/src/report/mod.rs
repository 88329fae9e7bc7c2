//! The report of a run, derived only from its raw rounds ([`crate::summary`]):
//!
//! - `report.md`: first the project's goal verdicts (issue 11) of the experiments that
//!   judge them ([`goals`]), then per experiment the seed's own figure, our tables, the
//!   verdict on the seed's claim, notes, errors, and links to the plots;
//! - `report.html`: the same, self-contained (CSS and every plot inline as SVG; it opens
//!   in a browser with no network);
//! - `results.json` (written by [`crate::run`]) and `results.csv` (one row per round and
//!   metric);
//! - `plots/<experiment>-<plot>.svg` and `.png`.
//!
//! [`terminal`] is what `ulnet bench` prints at the end: each table beside the seed's
//! figure with the verdict, and last the goal verdicts again.

mod html;
mod markdown;
pub mod plot;
mod table;

use std::io;
use std::path::{Path, PathBuf};

use crate::experiments;
use crate::results::{ExperimentResult, Results, View};
use crate::summary::Summary;

pub use table::{render as render_table, Rendered};

/// `key=value` pairs joined by commas (a system's setup, an experiment's parameters).
pub fn key_values(map: &std::collections::BTreeMap<String, String>) -> String {
    map.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The verdict sentences of `r` (from its experiment in the registry; none for an
/// experiment this binary does not know).
pub fn verdict(r: &ExperimentResult, s: &Summary) -> Vec<String> {
    experiments::find(&r.name).map_or_else(Vec::new, |e| e.verdict(r, s))
}

/// The project's goal verdicts (issue 11) of every experiment in the run that judges
/// any, in run order: `(experiment, sentence)`, one pair per sentence.
pub fn goals(results: &Results) -> Vec<(&str, String)> {
    results
        .experiments
        .iter()
        .flat_map(|r| {
            let g =
                experiments::find(&r.name).map_or_else(Vec::new, |e| e.goals(r, &Summary::of(r)));
            g.into_iter().map(|line| (r.name.as_str(), line))
        })
        .collect()
}

/// What introduces [`goals`] in the reports.
const GOALS_INTRO: &str = "ulnet's speed goals (docs/performance.md) as the experiments below judged them in this run; each experiment's section says why, with its tables.";

/// The seed's own figure for `r`.
pub fn seed_figure(r: &ExperimentResult) -> &'static str {
    experiments::find(&r.name).map_or("", |e| e.seed_figure())
}

/// Every table of `r` that has a row, rendered (a case left out by `--case`, or whose
/// every system failed, has none; the failures are listed apart).
pub fn tables(r: &ExperimentResult, s: &Summary) -> Vec<Rendered> {
    r.views
        .iter()
        .filter_map(|v| match v {
            View::Table(t) => Some(table::render(r, s, t)),
            View::Plot(_) => None,
        })
        .filter(|t| !t.rows.is_empty())
        .collect()
}

/// The end-of-run text for the terminal.
pub fn terminal(results: &Results) -> String {
    let mut out = String::new();
    for r in &results.experiments {
        let s = Summary::of(r);
        out.push_str(&format!(
            "\n=== {} (seed {}): {} ===\n",
            r.name, r.seed, r.title
        ));
        let seed = seed_figure(r);
        if !seed.is_empty() {
            out.push_str("The seed's own figure:\n");
            for l in seed.lines() {
                out.push_str("  ");
                out.push_str(l);
                out.push('\n');
            }
            out.push_str("Here:\n");
        }
        for t in tables(r, &s) {
            out.push_str(&t.to_text());
            out.push('\n');
        }
        for v in verdict(r, &s) {
            out.push_str(&format!("=> {v}\n"));
        }
        for e in &r.errors {
            out.push_str(&format!("!! {e}\n"));
        }
    }
    let goals = goals(results);
    if !goals.is_empty() {
        out.push_str(&format!(
            "\n=== the project's goals in this run ===\n{GOALS_INTRO}\n"
        ));
        for (name, line) in goals {
            out.push_str(&format!("{name}: {line}\n"));
        }
    }
    out
}

/// Writes `report.md`, `report.html`, `results.csv` and the plots into `dir`; returns the
/// files written. Plots that cannot be drawn are reported in the Markdown and HTML
/// instead of failing the report.
///
/// # Errors
/// A file could not be written.
pub fn write(results: &Results, dir: &Path) -> io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir.join("plots"))?;
    let mut written = Vec::new();
    let plots = plot::draw_all(results, &dir.join("plots"));
    for p in &plots {
        if let Ok(files) = &p.files {
            written.extend(files.iter().cloned());
        }
    }
    let md = markdown::render(results, &plots);
    let html = html::render(results, &plots);
    let csv = csv_text(results)?;
    for (name, text) in [
        ("report.md", md),
        ("report.html", html),
        ("results.csv", csv),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, text)?;
        written.push(path);
    }
    Ok(written)
}

/// Every raw round as CSV: experiment, case, system, system kind, round, seq, metric,
/// value.
///
/// # Errors
/// Serialising failed (never for well-formed results).
pub fn csv_text(results: &Results) -> io::Result<String> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record([
        "experiment",
        "case",
        "system",
        "kind",
        "engine_only",
        "round",
        "seq",
        "metric",
        "value",
    ])
    .map_err(io::Error::other)?;
    for r in &results.experiments {
        for m in &r.measurements {
            let sys = r.system(&m.system);
            let kind = sys.map_or("".into(), |s| format!("{:?}", s.kind).to_lowercase());
            let engine = sys.is_some_and(|s| s.engine_only).to_string();
            for (k, v) in &m.metrics {
                w.write_record([
                    r.name.as_str(),
                    &m.case,
                    &m.system,
                    &kind,
                    &engine,
                    &m.round.to_string(),
                    &m.seq.to_string(),
                    k,
                    &v.to_string(),
                ])
                .map_err(io::Error::other)?;
            }
        }
    }
    let bytes = w.into_inner().map_err(io::Error::other)?;
    String::from_utf8(bytes).map_err(io::Error::other)
}
