//! Generic charts: named series of lines, steps, points, vertical I-beams, free segments,
//! ticks and text markers over two labelled axes with units, with a legend and a caption
//! drawn below the plot (so they never hide data), rendered to SVG text or PNG bytes.
//!
//! The input types are this crate's own plain data so that anything (the analyzer, a demo's
//! probe log) can be drawn. Every series is clipped to the axis ranges here, in data
//! coordinates, before it reaches plotters: a chart with fixed ranges (two runs compared at
//! one scale, or a zoom on one loss episode) shows exactly that window and nothing spills over
//! the axes. This module does not choose what to plot or how to summarise data; callers do.

use crate::bitmap_text::TextFix;
use crate::font::{ensure_registered, FAMILY};
use crate::{write_file, ReportError};
use plotters::coord::Shift;
use plotters::element::{EmptyElement, PathElement, Text};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::Path;

/// A colour as red, green, blue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rgb(pub u8, pub u8, pub u8);

impl Rgb {
    pub const BLACK: Rgb = Rgb(0, 0, 0);
    pub const GREY: Rgb = Rgb(110, 110, 110);
    /// A palette that stays distinguishable for the common colour-vision deficiencies
    /// (Okabe and Ito), without the yellow that vanishes on white.
    pub const PALETTE: [Rgb; 7] = [
        Rgb(0, 114, 178),
        Rgb(213, 94, 0),
        Rgb(0, 158, 115),
        Rgb(204, 121, 167),
        Rgb(230, 159, 0),
        Rgb(86, 180, 233),
        Rgb(0, 0, 0),
    ];

    /// The `i`-th palette colour, cycling.
    pub fn nth(i: usize) -> Rgb {
        Rgb::PALETTE[i % Rgb::PALETTE.len()]
    }

    /// `#rrggbb`, for HTML and CSS.
    pub fn css(self) -> String {
        format!("#{:02x}{:02x}{:02x}", self.0, self.1, self.2)
    }

    fn plotters(self) -> RGBColor {
        RGBColor(self.0, self.1, self.2)
    }
}

/// One axis: what is measured, in which unit, and optionally a fixed range.
#[derive(Clone, Debug, PartialEq)]
pub struct Axis {
    /// The quantity, e.g. "time" or "round-trip time".
    pub quantity: String,
    /// The unit, e.g. "s", "ms", "bytes", "Mbit/s", "%". Always shown in the axis label.
    pub unit: String,
    /// Fixed `(low, high)`; `None` fits the data.
    pub range: Option<(f64, f64)>,
    /// When fitting the data, stretch the range down (or up) to include zero, as rates and
    /// delays read more honestly from a zero baseline.
    pub include_zero: bool,
    /// Named places instead of numbered ticks (the vertical axis of a bar chart: one bar per
    /// run at its value): each name is written beside its value.
    pub categories: Vec<(f64, String)>,
    /// Numbers at the ticks (of the vertical axis); off where the values mean nothing to a
    /// reader (the two hosts of a ladder diagram at 0 and 1).
    pub numbered: bool,
}

impl Axis {
    pub fn new(quantity: impl Into<String>, unit: impl Into<String>) -> Axis {
        Axis {
            quantity: quantity.into(),
            unit: unit.into(),
            range: None,
            include_zero: false,
            categories: Vec::new(),
            numbered: true,
        }
    }

    /// The same axis without numbers at its ticks (drawn for the vertical axis).
    pub fn unnumbered(mut self) -> Axis {
        self.numbered = false;
        self
    }

    /// The same axis with names at these values instead of numbered ticks (drawn for the
    /// vertical axis).
    pub fn categories(mut self, names: Vec<(f64, String)>) -> Axis {
        self.categories = names;
        self
    }

    /// The same axis with a fixed range.
    pub fn with_range(mut self, low: f64, high: f64) -> Axis {
        self.range = Some((low, high));
        self
    }

    /// The same axis, fitted to the data but always including zero.
    pub fn from_zero(mut self) -> Axis {
        self.include_zero = true;
        self
    }

    /// The text under (or beside) the axis: "quantity (unit)", or the quantity alone for an
    /// axis without a unit (categories).
    pub fn label(&self) -> String {
        if self.unit.is_empty() {
            self.quantity.clone()
        } else {
            format!("{} ({})", self.quantity, self.unit)
        }
    }
}

/// The marks of one series, in data coordinates.
#[derive(Clone, Debug, PartialEq)]
pub enum Marks {
    /// A polyline through the points, in the given order.
    Line(Vec<(f64, f64)>),
    /// A staircase: each value holds until the next point's x, then jumps.
    Step(Vec<(f64, f64)>),
    /// A dot at each point.
    Points(Vec<(f64, f64)>),
    /// Vertical bars `(x, y_low, y_high)` with short horizontal caps at both ends: the
    /// time-sequence graph's segment I-beams.
    IBeams(Vec<(f64, f64, f64)>),
    /// Free line segments `((x1, y1), (x2, y2))`.
    Segments(Vec<Segment>),
    /// A short vertical tick just below each point (duplicate ACKs in the time-sequence graph).
    Ticks(Vec<(f64, f64)>),
    /// Text centred just above each point, with a dot at the point (marks on a graph: every
    /// one shows, and text that would print over an earlier one is left out).
    Text(Vec<(f64, f64, String)>),
    /// Text centred just above each point, every one, and nothing else (labels on a chart).
    Labels(Vec<(f64, f64, String)>),
    /// Text starting at each point and just above it, every one: names that read from where
    /// a line starts (the hosts of a ladder diagram, at the left edge).
    Names(Vec<(f64, f64, String)>),
}

