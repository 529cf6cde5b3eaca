//! The time-budget bar: one connection's duration as a horizontal bar split into network,
//! server, client, transfer, stalled and unattributed time, with the analyzer's one-line
//! summary as its caption, and the table of its request/response exchanges.
//!
//! It draws what `analyze` computed ([`analyze::TimeBudget`], [`analyze::Exchange`]); it
//! computes no budget itself.

use std::fmt::Write as _;

use analyze::{Analysis, Connection, TimeBudget};

use crate::html::{esc, Figure, Table};

const WIDTH: f64 = 900.0;
const BAR_Y: f64 = 8.0;
const BAR_H: f64 = 30.0;
const HEIGHT: f64 = 70.0;
/// Exchanges listed in the page; the JSON has them all.
const MAX_ROWS: usize = 50;

/// Fill colour of each part, in [`TimeBudget::parts`] order: network blue, server orange,
/// client purple, transfer green, stalled red, unattributed grey.
const COLOURS: [&str; 6] = [
    "#2f6fb3", "#e08a1e", "#8a5cc2", "#3c9a5f", "#c8372d", "#b0b0b8",
];

fn human(ms: f64) -> String {
    analyze::text::human((ms * 1e6) as u64)
}

/// The bar as an SVG element (no caption).
pub fn bar_svg(b: &TimeBudget) -> String {
    let total = b.total_ns() as f64;
    let mut o = String::new();
    let _ = write!(
        o,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" width=\"{WIDTH}\" height=\"{HEIGHT}\" font-family=\"DejaVu Sans, sans-serif\" font-size=\"12\">"
    );
    let _ = write!(
        o,
        "<rect x=\"0\" y=\"{BAR_Y}\" width=\"{WIDTH}\" height=\"{BAR_H}\" fill=\"#f0f0f4\" stroke=\"#d9d9df\"/>"
    );
    let mut x = 0.0;
    let mut legend_x = 0.0;
    for (i, (name, ns)) in b.parts().into_iter().enumerate() {
        if ns == 0 || total <= 0.0 {
            continue;
        }
        let w = ns as f64 / total * WIDTH;
        let ms = ns as f64 / 1e6;
        let _ = write!(
            o,
            "<rect x=\"{x:.2}\" y=\"{BAR_Y}\" width=\"{w:.2}\" height=\"{BAR_H}\" fill=\"{}\"><title>{}</title></rect>",
            COLOURS[i],
            esc(&format!("{name} {}", human(ms)))
        );
        // A label inside the segment when it fits (about 7 px a character).
        let label = format!("{name} {}", human(ms));
        if w >= label.len() as f64 * 7.0 + 8.0 {
            let _ = write!(
                o,
                "<text x=\"{:.2}\" y=\"{:.1}\" fill=\"#fff\">{}</text>",
                x + 4.0,
                BAR_Y + BAR_H / 2.0 + 4.0,
                esc(&label)
            );
        }
        x += w;
        // Legend under the bar: every part present, with its time.
        let _ = write!(
            o,
            "<rect x=\"{legend_x:.1}\" y=\"{:.1}\" width=\"10\" height=\"10\" fill=\"{}\"/><text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            BAR_Y + BAR_H + 10.0,
            COLOURS[i],
            legend_x + 14.0,
            BAR_Y + BAR_H + 19.0,
            esc(&label)
        );
        legend_x += label.len() as f64 * 7.0 + 34.0;
    }
    o.push_str("</svg>");
    o
}

/// The bar for connection `i` of the analysis, captioned with the analyzer's summary line.
pub fn bar(i: usize, c: &Connection) -> Figure {
    Figure {
        id: format!("conn{}-budget", i + 1),
        svg: bar_svg(&c.story.budget),
        caption: format!(
            "Where the time went: {} (every part is defined in docs/analyze.md; they add up to the connection's duration)",
            analyze::text::budget_line(c)
        ),
        zoomable: false,
        mapping: None,
    }
}

/// The exchanges of a connection as a table (None when it had none).
pub fn exchanges_table(a: &Analysis, c: &Connection) -> Option<Table> {
    if c.story.exchanges.is_empty() {
        return None;
    }
    let ms = |ns: u64| human(ns as f64 / 1e6);
    let rows = c
        .story
        .exchanges
        .iter()
        .take(MAX_ROWS)
        .map(|e| {
            let b = &e.budget;
            vec![
                format!("{:.3}", a.rel_secs(e.start)),
                e.name.clone().unwrap_or_else(|| "-".into()),
                e.request_bytes.to_string(),
                e.response_bytes.to_string(),
                e.response_start
                    .filter(|&r| r >= e.request_end)
                    .map_or("-".into(), |r| {
                        human((r - e.request_end).as_secs_f64() * 1e3)
                    }),
                ms(b.network_ns),
                ms(b.server_ns),
                ms(b.client_ns),
                ms(b.transfer_ns),
                ms(b.stalled_ns),
            ]
        })
        .collect();
    let more = c.story.exchanges.len().saturating_sub(MAX_ROWS) as u64 + c.story.exchanges_dropped;
    Some(Table {
        header: [
            "start s",
            "request",
            "request bytes",
            "response bytes",
            "first byte",
            "network",
            "server",
            "client",
            "transfer",
            "stalled",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        caption: if more > 0 {
            format!("Request/response exchanges ({more} more in the JSON output)")
        } else {
            "Request/response exchanges".into()
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bar_gives_each_part_its_share_of_the_width() {
        let b = TimeBudget {
            network_ns: 250_000_000,
            server_ns: 750_000_000,
            ..TimeBudget::default()
        };
        let svg = bar_svg(&b);
        assert!(svg.contains("width=\"225.00\""), "{svg}");
        assert!(
            svg.contains("x=\"225.00\" y=\"8\" width=\"675.00\""),
            "{svg}"
        );
        assert!(svg.contains(">server 750 ms<"));
        assert!(!svg.contains("client"), "parts of zero time are not drawn");
    }
}
