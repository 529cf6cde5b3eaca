//! The live figures of a running lab: what `--watch` draws and `--live FILE` writes, one row per
//! link direction per interval.
//!
//! The engine hands over a [`Snapshot`] of the counters it keeps anyway (cumulative bytes,
//! drops, marks, the sum of queue delays, the backlog now) every interval of lab time; a
//! [`Meter`], on another thread, turns two successive snapshots into [`Row`]s: rates and means
//! over the interval between them, and the running totals, which at the end equal
//! `summary.json`'s. Nothing here reads a clock: the snapshot carries its lab time.
//!
//! The JSON line of a row is defined here once ([`Row`]); `docs/run-dir.md` documents it.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use wire::{Duration, Instant};

/// How often the engine takes a snapshot and the view redraws: ten times a second.
pub const INTERVAL: Duration = Duration::from_millis(100);

/// One link direction's counters at one moment, all cumulative since the lab started except
/// the backlog.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Counts {
    pub packets_out: u64,
    pub bytes_out: u64,
    /// Drops by cause name, as in `summary.json`.
    pub drops: BTreeMap<&'static str, u64>,
    pub ce_marks: u64,
    /// Packets that left the queue, and the sum of their queue delays, ns.
    pub dequeued: u64,
    pub queue_delay_sum_ns: u64,
    /// Packets and bytes in the queue (and in service) now.
    pub backlog_packets: usize,
    pub backlog_bytes: usize,
    /// The configured rate now (a trace's mean rate; `None`: unlimited).
    pub rate_bps: Option<u64>,
}

impl Counts {
    /// The counters of a link direction, as the pure link keeps them.
    pub fn of(link: &link::Link) -> Counts {
        let s = link.stats();
        Counts {
            packets_out: s.packets_out,
            bytes_out: s.bytes_out,
            drops: s.drops.clone(),
            ce_marks: s.ce_marks,
            dequeued: s.queue_delay.len(),
            queue_delay_sum_ns: s.queue_delay_sum_ns,
            backlog_packets: link.backlog_packets(),
            backlog_bytes: link.qdisc().backlog_bytes(),
            rate_bps: link.params().capacity.rate_bps(),
        }
    }
}

/// Every link direction's counters at one lab time, in the forwarder's direction order, with
/// the engine's lateness since the snapshot before.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    pub at: Instant,
    /// Each direction's link name and side (`down`, `up`), in the order of `links`.
    pub dirs: Arc<Vec<(String, String)>>,
    pub links: Vec<Counts>,
    /// The latest the engine wrote a packet into its host since the last snapshot, ns.
    pub late_max_ns: u64,
    /// The last snapshot of the lab (it has ended).
    pub last: bool,
}

/// One link direction over one interval: the JSON line of `--live FILE`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// Lab time at the end of the interval, s.
    pub t_s: f64,
    /// The link's name and the direction (`down`: from the server's side, `up`: towards it).
    pub link: String,
    pub dir: String,
    /// The configured rate, bit/s (a trace's mean rate; `null`: unlimited).
    pub rate_bps: Option<u64>,
    /// Bits delivered per second over the interval.
    pub delivered_bps: f64,
    /// The mean queue delay of the packets that left the queue in the interval, ms (`null`
    /// when none left).
    pub queue_delay_ms: Option<f64>,
    /// Packets in the queue at the end of the interval, and how long they take to send at the
    /// configured rate, ms (`null` without a rate).
    pub backlog_packets: usize,
    pub backlog_ms: Option<f64>,
    /// Drops in the interval by cause, and in all.
    pub drops: BTreeMap<String, u64>,
    pub drops_total: u64,
    /// CE marks in the interval, and in all.
    pub ce_marks: u64,
    pub ce_marks_total: u64,
    /// Packets and bytes delivered in all.
    pub packets_total: u64,
    pub bytes_total: u64,
    /// The engine's largest delivery error in the interval, ms: late, or early within the
    /// lab's `--precision`.
    pub engine_late_max_ms: f64,
    /// The lab's last row for this direction.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub last: bool,
    /// Which lab, where one file follows several (a demo's: `bufferbloat/fifo`); empty and
    /// left out otherwise.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub lab: String,
}

/// Turns successive snapshots into rows.
#[derive(Clone, Debug, Default)]
pub struct Meter {
    before: Option<Snapshot>,
}

