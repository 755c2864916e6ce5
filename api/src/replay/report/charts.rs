//! The report's charts: line charts over simulation time, drawn by plotters as SVG text to
//! inline in the page (no file, no font, no script: the page opens offline). Coordinates
//! are `f64` for drawing only; every figure the report states is a decimal.

use plotters::prelude::*;

/// One line: its legend, colour and (time ms, value) points; dashed to tell it from a solid
/// line it may lie on (the mark on the index).
pub struct Line<'a> {
    pub label: &'a str,
    pub color: RGBColor,
    pub points: Vec<(i64, f64)>,
    pub dashed: bool,
}

/// Events drawn as dots (or triangles) on the chart: liquidations, ADL fills, notices.
pub struct Marks<'a> {
    pub label: &'a str,
    pub color: RGBColor,
    pub points: Vec<(i64, f64)>,
    pub triangle: bool,
}

/// A level drawn dashed across the chart: a threshold.
pub struct Level<'a> {
    pub label: &'a str,
    pub color: RGBColor,
    pub value: f64,
}

/// What a chart shows: its title, what its y axis measures (with the unit), its lines,
/// marks and levels.
pub struct Chart<'a> {
    pub title: String,
    pub y: String,
    pub lines: Vec<Line<'a>>,
    pub marks: Vec<Marks<'a>>,
    pub levels: Vec<Level<'a>>,
}

pub const INDEX: RGBColor = RGBColor(31, 119, 180);
pub const MARK: RGBColor = RGBColor(255, 127, 14);
pub const LIQUIDATION: RGBColor = RGBColor(214, 39, 40);
pub const DELEVERAGING: RGBColor = RGBColor(140, 86, 75);
pub const NOTICE: RGBColor = RGBColor(148, 103, 189);
pub const EQUITY: RGBColor = RGBColor(44, 160, 44);
pub const MARGIN_CALL: RGBColor = RGBColor(255, 127, 14);
pub const FUNDING: RGBColor = RGBColor(23, 190, 207);

const WIDTH: u32 = 720;
const HEIGHT: u32 = 260;

/// `chart` as SVG text over `start..end` (the time axis shows hours from `start`).
pub fn chart(chart: &Chart, (start, end): (i64, i64)) -> String {
    let mut svg = String::new();
    let drawn = {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        // Drawing into a string cannot fail for I/O: only data no chart can show fails (a
        // summary reads reports from files), and then the chart is left out, not the page.
        draw(&root, chart, (start, end)).is_ok() && root.present().is_ok()
    };
    if !drawn {
        svg.clear();
    }
    svg
}

/// The y range that shows every point and level, with a margin.
fn y_range(chart: &Chart) -> (f64, f64) {
    let values = chart
        .lines
        .iter()
        .flat_map(|l| &l.points)
        .chain(chart.marks.iter().flat_map(|m| &m.points))
        .map(|p| p.1)
        .chain(chart.levels.iter().map(|l| l.value));
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    match lo.is_finite() && hi.is_finite() {
        true if hi > lo => (lo - (hi - lo) * 0.05, hi + (hi - lo) * 0.05),
        true => (lo - 1.0, hi + 1.0),
        false => (0.0, 1.0),
    }
}

type Area<'b> = DrawingArea<SVGBackend<'b>, plotters::coord::Shift>;

fn draw(
    root: &Area,
    chart: &Chart,
    (start, end): (i64, i64),
) -> Result<(), Box<dyn std::error::Error>> {
    root.fill(&WHITE)?;
    let (lo, hi) = y_range(chart);
    let hours = |ms: i64| (ms - start) as f64 / 3_600_000.0;
    let span = hours(end).max(1e-9);
    let mut c = ChartBuilder::on(root)
        .caption(&chart.title, ("sans-serif", 16))
        .margin(8)
        .x_label_area_size(32)
        .y_label_area_size(80)
        .build_cartesian_2d(0.0..span, lo..hi)?;
    c.configure_mesh()
        .x_desc("hours from start")
        .y_desc(&chart.y)
        .light_line_style(WHITE.mix(0.0))
        .draw()?;
    for level in &chart.levels {
        let style = level.color.stroke_width(1);
        let points = [(0.0, level.value), (span, level.value)];
        c.draw_series(DashedLineSeries::new(points, 6, 4, style))?
            .label(level.label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], style));
    }
    for l in &chart.lines {
        let points = l.points.iter().map(|(t, v)| (hours(*t), *v));
        let style = l.color.stroke_width(if l.dashed { 1 } else { 2 });
        let drawn = match l.dashed {
            true => c.draw_series(DashedLineSeries::new(points, 4, 3, style))?,
            false => c.draw_series(LineSeries::new(points, style))?,
        };
        drawn
            .label(l.label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], style));
    }
    for m in chart.marks.iter().filter(|m| !m.points.is_empty()) {
        let style = m.color.filled();
        let at = |&(t, v): &(i64, f64)| (hours(t), v);
        let drawn = match m.triangle {
            true => c.draw_series(
                m.points
                    .iter()
                    .map(|p| TriangleMarker::new(at(p), 5, style)),
            )?,
            false => c.draw_series(m.points.iter().map(|p| Circle::new(at(p), 3, style)))?,
        };
        drawn
            .label(m.label)
            .legend(move |(x, y)| Circle::new((x + 8, y), 3, style));
    }
    c.configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}
