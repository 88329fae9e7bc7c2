//! Plots of the summaries with plotters: each [`PlotView`] drawn once as SVG (kept for
//! the HTML report, inline) and once as PNG. Text is laid out with a TrueType font loaded
//! at run time (DejaVu Sans from Debian's fonts-dejavu-core, which scripts/setup.sh
//! installs), rasterised by ab_glyph: no C font libraries are needed.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::results::{ExperimentResult, PlotKind, PlotView, Results, View};
use crate::summary::Summary;

/// Pixel size of every plot.
const SIZE: (u32, u32) = (900, 520);

/// Where the font may be.
const FONT_PATHS: [&str; 4] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
];

/// Series colours, one per system in the order the experiment declared them.
const COLOURS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

/// One plot, drawn or not.
#[derive(Debug, Clone)]
pub struct Drawn {
    /// The experiment.
    pub experiment: String,
    /// `<experiment>-<plot id>`: the file stem.
    pub stem: String,
    /// Title.
    pub title: String,
    /// The SVG text (empty if drawing failed).
    pub svg: String,
    /// The SVG and PNG files written, or why not.
    pub files: Result<Vec<PathBuf>, String>,
}

/// Registers the font once; the error says what to install.
fn font() -> Result<(), String> {
    static FONT: OnceLock<Result<(), String>> = OnceLock::new();
    FONT.get_or_init(|| {
        let path = FONT_PATHS
            .iter()
            .find(|p| Path::new(p).exists())
            .ok_or_else(|| {
                "no TrueType font found (install fonts-dejavu-core; scripts/setup.sh does)"
                    .to_owned()
            })?;
        let bytes = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
        let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
            .map_err(|_| format!("{path}: not a usable font"))
    })
    .clone()
}

/// Draws every plot of every experiment into `dir`.
pub fn draw_all(results: &Results, dir: &Path) -> Vec<Drawn> {
    let mut out = Vec::new();
    for r in &results.experiments {
        let s = Summary::of(r);
        for v in &r.views {
            if let View::Plot(p) = v {
                out.push(draw_one(r, &s, p, dir));
            }
        }
    }
    out
}

/// Draws one plot as SVG and PNG into `dir`.
pub fn draw_one(r: &ExperimentResult, s: &Summary, p: &PlotView, dir: &Path) -> Drawn {
    let stem = format!("{}-{}", r.name, p.id);
    let mut drawn = Drawn {
        experiment: r.name.clone(),
        stem: stem.clone(),
        title: p.title.clone(),
        svg: String::new(),
        files: Err(String::new()),
    };
    drawn.files = (|| {
        font()?;
        let data = PlotData::of(r, s, p);
        if data.series.iter().all(|x| x.points.is_empty()) {
            return Err("no data to plot".to_owned());
        }
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
            draw(&root, p, &data)?;
            root.present().map_err(|e| e.to_string())?;
        }
        let svg_path = dir.join(format!("{stem}.svg"));
        std::fs::write(&svg_path, &svg).map_err(|e| e.to_string())?;
        let png_path = dir.join(format!("{stem}.png"));
        {
            let root = BitMapBackend::new(&png_path, SIZE).into_drawing_area();
            draw(&root, p, &data)?;
            root.present().map_err(|e| e.to_string())?;
        }
        drawn.svg = svg;
        Ok(vec![svg_path, png_path])
    })();
    drawn
}

/// One point: x, and the median, minimum and maximum of y.
#[derive(Debug, Clone, Copy)]
struct Point {
    x: f64,
    med: f64,
    min: f64,
    max: f64,
}

/// One system's points.
#[derive(Debug, Clone)]
struct Series {
    label: String,
    colour: RGBColor,
    points: Vec<Point>,
    /// Points of the second metric, if any.
    points2: Vec<Point>,
}

