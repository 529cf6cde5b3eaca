//! What the web demos share: their lab (a client and a server, whose page is served by
//! `web-server` and loaded by a waited-for program), reading the page-load client's lines back,
//! and the waterfall chart. Headless Chromium as that program is [`crate::chromium`].

use labnet::run_dir::RunDir;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use lab::config::{EcnMode, LabConfig};
use report::{Axis, Chart, Figure, Marks, Rgb, Series};
use web::WebRecord;

use crate::common;

/// When the loader starts, s after the lab: the server is listening by then.
const CLIENT_START_S: f64 = 0.5;

/// The line between client and server: rates, RTT (split evenly over both directions) and the
/// queue on both.
pub struct Line {
    pub down: &'static str,
    pub up: &'static str,
    pub rtt_ms: f64,
    pub queue: &'static str,
}

/// `client` and `server` (also named `aliases`), `web-server` serving `page_file` on the
/// server and `loader` (program name, command) on the client, waited for.
pub fn web_lab(
    line: &Line,
    aliases: &[&str],
    page_file: &Path,
    loader: (&str, String),
    seed: u64,
) -> LabConfig {
    let one_way = format!("{}ms", line.rtt_ms / 2.0);
    let mut server = common::host("server", 2, EcnMode::Passive);
    server.aliases = aliases.iter().map(|s| s.to_string()).collect();
    common::two_hosts(
        seed,
        [common::host("client", 1, EcnMode::Passive), server],
        (
            "path",
            common::direction(line.up, &one_way, line.queue),
            common::direction(line.down, &one_way, line.queue),
        ),
        vec![
            common::program(
                "web-server",
                "server",
                0.0,
                format!("exec latencylab web-server --page {}", page_file.display()),
                false,
            ),
            common::program(loader.0, "client", CLIENT_START_S, loader.1, true),
        ],
    )
}

/// A shell line that waits (up to 5 s) for the server to have written `file`.
pub fn wait_for(file: &Path) -> String {
    format!(
        "for i in $(seq 50); do [ -s {f} ] && break; sleep 0.1; done; ",
        f = file.display()
    )
}

/// The page-load client's lines of the run in `dir`, and the file they are in.
pub fn page_load_records(dir: &Path) -> Result<(PathBuf, Vec<WebRecord>)> {
    let path = RunDir::new(dir).program_out("page-load");
    let recs = web::read_records(&path).map_err(|e| anyhow::anyhow!(e))?;
    Ok((path, recs))
}

/// A resource line's times, ms: queued, request sent, first byte, last byte (a waterfall's bar).
pub fn resource_bar(r: &WebRecord) -> Option<[f64; 4]> {
    match r {
        WebRecord::Resource {
            queued_ms,
            sent_ms,
            first_byte_ms,
            last_byte_ms,
            ..
        } => Some([*queued_ms, *sent_ms, *first_byte_ms, *last_byte_ms]),
        _ => None,
    }
}

/// The page-load client's resource bars of a run, and its connections.
pub fn resource_bars(dir: &Path) -> Result<(Vec<[f64; 4]>, u64)> {
    let (path, recs) = page_load_records(dir)?;
    let bars: Vec<[f64; 4]> = recs.iter().filter_map(resource_bar).collect();
    let mut conns = 0;
    for r in &recs {
        if let WebRecord::Page { connections, .. } = r {
            conns = *connections;
        }
    }
    if bars.is_empty() {
        bail!(
            "{}: the page load wrote no resource (see programs/page-load.err)",
            path.display()
        );
    }
    Ok((bars, conns))
}

/// The last byte of the last resource, s: the page load as the web demos time it.
pub fn last_byte_s(bars: &[[f64; 4]]) -> f64 {
    bars.iter().map(|b| b[3]).fold(0.0, f64::max) / 1e3
}

const WAIT: Rgb = Rgb(190, 190, 190);
const TTFB: Rgb = Rgb(230, 159, 0);
const TRANSFER: Rgb = Rgb(0, 114, 178);

/// A waterfall: one row per resource in the order the page needed and then got them, a grey
/// bar while the request waits for a connection, orange from request to first byte, blue while
/// the response arrives.
pub fn waterfall(title: &str, bars: &[[f64; 4]], caption: String) -> Chart {
    let mut sorted = bars.to_vec();
    sorted.sort_by(|a, b| {
        (a[1], a[3])
            .partial_cmp(&(b[1], b[3]))
            .expect("finite times")
    });
    let seg = |from: usize, to: usize| -> Vec<((f64, f64), (f64, f64))> {
        sorted
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let y = i as f64 + 1.0;
                ((b[from] / 1e3, y), (b[to] / 1e3, y))
            })
            .collect()
    };
    let stroke = if sorted.len() > 100 { 2 } else { 4 };
    Chart::new(
        title,
        Axis::new("time since the page load started", "s").from_zero(),
        Axis::new("resource, in the order requested", "n").from_zero(),
    )
    .size(900, 560)
    .caption(caption)
    .with(Series::new("waiting for a connection", WAIT, Marks::Segments(seg(0, 1))).stroke(stroke))
    .with(Series::new("request → first byte", TTFB, Marks::Segments(seg(1, 2))).stroke(stroke))
    .with(Series::new("transfer", TRANSFER, Marks::Segments(seg(2, 3))).stroke(stroke))
}

/// Each run's waterfall (its label, the chart) as a figure of the page, its PNG
/// `waterfall-LABEL.png`.
pub fn waterfall_figures<'a>(
    page: &mut common::Report,
    charts: impl IntoIterator<Item = (&'a str, Chart)>,
) -> Result<Vec<Figure>> {
    charts
        .into_iter()
        .map(|(label, c)| page.figure(&format!("waterfall-{label}"), c, true))
        .collect()
}

/// The report's "what the analyzer found" section for the web demos: each run's client
/// capture (`DIR/RUN/captures/client-eth0.pcap`) analyzed, and every diagnosis of the
/// connections to port 80, or a line saying there was none.
pub fn analyzer_section(out_dir: &Path, runs: &[&str]) -> Result<report::Section> {
    let mut found = Vec::new();
    for run in runs {
        let pcap = RunDir::new(out_dir).lab(run).capture("client", "eth0");
        let analysis = common::analyze_captures(&[pcap], false)?;
        found.extend(common::port_findings(run, &analysis, 80));
    }
    Ok(
        report::Section::new("What the analyzer found in the captures")
            .with(report::Block::Findings(found))
            .with(report::Block::Paragraph(
                "From each run's client capture (RUN/captures/client-eth0.pcap), every connection \
             to port 80: the analyzer's diagnoses of where the time went."
                    .into(),
            )),
    )
}
