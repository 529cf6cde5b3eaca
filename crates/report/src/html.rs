//! A builder for one self-contained HTML page: a title, then sections of paragraphs, lists,
//! tables and figures (inline SVG with a caption). Everything the page needs is inside it —
//! CSS and JavaScript inline, no fonts, images or scripts fetched — so it opens offline from a
//! file and can be mailed around.
//!
//! Figures marked zoomable get mouse-wheel zoom about the pointer, drag to pan, a reset button
//! (and double-click to reset), and a read-out of the data coordinates under the pointer, so
//! that a zoomed time-sequence graph stays readable when its axes have scrolled away. The zoom
//! changes the SVG `viewBox`; nothing is re-rendered. This module knows nothing about TCP.

use crate::chart::Chart;
use crate::{write_file, ReportError};
use std::fmt::Write as _;
use std::path::Path;

/// A page: title, optional lead paragraph, sections in order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Page {
    pub title: String,
    pub subtitle: String,
    pub sections: Vec<Section>,
}

/// A section with a heading and blocks.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Section {
    pub heading: String,
    /// Anchor for links (`#id`); made from the heading when empty.
    pub id: String,
    pub blocks: Vec<Block>,
}

/// One piece of content.
#[derive(Clone, Debug, PartialEq)]
pub enum Block {
    Paragraph(String),
    List(Vec<String>),
    Table(Table),
    Figure(Figure),
    /// Figures side by side (e.g. two runs at the same scale); they wrap on narrow screens.
    Row(Vec<Figure>),
    /// Monospaced text, kept as is.
    Pre(String),
    /// Key findings, highlighted: (label, text) pairs such as ("bufferbloat", "…").
    Findings(Vec<(String, String)>),
}

/// A table of text cells. Cells that read as numbers are right-aligned.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Table {
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
    pub caption: String,
}

/// An inline SVG with its caption.
#[derive(Clone, Debug, PartialEq)]
pub struct Figure {
    /// Element id, unique in the page (letters, digits, `-`, `_`).
    pub id: String,
    /// A complete `<svg>` element.
    pub svg: String,
    pub caption: String,
    pub zoomable: bool,
    /// Where data sits in the SVG, for the coordinate read-out of zoomable figures.
    pub mapping: Option<DataMapping>,
}

/// How SVG user coordinates map to data coordinates (linear axes).
#[derive(Clone, Debug, PartialEq)]
pub struct DataMapping {
    /// Plot area in SVG units: left, top, right, bottom.
    pub area: (i32, i32, i32, i32),
    pub x_range: (f64, f64),
    pub y_range: (f64, f64),
    pub x_label: String,
    pub y_label: String,
}

impl Figure {
    /// A figure from a chart: the chart's SVG without its drawn-in caption (the page shows
    /// the caption as text under it).
    pub fn from_chart(id: &str, chart: &Chart, zoomable: bool) -> Result<Figure, ReportError> {
        let r = chart.render_svg(false)?;
        Ok(Figure {
            id: sanitize_id(id),
            svg: r.svg,
            caption: chart.caption.clone(),
            zoomable,
            mapping: Some(DataMapping {
                area: r.plot_area_px,
                x_range: r.x_range,
                y_range: r.y_range,
                x_label: chart.x.label(),
                y_label: chart.y.label(),
            }),
        })
    }
}

impl Section {
    pub fn new(heading: impl Into<String>) -> Section {
        Section {
            heading: heading.into(),
            ..Default::default()
        }
    }

    pub fn with(mut self, block: Block) -> Section {
        self.blocks.push(block);
        self
    }

    pub fn push(&mut self, block: Block) {
        self.blocks.push(block);
    }
}

impl Page {
    pub fn new(title: impl Into<String>) -> Page {
        Page {
            title: title.into(),
            ..Default::default()
        }
    }

    pub fn push(&mut self, section: Section) {
        self.sections.push(section);
    }

    pub fn write(&self, path: &Path) -> Result<(), ReportError> {
        write_file(path, self.to_html().as_bytes())
    }

