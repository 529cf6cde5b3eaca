//! `DIR/sweep.html`: small multiples of the results table, one self-contained page with inline
//! SVG (no script, no external file). Each figure is a row of small charts sharing one y scale:
//! along x the first axis whose values are quantities (rates, times, numbers), a line per
//! value of the next axis, a chart per combination of the other axes; seeds and repetitions are folded into each point (the median,
//! with a bar from the lowest to the highest). For the bufferbloat grid (`queue`, `down`,
//! `rtt`, `seed`): p95 RTT against rate, a line per queue, a chart per RTT.
//!
//! Not here: reading runs (the table is built from the journal's rows) or choosing colours per
//! meaning (lines take colours in the axis's order).

use std::fmt::Write as _;

use serde_json::Value;

use crate::table::Table;

pub const HTML: &str = "sweep.html";

/// Figures drawn first, in this order, with what they mean; every other number column follows
/// in a folded section.
const KEY_FIGURES: &[(&str, &str)] = &[
    ("udp_rtt_p95_ms", "p95 RTT of the UDP probe, ms"),
    ("udp_rtt_p50_ms", "median RTT of the UDP probe, ms"),
    ("goodput_mbps", "bulk goodput, Mbit/s"),
    (
        "path_down_queue_delay_p95_ms",
        "p95 queue delay, server→client, ms",
    ),
    ("path_down_drops", "drops, server→client"),
    ("path_down_ce_marks", "CE marks, server→client"),
    (
        "lateness_p99_ms",
        "engine lateness p99, ms (self-check: under 1)",
    ),
];

/// Axes folded into each point rather than drawn.
const FOLDED: &[&str] = &["seed"];

/// Line colours (Okabe–Ito, readable with colour-blindness).
const COLOURS: &[&str] = &[
    "#000000", "#e69f00", "#56b4e9", "#009e73", "#d55e00", "#0072b2", "#cc79a7", "#f0e442",
];

const W: f64 = 240.0;
const H: f64 = 170.0;
const LEFT: f64 = 44.0;
const BOTTOM: f64 = 28.0;
const TOP: f64 = 8.0;
const RIGHT: f64 = 10.0;

fn label(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        v => v.to_string(),
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Distinct values in first-seen order (the plan's order, which is the file's).
fn distinct(values: impl Iterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for v in values {
        if !out.contains(&v) {
            out.push(v);
        }
    }
    out
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// A round step for about five ticks over `span`.
fn tick_step(span: f64) -> f64 {
    let raw = span / 5.0;
    let p = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * p)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * p)
}