impl Marks {
    fn is_empty(&self) -> bool {
        match self {
            Marks::Line(v) | Marks::Step(v) | Marks::Points(v) | Marks::Ticks(v) => v.is_empty(),
            Marks::IBeams(v) => v.is_empty(),
            Marks::Segments(v) => v.is_empty(),
            Marks::Text(v) | Marks::Labels(v) | Marks::Names(v) => v.is_empty(),
        }
    }

    /// Every coordinate the marks touch, for fitting the axes.
    fn extent(&self, xs: &mut Vec<f64>, ys: &mut Vec<f64>) {
        match self {
            Marks::Line(v) | Marks::Step(v) | Marks::Points(v) | Marks::Ticks(v) => {
                for &(x, y) in v {
                    xs.push(x);
                    ys.push(y);
                }
            }
            Marks::IBeams(v) => {
                for &(x, lo, hi) in v {
                    xs.push(x);
                    ys.push(lo);
                    ys.push(hi);
                }
            }
            Marks::Segments(v) => {
                for &((x1, y1), (x2, y2)) in v {
                    xs.extend([x1, x2]);
                    ys.extend([y1, y2]);
                }
            }
            Marks::Text(v) | Marks::Labels(v) | Marks::Names(v) => {
                for (x, y, _) in v {
                    xs.push(*x);
                    ys.push(*y);
                }
            }
        }
    }
}

/// One named series: its marks, colour and line width. The name is its legend entry.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub name: String,
    pub color: Rgb,
    pub stroke_px: u32,
    pub marks: Marks,
    /// Listed in the legend even when it has no marks inside the ranges (so that two charts
    /// compared side by side explain the same colours).
    pub always_in_legend: bool,
}

impl Series {
    pub fn new(name: impl Into<String>, color: Rgb, marks: Marks) -> Series {
        Series {
            name: name.into(),
            color,
            stroke_px: 2,
            marks,
            always_in_legend: false,
        }
    }

    pub fn line(name: impl Into<String>, color: Rgb, points: Vec<(f64, f64)>) -> Series {
        Series::new(name, color, Marks::Line(points))
    }

    pub fn step(name: impl Into<String>, color: Rgb, points: Vec<(f64, f64)>) -> Series {
        Series::new(name, color, Marks::Step(points))
    }

    pub fn scatter(name: impl Into<String>, color: Rgb, points: Vec<(f64, f64)>) -> Series {
        Series::new(name, color, Marks::Points(points))
    }

    /// A horizontal line at `y` from `x.0` to `x.1`: a reference level (a base RTT, a link's
    /// capacity, a limit).
    pub fn hline(name: impl Into<String>, color: Rgb, y: f64, x: (f64, f64)) -> Series {
        Series::line(name, color, vec![(x.0, y), (x.1, y)])
    }

    /// A vertical line at `x` from `y.0` to `y.1`: a reference time or value on the x axis.
    pub fn vline(name: impl Into<String>, color: Rgb, x: f64, y: (f64, f64)) -> Series {
        Series::line(name, color, vec![(x, y.0), (x, y.1)])
    }

    /// A staircase of values that each hold for `width` from their x (per-second rates at
    /// the start of their second): unlike a plain step, the last value is drawn through its
    /// interval too.
    pub fn intervals(
        name: impl Into<String>,
        color: Rgb,
        starts: &[(f64, f64)],
        width: f64,
    ) -> Series {
        let mut points = starts.to_vec();
        if let Some(&(x, y)) = starts.last() {
            points.push((x + width, y));
        }
        Series::step(name, color, points)
    }

    /// The empirical CDF of `samples`: x = sample value, y = percent of samples ≤ x.
    /// Non-finite samples are ignored.
    pub fn cdf(name: impl Into<String>, color: Rgb, samples: &[f64]) -> Series {
        Series::new(name, color, Marks::Step(cdf_points(samples)))
    }

    /// The same series with another line width.
    pub fn stroke(mut self, px: u32) -> Series {
        self.stroke_px = px.max(1);
        self
    }

    /// The same series, listed in the legend even when empty.
    pub fn keep_in_legend(mut self) -> Series {
        self.always_in_legend = true;
        self
    }
}

/// What a chart's SVG (as [`Chart::to_svg`] writes it) says: the content of every `<text>`
/// element in document order, trimmed, entities as written (`&apos;`). For checks that a
/// drawing carries the words it should (titles, labels, captions).
pub fn svg_texts(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .filter_map(|t| {
            let body = &t[t.find('>')? + 1..];
            Some(body[..body.find("</text>")?].trim().to_string())
        })
        .collect()
}

/// Puts charts on one scale: every chart gets the union of their x ranges and of their y
/// ranges, fixed, so that two runs drawn side by side compare by eye.
pub fn same_scale(charts: &mut [Chart]) {
    let mut x = (f64::INFINITY, f64::NEG_INFINITY);
    let mut y = (f64::INFINITY, f64::NEG_INFINITY);
    for c in charts.iter() {
        let (cx, cy) = c.ranges();
        x = (x.0.min(cx.0), x.1.max(cx.1));
        y = (y.0.min(cy.0), y.1.max(cy.1));
    }
    for c in charts.iter_mut() {
        c.x.range = Some(x);
        c.y.range = Some(y);
    }
}

/// A line from one point to another, as [`Marks::Segments`] draws it.
pub type Segment = ((f64, f64), (f64, f64));

/// One horizontal bar at height `y`, from 0 to 100, cut into consecutive segments, one per
/// value, each as wide as the value's share of their sum (%); `None` for a value of no width
/// (zero, or every value zero). The segments of a stacked share bar chart.
pub fn share_bar(values: &[f64], y: f64) -> Vec<Option<Segment>> {
    let total: f64 = values.iter().sum();
    let mut x = 0.0;
    values
        .iter()
        .map(|v| {
            let w = if total > 0.0 { v / total * 100.0 } else { 0.0 };
            let segment = (w > 0.0).then_some(((x, y), (x + w, y)));
            x += w;
            segment
        })
        .collect()
}