    /// The whole page as one HTML document.
    pub fn to_html(&self) -> String {
        let mut o = String::with_capacity(64 * 1024);
        o.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
        o.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
        let _ = writeln!(o, "<title>{}</title>", esc(&self.title));
        let _ = writeln!(o, "<style>{CSS}</style>\n</head>\n<body>\n<main>");
        let _ = writeln!(o, "<h1>{}</h1>", esc(&self.title));
        if !self.subtitle.is_empty() {
            let _ = writeln!(o, "<p class=\"subtitle\">{}</p>", esc(&self.subtitle));
        }
        if self.sections.len() > 2 {
            o.push_str("<nav><ul>\n");
            for (i, s) in self.sections.iter().enumerate() {
                let _ = writeln!(
                    o,
                    "<li><a href=\"#{}\">{}</a></li>",
                    section_id(s, i),
                    esc(&s.heading)
                );
            }
            o.push_str("</ul></nav>\n");
        }
        for (i, s) in self.sections.iter().enumerate() {
            let _ = writeln!(
                o,
                "<section id=\"{}\">\n<h2>{}</h2>",
                section_id(s, i),
                esc(&s.heading)
            );
            for b in &s.blocks {
                block(&mut o, b);
            }
            o.push_str("</section>\n");
        }
        let _ = writeln!(o, "</main>\n<script>{JS}</script>\n</body>\n</html>");
        o
    }
}

fn section_id(s: &Section, i: usize) -> String {
    if s.id.is_empty() {
        format!("s{}-{}", i + 1, sanitize_id(&s.heading.to_lowercase()))
    } else {
        sanitize_id(&s.id)
    }
}

fn block(o: &mut String, b: &Block) {
    match b {
        Block::Paragraph(t) => {
            let _ = writeln!(o, "<p>{}</p>", esc(t));
        }
        Block::List(items) => {
            o.push_str("<ul>\n");
            for i in items {
                let _ = writeln!(o, "<li>{}</li>", esc(i));
            }
            o.push_str("</ul>\n");
        }
        Block::Pre(t) => {
            let _ = writeln!(o, "<pre>{}</pre>", esc(t));
        }
        Block::Findings(items) => {
            o.push_str("<dl class=\"findings\">\n");
            for (k, v) in items {
                let _ = writeln!(o, "<dt>{}</dt><dd>{}</dd>", esc(k), esc(v));
            }
            o.push_str("</dl>\n");
        }
        Block::Table(t) => table(o, t),
        Block::Figure(f) => figure(o, f),
        Block::Row(fs) => {
            o.push_str("<div class=\"row\">\n");
            for f in fs {
                figure(o, f);
            }
            o.push_str("</div>\n");
        }
    }
}

/// Text cells longer than this wrap (at most a readable line wide); shorter ones stay on one line.
const LONG_CELL_CHARS: usize = 48;

fn table(o: &mut String, t: &Table) {
    o.push_str("<div class=\"table\"><table>\n");
    if !t.caption.is_empty() {
        let _ = writeln!(o, "<caption>{}</caption>", esc(&t.caption));
    }
    if !t.header.is_empty() {
        o.push_str("<thead><tr>");
        for h in &t.header {
            let _ = write!(o, "<th>{}</th>", esc(h));
        }
        o.push_str("</tr></thead>\n");
    }
    o.push_str("<tbody>\n");
    for r in &t.rows {
        o.push_str("<tr>");
        for (i, c) in r.iter().enumerate() {
            let class = if i > 0 && looks_numeric(c) {
                " class=\"num\""
            } else if c.chars().count() > LONG_CELL_CHARS {
                " class=\"long\""
            } else {
                ""
            };
            // A row label indented with spaces details the row above it (the terminal table
            // writes it so); HTML would drop the spaces, so they become an indent.
            let label = c.trim_start_matches(' ');
            let indent = c.len() - label.len();
            if i == 0 && indent > 0 {
                let _ = write!(
                    o,
                    "<td{class} style=\"padding-left: {:.1}em\">{}</td>",
                    0.6 + 0.6 * indent as f64,
                    esc(label)
                );
            } else {
                let _ = write!(o, "<td{class}>{}</td>", esc(c));
            }
        }
        o.push_str("</tr>\n");
    }
    o.push_str("</tbody></table></div>\n");
}

