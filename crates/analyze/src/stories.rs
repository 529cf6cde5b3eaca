//! The classic TCP stories, told from a connection's time budget: a slow server, a slow
//! client, a long or slow path, a receiver that stopped reading, a peer that went away, a
//! refused connection, a SYN nobody answered.
//!
//! [`tell`] reads what [`crate::budget::Timeline`] found and adds [`Diagnosis`] values to the
//! connection; it reads no packets. Thresholds are constants here with their reasons; the
//! definitions are written out for users in `docs/analyze.md` ("Where the time went"). A story
//! never claims what the capture does not show: a recovery that no ACK confirmed is not one.

use wire::{Duration, Instant};

use crate::budget::Evidence;
use crate::model::*;

/// A wait a person notices: the server's first byte, or the client's first request, this
/// late (beyond the round trip) is a story of its own.
const NOTICEABLE: Duration = Duration::from_millis(100);
/// A zero window held this long at once is a receiver that stopped reading, not one that
/// keeps briefly falling behind (a tiny receive buffer closes and reopens the window every
/// few milliseconds; that is `rwnd_limited`).
const ZERO_WINDOW_MIN: Duration = Duration::from_millis(200);
/// The network is the story when it took at least this long and half the connection...
const PATH_MIN: Duration = Duration::from_millis(200);
/// ...and the path's own round trip is this long (a satellite hop, another continent)...
const LONG_RTT: Duration = Duration::from_millis(100);
/// ...or some round trip was this many times the connection's own minimum (and at least
/// [`LONG_RTT`] above it).
const RTT_FACTOR: f64 = 4.0;
/// Retransmissions without any answer before the peer counts as gone (a single one is a
/// loss; two in a row with backoff and silence is a dead peer or path).
const UNANSWERED_MIN: usize = 2;
/// A retransmission timer's waits never shrink: one this fraction of the one before still
/// counts as no shorter (the capture's timestamps and the timer's granularity blur them)...
const BACKOFF_SLACK: f64 = 0.9;
/// ...and they grow: the last is at least this many times the first (two doublings make 4;
/// a tail loss probe first, then one doubling, make about 2).
const BACKOFF_GROWTH: f64 = 1.8;
/// Waits this long have reached the timer's ceiling and stop growing (Linux caps the timer at
/// 120 s; RFC 6298 §2.5 allows a cap of 60 s or more).
const BACKOFF_CAP: Duration = Duration::from_secs(60);

/// Whether sends at `first` then at each of `retx` are a retransmission timer backing off:
/// no wait shorter than the one before (within [`BACKOFF_SLACK`], or once the waits reach
/// [`BACKOFF_CAP`]), and the last at least [`BACKOFF_GROWTH`] times the first. Linux's first
/// repeat is often a tail loss probe (RFC 8985 §7) about one timeout early, so the first two
/// waits may be alike; the timer itself doubles (RFC 6298 §5.5).
fn backs_off(first: Instant, retx: &[Instant]) -> bool {
    let mut prev_at = first;
    let mut gaps = Vec::with_capacity(retx.len());
    for &t in retx {
        gaps.push((t - prev_at).as_secs_f64());
        prev_at = t;
    }
    let cap = BACKOFF_CAP.as_secs_f64();
    let steady = gaps
        .windows(2)
        .all(|w| w[1] >= BACKOFF_SLACK * w[0] || w[0] >= cap);
    match (gaps.first(), gaps.last()) {
        (Some(&g0), Some(&gl)) => steady && (gl >= BACKOFF_GROWTH * g0 || g0 >= cap),
        _ => false,
    }
}