/// What a plot draws, taken from the summaries.
#[derive(Debug, Clone)]
struct PlotData {
    series: Vec<Series>,
    /// Case labels, for bars.
    case_labels: Vec<String>,
}

impl PlotData {
    fn of(r: &ExperimentResult, s: &Summary, p: &PlotView) -> PlotData {
        let cases: Vec<&str> = if p.cases.is_empty() {
            r.cases.iter().map(|c| c.id.as_str()).collect()
        } else {
            p.cases.iter().map(String::as_str).collect()
        };
        let systems: Vec<(usize, &str)> = r
            .systems
            .iter()
            .enumerate()
            .filter(|(_, sys)| p.systems.is_empty() || p.systems.contains(&sys.id))
            .map(|(i, sys)| (i, sys.id.as_str()))
            .collect();
        let x_of = |i: usize, case: &str| -> Option<f64> {
            match (&p.kind, &p.x_param) {
                (PlotKind::Lines, Some(k)) => {
                    let x = *r.case(case)?.params.get(k)?;
                    if p.x_log {
                        (x > 0.0).then(|| x.log10())
                    } else {
                        Some(x)
                    }
                }
                _ => Some(i as f64),
            }
        };
        let points = |sys: &str, metric: &str| -> Vec<Point> {
            let mut v: Vec<Point> = cases
                .iter()
                .enumerate()
                .filter_map(|(i, c)| {
                    let st = s.get(c, sys, metric)?;
                    Some(Point {
                        x: x_of(i, c)?,
                        med: st.median,
                        min: st.min,
                        max: st.max,
                    })
                })
                .collect();
            v.sort_by(|a, b| a.x.total_cmp(&b.x));
            v
        };
        let series = systems
            .iter()
            .map(|(i, id)| {
                let sys = r.system(id).expect("listed system");
                let label = if sys.engine_only {
                    format!("{} [engine only]", sys.label)
                } else {
                    sys.label.clone()
                };
                Series {
                    label,
                    colour: COLOURS[i % COLOURS.len()],
                    points: points(id, &p.y.key),
                    points2: p.y2.as_ref().map_or_else(Vec::new, |m| points(id, &m.key)),
                }
            })
            .filter(|s| !s.points.is_empty() || !s.points2.is_empty())
            .collect();
        PlotData {
            series,
            case_labels: cases
                .iter()
                .map(|c| r.case(c).map_or((*c).to_owned(), |x| x.label.clone()))
                .collect(),
        }
    }

    fn y_max(&self, second: bool) -> f64 {
        let m = self
            .series
            .iter()
            .flat_map(|s| if second { &s.points2 } else { &s.points })
            .map(|p| p.max.max(p.med))
            .fold(0.0f64, f64::max);
        if m > 0.0 {
            m * 1.1
        } else {
            1.0
        }
    }
}

/// An axis label: large values with a k/M suffix, small ones with a few digits.
fn axis_number(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if a >= 100.0 || a == 0.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

fn e2s<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    p: &PlotView,
    d: &PlotData,
) -> Result<(), String> {
    root.fill(&WHITE).map_err(e2s)?;
    match p.kind {
        PlotKind::Lines => draw_lines(root, p, d),
        PlotKind::Bars => draw_bars(root, p, d),
    }
}