/// The page for `table`, whose axes are `axes` in the sweep file's order; `title` heads it.
pub fn render(title: &str, axes: &[String], table: &Table) -> String {
    let col = |name: &str| table.columns.iter().position(|c| c == name);
    let drawn: Vec<&String> = axes
        .iter()
        .filter(|a| !FOLDED.contains(&a.as_str()))
        .collect();
    // Along x the first axis whose values are quantities (`5mbit`, `20ms`, 3), else the
    // first; a line per value of the next axis; a chart per combination of the rest.
    let quantity = |a: &String| {
        col(a).is_some_and(|i| {
            table.rows.iter().all(|r| match &r[i] {
                Value::String(s) => s.starts_with(|c: char| c.is_ascii_digit()),
                v => v.is_number(),
            })
        })
    };
    let mut order = drawn.clone();
    if let Some(k) = order.iter().position(|a| quantity(a)) {
        let x = order.remove(k);
        order.insert(0, x);
    }
    // (line axis, x axis, panel axes)
    let (line_axis, x_axis, panel_axes): (Option<&String>, Option<&String>, Vec<&String>) =
        match order.len() {
            0 => (None, None, vec![]),
            1 => (None, Some(order[0]), vec![]),
            _ => (Some(order[1]), Some(order[0]), order[2..].to_vec()),
        };
    let ok: Vec<&Vec<Value>> = {
        let status = col("status");
        table
            .rows
            .iter()
            .filter(|r| status.is_none_or(|i| r[i] == "ok"))
            .collect()
    };
    let values_of = |axis: Option<&String>| -> Vec<String> {
        match axis.and_then(|a| col(a)) {
            Some(i) => distinct(ok.iter().map(|r| label(&r[i]))),
            None => vec![String::new()],
        }
    };
    let lines = values_of(line_axis);
    let xs = values_of(x_axis);
    let panel_key = |r: &Vec<Value>| -> String {
        panel_axes
            .iter()
            .filter_map(|a| col(a).map(|i| format!("{a} {}", label(&r[i]))))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let panels = distinct(ok.iter().map(|r| panel_key(r)));
    let key_of = |r: &Vec<Value>, axis: Option<&String>| match axis.and_then(|a| col(a)) {
        Some(i) => label(&r[i]),
        None => String::new(),
    };

    let wall_i = col("wall_s");
    let first_figure = wall_i.map_or(table.columns.len(), |i| i + 1);
    let numeric = |i: usize| {
        ok.iter().all(|r| r[i].is_number() || r[i].is_null()) && ok.iter().any(|r| r[i].is_number())
    };
    let mut key = Vec::new();
    for (name, what) in KEY_FIGURES {
        if let Some(i) = col(name).filter(|i| numeric(*i)) {
            key.push((i, name.to_string(), what.to_string()));
        }
    }
    let mut rest = Vec::new();
    for (i, c) in table.columns.iter().enumerate().skip(first_figure) {
        if numeric(i) && !key.iter().any(|(k, _, _)| *k == i) {
            rest.push((i, c.clone(), c.replace('_', " ")));
        }
    }
    if let Some(i) = wall_i.filter(|i| numeric(*i)) {
        rest.push((i, "wall_s".into(), "wall time of each run, s".into()));
    }

    let folded: Vec<&str> = axes
        .iter()
        .map(String::as_str)
        .filter(|a| FOLDED.contains(a))
        .chain(col("rep").map(|_| "rep"))
        .collect();
    let mut how = String::new();
    if let Some(x) = x_axis {
        let _ = write!(how, "against <b>{}</b>", esc(x));
    }
    if let Some(l) = line_axis {
        let _ = write!(how, ", a line per <b>{}</b>", esc(l));
    }
    if !panel_axes.is_empty() {
        let names: Vec<String> = panel_axes.iter().map(|a| esc(a)).collect();
        let _ = write!(how, ", a chart per <b>{}</b>", names.join(", "));
    }
    let _ = write!(
        how,
        "; each point is the median over {} (the bar: lowest to highest).",
        folded.join(" and ")
    );

    let chart = |fig: usize, panel: &str, lo: f64, hi: f64| -> String {
        let mut s = String::new();
        let (pw, ph) = (W - LEFT - RIGHT, H - TOP - BOTTOM);
        let x_of = |k: usize| LEFT + pw * (k as f64 + 0.5) / xs.len() as f64;
        let y_of = |v: f64| TOP + ph * (1.0 - (v - lo) / (hi - lo));
        let _ = write!(
            s,
            r##"<svg width="{W}" height="{H}" viewBox="0 0 {W} {H}" role="img"><rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="none" stroke="#bbb"/>"##
        );
        let step = tick_step(hi - lo);
        let mut t = (lo / step).ceil() * step;
        while t <= hi + step * 1e-9 {
            let y = y_of(t);
            let _ = write!(
                s,
                r##"<line x1="{LEFT}" x2="{}" y1="{y:.1}" y2="{y:.1}" stroke="#eee"/><text x="{}" y="{:.1}" font-size="10" text-anchor="end">{}</text>"##,
                LEFT + pw,
                LEFT - 3.0,
                y + 3.0,
                fmt_num(t)
            );
            t += step;
        }
        for (k, x) in xs.iter().enumerate() {
            let _ = write!(
                s,
                r#"<text x="{:.1}" y="{}" font-size="10" text-anchor="middle">{}</text>"#,
                x_of(k),
                H - BOTTOM + 13.0,
                esc(x)
            );
        }
        for (li, line) in lines.iter().enumerate() {
            let colour = COLOURS[li % COLOURS.len()];
            let mut pts = Vec::new();
            for (k, x) in xs.iter().enumerate() {
                let mut v: Vec<f64> = ok
                    .iter()
                    .filter(|r| {
                        panel_key(r) == panel
                            && key_of(r, line_axis) == *line
                            && key_of(r, x_axis) == *x
                    })
                    .filter_map(|r| r[fig].as_f64())
                    .collect();
                if v.is_empty() {
                    continue;
                }
                let (mn, mx) = v
                    .iter()
                    .fold((f64::MAX, f64::MIN), |(a, b), x| (a.min(*x), b.max(*x)));
                let m = median(&mut v);
                let px = x_of(k) + (li as f64 - (lines.len() as f64 - 1.0) / 2.0) * 2.0;
                if mx > mn {
                    let _ = write!(
                        s,
                        r#"<line x1="{px:.1}" x2="{px:.1}" y1="{:.1}" y2="{:.1}" stroke="{colour}" stroke-opacity="0.5"/>"#,
                        y_of(mn),
                        y_of(mx)
                    );
                }
                let _ = write!(
                    s,
                    r#"<circle cx="{px:.1}" cy="{:.1}" r="2.5" fill="{colour}"><title>{}{}: {} (min {}, max {})</title></circle>"#,
                    y_of(m),
                    esc(line),
                    if line.is_empty() {
                        esc(x)
                    } else {
                        format!(", {}", esc(x))
                    },
                    fmt_num(m),
                    fmt_num(mn),
                    fmt_num(mx)
                );
                pts.push(format!("{px:.1},{:.1}", y_of(m)));
            }
            if pts.len() > 1 {
                let _ = write!(
                    s,
                    r#"<polyline points="{}" fill="none" stroke="{colour}" stroke-width="1.5"/>"#,
                    pts.join(" ")
                );
            }
        }
        s.push_str("</svg>");
        s
    };

    let figure_row = |(i, name, what): &(usize, String, String)| -> String {
        let vals: Vec<f64> = ok.iter().filter_map(|r| r[*i].as_f64()).collect();
        let (mut lo, mut hi) = vals
            .iter()
            .fold((f64::MAX, f64::MIN), |(a, b), x| (a.min(*x), b.max(*x)));
        // Zero is on the scale when it is near: delays and rates read against it.
        if lo > 0.0 && lo < hi * 0.5 {
            lo = 0.0;
        }
        if hi <= lo {
            hi = lo + 1.0;
        }
        let pad = (hi - lo) * 0.05;
        let (lo, hi) = (if lo == 0.0 { 0.0 } else { lo - pad }, hi + pad);
        let mut s = format!(
            "<figure><figcaption><b>{}</b> <code>{}</code></figcaption><div class=row>",
            esc(what),
            esc(name)
        );
        for p in &panels {
            let _ = write!(
                s,
                "<div><div class=panel>{}</div>{}</div>",
                esc(p),
                chart(*i, p, lo, hi)
            );
        }
        s.push_str("</div></figure>");
        s
    };

    let mut legend = String::new();
    if let Some(l) = line_axis {
        let _ = write!(legend, "<p class=legend>{}: ", esc(l));
        for (li, line) in lines.iter().enumerate() {
            let _ = write!(
                legend,
                r#"<span><svg width="18" height="10"><line x1="0" x2="18" y1="5" y2="5" stroke="{}" stroke-width="3"/></svg> {}</span> "#,
                COLOURS[li % COLOURS.len()],
                esc(line)
            );
        }
        legend.push_str("</p>");
    }
    let count = |status: &str| {
        col("status").map_or(0, |i| table.rows.iter().filter(|r| r[i] == status).count())
    };
    let late =
        col("self_check").map_or(0, |i| table.rows.iter().filter(|r| r[i] == "late").count());
    let mut page = String::new();
    let _ = write!(
        page,
        r#"<!doctype html><html><head><meta charset="utf-8"><title>{t}</title><style>
body{{font-family:sans-serif;margin:1.5em;color:#222}} figure{{margin:0 0 1.2em 0}}
figcaption{{margin-bottom:.3em}} .row{{display:flex;flex-wrap:wrap;gap:.5em}}
.panel{{font-size:12px;text-align:center;color:#555}} .legend span{{margin-right:1em}}
code{{color:#777;font-size:11px}}</style></head><body><h1>{t}</h1>
<p>{runs} runs: {ok} ok, {failed} failed; {late} with the engine late (self-check), drawn like the others. Each figure is a row of charts on one y scale, {how}</p>
{legend}"#,
        t = esc(title),
        runs = table.rows.len(),
        ok = count("ok"),
        failed = count("failed"),
    );
    for f in &key {
        page.push_str(&figure_row(f));
    }
    if !rest.is_empty() {
        page.push_str("<details><summary>Every other figure</summary>");
        for f in &rest {
            page.push_str(&figure_row(f));
        }
        page.push_str("</details>");
    }
    page.push_str("</body></html>\n");
    page
}

/// A tick or value label: integers plainly, others with up to three significant decimals.
fn fmt_num(v: f64) -> String {
    if v == v.trunc() && v.abs() < 1e9 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string()
    }
}

/// How many rows of charts each figure column has on `page`.
#[cfg(test)]
fn columns_drawn(page: &str) -> std::collections::BTreeMap<String, usize> {
    let mut m = std::collections::BTreeMap::new();
    for part in page.split("<code>").skip(1) {
        let name = part.split("</code>").next().unwrap_or("").to_string();
        *m.entry(name).or_insert(0) += 1;
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::row::Row;
    use serde_json::json;

    fn row(id: &str, queue: &str, down: &str, rtt: &str, seed: i64, p95: f64) -> Row {
        Row {
            run: id.into(),
            rep: 0,
            params: json!({"queue": queue, "down": down, "rtt": rtt, "seed": seed}),
            status: "ok".into(),
            error: None,
            self_check: Some("ok".into()),
            wall_s: 10.5,
            figures: [("udp_rtt_p95_ms".to_string(), json!(p95))]
                .into_iter()
                .collect(),
        }
    }

    #[test]
    fn a_grid_draws_a_chart_per_panel_a_line_per_queue_and_folds_the_seeds() {
        // In the order the sweep file wrote them.
        let axes: Vec<String> = ["down", "queue", "rtt", "seed"].map(String::from).into();
        let mut rows = Vec::new();
        let mut n = 0;
        for q in ["fifo", "codel"] {
            for d in ["5mbit", "10mbit"] {
                for r in ["20ms", "80ms"] {
                    for s in [1, 2, 3] {
                        let p95 = if q == "fifo" { 700.0 } else { 30.0 } + s as f64;
                        rows.push(row(&format!("r{n:04}"), q, d, r, s, p95));
                        n += 1;
                    }
                }
            }
        }
        let refs: Vec<&Row> = rows.iter().collect();
        let page = render("bb", &axes, &Table::new(&axes, &refs));
        // Two figures (the p95 and the wall time), each with two charts (rtt 20ms, 80ms).
        assert_eq!(page.matches("<svg width=\"240\"").count(), 4);
        assert!(page.contains("rtt 20ms") && page.contains("rtt 80ms"));
        assert!(page.contains("a line per <b>queue</b>"));
        assert!(page.contains("against <b>down</b>"));
        // Each point is the median of its three seeds, with a bar to the extremes.
        assert!(
            page.contains("fifo, 5mbit: 702 (min 701, max 703)"),
            "{page}"
        );
        assert!(page.contains("codel, 10mbit: 32 (min 31, max 33)"));
        assert_eq!(columns_drawn(&page)["udp_rtt_p95_ms"], 1);
        assert!(page.contains("<summary>Every other figure</summary>"));
    }

    #[test]
    fn failed_runs_are_counted_but_not_drawn_and_text_is_escaped() {
        let axes: Vec<String> = vec!["queue".into()];
        let mut a = row("r0000", "fifo <b>", "x", "y", 1, 5.0);
        a.params = json!({"queue": "fifo <b>"});
        let mut b = row("r0001", "codel", "x", "y", 1, 9999.0);
        b.params = json!({"queue": "codel"});
        b.status = "failed".into();
        let page = render("t", &axes, &Table::new(&axes, &[&a, &b]));
        assert!(page.contains("2 runs: 1 ok, 1 failed"));
        assert!(page.contains("fifo &lt;b&gt;"));
        assert!(!page.contains("9999"));
    }

    #[test]
    fn ticks_are_round() {
        assert_eq!(tick_step(700.0), 200.0);
        assert_eq!(tick_step(9.0), 2.0);
        assert_eq!(fmt_num(0.25), "0.25");
        assert_eq!(fmt_num(12.345), "12.3");
    }
}
