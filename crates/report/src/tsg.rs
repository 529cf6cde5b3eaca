//! The time-sequence graph of one direction of a TCP connection, as tcptrace draws it: time
//! across, relative sequence number up; each data segment an I-beam from its first to one past
//! its last byte; the cumulative ACK as a green staircase; the receive window's right edge
//! (ACK + advertised window) as a yellow staircase; SACK blocks as purple bars at the time of
//! the ACK carrying them; retransmissions red with an `R`; duplicate ACKs as small ticks under
//! the ACK line; ECN signals (CE on data, ECE on ACKs, CWR on data) and SYN/FIN/RST as text.
//!
//! The background is white (tcptrace's is black), so tcptrace's white segments are black and
//! its yellow is darkened to stay visible. Input is plain data in relative sequence numbers
//! (already unwrapped); this module neither reads packets nor decides what is a retransmission.
//! It renders through `chart` (SVG/PNG) and `xplot` (`.xpl`), whole, thinned for very long
//! transfers, or cropped to a close-up of a time window.

use crate::chart::{Axis, Chart, Marks, Rgb, Series};
use crate::xplot::{Xplot, XplotAxis, XplotColor, XplotCommand};

/// A data segment as seen at the capture point.
#[derive(Clone, Debug, PartialEq)]
pub struct TsgSegment {
    /// Seconds since the graph's time origin.
    pub time_s: f64,
    /// Relative sequence number of the first byte.
    pub seq_start: u64,
    /// Relative sequence number one past the last byte (`seq_start + length`).
    pub seq_end: u64,
    /// It carries bytes that were sent before.
    pub retransmit: bool,
}

/// A (time, relative sequence number) point: a cumulative ACK, a window edge, a duplicate ACK.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TsgPoint {
    pub time_s: f64,
    pub seq: u64,
}

/// A SACK block `left..right` reported at `time_s`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TsgSack {
    pub time_s: f64,
    pub left: u64,
    pub right: u64,
}

/// What a text mark stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TsgMarkKind {
    /// A data packet arrived with the CE codepoint (at its sequence number).
    Ce,
    /// An ACK carried ECE (at its ACK number).
    Ece,
    /// A data packet carried CWR.
    Cwr,
    /// New data below the highest sequence sent: reordering, or a sender filling a hole.
    OutOfOrder,
    /// Data sent into a zero window.
    WindowProbe,
    /// The receiver advertised a zero window (at its ACK number).
    ZeroWindow,
    Syn,
    Fin,
    Rst,
}

impl TsgMarkKind {
    /// The text drawn on the graph.
    pub fn text(self) -> &'static str {
        match self {
            TsgMarkKind::Ce => "CE",
            TsgMarkKind::Ece => "ECE",
            TsgMarkKind::Cwr => "CWR",
            TsgMarkKind::OutOfOrder => "O",
            TsgMarkKind::WindowProbe => "P",
            TsgMarkKind::ZeroWindow => "Z",
            TsgMarkKind::Syn => "SYN",
            TsgMarkKind::Fin => "FIN",
            TsgMarkKind::Rst => "RST",
        }
    }

    /// The legend entry of the group the mark is drawn in, and its colour.
    fn group(self) -> (&'static str, Rgb) {
        match self {
            TsgMarkKind::Ce => ("congestion experienced, on data", colors::CE),
            TsgMarkKind::Ece => ("congestion echoed, on ACK", colors::ECE),
            TsgMarkKind::Cwr => ("sender reduced its window", colors::CWR),
            TsgMarkKind::OutOfOrder => ("out-of-order data", colors::EVENT),
            TsgMarkKind::WindowProbe => ("zero-window probe", colors::EVENT),
            TsgMarkKind::ZeroWindow => ("zero window advertised", colors::RETRANSMIT),
            TsgMarkKind::Syn | TsgMarkKind::Fin | TsgMarkKind::Rst => {
                ("connection open / close / reset", colors::EVENT)
            }
        }
    }
}

/// A text mark at a point of the graph.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TsgMark {
    pub time_s: f64,
    pub seq: u64,
    pub kind: TsgMarkKind,
}

