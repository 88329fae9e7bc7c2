//! The report generator fed recorded raw rounds: every summary it prints is checked
//! against the raw values (recomputed here independently), ratios against the medians,
//! and every output file is written (plots included).
#![cfg(feature = "experiments")]

use std::collections::BTreeMap;

use ulnet_bench::report;
use ulnet_bench::results::{
    Case, ExperimentResult, Measurement, Meta, Metric, PlotKind, PlotView, Results, System,
    SystemKind, TableView, View, SCHEMA_VERSION,
};
use ulnet_bench::summary::{Stat, Summary};

fn system(id: &str, kind: SystemKind, engine_only: bool) -> System {
    System {
        id: id.into(),
        label: format!("label of {id}"),
        kind,
        engine_only,
        setup: BTreeMap::from([("mtu".to_owned(), "1500".to_owned())]),
    }
}

/// Rounds as a run records them: (case, system, [values of gbps], [values of cpu]).
fn recorded() -> ExperimentResult {
    let mut r = ExperimentResult::new("toy", "000", "a recorded run");
    r.systems = vec![
        system("kernel", SystemKind::Kernel, false),
        system("ulnet", SystemKind::Ulnet, false),
        system("engine", SystemKind::Ulnet, true),
    ];
    r.cases = vec![
        Case {
            id: "c1".into(),
            label: "case one".into(),
            params: BTreeMap::from([("load".to_owned(), 100.0)]),
        },
        Case {
            id: "c2".into(),
            label: "case two".into(),
            params: BTreeMap::from([("load".to_owned(), 1000.0)]),
        },
    ];
    let raw: [(&str, &str, &[f64], &[f64]); 5] = [
        ("c1", "kernel", &[3.0, 1.0, 2.0], &[0.9, 1.1, 1.0]),
        ("c1", "ulnet", &[4.0, 6.0, 5.0], &[0.5, 0.7, 0.4]),
        ("c1", "engine", &[8.0, 7.0, 9.0, 6.0], &[0.3, 0.3, 0.2, 0.4]),
        ("c2", "kernel", &[10.0, 12.0, 11.0], &[2.0, 2.5, 2.2]),
        ("c2", "ulnet", &[9.0, 9.5, 8.0], &[1.0, 1.2, 1.1]),
    ];
    let mut seq = 0;
    for round in 0..4u32 {
        for (case, sys, gbps, cpu) in raw {
            if let (Some(g), Some(c)) = (gbps.get(round as usize), cpu.get(round as usize)) {
                r.measurements.push(Measurement {
                    case: case.into(),
                    system: sys.into(),
                    round,
                    seq,
                    metrics: BTreeMap::from([
                        ("gbps".to_owned(), *g),
                        ("cpu_s_per_gb".to_owned(), *c),
                    ]),
                });
                seq += 1;
            }
        }
    }
    r.views = vec![
        View::Table(TableView {
            title: "toy table".into(),
            cases: vec![],
            systems: vec![],
            metrics: vec![
                Metric::more("gbps", "goodput (Gb/s)", 2),
                Metric::less("cpu_s_per_gb", "CPU (s/GB)", 3),
            ],
            baselines: vec!["kernel".into()],
            ratio_metric: None,
        }),
        View::Plot(PlotView {
            id: "lines".into(),
            title: "goodput against load".into(),
            kind: PlotKind::Lines,
            cases: vec![],
            systems: vec![],
            x_param: Some("load".into()),
            x_label: "offered load".into(),
            y: Metric::more("gbps", "goodput (Gb/s)", 2),
            y2: Some(Metric::less("cpu_s_per_gb", "CPU (s/GB)", 3)),
            x_log: true,
        }),
        View::Plot(PlotView {
            id: "bars".into(),
            title: "goodput".into(),
            kind: PlotKind::Bars,
            cases: vec![],
            systems: vec![],
            x_param: None,
            x_label: "case".into(),
            y: Metric::more("gbps", "goodput (Gb/s)", 2),
            y2: None,
            x_log: false,
        }),
    ];
    r
}

/// The median, computed here without the crate's code.
fn by_hand(values: &mut [f64]) -> (f64, f64, f64) {
    values.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = values.len();
    let med = if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    };
    (med, values[0], values[n - 1])
}

#[test]
fn every_summary_is_recomputed_from_the_raw_rounds() {
    let r = recorded();
    let s = Summary::of(&r);
    let mut checked = 0;
    for (case, sys, metric, st) in s.iter() {
        let mut raw: Vec<f64> = r
            .measurements
            .iter()
            .filter(|m| m.case == case && m.system == sys)
            .filter_map(|m| m.metrics.get(metric).copied())
            .collect();
        let n = raw.len();
        let (med, min, max) = by_hand(&mut raw);
        assert_eq!(
            st,
            Stat {
                median: med,
                min,
                max,
                n
            },
            "{case}/{sys}/{metric}"
        );
        checked += 1;
    }
    // 5 (case, system) pairs with 2 metrics each.
    assert_eq!(checked, 10);
    // Spot values: an odd and an even count.
    assert_eq!(s.median("c1", "kernel", "gbps"), Some(2.0));
    assert_eq!(s.median("c1", "engine", "gbps"), Some(7.5));
    assert_eq!(s.ratio("c1", "ulnet", "kernel", "gbps"), Some(2.5));
    assert_eq!(s.ratio("c2", "engine", "kernel", "gbps"), None);
}

