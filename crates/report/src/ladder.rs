//! The ladder (message-sequence) diagram of an exchange between two hosts: time across, one
//! horizontal line per host, each packet a line from where and when it left one host to where
//! and when it reached the other. Data segments, pure ACKs and the SYNs and FINs that open and
//! close a connection have their own colours; packets that leave one host together share one
//! label ("ACK + 28 B", "2 × 42 B", "70 B + FIN").
//!
//! Input is plain data in seconds since the diagram's origin; this module neither reads
//! captures nor decides which packets belong to the exchange (`analyze::ladder` and
//! `analysis::ladder_arrows` do). It renders through `chart`.

use crate::chart::{Axis, Chart, Marks, Rgb, Series};

/// Where the upper and the lower host's lines are on the vertical axis.
const UPPER_Y: f64 = 1.0;
const LOWER_Y: f64 = 0.0;

/// Packets leaving one host less than this far apart draw one line on a diagram's scale, so
/// they share a label.
const TOGETHER_S: f64 = 1e-3;

/// About how wide a label is per character, as a share of the time axis: the charts' 13 px
/// font is about 7 px a character, on a plot about 790 px wide (a 900 px chart less its
/// margins).
const LABEL_CHAR_SHARE: f64 = 8.0 / 790.0;

/// Labels this far apart on the vertical axis (a fifth of the way between the hosts, about
/// 20 px) do not touch.
const LABEL_ROW: f64 = 0.2;

/// The colour of SYNs and FINs: they are neither data nor ACKs, and few.
pub const CONTROL_COLOR: Rgb = Rgb::BLACK;

/// What a packet carried. One packet can be two of these with the same times (data with a
/// FIN), drawn as one line with one label ("70 B + FIN").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LadderPacket {
    /// A SYN, the connection's first packet.
    Syn,
    /// The SYN-ACK answering it.
    SynAck,
    /// Payload bytes.
    Data { bytes: u32 },
    /// A FIN: its sender has no more to send.
    Fin,
    /// An ACK with no payload, SYN or FIN.
    PureAck,
}

impl LadderPacket {
    /// The packet's label: "SYN", "28 B", "ACK".
    pub fn label(self) -> String {
        match self {
            LadderPacket::Syn => "SYN".into(),
            LadderPacket::SynAck => "SYN-ACK".into(),
            LadderPacket::Data { bytes } => format!("{bytes} B"),
            LadderPacket::Fin => "FIN".into(),
            LadderPacket::PureAck => "ACK".into(),
        }
    }
}

/// One packet: from one host's line to the other's.
#[derive(Clone, Debug, PartialEq)]
pub struct LadderArrow {
    /// It left the upper host for the lower one.
    pub from_upper: bool,
    /// Seconds since the diagram's origin.
    pub depart_s: f64,
    pub arrive_s: f64,
    pub packet: LadderPacket,
}

/// A ladder diagram and its words.
#[derive(Clone, Debug, PartialEq)]
pub struct Ladder {
    pub title: String,
    /// One sentence saying what to see; drawn under the legend.
    pub caption: String,
    /// What the time axis counts from, e.g. "time since the request's first byte left the
    /// client"; its unit is s.
    pub time_axis: String,
    /// The time axis's range, s.
    pub x_range_s: (f64, f64),
    /// The host drawn above (at 1 on the vertical axis) and the one below (at 0). Their names
    /// are written at the origin, time 0.
    pub upper_host: String,
    pub lower_host: String,
    pub data_color: Rgb,
    pub ack_color: Rgb,
    pub arrows: Vec<LadderArrow>,
    /// Words written above the upper host's line at a time (s), e.g. "response complete".
    pub notes: Vec<(f64, String)>,
}

