//! The report's charts: line charts over simulation time, drawn by plotters as SVG text to
//! inline in the page (no file, no font, no script: the page opens offline). Coordinates
//! are `f64` for drawing only; every figure the report states is a decimal.

use plotters::prelude::*;

/// One line: its legend, colour and (time ms, value) points.
pub struct Line<'a> {
    pub label: &'a str,
    pub color: RGBColor,
    pub points: Vec<(i64, f64)>,
}

/// Marks drawn as dots on the chart: liquidations, notices.
pub struct Marks<'a> {
    pub label: &'a str,
    pub color: RGBColor,
    pub points: Vec<(i64, f64)>,
}

pub const INDEX: RGBColor = RGBColor(31, 119, 180);
pub const MARK: RGBColor = RGBColor(255, 127, 14);
pub const LIQUIDATION: RGBColor = RGBColor(214, 39, 40);
pub const NOTICE: RGBColor = RGBColor(148, 103, 189);
pub const EQUITY: RGBColor = RGBColor(44, 160, 44);

const WIDTH: u32 = 720;
const HEIGHT: u32 = 260;

/// A chart as SVG text; `start` is the time axis' origin (labels show hours from it).
pub fn chart(title: &str, start: i64, end: i64, lines: &[Line], marks: &[Marks]) -> String {
    let mut svg = String::new();
    let drawn = {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        // Drawing into a string cannot fail for I/O: only data no chart can show fails (a
        // summary reads reports from files), and then the chart is left out, not the page.
        draw(&root, title, start, end, lines, marks).is_ok() && root.present().is_ok()
    };
    if !drawn {
        svg.clear();
    }
    svg
}

fn draw(
    root: &DrawingArea<SVGBackend, plotters::coord::Shift>,
    title: &str,
    start: i64,
    end: i64,
    lines: &[Line],
    marks: &[Marks],
) -> Result<(), Box<dyn std::error::Error + 'static>> {
    root.fill(&WHITE)?;
    let values = lines
        .iter()
        .flat_map(|l| &l.points)
        .chain(marks.iter().flat_map(|m| &m.points))
        .map(|p| p.1);
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    let (lo, hi) = match lo.is_finite() && hi.is_finite() {
        true if hi > lo => (lo - (hi - lo) * 0.05, hi + (hi - lo) * 0.05),
        true => (lo - 1.0, hi + 1.0),
        false => (0.0, 1.0),
    };
    let hours = |ms: i64| (ms - start) as f64 / 3_600_000.0;
    let mut c = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 16))
        .margin(8)
        .x_label_area_size(28)
        .y_label_area_size(72)
        .build_cartesian_2d(0.0..hours(end).max(1e-9), lo..hi)?;
    c.configure_mesh()
        .x_desc("hours from start")
        .light_line_style(WHITE.mix(0.0))
        .draw()?;
    for l in lines {
        let color = l.color;
        c.draw_series(LineSeries::new(
            l.points.iter().map(|(t, v)| (hours(*t), *v)),
            color.stroke_width(2),
        ))?
        .label(l.label)
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2)));
    }
    for m in marks.iter().filter(|m| !m.points.is_empty()) {
        let color = m.color;
        c.draw_series(
            m.points
                .iter()
                .map(|(t, v)| Circle::new((hours(*t), *v), 3, color.filled())),
        )?
        .label(m.label)
        .legend(move |(x, y)| Circle::new((x + 8, y), 3, color.filled()));
    }
    c.configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}