/// Staircase points of the empirical CDF, y in percent: it starts at 0 % at the smallest
/// sample and reaches 100 % at the largest.
pub fn cdf_points(samples: &[f64]) -> Vec<(f64, f64)> {
    let mut v: Vec<f64> = samples.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    let n = v.len() as f64;
    let mut out = Vec::with_capacity(v.len() + 1);
    if let Some(&first) = v.first() {
        out.push((first, 0.0));
    }
    for (i, &x) in v.iter().enumerate() {
        out.push((x, 100.0 * (i + 1) as f64 / n));
    }
    out
}

/// What a legend entry shows beside its name: a miniature of the series' marks.
#[derive(Clone, Debug, PartialEq)]
pub enum Swatch {
    Line,
    Dot,
    IBeam,
    Tick,
    /// The series' first text, e.g. "R".
    Text(String),
}

/// One legend entry.
#[derive(Clone, Debug, PartialEq)]
pub struct LegendEntry {
    pub name: String,
    pub color: Rgb,
    pub swatch: Swatch,
}

/// A chart: title, axes, series, caption and pixel size.
#[derive(Clone, Debug, PartialEq)]
pub struct Chart {
    pub title: String,
    /// One sentence saying what to see; drawn under the legend.
    pub caption: String,
    pub x: Axis,
    pub y: Axis,
    pub series: Vec<Series>,
    pub width_px: u32,
    pub height_px: u32,
}

/// Series added in turn, as [`Chart::push`] adds one: one per run, from an iterator.
impl Extend<Series> for Chart {
    fn extend<I: IntoIterator<Item = Series>>(&mut self, series: I) {
        self.series.extend(series);
    }
}

/// An SVG document and where its plot area is, so a page can map mouse positions back to data.
#[derive(Clone, Debug, PartialEq)]
pub struct RenderedSvg {
    pub svg: String,
    /// Pixel rectangle of the plot area: left, top, right, bottom.
    pub plot_area_px: (i32, i32, i32, i32),
    pub x_range: (f64, f64),
    pub y_range: (f64, f64),
}

const TITLE_PX: u32 = 22;
const LABEL_PX: u32 = 14;
const AXIS_DESC_PX: u32 = 16;
const LEGEND_PX: u32 = 14;
const LEGEND_ROW_PX: u32 = 22;

impl Chart {
    /// A 1000×600 chart with no series yet.
    pub fn new(title: impl Into<String>, x: Axis, y: Axis) -> Chart {
        Chart {
            title: title.into(),
            caption: String::new(),
            x,
            y,
            series: Vec::new(),
            width_px: 1000,
            height_px: 600,
        }
    }

    pub fn caption(mut self, caption: impl Into<String>) -> Chart {
        self.caption = caption.into();
        self
    }

    pub fn size(mut self, width_px: u32, height_px: u32) -> Chart {
        self.width_px = width_px;
        self.height_px = height_px;
        self
    }

    pub fn with(mut self, series: Series) -> Chart {
        self.series.push(series);
        self
    }

    pub fn push(&mut self, series: Series) {
        self.series.push(series);
    }

    /// A chart of distributions, for [`Series::cdf`]: `x` the measured quantity, y the share
    /// of `samples` (e.g. "probes") at or below each value, 0 to 100 %.
    pub fn cdf(title: impl Into<String>, x: Axis, samples: &str) -> Chart {
        let y = Axis::new(format!("share of {samples} at or below"), "%").with_range(0.0, 100.0);
        Chart::new(title, x, y)
    }

    /// The x and y ranges the chart will use: the fixed ones, or the data's with a margin.
    pub fn ranges(&self) -> ((f64, f64), (f64, f64)) {
        let mut xs = Vec::new();
        let mut ys = Vec::new();
        for s in &self.series {
            s.marks.extent(&mut xs, &mut ys);
        }
        let x = self
            .x
            .range
            .unwrap_or_else(|| fit(&xs, self.x.include_zero, 0.01));
        let y = self
            .y
            .range
            .unwrap_or_else(|| fit(&ys, self.y.include_zero, 0.05));
        (usable(x), usable(y))
    }

    /// The legend: every series with marks inside the ranges, or marked `always_in_legend`.
    pub fn legend(&self) -> Vec<LegendEntry> {
        let (xr, yr) = self.ranges();
        self.series
            .iter()
            .filter(|s| s.always_in_legend || !clip_marks(&s.marks, xr, yr).is_empty())
            .filter(|s| !s.name.is_empty())
            .map(|s| LegendEntry {
                name: s.name.clone(),
                color: s.color,
                swatch: match &s.marks {
                    Marks::Text(v) | Marks::Labels(v) | Marks::Names(v) => {
                        Swatch::Text(v.first().map_or(String::new(), |t| t.2.clone()))
                    }
                    Marks::Points(_) => Swatch::Dot,
                    Marks::IBeams(_) => Swatch::IBeam,
                    Marks::Ticks(_) => Swatch::Tick,
                    Marks::Line(_) | Marks::Step(_) | Marks::Segments(_) => Swatch::Line,
                },
            })
            .collect()
    }

    /// The chart as a standalone SVG document, caption included.
    pub fn to_svg(&self) -> Result<String, ReportError> {
        Ok(self.render_svg(true)?.svg)
    }

