//! `latencylab report DIR`: the standard charts of any run directory, a demo's run or one of
//! `latencylab run`/`shell -o`: round trips over time (the probe programs' own and TCP's, from
//! the captures), queue delay at every link direction (the link logs), goodput of the largest
//! transfers, where each large connection's time went (the analyzer's budget) and what the
//! analyzer named, with `summary.json`'s table of the links; and for a run that ran the
//! responsiveness test (`rpm.json`), its result and where its loaded round trip went, queue by
//! queue. Writes `report.html` and one PNG per chart into DIR.
//!
//! Only what the run left is read, through the run directory's definition; nothing here
//! knows which program or demo made it, so a run with the user's own program in it gets the
//! same page. A run without captures (`--no-capture`) or link logs gets the charts it can.
//! What the charts show is decided here; how they are drawn is `report`'s, the delays and
//! diagnoses are `labnet`'s and `analyze`'s, the attribution of the round trips `rpm`'s.

use std::fs;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use analyze::{Analysis, Dir};
use anyhow::{bail, Context, Result};
use demo::responsiveness::part_color;
use labnet::run_dir::{self, RunDir, Summary};
use report::analysis::rel_s;
use report::{Axis, Block, Chart, Figure, Marks, Page, Rgb, Section, Series, Table};
use rpm::attribution::{Attribution, Part};
use rpm::report::RpmReport;

/// Queue-delay resolution, s.
const QUEUE_BIN_S: f64 = 0.1;
/// The most transfers (one direction of a connection) a chart draws: the largest.
const MAX_TRANSFERS: usize = 6;
/// The attribution chart of a run with the responsiveness test: its figure id and PNG.
const RPM_CHART: &str = "rpm";

/// What `report` wrote.
pub struct RunReport {
    pub page: PathBuf,
    pub charts: Vec<PathBuf>,
}

/// A run directory's files of one kind (`captures/*.pcap`, `links/*.log`), the first of each
/// rotated series only, in name order.
fn files(dir: &Path, ext: &str) -> Result<Vec<PathBuf>> {
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    v.sort();
    Ok(v)
}