fn ms_ns(ns: u64) -> f64 {
    ns as f64 / 1e6
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn dir_of(side: usize) -> Dir {
    if side == 0 {
        Dir::AtoB
    } else {
        Dir::BtoA
    }
}

/// Adds the stories to `c.diagnoses` (kept in order of start time) and removes what they
/// replace: retransmission timeouts, loss episodes and repeated SYN-ACKs of a peer that never
/// answered are part of `peer_unresponsive`, and a SYN never answered is `syn_timeout`, not `syn_retransmit`.
pub(crate) fn tell(c: &mut Connection, ev: &Evidence, rtt_to: [Option<Duration>; 2]) {
    let mut out = Vec::new();
    let client_side = match c.story.client {
        Some(Dir::AtoB) => Some(0),
        Some(Dir::BtoA) => Some(1),
        None => None,
    };
    let name_of = |side: usize| match client_side {
        Some(cs) if cs == side => "client",
        Some(_) => "server",
        None => {
            if side == 0 {
                "a"
            } else {
                "b"
            }
        }
    };

    // connection_refused: a RST instead of a SYN-ACK.
    if let (Some(syn), Some(rst)) = (ev.syn_at, ev.refused_at) {
        out.push(Diagnosis {
            kind: DiagnosisKind::ConnectionRefused,
            frames: Frames::default(),
            dir: Some(Dir::AtoB),
            start: syn,
            end: rst,
            delay_ms: ms(rst - syn),
            summary: format!(
                "the SYN to {} was answered by a RST after {:.1} ms: nothing listens on port {} (or a firewall refused it)",
                c.b,
                ms(rst - syn),
                c.b.port()
            ),
        });
    }
    // syn_timeout: the SYN went more than once and nothing ever came back. A client that sent
    // anything but SYNs had its SYN answered, whether or not the capture has the answer (a
    // capture of one direction).
    let unanswered_syn = ev.syn_at.is_some()
        && !ev.synack_seen
        && ev.refused_at.is_none()
        && c.a2b.stats.packets <= u64::from(c.handshake.syn_count);
    if unanswered_syn && c.handshake.syn_count >= 2 {
        let first = ev.syn_at.unwrap_or(c.first_time);
        let waits: Vec<String> = ev
            .syn_times
            .windows(2)
            .map(|w| format!("{:.1} s", ms(w[1] - w[0]) / 1e3))
            .collect();
        out.push(Diagnosis {
            kind: DiagnosisKind::SynTimeout,
            frames: Frames::default(),
            dir: Some(Dir::AtoB),
            start: first,
            end: c.last_time,
            delay_ms: ms(c.last_time - first),
            summary: format!(
                "the SYN to {} was sent {} times (waits of {}) and never answered: the application waited {:.1} s for a connection that never came",
                c.b,
                c.handshake.syn_count,
                waits.join(", "),
                ms(c.last_time - first) / 1e3
            ),
        });
    }
    // peer_unresponsive: retransmissions with no answer of any kind until the end. When the
    // other side was heard earlier, its silence is the evidence. When the capture never saw
    // it (a capture started after the handshake, or of one direction only), silence proves
    // nothing by itself; the sender's own behaviour does: the same segment sent again and
    // again, each wait about twice the one before, is its retransmission timer backing off
    // (RFC 6298 §5.5), which only happens when no ACK reaches it.
    let mut gone = [None; 2];
    for (side, u) in ev.unanswered.iter().enumerate() {
        if unanswered_syn || u.retx.len() < UNANSWERED_MIN {
            continue;
        }
        let Some(first_send) = u.first_send else {
            continue;
        };
        let first = if u.peer_heard {
            first_send
        } else {
            u.original.unwrap_or(first_send)
        };
        if !u.peer_heard && (u.mixed || !backs_off(first, &u.retx)) {
            continue;
        }
        let peer = name_of(1 - side);
        let mut prev = first;
        let gaps: Vec<String> = u
            .retx
            .iter()
            .map(|&t| {
                let g = ms(t - prev) / 1e3;
                prev = t;
                format!("{g:.1}")
            })
            .collect();
        gone[side] = Some(first);
        let summary = if u.peer_heard {
            format!(
                "the {} retransmitted {} times over {:.1} s (gaps {} s) and the {peer} never answered: the {peer} or the path is gone, and the application waited out the retransmission timer; no recovery was seen",
                name_of(side),
                u.retx.len(),
                ms(c.last_time - first) / 1e3,
                gaps.join(", ")
            )
        } else {
            format!(
                "the {} sent the same segment {} times over {:.1} s with growing waits (gaps {} s), as a retransmission timer backs off when no ACK reaches it, and nothing from the {peer} is in the capture: the {peer} or the path is gone, and the application waited out the retransmission timer; no recovery was seen",
                name_of(side),
                u.retx.len() + 1,
                ms(c.last_time - first) / 1e3,
                gaps.join(", ")
            )
        };
        out.push(Diagnosis {
            kind: DiagnosisKind::PeerUnresponsive,
            frames: Frames::default(),
            dir: Some(dir_of(side)),
            start: first,
            end: c.last_time,
            delay_ms: ms(c.last_time - first),
            summary,
        });
    }
    // zero_window_stall: a side advertised a zero window for a noticeable time.
    for side in 0..2 {
        let z = &ev.zero_window[side];
        if z.longest_ns < ZERO_WINDOW_MIN.as_nanos() as u64 {
            continue;
        }
        let Some(first) = z.first else { continue };
        let end = if z.since.is_some() {
            c.last_time
        } else {
            z.last_end.unwrap_or(c.last_time)
        };
        let who = name_of(side);
        out.push(Diagnosis {
            kind: DiagnosisKind::ZeroWindowStall,
            frames: Frames::default(),
            dir: Some(dir_of(1 - side)),
            start: first,
            end,
            delay_ms: ms_ns(z.total_ns),
            summary: format!(
                "the {who} advertised a zero window for {:.1} s in all (longest {:.1} s, {} window probes from the {}): the {who}'s application stopped reading{}",
                ms_ns(z.total_ns) / 1e3,
                ms_ns(z.longest_ns) / 1e3,
                z.probes,
                name_of(1 - side),
                if z.since.is_some() {
                    "; the window was still closed when the capture ended"
                } else {
                    ""
                }
            ),
        });
    }
    // server_delay: requests complete, the first byte of the answer late.
    let slow: Vec<(usize, u64)> = ev
        .server_first_byte
        .iter()
        .copied()
        .filter(|&(_, s)| s >= NOTICEABLE.as_nanos() as u64)
        .collect();
    if let (Some(&(i0, _)), Some(&(il, _))) = (slow.first(), slow.last()) {
        let total: u64 = slow.iter().map(|s| s.1).sum();
        let (iw, worst) = slow.iter().copied().max_by_key(|s| s.1).unwrap_or((i0, 0));
        let ex = &c.story.exchanges;
        let w = &ex[iw];
        let what = w
            .name
            .as_deref()
            .map_or(String::new(), |n| format!(" ({n})"));
        let acked = match (w.request_acked, w.response_start) {
            (Some(a), Some(r)) if r > a => format!(
                "; its first byte came {:.0} ms after the request was ACKed",
                ms(r - a)
            ),
            _ => String::new(),
        };
        out.push(Diagnosis {
            kind: DiagnosisKind::ServerDelay,
            frames: Frames::default(),
            dir: c.story.client.map(Dir::other),
            start: ex[i0].request_end,
            end: ex[il].response_start.unwrap_or(c.last_time),
            delay_ms: ms_ns(total),
            summary: format!(
                "the server took {:.0} ms beyond the round trip to start answering {} of {} requests; the slowest{what} waited {:.0} ms{acked}",
                ms_ns(total),
                slow.len(),
                ex.len(),
                ms_ns(worst)
            ),
        });
    }
    // client_delay: connected, then nothing asked for a while.
    for &(i, t) in &ev.client_before_request {
        if t < NOTICEABLE.as_nanos() as u64 {
            continue;
        }
        let e = &c.story.exchanges[i];
        let from = c
            .handshake
            .synack_time
            .or(c.handshake.ack_time)
            .unwrap_or(c.first_time);
        out.push(Diagnosis {
            kind: DiagnosisKind::ClientDelay,
            frames: Frames::default(),
            dir: c.story.client,
            start: from,
            end: e.start,
            delay_ms: ms_ns(t),
            summary: format!(
                "the client waited {:.0} ms after the handshake before sending its first request{}",
                ms_ns(t),
                e.name
                    .as_deref()
                    .map_or(String::new(), |n| format!(" ({n})"))
            ),
        });
    }
    // path_delay: the network dominates, and the path is long or was slow.
    let b = &c.story.budget;
    let dur = c.duration().as_nanos() as u64;
    let rtt_path = rtt_to[0].zip(rtt_to[1]).map(|(x, y)| x + y);
    // A direction captured at its receiver has RTT samples that are the receiver's own ACK
    // delay (microseconds, or a delayed-ACK timer), not round trips over the path.
    let over_path: Vec<&DirectionStats> = [&c.a2b, &c.b2a]
        .into_iter()
        .filter(|d| d.capture_point != CapturePoint::Receiver)
        .map(|d| &d.stats)
        .collect();
    let rtt_min_ms = over_path
        .iter()
        .filter_map(|s| s.rtt_min_ms)
        .chain(rtt_path.map(ms))
        .fold(f64::INFINITY, f64::min);
    let rtt_max_ms = over_path
        .iter()
        .map(|s| s.rtt_max_ms)
        .chain([c.handshake.syn_rtt.map(ms), c.handshake.synack_rtt.map(ms)])
        .flatten()
        .fold(0.0, f64::max);
    let long = rtt_path.is_some_and(|r| r >= LONG_RTT);
    let swollen = rtt_min_ms.is_finite()
        && rtt_max_ms >= rtt_min_ms * RTT_FACTOR
        && rtt_max_ms >= rtt_min_ms + ms(LONG_RTT);
    let told = !out.is_empty();
    if !told
        && b.network_ns >= PATH_MIN.as_nanos() as u64
        && 2 * b.network_ns >= dur
        && (long || swollen)
    {
        out.push(Diagnosis {
            kind: DiagnosisKind::PathDelay,
            frames: Frames::default(),
            dir: None,
            start: c.first_time,
            end: c.last_time,
            delay_ms: ms_ns(b.network_ns),
            summary: format!(
                "{:.0} ms of {:.0} ms went to round trips: {}",
                ms_ns(b.network_ns),
                ms_ns(dur),
                if long {
                    format!(
                        "the path's round trip is {:.0} ms from here{}",
                        rtt_path.map_or(0.0, ms),
                        if swollen {
                            format!(", and one took {rtt_max_ms:.0} ms")
                        } else {
                            String::new()
                        }
                    )
                } else {
                    format!(
                        "round trips reached {rtt_max_ms:.0} ms against a minimum of {rtt_min_ms:.1} ms"
                    )
                }
            ),
        });
    }

    // What the stories replace.
    c.diagnoses.retain(|d| {
        let replaced_by_gone = d.dir.is_some_and(|dir| {
            let side = usize::from(dir == Dir::BtoA);
            gone[side].is_some_and(|first: Instant| {
                matches!(
                    d.kind,
                    DiagnosisKind::RtoStall
                        | DiagnosisKind::LossBurst
                        | DiagnosisKind::SynRetransmit
                ) && d.end >= first
            })
        });
        let replaced_by_timeout = unanswered_syn && d.kind == DiagnosisKind::SynRetransmit;
        // The same idle time told less precisely: a sender idle because one application
        // was thinking (app_limited on either side: the other one waits for it), or because
        // the window was shut (a small segment held
        // until the window reopened looks like Nagle waiting on an ACK).
        let replaced_by_story = matches!(
            d.kind,
            DiagnosisKind::AppLimited
                | DiagnosisKind::NagleDelayedAck
                | DiagnosisKind::RwndLimited
                | DiagnosisKind::DelayedAckPacing
        ) && out.iter().any(|s| {
            matches!(
                s.kind,
                DiagnosisKind::ServerDelay
                    | DiagnosisKind::ClientDelay
                    | DiagnosisKind::ZeroWindowStall
            ) && (s.dir == d.dir || s.kind != DiagnosisKind::ZeroWindowStall)
                && d.start <= s.end
                && s.start <= d.end
                && d.delay_ms <= 1.1 * s.delay_ms
        });
        !(replaced_by_gone || replaced_by_timeout || replaced_by_story)
    });
    c.diagnoses.extend(out);
    c.diagnoses
        .sort_by(|a, b| a.start.cmp(&b.start).then(a.kind.cmp(&b.kind)));
}

#[cfg(test)]
mod tests {
    //! Conversations scripted at the two endpoints over a path whose one-way delays are
    //! `to_client` and `to_server` from the capture point, recorded at that point: the same
    //! script gives the client-side (`to_client` 0), server-side and middle captures.

    use std::net::SocketAddr;

    use crate::model::*;
    use crate::synth::{self, Tcp, ACK, FIN, PSH, RST, SYN};
    use crate::{analyze_bytes, Options};

    const MS: f64 = 1e6;
    const T0: u64 = 1_700_000_000_000_000_000;

    struct Talk {
        c: SocketAddr,
        s: SocketAddr,
        cseq: u32,
        sseq: u32,
        /// One-way delays from the capture point, ms.
        to_client: f64,
        to_server: f64,
        out: Vec<(u64, Vec<u8>)>,
    }

    impl Talk {
        fn new(to_client: f64, to_server: f64, v6: bool) -> Talk {
            let (c, s) = if v6 {
                ("[fd00::1]:40000", "[fd00::2]:80")
            } else {
                ("10.0.0.1:40000", "10.0.0.2:80")
            };
            Talk {
                c: c.parse().unwrap(),
                s: s.parse().unwrap(),
                cseq: 1000,
                sseq: 9000,
                to_client,
                to_server,
                out: Vec::new(),
            }
        }
        /// One-way client -> server delay, ms.
        fn owd(&self) -> f64 {
            self.to_client + self.to_server
        }
        /// A packet sent by the client at its own time `t_ms`; returns its arrival at the server.
        fn client(&mut self, t_ms: f64, flags: u8, payload: &[u8], window: u16) -> f64 {
            let mut p = Tcp::new(self.c, self.s, self.cseq, self.sseq, flags);
            p.window = window;
            p.payload_len = payload.len();
            let mut b = p.build();
            let n = b.len();
            b[n - payload.len()..].copy_from_slice(payload);
            self.out
                .push((T0 + ((t_ms + self.to_client) * MS) as u64, b));
            self.cseq = self
                .cseq
                .wrapping_add(payload.len() as u32 + u32::from(flags & (SYN | FIN) != 0));
            t_ms + self.owd()
        }
        fn server(&mut self, t_ms: f64, flags: u8, len: usize, window: u16) -> f64 {
            let mut p = Tcp::new(self.s, self.c, self.sseq, self.cseq, flags);
            p.window = window;
            p.payload_len = len;
            self.out
                .push((T0 + ((t_ms + self.to_server) * MS) as u64, p.build()));
            self.sseq = self
                .sseq
                .wrapping_add(len as u32 + u32::from(flags & (SYN | FIN) != 0));
            t_ms + self.owd()
        }
        /// Retransmits the client's last `len` bytes at `t_ms`.
        fn client_again(&mut self, t_ms: f64, len: usize) {
            let mut p = Tcp::new(
                self.c,
                self.s,
                self.cseq.wrapping_sub(len as u32),
                self.sseq,
                ACK | PSH,
            );
            p.payload_len = len;
            self.out
                .push((T0 + ((t_ms + self.to_client) * MS) as u64, p.build()));
        }
        /// Handshake from client time `t`; returns the client's time when it is connected.
        fn open(&mut self, t: f64) -> f64 {
            let at_s = self.client(t, SYN, &[], 65535);
            let at_c = self.server(at_s, SYN | ACK, 0, 65535);
            self.client(at_c, ACK, &[], 65535);
            at_c
        }
        /// The client closes at `t`, the server answers at once.
        fn close(&mut self, t: f64) {
            let at_s = self.client(t, FIN | ACK, &[], 65535);
            let at_c = self.server(at_s, FIN | ACK, 0, 65535);
            self.client(at_c, ACK, &[], 65535);
        }
        fn run(&self) -> Connection {
            let a = analyze_bytes("t", &synth::pcap(self.out.clone()), Options::default()).unwrap();
            assert_eq!(a.connections.len(), 1);
            a.connections.into_iter().next().unwrap()
        }
    }

    const GET: &[u8] = b"GET /index.html HTTP/1.1\r\nHost: x\r\n\r\n";

    /// One request and a two-segment answer; `think_ms` at the client after the handshake,
    /// `server_ms` at the server before the answer (ACKing the request after 40 ms if it is
    /// still thinking, as Linux's delayed ACK does).
    fn request(
        to_client: f64,
        to_server: f64,
        think_ms: f64,
        server_ms: f64,
        v6: bool,
    ) -> Connection {
        let mut t = Talk::new(to_client, to_server, v6);
        let up = t.open(0.0);
        let at_s = t.client(up + think_ms, ACK | PSH, GET, 65535);
        if server_ms > 40.0 {
            t.server(at_s + 40.0, ACK, 0, 65535);
        }
        t.server(at_s + server_ms, ACK, 1448, 65535);
        let at_c = t.server(at_s + server_ms + 0.1, ACK | PSH, 600, 65535);
        t.client(at_c, ACK, &[], 65535);
        t.close(at_c + 1.0);
        t.run()
    }

    fn kinds(c: &Connection) -> Vec<DiagnosisKind> {
        c.diagnoses.iter().map(|d| d.kind).collect()
    }

    fn cost(c: &Connection, k: DiagnosisKind) -> f64 {
        c.diagnoses
            .iter()
            .find(|d| d.kind == k)
            .unwrap_or_else(|| panic!("no {k} in {:?}", c.diagnoses))
            .delay_ms
    }

    fn assert_adds_up(c: &Connection) {
        assert_eq!(
            c.story.budget.total_ns(),
            c.duration().as_nanos() as u64,
            "{:?}",
            c.story.budget
        );
        for e in &c.story.exchanges {
            let end = e.response_end.unwrap_or(e.request_end);
            assert!(e.budget.total_ns() >= (end - e.start).as_nanos() as u64);
        }
    }

    fn within(x: f64, truth: f64) -> bool {
        (x - truth).abs() <= 0.1 * truth
    }

    fn largest(b: &TimeBudget) -> &'static str {
        b.parts().into_iter().max_by_key(|p| p.1).unwrap().0
    }

    /// (to_client, to_server) for a capture at the client, in the middle, at the server, on a
    /// path of `rtt` ms.
    fn points(rtt: f64) -> [(f64, f64); 3] {
        [(0.0, rtt / 2.0), (rtt / 4.0, rtt / 4.0), (rtt / 2.0, 0.0)]
    }

    #[test]
    fn a_slow_server_is_named_with_its_first_byte_time_at_every_capture_point() {
        for (tc, ts) in points(30.0) {
            for v6 in [false, true] {
                let c = request(tc, ts, 0.0, 980.0, v6);
                assert_adds_up(&c);
                assert_eq!(
                    kinds(&c),
                    [DiagnosisKind::ServerDelay],
                    "{tc}/{ts}: {:?}",
                    c.diagnoses
                );
                assert!(
                    within(cost(&c, DiagnosisKind::ServerDelay), 980.0),
                    "{:?}",
                    c.diagnoses
                );
                assert_eq!(largest(&c.story.budget), "server");
                assert!(
                    within(c.story.budget.server_ns as f64 / MS, 980.0),
                    "{:?}",
                    c.story.budget
                );
                assert_eq!(c.story.exchanges.len(), 1);
                let e = &c.story.exchanges[0];
                assert_eq!(e.name.as_deref(), Some("GET /index.html"));
                assert_eq!(
                    (e.request_bytes, e.response_bytes),
                    (GET.len() as u64, 2048)
                );
            }
        }
    }

    #[test]
    fn a_client_that_waits_after_the_handshake_is_named() {
        for (tc, ts) in points(30.0) {
            let c = request(tc, ts, 1350.0, 0.2, false);
            assert_adds_up(&c);
            assert_eq!(
                kinds(&c),
                [DiagnosisKind::ClientDelay],
                "{tc}/{ts}: {:?}",
                c.diagnoses
            );
            assert!(
                within(cost(&c, DiagnosisKind::ClientDelay), 1350.0),
                "{:?}",
                c.diagnoses
            );
            assert_eq!(largest(&c.story.budget), "client");
        }
    }

    #[test]
    fn a_healthy_request_on_a_30_ms_path_gets_no_delay_diagnosis() {
        for (tc, ts) in points(30.0) {
            let c = request(tc, ts, 0.5, 0.3, true);
            assert_adds_up(&c);
            assert!(c.diagnoses.is_empty(), "{tc}/{ts}: {:?}", c.diagnoses);
            assert_eq!(largest(&c.story.budget), "network", "{:?}", c.story.budget);
        }
    }

    #[test]
    fn a_long_path_is_path_delay_costing_its_round_trips() {
        for (tc, ts) in points(600.0) {
            let c = request(tc, ts, 0.5, 0.3, false);
            assert_adds_up(&c);
            assert_eq!(
                kinds(&c),
                [DiagnosisKind::PathDelay],
                "{tc}/{ts}: {:?}",
                c.diagnoses
            );
            // Handshake, request, close: about three round trips seen from anywhere.
            let net = c.story.budget.network_ns as f64 / MS;
            assert!(within(cost(&c, DiagnosisKind::PathDelay), net));
            assert!(
                net >= 0.9 * (c.duration().as_nanos() as f64 / MS) - 5.0,
                "{:?}",
                c.story.budget
            );
            assert_eq!(largest(&c.story.budget), "network");
        }
    }

    #[test]
    fn retransmissions_that_nobody_answers_are_a_peer_that_is_gone_not_a_recovery() {
        // The request leaves, and is sent six times in all over 9.4 s with doubling gaps; the
        // server never answers; the application then gives up with a RST.
        for (tc, ts) in [(0.0, 15.0), (7.5, 7.5)] {
            let mut t = Talk::new(tc, ts, false);
            let up = t.open(0.0);
            let start = up + 1.0;
            t.client(start, ACK | PSH, GET, 65535);
            let mut at = start;
            for gap in [200.0, 400.0, 800.0, 1600.0, 3200.0] {
                at += gap;
                t.client_again(at, GET.len());
            }
            at += 3200.0;
            t.client(at, RST | ACK, &[], 0);
            let c = t.run();
            assert_adds_up(&c);
            assert_eq!(
                kinds(&c),
                [DiagnosisKind::PeerUnresponsive],
                "{:?}",
                c.diagnoses
            );
            assert!(within(
                cost(&c, DiagnosisKind::PeerUnresponsive),
                at - start
            ));
            // The same packets without the server's (a capture of one direction only): the
            // silence alone would prove nothing, but the client's timer backing off does.
            let server_ip = t.s.ip();
            t.out
                .retain(|(_, p)| wire::packet::parse(p).map_or(true, |h| h.ip.src != server_ip));
            let c = t.run();
            assert_eq!(
                kinds(&c),
                [DiagnosisKind::PeerUnresponsive],
                "{:?}",
                c.diagnoses
            );
            assert!(within(
                cost(&c, DiagnosisKind::PeerUnresponsive),
                at - start
            ));
            assert_eq!(largest(&c.story.budget), "stalled");
        }
    }

    /// The client's request, sent again after each gap of `gaps` (ms), then a RST `last` ms
    /// after the last; the capture starts `start` ms into the connection, after the handshake,
    /// and holds nothing from the server. Returns the connection and the truth: the time from
    /// the request's first transmission to the RST.
    fn request_unanswered_mid_connection(
        tc: f64,
        ts: f64,
        v6: bool,
        gaps: &[f64],
        last: f64,
    ) -> (Connection, f64) {
        let mut t = Talk::new(tc, ts, v6);
        let start = 500.0;
        t.client(start, ACK | PSH, GET, 65535);
        let mut at = start;
        for gap in gaps {
            at += gap;
            t.client_again(at, GET.len());
        }
        at += last;
        t.client(at, RST | ACK, &[], 0);
        (t.run(), at - start)
    }

    #[test]
    fn a_dead_peer_seen_only_mid_connection_is_peer_unresponsive_from_the_senders_backoff() {
        // The textbook capture: no handshake, one segment sent six times with doubling
        // gaps, not one packet from the other side. At the sender and in the middle, over
        // IPv4 and IPv6.
        for (tc, ts) in [(0.0, 15.0), (7.5, 7.5)] {
            for v6 in [false, true] {
                let gaps = [300.0, 600.0, 1200.0, 2400.0, 4800.0];
                let (c, truth) = request_unanswered_mid_connection(tc, ts, v6, &gaps, 100.0);
                assert_adds_up(&c);
                assert_eq!(
                    kinds(&c),
                    [DiagnosisKind::PeerUnresponsive],
                    "{tc}/{ts} v6 {v6}: {:?}",
                    c.diagnoses
                );
                let d = &c.diagnoses[0];
                assert_eq!(d.dir, Some(Dir::AtoB));
                assert!(within(d.delay_ms, truth), "{} against {truth}", d.delay_ms);
                assert!(
                    d.summary.contains("same segment 6 times")
                        && d.summary.contains("gaps 0.3, 0.6, 1.2, 2.4, 4.8 s")
                        && !d.summary.contains("recovery took"),
                    "{}",
                    d.summary
                );
            }
        }
    }

    #[test]
    fn unanswered_repeats_without_backoff_in_a_one_sided_capture_are_not_a_dead_peer() {
        // Even gaps are not a retransmission timer backing off (an application resending, or
        // retransmissions whose ACKs the capture misses).
        let (c, _) = request_unanswered_mid_connection(0.0, 15.0, false, &[500.0; 4], 100.0);
        assert!(
            c.diagnoses
                .iter()
                .all(|d| d.kind != DiagnosisKind::PeerUnresponsive),
            "{:?}",
            c.diagnoses
        );
        // Backing off, then new data: the sender's data was acknowledged where the capture
        // could not see it.
        let mut t = Talk::new(0.0, 15.0, false);
        t.client(0.0, ACK | PSH, GET, 65535);
        let mut at = 0.0;
        for gap in [200.0, 400.0, 800.0] {
            at += gap;
            t.client_again(at, GET.len());
        }
        t.client(at + 40.0, ACK | PSH, GET, 65535);
        t.client(at + 80.0, FIN | ACK, &[], 65535);
        let c = t.run();
        assert!(
            c.diagnoses
                .iter()
                .all(|d| d.kind != DiagnosisKind::PeerUnresponsive),
            "{:?}",
            c.diagnoses
        );
    }

    #[test]
    fn a_client_gone_while_the_server_answers_is_peer_unresponsive_at_the_server() {
        // At the server, mid-connection: two segments of the answer are ACKed, then the
        // client is gone; the server sends its third segment again with doubling gaps and
        // gives up with a RST. Then the same capture without the client's two ACKs.
        for keep_acks in [true, false] {
            let mut t = Talk::new(15.0, 0.0, false);
            let first = 100.0;
            let back = t.server(first, ACK, 1448, 65535);
            t.server(first + 0.1, ACK, 1448, 65535);
            if keep_acks {
                t.client(back, ACK, &[], 65535);
            }
            let third = first + 40.0;
            t.server(third, ACK | PSH, 1000, 65535);
            let mut at = third;
            for gap in [250.0, 500.0, 1000.0, 2000.0] {
                at += gap;
                let mut p = Tcp::new(t.s, t.c, t.sseq.wrapping_sub(1000), t.cseq, ACK | PSH);
                p.payload_len = 1000;
                t.out.push((T0 + (at * MS) as u64, p.build()));
            }
            at += 3000.0;
            t.server(at, RST | ACK, 0, 0);
            let c = t.run();
            assert_adds_up(&c);
            let d: Vec<&Diagnosis> = c.diagnoses.iter().collect();
            assert_eq!(
                kinds(&c),
                [DiagnosisKind::PeerUnresponsive],
                "acks {keep_acks}: {d:?}"
            );
            let server_sends = if c.a == t.s { Dir::AtoB } else { Dir::BtoA };
            assert_eq!(d[0].dir, Some(server_sends));
            // From the segment's first transmission, or (the client heard) from the first
            // send after the client's last packet.
            assert!(within(d[0].delay_ms, at - third), "{d:?}");
        }
    }

    #[test]
    fn a_receiver_that_stops_reading_is_a_zero_window_stall() {
        for (tc, ts) in points(30.0) {
            let mut t = Talk::new(tc, ts, false);
            let up = t.open(0.0);
            let at_s = t.client(up, ACK | PSH, GET, 65535);
            let mut at_c = 0.0;
            for i in 0..4 {
                at_c = t.server(at_s + 0.1 * i as f64, ACK, 1448, 65535);
            }
            // The client's buffer is full: zero window for 23.7 s, probes answered.
            t.client(at_c, ACK, &[], 0);
            let mut probe = at_c + t.owd();
            for _ in 0..4 {
                probe += 4000.0;
                let back = t.server(probe, ACK, 0, 65535);
                t.client(back, ACK, &[], 0);
            }
            let open_at = at_c + 23_700.0;
            let at_s2 = t.client(open_at, ACK, &[], 65535);
            let end = t.server(at_s2, ACK | PSH, 1000, 65535);
            t.client(end, ACK, &[], 65535);
            t.close(end + 1.0);
            let c = t.run();
            assert_adds_up(&c);
            assert_eq!(
                kinds(&c),
                [DiagnosisKind::ZeroWindowStall],
                "{tc}/{ts}: {:?}",
                c.diagnoses
            );
            assert!(
                within(cost(&c, DiagnosisKind::ZeroWindowStall), 23_700.0),
                "{:?}",
                c.diagnoses
            );
            assert_eq!(
                c.diagnoses[0].kind.component(),
                Component::ReceiverApplication
            );
            assert!(c.diagnoses[0]
                .summary
                .contains("the client's application stopped reading"));
            assert_eq!(largest(&c.story.budget), "stalled");
        }
    }

    /// At the client: a handshake of `rtt` ms, the request's ACK 1160 ms later (the path got
    /// slower), the answer 5 ms after the ACK, and the client ACKs it at once (0.1 ms).
    fn late_ack_at_the_client(rtt: f64) -> Connection {
        let mut t = Talk::new(0.0, 0.0, false);
        t.client(0.0, SYN, &[], 65535);
        t.server(rtt, SYN | ACK, 0, 65535);
        t.client(rtt, ACK, &[], 65535);
        let req = rtt + 1.0;
        t.client(req, ACK | PSH, GET, 65535);
        t.server(req + 1160.0, ACK, 0, 65535);
        t.server(req + 1165.0, ACK, 1448, 65535);
        t.server(req + 1165.1, ACK | PSH | FIN, 500, 65535);
        t.client(req + 1165.2, ACK | FIN, &[], 65535);
        t.server(req + 1165.2 + rtt, ACK, 0, 65535);
        t.run()
    }

    #[test]
    fn a_path_slower_than_its_handshake_is_network_not_server() {
        let c = late_ack_at_the_client(880.0);
        assert_adds_up(&c);
        assert_eq!(kinds(&c), [DiagnosisKind::PathDelay], "{:?}", c.diagnoses);
        assert_eq!(largest(&c.story.budget), "network");
        assert!(
            c.story.budget.server_ns < 10_000_000,
            "{:?}",
            c.story.budget
        );
    }

    #[test]
    fn at_the_client_the_minimum_round_trip_is_the_paths_not_the_clients_own_ack_delay() {
        let c = late_ack_at_the_client(40.0);
        assert_eq!(c.b2a.capture_point, CapturePoint::Receiver);
        let d: Vec<&Diagnosis> = c
            .diagnoses
            .iter()
            .filter(|d| d.kind == DiagnosisKind::PathDelay)
            .collect();
        assert_eq!(d.len(), 1, "{:?}", c.diagnoses);
        assert!(
            d[0].summary
                .ends_with("round trips reached 1160 ms against a minimum of 40.0 ms"),
            "{}",
            d[0].summary
        );
    }

    #[test]
    fn an_idle_keep_alive_connection_closed_by_the_server_is_the_clients_time_not_a_delay() {
        // A quick exchange, then nothing for 5 s until the server's keep-alive timer closes.
        for (tc, ts) in points(30.0) {
            let mut t = Talk::new(tc, ts, false);
            let up = t.open(0.0);
            let at_s = t.client(up, ACK | PSH, GET, 65535);
            let at_c = t.server(at_s + 0.2, ACK | PSH, 900, 65535);
            t.client(at_c, ACK, &[], 65535);
            let at_c = t.server(at_s + 5000.0, ACK | FIN, 0, 65535);
            let at_s = t.client(at_c, ACK | FIN, &[], 65535);
            t.server(at_s, ACK, 0, 65535);
            let c = t.run();
            assert_adds_up(&c);
            assert!(c.diagnoses.is_empty(), "{tc}/{ts}: {:?}", c.diagnoses);
            assert_eq!(largest(&c.story.budget), "client", "{:?}", c.story.budget);
        }
    }

    #[test]
    fn a_syn_ack_repeated_to_a_client_that_went_away_is_peer_unresponsive_alone() {
        // At the server: the SYN arrives, the SYN-ACK goes out three times, nothing comes back.
        let mut t = Talk::new(15.0, 0.0, false);
        t.client(-15.0, SYN, &[], 65535);
        for at in [0.0, 1000.0, 3000.0] {
            t.sseq = 9000;
            t.server(at, SYN | ACK, 0, 65535);
        }
        let c = t.run();
        assert_adds_up(&c);
        assert_eq!(
            kinds(&c),
            [DiagnosisKind::PeerUnresponsive],
            "{:?}",
            c.diagnoses
        );
        assert_eq!(c.diagnoses[0].dir, Some(Dir::BtoA));
        assert!(within(cost(&c, DiagnosisKind::PeerUnresponsive), 3000.0));
        assert_eq!(largest(&c.story.budget), "stalled");
    }

    #[test]
    fn a_syn_answered_by_a_reset_is_a_refused_connection() {
        let mut t = Talk::new(0.0, 0.65, true);
        let at = t.client(0.0, SYN, &[], 65535);
        t.server(at, RST | ACK, 0, 0);
        let c = t.run();
        assert_adds_up(&c);
        assert_eq!(kinds(&c), [DiagnosisKind::ConnectionRefused]);
        assert!(within(cost(&c, DiagnosisKind::ConnectionRefused), 1.3));
    }

    #[test]
    fn a_syn_never_answered_is_a_syn_timeout_not_a_retransmitted_syn() {
        let mut t = Talk::new(0.0, 10.0, false);
        for at in [0.0, 1000.0, 3000.0] {
            t.cseq = 1000;
            t.client(at, SYN, &[], 65535);
        }
        let c = t.run();
        assert_adds_up(&c);
        assert_eq!(kinds(&c), [DiagnosisKind::SynTimeout], "{:?}", c.diagnoses);
        assert!(within(cost(&c, DiagnosisKind::SynTimeout), 3000.0));
        assert!(
            c.diagnoses[0].summary.contains("waits of 1.0 s, 2.0 s"),
            "{}",
            c.diagnoses[0].summary
        );
        assert_eq!(c.story.budget.stalled_ns, c.duration().as_nanos() as u64);
    }
}
