//! Glue from the analyzer's results (`analyze::Analysis`) to this crate's pictures: the
//! time-sequence graph, RTT, throughput and bytes-in-flight charts per direction, the
//! handshake-time CDF across connections, the ladder diagram of each connection seen at both
//! ends, tcptrace-style `.xpl` files, and the HTML page.
//!
//! Times on every x axis are seconds since the analysis epoch (the first packet of all
//! captures), so graphs of one analysis share a time base. Files are named as tcptrace names
//! them: connection 1's hosts are `a` and `b`, connection 2's `c` and `d`, and so on
//! (`a2b_tsg.xpl`, `b2a_tsg.png`), and a connection's ladder after its two hosts
//! (`a_b_ladder.png`). Only directions that carried data are drawn. This module
//! computes no statistics of its own beyond what a caption or a table cell needs.

use crate::chart::{Axis, Chart, Rgb, Series};
use crate::html::{Block, Figure, Page, Section, Table};
use crate::ladder::{Ladder, LadderArrow, LadderPacket};
use crate::tsg::{TimeSequence, TsgMark, TsgMarkKind, TsgPoint, TsgSack, TsgSegment};
use crate::xplot::{Xplot, XplotAxis, XplotColor, XplotCommand};
use crate::{write_file, ReportError};
use analyze::ladder::Window;
use analyze::{Analysis, CapturePoint, Connection, Dir, Direction, MarkKind, SegmentKind};
use std::path::{Path, PathBuf};

/// Connections with their own section and figures in the HTML page (the largest by bytes);
/// the others are listed in the connections table only, to keep the page light.
pub const MAX_PAGE_CONNECTIONS: usize = 12;

/// Segment counts above which the time-sequence graph is thinned (see
/// [`TimeSequence::thinned`]): generous for PNG files, tighter for the page, where every mark
/// is an SVG element the browser must hold.
const PNG_MAX_SEGMENTS: usize = 30_000;
const PNG_COLUMNS: usize = 4_000;
const PAGE_MAX_SEGMENTS: usize = 8_000;
const PAGE_COLUMNS: usize = 2_400;

/// Pixel size of the smaller charts shown two abreast in the page: drawn smaller so that their
/// text keeps a readable size when the browser scales them to half the page width.
const ROW_W: u32 = 640;
const ROW_H: u32 = 420;

const FLAG_FIN: u8 = 0x01;
const FLAG_SYN: u8 = 0x02;
const FLAG_RST: u8 = 0x04;

/// Seconds from the analysis epoch to `t`.
pub fn rel_s(a: &Analysis, t: wire::Instant) -> f64 {
    secs_since(a.epoch, t)
}

/// A direction's rate per bin as a staircase of (s since the epoch, Mbit/s), the value `rate`
/// picks (goodput or throughput, bit/s), the last bin held until its end.
pub fn rate_steps(
    a: &Analysis,
    bins: &[analyze::ThroughputPoint],
    rate: impl Fn(&analyze::ThroughputPoint) -> f64,
) -> Vec<(f64, f64)> {
    let mut v: Vec<(f64, f64)> = bins
        .iter()
        .map(|p| (rel_s(a, p.time), rate(p) / 1e6))
        .collect();
    if let Some(last) = bins.last() {
        v.push((
            rel_s(a, last.time) + last.width.as_secs_f64(),
            rate(last) / 1e6,
        ));
    }
    v
}

/// Seconds from `origin` to `t`, subtracting in integer nanoseconds first: epoch times as
/// `f64` nanoseconds are only good to about 256 ns, too coarse for a zoomed graph.
fn secs_since(origin: wire::Instant, t: wire::Instant) -> f64 {
    (i128::from(t.as_nanos()) - i128::from(origin.as_nanos())) as f64 / 1e9
}

/// A ladder diagram's arrows from the analyzer's, the connection's host `a` the upper one,
/// times in seconds since `origin`.
pub fn ladder_arrows(arrows: &[analyze::ladder::Arrow], origin: wire::Instant) -> Vec<LadderArrow> {
    use analyze::ladder::Packet;
    arrows
        .iter()
        .map(|a| LadderArrow {
            from_upper: a.dir == Dir::AtoB,
            depart_s: secs_since(origin, a.depart),
            arrive_s: secs_since(origin, a.arrive),
            packet: match a.packet {
                Packet::Syn { ack: false } => LadderPacket::Syn,
                Packet::Syn { ack: true } => LadderPacket::SynAck,
                Packet::Data { len, .. } => LadderPacket::Data { bytes: len },
                Packet::Fin { .. } => LadderPacket::Fin,
                Packet::PureAck { .. } => LadderPacket::PureAck,
            },
        })
        .collect()
}

/// The ladder diagram of one connection seen at both ends, as `analyze::ladder::both_ends`
/// pairs its views: `near_a` in host `a`'s capture, `near_b` in host `b`'s (indices into
/// `a.connections`), over `window`. Times are seconds since the analysis epoch, as on every
/// other plot, so that a window read off one of them can be asked for. `None` when no packet
/// in the window reached the other end.
pub fn ladder_chart(a: &Analysis, near_a: usize, near_b: usize, window: Window) -> Option<Chart> {
    let (ca, cb) = (&a.connections[near_a], &a.connections[near_b]);
    let arrows = analyze::ladder::select(a.epoch, ca, cb, window);
    let drawn = ladder_arrows(&arrows, a.epoch);
    let mut start = drawn.iter().map(|l| l.depart_s).reduce(f64::min)?;
    let mut end = drawn.iter().map(|l| l.arrive_s).fold(start, f64::max);
    // A window asked for is shown whole: a quiet end of it is part of the answer.
    if let Window::Span { from, to } = window {
        start = start.min(from.as_secs_f64());
        end = end.max(to.as_secs_f64());
    }
    let pad = (end - start).max(1e-3) * 0.03;
    // The active opener is the client; without the SYN in sight, only `a` and `b`.
    let (upper, lower) = if ca.handshake.syn_time.is_some() {
        ("client", "server")
    } else {
        ("a", "b")
    };
    let one_way_ms = |dir: Dir| {
        let mut ms: Vec<f64> = arrows
            .iter()
            .filter(|l| l.dir == dir)
            .map(|l| (l.arrive - l.depart).as_secs_f64() * 1e3)
            .collect();
        ms.sort_by(f64::total_cmp);
        ms.get(ms.len() / 2)
            .map_or("–".to_string(), |m| format!("{m:.1} ms"))
    };
    let what = match window {
        Window::Opening { .. } => format!("its first {} packets", drawn.len()),
        Window::Span { from, to } => format!(
            "its {} packets from {:.3} to {:.3} s",
            drawn.len(),
            from.as_secs_f64(),
            to.as_secs_f64()
        ),
    };
    let capture = |c: &Connection| {
        let name = &a.captures[c.vantage.capture].name;
        let file = Path::new(name).file_name().map(|f| f.to_string_lossy());
        file.map_or(name.clone(), |f| f.into_owned())
    };
    let caption = format!(
        "Each line is one packet, from when it left one host (in that host's capture) to when it \
         reached the other (in the other's): its run across is the one-way delay, a median {} \
         {upper}→{lower} and {} back. A host's wait between a packet's arrival and its next \
         departure is the host's own time: its application, or a delayed ACK.",
        one_way_ms(Dir::AtoB),
        one_way_ms(Dir::BtoA),
    );
    Some(
        Ladder {
            title: format!("Connection {}, {what}, at both ends", near_a + 1),
            caption,
            time_axis: "time since the first packet of all captures".into(),
            x_range_s: (start - pad, end + pad),
            upper_host: format!("{upper} {} ({})", ca.a, capture(ca)),
            lower_host: format!("{lower} {} ({})", ca.b, capture(cb)),
            data_color: Rgb::nth(1),
            ack_color: crate::tsg::colors::ACK,
            arrows: drawn,
            notes: Vec::new(),
        }
        .chart()
        // Taller than a demo's exchange: a connection's opening stacks more labels.
        .size(900, 420),
    )
}