#[test]
fn tables_print_medians_extremes_and_ratios_of_medians() {
    let r = recorded();
    let s = Summary::of(&r);
    let t = &report::tables(&r, &s)[0];
    assert_eq!(
        t.header,
        [
            "case",
            "system",
            "rounds",
            "goodput (Gb/s) median (min–max)",
            "CPU (s/GB) median (min–max)",
            "÷ label of kernel (goodput (Gb/s))"
        ]
    );
    let row = |case: &str, sys: &str| {
        t.rows
            .iter()
            .find(|r| r[0] == case && r[1] == sys)
            .unwrap_or_else(|| panic!("row {case}/{sys} in {:?}", t.rows))
            .clone()
    };
    assert_eq!(
        row("case one", "label of ulnet"),
        [
            "case one",
            "label of ulnet",
            "3",
            "5.00 (4.00–6.00)",
            "0.500 (0.400–0.700)",
            "2.50x"
        ]
    );
    assert_eq!(row("case one", "label of kernel")[5], "1");
    assert_eq!(
        row("case one", "label of engine [engine only]")[3],
        "7.50 (6.00–9.00)"
    );
    // 9.0 / 11.0
    assert_eq!(row("case two", "label of ulnet")[5], "0.82x");
    // No engine rounds on case two: no row.
    assert_eq!(t.rows.len(), 5);
    let md = t.to_markdown();
    assert!(md.contains("| case one | label of ulnet | 3 | 5.00 (4.00–6.00) |"));
}

#[test]
fn every_output_file_is_written_and_the_json_round_trips() {
    let results = Results {
        schema: SCHEMA_VERSION,
        meta: Meta {
            started: "2026-11-24T00:00:00Z".into(),
            commit: "abc".into(),
            ..Meta::default()
        },
        experiments: vec![recorded()],
    };
    let text = serde_json::to_string_pretty(&results).unwrap();
    let back: Results = serde_json::from_str(&text).unwrap();
    assert_eq!(back, results);

    let dir = std::env::temp_dir().join(format!("ulnet-report-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let files = report::write(&results, &dir).expect("report written");
    for name in [
        "report.md",
        "report.html",
        "results.csv",
        "plots/toy-lines.svg",
        "plots/toy-lines.png",
        "plots/toy-bars.svg",
        "plots/toy-bars.png",
    ] {
        let p = dir.join(name);
        assert!(files.contains(&p), "{name} not among {files:?}");
        assert!(
            std::fs::metadata(&p).unwrap().len() > 100,
            "{name} is empty"
        );
    }
    let png = std::fs::read(dir.join("plots/toy-bars.png")).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    // Plots inline, so the page needs nothing else.
    assert_eq!(html.matches("<svg").count(), 2);
    assert!(!html.contains("http://") && !html.contains("https://") || html.contains("xmlns"));
    assert!(html.contains("5.00 (4.00–6.00)"));
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(md.contains("![goodput against load](plots/toy-lines.svg)"));
    // One CSV row per round and metric, plus the header.
    let csv = std::fs::read_to_string(dir.join("results.csv")).unwrap();
    assert_eq!(
        csv.lines().count(),
        1 + 2 * results.experiments[0].measurements.len()
    );
    assert!(csv.contains("toy,c1,engine,ulnet,true,3,"));
    // ULNET_KEEP_REPORT=1 keeps the files, to look at the plots.
    if std::env::var_os("ULNET_KEEP_REPORT").is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// A run's goal verdicts (issue 11) come first in every report, once per sentence, and
/// a run whose experiments judge none has no such section.
#[test]
fn the_goals_judged_in_a_run_open_the_report() {
    let mut lat = ExperimentResult::new("latency", "-", "round trips");
    for (round, (sys, p50, p99)) in [
        ("kernel-spin", 6.0, 10.0),
        ("ulnet-busy", 4.2, 7.0),
        ("kernel-spin", 6.2, 9.0),
        ("ulnet-busy", 4.4, 9.5),
    ]
    .into_iter()
    .enumerate()
    {
        lat.measurements.push(Measurement {
            case: "tcp".into(),
            system: sys.into(),
            round: round as u32 / 2,
            seq: round as u32,
            metrics: BTreeMap::from([
                ("rtt_p50_us".to_owned(), p50),
                ("rtt_p99_us".to_owned(), p99),
            ]),
        });
    }
    let results = |experiments| Results {
        schema: SCHEMA_VERSION,
        meta: Meta::default(),
        experiments,
    };
    let with = results(vec![recorded(), lat]);
    // Paired rounds: p50 0.70x and 0.71x, p99 0.70x and 1.06x.
    let line = "TCP: ulnet busy-poll vs kernel spinning: p50 0.70x, p99 0.88x the kernel's, the median of the rounds' own ratios; the goal of ≤ 0.75x (p50 and p99) is not met; the ratio of the medians: p50 0.70x, p99 0.87x.";
    assert_eq!(report::goals(&with), [("latency", line.to_owned())]);

    let dir = std::env::temp_dir().join(format!("ulnet-report-goals-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    report::write(&with, &dir).expect("report written");
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    let section = md
        .find("## The project's goals in this run")
        .expect("no goals section");
    assert!(section < md.find("## toy").unwrap(), "the goals come first");
    assert!(md.contains(&format!("- **latency**: {line}\n")));
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("<h2>The project's goals in this run</h2>"));
    let _ = std::fs::remove_dir_all(&dir);
    let text = report::terminal(&with);
    assert!(text.ends_with(&format!("latency: {line}\n")), "{text}");

    let without = results(vec![recorded()]);
    assert!(report::goals(&without).is_empty());
    assert!(!report::terminal(&without).contains("goals in this run"));
}
