//! Handshake times over all connections of an analysis: one sample per connection, taken
//! where the capture sat, and their distribution (count, median, 90th percentile, share under
//! 100 ms, the CDF).
//!
//! Responsible for choosing which part of the three-way handshake (RFC 9293 §3.5) stands for
//! "the handshake's time" at each vantage point, and for the percentile arithmetic. Not
//! responsible for deciding the vantage point (that is `tcp::capture_points`) nor for drawing
//! the CDF (the `report` crate).
//!
//! At the client, a handshake costs the application the time from its first SYN to the
//! SYN-ACK (what `connect()` waited, SYN retransmissions included). At the server, the time
//! from its SYN-ACK to the client's ACK is the same round trip seen from the other end. In
//! between (or where the point is unknown), SYN to ACK is the round trip through the capture
//! point, the nearest thing to either.

use serde::Serialize;

use crate::model::*;

/// Where a connection's handshake sample was taken, and so which part of the handshake it is.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HandshakePart {
    /// Captured at the client: first SYN to the first SYN-ACK.
    SynToSynack,
    /// Captured at the server: first SYN-ACK to the ACK that acknowledged it.
    SynackToAck,
    /// Captured in between, or the point is unknown: first SYN to that ACK.
    SynToAck,
}

/// The handshake time of one connection and which part of the handshake it measures; `None`
/// when the capture does not hold the packets that part needs.
pub fn handshake_sample(c: &Connection) -> Option<(wire::Duration, HandshakePart)> {
    let h = &c.handshake;
    let gap = |from: Option<wire::Instant>, to: Option<wire::Instant>| {
        let (from, to) = (from?, to?);
        (to >= from).then(|| to - from)
    };
    // `a2b`'s capture point is the client's side: next to `a`'s data's sender is the client.
    match c.a2b.capture_point {
        CapturePoint::Sender => {
            gap(h.syn_time, h.synack_time).map(|d| (d, HandshakePart::SynToSynack))
        }
        CapturePoint::Receiver => {
            gap(h.synack_time, h.ack_time).map(|d| (d, HandshakePart::SynackToAck))
        }
        CapturePoint::Middle | CapturePoint::Unknown => {
            gap(h.syn_time, h.ack_time).map(|d| (d, HandshakePart::SynToAck))
        }
    }
}

/// The distribution of handshake times over the connections of an analysis.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HandshakeSummary {
    /// Every sample, in milliseconds, ascending.
    pub samples_ms: Vec<f64>,
    /// How many samples were taken at the client, at the server, and elsewhere.
    pub at_client: usize,
    pub at_server: usize,
    pub elsewhere: usize,
}

/// The most CDF points the JSON carries; above this, points at evenly spaced ranks.
pub const MAX_CDF_POINTS: usize = 1000;

impl HandshakeSummary {
    pub fn count(&self) -> usize {
        self.samples_ms.len()
    }

    /// The `p`-th percentile (0 < p <= 100) by the nearest-rank method: the smallest sample
    /// with at least p % of the samples at or below it. `None` without samples.
    pub fn percentile_ms(&self, p: f64) -> Option<f64> {
        let n = self.samples_ms.len();
        if n == 0 {
            return None;
        }
        let rank = ((p / 100.0) * n as f64).ceil() as usize;
        Some(self.samples_ms[rank.clamp(1, n) - 1])
    }

    /// The share of samples strictly under `ms`, in percent; `None` without samples.
    pub fn under_pct(&self, ms: f64) -> Option<f64> {
        let n = self.samples_ms.len();
        (n > 0).then(|| self.samples_ms.partition_point(|&x| x < ms) as f64 * 100.0 / n as f64)
    }

    /// The empirical CDF as (milliseconds, fraction of samples at or below it) steps: every
    /// sample up to [`MAX_CDF_POINTS`], else that many points at evenly spaced ranks (the
    /// last one the largest sample).
    pub fn cdf(&self) -> Vec<(f64, f64)> {
        let n = self.samples_ms.len();
        let ranks: Vec<usize> = if n <= MAX_CDF_POINTS {
            (1..=n).collect()
        } else {
            (1..=MAX_CDF_POINTS)
                .map(|i| (i * n).div_ceil(MAX_CDF_POINTS))
                .collect()
        };
        ranks
            .into_iter()
            .map(|r| (self.samples_ms[r - 1], r as f64 / n as f64))
            .collect()
    }

    /// Which part of the handshake the samples measure, in words, for a caption or a line.
    pub fn what(&self) -> &'static str {
        match (self.at_client > 0, self.at_server > 0, self.elsewhere > 0) {
            (true, false, false) => "SYN to SYN-ACK at the client",
            (false, true, false) => "SYN-ACK to ACK at the server",
            (false, false, true) => "SYN to ACK where the capture sat",
            _ => "SYN to SYN-ACK at clients, SYN-ACK to ACK at servers, SYN to ACK elsewhere",
        }
    }
}