    /// The chart as SVG, with or without the caption drawn in (an HTML figure shows the
    /// caption as text instead), and the plot-area geometry.
    pub fn render_svg(&self, with_caption: bool) -> Result<RenderedSvg, ReportError> {
        ensure_registered();
        let mut svg = String::new();
        let geometry = {
            let root = SVGBackend::with_string(&mut svg, (self.width_px, self.height_px))
                .into_drawing_area();
            let g = self.draw(&root, with_caption)?;
            root.present().map_err(draw_err)?;
            g
        };
        let (plot_area_px, x_range, y_range) = geometry;
        Ok(RenderedSvg {
            svg,
            plot_area_px,
            x_range,
            y_range,
        })
    }

    /// The chart as PNG bytes (8-bit RGB), caption included.
    pub fn to_png(&self) -> Result<Vec<u8>, ReportError> {
        ensure_registered();
        let (w, h) = (self.width_px, self.height_px);
        let mut rgb = vec![0u8; w as usize * h as usize * 3];
        {
            let backend = TextFix::new(BitMapBackend::with_buffer(&mut rgb, (w, h)))
                .ok_or_else(|| ReportError::Draw("embedded font does not parse".into()))?;
            let root = backend.into_drawing_area();
            self.draw(&root, true)?;
            root.present().map_err(draw_err)?;
        }
        encode_png(&rgb, w, h)
    }

    pub fn write_svg(&self, path: &Path) -> Result<(), ReportError> {
        write_file(path, self.to_svg()?.as_bytes())
    }

    pub fn write_png(&self, path: &Path) -> Result<(), ReportError> {
        write_file(path, &self.to_png()?)
    }

    /// Draws everything on `root`; returns the plot area in pixels and the ranges.
    #[allow(clippy::type_complexity)]
    fn draw<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
        with_caption: bool,
    ) -> Result<((i32, i32, i32, i32), (f64, f64), (f64, f64)), ReportError> {
        root.fill(&WHITE).map_err(draw_err)?;
        let (w, h) = root.dim_in_pixel();
        let (xr, yr) = self.ranges();

        let legend = self.legend();
        let legend_rows = layout_legend(root, &legend, w)?;
        let caption_lines = if with_caption && !self.caption.is_empty() {
            wrap_text(root, &self.caption, LEGEND_PX, w.saturating_sub(40))?
        } else {
            Vec::new()
        };
        let rows = legend_rows.iter().map(|r| r.0).max().map_or(0, |m| m + 1);
        let strip_px = rows * LEGEND_ROW_PX + caption_lines.len() as u32 * LEGEND_ROW_PX + 10;
        let (upper, lower) = root.split_vertically(h.saturating_sub(strip_px) as i32);

        // A vertical axis with nothing to write beside it gives its room to the plot.
        let y_bare = !self.y.numbered && self.y.categories.is_empty() && self.y.label().is_empty();
        let mut chart = ChartBuilder::on(&upper)
            .caption(&self.title, (FAMILY, TITLE_PX))
            .margin(14)
            .x_label_area_size(52)
            .y_label_area_size(if y_bare { 6 } else { 86 })
            .build_cartesian_2d(xr.0..xr.1, yr.0..yr.1)
            .map_err(draw_err)?;
        let x_fmt = |v: &f64| short_number(*v, xr.1 - xr.0);
        // Named places are written below, beside each value, not at the numbered ticks; an
        // unnumbered axis has neither.
        let named = !self.y.categories.is_empty() || !self.y.numbered;
        let y_fmt = |v: &f64| {
            if named {
                String::new()
            } else {
                short_number(*v, yr.1 - yr.0)
            }
        };
        chart
            .configure_mesh()
            .x_desc(self.x.label())
            .y_desc(self.y.label())
            .x_label_formatter(&x_fmt)
            .y_label_formatter(&y_fmt)
            .x_labels(10)
            .y_labels(8)
            .label_style((FAMILY, LABEL_PX))
            .axis_desc_style((FAMILY, AXIS_DESC_PX))
            .bold_line_style(RGBColor(215, 215, 215))
            .light_line_style(RGBColor(240, 240, 240))
            .draw()
            .map_err(draw_err)?;

        for s in &self.series {
            draw_series(&mut chart, s, xr, yr)?;
        }

        let (px, py) = chart.plotting_area().get_pixel_range();
        let area = (px.start, py.start, px.end, py.end);
        let name_style = TextStyle::from((FAMILY, LABEL_PX).into_font())
            .pos(Pos::new(HPos::Right, VPos::Center));
        for (value, name) in &self.y.categories {
            if (yr.0..=yr.1).contains(value) {
                let (_, y) = chart.backend_coord(&(xr.0, *value));
                upper
                    .draw(&Text::new(
                        name.clone(),
                        (px.start - 6, y),
                        name_style.clone(),
                    ))
                    .map_err(draw_err)?;
            }
        }

        // Legend and caption, in the strip under the plot.
        let text = TextStyle::from((FAMILY, LEGEND_PX).into_font())
            .pos(Pos::new(HPos::Left, VPos::Center));
        for (entry, &(row, x)) in legend.iter().zip(&legend_rows) {
            let y = (row * LEGEND_ROW_PX + LEGEND_ROW_PX / 2) as i32;
            draw_swatch(&lower, entry, x as i32, y, &text)?;
            lower
                .draw(&Text::new(
                    entry.name.clone(),
                    ((x + SWATCH_PX + 6) as i32, y),
                    text.clone(),
                ))
                .map_err(draw_err)?;
        }
        for (i, line) in caption_lines.iter().enumerate() {
            let y = ((rows + i as u32) * LEGEND_ROW_PX + LEGEND_ROW_PX / 2) as i32;
            lower
                .draw(&Text::new(
                    line.clone(),
                    (20, y),
                    text.clone().color(&RGBColor(60, 60, 60)),
                ))
                .map_err(draw_err)?;
        }
        Ok((area, xr, yr))
    }
}

const SWATCH_PX: u32 = 26;

