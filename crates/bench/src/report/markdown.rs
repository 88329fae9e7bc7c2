//! `report.md`.

use super::plot::Drawn;
use super::{goals, key_values, seed_figure, tables, verdict, GOALS_INTRO};
use crate::results::Results;
use crate::summary::Summary;

/// The Markdown report.
pub fn render(results: &Results, plots: &[Drawn]) -> String {
    let m = &results.meta;
    let mut s = String::from("# ulnet bench report\n\n");
    s.push_str(&format!(
        "- started {} ({:.0} s), profile `{}`, {} rounds per system\n- commit `{}`, kernel {}, {} ({} cores)\n- pinning: {}\n- command: `{}`\n",
        m.started, m.elapsed_s, m.profile, m.rounds, m.commit, m.kernel, m.cpu_model, m.cores, m.pinning, m.command
    ));
    for (k, v) in &m.extra {
        s.push_str(&format!("- {k}: {v}\n"));
    }
    s.push_str("\nEvery figure is the median of the rounds, with the minimum and maximum in brackets; ratios are of medians from the same run, systems alternating round by round. Raw rounds: `results.json`, `results.csv`.\n");
    let goals = goals(results);
    if !goals.is_empty() {
        s.push_str(&format!(
            "\n## The project's goals in this run\n\n{GOALS_INTRO}\n\n"
        ));
        for (name, line) in goals {
            s.push_str(&format!("- **{name}**: {line}\n"));
        }
    }
    for r in &results.experiments {
        let sum = Summary::of(r);
        s.push_str(&format!(
            "\n## {} — {} (seed {})\n\n",
            r.name, r.title, r.seed
        ));
        let seed = seed_figure(r);
        if !seed.is_empty() {
            s.push_str("### The seed's figure\n\n");
            s.push_str(seed);
            s.push_str("\n\n### Here\n\n");
        }
        for v in verdict(r, &sum) {
            s.push_str(&format!("> {v}\n>\n"));
        }
        s.push('\n');
        for t in tables(r, &sum) {
            s.push_str(&t.to_markdown());
            s.push('\n');
        }
        for p in plots.iter().filter(|p| p.experiment == r.name) {
            match &p.files {
                Ok(_) => s.push_str(&format!(
                    "![{}](plots/{}.svg) ([PNG](plots/{}.png))\n\n",
                    p.title, p.stem, p.stem
                )),
                Err(e) => s.push_str(&format!("Plot *{}* could not be drawn: {e}\n\n", p.title)),
            }
        }
        if !r.systems.is_empty() {
            s.push_str("Systems:\n\n");
            for sys in &r.systems {
                let setup = key_values(&sys.setup);
                s.push_str(&format!("- **{}** (`{}`): {setup}\n", sys.label, sys.id));
            }
            s.push('\n');
        }
        if !r.params.is_empty() {
            s.push_str("Parameters: ");
            s.push_str(&key_values(&r.params));
            s.push_str("\n\n");
        }
        for n in &r.notes {
            s.push_str(&format!("- {n}\n"));
        }
        for e in &r.errors {
            s.push_str(&format!("- **error:** {e}\n"));
        }
        s.push_str(&format!("\n({:.0} s)\n", r.elapsed_s));
    }
    s
}