impl Analysis {
    /// The handshake times of all connections whose handshake was captured.
    pub fn handshakes(&self) -> HandshakeSummary {
        let mut s = HandshakeSummary::default();
        for c in &self.connections {
            let Some((d, part)) = handshake_sample(c) else {
                continue;
            };
            s.samples_ms.push(d.as_secs_f64() * 1e3);
            match part {
                HandshakePart::SynToSynack => s.at_client += 1,
                HandshakePart::SynackToAck => s.at_server += 1,
                HandshakePart::SynToAck => s.elsewhere += 1,
            }
        }
        s.samples_ms.sort_by(f64::total_cmp);
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::Instant;

    fn conn(point: CapturePoint, syn: u64, synack: u64, ack: u64) -> Connection {
        let t = |ms: u64| Some(Instant::from_nanos(ms * 1_000_000));
        let mut c = Connection {
            vantage: Vantage::default(),
            a: "10.0.0.1:40000".parse().unwrap(),
            b: "10.0.0.2:80".parse().unwrap(),
            first_time: Instant::from_nanos(syn * 1_000_000),
            last_time: Instant::from_nanos(ack * 1_000_000),
            handshake: Handshake {
                syn_time: t(syn),
                syn_count: 1,
                synack_time: t(synack),
                synack_count: 1,
                ack_time: t(ack),
                ..Handshake::default()
            },
            a2b: Direction::default(),
            b2a: Direction::default(),
            diagnoses: Vec::new(),
            frames: Frames::default(),
            state: ConnState::Open,
            story: Story::default(),
        };
        c.a2b.capture_point = point;
        c
    }

    #[test]
    fn the_sample_is_the_round_trip_seen_from_where_the_capture_sat() {
        let ms = |c: &Connection| handshake_sample(c).map(|(d, p)| (d.as_secs_f64() * 1e3, p));
        assert_eq!(
            ms(&conn(CapturePoint::Sender, 0, 80, 81)),
            Some((80.0, HandshakePart::SynToSynack))
        );
        assert_eq!(
            ms(&conn(CapturePoint::Receiver, 0, 1, 81)),
            Some((80.0, HandshakePart::SynackToAck))
        );
        assert_eq!(
            ms(&conn(CapturePoint::Middle, 0, 30, 80)),
            Some((80.0, HandshakePart::SynToAck))
        );
        let mut no_ack = conn(CapturePoint::Receiver, 0, 1, 81);
        no_ack.handshake.ack_time = None;
        assert_eq!(ms(&no_ack), None);
        // A SYN-ACK stamped before the SYN (a clock step) is no sample, not a huge one.
        assert_eq!(ms(&conn(CapturePoint::Sender, 50, 10, 60)), None);
    }

    #[test]
    fn percentiles_are_nearest_rank_and_under_100ms_is_strict() {
        let s = HandshakeSummary {
            samples_ms: vec![
                10.0, 20.0, 50.0, 100.0, 150.0, 200.0, 250.0, 300.0, 350.0, 900.0,
            ],
            ..HandshakeSummary::default()
        };
        assert_eq!(s.percentile_ms(50.0), Some(150.0));
        assert_eq!(s.percentile_ms(90.0), Some(350.0));
        assert_eq!(s.percentile_ms(100.0), Some(900.0));
        assert_eq!(s.under_pct(100.0), Some(30.0));
        assert_eq!(HandshakeSummary::default().percentile_ms(50.0), None);
        assert_eq!(HandshakeSummary::default().under_pct(100.0), None);
    }

    #[test]
    fn the_cdf_has_every_sample_until_it_would_be_too_long() {
        let small = HandshakeSummary {
            samples_ms: vec![5.0, 7.0, 9.0, 11.0],
            ..HandshakeSummary::default()
        };
        assert_eq!(
            small.cdf(),
            vec![(5.0, 0.25), (7.0, 0.5), (9.0, 0.75), (11.0, 1.0)]
        );
        let big = HandshakeSummary {
            samples_ms: (0..4500).map(|i| i as f64).collect(),
            ..HandshakeSummary::default()
        };
        let cdf = big.cdf();
        assert_eq!(cdf.len(), MAX_CDF_POINTS);
        assert_eq!(cdf.last(), Some(&(4499.0, 1.0)));
        assert!(cdf.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1));
    }

    #[test]
    fn an_analysis_counts_each_connection_once_by_where_it_was_measured() {
        let a = Analysis {
            connections: vec![
                conn(CapturePoint::Sender, 0, 120, 121),
                conn(CapturePoint::Receiver, 0, 1, 41),
                conn(CapturePoint::Unknown, 0, 1, 2),
            ],
            ..Analysis::default()
        };
        let s = a.handshakes();
        assert_eq!(s.samples_ms, vec![2.0, 40.0, 120.0]);
        assert_eq!((s.at_client, s.at_server, s.elsewhere), (1, 1, 1));
        assert!(s.what().contains("elsewhere"));
    }
}