impl Meter {
    /// The rows for the interval that `now` ends (the first from the start of the lab).
    pub fn rows(&mut self, now: Snapshot) -> Vec<Row> {
        let zero = Counts::default();
        let from_ns = self.before.as_ref().map_or(0, |b| b.at.as_nanos());
        let span_s = now.at.as_nanos().saturating_sub(from_ns) as f64 / 1e9;
        let rows = now
            .dirs
            .iter()
            .zip(&now.links)
            .enumerate()
            .map(|(i, ((link, dir), c))| {
                let b = self
                    .before
                    .as_ref()
                    .and_then(|b| b.links.get(i))
                    .unwrap_or(&zero);
                let dequeued = c.dequeued.saturating_sub(b.dequeued);
                let drops: BTreeMap<String, u64> = c
                    .drops
                    .iter()
                    .map(|(k, &v)| (k.to_string(), v - b.drops.get(k).copied().unwrap_or(0)))
                    .filter(|&(_, v)| v > 0)
                    .collect();
                Row {
                    t_s: now.at.as_nanos() as f64 / 1e9,
                    link: link.clone(),
                    dir: dir.clone(),
                    rate_bps: c.rate_bps,
                    delivered_bps: if span_s > 0.0 {
                        c.bytes_out.saturating_sub(b.bytes_out) as f64 * 8.0 / span_s
                    } else {
                        0.0
                    },
                    queue_delay_ms: (dequeued > 0).then(|| {
                        c.queue_delay_sum_ns.saturating_sub(b.queue_delay_sum_ns) as f64
                            / dequeued as f64
                            / 1e6
                    }),
                    backlog_packets: c.backlog_packets,
                    // Time to send the backlog at the rate: bytes × 8 / rate.
                    backlog_ms: c
                        .rate_bps
                        .filter(|&r| r > 0)
                        .map(|r| c.backlog_bytes as f64 * 8.0 / r as f64 * 1e3),
                    drops,
                    drops_total: c.drops.values().sum(),
                    ce_marks: c.ce_marks.saturating_sub(b.ce_marks),
                    ce_marks_total: c.ce_marks,
                    packets_total: c.packets_out,
                    bytes_total: c.bytes_out,
                    engine_late_max_ms: now.late_max_ns as f64 / 1e6,
                    last: now.last,
                    lab: String::new(),
                }
            })
            .collect();
        self.before = Some(now);
        rows
    }
}

/// The last intervals of one link direction, oldest first: what the views draw as sparklines
/// and charts.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Series {
    pub link: String,
    pub dir: String,
    /// Each interval's end, lab time, s.
    pub t_s: VecDeque<f64>,
    /// Bits delivered per second in each interval.
    pub delivered_bps: VecDeque<f64>,
    /// The mean queue delay of each interval, ms (`null` where nothing left the queue).
    pub queue_delay_ms: VecDeque<Option<f64>>,
}

/// Every link direction's last `capacity` intervals, fed with each interval's rows.
#[derive(Clone, Debug, PartialEq)]
pub struct Window {
    capacity: usize,
    series: Vec<Series>,
}

impl Window {
    /// A window of the last `capacity` intervals (at least one).
    pub fn new(capacity: usize) -> Window {
        Window {
            capacity: capacity.max(1),
            series: Vec::new(),
        }
    }

    /// Adds one interval's rows (one per direction, in the snapshot's order); directions the
    /// window has not seen before start empty.
    pub fn push(&mut self, rows: &[Row]) {
        if self.series.len() != rows.len()
            || self
                .series
                .iter()
                .zip(rows)
                .any(|(s, r)| s.link != r.link || s.dir != r.dir)
        {
            self.series = rows
                .iter()
                .map(|r| Series {
                    link: r.link.clone(),
                    dir: r.dir.clone(),
                    ..Series::default()
                })
                .collect();
        }
        for (s, r) in self.series.iter_mut().zip(rows) {
            if s.t_s.len() == self.capacity {
                s.t_s.pop_front();
                s.delivered_bps.pop_front();
                s.queue_delay_ms.pop_front();
            }
            s.t_s.push_back(r.t_s);
            s.delivered_bps.push_back(r.delivered_bps);
            s.queue_delay_ms.push_back(r.queue_delay_ms);
        }
    }

    /// Each direction's series, in the rows' order.
    pub fn series(&self) -> &[Series] {
        &self.series
    }