/// The miniature of a series in the legend, `SWATCH_PX` wide, centred on row height `y`.
fn draw_swatch<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    entry: &LegendEntry,
    x: i32,
    y: i32,
    text: &TextStyle,
) -> Result<(), ReportError> {
    let c = entry.color.plotters();
    let w = SWATCH_PX as i32;
    let line =
        |pts: Vec<(i32, i32)>, px: u32| area.draw(&PathElement::new(pts, c.stroke_width(px)));
    match &entry.swatch {
        Swatch::Line => line(vec![(x, y), (x + w, y)], 3),
        Swatch::Dot => area.draw(&Circle::new((x + w / 2, y), 4, c.filled())),
        Swatch::IBeam => {
            let m = x + w / 2;
            line(vec![(m, y - 8), (m, y + 8)], 2)
                .and_then(|_| line(vec![(m - 4, y - 8), (m + 4, y - 8)], 2))
                .and_then(|_| line(vec![(m - 4, y + 8), (m + 4, y + 8)], 2))
        }
        Swatch::Tick => line(vec![(x + 6, y - 6), (x + 6, y + 6)], 2)
            .and_then(|_| line(vec![(x + 13, y - 6), (x + 13, y + 6)], 2))
            .and_then(|_| line(vec![(x + 20, y - 6), (x + 20, y + 6)], 2)),
        Swatch::Text(t) => area.draw(&Text::new(t.clone(), (x, y), text.clone().color(&c))),
    }
    .map_err(draw_err)
}

/// Places legend entries left to right, wrapping; returns (row, x) per entry.
fn layout_legend<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    legend: &[LegendEntry],
    width_px: u32,
) -> Result<Vec<(u32, u32)>, ReportError> {
    let style = TextStyle::from((FAMILY, LEGEND_PX).into_font());
    let mut out = Vec::with_capacity(legend.len());
    let (mut row, mut x) = (0u32, 20u32);
    for e in legend {
        let (tw, _) = root.estimate_text_size(&e.name, &style).map_err(draw_err)?;
        let entry_px = SWATCH_PX + 6 + tw + 24;
        if x > 20 && x + entry_px > width_px.saturating_sub(10) {
            row += 1;
            x = 20;
        }
        out.push((row, x));
        x += entry_px;
    }
    Ok(out)
}

/// Greedy word wrap to `width_px` (at most three lines; the rest is cut with an ellipsis).
fn wrap_text<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    text: &str,
    size_px: u32,
    width_px: u32,
) -> Result<Vec<String>, ReportError> {
    let style = TextStyle::from((FAMILY, size_px).into_font());
    let mut lines: Vec<String> = Vec::new();
    let mut cur = String::new();
    for word in text.split_whitespace() {
        let candidate = if cur.is_empty() {
            word.to_string()
        } else {
            format!("{cur} {word}")
        };
        let (tw, _) = root
            .estimate_text_size(&candidate, &style)
            .map_err(draw_err)?;
        if tw > width_px && !cur.is_empty() {
            lines.push(std::mem::replace(&mut cur, word.to_string()));
        } else {
            cur = candidate;
        }
    }
    if !cur.is_empty() {
        lines.push(cur);
    }
    if lines.len() > 3 {
        lines.truncate(3);
        lines[2].push_str(" …");
    }
    Ok(lines)
}

type Ctx<'a, DB> = ChartContext<
    'a,
    DB,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

fn draw_series<DB: DrawingBackend>(
    chart: &mut Ctx<'_, DB>,
    s: &Series,
    xr: (f64, f64),
    yr: (f64, f64),
) -> Result<(), ReportError> {
    let c = s.color.plotters();
    let style = c.stroke_width(s.stroke_px);
    // Text centred just above a point, in the series' colour (`Text` and `Labels`).
    let text_style = TextStyle::from((FAMILY, 13).into_font())
        .color(&c)
        .pos(Pos::new(HPos::Center, VPos::Bottom));
    let label = |at: (f64, f64), t: String| {
        EmptyElement::at(at) + Text::new(t, (0, -3), text_style.clone())
    };
    match clip_marks(&s.marks, xr, yr) {
        Marks::Line(_) | Marks::Step(_) => unreachable!("clip_marks turns lines into segments"),
        Marks::Segments(v) => {
            // Consecutive segments that share an end become one polyline: fewer SVG elements.
            let mut paths: Vec<Vec<(f64, f64)>> = Vec::new();
            for (a, b) in v {
                match paths.last_mut() {
                    Some(p) if p.last() == Some(&a) => p.push(b),
                    _ => paths.push(vec![a, b]),
                }
            }
            chart
                .draw_series(paths.into_iter().map(|p| PathElement::new(p, style)))
                .map_err(draw_err)?;
        }
        Marks::Points(v) => {
            // A dot per pixel is all that shows; tens of thousands of RTT samples on one
            // pixel row would otherwise make megabytes of identical SVG circles.
            let r = s.stroke_px.max(2) as i32;
            let mut seen = std::collections::HashSet::new();
            let dots: Vec<_> = v
                .into_iter()
                .filter(|p| seen.insert(chart.backend_coord(p)))
                .map(|p| Circle::new(p, r, c.filled()))
                .collect();
            chart.draw_series(dots).map_err(draw_err)?;
        }
        Marks::IBeams(v) => {
            // One polyline per beam (cap, stem, cap), caps in pixels so they stay readable at
            // any zoom: a third of the SVG elements of drawing them separately.
            let beams: Vec<_> = v
                .iter()
                .map(|&(x, lo, hi)| {
                    let (_, y_lo) = chart.backend_coord(&(x, lo));
                    let (_, y_hi) = chart.backend_coord(&(x, hi));
                    let dy = y_hi - y_lo;
                    EmptyElement::at((x, lo))
                        + PathElement::new(
                            vec![(-3, 0), (3, 0), (0, 0), (0, dy), (-3, dy), (3, dy)],
                            style,
                        )
                })
                .collect();
            chart.draw_series(beams).map_err(draw_err)?;
        }
        Marks::Ticks(v) => {
            chart
                .draw_series(
                    v.into_iter().map(|p| {
                        EmptyElement::at(p) + PathElement::new(vec![(0, 2), (0, 8)], style)
                    }),
                )
                .map_err(draw_err)?;
        }
        Marks::Text(v) => {
            // Every mark gets a dot, so none is lost; the text only where it does not land
            // on an earlier label of the same series (bursts of CE or ECE would otherwise
            // print over each other into a blot).
            chart
                .draw_series(
                    v.iter()
                        .map(|(x, y, _)| Circle::new((*x, *y), 2, c.filled())),
                )
                .map_err(draw_err)?;
            let mut placed: Vec<(i32, i32)> = Vec::new();
            let mut labels = Vec::new();
            for (x, y, t) in v {
                let (px, py) = chart.backend_coord(&(x, y));
                let half_w = 4 * t.chars().count() as i32 + 2;
                if placed
                    .iter()
                    .rev()
                    .take(64)
                    .any(|&(qx, qy)| (qx - px).abs() < 2 * half_w && (qy - py).abs() < 14)
                {
                    continue;
                }
                placed.push((px, py));
                labels.push(label((x, y), t));
            }
            chart.draw_series(labels).map_err(draw_err)?;
        }
        Marks::Labels(v) => {
            chart
                .draw_series(v.into_iter().map(|(x, y, t)| label((x, y), t)))
                .map_err(draw_err)?;
        }
        Marks::Names(v) => {
            let name_style = text_style.pos(Pos::new(HPos::Left, VPos::Bottom));
            chart
                .draw_series(v.into_iter().map(|(x, y, t)| {
                    EmptyElement::at((x, y)) + Text::new(t, (4, -3), name_style.clone())
                }))
                .map_err(draw_err)?;
        }
    }
    Ok(())
}