/// The file-name stem of a connection's figures about both directions, e.g. `a_b`.
pub fn connection_stem(index: usize) -> String {
    let (a, b) = host_letters(index);
    format!("{a}_{b}")
}

/// tcptrace's host letters for connection `index` (0-based): a/b, c/d, …, y/z, aa/ab, ….
pub fn host_letters(index: usize) -> (String, String) {
    (letters(2 * index), letters(2 * index + 1))
}

fn letters(mut n: usize) -> String {
    // Bijective base 26: a..z, aa..zz, aaa...
    let mut out = Vec::new();
    loop {
        out.push(b'a' + (n % 26) as u8);
        if n < 26 {
            break;
        }
        n = n / 26 - 1;
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}

/// The file-name stem of one direction, e.g. `a2b` or `d2c`.
pub fn direction_stem(index: usize, dir: Dir) -> String {
    let (a, b) = host_letters(index);
    match dir {
        Dir::AtoB => format!("{a}2{b}"),
        Dir::BtoA => format!("{b}2{a}"),
    }
}

fn endpoints(c: &Connection, dir: Dir) -> (String, String) {
    match dir {
        Dir::AtoB => (c.a.to_string(), c.b.to_string()),
        Dir::BtoA => (c.b.to_string(), c.a.to_string()),
    }
}

/// A direction is drawn when it carried payload and its series were kept.
fn drawable(d: &Direction) -> bool {
    d.stats.data_bytes > 0 && !d.series.segments.is_empty()
}

/// The time-sequence graph of one direction, at full detail, ranges fitted to the data.
/// Demos comparing two runs set `x_range_s` / `y_range_bytes` on the result.
pub fn time_sequence(a: &Analysis, c: &Connection, dir: Dir) -> TimeSequence {
    let d = c.dir(dir);
    let s = &d.series;
    let t = |i| rel_s(a, i);
    let (src, dst) = endpoints(c, dir);
    let mut out = TimeSequence {
        title: format!("{src} → {dst}"),
        caption: tsg_caption(d),
        ..Default::default()
    };
    for seg in &s.segments {
        let time_s = t(seg.time);
        let end = seg.seq + u64::from(seg.len);
        if seg.len > 0 {
            out.segments.push(TsgSegment {
                time_s,
                seq_start: seg.seq,
                seq_end: end,
                retransmit: seg.kind == SegmentKind::Retransmit,
            });
        }
        let mut mark = |seq, kind| out.marks.push(TsgMark { time_s, seq, kind });
        match seg.kind {
            SegmentKind::OutOfOrder => mark(end, TsgMarkKind::OutOfOrder),
            SegmentKind::WindowProbe => mark(end, TsgMarkKind::WindowProbe),
            SegmentKind::New | SegmentKind::Retransmit => {}
        }
        if seg.flags & FLAG_SYN != 0 {
            mark(seg.seq, TsgMarkKind::Syn);
        }
        if seg.flags & FLAG_FIN != 0 {
            mark(end, TsgMarkKind::Fin);
        }
        if seg.flags & FLAG_RST != 0 {
            mark(end, TsgMarkKind::Rst);
        }
    }
    out.acks = s
        .acks
        .iter()
        .map(|p| TsgPoint {
            time_s: t(p.time),
            seq: p.seq,
        })
        .collect();
    out.window_ends = s
        .windows
        .iter()
        .map(|w| TsgPoint {
            time_s: t(w.time),
            seq: w.ack + w.window_bytes,
        })
        .collect();
    out.marks.extend(
        s.windows
            .iter()
            .filter(|w| w.window_bytes == 0)
            .map(|w| TsgMark {
                time_s: t(w.time),
                seq: w.ack,
                kind: TsgMarkKind::ZeroWindow,
            }),
    );
    out.sacks = s
        .sacks
        .iter()
        .map(|b| TsgSack {
            time_s: t(b.time),
            left: b.left,
            right: b.right,
        })
        .collect();
    out.marks.extend(s.marks.iter().map(|m| TsgMark {
        time_s: t(m.time),
        seq: m.seq,
        kind: match m.kind {
            MarkKind::Ce => TsgMarkKind::Ce,
            MarkKind::Ece => TsgMarkKind::Ece,
            MarkKind::Cwr => TsgMarkKind::Cwr,
        },
    }));
    out
}

fn tsg_caption(d: &Direction) -> String {
    let st = &d.stats;
    let mut s = format!(
        "Black I-beams are data as sent ({} in {} packets) and the green ACK line follows about \
         one RTT behind, under the yellow receive-window edge",
        bytes(st.data_bytes),
        st.data_packets
    );
    if st.retransmitted_packets > 0 {
        s += &format!(
            "; {} packets were retransmitted (red R)",
            st.retransmitted_packets
        );
    }
    if st.ce > 0 {
        s += &format!("; {} packets arrived CE-marked", st.ce);
    }
    s.push('.');
    s
}

/// RTT samples of one direction's data over time.
pub fn rtt_chart(a: &Analysis, c: &Connection, dir: Dir) -> Chart {
    let d = c.dir(dir);
    let (src, dst) = endpoints(c, dir);
    let pts: Vec<(f64, f64)> = d
        .series
        .rtt
        .iter()
        .map(|r| (rel_s(a, r.time), r.rtt.as_secs_f64() * 1e3))
        .collect();
    let st = &d.stats;
    let caption = match (st.rtt_min_ms, st.rtt_avg_ms, st.rtt_max_ms) {
        (Some(lo), Some(avg), Some(hi)) => format!(
            "Each dot is one RTT sample of {src}'s data (ACKs of segments never retransmitted, \
             Karn's rule): min {lo:.1} ms, average {avg:.1} ms, max {hi:.1} ms; a rise above the \
             minimum is time spent in queues."
        ),
        _ => "No RTT samples: no segment was ACKed without having been retransmitted.".into(),
    };
    Chart::new(
        format!("Round-trip time: {src} → {dst}"),
        Axis::new("time", "s"),
        Axis::new("round-trip time", "ms").from_zero(),
    )
    .caption(caption)
    .with(Series::scatter("RTT sample", Rgb::nth(0), pts).keep_in_legend())
}

/// Goodput and throughput of one direction over time, in Mbit/s per bin.
pub fn throughput_chart(a: &Analysis, c: &Connection, dir: Dir) -> Chart {
    let d = c.dir(dir);
    let (src, dst) = endpoints(c, dir);
    let tp = &d.series.throughput;
    let bin_ms = tp.first().map_or(0.0, |p| p.width.as_secs_f64() * 1e3);
    Chart::new(
        format!("Throughput: {src} → {dst}"),
        Axis::new("time", "s"),
        Axis::new("rate", "Mbit/s").from_zero(),
    )
    .caption(format!(
        "Payload rate per {bin_ms:.0} ms bin (never shorter than the connection's round trip, \
         within which a rate is a sender's bursts): goodput counts bytes sent for the first \
         time, throughput also counts retransmissions; a gap between them is bandwidth spent on \
         loss."
    ))
    .with(
        Series::step(
            "throughput (with retransmissions)",
            Rgb::nth(1),
            rate_steps(a, tp, |p| p.throughput_bps),
        )
        .keep_in_legend(),
    )
    .with(
        Series::step("goodput", Rgb::nth(0), rate_steps(a, tp, |p| p.goodput_bps)).keep_in_legend(),
    )
}

/// Bytes sent and not yet cumulatively ACKed, over time.
pub fn in_flight_chart(a: &Analysis, c: &Connection, dir: Dir) -> Chart {
    let d = c.dir(dir);
    let (src, dst) = endpoints(c, dir);
    let pts = d
        .series
        .in_flight
        .iter()
        .map(|p| (rel_s(a, p.time), p.bytes as f64))
        .collect();
    Chart::new(
        format!("Bytes in flight: {src} → {dst}"),
        Axis::new("time", "s"),
        Axis::new("in flight", "bytes").from_zero(),
    )
    .caption(format!(
        "Data sent but not yet acknowledged, after each segment (peak {}): the sender's \
         congestion window at work, plus whatever sits in queues.",
        bytes(d.stats.max_in_flight_bytes)
    ))
    .with(Series::step("bytes in flight", Rgb::nth(2), pts).keep_in_legend())
}

/// The CDF of handshake times across connections, each measured where the capture sat
/// (SYN to SYN-ACK at the client, SYN-ACK to ACK at the server, SYN to ACK elsewhere: see
/// `analyze::handshakes`), with a line at 100 ms; `None` when no handshake was captured.
pub fn handshake_cdf(a: &Analysis) -> Option<Chart> {
    let h = a.handshakes();
    let (p50, p90, under) = (
        h.percentile_ms(50.0)?,
        h.percentile_ms(90.0)?,
        h.under_pct(100.0)?,
    );
    let max = h.samples_ms.last().copied().unwrap_or(0.0);
    Some(
        Chart::new(
            "Handshake time across connections",
            Axis::new(format!("handshake time ({})", h.what()), "ms").from_zero(),
            Axis::new("connections with handshake ≤ x", "%").with_range(0.0, 100.0),
        )
        .caption(format!(
            "{} connection{}: median {p50:.1} ms, 90th percentile {p90:.1} ms, slowest {max:.1} ms; \
             {under:.0}% under 100 ms (the grey line). A step near 1 s or 3 s is a retransmitted SYN.",
            h.count(),
            if h.count() == 1 { "" } else { "s" }
        ))
        .with(Series::line("100 ms", Rgb(150, 150, 150), vec![(100.0, 0.0), (100.0, 100.0)]).stroke(1))
        .with(Series::cdf("handshake time", Rgb::nth(0), &h.samples_ms).keep_in_legend()),
    )
}

/// Directions to draw, as (connection index, direction).
fn drawn_directions(a: &Analysis) -> Vec<(usize, Dir)> {
    let mut v = Vec::new();
    for (i, c) in a.connections.iter().enumerate() {
        for dir in [Dir::AtoB, Dir::BtoA] {
            if drawable(c.dir(dir)) {
                v.push((i, dir));
            }
        }
    }
    v
}

/// Refuses to draw empty pictures when the analyzer was run without series.
fn check_series(a: &Analysis) -> Result<(), ReportError> {
    let data = a
        .connections
        .iter()
        .any(|c| c.a2b.stats.data_bytes > 0 || c.b2a.stats.data_bytes > 0);
    if data && drawn_directions(a).is_empty() {
        return Err(ReportError::NoSeries);
    }
    Ok(())
}

fn create_dir(dir: &Path) -> Result<(), ReportError> {
    std::fs::create_dir_all(dir).map_err(|source| ReportError::Io {
        path: dir.to_path_buf(),
        source,
    })
}

/// Writes SVG and PNG files into `dir` (created if needed): per direction with data,
/// `a2b_tsg`, `a2b_rtt`, `a2b_tput`, `a2b_inflight`; per connection seen at both ends,
/// `a_b_ladder` over `ladder` (named after its view at host `a`); and `handshake_cdf` when any
/// handshake was seen. Returns the paths written, in order.
pub fn write_plots(a: &Analysis, dir: &Path, ladder: Window) -> Result<Vec<PathBuf>, ReportError> {
    check_series(a)?;
    create_dir(dir)?;
    let mut written = Vec::new();
    let mut emit = |stem: String, chart: Chart| -> Result<(), ReportError> {
        let svg = dir.join(format!("{stem}.svg"));
        chart.write_svg(&svg)?;
        let png = dir.join(format!("{stem}.png"));
        chart.write_png(&png)?;
        written.push(svg);
        written.push(png);
        Ok(())
    };
    for (i, d) in drawn_directions(a) {
        let c = &a.connections[i];
        let stem = direction_stem(i, d);
        let tsg = time_sequence(a, c, d).thinned(PNG_MAX_SEGMENTS, PNG_COLUMNS);
        emit(format!("{stem}_tsg"), tsg.chart())?;
        if !c.dir(d).series.rtt.is_empty() {
            emit(format!("{stem}_rtt"), rtt_chart(a, c, d))?;
        }
        if !c.dir(d).series.throughput.is_empty() {
            emit(format!("{stem}_tput"), throughput_chart(a, c, d))?;
        }
        if !c.dir(d).series.in_flight.is_empty() {
            emit(format!("{stem}_inflight"), in_flight_chart(a, c, d))?;
        }
    }
    for (near_a, near_b) in analyze::ladder::both_ends(a) {
        if let Some(chart) = ladder_chart(a, near_a, near_b, ladder) {
            emit(format!("{}_ladder", connection_stem(near_a)), chart)?;
        }
    }
    if let Some(cdf) = handshake_cdf(a) {
        emit("handshake_cdf".into(), cdf)?;
    }
    Ok(written)
}

/// Writes tcptrace-style xplot files into `dir`: per direction with data, `a2b_tsg.xpl`
/// (time-sequence graph), `a2b_rtt.xpl` (RTT samples, ms) and `a2b_tput.xpl` (throughput,
/// bytes per second as tcptrace plots it). Times are absolute (`timeval`).
pub fn write_xplot(a: &Analysis, dir: &Path) -> Result<Vec<PathBuf>, ReportError> {
    check_series(a)?;
    create_dir(dir)?;
    let ns = a.epoch.as_nanos();
    let origin = Some((ns / 1_000_000_000, (ns % 1_000_000_000) as u32));
    let mut written = Vec::new();
    for (i, d) in drawn_directions(a) {
        let c = &a.connections[i];
        let stem = direction_stem(i, d);
        let (src, dst) = endpoints(c, d);
        let tsg = time_sequence(a, c, d);
        let mut files = vec![(format!("{stem}_tsg.xpl"), tsg.xplot(origin))];

        let mut rtt = Xplot::new(XplotAxis::Timeval, XplotAxis::Double);
        rtt.origin = origin;
        rtt.title = format!("{src}_==>_{dst} (rtt samples)");
        rtt.xlabel = "time".into();
        rtt.ylabel = "rtt (ms)".into();
        for r in &c.dir(d).series.rtt {
            rtt.push(
                XplotColor::Green,
                XplotCommand::Dot(rel_s(a, r.time), r.rtt.as_secs_f64() * 1e3),
            );
        }
        files.push((format!("{stem}_rtt.xpl"), rtt));

        let mut tput = Xplot::new(XplotAxis::Timeval, XplotAxis::Double);
        tput.origin = origin;
        tput.title = format!("{src}_==>_{dst} (throughput)");
        tput.xlabel = "time".into();
        tput.ylabel = "thruput (bytes/s)".into();
        let tp = &c.dir(d).series.throughput;
        for p in tp {
            let (t0, t1) = (rel_s(a, p.time), rel_s(a, p.time) + p.width.as_secs_f64());
            let (good, all) = (p.goodput_bps / 8.0, p.throughput_bps / 8.0);
            tput.push(XplotColor::Blue, XplotCommand::Line(t0, good, t1, good));
            tput.push(XplotColor::Red, XplotCommand::Dot((t0 + t1) / 2.0, all));
        }
        files.push((format!("{stem}_tput.xpl"), tput));

        for (name, x) in files {
            let path = dir.join(name);
            x.write(&path)?;
            written.push(path);
        }
    }
    Ok(written)
}

/// The per-direction statistics of one connection as a table (statistic, a→b, b→a).
pub fn stats_table(c: &Connection) -> Table {
    let (x, y) = (&c.a2b, &c.b2a);
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut row = |name: &str, f: &dyn Fn(&Direction) -> String| {
        rows.push(vec![name.to_string(), f(x), f(y)]);
    };
    let int = |v: u64| v.to_string();
    let ms = |v: Option<f64>| v.map_or("–".to_string(), |v| format!("{v:.2}"));
    // Where the capture sat decides what the RTT and in-flight rows mean (docs/analyze.md).
    row("capture point (this direction)", &|d| {
        d.capture_point.name().to_string()
    });
    row("packets", &|d| int(d.stats.packets));
    row("data packets", &|d| int(d.stats.data_packets));
    row("data bytes", &|d| int(d.stats.data_bytes));
    row("unique bytes", &|d| int(d.stats.unique_bytes));
    row("retransmitted packets", &|d| {
        int(d.stats.retransmitted_packets)
    });
    row("retransmitted bytes", &|d| int(d.stats.retransmitted_bytes));
    row("out-of-order packets", &|d| {
        int(d.stats.out_of_order_packets)
    });
    row("pure ACKs", &|d| int(d.stats.pure_acks));
    row("duplicate ACKs", &|d| int(d.stats.dup_acks));
    row("packets with SACK", &|d| int(d.stats.sack_packets));
    row("zero-window advertisements", &|d| int(d.stats.zero_window));
    row("zero-window probes", &|d| int(d.stats.window_probes));
    row("RTT samples", &|d| int(d.stats.rtt_samples));
    row("RTT min (ms)", &|d| ms(d.stats.rtt_min_ms));
    row("RTT avg (ms)", &|d| ms(d.stats.rtt_avg_ms));
    row("RTT max (ms)", &|d| ms(d.stats.rtt_max_ms));
    row("RTT stdev (ms)", &|d| ms(d.stats.rtt_stdev_ms));
    row("max in flight (bytes)", &|d| {
        int(d.stats.max_in_flight_bytes)
    });
    row(
        "window min / max (bytes)",
        &|d| match (d.stats.min_window_bytes, d.stats.max_window_bytes) {
            (Some(lo), Some(hi)) => format!("{lo} / {hi}"),
            _ => "–".into(),
        },
    );
    row("throughput (Mbit/s)", &|d| {
        format!("{:.3}", d.stats.throughput_bps / 1e6)
    });
    row("ECT(0) / ECT(1) / not-ECT", &|d| {
        format!("{} / {} / {}", d.stats.ect0, d.stats.ect1, d.stats.not_ect)
    });
    row("CE / ECE / CWR", &|d| {
        format!("{} / {} / {}", d.stats.ce, d.stats.ece, d.stats.cwr)
    });
    row("SYN / FIN / RST", &|d| {
        format!("{} / {} / {}", d.stats.syn, d.stats.fin, d.stats.rst)
    });
    row("MSS option (bytes)", &|d| {
        d.options.mss.map_or("–".into(), |m| m.to_string())
    });
    row("window scale (applied)", &|d| {
        d.options.window_scale.map_or("–".into(), |w| {
            format!("{w} ({})", d.options.window_scale_applied)
        })
    });
    row("SACK permitted / timestamps", &|d| {
        format!(
            "{} / {}",
            yes(d.options.sack_permitted),
            yes(d.options.timestamps)
        )
    });
    Table {
        header: vec![
            "statistic".into(),
            format!("{} → {}", c.a, c.b),
            format!("{} → {}", c.b, c.a),
        ],
        rows,
        caption: String::new(),
    }
}

fn yes(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

/// One line per diagnosis: what, which direction, when, how much, why.
fn diagnosis_items(a: &Analysis, index: usize, c: &Connection) -> Vec<(String, String)> {
    c.diagnoses
        .iter()
        .map(|d| {
            let dir = d
                .dir
                .map_or(String::new(), |x| format!(" {}", direction_stem(index, x)));
            (
                d.kind.name().to_string(),
                format!(
                    "connection {}{dir}, {:.3}–{:.3} s, {:.1} ms: {}",
                    index + 1,
                    rel_s(a, d.start),
                    rel_s(a, d.end),
                    d.delay_ms,
                    d.summary
                ),
            )
        })
        .collect()
}

/// The whole analysis as one self-contained HTML page; a connection seen at both ends gets its
/// ladder diagram over `ladder` in its section at host `a`.
pub fn html_page(a: &Analysis, ladder: Window) -> Result<String, ReportError> {
    check_series(a)?;
    let names: Vec<&str> = a.captures.iter().map(|c| c.name.as_str()).collect();
    let mut page = Page::new(format!("latencylab analyze: {}", names.join(", ")));
    let packets: u64 = a.captures.iter().map(|c| c.packets).sum();
    page.subtitle = format!(
        "{packets} packets, {} TCP connections, {} UDP flows; times are seconds since the first packet.",
        a.connections.len(),
        a.udp.len()
    );

    let mut findings = Vec::new();
    for (i, c) in a.connections.iter().enumerate() {
        findings.extend(diagnosis_items(a, i, c));
    }
    page.push(Section::new("Findings").with(if findings.is_empty() {
        Block::Paragraph("No cause of delay was found in these connections.".into())
    } else {
        Block::Findings(findings)
    }));

    page.push(Section::new("Connections").with(Block::Table(connections_table(a))));

    // The largest connections get their own section.
    let mut order: Vec<usize> = (0..a.connections.len()).collect();
    order.sort_by_key(|&i| {
        let c = &a.connections[i];
        std::cmp::Reverse(c.a2b.stats.data_bytes + c.b2a.stats.data_bytes)
    });
    order.truncate(MAX_PAGE_CONNECTIONS);
    order.sort_unstable();
    let ends = analyze::ladder::both_ends(a);
    for i in order {
        let ladder = ends
            .iter()
            .find(|e| e.0 == i)
            .and_then(|&(near_a, near_b)| ladder_chart(a, near_a, near_b, ladder));
        page.push(connection_section(a, i, ladder)?);
    }
    if a.connections.len() > MAX_PAGE_CONNECTIONS {
        page.push(
            Section::new("Other connections").with(Block::Paragraph(format!(
                "{} smaller connections are in the table above only; use --filter to draw one.",
                a.connections.len() - MAX_PAGE_CONNECTIONS
            ))),
        );
    }

    if let Some(cdf) = handshake_cdf(a) {
        page.push(
            Section::new("Handshake times").with(Block::Figure(Figure::from_chart(
                "handshake-cdf",
                &cdf,
                true,
            )?)),
        );
    }
    if !a.udp.is_empty() {
        page.push(Section::new("UDP flows").with(Block::Table(udp_table(a))));
    }
    if !a.warnings.is_empty() {
        let mut items: Vec<String> = a
            .warnings
            .iter()
            .take(100)
            .map(|w| {
                format!(
                    "capture {} packet {}: {}",
                    w.capture + 1,
                    w.packet,
                    w.message
                )
            })
            .collect();
        if a.warnings.len() > 100 {
            items.push(format!("… and {} more", a.warnings.len() - 100));
        }
        page.push(Section::new("Warnings").with(Block::List(items)));
    }
    page.push(reading_guide());
    Ok(page.to_html())
}

/// Writes [`html_page`] to `path`.
pub fn write_html(a: &Analysis, path: &Path, ladder: Window) -> Result<(), ReportError> {
    write_file(path, html_page(a, ladder)?.as_bytes())
}

fn connections_table(a: &Analysis) -> Table {
    let rows = a
        .connections
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let (x, y) = host_letters(i);
            let mut kinds: Vec<&str> = c.diagnoses.iter().map(|d| d.kind.name()).collect();
            kinds.dedup();
            vec![
                format!("{} ({x}, {y})", i + 1),
                c.a.to_string(),
                c.b.to_string(),
                format!("{:?}", c.state).to_lowercase(),
                format!("{:.3}", c.duration().as_secs_f64()),
                c.handshake
                    .duration
                    .map_or("–".into(), |d| format!("{:.2}", d.as_secs_f64() * 1e3)),
                c.a2b.stats.data_bytes.to_string(),
                c.b2a.stats.data_bytes.to_string(),
                (c.a2b.stats.retransmitted_packets + c.b2a.stats.retransmitted_packets).to_string(),
                kinds.join(", "),
            ]
        })
        .collect();
    Table {
        header: [
            "#",
            "a",
            "b",
            "state",
            "duration (s)",
            "handshake (ms)",
            "a→b bytes",
            "b→a bytes",
            "retransmitted packets",
            "diagnoses",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        caption: String::new(),
    }
}

fn udp_table(a: &Analysis) -> Table {
    let rows = a
        .udp
        .iter()
        .map(|u| {
            let ecn = |d: &analyze::UdpDirection| {
                format!("{} / {} / {} / {}", d.not_ect, d.ect0, d.ect1, d.ce)
            };
            vec![
                u.a.to_string(),
                u.b.to_string(),
                u.a2b.packets.to_string(),
                u.a2b.bytes.to_string(),
                format!("{:.3}", u.a2b.rate_bps / 1e6),
                ecn(&u.a2b),
                u.b2a.packets.to_string(),
                u.b2a.bytes.to_string(),
                format!("{:.3}", u.b2a.rate_bps / 1e6),
                ecn(&u.b2a),
            ]
        })
        .collect();
    Table {
        header: [
            "a",
            "b",
            "a→b packets",
            "a→b bytes",
            "a→b Mbit/s",
            "a→b not-ECT / ECT(0) / ECT(1) / CE",
            "b→a packets",
            "b→a bytes",
            "b→a Mbit/s",
            "b→a not-ECT / ECT(0) / ECT(1) / CE",
        ]
        .map(String::from)
        .to_vec(),
        rows,
        caption: String::new(),
    }
}

/// Connection `i`'s section; `ladder` is its ladder diagram, when it was seen at both ends.
fn connection_section(
    a: &Analysis,
    i: usize,
    ladder: Option<Chart>,
) -> Result<Section, ReportError> {
    let c = &a.connections[i];
    let mut s = Section::new(format!("Connection {}: {} ⇄ {}", i + 1, c.a, c.b));
    s.id = format!("conn{}", i + 1);
    let hs = &c.handshake;
    s.push(Block::Paragraph(format!(
        "State {}; duration {:.3} s; handshake {}; ECN {}.",
        format!("{:?}", c.state).to_lowercase(),
        c.duration().as_secs_f64(),
        hs.duration.map_or("not captured".into(), |d| format!(
            "{:.2} ms",
            d.as_secs_f64() * 1e3
        )),
        format!("{:?}", hs.ecn).to_lowercase(),
    )));
    s.push(Block::Figure(crate::budget::bar(i, c)));
    let mut items = diagnosis_items(a, i, c);
    // Say what this capture cannot show, so that an empty findings list is not read as "no
    // problem" when the capture was taken at the receiver.
    for dir in [Dir::AtoB, Dir::BtoA] {
        let d = c.dir(dir);
        if d.not_judged.is_empty() {
            continue;
        }
        let kinds: Vec<&str> = d.not_judged.iter().map(|k| k.name()).collect();
        items.push((
            "not judged".to_string(),
            format!(
                "{}: this capture was taken at the {} of this direction's path; {} cannot be judged from here",
                direction_stem(i, dir),
                match d.capture_point {
                    CapturePoint::Middle => "middle",
                    CapturePoint::Unknown => "unknown point",
                    _ => "receiver end",
                },
                kinds.join(", ")
            ),
        ));
    }
    if !items.is_empty() {
        s.push(Block::Findings(items));
    }
    // Before the numbers: the picture to read them by.
    if let Some(chart) = ladder {
        let id = format!("conn{}-ladder", i + 1);
        s.push(Block::Figure(Figure::from_chart(&id, &chart, true)?));
    }
    s.push(Block::Table(stats_table(c)));
    if let Some(t) = crate::budget::exchanges_table(a, c) {
        s.push(Block::Table(t));
    }
    // The direction that carried more data first: in a download, the 16-byte request would
    // otherwise push the graph the reader came for below the fold.
    let dirs = if c.b2a.stats.data_bytes > c.a2b.stats.data_bytes {
        [Dir::BtoA, Dir::AtoB]
    } else {
        [Dir::AtoB, Dir::BtoA]
    };
    for dir in dirs {
        if !drawable(c.dir(dir)) {
            continue;
        }
        let stem = direction_stem(i, dir);
        let tsg = time_sequence(a, c, dir).thinned(PAGE_MAX_SEGMENTS, PAGE_COLUMNS);
        s.push(Block::Figure(Figure::from_chart(
            &format!("conn{}-{}-tsg", i + 1, dir.name()),
            &tsg.chart(),
            true,
        )?));
        let mut row = Vec::new();
        let d = c.dir(dir);
        if !d.series.rtt.is_empty() {
            row.push(Figure::from_chart(
                &format!("{stem}-rtt"),
                &rtt_chart(a, c, dir).size(ROW_W, ROW_H),
                true,
            )?);
        }
        if !d.series.throughput.is_empty() {
            row.push(Figure::from_chart(
                &format!("{stem}-tput"),
                &throughput_chart(a, c, dir).size(ROW_W, ROW_H),
                true,
            )?);
        }
        if !d.series.in_flight.is_empty() {
            row.push(Figure::from_chart(
                &format!("{stem}-inflight"),
                &in_flight_chart(a, c, dir).size(ROW_W, ROW_H),
                true,
            )?);
        }
        if !row.is_empty() {
            s.push(Block::Row(row));
        }
    }
    Ok(s)
}

fn reading_guide() -> Section {
    Section::new("How to read the time-sequence graph").with(Block::List(
        [
            "x is time in seconds, y the byte offset in the stream; the slope of the data is the sending rate.",
            "Black I-beams: data segments as captured, from first byte to one past the last.",
            "Red I-beams with R: retransmitted segments.",
            "Green staircase: the receiver's cumulative ACK; small green ticks under it: duplicate ACKs.",
            "Yellow staircase: ACK + advertised receive window, the most the sender may have sent; data touching it is receive-window limited.",
            "Purple bars: SACK blocks, data received above a hole.",
            "CE (orange): a packet arrived marked Congestion Experienced; ECE (magenta): the receiver echoed it; CWR (blue): the sender cut its window.",
            "O: out-of-order data; P: zero-window probe; Z: zero window advertised; SYN, FIN, RST as named.",
            "The horizontal distance between a segment and the ACK that covers it is the RTT; a growing distance is a growing queue.",
            "Zoom with the mouse wheel, pan by dragging, double-click or “reset zoom” to go back; the read-out shows the time and sequence under the pointer.",
        ]
        .map(String::from)
        .to_vec(),
    ))
}

/// "1.23 MB"-style sizes for captions (decimal units, as rates are).
fn bytes(b: u64) -> String {
    let v = b as f64;
    if v >= 1e9 {
        format!("{:.2} GB", v / 1e9)
    } else if v >= 1e6 {
        format!("{:.2} MB", v / 1e6)
    } else if v >= 1e4 {
        format!("{:.1} kB", v / 1e3)
    } else {
        format!("{b} bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chart::Marks;

    use crate::test_fixture as common;

    #[test]
    fn ladder_arrows_put_host_a_above_and_count_seconds_from_the_origin() {
        use analyze::ladder::{Arrow, Packet};
        let origin = wire::Instant::from_nanos(1_700_000_000_000_000_000);
        let at = |us: u64| wire::Instant::from_nanos(origin.as_nanos() + us * 1000);
        let arrows = [
            Arrow {
                dir: Dir::AtoB,
                depart: at(1),
                arrive: at(250_001),
                packet: Packet::Data { seq: 1, len: 28 },
            },
            Arrow {
                dir: Dir::BtoA,
                depart: at(290_000),
                arrive: at(540_000),
                packet: Packet::PureAck { ack: 29 },
            },
        ];
        assert_eq!(
            ladder_arrows(&arrows, origin),
            [
                LadderArrow {
                    from_upper: true,
                    depart_s: 1e-6,
                    arrive_s: 0.250001,
                    packet: LadderPacket::Data { bytes: 28 },
                },
                LadderArrow {
                    from_upper: false,
                    depart_s: 0.29,
                    arrive_s: 0.54,
                    packet: LadderPacket::PureAck,
                },
            ]
        );
    }

    /// One synthetic upload recorded at both ends, the receiver's capture given first.
    fn upload_at_both_ends() -> Analysis {
        use analyze::synth::{pcap, Bulk, Vantage};
        let mut b = Bulk::new(
            "10.0.0.1:40000".parse().unwrap(),
            "10.0.0.2:5201".parse().unwrap(),
        );
        b.bytes = 100_000;
        let opts = analyze::Options {
            keep_series: true,
            ..analyze::Options::default()
        };
        let mut an = analyze::Analyzer::new(opts);
        for (name, vantage) in [
            ("/x/server.pcap", Vantage::Receiver),
            ("/x/client.pcap", Vantage::Sender),
        ] {
            b.vantage = vantage;
            an.add_capture(name, &pcap(b.run())[..]).unwrap();
        }
        an.finish()
    }

    #[test]
    fn a_connection_seen_at_both_ends_gets_a_ladder_from_its_first_packets() {
        let a = upload_at_both_ends();
        let ends = analyze::ladder::both_ends(&a);
        assert_eq!(ends.len(), 1);
        let (near_a, near_b) = ends[0];
        assert_eq!(
            a.captures[a.connections[near_a].vantage.capture].name,
            "/x/client.pcap"
        );
        let c = ladder_chart(&a, near_a, near_b, Window::default()).unwrap();
        let lines = |name: &str| match &c.series.iter().find(|s| s.name == name).unwrap().marks {
            Marks::Segments(v) => v.clone(),
            m => panic!("{name}: {m:?}"),
        };
        // The SYN, the SYN-ACK, and the model's first window, 20 segments sent at once with
        // the ACK of the SYN-ACK on the first: the twentieth packet and those that left with it.
        assert_eq!(lines("SYN / FIN").len(), 2);
        assert_eq!(lines("data segment").len(), 20);
        assert!(lines("pure ACK").is_empty());
        // The first line is the SYN leaving the client (above) at the first packet of all.
        let syn = lines("SYN / FIN")[0];
        assert_eq!(syn.0, (0.0, 1.0));
        assert!(
            (syn.1 .0 - 0.010).abs() < 1e-3 && syn.1 .1 == 0.0,
            "{syn:?}"
        );
        assert_eq!(c.title, "Connection 1, its first 22 packets, at both ends");
        // The model's bottleneck queues the window on the way to the server, not the ACKs.
        assert!(
            c.caption.contains("client→server and 10.0 ms back"),
            "{}",
            c.caption
        );
        let texts = crate::svg_texts(&c.to_svg().unwrap());
        for label in [
            "SYN",
            "SYN-ACK",
            "client 10.0.0.1:40000 (client.pcap)",
            "server 10.0.0.2:5201 (server.pcap)",
        ] {
            assert!(
                texts.iter().any(|t| t == label),
                "no {label:?} in {texts:?}"
            );
        }
        // A window is drawn whole, with the packets that crossed its edges.
        let span = Window::Span {
            from: wire::Duration::from_millis(15),
            to: wire::Duration::from_millis(200),
        };
        let c = ladder_chart(&a, near_a, near_b, span).unwrap();
        let (x0, x1) = c.x.range.unwrap();
        assert!(x0 < 0.010 && x1 > 0.200, "{:?}", c.x.range);
        assert!(
            c.title.starts_with("Connection 1, its ")
                && c.title
                    .ends_with(" packets from 0.015 to 0.200 s, at both ends"),
            "{}",
            c.title
        );
        // A window with nothing in it draws nothing.
        let late = Window::Span {
            from: wire::Duration::from_secs(100),
            to: wire::Duration::from_secs(101),
        };
        assert!(ladder_chart(&a, near_a, near_b, late).is_none());
    }

    #[test]
    fn plots_and_page_carry_the_ladder_of_a_connection_seen_at_both_ends_only() {
        let dir = std::env::temp_dir().join(format!("report-ladder-{}", std::process::id()));
        let files = write_plots(&upload_at_both_ends(), &dir, Window::default()).unwrap();
        let ladders: Vec<String> = files
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .filter(|n| n.contains("ladder"))
            .collect();
        // Named after the client's view, connection 1 (it saw the SYN first, though its
        // capture came second).
        assert_eq!(ladders, ["a_b_ladder.svg", "a_b_ladder.png"]);
        std::fs::remove_dir_all(&dir).unwrap();
        let html = html_page(&upload_at_both_ends(), Window::default()).unwrap();
        assert!(html.contains("id=\"conn1-ladder\""));
        assert!(!html.contains("conn2-ladder"));
        let one_end = common::bulk_download();
        assert!(!html_page(&one_end, Window::default())
            .unwrap()
            .contains("ladder"));
    }

    #[test]
    fn host_letters_follow_tcptrace_a_b_then_c_d_then_two_letters() {
        assert_eq!(host_letters(0), ("a".into(), "b".into()));
        assert_eq!(host_letters(1), ("c".into(), "d".into()));
        assert_eq!(host_letters(12), ("y".into(), "z".into()));
        assert_eq!(host_letters(13), ("aa".into(), "ab".into()));
        assert_eq!(direction_stem(1, Dir::BtoA), "d2c");
    }

    #[test]
    fn time_sequence_maps_segments_acks_windows_sacks_and_marks() {
        let a = common::bulk_download();
        let c = &a.connections[0];
        let t = time_sequence(&a, c, Dir::BtoA);
        assert_eq!(t.title, "10.0.0.2:5201 → 10.0.0.1:40000");
        // The bare SYN-ACK becomes a SYN mark, not a beam.
        assert_eq!(t.segments.len() as u64, common::SEGMENTS + 1);
        assert!(t
            .marks
            .iter()
            .any(|m| m.kind == TsgMarkKind::Syn && m.seq == 0));
        let r: Vec<_> = t.segments.iter().filter(|s| s.retransmit).collect();
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].seq_start, 1 + common::LOST * common::MSS);
        assert_eq!(t.acks.len(), c.b2a.series.acks.len());
        assert_eq!(
            t.window_ends[0].seq,
            c.b2a.series.windows[0].ack + 256 * 1024
        );
        assert_eq!(t.sacks.len(), 11);
        let model_ce = c
            .b2a
            .series
            .marks
            .iter()
            .filter(|m| m.kind == MarkKind::Ce)
            .count();
        assert!(model_ce > 0);
        assert_eq!(
            t.marks.iter().filter(|m| m.kind == TsgMarkKind::Ce).count(),
            model_ce
        );
        // Times are seconds since the epoch.
        assert!((t.segments[0].time_s - 0.025).abs() < 1e-12);
    }

    #[test]
    fn rtt_chart_plots_samples_in_milliseconds() {
        let a = common::bulk_download();
        let ch = rtt_chart(&a, &a.connections[0], Dir::BtoA);
        assert_eq!(ch.y.unit, "ms");
        let Marks::Points(p) = &ch.series[0].marks else {
            panic!()
        };
        assert!((p[0].1 - 20.0).abs() < 0.01, "first sample {:?}", p[0]);
    }

    #[test]
    fn handshake_cdf_covers_every_connection_with_a_handshake() {
        let a = common::bulk_download();
        let ch = handshake_cdf(&a).unwrap();
        let cdf = ch
            .series
            .iter()
            .find(|s| s.name == "handshake time")
            .unwrap();
        let Marks::Step(p) = &cdf.marks else { panic!() };
        // The download's point is unknown: SYN to ACK. The small connection has a duration but
        // no packet times, so it has no sample.
        assert_eq!(p.last().unwrap(), &(20.5, 100.0));
        assert!(
            ch.caption.starts_with("1 connection: median 20.5 ms"),
            "{}",
            ch.caption
        );
        assert!(ch.caption.contains("100% under 100 ms"), "{}", ch.caption);
        assert!(handshake_cdf(&Analysis::default()).is_none());
    }

    #[test]
    fn write_plots_writes_svg_and_png_per_data_direction_only() {
        let a = common::bulk_download();
        let dir = std::env::temp_dir().join(format!("report-plots-{}", std::process::id()));
        let files = write_plots(&a, &dir, Window::default()).unwrap();
        let names: Vec<String> = files
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        for n in [
            "b2a_tsg.svg",
            "b2a_tsg.png",
            "b2a_rtt.png",
            "b2a_tput.png",
            "b2a_inflight.png",
            "handshake_cdf.png",
        ] {
            assert!(names.iter().any(|x| x == n), "missing {n}: {names:?}");
        }
        assert!(
            !names
                .iter()
                .any(|x| x.starts_with("a2b") || x.starts_with("c2d")),
            "{names:?}"
        );
        for f in &files {
            assert!(
                std::fs::metadata(f).unwrap().len() > 1000,
                "{} is tiny",
                f.display()
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn write_xplot_writes_tsg_rtt_and_throughput_files_with_absolute_times() {
        let a = common::bulk_download();
        let dir = std::env::temp_dir().join(format!("report-xplot-{}", std::process::id()));
        let files = write_xplot(&a, &dir).unwrap();
        let names: Vec<String> = files
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, vec!["b2a_tsg.xpl", "b2a_rtt.xpl", "b2a_tput.xpl"]);
        let tsg = std::fs::read_to_string(dir.join("b2a_tsg.xpl")).unwrap();
        assert!(tsg.starts_with("timeval unsigned\ntitle\n10.0.0.2:5201 → 10.0.0.1:40000"));
        assert!(
            tsg.contains("uarrow 1700000000.026200 2897\n"),
            "second segment at 26.2 ms"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn analysis_without_series_is_refused_rather_than_drawn_empty() {
        let mut a = common::bulk_download();
        a.connections[0].b2a.series = Default::default();
        assert!(matches!(
            html_page(&a, Window::default()),
            Err(ReportError::NoSeries)
        ));
        let empty = Analysis::default();
        assert!(
            html_page(&empty, Window::default()).is_ok(),
            "nothing to draw is not an error"
        );
    }

    #[test]
    fn html_page_has_findings_stats_and_the_zoomable_time_sequence_graph() {
        let a = common::bulk_download();
        let html = html_page(&a, Window::default()).unwrap();
        assert!(html.contains("<figure id=\"conn1-b2a-tsg\" class=\"chart zoomable\""));
        assert!(html.contains("<dt>bufferbloat</dt>"));
        assert!(html.contains("RTT 150 ms above its 20 ms minimum"));
        assert!(html.contains("<td>retransmitted packets</td>"));
        assert!(html.contains("truncated tcp header"));
        assert!(html.contains("id=\"b2a-rtt\""));
        assert!(html.contains("UDP flows"));
        // Only the data direction is drawn.
        assert!(!html.contains("conn1-a2b-tsg"));
        // Self-contained: the SVG namespace is the only http reference, and it is never fetched.
        let rest = html.replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
        assert!(!rest.contains("http"), "page references the network");
        assert!(!rest.contains("src=") && !rest.contains("<link"));
    }
}