impl Ladder {
    /// The diagram as a 900×360 chart.
    pub fn chart(&self) -> Chart {
        let (x0, x1) = self.x_range_s;
        let y = |upper: bool| if upper { UPPER_Y } else { LOWER_Y };
        let (mut data, mut acks, mut control) = (Vec::new(), Vec::new(), Vec::new());
        for a in &self.arrows {
            let line = (
                (a.depart_s, y(a.from_upper)),
                (a.arrive_s, y(!a.from_upper)),
            );
            match a.packet {
                LadderPacket::PureAck => acks.push(line),
                LadderPacket::Data { .. } => data.push(line),
                LadderPacket::Syn | LadderPacket::SynAck | LadderPacket::Fin => control.push(line),
            }
        }
        // The hosts' names read from the left edge, above the upper line and below the lower.
        let hosts = vec![
            (x0, UPPER_Y + 0.12, self.upper_host.clone()),
            (x0, LOWER_Y - 0.2, self.lower_host.clone()),
        ];
        let notes = self
            .notes
            .iter()
            .map(|(x, text)| (*x, UPPER_Y + 0.12, text.clone()))
            .collect();
        // A host's line runs past both ends: charts put on one scale (`same_scale`) widen the
        // range, and the chart cuts the line at whatever edge it ends up with.
        let far = 1e3 * (x1 - x0).abs().max(1.0);
        let host_line = |y: f64| Series::line("", Rgb::GREY, vec![(x0 - far, y), (x1 + far, y)]);
        Chart::new(
            self.title.clone(),
            Axis::new(self.time_axis.clone(), "s").with_range(x0, x1),
            // Its values only place the two hosts, which are named on their lines.
            Axis::new("", "").with_range(-0.25, 1.25).unnumbered(),
        )
        .size(900, 360)
        .caption(self.caption.clone())
        .with(host_line(UPPER_Y))
        .with(host_line(LOWER_Y))
        .with(Series::new("pure ACK", self.ack_color, Marks::Segments(acks)).keep_in_legend())
        // Listed only where there are some: an exchange in mid-connection has none.
        .with(Series::new(
            "SYN / FIN",
            CONTROL_COLOR,
            Marks::Segments(control),
        ))
        .with(
            Series::new("data segment", self.data_color, Marks::Segments(data))
                .stroke(2)
                .keep_in_legend(),
        )
        .with(Series::new(
            "",
            Rgb::BLACK,
            Marks::Text(labels(&self.arrows, x1 - x0)),
        ))
        .with(Series::new("", Rgb::BLACK, Marks::Names(hosts)))
        .with(Series::new("", Rgb::BLACK, Marks::Labels(notes)))
    }
}