/// The marks restricted to the ranges. Lines and steps come back as `Segments` (a step is
/// two segments per point), so that a line crossing the edge is cut at the edge.
fn clip_marks(m: &Marks, xr: (f64, f64), yr: (f64, f64)) -> Marks {
    let inside = |x: f64, y: f64| x >= xr.0 && x <= xr.1 && y >= yr.0 && y <= yr.1;
    let clip = |a: (f64, f64), b: (f64, f64)| clip_segment(a, b, xr, yr);
    match m {
        Marks::Line(v) => Marks::Segments(v.windows(2).filter_map(|w| clip(w[0], w[1])).collect()),
        Marks::Step(v) => {
            let mut out = Vec::new();
            for w in v.windows(2) {
                let corner = (w[1].0, w[0].1);
                out.extend(clip(w[0], corner));
                out.extend(clip(corner, w[1]));
            }
            Marks::Segments(out)
        }
        Marks::Segments(v) => Marks::Segments(v.iter().filter_map(|&(a, b)| clip(a, b)).collect()),
        Marks::Points(v) => {
            Marks::Points(v.iter().copied().filter(|&(x, y)| inside(x, y)).collect())
        }
        Marks::Ticks(v) => Marks::Ticks(v.iter().copied().filter(|&(x, y)| inside(x, y)).collect()),
        Marks::IBeams(v) => Marks::IBeams(
            v.iter()
                .filter(|&&(x, lo, hi)| {
                    x >= xr.0 && x <= xr.1 && hi.max(lo) >= yr.0 && hi.min(lo) <= yr.1
                })
                .map(|&(x, lo, hi)| (x, lo.max(yr.0), hi.min(yr.1)))
                .collect(),
        ),
        Marks::Text(v) => Marks::Text(v.iter().filter(|t| inside(t.0, t.1)).cloned().collect()),
        Marks::Labels(v) => Marks::Labels(v.iter().filter(|t| inside(t.0, t.1)).cloned().collect()),
        Marks::Names(v) => Marks::Names(v.iter().filter(|t| inside(t.0, t.1)).cloned().collect()),
    }
}

/// Liang–Barsky: the part of segment a→b inside the rectangle, if any. Non-finite input is
/// dropped rather than drawn somewhere arbitrary.
fn clip_segment(
    a: (f64, f64),
    b: (f64, f64),
    xr: (f64, f64),
    yr: (f64, f64),
) -> Option<((f64, f64), (f64, f64))> {
    if ![a.0, a.1, b.0, b.1].iter().all(|v| v.is_finite()) {
        return None;
    }
    let (dx, dy) = (b.0 - a.0, b.1 - a.1);
    let (mut t0, mut t1) = (0.0f64, 1.0f64);
    for (p, q) in [
        (-dx, a.0 - xr.0),
        (dx, xr.1 - a.0),
        (-dy, a.1 - yr.0),
        (dy, yr.1 - a.1),
    ] {
        if p == 0.0 {
            if q < 0.0 {
                return None;
            }
        } else {
            let r = q / p;
            if p < 0.0 {
                t0 = t0.max(r);
            } else {
                t1 = t1.min(r);
            }
        }
    }
    if t0 > t1 {
        return None;
    }
    Some((
        (a.0 + t0 * dx, a.1 + t0 * dy),
        (a.0 + t1 * dx, a.1 + t1 * dy),
    ))
}

/// The data's range with `pad` of its span added each side.
fn fit(values: &[f64], include_zero: bool, pad: f64) -> (f64, f64) {
    let mut lo = f64::INFINITY;
    let mut hi = f64::NEG_INFINITY;
    for &v in values.iter().filter(|v| v.is_finite()) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if lo > hi {
        return (0.0, 1.0);
    }
    if include_zero {
        lo = lo.min(0.0);
        hi = hi.max(0.0);
    }
    let span = hi - lo;
    let lo_pad = if include_zero && lo == 0.0 {
        0.0
    } else {
        span * pad
    };
    (lo - lo_pad, hi + span * pad)
}