/// The file's name without its extension (`path-down` for `links/path-down.log`).
fn stem(p: &Path) -> String {
    p.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// A chart's series: its label and its (s, ms) points.
type Labelled = (String, Vec<(f64, f64)>);

/// The probes' round trips (`rtt` lines of any program's stdout), per program and protocol,
/// on the lab's clock: a program's times count from its start, which `lab.json` gives.
fn probe_rtts(run: &RunDir) -> Result<Vec<Labelled>> {
    let lab = lab_json(run)?;
    let start_s = |name: &str| -> f64 {
        lab["programs"]
            .as_array()
            .and_then(|ps| ps.iter().find(|p| p["name"] == name))
            .and_then(|p| p["at_s"].as_f64())
            .unwrap_or(0.0)
    };
    let mut out: Vec<Labelled> = Vec::new();
    for path in files(&run.programs(), "out")? {
        let name = stem(&path);
        // Not every program writes JSON lines: those that do not have no probe to draw.
        let Ok(records) = apps::read_records(&path) else {
            continue;
        };
        let at = start_s(&name);
        for r in records {
            let (proto, t_s, rtt_ms) = match r {
                apps::Record::Rtt {
                    proto, t_s, rtt_ms, ..
                } => (proto, t_s, rtt_ms),
                apps::Record::CallRtt { t_s, rtt_ms, .. } => ("call".to_string(), t_s, rtt_ms),
                _ => continue,
            };
            let label = format!("{name} ({proto})");
            match out.iter_mut().find(|(l, _)| *l == label) {
                Some((_, pts)) => pts.push((at + t_s, rtt_ms)),
                None => out.push((label, vec![(at + t_s, rtt_ms)])),
            }
        }
    }
    Ok(out)
}

/// The largest transfers: one direction of a connection each, seen where its sender is (the
/// vantage point whose RTT samples are the largest: at the receiver they are only the ACK
/// delay), largest first.
fn transfers(a: &Analysis) -> Vec<(usize, Dir)> {
    let mut best: Vec<(usize, Dir)> = Vec::new();
    for (i, c) in a.connections.iter().enumerate() {
        for d in [Dir::AtoB, Dir::BtoA] {
            let s = &c.dir(d).stats;
            if s.data_bytes == 0 {
                continue;
            }
            let (src, dst) = match d {
                Dir::AtoB => (c.a, c.b),
                Dir::BtoA => (c.b, c.a),
            };
            let same = |&(j, e): &(usize, Dir)| {
                let o = &a.connections[j];
                let (s2, d2) = match e {
                    Dir::AtoB => (o.a, o.b),
                    Dir::BtoA => (o.b, o.a),
                };
                s2 == src && d2 == dst
            };
            let rtt = s.rtt_avg_ms.unwrap_or(0.0);
            match best.iter().position(same) {
                Some(k) => {
                    let (j, e) = best[k];
                    if a.connections[j].dir(e).stats.rtt_avg_ms.unwrap_or(0.0) < rtt {
                        best[k] = (i, d);
                    }
                }
                None => best.push((i, d)),
            }
        }
    }
    let bytes = |&(i, d): &(usize, Dir)| a.connections[i].dir(d).stats.data_bytes;
    best.sort_by_key(|t| std::cmp::Reverse(bytes(t)));
    // A request or a ping beside a bulk transfer has no goodput worth a line.
    let largest = best.first().map_or(0, bytes);
    best.retain(|t| bytes(t) * 100 >= largest);
    best.truncate(MAX_TRANSFERS);
    best
}

/// `server:5203 → client:55072`: addresses by their host's name where `lab.json` has it
/// (`HOST-IFACE` for a host with several interfaces).
fn transfer_name(a: &Analysis, (i, d): (usize, Dir), lab: &serde_json::Value) -> String {
    let c = &a.connections[i];
    let (src, dst) = match d {
        Dir::AtoB => (c.a, c.b),
        Dir::BtoA => (c.b, c.a),
    };
    let name = |sa: std::net::SocketAddr| -> String {
        let ip = sa.ip().to_string();
        let hosts = lab["hosts"].as_array().map(Vec::as_slice).unwrap_or(&[]);
        for h in hosts {
            let ifaces = h["interfaces"].as_array().map(Vec::as_slice).unwrap_or(&[]);
            for (k, f) in ifaces.iter().enumerate() {
                if f["ipv4"] == ip.as_str() || f["ipv6"] == ip.as_str() {
                    let host = h["name"].as_str().unwrap_or("?");
                    return match (k, f["name"].as_str()) {
                        (0, _) | (_, None) => format!("{host}:{}", sa.port()),
                        (_, Some(n)) => format!("{host}-{n}:{}", sa.port()),
                    };
                }
            }
        }
        sa.to_string()
    };
    format!("{} → {}", name(src), name(dst))
}

/// `lab.json` as JSON, or null when the run has none.
fn lab_json(run: &RunDir) -> Result<serde_json::Value> {
    match fs::read_to_string(run.lab_json()) {
        Ok(t) => serde_json::from_str(&t)
            .with_context(|| format!("reading {}", run.lab_json().display())),
        Err(_) => Ok(serde_json::Value::Null),
    }
}

fn links_table(s: &Summary) -> Table {
    let header = [
        "link",
        "queue",
        "packets out",
        "drops",
        "CE marks",
        "queue delay p50 / p95 / max, ms",
        "throughput, Mbit/s",
    ];
    Table {
        header: header.iter().map(|h| h.to_string()).collect(),
        rows: s
            .links
            .iter()
            .map(|l| {
                vec![
                    format!("{} {}", l.name, l.direction),
                    l.queue.clone(),
                    l.packets_out.to_string(),
                    l.drops.values().sum::<u64>().to_string(),
                    l.ce_marks.to_string(),
                    format!(
                        "{:.1} / {:.1} / {:.1}",
                        l.queue_delay_ms.p50, l.queue_delay_ms.p95, l.queue_delay_ms.max
                    ),
                    format!("{:.2}", l.throughput_bps / 1e6),
                ]
            })
            .collect(),
        caption: "From summary.json: each link direction's queue and what it did.".into(),
    }
}

/// A part narrower than this share of every bar, %, is drawn but not named in the legend
/// (a fast link's idle queue, a transmission time of microseconds).
const LEGEND_MIN_PCT: f64 = 0.5;

/// Three bars, each cut into its parts as shares: the loaded round trip `60000 / RPM` and the
/// foreign and self probes' round trips it weighs together, each labelled with its length.
fn attribution_chart(a: &Attribution) -> Chart {
    let bars = [
        (
            3.0,
            "loaded",
            format!(
                "loaded round trip, 60000 / RPM {:.0}: {:.0} ms ({} confidence)",
                a.rpm, a.loaded_rtt_ms, a.confidence
            ),
            a.parts(),
        ),
        (
            2.0,
            "foreign",
            format!(
                "foreign probes (new connections): {:.0} ms per round trip",
                a.foreign.round_trip_ms
            ),
            a.parts_of(&a.foreign),
        ),
        (
            1.0,
            "self",
            format!(
                "self probes (on the loaded connections): {:.0} ms",
                a.self_probes.round_trip_ms
            ),
            a.parts_of(&a.self_probes),
        ),
    ];
    let mut chart = Chart::new(
        "Where the loaded round trip went",
        Axis::new("share of the round trip", "%").with_range(0.0, 100.0),
        Axis::new("probes", "")
            .with_range(0.4, 3.9)
            .categories(bars.iter().map(|b| (b.0, b.1.to_string())).collect()),
    )
    .size(900, 420)
    .caption(
        "Each bar is a round trip cut by where its probes' packets were: each queue of the \
         path and the base RTT (link logs), transmission, the client and the server (the \
         probes' own packets), loss recovery, and what nothing names (grey). The top bar is \
         the RPM's: the two below, weighed as the RPM weighs them.",
    );
    // The loaded bar's parts, which name every part the bars share, in order.
    let parts = &bars[0].3;
    // Per part, in the parts' order: its width in each bar ((x0, y), (x1, y)), %.
    let mut segments: Vec<Vec<report::Segment>> = vec![Vec::new(); parts.len()];
    let mut widest = vec![0.0_f64; segments.len()];
    let mut labels = Vec::new();
    for (y, _, label, parts) in &bars {
        let ms: Vec<f64> = parts.iter().map(|(_, ms)| *ms).collect();
        for (k, segment) in report::share_bar(&ms, *y).into_iter().enumerate() {
            if let Some(s @ ((x0, _), (x1, _))) = segment {
                segments[k].push(s);
                widest[k] = widest[k].max(x1 - x0);
            }
        }
        labels.push((50.0, y + 0.32, label.clone()));
    }
    let mut nth_queue = 0;
    for (k, ((part, _), segs)) in parts.iter().zip(segments).enumerate() {
        let named = widest[k] >= LEGEND_MIN_PCT;
        let color = part_color(part, nth_queue);
        if named && matches!(part, Part::Queue { .. }) {
            nth_queue += 1;
        }
        let name = if named { part.name() } else { String::new() };
        chart.push(Series::new(name, color, Marks::Segments(segs)).stroke(28));
    }
    chart.push(Series::new("", Rgb::BLACK, Marks::Labels(labels)));
    chart
}

/// The responsiveness test's section, when the run has the client's report: its summary as
/// the client printed it, the attribution's lines and its chart (named `rpm`); what could not
/// be read or taken apart is said in the section instead, the rest of the page is made all
/// the same.
fn rpm_section(dir: &Path, summary: &Summary) -> Option<(Section, Option<Chart>)> {
    if !RunDir::new(dir).rpm_json().is_file() {
        return None;
    }
    let mut s = Section::new("Responsiveness (RPM)");
    let report: RpmReport = match crate::rpm_cmd::read_report(dir) {
        Ok(r) => r,
        Err(e) => {
            s.push(Block::Paragraph(format!(
                "The responsiveness test's report cannot be read: {e:#}."
            )));
            return Some((s, None));
        }
    };
    s.push(Block::Paragraph(
        "The responsiveness test (draft-ietf-ippm-responsiveness) as the client summed it up \
         in rpm.json: round trips per minute under load, with the idle latency before it."
            .into(),
    ));
    s.push(Block::Pre(rpm::report::text(&report)));
    let why = match (report.rpm, rpm::run::attribution_of(dir, &report, summary)) {
        (None, _) => "No RPM, so no loaded round trip to take apart.".to_string(),
        (_, Err(e)) => format!("The loaded round trip cannot be taken apart: {e}."),
        (_, Ok(None)) => "The loaded round trip cannot be taken apart: no probe left packets \
                          in the link logs."
            .to_string(),
        (_, Ok(Some(a))) => {
            s.push(Block::List(vec![a.line(), a.kinds_line()]));
            return Some((s, Some(attribution_chart(&a))));
        }
    };
    s.push(Block::Paragraph(why));
    Some((s, None))
}

/// Draws the standard charts of the run in `dir` and writes them with `report.html` there.
pub fn write(dir: &Path) -> Result<RunReport> {
    let run = RunDir::new(dir);
    let summary_path = run.summary_json();
    if !summary_path.is_file() {
        bail!(
            "{}: not a run directory (no summary.json; `latencylab run FILE -o DIR` or `latencylab shell -o DIR` makes one)",
            dir.display()
        );
    }
    let summary: Summary = serde_json::from_str(
        &fs::read_to_string(&summary_path)
            .with_context(|| format!("reading {}", summary_path.display()))?,
    )
    .with_context(|| format!("reading {}", summary_path.display()))?;

    let mut charts: Vec<(&str, Chart)> = Vec::new();

    let probes = probe_rtts(&run)?;
    if !probes.is_empty() {
        let mut c = Chart::new(
            "Round trips measured by the programs",
            Axis::new("time since the lab started", "s"),
            Axis::new("round-trip time", "ms").from_zero(),
        )
        .caption(
            "Each dot is one round trip a program of the lab measured and wrote on its stdout \
             (a probe's UDP or TCP ping, a call's media round trip). A rise above the lowest \
             values is time spent in queues.",
        );
        for (k, (label, pts)) in probes.into_iter().enumerate() {
            c.push(Series::scatter(label, Rgb::nth(k), pts).keep_in_legend());
        }
        charts.push(("probe-rtt", c));
    }

    let mut queue = Chart::new(
        "Queue delay at each link direction",
        Axis::new("time since the lab started", "s"),
        Axis::new("queue delay", "ms").from_zero(),
    )
    .caption(format!(
        "The longest time a packet leaving the queue waited in it, per {:.0} ms, from the link \
         logs; directions whose queue never held a packet are left out.",
        QUEUE_BIN_S * 1e3
    ));
    let mut any_queue = false;
    for (k, log) in files(&run.links(), "log")?.iter().enumerate() {
        let f = fs::File::open(log).with_context(|| format!("opening {}", log.display()))?;
        let name = log.display().to_string();
        let s = run_dir::queue_delay_series(&name, BufReader::new(f), QUEUE_BIN_S)?;
        if s.iter().any(|p| p.1 > 0.0) {
            queue.push(Series::line(stem(log), Rgb::nth(k), s).keep_in_legend());
            any_queue = true;
        }
    }
    if any_queue {
        charts.push(("queue-delay", queue));
    }

    let pcaps = files(&run.captures(), "pcap")?;
    let lab = lab_json(&run)?;
    let analysis = if pcaps.is_empty() {
        None
    } else {
        Some(demo::analyze_captures(&pcaps, true)?)
    };
    let mut budget = Vec::new();
    if let Some(a) = &analysis {
        let chosen = transfers(a);
        if !chosen.is_empty() {
            let mut rtt = Chart::new(
                "TCP round trips of the largest transfers",
                Axis::new("time since the first packet captured", "s"),
                Axis::new("round-trip time", "ms").from_zero(),
            )
            .caption(
                "Each dot is one RTT sample of a transfer's data, seen at its sender (ACKs of \
                 segments never retransmitted); a rise above the minimum is time in queues.",
            );
            let mut goodput = Chart::new(
                "Goodput of the largest transfers",
                Axis::new("time since the first packet captured", "s"),
                Axis::new("goodput", "Mbit/s").from_zero(),
            )
            .caption(
                "Bytes sent for the first time, per bin, seen at each transfer's sender: \
                 retransmissions do not count. A bin is never shorter than the connection's \
                 round trip, over which a sender's rate is what the path carries rather than \
                 its bursts.",
            );
            for (k, &(i, d)) in chosen.iter().enumerate() {
                let name = transfer_name(a, (i, d), &lab);
                let s = &a.connections[i].dir(d).series;
                let pts = s
                    .rtt
                    .iter()
                    .map(|r| (rel_s(a, r.time), r.rtt.as_secs_f64() * 1e3))
                    .collect();
                rtt.push(Series::scatter(name.clone(), Rgb::nth(k), pts).keep_in_legend());
                let g = report::analysis::rate_steps(a, &s.throughput, |p| p.goodput_bps);
                goodput.push(Series::step(name, Rgb::nth(k), g).keep_in_legend());
            }
            charts.push(("tcp-rtt", rtt));
            charts.push(("goodput", goodput));
            let mut seen = Vec::new();
            for &(i, _) in &chosen {
                if !seen.contains(&i) {
                    seen.push(i);
                    budget.push(report::budget::bar(i, &a.connections[i]));
                }
            }
        }
    }

    let rpm = rpm_section(dir, &summary);
    let rpm_chart = rpm.as_ref().and_then(|(_, c)| c.as_ref());
    let mut page = Page::new(format!("latencylab report: {}", dir.display()));
    page.subtitle = format!(
        "{} link directions, {} captures, {} charts.",
        summary.links.len(),
        pcaps.len(),
        charts.len() + usize::from(rpm_chart.is_some())
    );
    page.push(Section::new("Links").with(Block::Table(links_table(&summary))));
    let mut paths = Vec::new();
    if let Some((mut section, chart)) = rpm {
        if let Some(chart) = chart {
            let p = run.chart_png(RPM_CHART);
            chart
                .write_png(&p)
                .with_context(|| format!("writing {}", p.display()))?;
            paths.push(p);
            section.push(Block::Figure(Figure::from_chart(RPM_CHART, &chart, false)?));
        }
        page.push(section);
    }
    let mut figures = Section::new("Charts");
    for (name, chart) in &charts {
        let p = run.chart_png(name);
        chart
            .write_png(&p)
            .with_context(|| format!("writing {}", p.display()))?;
        paths.push(p);
        figures.push(Block::Figure(Figure::from_chart(name, chart, true)?));
    }
    if charts.is_empty() {
        figures.push(Block::Paragraph(
            "Nothing to draw: no program wrote round trips, no queue held a packet and there is \
             no capture."
                .into(),
        ));
    }
    page.push(figures);
    if let Some(a) = &analysis {
        let mut s = Section::new("Where each connection's time went");
        for f in budget {
            s.push(Block::Figure(f));
        }
        s.push(report::findings::analyzer_findings([("run", a)]));
        page.push(s);
    }
    let html = run.report_html();
    page.write(&html)
        .with_context(|| format!("writing {}", html.display()))?;
    Ok(RunReport {
        page: html,
        charts: paths,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_without_a_summary_is_named_as_not_a_run() {
        let d = std::env::temp_dir().join(format!("cli-report-none-{}", std::process::id()));
        fs::create_dir_all(&d).unwrap();
        let e = write(&d).err().expect("no summary.json");
        fs::remove_dir_all(&d).unwrap();
        let e = format!("{e:#}");
        assert!(e.contains("not a run directory (no summary.json"), "{e}");
    }

    #[test]
    fn the_attribution_chart_names_each_queue_that_held_the_probes_and_leaves_slivers_unnamed() {
        use rpm::attribution::{KindAttribution, QueuePart};
        let queue = |link: &str, side: &str, ms: f64| QueuePart {
            link: link.into(),
            side: side.into(),
            queue: "fifo limit 1000".into(),
            ms,
            share: ms / 200.0,
        };
        let kind = |rt: f64, queues_ms: Vec<f64>, client: f64| KindAttribution {
            round_trip_ms: rt,
            base_rtt_ms: 20.0,
            transmission_ms: 0.0,
            loss_recovery_ms: 0.0,
            client_send_ms: client,
            server_ms: 0.0,
            hosts_ms: rt - 20.0 - client - queues_ms.iter().sum::<f64>(),
            queues_ms,
            probes: 10,
            probes_by_packet: 10,
        };
        let a = Attribution {
            rpm: 300.0,
            confidence: "High".into(),
            loaded_rtt_ms: 200.0,
            // The Wi-Fi hop held the probes 0.1 ms: 0.05 % of the round trip.
            queues: vec![queue("wifi", "up", 0.1), queue("dsl", "up", 150.0)],
            base_rtt_ms: 20.0,
            transmission_ms: 0.0,
            loss_recovery_ms: 0.0,
            client_send_ms: 29.9,
            server_ms: 0.0,
            hosts_ms: 0.0,
            foreign: kind(170.0, vec![0.1, 149.9], 0.0),
            self_probes: kind(240.0, vec![0.1, 150.0], 69.9),
        };
        let c = attribution_chart(&a);
        let names: Vec<String> = c.legend().into_iter().map(|l| l.name).collect();
        assert_eq!(names, ["dsl up FIFO queue", "base RTT", "client"]);
        // The first queue named gets the first queue colour, whatever slivers came before.
        assert_eq!(c.legend()[0].color, part_color(&a.parts()[1].0, 0));
        let labels = c.series.iter().find_map(|s| match &s.marks {
            Marks::Labels(v) => Some(v.clone()),
            _ => None,
        });
        let labels: Vec<String> = labels.unwrap().into_iter().map(|l| l.2).collect();
        assert_eq!(
            labels,
            [
                "loaded round trip, 60000 / RPM 300: 200 ms (High confidence)",
                "foreign probes (new connections): 170 ms per round trip",
                "self probes (on the loaded connections): 240 ms"
            ]
        );
        assert!(c.to_png().is_ok());
    }

    #[test]
    fn a_probes_round_trips_are_placed_on_the_labs_clock_from_its_start() {
        let d = std::env::temp_dir().join(format!("cli-report-probe-{}", std::process::id()));
        let run = RunDir::new(&d);
        fs::create_dir_all(run.programs()).unwrap();
        fs::write(
            run.lab_json(),
            r#"{"programs":[{"name":"probe","host":"c","at_s":0.5,"run":"x","wait":true}]}"#,
        )
        .unwrap();
        fs::write(
            run.program_out("probe"),
            "{\"type\":\"rtt\",\"t_s\":1.0,\"proto\":\"udp\",\"seq\":1,\"rtt_ms\":21.5}\n",
        )
        .unwrap();
        fs::write(run.program_out("other"), "not json\n").unwrap();
        let p = probe_rtts(&run).unwrap();
        fs::remove_dir_all(&d).unwrap();
        assert_eq!(p, vec![("probe (udp)".to_string(), vec![(1.5, 21.5)])]);
    }
}