    /// Forgets every interval (a new lab starts).
    pub fn clear(&mut self) {
        self.series.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(bytes_out: u64, dequeued: u64, sum_ms: u64, loss: u64) -> Counts {
        let mut drops = BTreeMap::new();
        if loss > 0 {
            drops.insert("loss", loss);
        }
        Counts {
            packets_out: bytes_out / 1000,
            bytes_out,
            drops,
            ce_marks: loss * 2,
            dequeued,
            queue_delay_sum_ns: sum_ms * 1_000_000,
            backlog_packets: 10,
            backlog_bytes: 12_500,
            rate_bps: Some(10_000_000),
        }
    }

    fn snap(at_ms: u64, c: Counts) -> Snapshot {
        Snapshot {
            at: Instant::ZERO + Duration::from_millis(at_ms),
            dirs: Arc::new(vec![("path".into(), "down".into())]),
            links: vec![c],
            late_max_ns: 20_000,
            last: false,
        }
    }

    #[test]
    fn rows_are_rates_and_means_over_the_interval_and_totals_since_the_start() {
        let mut m = Meter::default();
        let r = m.rows(snap(100, counts(125_000, 100, 500, 1)));
        // 125 kB in the first 100 ms: 10 Mbit/s; 100 packets queued 5 ms each on average.
        assert!((r[0].delivered_bps - 10e6).abs() < 1.0, "{r:?}");
        assert_eq!(r[0].queue_delay_ms, Some(5.0));
        // 12.5 kB at 10 Mbit/s: 10 ms to send.
        assert_eq!(r[0].backlog_ms, Some(10.0));
        assert_eq!(r[0].drops.get("loss"), Some(&1));
        let r = m.rows(snap(300, counts(187_500, 150, 3_000, 3)));
        // 62.5 kB over 200 ms: 2.5 Mbit/s; 50 packets that waited 2500 ms in all: 50 ms each.
        assert!((r[0].delivered_bps - 2.5e6).abs() < 1.0, "{r:?}");
        assert_eq!(r[0].queue_delay_ms, Some(50.0));
        assert_eq!((r[0].drops.get("loss"), r[0].drops_total), (Some(&2), 3));
        assert_eq!((r[0].ce_marks, r[0].ce_marks_total), (4, 6));
        assert_eq!((r[0].bytes_total, r[0].t_s), (187_500, 0.3));
    }

    #[test]
    fn an_interval_with_nothing_dequeued_has_no_queue_delay_and_no_drops() {
        let mut m = Meter::default();
        m.rows(snap(100, counts(1000, 1, 1, 0)));
        let r = m.rows(snap(200, counts(1000, 1, 1, 0)));
        assert_eq!(r[0].queue_delay_ms, None);
        assert_eq!(r[0].delivered_bps, 0.0);
        assert!(r[0].drops.is_empty());
    }

    #[test]
    fn a_row_is_one_json_line_that_reads_back() {
        let mut m = Meter::default();
        let mut s = snap(100, counts(125_000, 100, 500, 1));
        s.last = true;
        let mut r = m.rows(s).remove(0);
        // A value the parser reads back one unit in the last place off without serde_json's
        // float_roundtrip.
        r.delivered_bps = 985.6906946328695;
        let line = serde_json::to_string(&r).unwrap();
        assert!(
            !line.contains('\n') && line.contains("\"last\":true"),
            "{line}"
        );
        assert_eq!(serde_json::from_str::<Row>(&line).unwrap(), r);
    }

    fn row(link: &str, dir: &str, t_s: f64, bps: f64) -> Row {
        Row {
            t_s,
            link: link.into(),
            dir: dir.into(),
            delivered_bps: bps,
            queue_delay_ms: (bps > 0.0).then_some(bps / 1e6),
            ..Row::default()
        }
    }

    #[test]
    fn a_window_keeps_the_last_intervals_of_each_direction_and_restarts_on_new_links() {
        let mut w = Window::new(3);
        for i in 0..5 {
            let t = f64::from(i) / 10.0;
            w.push(&[
                row("path", "down", t, f64::from(i)),
                row("path", "up", t, 0.0),
            ]);
        }
        let s = &w.series()[0];
        assert_eq!((s.link.as_str(), s.dir.as_str()), ("path", "down"));
        assert_eq!(s.t_s, [0.2, 0.3, 0.4]);
        assert_eq!(s.delivered_bps, [2.0, 3.0, 4.0]);
        assert_eq!(w.series()[1].queue_delay_ms, [None, None, None]);
        // Another lab's links: the window starts again.
        w.push(&[row("wifi", "down", 0.1, 7.0)]);
        assert_eq!(w.series().len(), 1);
        assert_eq!(w.series()[0].delivered_bps, [7.0]);
        w.clear();
        assert!(w.series().is_empty());
    }
}