/// A range plotters can draw: finite, ordered and not empty.
fn usable((lo, hi): (f64, f64)) -> (f64, f64) {
    let (lo, hi) = if lo.is_finite() && hi.is_finite() {
        (lo.min(hi), lo.max(hi))
    } else {
        (0.0, 1.0)
    };
    if hi - lo > f64::EPSILON * lo.abs().max(1.0) {
        (lo, hi)
    } else {
        let half = (lo.abs() * 0.1).max(1.0);
        (lo - half, hi + half)
    }
}

/// Tick labels: thousands as k, M, G (sequence numbers in the millions stay short), and no
/// more decimals than the axis span needs.
pub fn short_number(v: f64, span: f64) -> String {
    let a = v.abs();
    let (scaled, suffix, scaled_span) = if a >= 1e9 {
        (v / 1e9, "G", span / 1e9)
    } else if a >= 1e6 {
        (v / 1e6, "M", span / 1e6)
    } else if a >= 1e4 {
        (v / 1e3, "k", span / 1e3)
    } else {
        (v, "", span)
    };
    // Ticks are about span/10 apart; show one more digit than that spacing needs.
    let step = (scaled_span / 10.0).abs();
    let decimals = if step > 0.0 && step.is_finite() {
        (-step.log10().floor() as i32 + 1).clamp(0, 6) as usize
    } else {
        0
    };
    let mut s = format!("{scaled:.decimals$}");
    if s.contains('.') {
        while s.ends_with('0') {
            s.pop();
        }
        if s.ends_with('.') {
            s.pop();
        }
    }
    if s == "-0" {
        s = "0".into();
    }
    s + suffix
}

fn draw_err<E: std::fmt::Debug>(e: E) -> ReportError {
    ReportError::Draw(format!("{e:?}"))
}

