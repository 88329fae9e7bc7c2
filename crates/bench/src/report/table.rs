//! A [`TableView`] rendered from the summaries: one row per case and system, each metric
//! as `median (min–max)`, then the ratio of the row's median to each baseline's on the
//! same case.

use crate::results::{ExperimentResult, SystemKind, TableView};
use crate::summary::Summary;

/// A rendered table.
#[derive(Debug, Clone, PartialEq)]
pub struct Rendered {
    /// Title.
    pub title: String,
    /// Column headers.
    pub header: Vec<String>,
    /// Cells.
    pub rows: Vec<Vec<String>>,
}

impl Rendered {
    /// As a Markdown table with its title above.
    pub fn to_markdown(&self) -> String {
        let mut s = format!("**{}**\n\n", self.title);
        s.push_str(&format!("| {} |\n", self.header.join(" | ")));
        s.push_str(&format!(
            "|{}\n",
            self.header.iter().map(|_| " --- |").collect::<String>()
        ));
        for r in &self.rows {
            s.push_str(&format!("| {} |\n", r.join(" | ")));
        }
        s
    }

    /// As aligned plain text for the terminal.
    pub fn to_text(&self) -> String {
        let cols = self.header.len();
        let mut width = vec![0usize; cols];
        for row in std::iter::once(&self.header).chain(&self.rows) {
            for (i, c) in row.iter().enumerate().take(cols) {
                width[i] = width[i].max(c.chars().count());
            }
        }
        let line = |row: &[String]| {
            row.iter()
                .enumerate()
                .map(|(i, c)| format!("{c:<w$}", w = width[i]))
                .collect::<Vec<_>>()
                .join("  ")
                .trim_end()
                .to_owned()
        };
        let mut s = format!("{}\n{}\n", self.title, line(&self.header));
        s.push_str(&format!(
            "{}\n",
            width
                .iter()
                .map(|w| "-".repeat(*w))
                .collect::<Vec<_>>()
                .join("  ")
        ));
        for r in &self.rows {
            s.push_str(&line(r));
            s.push('\n');
        }
        s
    }
}

/// `v` with `digits` decimals.
pub fn fmt_num(v: f64, digits: u8) -> String {
    format!("{v:.*}", usize::from(digits))
}

/// Renders `t` of `r` from `s`.
pub fn render(r: &ExperimentResult, s: &Summary, t: &TableView) -> Rendered {
    let cases: Vec<&str> = if t.cases.is_empty() {
        r.cases.iter().map(|c| c.id.as_str()).collect()
    } else {
        t.cases.iter().map(String::as_str).collect()
    };
    let systems: Vec<&str> = if t.systems.is_empty() {
        r.systems.iter().map(|c| c.id.as_str()).collect()
    } else {
        t.systems.iter().map(String::as_str).collect()
    };
    let ratio_metric = t
        .ratio_metric
        .clone()
        .or_else(|| t.metrics.first().map(|m| m.key.clone()));
    let show_case = cases.len() > 1;
    let mut header = Vec::new();
    if show_case {
        header.push("case".to_owned());
    }
    header.push("system".to_owned());
    header.push("rounds".to_owned());
    for m in &t.metrics {
        header.push(format!("{} median (min–max)", m.label));
    }
    let label_of = |id: &str| {
        r.system(id).map_or(id.to_owned(), |sys| {
            if sys.engine_only && sys.kind == SystemKind::Ulnet {
                format!("{} [engine only]", sys.label)
            } else {
                sys.label.clone()
            }
        })
    };
    if let Some(rm) = &ratio_metric {
        let rm_label = t
            .metrics
            .iter()
            .find(|m| &m.key == rm)
            .map_or(rm.clone(), |m| m.label.clone());
        for b in &t.baselines {
            header.push(format!("÷ {} ({rm_label})", label_of(b)));
        }
    }
    let mut rows = Vec::new();
    for case in &cases {
        let case_label = r.case(case).map_or(*case, |c| c.label.as_str());
        for sys in &systems {
            let n = t
                .metrics
                .iter()
                .filter_map(|m| s.get(case, sys, &m.key).map(|st| st.n))
                .max();
            let Some(n) = n else { continue };
            let mut row = Vec::new();
            if show_case {
                row.push(case_label.to_owned());
            }
            row.push(label_of(sys));
            row.push(n.to_string());
            for m in &t.metrics {
                row.push(match s.get(case, sys, &m.key) {
                    Some(st) if st.n > 1 => format!(
                        "{} ({}–{})",
                        fmt_num(st.median, m.digits),
                        fmt_num(st.min, m.digits),
                        fmt_num(st.max, m.digits)
                    ),
                    Some(st) => fmt_num(st.median, m.digits),
                    None => "—".into(),
                });
            }
            if let Some(rm) = &ratio_metric {
                for b in &t.baselines {
                    row.push(if b == sys {
                        "1".into()
                    } else {
                        s.ratio(case, sys, b, rm)
                            .map_or("—".into(), |x| format!("{x:.2}x"))
                    });
                }
            }
            rows.push(row);
        }
    }
    Rendered {
        title: t.title.clone(),
        header,
        rows,
    }
}