/// Everything needed to draw one direction's time-sequence graph. All sequence numbers are
/// in this direction's relative space; ACKs, windows and SACKs are what the other side sent
/// back about this direction's data.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct TimeSequence {
    /// E.g. "10.0.0.1:5201 → 10.0.0.2:40312".
    pub title: String,
    pub caption: String,
    pub segments: Vec<TsgSegment>,
    /// Cumulative ACK, one point per change, in time order.
    pub acks: Vec<TsgPoint>,
    /// Right edge of the advertised receive window (`ack + window`), in time order.
    pub window_ends: Vec<TsgPoint>,
    pub sacks: Vec<TsgSack>,
    pub dup_acks: Vec<TsgPoint>,
    pub marks: Vec<TsgMark>,
    /// Fixed time window; `None` fits the data.
    pub x_range_s: Option<(f64, f64)>,
    /// Fixed sequence window; `None` fits the data.
    pub y_range_bytes: Option<(f64, f64)>,
}

/// How much of the graph [`TimeSequence::zoomed`] keeps either side of its window, s: more
/// than the time between two ACKs of any transfer worth a close-up.
pub const ZOOM_MARGIN_S: f64 = 1.0;

/// Legend name, colour, first kind (for ordering) and texts of one group of marks.
type MarkGroup = (&'static str, Rgb, TsgMarkKind, Vec<(f64, f64, String)>);

/// The colours, named once so that the legend, the docs and the xplot output agree.
pub mod colors {
    use crate::chart::Rgb;
    /// tcptrace: white segments (black here, on white).
    pub const DATA: Rgb = Rgb(0, 0, 0);
    /// tcptrace: red retransmissions and `R`.
    pub const RETRANSMIT: Rgb = Rgb(220, 0, 0);
    /// tcptrace: green ACK line.
    pub const ACK: Rgb = Rgb(0, 160, 0);
    /// tcptrace: yellow window line, darkened to read on white.
    pub const WINDOW: Rgb = Rgb(205, 160, 0);
    /// tcptrace: purple SACK blocks.
    pub const SACK: Rgb = Rgb(150, 0, 200);
    pub const CE: Rgb = Rgb(230, 110, 0);
    pub const ECE: Rgb = Rgb(200, 0, 150);
    pub const CWR: Rgb = Rgb(0, 90, 220);
    pub const EVENT: Rgb = Rgb(90, 90, 90);
}

impl TimeSequence {
    /// The graph as a chart: time in seconds, relative sequence number in bytes.
    pub fn chart(&self) -> Chart {
        let mut x = Axis::new("time", "s");
        x.range = self.x_range_s;
        let mut y = Axis::new("relative sequence number", "bytes");
        y.range = self.y_range_bytes;
        let mut c = Chart::new(self.title.clone(), x, y)
            .caption(self.caption.clone())
            .size(1200, 700);
        let pts = |v: &[TsgPoint]| {
            v.iter()
                .map(|p| (p.time_s, p.seq as f64))
                .collect::<Vec<_>>()
        };
        let beams = |retransmit: bool| -> Vec<(f64, f64, f64)> {
            self.segments
                .iter()
                .filter(|s| s.retransmit == retransmit)
                .map(|s| (s.time_s, s.seq_start as f64, s.seq_end as f64))
                .collect()
        };
        // Lines first, so that segments and marks are drawn over them.
        c.push(
            Series::step(
                "receive window (ACK + rwnd)",
                colors::WINDOW,
                pts(&self.window_ends),
            )
            .keep_in_legend(),
        );
        c.push(Series::step("cumulative ACK", colors::ACK, pts(&self.acks)).keep_in_legend());
        c.push(
            Series::new(
                "duplicate ACK",
                colors::ACK,
                Marks::Ticks(pts(&self.dup_acks)),
            )
            .stroke(1),
        );
        c.push(
            Series::new(
                "SACK block",
                colors::SACK,
                Marks::Segments(
                    self.sacks
                        .iter()
                        .map(|s| ((s.time_s, s.left as f64), (s.time_s, s.right as f64)))
                        .collect(),
                ),
            )
            .stroke(3),
        );
        c.push(
            Series::new("data segment", colors::DATA, Marks::IBeams(beams(false)))
                .stroke(1)
                .keep_in_legend(),
        );
        c.push(
            Series::new(
                "retransmitted segment",
                colors::RETRANSMIT,
                Marks::IBeams(beams(true)),
            )
            .stroke(2),
        );
        c.push(Series::new(
            "retransmission",
            colors::RETRANSMIT,
            Marks::Text(
                self.segments
                    .iter()
                    .filter(|s| s.retransmit)
                    .map(|s| (s.time_s, s.seq_end as f64, "R".to_string()))
                    .collect(),
            ),
        ));
        // One text series per legend group, in the order of TsgMarkKind.
        let mut marks = self.marks.clone();
        marks.sort_by(|a, b| {
            a.kind
                .group()
                .0
                .cmp(b.kind.group().0)
                .then(a.time_s.total_cmp(&b.time_s))
        });
        let mut groups: Vec<MarkGroup> = Vec::new();
        for m in &marks {
            let (name, color) = m.kind.group();
            let item = (m.time_s, m.seq as f64, m.kind.text().to_string());
            match groups.iter_mut().find(|g| g.0 == name) {
                Some(g) => {
                    g.2 = g.2.min(m.kind);
                    g.3.push(item)
                }
                None => groups.push((name, color, m.kind, vec![item])),
            }
        }
        groups.sort_by_key(|g| g.2);
        for (name, color, _, items) in groups {
            c.push(Series::new(name, color, Marks::Text(items)));
        }
        c
    }

    /// A lighter copy for drawing very long transfers: when there are more than
    /// `max_segments` segments, time is cut into `columns` equal slices and, within a slice,
    /// runs of contiguous new-data segments become one bar, and the ACK and window staircases,
    /// duplicate ACKs, SACK blocks and marks keep only what differs within the slice. With
    /// a few columns per pixel the picture is the same; zooming in a page shows the merged bars.
    /// Retransmissions are never merged.
    pub fn thinned(&self, max_segments: usize, columns: usize) -> TimeSequence {
        if self.segments.len() <= max_segments || columns == 0 {
            return self.clone();
        }
        let (t0, t1) = self
            .segments
            .iter()
            .map(|s| s.time_s)
            .chain(self.acks.iter().map(|a| a.time_s))
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), t| {
                (lo.min(t), hi.max(t))
            });
        let width = ((t1 - t0) / columns as f64).max(f64::MIN_POSITIVE);
        let col = |t: f64| ((t - t0) / width).floor() as i64;

        let mut out = TimeSequence {
            segments: Vec::new(),
            acks: Vec::new(),
            window_ends: Vec::new(),
            sacks: Vec::new(),
            dup_acks: Vec::new(),
            marks: Vec::new(),
            ..self.clone()
        };
        for s in &self.segments {
            if let Some(last) = out.segments.last_mut() {
                if !s.retransmit
                    && !last.retransmit
                    && col(last.time_s) == col(s.time_s)
                    && s.seq_start <= last.seq_end
                    && s.seq_end >= last.seq_start
                {
                    last.seq_start = last.seq_start.min(s.seq_start);
                    last.seq_end = last.seq_end.max(s.seq_end);
                    continue;
                }
            }
            out.segments.push(s.clone());
        }
        // Staircases: the first and last point of each slice keep the shape.
        let stairs = |v: &[TsgPoint]| {
            let mut o: Vec<TsgPoint> = Vec::new();
            for (i, p) in v.iter().enumerate() {
                let next_same = v.get(i + 1).is_some_and(|n| col(n.time_s) == col(p.time_s));
                let prev_same = i > 0 && col(v[i - 1].time_s) == col(p.time_s);
                if !(next_same && prev_same) {
                    o.push(*p);
                }
            }
            o
        };
        out.acks = stairs(&self.acks);
        out.window_ends = stairs(&self.window_ends);
        let mut seen = std::collections::HashSet::new();
        out.dup_acks = self
            .dup_acks
            .iter()
            .filter(|p| seen.insert((col(p.time_s), p.seq)))
            .copied()
            .collect();
        let mut seen = std::collections::HashSet::new();
        out.sacks = self
            .sacks
            .iter()
            .filter(|s| seen.insert((col(s.time_s), s.left, s.right)))
            .copied()
            .collect();
        let mut seen = std::collections::HashSet::new();
        out.marks = self
            .marks
            .iter()
            .filter(|m| seen.insert((col(m.time_s), m.kind)))
            .copied()
            .collect();
        out
    }

    /// The part of the graph within `[t0_s, t1_s]`: everything drawn at another time is left
    /// out and the fixed ranges are cleared; title and caption stay.
    pub fn cropped(&self, t0_s: f64, t1_s: f64) -> TimeSequence {
        let inside = |t: f64| t >= t0_s && t <= t1_s;
        let points = |v: &[TsgPoint]| v.iter().filter(|p| inside(p.time_s)).copied().collect();
        TimeSequence {
            title: self.title.clone(),
            caption: self.caption.clone(),
            segments: (self.segments.iter())
                .filter(|s| inside(s.time_s))
                .cloned()
                .collect(),
            acks: points(&self.acks),
            window_ends: points(&self.window_ends),
            sacks: (self.sacks.iter())
                .filter(|s| inside(s.time_s))
                .copied()
                .collect(),
            dup_acks: points(&self.dup_acks),
            marks: (self.marks.iter())
                .filter(|m| inside(m.time_s))
                .copied()
                .collect(),
            x_range_s: None,
            y_range_bytes: None,
        }
    }

    /// The lowest first byte and the highest end of the segments sent within `[t0_s, t1_s]`
    /// (retransmissions included), or `None` when none was.
    pub fn seq_span(&self, t0_s: f64, t1_s: f64) -> Option<(u64, u64)> {
        let sent = self
            .segments
            .iter()
            .filter(|s| s.time_s >= t0_s && s.time_s <= t1_s);
        let lo = sent.clone().map(|s| s.seq_start).min()?;
        let hi = sent.map(|s| s.seq_end).max()?;
        Some((lo, hi))
    }

    /// A close-up from `t0_s` to `t1_s`, `height_bytes` of sequence space tall from just
    /// under the lowest byte sent in it (2 % of the height under it, so that the lowest
    /// I-beam's cap clears the axis; from 0 when nothing was sent). What was drawn up to
    /// [`ZOOM_MARGIN_S`] either side is kept, so that the ACK and window staircases run
    /// in from the left edge and out at the right one; the rest is cropped away, which
    /// draws a close-up of a long transfer in a fraction of the time.
    pub fn zoomed(&self, t0_s: f64, t1_s: f64, height_bytes: f64) -> TimeSequence {
        let lo = self.seq_span(t0_s, t1_s).map_or(0.0, |s| s.0 as f64);
        let mut z = self.cropped(t0_s - ZOOM_MARGIN_S, t1_s + ZOOM_MARGIN_S);
        z.x_range_s = Some((t0_s, t1_s));
        z.y_range_bytes = Some((lo - height_bytes * 0.02, lo + height_bytes));
        z
    }

    /// Close-ups of several graphs over one span at one scale: each as tall as the tallest
    /// span of bytes sent in it, plus 5 % (at least one byte), so that a slope means the same
    /// rate in each.
    pub fn zoomed_alike<const N: usize>(
        graphs: [&TimeSequence; N],
        t0_s: f64,
        t1_s: f64,
    ) -> [TimeSequence; N] {
        let height = graphs
            .iter()
            .filter_map(|g| g.seq_span(t0_s, t1_s))
            .map(|(lo, hi)| (hi - lo) as f64)
            .fold(0.0, f64::max)
            .max(1.0)
            * 1.05;
        graphs.map(|g| g.zoomed(t0_s, t1_s, height))
    }

    /// The graph in xplot form, drawn with tcptrace's colours on xplot's black background.
    /// `origin` is the capture time of `time_s == 0` as (seconds, nanoseconds) since the Unix
    /// epoch; with it the x axis is `timeval` (absolute, as tcptrace writes it), without it
    /// `double` seconds since the origin.
    pub fn xplot(&self, origin: Option<(u64, u32)>) -> Xplot {
        let mut p = Xplot::new(
            if origin.is_some() {
                XplotAxis::Timeval
            } else {
                XplotAxis::Double
            },
            XplotAxis::Unsigned,
        );
        p.title = format!("{} (time sequence graph)", self.title);
        p.xlabel = "time".into();
        p.ylabel = "sequence offset".into();
        p.origin = origin;
        for (points, color) in [
            (&self.acks, XplotColor::Green),
            (&self.window_ends, XplotColor::Yellow),
        ] {
            for w in points.windows(2) {
                let (a, b) = (w[0], w[1]);
                p.push(
                    color,
                    XplotCommand::Line(a.time_s, a.seq as f64, b.time_s, a.seq as f64),
                );
                if b.seq != a.seq {
                    p.push(
                        color,
                        XplotCommand::Line(b.time_s, a.seq as f64, b.time_s, b.seq as f64),
                    );
                }
            }
        }
        for d in &self.dup_acks {
            p.push(
                XplotColor::Green,
                XplotCommand::DTick(d.time_s, d.seq as f64),
            );
        }
        for s in &self.sacks {
            p.push(
                XplotColor::Purple,
                XplotCommand::Line(s.time_s, s.left as f64, s.time_s, s.right as f64),
            );
            p.push(
                XplotColor::Purple,
                XplotCommand::HTick(s.time_s, s.left as f64),
            );
            p.push(
                XplotColor::Purple,
                XplotCommand::HTick(s.time_s, s.right as f64),
            );
        }
        for s in &self.segments {
            let color = if s.retransmit {
                XplotColor::Red
            } else {
                XplotColor::White
            };
            let (t, lo, hi) = (s.time_s, s.seq_start as f64, s.seq_end as f64);
            p.push(color, XplotCommand::Line(t, lo, t, hi));
            p.push(color, XplotCommand::DArrow(t, lo));
            p.push(color, XplotCommand::UArrow(t, hi));
            if s.retransmit {
                p.push(XplotColor::Red, XplotCommand::RText(t, hi, "R".into()));
            }
        }
        for m in &self.marks {
            let color = match m.kind {
                TsgMarkKind::Ce => XplotColor::Orange,
                TsgMarkKind::Ece => XplotColor::Magenta,
                TsgMarkKind::Cwr => XplotColor::Blue,
                TsgMarkKind::ZeroWindow => XplotColor::Red,
                _ => XplotColor::White,
            };
            p.push(
                color,
                XplotCommand::AText(m.time_s, m.seq as f64, m.kind.text().into()),
            );
        }
        p
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::chart::svg_texts;

    /// Ten segments of 1000 bytes; the third is lost and retransmitted while SACKs and
    /// duplicate ACKs report the rest; one CE answered by ECE and CWR.
    pub(crate) fn lossy_transfer() -> TimeSequence {
        let mut t = TimeSequence {
            title: "10.0.0.1:5201 → 10.0.0.2:40000".into(),
            caption: "The third segment is lost; SACK blocks cover the hole until the R.".into(),
            ..Default::default()
        };
        let mark = |time_s, seq, kind| TsgMark { time_s, seq, kind };
        t.marks.push(mark(0.0, 0, TsgMarkKind::Syn));
        for i in 0..10u64 {
            t.segments.push(TsgSegment {
                time_s: 0.01 * i as f64,
                seq_start: 1 + 1000 * i,
                seq_end: 1 + 1000 * (i + 1),
                retransmit: false,
            });
        }
        t.marks.push(mark(0.05, 5001, TsgMarkKind::Ce));
        t.marks.push(mark(0.08, 8001, TsgMarkKind::Cwr));
        t.segments.push(TsgSegment {
            time_s: 0.15,
            seq_start: 2001,
            seq_end: 3001,
            retransmit: true,
        });
        for i in 0..10u64 {
            let time_s = 0.05 + 0.01 * i as f64;
            let ack = if i < 2 { 1 + 1000 * (i + 1) } else { 2001 };
            if i <= 2 {
                t.acks.push(TsgPoint { time_s, seq: ack });
                t.window_ends.push(TsgPoint {
                    time_s,
                    seq: ack + 20_000,
                });
            } else {
                t.dup_acks.push(TsgPoint { time_s, seq: ack });
            }
            if i >= 2 {
                t.sacks.push(TsgSack {
                    time_s,
                    left: 3001,
                    right: 1 + 1000 * (i + 1),
                });
            }
        }
        t.marks.push(mark(0.11, 2001, TsgMarkKind::Ece));
        t.acks.push(TsgPoint {
            time_s: 0.2,
            seq: 10_001,
        });
        t.window_ends.push(TsgPoint {
            time_s: 0.2,
            seq: 30_001,
        });
        t
    }

    #[test]
    fn chart_legend_explains_every_colour_present() {
        let names: Vec<String> = lossy_transfer()
            .chart()
            .legend()
            .into_iter()
            .map(|e| e.name)
            .collect();
        for n in [
            "data segment",
            "retransmitted segment",
            "retransmission",
            "cumulative ACK",
            "receive window (ACK + rwnd)",
            "SACK block",
            "duplicate ACK",
            "congestion experienced, on data",
            "congestion echoed, on ACK",
            "sender reduced its window",
            "connection open / close / reset",
        ] {
            assert!(
                names.iter().any(|x| x == n),
                "legend lacks {n:?}: {names:?}"
            );
        }
    }

    #[test]
    fn clean_transfer_legend_omits_marks_that_do_not_occur_but_keeps_the_basics() {
        let mut t = lossy_transfer();
        t.segments.retain(|s| !s.retransmit);
        t.marks.clear();
        t.sacks.clear();
        t.dup_acks.clear();
        let names: Vec<String> = t.chart().legend().into_iter().map(|e| e.name).collect();
        assert_eq!(
            names,
            vec![
                "receive window (ACK + rwnd)",
                "cumulative ACK",
                "data segment"
            ]
        );
    }

    #[test]
    fn svg_has_axis_units_and_r_and_ecn_text_marks() {
        let texts = svg_texts(&lossy_transfer().chart().to_svg().unwrap());
        for n in [
            "time (s)",
            "relative sequence number (bytes)",
            "R",
            "CE",
            "ECE",
            "CWR",
            "SYN",
        ] {
            assert!(texts.iter().any(|t| t == n), "svg lacks {n:?}");
        }
    }

    #[test]
    fn data_and_retransmissions_become_separate_ibeam_series() {
        let c = lossy_transfer().chart();
        let beams = |name: &str| match &c.series.iter().find(|s| s.name == name).unwrap().marks {
            Marks::IBeams(v) => v.clone(),
            m => panic!("{m:?}"),
        };
        assert_eq!(beams("data segment").len(), 10);
        assert_eq!(beams("retransmitted segment"), vec![(0.15, 2001.0, 3001.0)]);
    }

    #[test]
    fn thinning_merges_contiguous_segments_per_slice_but_keeps_retransmissions() {
        let t = lossy_transfer();
        assert_eq!(t.thinned(100, 4), t, "under the limit nothing changes");
        let thin = t.thinned(5, 2);
        assert!(thin.segments.len() < t.segments.len());
        assert_eq!(thin.segments.iter().filter(|s| s.retransmit).count(), 1);
        // The merged bars still cover every byte that was sent.
        let covered: u64 = thin
            .segments
            .iter()
            .filter(|s| !s.retransmit)
            .map(|s| s.seq_end - s.seq_start)
            .sum();
        assert_eq!(covered, 10_000);
        assert_eq!(thin.acks.first(), t.acks.first());
        assert_eq!(thin.acks.last(), t.acks.last());
    }

    #[test]
    fn cropping_keeps_only_what_was_drawn_in_the_window_and_clears_fixed_ranges() {
        let mut t = lossy_transfer();
        t.x_range_s = Some((0.0, 1.0));
        let c = t.cropped(0.045, 0.095);
        assert_eq!(c.title, t.title);
        assert_eq!(c.caption, t.caption);
        assert_eq!((c.x_range_s, c.y_range_bytes), (None, None));
        let times = |v: Vec<f64>| v.iter().all(|x| (0.045..=0.095).contains(x));
        assert!(times(c.segments.iter().map(|s| s.time_s).collect()));
        assert!(times(c.acks.iter().map(|p| p.time_s).collect()));
        assert!(times(c.marks.iter().map(|m| m.time_s).collect()));
        // Five of the ten segments; the ACKs of 0.05 to 0.07 and their window edges; the dup
        // ACKs of 0.08 and 0.09; the SACKs of 0.07 to 0.09; the CE and the CWR.
        assert_eq!(c.segments.len(), 5);
        assert_eq!(c.acks.len(), 3);
        assert_eq!(c.window_ends.len(), 3);
        assert_eq!(c.dup_acks.len(), 2);
        assert_eq!(c.sacks.len(), 3);
        assert_eq!(c.marks.len(), 2);
        assert_eq!(t.cropped(1.0, 2.0).segments, vec![]);
    }

    #[test]
    fn the_seq_span_counts_every_segment_sent_in_the_window_retransmissions_too() {
        let t = lossy_transfer();
        assert_eq!(t.seq_span(0.0, 0.025), Some((1, 3001)));
        assert_eq!(t.seq_span(0.12, 0.2), Some((2001, 3001)));
        assert_eq!(t.seq_span(0.5, 1.0), None);
    }

    #[test]
    fn a_close_up_starts_just_under_the_lowest_byte_sent_and_keeps_a_margin_of_data() {
        let t = lossy_transfer();
        let z = t.zoomed(0.12, 0.2, 1000.0);
        assert_eq!(z.x_range_s, Some((0.12, 0.2)));
        assert_eq!(z.y_range_bytes, Some((2001.0 - 20.0, 3001.0)));
        // The ACK staircase from before the window stays, to be drawn in from the edge.
        assert_eq!(z.acks, t.acks);
        let nothing = t.zoomed(5.0, 6.0, 100.0);
        assert_eq!(nothing.y_range_bytes, Some((-2.0, 100.0)));
        assert!(nothing.segments.is_empty());
    }

    #[test]
    fn close_ups_alike_share_the_tallest_span_so_slopes_compare() {
        let a = lossy_transfer();
        let mut b = lossy_transfer();
        b.segments.truncate(2);
        let [za, zb] = TimeSequence::zoomed_alike([&a, &b], 0.0, 0.1);
        let height = 10_000.0 * 1.05;
        assert_eq!(za.y_range_bytes, Some((1.0 - height * 0.02, 1.0 + height)));
        assert_eq!(zb.y_range_bytes, za.y_range_bytes);
        let [empty] = TimeSequence::zoomed_alike([&TimeSequence::default()], 0.0, 1.0);
        assert_eq!(empty.y_range_bytes, Some((-1.05 * 0.02, 1.05)));
    }

    #[test]
    fn xplot_draws_each_segment_as_a_line_with_arrows_and_retransmissions_in_red() {
        let x = lossy_transfer().xplot(None);
        let red_lines = x
            .items
            .iter()
            .filter(|(c, cmd)| *c == XplotColor::Red && matches!(cmd, XplotCommand::Line(..)))
            .count();
        assert_eq!(red_lines, 1);
        let uarrows = x
            .items
            .iter()
            .filter(|(_, c)| matches!(c, XplotCommand::UArrow(..)))
            .count();
        assert_eq!(uarrows, 11);
        assert!(x
            .items
            .iter()
            .any(|(_, c)| matches!(c, XplotCommand::RText(_, _, t) if t == "R")));
        assert!(x.items.iter().any(|(c, cmd)| *c == XplotColor::Orange
            && matches!(cmd, XplotCommand::AText(_, _, t) if t == "CE")));
    }
}
