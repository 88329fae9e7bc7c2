//! `report.html`: self-contained (inline CSS, every plot inline as SVG), so it opens in a
//! browser with no network and can be mailed as one file.

use super::plot::Drawn;
use super::{goals, key_values, seed_figure, tables, verdict, GOALS_INTRO};
use crate::results::Results;
use crate::summary::Summary;

/// Escapes text for HTML.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The seed's Markdown figure as HTML: pipe tables become tables, other lines paragraphs
/// (the figures are simple; no general Markdown is needed).
fn seed_html(md: &str) -> String {
    let mut out = String::new();
    let mut in_table = false;
    let mut header_done = false;
    for line in md.lines() {
        let t = line.trim();
        if t.starts_with('|') {
            let cells: Vec<&str> = t.trim_matches('|').split('|').map(str::trim).collect();
            if cells
                .iter()
                .all(|c| c.chars().all(|ch| ch == '-' || ch == ':'))
            {
                continue;
            }
            if !in_table {
                out.push_str("<table>");
                in_table = true;
                header_done = false;
            }
            let tag = if header_done { "td" } else { "th" };
            header_done = true;
            out.push_str("<tr>");
            for c in cells {
                out.push_str(&format!("<{tag}>{}</{tag}>", esc(c)));
            }
            out.push_str("</tr>");
        } else {
            if in_table {
                out.push_str("</table>");
                in_table = false;
            }
            if !t.is_empty() {
                let t = t.trim_start_matches('>').trim();
                out.push_str(&format!("<p>{}</p>", esc(t)));
            }
        }
    }
    if in_table {
        out.push_str("</table>");
    }
    out
}

const STYLE: &str =
    "body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:0.9em}
th,td{border:1px solid #bbb;padding:3px 8px;text-align:right}
th{background:#eee}td:first-child,th:first-child{text-align:left}
.seed{background:#f6f3e8;border-left:4px solid #c9b458;padding:0.3em 1em}
.verdict{background:#e8f0f8;border-left:4px solid #4a78b0;padding:0.5em 1em}
.error{color:#a00}.plot svg{max-width:100%;height:auto}
code{background:#f2f2f2;padding:0 3px}";

/// The HTML report.
pub fn render(results: &Results, plots: &[Drawn]) -> String {
    let m = &results.meta;
    let mut s = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>ulnet bench report</title><style>{STYLE}</style></head><body>\n<h1>ulnet bench report</h1>\n<ul>"
    );
    for (k, v) in [
        ("started", format!("{} ({:.0} s)", m.started, m.elapsed_s)),
        (
            "profile",
            format!("{}, {} rounds per system", m.profile, m.rounds),
        ),
        ("commit", m.commit.clone()),
        ("kernel", m.kernel.clone()),
        ("CPU", format!("{} ({} cores)", m.cpu_model, m.cores)),
        ("pinning", m.pinning.clone()),
        ("command", m.command.clone()),
    ]
    .into_iter()
    .chain(m.extra.iter().map(|(k, v)| (k.as_str(), v.clone())))
    {
        s.push_str(&format!("<li><b>{}</b>: {}</li>", esc(k), esc(&v)));
    }
    s.push_str("</ul><p>Every figure is the median of the rounds, with the minimum and maximum in brackets; ratios are of medians from the same run, systems alternating round by round. Raw rounds: <code>results.json</code>, <code>results.csv</code>.</p>\n");
    let goals = goals(results);
    if !goals.is_empty() {
        s.push_str(&format!(
            "<h2>The project's goals in this run</h2><p>{}</p><div class=\"verdict\"><ul>",
            esc(GOALS_INTRO)
        ));
        for (name, line) in goals {
            s.push_str(&format!(
                "<li><a href=\"#{0}\">{0}</a>: {1}</li>",
                esc(name),
                esc(&line)
            ));
        }
        s.push_str("</ul></div>\n");
    }
    s.push_str("<h2>Contents</h2><ul>");
    for r in &results.experiments {
        s.push_str(&format!(
            "<li><a href=\"#{0}\">{0}</a>: {1}</li>",
            esc(&r.name),
            esc(&r.title)
        ));
    }
    s.push_str("</ul>\n");
    for r in &results.experiments {
        let sum = Summary::of(r);
        s.push_str(&format!(
            "<h2 id=\"{}\">{} — {} (seed {})</h2>\n",
            esc(&r.name),
            esc(&r.name),
            esc(&r.title),
            esc(&r.seed)
        ));
        let seed = seed_figure(r);
        if !seed.is_empty() {
            s.push_str(&format!(
                "<div class=\"seed\"><h3>The seed's figure</h3>{}</div>\n",
                seed_html(seed)
            ));
        }
        let v = verdict(r, &sum);
        if !v.is_empty() {
            s.push_str("<div class=\"verdict\">");
            for line in v {
                s.push_str(&format!("<p>{}</p>", esc(&line)));
            }
            s.push_str("</div>\n");
        }
        for t in tables(r, &sum) {
            s.push_str(&format!("<h3>{}</h3><table><tr>", esc(&t.title)));
            for h in &t.header {
                s.push_str(&format!("<th>{}</th>", esc(h)));
            }
            s.push_str("</tr>");
            for row in &t.rows {
                s.push_str("<tr>");
                for c in row {
                    s.push_str(&format!("<td>{}</td>", esc(c)));
                }
                s.push_str("</tr>");
            }
            s.push_str("</table>\n");
        }
        for p in plots.iter().filter(|p| p.experiment == r.name) {
            match &p.files {
                Ok(_) => s.push_str(&format!(
                    "<figure class=\"plot\">{}<figcaption>{} (<a href=\"plots/{}.png\">PNG</a>)</figcaption></figure>\n",
                    p.svg,
                    esc(&p.title),
                    esc(&p.stem)
                )),
                Err(e) => s.push_str(&format!(
                    "<p class=\"error\">Plot {} could not be drawn: {}</p>",
                    esc(&p.title),
                    esc(e)
                )),
            }
        }
        if !r.systems.is_empty() {
            s.push_str("<h3>Systems</h3><ul>");
            for sys in &r.systems {
                let setup = key_values(&sys.setup);
                s.push_str(&format!(
                    "<li><b>{}</b> (<code>{}</code>): {}</li>",
                    esc(&sys.label),
                    esc(&sys.id),
                    esc(&setup)
                ));
            }
            s.push_str("</ul>");
        }
        if !r.params.is_empty() {
            let p = key_values(&r.params);
            s.push_str(&format!("<p>Parameters: <code>{}</code></p>", esc(&p)));
        }
        if !r.notes.is_empty() {
            s.push_str("<ul>");
            for n in &r.notes {
                s.push_str(&format!("<li>{}</li>", esc(n)));
            }
            s.push_str("</ul>");
        }
        for e in &r.errors {
            s.push_str(&format!("<p class=\"error\">error: {}</p>", esc(e)));
        }
        s.push_str(&format!("<p><small>{:.0} s</small></p>\n", r.elapsed_s));
    }
    s.push_str("</body></html>\n");
    s
}