/// One label per group of packets that leave one host together, naming them all with the
/// ACK first and equal packets counted ("ACK + 28 B", "2 × 42 B"). It is placed a third of
/// the way along the group's first line that is not a pure ACK, or two thirds along an ACK's
/// when there is none, so that lines that cross do not write over each other; where that
/// would cover an earlier label (a host that answers a packet at once, on a time axis
/// `span_s` long that puts the two labels close), halfway, or at the other third.
fn labels(arrows: &[LadderArrow], span_s: f64) -> Vec<(f64, f64, String)> {
    let y = |upper: bool| if upper { UPPER_Y } else { LOWER_Y };
    let mut out: Vec<(f64, f64, String)> = Vec::new();
    let mut done = vec![false; arrows.len()];
    for i in 0..arrows.len() {
        if done[i] {
            continue;
        }
        let first = &arrows[i];
        let mut group: Vec<&LadderArrow> = Vec::new();
        for (j, a) in arrows.iter().enumerate().skip(i) {
            if !done[j]
                && a.from_upper == first.from_upper
                && (a.depart_s - first.depart_s).abs() < TOGETHER_S
            {
                done[j] = true;
                group.push(a);
            }
        }
        group.sort_by_key(|a| a.packet != LadderPacket::PureAck);
        let mut text: Vec<String> = Vec::new();
        let mut k = 0;
        while k < group.len() {
            let same = group[k..]
                .iter()
                .take_while(|a| a.packet == group[k].packet)
                .count();
            let label = group[k].packet.label();
            text.push(if same > 1 {
                format!("{same} × {label}")
            } else {
                label
            });
            k += same;
        }
        let at = group
            .iter()
            .find(|a| a.packet != LadderPacket::PureAck)
            .unwrap_or(&group[0]);
        let along = if at.packet == LadderPacket::PureAck {
            [0.7, 0.5, 0.3]
        } else {
            [0.3, 0.5, 0.7]
        };
        let text = text.join(" + ");
        let point = |f: f64| {
            let lx = at.depart_s + f * (at.arrive_s - at.depart_s);
            let ly = y(at.from_upper) + f * (y(!at.from_upper) - y(at.from_upper));
            (lx, ly)
        };
        let chars = text.chars().count();
        let clear = |&(x, y): &(f64, f64)| {
            out.iter().all(|(px, py, pt)| {
                let wide = (chars.max(pt.chars().count()) + 1) as f64 * LABEL_CHAR_SHARE * span_s;
                (py - y).abs() > LABEL_ROW - 1e-9 || (px - x).abs() >= wide
            })
        };
        let (lx, ly) = along
            .map(point)
            .into_iter()
            .find(clear)
            .unwrap_or(point(along[0]));
        out.push((lx, ly, text));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chart::svg_texts;

    fn arrow(from_upper: bool, depart_s: f64, packet: LadderPacket) -> LadderArrow {
        LadderArrow {
            from_upper,
            depart_s,
            arrive_s: depart_s + 0.25,
            packet,
        }
    }

    fn data(bytes: u32) -> LadderPacket {
        LadderPacket::Data { bytes }
    }

    /// A request in two writes, the second held for the first's ACK; the reply the same.
    fn nagle_exchange() -> Vec<LadderArrow> {
        vec![
            arrow(true, 0.0, data(28)),
            arrow(false, 0.29, LadderPacket::PureAck),
            arrow(true, 0.54, data(42)),
            arrow(false, 0.79, LadderPacket::PureAck),
            arrow(false, 0.7903, data(28)),
            arrow(true, 1.04, LadderPacket::PureAck),
            arrow(false, 1.29, data(42)),
        ]
    }

    fn ladder(arrows: Vec<LadderArrow>) -> Ladder {
        Ladder {
            title: "One exchange".into(),
            caption: "Three round trips.".into(),
            time_axis: "time since the request left".into(),
            x_range_s: (-0.03, 1.6),
            upper_host: "client".into(),
            lower_host: "server".into(),
            data_color: Rgb(213, 94, 0),
            ack_color: Rgb(0, 160, 0),
            arrows,
            notes: vec![(1.54, "response complete".into())],
        }
    }

    fn texts(arrows: &[LadderArrow]) -> Vec<String> {
        labels(arrows, 1.6).into_iter().map(|l| l.2).collect()
    }

    #[test]
    fn an_ack_and_data_leaving_together_share_one_label_ack_first() {
        assert_eq!(
            texts(&nagle_exchange()),
            ["28 B", "ACK", "42 B", "ACK + 28 B", "ACK", "42 B"]
        );
    }

    #[test]
    fn equal_packets_leaving_together_are_counted() {
        let two = [arrow(true, 0.0, data(42)), arrow(true, 0.0002, data(42))];
        assert_eq!(texts(&two), ["2 × 42 B"]);
        // From the other host, or two milliseconds later: separate labels.
        let apart = [
            arrow(true, 0.0, data(42)),
            arrow(false, 0.0, data(42)),
            arrow(true, 0.002, data(42)),
        ];
        assert_eq!(texts(&apart), ["42 B", "42 B", "42 B"]);
    }

    #[test]
    fn the_handshake_and_the_close_are_named_by_their_flags_and_a_fin_on_data_joins_its_label() {
        let opening_and_close = [
            arrow(true, 0.0, LadderPacket::Syn),
            arrow(false, 0.25, LadderPacket::SynAck),
            arrow(true, 0.5, LadderPacket::PureAck),
            arrow(false, 0.8, data(70)),
            arrow(false, 0.8, LadderPacket::Fin),
        ];
        assert_eq!(
            texts(&opening_and_close),
            ["SYN", "SYN-ACK", "ACK", "70 B + FIN"]
        );
        let c = ladder(opening_and_close.to_vec()).chart();
        let control = c.series.iter().find(|s| s.name == "SYN / FIN").unwrap();
        assert_eq!(control.color, CONTROL_COLOR);
        let Marks::Segments(lines) = &control.marks else {
            panic!("SYN / FIN is not segments")
        };
        assert_eq!(lines.len(), 3);
        let legend: Vec<String> = c.legend().into_iter().map(|e| e.name).collect();
        assert_eq!(legend, ["pure ACK", "SYN / FIN", "data segment"]);
    }

    #[test]
    fn a_label_sits_near_the_sender_on_data_and_near_the_receiver_on_a_lone_ack() {
        let l = labels(
            &[
                arrow(true, 0.0, data(28)),
                arrow(false, 1.0, LadderPacket::PureAck),
                arrow(false, 2.0, LadderPacket::PureAck),
                arrow(false, 2.0001, data(70)),
            ],
            2.5,
        );
        // Data 0.3 of the way down from the upper host; a lone ACK 0.7 of the way up.
        assert!(close(&l[0], (0.3 * 0.25, 0.7)), "{l:?}");
        assert!(close(&l[1], (1.0 + 0.7 * 0.25, 0.7)), "{l:?}");
        // With data in the group, on the data's line.
        assert!(close(&l[2], (2.0001 + 0.3 * 0.25, 0.3)), "{l:?}");
    }

    fn close((x, y, _): &(f64, f64, String), want: (f64, f64)) -> bool {
        (x - want.0).abs() < 1e-9 && (y - want.1).abs() < 1e-9
    }

    #[test]
    fn a_label_that_would_cover_the_one_before_moves_along_its_line() {
        // The upper host sends 42 B the moment an ACK reaches it: both labels would sit near
        // it, 0.15 s apart, which on a 10 s axis is a few pixels.
        let v = [
            arrow(false, 0.75, LadderPacket::PureAck),
            arrow(true, 1.0, data(42)),
        ];
        let l = labels(&v, 10.0);
        assert!(close(&l[0], (0.75 + 0.7 * 0.25, 0.7)), "{l:?}");
        assert!(close(&l[1], (1.0 + 0.5 * 0.25, 0.5)), "{l:?}");
        // On a 1 s axis they are apart as they are.
        let l = labels(&v, 1.0);
        assert!(close(&l[1], (1.0 + 0.3 * 0.25, 0.7)), "{l:?}");
    }

    #[test]
    fn the_chart_draws_both_hosts_acks_and_data_in_their_colours() {
        let c = ladder(nagle_exchange()).chart();
        assert_eq!((c.width_px, c.height_px), (900, 360));
        assert_eq!(c.x.range, Some((-0.03, 1.6)));
        // The hosts are named on their lines, from the left edge, and not by numbers.
        assert!(!c.y.numbered);
        let hosts = c.series.iter().find(|s| matches!(s.marks, Marks::Names(_)));
        assert_eq!(
            hosts.unwrap().marks,
            Marks::Names(vec![
                (-0.03, 1.12, "client".into()),
                (-0.03, -0.2, "server".into())
            ])
        );
        let segments = |name: &str| {
            let s = c.series.iter().find(|s| s.name == name).unwrap();
            let Marks::Segments(v) = &s.marks else {
                panic!("{name} is not segments")
            };
            (s.color, v.len())
        };
        assert_eq!(segments("data segment"), (Rgb(213, 94, 0), 4));
        assert_eq!(segments("pure ACK"), (Rgb(0, 160, 0), 3));
        let mut wide = ladder(Vec::new()).chart();
        wide.x.range = Some((-0.03, 10.0));
        let mut charts = [c, wide];
        crate::same_scale(&mut charts);
        let [c, _] = charts;
        // Both hosts' lines reach the edges of a range widened to another chart's.
        let host_lines: Vec<_> = c
            .series
            .iter()
            .filter(|s| s.color == Rgb::GREY)
            .map(|s| match &s.marks {
                Marks::Line(v) => (v[0].0, v[1].0),
                m => panic!("{m:?}"),
            })
            .collect();
        assert_eq!(host_lines.len(), 2);
        assert!(host_lines.iter().all(|&(a, b)| a <= -0.03 && b >= 10.0));
        let texts = svg_texts(&c.to_svg().unwrap());
        for needle in ["client", "server", "response complete", "ACK + 28 B"] {
            assert!(
                texts.iter().any(|t| t == needle),
                "lacks {needle:?}: {texts:?}"
            );
        }
    }

    #[test]
    fn an_empty_ladder_still_explains_both_colours() {
        let names: Vec<String> = ladder(Vec::new())
            .chart()
            .legend()
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert_eq!(names, ["pure ACK", "data segment"]);
    }
}