/// Encodes 8-bit RGB pixels as PNG.
fn encode_png(rgb: &[u8], w: u32, h: u32) -> Result<Vec<u8>, ReportError> {
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, w, h);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        let mut writer = enc
            .write_header()
            .map_err(|e| ReportError::Encode(e.to_string()))?;
        writer
            .write_image_data(rgb)
            .map_err(|e| ReportError::Encode(e.to_string()))?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_share_bar_cuts_0_to_100_in_proportion_and_skips_what_has_no_width() {
        let bar = share_bar(&[1.0, 0.0, 3.0], 2.0);
        assert_eq!(
            bar,
            [
                Some(((0.0, 2.0), (25.0, 2.0))),
                None,
                Some(((25.0, 2.0), (100.0, 2.0)))
            ]
        );
        assert_eq!(share_bar(&[0.0, 0.0], 1.0), [None, None]);
    }

    fn sample_chart() -> Chart {
        Chart::new(
            "Round-trip time",
            Axis::new("time", "s"),
            Axis::new("round-trip time", "ms").from_zero(),
        )
        .caption("The RTT climbs while the queue fills.")
        .with(Series::line(
            "fifo",
            Rgb::nth(0),
            (0..50)
                .map(|i| (i as f64 * 0.1, 20.0 + i as f64 * 3.0))
                .collect(),
        ))
        .with(Series::scatter(
            "codel",
            Rgb::nth(1),
            (0..50)
                .map(|i| (i as f64 * 0.1, 21.0 + (i % 5) as f64))
                .collect(),
        ))
    }

    #[test]
    fn svg_shows_title_axis_labels_with_units_legend_and_caption() {
        let texts = svg_texts(&sample_chart().to_svg().unwrap());
        for needle in [
            "Round-trip time",
            "time (s)",
            "round-trip time (ms)",
            "fifo",
            "codel",
            "The RTT climbs while the queue fills.",
        ] {
            assert!(
                texts.iter().any(|t| t == needle),
                "svg lacks {needle:?}: {texts:?}"
            );
        }
    }

    #[test]
    fn svg_without_caption_leaves_the_caption_out() {
        let r = sample_chart().render_svg(false).unwrap();
        assert!(!r.svg.contains("The RTT climbs"));
        let (l, t, rgt, b) = r.plot_area_px;
        assert!(l < rgt && t < b, "plot area {:?}", r.plot_area_px);
        assert!(rgt <= 1000 && b <= 600);
    }

    #[test]
    fn png_decodes_with_the_requested_size_and_has_dark_text_pixels() {
        let bytes = sample_chart().size(640, 400).to_png().unwrap();
        let decoder = png::Decoder::new(std::io::Cursor::new(bytes));
        let mut reader = decoder.read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut buf).unwrap();
        assert_eq!((info.width, info.height), (640, 400));
        // Text and axes are near-black; a chart without the embedded font would have only the
        // coloured series and grey grid.
        let dark = buf[..info.buffer_size()]
            .chunks(3)
            .filter(|p| p[0] < 60 && p[1] < 60 && p[2] < 60)
            .count();
        assert!(dark > 500, "only {dark} dark pixels");
    }

    #[test]
    fn fixed_ranges_are_kept_and_marks_outside_are_clipped() {
        let c = Chart::new(
            "t",
            Axis::new("time", "s").with_range(1.0, 2.0),
            Axis::new("v", "ms").with_range(0.0, 10.0),
        )
        .with(Series::line("a", Rgb::BLACK, vec![(0.0, 5.0), (3.0, 5.0)]))
        .with(Series::scatter("outside", Rgb::BLACK, vec![(5.0, 5.0)]));
        assert_eq!(c.ranges(), ((1.0, 2.0), (0.0, 10.0)));
        match clip_marks(&c.series[0].marks, (1.0, 2.0), (0.0, 10.0)) {
            Marks::Segments(v) => assert_eq!(v, vec![((1.0, 5.0), (2.0, 5.0))]),
            other => panic!("unexpected {other:?}"),
        }
        // The series with nothing inside the window drops out of the legend.
        let names: Vec<_> = c.legend().into_iter().map(|e| e.name).collect();
        assert_eq!(names, vec!["a"]);
    }

    #[test]
    fn same_scale_gives_every_chart_the_union_of_the_ranges() {
        let mk = |pts: Vec<(f64, f64)>| {
            Chart::new("t", Axis::new("time", "s"), Axis::new("rtt", "ms")).with(Series::line(
                "a",
                Rgb::BLACK,
                pts,
            ))
        };
        let mut charts = [
            mk(vec![(0.0, 10.0), (5.0, 20.0)]),
            mk(vec![(1.0, 15.0), (9.0, 400.0)]),
        ];
        let before = (charts[0].ranges(), charts[1].ranges());
        assert_ne!(before.0, before.1);
        same_scale(&mut charts);
        assert_eq!(charts[0].ranges(), charts[1].ranges());
        let ((x0, x1), (y0, y1)) = charts[0].ranges();
        assert!(x0 <= 0.0 && x1 >= 9.0 && y0 <= 10.0 && y1 >= 400.0);
    }

    #[test]
    fn step_holds_each_value_until_the_next_point() {
        let m = clip_marks(
            &Marks::Step(vec![(0.0, 1.0), (2.0, 3.0)]),
            (0.0, 10.0),
            (0.0, 10.0),
        );
        assert_eq!(
            m,
            Marks::Segments(vec![((0.0, 1.0), (2.0, 1.0)), ((2.0, 1.0), (2.0, 3.0))])
        );
    }

    #[test]
    fn cdf_rises_from_zero_to_one_hundred_percent_in_sorted_order() {
        let p = cdf_points(&[3.0, 1.0, f64::NAN, 2.0]);
        assert_eq!(
            p,
            vec![
                (1.0, 0.0),
                (1.0, 100.0 / 3.0),
                (2.0, 200.0 / 3.0),
                (3.0, 100.0)
            ]
        );
        assert!(cdf_points(&[]).is_empty());
    }

    #[test]
    fn a_cdf_chart_reads_as_the_share_of_its_samples_from_0_to_100_percent() {
        let c = Chart::cdf("t", Axis::new("round-trip time", "ms"), "probes");
        assert_eq!(c.y.label(), "share of probes at or below (%)");
        assert_eq!(c.y.range, Some((0.0, 100.0)));
        assert_eq!(c.x.label(), "round-trip time (ms)");
    }

    #[test]
    fn reference_lines_span_the_given_range_at_their_level() {
        let h = Series::hline("base RTT", Rgb::GREY, 20.0, (0.0, 30.0));
        assert_eq!(h.marks, Marks::Line(vec![(0.0, 20.0), (30.0, 20.0)]));
        let v = Series::vline("timer", Rgb::GREY, 40.0, (0.0, 100.0));
        assert_eq!(v.marks, Marks::Line(vec![(40.0, 0.0), (40.0, 100.0)]));
    }

    #[test]
    fn intervals_hold_the_last_value_to_the_end_of_its_interval() {
        let s = Series::intervals("goodput", Rgb::BLACK, &[(0.0, 9.0), (1.0, 8.0)], 1.0);
        assert_eq!(
            s.marks,
            Marks::Step(vec![(0.0, 9.0), (1.0, 8.0), (2.0, 8.0)])
        );
        let empty = Series::intervals("goodput", Rgb::BLACK, &[], 1.0);
        assert_eq!(empty.marks, Marks::Step(vec![]));
    }

    #[test]
    fn extending_a_chart_adds_the_series_in_order() {
        let mut c = Chart::new("t", Axis::new("x", "s"), Axis::new("y", "ms"));
        c.push(Series::hline("first", Rgb::GREY, 1.0, (0.0, 1.0)));
        c.extend(["a", "b"].map(|n| Series::scatter(n, Rgb::BLACK, vec![(0.0, 0.0)])));
        let names: Vec<&str> = c.series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["first", "a", "b"]);
    }

    #[test]
    fn empty_or_flat_data_still_gets_a_drawable_range() {
        let c = Chart::new("t", Axis::new("x", "s"), Axis::new("y", "ms"));
        assert_eq!(c.ranges(), ((0.0, 1.0), (0.0, 1.0)));
        let flat = c
            .clone()
            .with(Series::line("f", Rgb::BLACK, vec![(1.0, 5.0), (1.0, 5.0)]));
        let ((x0, x1), (y0, y1)) = flat.ranges();
        assert!(x0 < 1.0 && x1 > 1.0 && y0 < 5.0 && y1 > 5.0);
        assert!(c.to_svg().is_ok());
    }

    #[test]
    fn tick_labels_use_k_m_g_and_only_needed_decimals() {
        assert_eq!(short_number(12_500_000.0, 20e6), "12.5M");
        assert_eq!(short_number(50_000.0, 1e5), "50k");
        assert_eq!(short_number(0.25, 1.0), "0.25");
        assert_eq!(short_number(3.0, 10.0), "3");
        assert_eq!(short_number(-0.0, 1.0), "0");
    }

    #[test]
    fn clip_segment_cuts_a_diagonal_at_the_edges() {
        let s = clip_segment((-1.0, -1.0), (2.0, 2.0), (0.0, 1.0), (0.0, 1.0)).unwrap();
        assert_eq!(s, ((0.0, 0.0), (1.0, 1.0)));
        assert!(clip_segment((2.0, 2.0), (3.0, 3.0), (0.0, 1.0), (0.0, 1.0)).is_none());
    }
}