fn draw_lines<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    p: &PlotView,
    d: &PlotData,
) -> Result<(), String> {
    let xs = d
        .series
        .iter()
        .flat_map(|s| s.points.iter().chain(&s.points2))
        .map(|p| p.x);
    let (mut x0, mut x1) = xs.fold((f64::MAX, f64::MIN), |(a, b), x| (a.min(x), b.max(x)));
    if x0 >= x1 {
        x0 -= 1.0;
        x1 += 1.0;
    }
    let pad = (x1 - x0) * 0.03;
    let (x0, x1) = (x0 - pad, x1 + pad);
    let has2 = p.y2.is_some();
    let mut chart = ChartBuilder::on(root)
        .caption(&p.title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .right_y_label_area_size(if has2 { 70 } else { 0 })
        .build_cartesian_2d(x0..x1, 0f64..d.y_max(false))
        .map_err(e2s)?
        .set_secondary_coord(x0..x1, 0f64..d.y_max(true));
    let log = p.x_log;
    let xfmt = move |v: &f64| {
        let v = if log { 10f64.powf(*v) } else { *v };
        if v.abs() >= 100.0 || v == v.round() {
            format!("{v:.0}")
        } else {
            format!("{v:.2}")
        }
    };
    chart
        .configure_mesh()
        .x_desc(p.x_label.as_str())
        .y_desc(p.y.label.as_str())
        .x_label_formatter(&xfmt)
        .y_label_formatter(&|v| axis_number(*v))
        .draw()
        .map_err(e2s)?;
    if let Some(y2) = &p.y2 {
        chart
            .configure_secondary_axes()
            .y_desc(format!("{} (dashed)", y2.label))
            .draw()
            .map_err(e2s)?;
    }
    for s in &d.series {
        let c = s.colour;
        let pts: Vec<(f64, f64)> = s.points.iter().map(|p| (p.x, p.med)).collect();
        chart
            .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))
            .map_err(e2s)?
            .label(s.label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
        chart
            .draw_series(pts.iter().map(|&(x, y)| Circle::new((x, y), 3, c.filled())))
            .map_err(e2s)?;
        chart
            .draw_series(
                s.points
                    .iter()
                    .filter(|p| p.max > p.min)
                    .map(|p| ErrorBar::new_vertical(p.x, p.min, p.med, p.max, c, 6)),
            )
            .map_err(e2s)?;
        if has2 {
            let pts2: Vec<(f64, f64)> = s.points2.iter().map(|p| (p.x, p.med)).collect();
            chart
                .draw_secondary_series(DashedLineSeries::new(pts2, 6, 4, c.stroke_width(1)))
                .map_err(e2s)?;
        }
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(e2s)?;
    Ok(())
}

fn draw_bars<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    p: &PlotView,
    d: &PlotData,
) -> Result<(), String> {
    let n = d.case_labels.len().max(1) as f64;
    let k = d.series.len().max(1) as f64;
    let mut chart = ChartBuilder::on(root)
        .caption(&p.title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(70)
        // Headroom above the tallest bar for the legend.
        .build_cartesian_2d(0f64..n, 0f64..d.y_max(false) * 1.3)
        .map_err(e2s)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .x_desc(p.x_label.as_str())
        .y_desc(p.y.label.as_str())
        .y_label_formatter(&|v| axis_number(*v))
        .draw()
        .map_err(e2s)?;
    let width = 0.8 / k;
    for (j, s) in d.series.iter().enumerate() {
        let c = s.colour;
        let off = 0.1 + width * j as f64;
        chart
            .draw_series(s.points.iter().map(|pt| {
                let x = pt.x + off;
                Rectangle::new([(x, 0.0), (x + width * 0.9, pt.med)], c.filled())
            }))
            .map_err(e2s)?
            .label(s.label.clone())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], c.filled()));
        chart
            .draw_series(s.points.iter().filter(|pt| pt.max > pt.min).map(|pt| {
                let x = pt.x + off + width * 0.45;
                ErrorBar::new_vertical(x, pt.min, pt.med, pt.max, BLACK, 6)
            }))
            .map_err(e2s)?;
    }
    let style = TextStyle::from(("sans-serif", 13).into_font())
        .pos(Pos::new(HPos::Center, VPos::Top))
        .color(&BLACK);
    for (i, label) in d.case_labels.iter().enumerate() {
        let (px, py) = chart.backend_coord(&(i as f64 + 0.5, 0.0));
        root.draw(&Text::new(label.clone(), (px, py + 6), style.clone()))
            .map_err(e2s)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(e2s)?;
    Ok(())
}