fn figure(o: &mut String, f: &Figure) {
    let mut attrs = String::new();
    if let Some(m) = &f.mapping {
        let _ = write!(
            attrs,
            " data-area=\"{} {} {} {}\" data-x=\"{} {}\" data-y=\"{} {}\" data-xlabel=\"{}\" data-ylabel=\"{}\"",
            m.area.0,
            m.area.1,
            m.area.2,
            m.area.3,
            m.x_range.0,
            m.x_range.1,
            m.y_range.0,
            m.y_range.1,
            esc(&m.x_label),
            esc(&m.y_label)
        );
    }
    let class = if f.zoomable {
        "chart zoomable"
    } else {
        "chart"
    };
    let _ = writeln!(o, "<figure id=\"{}\" class=\"{class}\"{attrs}>", esc(&f.id));
    if f.zoomable {
        o.push_str(
            "<div class=\"tools\"><button type=\"button\" class=\"reset\">reset zoom</button>\
             <span class=\"hint\">wheel: zoom · drag: pan · double-click: reset</span>\
             <span class=\"readout\"></span></div>\n",
        );
    }
    // The SVG comes from our own renderer; only its opening tag is touched, to add a class.
    o.push_str(&f.svg.replacen("<svg ", "<svg class=\"plot\" ", 1));
    if !f.caption.is_empty() {
        let _ = writeln!(o, "<figcaption>{}</figcaption>", esc(&f.caption));
    }
    o.push_str("</figure>\n");
}

fn looks_numeric(s: &str) -> bool {
    let t = s
        .trim()
        .trim_end_matches(|c: char| c.is_alphabetic() || c == '%' || c == '/' || c == ' ');
    !t.is_empty() && t.parse::<f64>().is_ok()
}

/// HTML-escapes text for element content and attribute values.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// Keeps letters, digits, `-` and `_`; anything else becomes `-`.
pub fn sanitize_id(s: &str) -> String {
    let id: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    if id.is_empty() {
        "x".into()
    } else {
        id
    }
}

