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
//! It renders through `chart` (SVG/PNG) and `xplot` (`.xpl`).

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
    /// The IP header carried the CE codepoint.
    pub ce: bool,
    /// The TCP header had CWR set.
    pub cwr: bool,
}

/// An ACK travelling the other way, as seen at the capture point.
#[derive(Clone, Debug, PartialEq)]
pub struct TsgAck {
    pub time_s: f64,
    /// Relative cumulative acknowledgement number.
    pub ack: u64,
    /// Relative right edge of the receive window: `ack + (window << scale)`, in bytes.
    pub window_end: u64,
    /// SACK blocks `(left, right)` in relative sequence numbers.
    pub sack: Vec<(u64, u64)>,
    /// It acknowledges nothing new (same ACK, same window, no data).
    pub duplicate: bool,
    /// The TCP header had ECE set.
    pub ece: bool,
}

/// What a free-standing text mark stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TsgMarkKind {
    Syn,
    Fin,
    Rst,
    /// The receiver advertised a zero window.
    ZeroWindow,
}

impl TsgMarkKind {
    fn text(self) -> &'static str {
        match self {
            TsgMarkKind::Syn => "SYN",
            TsgMarkKind::Fin => "FIN",
            TsgMarkKind::Rst => "RST",
            TsgMarkKind::ZeroWindow => "Z",
        }
    }
}

/// A text mark at a point of the graph.
#[derive(Clone, Debug, PartialEq)]
pub struct TsgMark {
    pub time_s: f64,
    pub seq: u64,
    pub kind: TsgMarkKind,
}

