//! Writes sample charts, a time-sequence graph, an xplot file and an HTML page into the
//! directory given as the first argument, to look at what the crate draws:
//! `cargo run -p report --example gallery -- /tmp/gallery`.

use report::{
    Axis, Chart, Rgb, Series, TimeSequence, TsgMark, TsgMarkKind, TsgPoint, TsgSack, TsgSegment,
};
use std::path::PathBuf;

/// A bulk transfer through a filling queue: 1448-byte segments, ACKs one growing RTT later,
/// one tail drop repaired by SACK and a retransmission, a few CE marks answered by ECE and CWR.
fn transfer() -> TimeSequence {
    let mut t = TimeSequence {
        title: "10.0.0.1:5201 → 10.0.0.2:40312".into(),
        caption: "The data pulls away from the ACK line as the queue fills; the lost segment is \
                  SACKed around and retransmitted (R)."
            .into(),
        ..Default::default()
    };
    let mark = |time_s, seq, kind| TsgMark { time_s, seq, kind };
    t.marks.push(mark(0.0, 0, TsgMarkKind::Syn));
    let mss = 1448u64;
    let lost = 120u64;
    for i in 0..300u64 {
        let send_s = 0.02 + i as f64 * 0.0012;
        let rtt_s = 0.02 + i as f64 * 0.0004;
        let seq = 1 + i * mss;
        t.segments.push(TsgSegment {
            time_s: send_s,
            seq_start: seq,
            seq_end: seq + mss,
            retransmit: false,
        });
        if i % 97 == 50 {
            t.marks.push(mark(send_s, seq + mss, TsgMarkKind::Ce));
            t.marks
                .push(mark(send_s + rtt_s, seq + mss, TsgMarkKind::Ece));
            t.marks
                .push(mark(send_s + rtt_s + 0.01, seq + 8 * mss, TsgMarkKind::Cwr));
        }
        let ack_s = send_s + rtt_s;
        if (lost + 1..lost + 12).contains(&i) {
            t.dup_acks.push(TsgPoint {
                time_s: ack_s,
                seq: 1 + lost * mss,
            });
            t.sacks.push(TsgSack {
                time_s: ack_s,
                left: 1 + (lost + 1) * mss,
                right: seq + mss,
            });
        } else if i != lost {
            t.acks.push(TsgPoint {
                time_s: ack_s,
                seq: seq + mss,
            });
            t.window_ends.push(TsgPoint {
                time_s: ack_s,
                seq: seq + mss + 64 * 1024,
            });
        }
    }
    let rs = t.sacks[4].time_s + 0.001;
    t.segments.push(TsgSegment {
        time_s: rs,
        seq_start: 1 + lost * mss,
        seq_end: 1 + (lost + 1) * mss,
        retransmit: true,
    });
    t.segments.sort_by(|a, b| a.time_s.total_cmp(&b.time_s));
    t
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| "gallery".into()));
    std::fs::create_dir_all(&dir)?;
    let t = transfer();
    let c = t.chart();
    c.write_png(&dir.join("tsg.png"))?;
    c.write_svg(&dir.join("tsg.svg"))?;
    let mut zoom = t.clone();
    zoom.x_range_s = Some((0.15, 0.3));
    zoom.y_range_bytes = Some((150_000.0, 200_000.0));
    zoom.chart().write_png(&dir.join("tsg_zoom.png"))?;
    t.xplot(Some((1_700_000_000, 0)))
        .write(&dir.join("a2b_tsg.xpl"))?;

    let rtt = Chart::new(
        "Round-trip time",
        Axis::new("time", "s"),
        Axis::new("round-trip time", "ms").from_zero(),
    )
    .caption("FIFO's RTT climbs to ten times the base RTT; CoDel keeps it near 20 ms.")
    .with(Series::line(
        "FIFO",
        Rgb::nth(0),
        (0..200)
            .map(|i| (i as f64 * 0.05, 20.0 + (i % 80) as f64 * 2.5))
            .collect(),
    ))
    .with(Series::scatter(
        "CoDel + ECN",
        Rgb::nth(1),
        (0..200)
            .map(|i| (i as f64 * 0.05, 21.0 + (i % 7) as f64))
            .collect(),
    ));
    rtt.write_png(&dir.join("rtt.png"))?;
    let cdf = Chart::new(
        "Probe RTT distribution",
        Axis::new("round-trip time", "ms"),
        Axis::new("probes with RTT ≤ x", "%"),
    )
    .caption("Half of FIFO's probes wait over 100 ms.")
    .with(Series::cdf(
        "FIFO",
        Rgb::nth(0),
        &(0..100).map(|i| 20.0 + i as f64 * 2.0).collect::<Vec<_>>(),
    ))
    .with(Series::cdf(
        "CoDel + ECN",
        Rgb::nth(1),
        &(0..100).map(|i| 20.0 + (i % 10) as f64).collect::<Vec<_>>(),
    ));
    cdf.write_png(&dir.join("cdf.png"))?;
    println!("wrote {}", dir.display());
    Ok(())
}