const CSS: &str = r#"
:root { --fg: #1d1d1f; --muted: #5c5c66; --line: #d9d9df; --accent: #0b5cad; --bad: #b3261e; }
* { box-sizing: border-box; }
body { margin: 0; color: var(--fg); background: #fafafa;
  font: 15px/1.45 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", sans-serif; }
main { max-width: 1720px; margin: 0 auto; padding: 16px 24px 64px; }
/* Prose keeps a readable line length on a wide page. */
p, figcaption, dl.findings { max-width: 1100px; }
h1 { font-size: 1.6em; margin: 0.4em 0 0.2em; }
h2 { font-size: 1.25em; margin: 1.6em 0 0.5em; padding-bottom: 4px; border-bottom: 1px solid var(--line); }
.subtitle { color: var(--muted); margin-top: 0; }
nav ul { columns: 2; padding-left: 1.2em; margin: 0.5em 0 1em; }
section { margin-bottom: 1em; }
.table { overflow-x: auto; }
table { border-collapse: collapse; margin: 0.5em 0 1em; background: #fff; }
caption { text-align: left; color: var(--muted); padding: 4px 0; }
th, td { border: 1px solid var(--line); padding: 3px 10px; text-align: left; white-space: nowrap; }
/* Headers may wrap (at the spaces of "A → B"), so a two-direction table fits the page. */
th { background: #f0f0f4; white-space: normal; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
/* A long text cell (a hint, a command line) wraps instead of widening the table off the page. */
td.long { white-space: normal; min-width: 24ch; max-width: 70ch; overflow-wrap: anywhere; }
tbody tr:nth-child(even) { background: #f7f7fa; }
/* A program's own report wraps at the page's edge rather than scrolling sideways. */
pre { background: #fff; border: 1px solid var(--line); padding: 8px; white-space: pre-wrap; overflow-wrap: anywhere; }
dl.findings { display: grid; grid-template-columns: max-content 1fr; gap: 4px 14px;
  background: #fff7f5; border-left: 4px solid var(--bad); padding: 8px 12px; }
dl.findings dt { font-weight: 600; font-family: ui-monospace, "DejaVu Sans Mono", monospace; }
dl.findings dd { margin: 0; }
figure.chart { margin: 0.8em 0 1.4em; background: #fff; border: 1px solid var(--line); padding: 6px; }
figure.chart svg.plot { display: block; width: 100%; height: auto; max-height: 80vh; }
figure.zoomable svg.plot { cursor: grab; touch-action: none; }
figure.zoomable svg.plot.dragging { cursor: grabbing; }
figure.zoomable svg.plot * { vector-effect: non-scaling-stroke; }
figcaption { color: var(--muted); padding: 4px 6px 2px; }
.tools { display: flex; gap: 12px; align-items: center; font-size: 0.9em; color: var(--muted); padding: 0 4px 4px; }
.tools button { font: inherit; padding: 1px 10px; }
.readout { margin-left: auto; font-family: ui-monospace, "DejaVu Sans Mono", monospace; color: var(--fg); }
/* Charts are drawn 1000 px wide: two go side by side only where each keeps at least 78 % of
   that, so their text stays readable; on a narrower window they stack at full width. */
.row { display: grid; grid-template-columns: repeat(auto-fill, minmax(780px, 1fr)); gap: 0 12px; }
.row > figure { min-width: 0; }
"#;

/// Zoom and pan by rewriting the SVG viewBox. Plain DOM, no libraries.
const JS: &str = r#"
(function () {
  function num(list) { return (list || '').split(' ').map(Number); }
  document.querySelectorAll('figure.zoomable').forEach(function (fig) {
    var svg = fig.querySelector('svg.plot');
    if (!svg) { return; }
    var home = num(svg.getAttribute('viewBox'));
    var vb = home.slice();
    var area = num(fig.dataset.area), xr = num(fig.dataset.x), yr = num(fig.dataset.y);
    var readout = fig.querySelector('.readout');
    function apply() { svg.setAttribute('viewBox', vb.join(' ')); }
    function user(e) {
      var r = svg.getBoundingClientRect();
      // viewBox and element share the aspect ratio (height: auto), so one scale serves both axes.
      var s = vb[2] / r.width;
      return [vb[0] + (e.clientX - r.left) * s, vb[1] + (e.clientY - r.top) * s];
    }
    function fmt(v) {
      var a = Math.abs(v);
      return a >= 1e4 ? Math.round(v).toLocaleString('en-US') : v.toPrecision(5).replace(/\.?0+$/, '');
    }
    svg.addEventListener('wheel', function (e) {
      e.preventDefault();
      var p = user(e);
      var k = e.deltaY < 0 ? 0.8 : 1.25;
      var w = Math.min(vb[2] * k, home[2]), h = Math.min(vb[3] * k, home[3]);
      k = w / vb[2];
      vb = [p[0] - (p[0] - vb[0]) * k, p[1] - (p[1] - vb[1]) * k, w, h];
      apply();
    }, { passive: false });
    var drag = null;
    svg.addEventListener('pointerdown', function (e) {
      drag = { x: e.clientX, y: e.clientY, vb: vb.slice() };
      svg.setPointerCapture(e.pointerId);
      svg.classList.add('dragging');
    });
    svg.addEventListener('pointermove', function (e) {
      if (drag) {
        var s = vb[2] / svg.getBoundingClientRect().width;
        vb = [drag.vb[0] - (e.clientX - drag.x) * s, drag.vb[1] - (e.clientY - drag.y) * s, vb[2], vb[3]];
        apply();
      }
      if (readout && area.length === 4 && xr.length === 2 && yr.length === 2) {
        var p = user(e);
        var fx = (p[0] - area[0]) / (area[2] - area[0]), fy = (area[3] - p[1]) / (area[3] - area[1]);
        if (fx >= 0 && fx <= 1 && fy >= 0 && fy <= 1) {
          readout.textContent = fig.dataset.xlabel + ' = ' + fmt(xr[0] + fx * (xr[1] - xr[0])) +
            ',  ' + fig.dataset.ylabel + ' = ' + fmt(yr[0] + fy * (yr[1] - yr[0]));
        } else {
          readout.textContent = '';
        }
      }
    });
    function end() { drag = null; svg.classList.remove('dragging'); }
    svg.addEventListener('pointerup', end);
    svg.addEventListener('pointercancel', end);
    function reset() { vb = home.slice(); apply(); }
    svg.addEventListener('dblclick', reset);
    var b = fig.querySelector('button.reset');
    if (b) { b.addEventListener('click', reset); }
    fig.dataset.zoomReady = '1';
  });
})();
"#;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chart::{Axis, Rgb, Series};

    fn page() -> Page {
        let chart = Chart::new(
            "Time sequence",
            Axis::new("time", "s"),
            Axis::new("sequence", "bytes"),
        )
        .caption("Data climbs <steadily> & ACKs follow.")
        .with(Series::line(
            "data",
            Rgb::BLACK,
            vec![(0.0, 0.0), (1.0, 1000.0)],
        ));
        let mut p = Page::new("Report for a.pcap");
        p.subtitle = "one capture".into();
        p.push(
            Section::new("Connection 1")
                .with(Block::Paragraph("a & b".into()))
                .with(Block::Table(Table {
                    header: vec!["statistic".into(), "a2b".into()],
                    rows: vec![
                        vec!["packets".into(), "42".into()],
                        vec!["state".into(), "closed".into()],
                    ],
                    caption: String::new(),
                }))
                .with(Block::Figure(
                    Figure::from_chart("tsg a2b", &chart, true).unwrap(),
                ))
                .with(Block::Findings(vec![(
                    "bufferbloat".into(),
                    "standing queue of 180 ms".into(),
                )])),
        );
        p
    }

    #[test]
    fn page_is_self_contained_with_no_external_urls() {
        let html = page().to_html();
        for bad in ["src=", "href=\"http", "@import", "url(", "<link"] {
            assert!(!html.contains(bad), "page contains {bad:?}");
        }
        // The only http reference allowed is the SVG namespace name, which is never fetched.
        let without_ns = html.replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
        assert!(
            !without_ns.contains("http"),
            "page references http outside xmlns"
        );
    }

    #[test]
    fn page_has_inline_svg_zoom_script_and_escaped_text() {
        let html = page().to_html();
        assert!(html.contains("<figure id=\"tsg-a2b\" class=\"chart zoomable\""));
        assert!(html.contains("<svg class=\"plot\" "));
        assert!(html.contains("addEventListener('wheel'"));
        assert!(html.contains("reset zoom"));
        assert!(html
            .contains("<figcaption>Data climbs &lt;steadily&gt; &amp; ACKs follow.</figcaption>"));
        assert!(html.contains("<p>a &amp; b</p>"));
        assert!(html.contains("<td class=\"num\">42</td>"));
        assert!(html.contains("<td>closed</td>"));
        assert!(html.contains("<dt>bufferbloat</dt>"));
        assert!(html.contains("data-xlabel=\"time (s)\""));
    }

    #[test]
    fn long_text_cells_wrap_and_short_ones_and_numbers_do_not() {
        let hint =
            "Use a hostname instead of the IPv4 literal 192.0.2.1, or let the CLAT translate it";
        let mut o = String::new();
        table(
            &mut o,
            &Table {
                header: vec!["check".into(), "hint".into(), "ms".into()],
                rows: vec![vec![
                    "literal".into(),
                    hint.into(),
                    "123456789012345".into(),
                ]],
                caption: String::new(),
            },
        );
        assert!(o.contains(&format!("<td class=\"long\">{}</td>", esc(hint))));
        assert!(o.contains("<td>literal</td>"));
        assert!(o.contains("<td class=\"num\">123456789012345</td>"));
        let css = page().to_html();
        assert!(css.contains("td.long { white-space: normal;"));
        assert!(css.contains("white-space: pre-wrap"));
    }

    #[test]
    fn a_row_label_indented_with_spaces_keeps_its_indent_and_others_none() {
        let mut o = String::new();
        table(
            &mut o,
            &Table {
                header: vec![String::new(), "run".into()],
                rows: vec![
                    vec!["downlink queue p99 (ms)".into(), "33.9".into()],
                    vec!["  L queue p99 (ms)".into(), "  2.8".into()],
                ],
                caption: String::new(),
            },
        );
        assert!(o.contains("<td>downlink queue p99 (ms)</td>"), "{o}");
        assert!(
            o.contains("<td style=\"padding-left: 1.8em\">L queue p99 (ms)</td>"),
            "{o}"
        );
        assert!(o.contains("<td class=\"num\">  2.8</td>"), "{o}");
    }

    #[test]
    fn ids_are_sanitised_and_many_sections_get_a_table_of_contents() {
        assert_eq!(sanitize_id("conn 1/a2b"), "conn-1-a2b");
        let mut p = page();
        assert!(!p.to_html().contains("<nav>"));
        p.push(Section::new("Two"));
        p.push(Section::new("Three"));
        let html = p.to_html();
        assert!(html.contains("<nav>"));
        assert!(html.contains("href=\"#s3-three\""));
        assert!(html.contains("<section id=\"s3-three\">"));
    }
}