/// Everything needed to draw one direction's time-sequence graph.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct TimeSequence {
    /// E.g. "10.0.0.1:5201 → 10.0.0.2:40312".
    pub title: String,
    pub caption: String,
    pub segments: Vec<TsgSegment>,
    pub acks: Vec<TsgAck>,
    pub marks: Vec<TsgMark>,
    /// Fixed time window; `None` fits the data.
    pub x_range_s: Option<(f64, f64)>,
    /// Fixed sequence window; `None` fits the data.
    pub y_range_bytes: Option<(f64, f64)>,
}

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

        let beams = |retransmit: bool| -> Vec<(f64, f64, f64)> {
            self.segments
                .iter()
                .filter(|s| s.retransmit == retransmit)
                .map(|s| (s.time_s, s.seq_start as f64, s.seq_end as f64))
                .collect()
        };
        // Lines go first so that segments and marks are drawn over them.
        c.push(
            Series::step(
                "receive window (ACK + rwnd)",
                colors::WINDOW,
                self.window_points(),
            )
            .keep_in_legend(),
        );
        c.push(Series::step("cumulative ACK", colors::ACK, self.ack_points()).keep_in_legend());
        c.push(
            Series::new(
                "duplicate ACK",
                colors::ACK,
                Marks::Ticks(
                    self.acks
                        .iter()
                        .filter(|a| a.duplicate)
                        .map(|a| (a.time_s, a.ack as f64))
                        .collect(),
                ),
            )
            .stroke(1),
        );
        c.push(
            Series::new(
                "SACK block",
                colors::SACK,
                Marks::Segments(
                    self.acks
                        .iter()
                        .flat_map(|a| {
                            a.sack
                                .iter()
                                .map(move |&(l, r)| ((a.time_s, l as f64), (a.time_s, r as f64)))
                        })
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
        let text = |name: &str, color: Rgb, items: Vec<(f64, f64, String)>| {
            Series::new(name, color, Marks::Text(items))
        };
        c.push(text(
            "retransmission",
            colors::RETRANSMIT,
            self.segments
                .iter()
                .filter(|s| s.retransmit)
                .map(|s| (s.time_s, s.seq_end as f64, "R".to_string()))
                .collect(),
        ));
        c.push(text(
            "CE on data (congestion experienced)",
            colors::CE,
            self.segments
                .iter()
                .filter(|s| s.ce)
                .map(|s| (s.time_s, s.seq_end as f64, "CE".to_string()))
                .collect(),
        ));
        c.push(text(
            "ECE on ACK (echo to sender)",
            colors::ECE,
            self.acks
                .iter()
                .filter(|a| a.ece)
                .map(|a| (a.time_s, a.ack as f64, "ECE".to_string()))
                .collect(),
        ));
        c.push(text(
            "CWR on data (window reduced)",
            colors::CWR,
            self.segments
                .iter()
                .filter(|s| s.cwr)
                .map(|s| (s.time_s, s.seq_end as f64, "CWR".to_string()))
                .collect(),
        ));
        let mut events: Vec<(f64, f64, String)> = self
            .marks
            .iter()
            .map(|m| (m.time_s, m.seq as f64, m.kind.text().to_string()))
            .collect();
        events.sort_by(|a, b| a.0.total_cmp(&b.0));
        c.push(text(
            "SYN / FIN / RST / Z = zero window",
            colors::EVENT,
            events,
        ));
        c
    }

    /// The ACK staircase, extended to the end of the data so that a final ACK shows.
    fn ack_points(&self) -> Vec<(f64, f64)> {
        self.acks.iter().map(|a| (a.time_s, a.ack as f64)).collect()
    }

    fn window_points(&self) -> Vec<(f64, f64)> {
        self.acks
            .iter()
            .map(|a| (a.time_s, a.window_end as f64))
            .collect()
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
        let mut prev_ack: Option<&TsgAck> = None;
        for a in &self.acks {
            if let Some(pa) = prev_ack {
                p.push(
                    XplotColor::Green,
                    XplotCommand::Line(pa.time_s, pa.ack as f64, a.time_s, pa.ack as f64),
                );
                if a.ack != pa.ack {
                    p.push(
                        XplotColor::Green,
                        XplotCommand::Line(a.time_s, pa.ack as f64, a.time_s, a.ack as f64),
                    );
                }
                p.push(
                    XplotColor::Yellow,
                    XplotCommand::Line(
                        pa.time_s,
                        pa.window_end as f64,
                        a.time_s,
                        pa.window_end as f64,
                    ),
                );
                if a.window_end != pa.window_end {
                    p.push(
                        XplotColor::Yellow,
                        XplotCommand::Line(
                            a.time_s,
                            pa.window_end as f64,
                            a.time_s,
                            a.window_end as f64,
                        ),
                    );
                }
            }
            if a.duplicate {
                p.push(
                    XplotColor::Green,
                    XplotCommand::DTick(a.time_s, a.ack as f64),
                );
            }
            for &(l, r) in &a.sack {
                p.push(
                    XplotColor::Purple,
                    XplotCommand::Line(a.time_s, l as f64, a.time_s, r as f64),
                );
                p.push(XplotColor::Purple, XplotCommand::HTick(a.time_s, l as f64));
                p.push(XplotColor::Purple, XplotCommand::HTick(a.time_s, r as f64));
            }
            if a.ece {
                p.push(
                    XplotColor::Magenta,
                    XplotCommand::BText(a.time_s, a.ack as f64, "ECE".into()),
                );
            }
            prev_ack = Some(a);
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
            if s.ce {
                p.push(XplotColor::Orange, XplotCommand::AText(t, hi, "CE".into()));
            }
            if s.cwr {
                p.push(XplotColor::Blue, XplotCommand::LText(t, hi, "CWR".into()));
            }
        }
        for m in &self.marks {
            p.push(
                XplotColor::White,
                XplotCommand::AText(m.time_s, m.seq as f64, m.kind.text().into()),
            );
        }
        p
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::chart::tests::svg_texts;

    /// Ten segments of 1000 bytes, one lost and retransmitted, SACKed meanwhile, one CE mark.
    pub(crate) fn lossy_transfer() -> TimeSequence {
        let mut t = TimeSequence {
            title: "10.0.0.1:5201 → 10.0.0.2:40000".into(),
            caption: "The third segment is lost; SACK blocks cover the hole until the R.".into(),
            ..Default::default()
        };
        for i in 0..10u64 {
            t.segments.push(TsgSegment {
                time_s: 0.01 * i as f64,
                seq_start: 1 + 1000 * i,
                seq_end: 1 + 1000 * (i + 1),
                retransmit: false,
                ce: i == 5,
                cwr: i == 8,
            });
        }
        t.segments.push(TsgSegment {
            time_s: 0.15,
            seq_start: 2001,
            seq_end: 3001,
            retransmit: true,
            ce: false,
            cwr: false,
        });
        for i in 0..10u64 {
            let ack = if i < 2 { 1 + 1000 * (i + 1) } else { 2001 };
            t.acks.push(TsgAck {
                time_s: 0.05 + 0.01 * i as f64,
                ack,
                window_end: ack + 20_000,
                sack: if i >= 2 {
                    vec![(3001, 1 + 1000 * (i + 1))]
                } else {
                    vec![]
                },
                duplicate: i >= 3,
                ece: i == 6,
            });
        }
        t.acks.push(TsgAck {
            time_s: 0.2,
            ack: 10_001,
            window_end: 30_001,
            sack: vec![],
            duplicate: false,
            ece: false,
        });
        t.marks.push(TsgMark {
            time_s: 0.0,
            seq: 0,
            kind: TsgMarkKind::Syn,
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
            "CE on data (congestion experienced)",
            "ECE on ACK (echo to sender)",
            "CWR on data (window reduced)",
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
        for s in &mut t.segments {
            s.ce = false;
            s.cwr = false;
        }
        for a in &mut t.acks {
            a.sack.clear();
            a.ece = false;
            a.duplicate = false;
        }
        let names: Vec<String> = t.chart().legend().into_iter().map(|e| e.name).collect();
        assert!(names.contains(&"data segment".to_string()));
        assert!(names.contains(&"cumulative ACK".to_string()));
        assert!(!names
            .iter()
            .any(|n| n.contains("SACK") || n.contains("CE") || n.starts_with("retrans")));
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
    }
}
