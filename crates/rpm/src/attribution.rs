//! Where a responsiveness test's round trips went, from a lab run's link logs: for each link
//! direction the probes crossed, the time they sat in its queue; the base RTT (the links'
//! propagation delays); and what is left, the hosts (their stacks, socket buffers, TLS and
//! HTTP/2 processing, and transmission times).
//!
//! Pure: the client's report, the lab's start on CLOCK_MONOTONIC and the parsed link logs in,
//! figures out. Each probe's own packets are found by its connection's addresses (a foreign
//! probe's connection is its own; a self probe's is the load-generating connection it went
//! on, whose packets its answer queued among), and the mean sojourn of those dequeued while
//! the probe was in flight is its time per crossing of that queue.
//!
//! Where the order of the link directions a probe's packets cross is known, a probe is taken
//! apart packet by packet instead: on a path of one link each way, or on any path of a lab
//! whose tree of links is given ([`attribute_in`]; which link directions, from the probe's
//! addresses). A packet's crossing of one hop is followed by its crossing of the next: the
//! same packet (its number is kept from link to link), dequeued from the one before it
//! entered the next. A chain that cannot be followed so leaves its probe to the mean sojourn.
//!
//! A self probe whose answer says when the server received it (the server's
//! `x-received-monotonic-ns`, the same clock as the lab's) is taken apart so: its request's
//! way is the last packet of its connection that reached the server before the server saw
//! the request, its answer's way the last packet that reached the client before the client
//! saw the answer. Each packet's enqueue, sojourn and the link's delay at each hop then cut
//! the round trip into consecutive measured parts: in the client's send buffer (request
//! written to its packet entering the path), the up queues, transmissions and delays, in the
//! server (the request's packet arriving to the answer's packet entering the path:
//! receiving, HTTP/2, TLS and the send buffers behind the bulk data), the down queues,
//! transmissions and delays, and the client receiving. A loaded connection's buffers are
//! where a self probe's time goes that no queue of the path holds.
//!
//! A foreign probe's connection carries nothing but its own exchanges (the TCP handshake,
//! TLS's, the GET), so it is taken apart packet by packet too, on the same paths: walking back
//! from its end, the last packet that reached the client before it saw the answer, the last
//! that reached the server before that one entered the path, and so on to the connection's
//! first packet. Between the crossings (queue, transmission, delay) lie the hosts' waits: the
//! server's TCP, TLS and HTTP work, and the client's TLS work and sending. On a 20 ms path
//! with short queues they are a tenth of the round trip (a millisecond or so each for a TLS
//! handshake's keys and signature and for an HTTP/2 answer, on a busy machine), which the
//! queues and the base RTT alone left unexplained. A wait during which a packet the host had
//! sent was dropped, at any hop of its way, is loss recovery instead.
//!
//! Any other probe that lost a packet in the path (a drop of its flow's, while it was in
//! flight) waited for TCP to recover it: what its queues and base RTT do not explain is
//! counted as loss recovery; for the other probes it is the hosts'.
//!
//! The parts combine as the RPM does (draft-ietf-ippm-responsiveness-09 section 5.3.1): the
//! RPM is the mean of the foreign and loaded responsiveness, so its round trip
//! `60000 / RPM` is the harmonic mean of theirs, `L = 2 rF rS / (rF + rS)`, which is the
//! weighted sum `wF rF + wS rS` with `wF = rS / (rF + rS)`, `wS = rF / (rF + rS)`. Each part
//! of `L` is the same weighted sum of the part's mean, in ms, over each kind's fastest 95 %
//! of probes (those its trimmed mean keeps).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};

use link::EventKind;
use serde::Serialize;

use labnet::run_dir::LogLine;
use labnet::spec::{Side, Topology};

use crate::report::{ProbeRecord, RpmReport};

/// One link direction of the run.
pub struct LinkLog<'a> {
    pub link: &'a str,
    /// `up` or `down`.
    pub side: &'a str,
    /// The queue's spec, as in summary.json (`fifo limit 1000`).
    pub queue: &'a str,
    /// Its propagation delay, milliseconds.
    pub delay_ms: f64,
    /// Its rate, bit/s (`None`: unlimited): a packet's transmission after its dequeue takes
    /// its bytes at this rate.
    pub rate_bps: Option<u64>,
    pub lines: &'a [LogLine],
}

/// One queue's part of the loaded round trip.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct QueuePart {
    pub link: String,
    pub side: String,
    pub queue: String,
    pub ms: f64,
    pub share: f64,
}

/// One kind of probe's round trip (its trimmed mean), taken apart the same way.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KindAttribution {
    pub round_trip_ms: f64,
    /// Per link direction, in the order of the links given.
    pub queues_ms: Vec<f64>,
    pub base_rtt_ms: f64,
    /// The transmission of the probe's own packets at the links' rates (after the queue,
    /// before the propagation delay).
    pub transmission_ms: f64,
    /// Waiting for TCP to recover packets the path dropped.
    pub loss_recovery_ms: f64,
    /// In the client before its packets entered the path, measured packet by packet: a self
    /// probe's request in the client's send buffer (HTTP/2, TLS and the socket) behind an
    /// upload; a foreign probe's TLS work and sending before each of its flights (0 for
    /// probes not taken apart).
    pub client_send_ms: f64,
    /// In the server: from a request's (or a handshake flight's) arrival to the answer's
    /// packet entering the path (its receiving and TLS work, and its send buffers behind a
    /// download's data), measured likewise.
    pub server_ms: f64,
    /// What no measured part explains (the client receiving the answer, and for probes that
    /// are not taken apart packet by packet, all the hosts' time).
    pub hosts_ms: f64,
    pub probes: usize,
    /// Of them, the probes taken apart packet by packet.
    pub probes_by_packet: usize,
}

impl KindAttribution {
    /// The share of the round trip the path explains: its queues, its drops' recovery and
    /// the base RTT.
    pub fn network_share(&self) -> f64 {
        (self.queues_ms.iter().sum::<f64>()
            + self.base_rtt_ms
            + self.transmission_ms
            + self.loss_recovery_ms)
            / self.round_trip_ms
    }

    /// The share of the round trip its named parts explain: the path's, the client's send
    /// buffer and the server.
    pub fn named_share(&self) -> f64 {
        self.network_share() + (self.client_send_ms + self.server_ms) / self.round_trip_ms
    }
}

/// The loaded round trip `60000 / RPM`, taken apart.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Attribution {
    pub rpm: f64,
    pub confidence: String,
    pub loaded_rtt_ms: f64,
    pub queues: Vec<QueuePart>,
    pub base_rtt_ms: f64,
    /// The transmission of the probes' own packets at the links' rates.
    pub transmission_ms: f64,
    /// Probes that lost a packet in the path waited this long for its recovery.
    pub loss_recovery_ms: f64,
    /// In the client before the probes' packets entered the path (a self probe's send
    /// buffer, a foreign probe's TLS work).
    pub client_send_ms: f64,
    /// In the server, from a request's arrival to its answer entering the path.
    pub server_ms: f64,
    /// What no measured part explains (negative when they over-explain).
    pub hosts_ms: f64,
    /// The foreign and the self probes' round trips apart.
    pub foreign: KindAttribution,
    #[serde(rename = "self")]
    pub self_probes: KindAttribution,
}

impl Attribution {
    pub fn base_share(&self) -> f64 {
        self.base_rtt_ms / self.loaded_rtt_ms
    }
    pub fn transmission_share(&self) -> f64 {
        self.transmission_ms / self.loaded_rtt_ms
    }
    pub fn hosts_share(&self) -> f64 {
        self.hosts_ms / self.loaded_rtt_ms
    }
    pub fn loss_share(&self) -> f64 {
        self.loss_recovery_ms / self.loaded_rtt_ms
    }
    pub fn client_send_share(&self) -> f64 {
        self.client_send_ms / self.loaded_rtt_ms
    }
    pub fn server_share(&self) -> f64 {
        self.server_ms / self.loaded_rtt_ms
    }
    /// The share of the loaded round trip its named parts explain: queues, base RTT, loss
    /// recovery, the client and the server; 1 when they add up exactly.
    pub fn named_share(&self) -> f64 {
        1.0 - self.hosts_share()
    }

    /// "RPM 121 (Medium confidence); loaded RTT 496 ms: 91 % in `path` down FIFO queue, 4 %
    /// base RTT, 2 % in the client, 2 % in the server, 1 % hosts"
    pub fn line(&self) -> String {
        let mut parts: Vec<String> = self
            .queues
            .iter()
            .filter(|q| q.share >= 0.005)
            .map(|q| {
                format!(
                    "{:.0} % in `{}` {} {} queue",
                    q.share * 100.0,
                    q.link,
                    q.side,
                    queue_name(&q.queue)
                )
            })
            .collect();
        parts.push(format!("{:.0} % base RTT", self.base_share() * 100.0));
        if self.transmission_ms > 0.0 {
            parts.push(format!(
                "{:.0} % transmission",
                self.transmission_share() * 100.0
            ));
        }
        if self.loss_recovery_ms > 0.0 {
            parts.push(format!("{:.0} % loss recovery", self.loss_share() * 100.0));
        }
        if self.client_send_ms != 0.0 {
            parts.push(format!(
                "{:.0} % in the client",
                self.client_send_share() * 100.0
            ));
        }
        if self.server_ms != 0.0 {
            parts.push(format!(
                "{:.0} % in the server",
                self.server_share() * 100.0
            ));
        }
        parts.push(format!("{:.0} % hosts", self.hosts_share() * 100.0));
        format!(
            "RPM {:.0} ({} confidence); loaded RTT {:.0} ms: {}",
            self.rpm,
            self.confidence,
            self.loaded_rtt_ms,
            parts.join(", ")
        )
    }

    /// "foreign probes' round trip 25 ms: 92 % the path's, 3 % the client, 4 % the server;
    /// self probes' 216 ms: 15 % the path's, 41 % the client, 43 % the server" (the path's
    /// share counts its queues, base RTT, transmission and loss recovery)
    pub fn kinds_line(&self) -> String {
        let kind = |k: &KindAttribution| {
            format!(
                "{:.0} ms: {:.0} % the path's, {:.0} % the client, {:.0} % the server",
                k.round_trip_ms,
                k.network_share() * 100.0,
                k.client_send_ms / k.round_trip_ms * 100.0,
                k.server_ms / k.round_trip_ms * 100.0
            )
        };
        format!(
            "foreign probes' round trip {}; self probes' {}",
            kind(&self.foreign),
            kind(&self.self_probes)
        )
    }
}

/// One part of a round trip, in the order [`Attribution::parts`] gives them: the path's
/// queues (in the order of the links given), then the base RTT, transmission, the client, the
/// server, loss recovery and what nothing names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part<'a> {
    /// Time in one link direction's queue.
    Queue {
        link: &'a str,
        /// `up` or `down`.
        side: &'a str,
        /// The queue's spec (`fifo limit 1000`).
        queue: &'a str,
    },
    BaseRtt,
    Transmission,
    Client,
    Server,
    LossRecovery,
    /// What no measured part explains: the hosts' time that is not measured.
    Unexplained,
}

impl Part<'_> {
    /// "dsl up FIFO queue", "base RTT", "client", …: a chart legend's words.
    pub fn name(&self) -> String {
        match self {
            Part::Queue { link, side, queue } => {
                format!("{link} {side} {} queue", queue_name(queue))
            }
            Part::BaseRtt => "base RTT".into(),
            Part::Transmission => "transmission".into(),
            Part::Client => "client".into(),
            Part::Server => "server".into(),
            Part::LossRecovery => "loss recovery".into(),
            Part::Unexplained => "unexplained".into(),
        }
    }
}

/// A round trip's parts in [`Part`]'s order, every one, ms, none negative: the unexplained
/// part is 0 when the named ones over-explain (it is then not a time to draw), so that the
/// parts add up to the round trip, or a little more.
fn parts_in_order<'a>(
    queues: &'a [QueuePart],
    queues_ms: impl Iterator<Item = f64>,
    [base, transmission, client, server, loss, unexplained]: [f64; 6],
) -> Vec<(Part<'a>, f64)> {
    let mut v: Vec<(Part, f64)> = queues
        .iter()
        .zip(queues_ms)
        .map(|(q, ms)| {
            let part = Part::Queue {
                link: &q.link,
                side: &q.side,
                queue: &q.queue,
            };
            (part, ms)
        })
        .collect();
    v.extend([
        (Part::BaseRtt, base),
        (Part::Transmission, transmission),
        (Part::Client, client),
        (Part::Server, server),
        (Part::LossRecovery, loss),
        (Part::Unexplained, unexplained.max(0.0)),
    ]);
    v
}

impl Attribution {
    /// The loaded round trip's parts, ms, in [`Part`]'s order: what a chart of it stacks.
    pub fn parts(&self) -> Vec<(Part<'_>, f64)> {
        parts_in_order(
            &self.queues,
            self.queues.iter().map(|q| q.ms),
            [
                self.base_rtt_ms,
                self.transmission_ms,
                self.client_send_ms,
                self.server_ms,
                self.loss_recovery_ms,
                self.hosts_ms,
            ],
        )
    }

    /// One kind of probe's round trip (`self.foreign` or `self.self_probes`) cut the same way,
    /// its queues named after this attribution's (the same links, in the same order).
    pub fn parts_of<'a>(&'a self, kind: &KindAttribution) -> Vec<(Part<'a>, f64)> {
        parts_in_order(
            &self.queues,
            kind.queues_ms.iter().copied(),
            [
                kind.base_rtt_ms,
                kind.transmission_ms,
                kind.client_send_ms,
                kind.server_ms,
                kind.loss_recovery_ms,
                kind.hosts_ms,
            ],
        )
    }
}

/// A queue spec's discipline as people write it: `fifo limit 1000` is FIFO.
pub fn queue_name(spec: &str) -> String {
    let kind = spec.split_whitespace().next().unwrap_or("");
    match kind {
        "fifo" | "pfifo" => "FIFO".into(),
        "bfifo" => "FIFO (bytes)".into(),
        "codel" => "CoDel".into(),
        "fq_codel" => "FQ-CoDel".into(),
        "pie" => "PIE".into(),
        "dualpi2" => "DualPI2".into(),
        other => other.to_string(),
    }
}

/// A packet's dequeue or drop at one link direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Seen {
    time_ns: u64,
    /// `Some((sojourn ns, bytes))` for a dequeue, `None` for a drop.
    dequeued: Option<(u64, u64)>,
    /// The packet's number, which it keeps from link to link.
    id: u64,
}

/// Dequeues and drops of one link direction by flow, in time order.
type ByFlow<'a> = HashMap<&'a str, Vec<Seen>>;

fn index(lines: &[LogLine]) -> ByFlow<'_> {
    let mut m: ByFlow = HashMap::new();
    for l in lines {
        let Some(f) = &l.flow else { continue };
        let dequeued = match (l.event, l.sojourn_ns) {
            (EventKind::Dequeue, Some(s)) => Some((s, l.bytes)),
            (EventKind::Drop, _) => None,
            _ => continue,
        };
        m.entry(f.as_str()).or_default().push(Seen {
            time_ns: l.time_ns,
            dequeued,
            id: l.id,
        });
    }
    for v in m.values_mut() {
        v.sort_unstable();
    }
    m
}

/// A probe's round trip and its parts, ms: per queue, the base RTT, the client and the
/// server (measured packet by packet, else 0), and loss recovery (measured packet by packet,
/// or for a probe not taken apart that lost a packet in the path: what its queues and base
/// RTT leave of its round trip).
struct Parts {
    round_trip: f64,
    queues: Vec<f64>,
    base: f64,
    transmission: f64,
    client_send: f64,
    server: f64,
    loss: f64,
    by_packet: bool,
}

/// Transmitting `bytes` at `rate_bps`, ns (0 on an unlimited link).
fn transmission_ns(bytes: u64, rate_bps: Option<u64>) -> u64 {
    match rate_bps {
        Some(r) if r > 0 => (bytes * 8 * 1_000_000_000).div_ceil(r),
        _ => 0,
    }
}

/// This probe's time in each queue (the mean sojourn of its connection's packets dequeued
/// while it was in flight: its time per crossing) and the base RTT, or `None` when the probe
/// left no packet in any log.
fn probe_parts(p: &ProbeRecord, lab_start_ns: u64, links: &[(&LinkLog, ByFlow)]) -> Option<Parts> {
    let from = p.start_mono_ns.checked_sub(lab_start_ns)?;
    let to = p.end_mono_ns.checked_sub(lab_start_ns)?;
    let rt = p.round_trip_ms();
    if rt <= 0.0 {
        return None;
    }
    let flows = [
        format!("tcp {} > {}", p.local, p.remote),
        format!("tcp {} > {}", p.remote, p.local),
    ];
    let mut queues = Vec::with_capacity(links.len());
    let mut base_ms = 0.0;
    let mut tx_ms = 0.0;
    let mut seen = false;
    let mut dropped = false;
    for (l, by_flow) in links {
        let mut sum_ns = 0u128;
        let mut tx_ns = 0u128;
        let mut n = 0u64;
        for f in &flows {
            if let Some(v) = by_flow.get(f.as_str()) {
                let lo = v.partition_point(|s| s.time_ns < from);
                for s in v[lo..].iter().take_while(|s| s.time_ns <= to) {
                    match &s.dequeued {
                        Some((s, bytes)) => {
                            sum_ns += u128::from(*s);
                            tx_ns += u128::from(transmission_ns(*bytes, l.rate_bps));
                            n += 1;
                        }
                        None => dropped = true,
                    }
                }
            }
        }
        if n == 0 {
            queues.push(0.0);
            continue;
        }
        seen = true;
        queues.push(sum_ns as f64 / n as f64 / 1e6);
        tx_ms += tx_ns as f64 / n as f64 / 1e6;
        base_ms += l.delay_ms;
    }
    if !seen {
        return None;
    }
    let explained = queues.iter().sum::<f64>() + base_ms + tx_ms;
    Some(Parts {
        round_trip: rt,
        queues,
        base: base_ms,
        transmission: tx_ms,
        client_send: 0.0,
        server: 0.0,
        loss: if dropped {
            (rt - explained).max(0.0)
        } else {
            0.0
        },
        by_packet: false,
    })
}

/// How far before its request's start a packet may have entered the path and still be taken
/// for the request's (or before the server received the request, for the answer's): the
/// clocks are one, but the lab logs a packet's enqueue when the engine reads it, a little
/// after the host sent it.
const SLACK_NS: u64 = 1_000_000;

/// The last dequeue of a flow whose packet reached the far end (dequeue, transmission at
/// `rate_bps`, `delay_ns`) by `by_ns`, with its transmission time (ns).
fn last_arrival(
    v: &[Seen],
    delay_ns: u64,
    rate_bps: Option<u64>,
    by_ns: u64,
) -> Option<(Seen, u64)> {
    let end = v.partition_point(|s| s.time_ns + delay_ns <= by_ns);
    v[..end].iter().rev().find_map(|s| {
        let (_, bytes) = s.dequeued?;
        let tx = transmission_ns(bytes, rate_bps);
        (s.time_ns + tx + delay_ns <= by_ns).then_some((*s, tx))
    })
}

/// One link direction of a probe's way: its index among the links, the link, and its packets
/// by flow.
type Hop<'a> = (usize, &'a LinkLog<'a>, &'a ByFlow<'a>);

/// The link directions a probe's packets cross, in order: from the client to the server
/// (`up`) and back (`down`).
struct Route<'a> {
    up: Vec<Hop<'a>>,
    down: Vec<Hop<'a>>,
}

fn delay_ns(l: &LinkLog) -> u64 {
    (l.delay_ms * 1e6) as u64
}

/// A packet's crossing of one link direction.
struct Crossing {
    /// The link direction's index among the links.
    link: usize,
    sojourn_ns: u64,
    transmission_ns: u64,
    delay_ns: u64,
}

/// One packet's way across a route's hops: its crossings, first hop first; when it entered
/// the first hop's queue and when it reached the far end of the last (lab time).
struct Way {
    crossings: Vec<Crossing>,
    enq_ns: u64,
    arrival_ns: u64,
}

impl Way {
    fn transmission_ns(&self) -> u64 {
        self.crossings.iter().map(|c| c.transmission_ns).sum()
    }
    fn delay_ns(&self) -> u64 {
        self.crossings.iter().map(|c| c.delay_ns).sum()
    }
}

/// A chain of packets that cannot be followed across a route: a packet not seen leaving the
/// hop before the one it entered, or a log whose times do not add up.
struct Unfollowed;

/// The last packet of `flow` that crossed `hops` and reached their far end by `by_ns`,
/// followed back from the last hop to the first: on each hop before, the same packet (its
/// number is kept from link to link) dequeued at or before it entered the next. `Ok(None)`
/// when no packet of the flow reached the far end by then. What lies between a packet's
/// arrival at the end of one hop (its dequeue, transmission and the link's delay) and its
/// entering the next (a link's jitter) is in no part.
fn arrived(hops: &[Hop], flow: &str, by_ns: u64) -> Result<Option<Way>, Unfollowed> {
    let Some(((i, l, by_flow), before)) = hops.split_last() else {
        return Err(Unfollowed);
    };
    let Some(v) = by_flow.get(flow) else {
        return Ok(None);
    };
    let delay = delay_ns(l);
    let Some((last, tx)) = last_arrival(v, delay, l.rate_bps, by_ns) else {
        return Ok(None);
    };
    let (sojourn, _) = last.dequeued.ok_or(Unfollowed)?;
    let mut enq_ns = last.time_ns.checked_sub(sojourn).ok_or(Unfollowed)?;
    let arrival_ns = last.time_ns + tx + delay;
    let mut crossings = vec![Crossing {
        link: *i,
        sojourn_ns: sojourn,
        transmission_ns: tx,
        delay_ns: delay,
    }];
    for (i, l, by_flow) in before.iter().rev() {
        let v = by_flow.get(flow).ok_or(Unfollowed)?;
        let end = v.partition_point(|s| s.time_ns <= enq_ns);
        let (deq, (sojourn, bytes)) = (v[..end].iter().rev())
            .filter(|s| s.id == last.id)
            .find_map(|s| Some((s.time_ns, s.dequeued?)))
            .ok_or(Unfollowed)?;
        enq_ns = deq.checked_sub(sojourn).ok_or(Unfollowed)?;
        crossings.push(Crossing {
            link: *i,
            sojourn_ns: sojourn,
            transmission_ns: transmission_ns(bytes, l.rate_bps),
            delay_ns: delay_ns(l),
        });
    }
    crossings.reverse();
    Ok(Some(Way {
        crossings,
        enq_ns,
        arrival_ns,
    }))
}

/// A self probe's round trip cut into consecutive measured parts, along `route`; `None`
/// without the server's receive time or when the packets found cannot be the probe's (one
/// that entered the path before the request was written, an answer before its request
/// arrived, or a packet whose way cannot be followed hop by hop).
fn self_probe_parts(
    p: &ProbeRecord,
    lab_start_ns: u64,
    n_links: usize,
    route: &Route,
) -> Option<Parts> {
    let from = p.start_mono_ns.checked_sub(lab_start_ns)?;
    let to = p.end_mono_ns.checked_sub(lab_start_ns)?;
    let at_server = p.server_received_mono_ns?.checked_sub(lab_start_ns)?;
    if !(from < at_server && at_server < to) {
        return None;
    }
    let up = format!("tcp {} > {}", p.local, p.remote);
    let down = format!("tcp {} > {}", p.remote, p.local);
    let request = arrived(&route.up, &up, at_server).ok()??;
    let answer = arrived(&route.down, &down, to).ok()??;
    let (req_enq, ans_enq) = (request.enq_ns, answer.enq_ns);
    if req_enq + SLACK_NS < from || ans_enq + SLACK_NS < at_server {
        return None;
    }
    // Consecutive: written (from) | client's send buffer | req_enq | per hop up: queue,
    // transmission, delay | arrival | in the server | ans_enq | per hop down: queue,
    // transmission, delay | arrival | the client receiving | to. The server's part starts at
    // the request's arrival, not at `at_server`: its receiving is its own.
    let ms = |ns: f64| ns / 1e6;
    let mut queues = vec![0.0; n_links];
    for c in request.crossings.iter().chain(&answer.crossings) {
        queues[c.link] += ms(c.sojourn_ns as f64);
    }
    Some(Parts {
        round_trip: ms((to - from) as f64),
        queues,
        base: ms((request.delay_ns() + answer.delay_ns()) as f64),
        transmission: ms((request.transmission_ns() + answer.transmission_ns()) as f64),
        client_send: ms((req_enq as f64 - from as f64).max(0.0)),
        server: ms(ans_enq as f64 - request.arrival_ns as f64),
        loss: 0.0,
        by_packet: true,
    })
}

/// Drops of `flow` at any of `hops` in `[from_ns, to_ns]` (lab time): a host that waited then
/// for TCP to recover a packet it had sent.
fn dropped_between(hops: &[Hop], flow: &str, from_ns: u64, to_ns: u64) -> bool {
    hops.iter().filter_map(|h| h.2.get(flow)).any(|v| {
        let lo = v.partition_point(|s| s.time_ns < from_ns);
        v[lo..]
            .iter()
            .take_while(|s| s.time_ns <= to_ns)
            .any(|s| s.dequeued.is_none())
    })
}

/// A foreign probe's round trips cut into consecutive measured parts, along `route`. Its
/// connection is its own and carries nothing but the probe's exchanges (TCP handshake, TLS
/// handshake, GET), so its chain of packets can be walked back from the end: the last packet
/// that reached the client before it saw the answer, the last packet that reached the server
/// before that one entered the path, and so on back to the connection's first packet. Each
/// link crossing is a queue sojourn, a transmission and a propagation delay; each wait between
/// a packet's arrival at a host and that host's next packet entering the path is the host's
/// (the server's TCP, TLS and HTTP work; the client's TLS work and sending), or loss recovery
/// when a packet of that host's was dropped meanwhile, at any hop of its way. What is left is
/// the client receiving the answer. The parts are per round trip, as the probe's RPM counts
/// it. `None` when the chain does not start at the client (not the probe's packets, or a
/// connection that carried more than the probe) or cannot be followed hop by hop.
fn foreign_probe_parts(
    p: &ProbeRecord,
    lab_start_ns: u64,
    n_links: usize,
    route: &Route,
) -> Option<Parts> {
    let from = p.start_mono_ns.checked_sub(lab_start_ns)?;
    let to = p.end_mono_ns.checked_sub(lab_start_ns)?;
    let sent = format!("tcp {} > {}", p.local, p.remote);
    let answered = format!("tcp {} > {}", p.remote, p.local);
    let mut queues_ns = vec![0u64; n_links];
    let (mut base_ns, mut tx_ns) = (0u64, 0u64);
    let (mut client_ns, mut server_ns, mut loss_ns) = (0u64, 0u64, 0u64);
    let mut crossings = 0;
    // Walking back: at `t` the host (`at_client` or the server) had what it needed to send
    // its next packet (or, at first, the client had the answer); which packet brought it?
    let (mut t, mut at_client) = (to, true);
    loop {
        // The way the packet came, and the host's own way and packets, which it would have
        // waited to recover.
        let ((hops, flow), (own_hops, own)) = if at_client {
            ((&route.down, &answered), (&route.up, &sent))
        } else {
            ((&route.up, &sent), (&route.down, &answered))
        };
        let Some(way) = arrived(hops, flow, t).ok()? else {
            break;
        };
        let enq = way.enq_ns;
        if enq + SLACK_NS < from {
            break;
        }
        let arrival = way.arrival_ns;
        let held = t.saturating_sub(arrival);
        if crossings == 0 {
            // The client receiving the answer: left to the hosts.
        } else if dropped_between(own_hops, own, arrival.saturating_sub(SLACK_NS), t) {
            loss_ns += held;
        } else if at_client {
            client_ns += held;
        } else {
            server_ns += held;
        }
        for c in &way.crossings {
            queues_ns[c.link] += c.sojourn_ns;
            tx_ns += c.transmission_ns;
            base_ns += c.delay_ns;
        }
        crossings += 1;
        t = enq.max(from);
        at_client = !at_client;
    }
    // The chain must begin with the client sending, after the probe started.
    if !at_client || crossings < 2 {
        return None;
    }
    let first = t - from;
    if dropped_between(&route.up, &sent, from.saturating_sub(SLACK_NS), t) {
        loss_ns += first;
    } else {
        client_ns += first;
    }
    let per_rt = |ns: u64| ns as f64 / 1e6 / p.round_trips();
    Some(Parts {
        round_trip: p.round_trip_ms(),
        queues: queues_ns.iter().map(|q| per_rt(*q)).collect(),
        base: per_rt(base_ns),
        transmission: per_rt(tx_ns),
        client_send: per_rt(client_ns),
        server: per_rt(server_ns),
        loss: per_rt(loss_ns),
        by_packet: true,
    })
}

/// The share of a kind's probes its mean parts are taken over: the fastest 95 %, as the
/// trimmed mean of the RPM keeps them (draft section 5.3.1), so that the parts are those of
/// the round trips the RPM is made of.
const KEEP: f64 = 0.95;

/// Takes the report's loaded round trip apart over `links`; `None` without an RPM or when
/// no probe of a kind left packets in the logs. Probes are taken apart packet by packet on a
/// path of one link each way; for longer paths, see [`attribute_in`].
pub fn attribute(r: &RpmReport, lab_start_mono_ns: u64, links: &[LinkLog]) -> Option<Attribution> {
    attribute_along(r, lab_start_mono_ns, links, None)
}

/// As [`attribute`], in a lab whose tree of links `lab` says which link directions each
/// probe's packets cross, in order (by the probe's addresses): probes are taken apart packet
/// by packet on paths of any length, each packet followed from link to link.
pub fn attribute_in(
    r: &RpmReport,
    lab_start_mono_ns: u64,
    links: &[LinkLog],
    lab: &Topology,
) -> Option<Attribution> {
    attribute_along(r, lab_start_mono_ns, links, Some(lab))
}

/// The route of a probe from address `from` to `to` across `lab`'s links, each hop found
/// among `indexed` by its link's name and side; `None` when the lab has no such path or a
/// hop has no log.
fn route_in<'a>(
    lab: &Topology,
    indexed: &'a [(&'a LinkLog<'a>, ByFlow<'a>)],
    from: IpAddr,
    to: IpAddr,
) -> Option<Route<'a>> {
    let hops = |path: Vec<(&str, Side)>| -> Option<Vec<Hop<'a>>> {
        path.into_iter()
            .map(|(link, side)| {
                (indexed.iter().enumerate())
                    .find(|(_, (l, _))| l.link == link && l.side == side.name())
                    .map(|(i, (l, f))| (i, *l, f))
            })
            .collect()
    };
    let up = hops(lab.path(from, to)?)?;
    let down = hops(lab.path(to, from)?)?;
    (!up.is_empty() && !down.is_empty()).then_some(Route { up, down })
}

/// A probe's local and remote addresses.
fn endpoints(p: &ProbeRecord) -> Option<(IpAddr, IpAddr)> {
    let ip = |s: &str| s.parse::<SocketAddr>().ok().map(|a| a.ip());
    Some((ip(&p.local)?, ip(&p.remote)?))
}

/// [`attribute`] and [`attribute_in`]: each probe's route from `lab` by its addresses, or,
/// without one, the one link each way of a path that has no more.
fn attribute_along(
    r: &RpmReport,
    lab_start_mono_ns: u64,
    links: &[LinkLog],
    lab: Option<&Topology>,
) -> Option<Attribution> {
    let rpm = r.rpm?;
    let r_f = 60_000.0 / r.foreign.rpm?;
    let r_s = 60_000.0 / r.self_probes.rpm?;
    let indexed: Vec<(&LinkLog, ByFlow)> = links.iter().map(|l| (l, index(l.lines))).collect();
    // Without the lab's tree of links: the one link each way, if the path has no more.
    let one_way = |side: &str| {
        let mut it = indexed
            .iter()
            .enumerate()
            .filter(|(_, (l, _))| l.side == side);
        match (it.next(), it.next()) {
            (Some((i, (l, f))), None) => Some((i, *l, f)),
            _ => None,
        }
    };
    let one_link = one_way("up").zip(one_way("down")).map(|(up, down)| Route {
        up: vec![up],
        down: vec![down],
    });
    // Each probe's route, by its addresses: the probes of a test share one or two.
    let mut routes: HashMap<(IpAddr, IpAddr), Option<Route>> = HashMap::new();
    if let Some(lab) = lab {
        for p in r.foreign.probes.iter().chain(&r.self_probes.probes) {
            if let Some((from, to)) = endpoints(p) {
                let route = || route_in(lab, &indexed, from, to);
                routes.entry((from, to)).or_insert_with(route);
            }
        }
    }
    let route_of = |p: &ProbeRecord| {
        endpoints(p)
            .and_then(|ends| routes.get(&ends)?.as_ref())
            .or(one_link.as_ref())
    };
    // One kind of probe's mean parts over its fastest 95 %.
    let kind = |probes: &[ProbeRecord]| -> Option<KindParts> {
        let mut all: Vec<Parts> = probes
            .iter()
            .filter(|p| p.in_window)
            .filter_map(|p| {
                let packets = match route_of(p) {
                    Some(route) if p.tcp_ms.is_some() => {
                        foreign_probe_parts(p, lab_start_mono_ns, links.len(), route)
                    }
                    Some(route) => self_probe_parts(p, lab_start_mono_ns, links.len(), route),
                    None => None,
                };
                packets.or_else(|| probe_parts(p, lab_start_mono_ns, &indexed))
            })
            .collect();
        if all.is_empty() {
            return None;
        }
        all.sort_by(|a, b| a.round_trip.total_cmp(&b.round_trip));
        let n = ((all.len() as f64 * KEEP).floor() as usize).clamp(1, all.len());
        let kept = &all[..n];
        let mean = |f: &dyn Fn(&Parts) -> f64| kept.iter().map(f).sum::<f64>() / n as f64;
        Some(KindParts {
            round_trip: mean(&|p| p.round_trip),
            queues: (0..links.len()).map(|i| mean(&|p| p.queues[i])).collect(),
            base: mean(&|p| p.base),
            transmission: mean(&|p| p.transmission),
            loss: mean(&|p| p.loss),
            client_send: mean(&|p| p.client_send),
            server: mean(&|p| p.server),
            probes: n,
            by_packet: kept.iter().filter(|p| p.by_packet).count(),
        })
    };
    let f = kind(&r.foreign.probes)?.of(r_f);
    let s = kind(&r.self_probes.probes)?.of(r_s);
    let (w_f, w_s) = (r_s / (r_f + r_s), r_f / (r_f + r_s));
    let loaded = 60_000.0 / rpm;
    // One part of the loaded round trip: the kinds' parts, weighted as the RPM weighs them
    // (see the module's header).
    let part = |x_f: f64, x_s: f64| w_f * x_f + w_s * x_s;
    let queues: Vec<QueuePart> = links
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let ms = part(f.queues_ms[i], s.queues_ms[i]);
            QueuePart {
                link: l.link.to_string(),
                side: l.side.to_string(),
                queue: l.queue.to_string(),
                ms,
                share: ms / loaded,
            }
        })
        .collect();
    let base = part(f.base_rtt_ms, s.base_rtt_ms);
    let transmission = part(f.transmission_ms, s.transmission_ms);
    let loss = part(f.loss_recovery_ms, s.loss_recovery_ms);
    let client_send = part(f.client_send_ms, s.client_send_ms);
    let server = part(f.server_ms, s.server_ms);
    let hosts = loaded
        - base
        - transmission
        - loss
        - client_send
        - server
        - queues.iter().map(|q| q.ms).sum::<f64>();
    Some(Attribution {
        rpm,
        confidence: r.rpm_confidence.name().to_string(),
        loaded_rtt_ms: loaded,
        queues,
        base_rtt_ms: base,
        transmission_ms: transmission,
        loss_recovery_ms: loss,
        client_send_ms: client_send,
        server_ms: server,
        hosts_ms: hosts,
        foreign: f,
        self_probes: s,
    })
}

/// One kind of probe's mean parts, ms, over the probes the trimmed mean keeps.
struct KindParts {
    /// The mean round trip of those probes.
    round_trip: f64,
    queues: Vec<f64>,
    base: f64,
    transmission: f64,
    loss: f64,
    client_send: f64,
    server: f64,
    probes: usize,
    by_packet: usize,
}

impl KindParts {
    /// The parts of the kind's round trip `rt` ms (its trimmed mean, as the RPM has it);
    /// what they leave of it is the hosts'. The RPM trims a foreign probe's TCP, TLS and HTTP
    /// times each on its own, the parts are the kept probes' whole round trips: they are
    /// scaled by `rt` over those probes' mean round trip, so that they keep their proportions
    /// and the kind adds up to the RPM's round trip.
    fn of(&self, rt: f64) -> KindAttribution {
        let k = if self.round_trip > 0.0 {
            rt / self.round_trip
        } else {
            1.0
        };
        let queues_ms: Vec<f64> = self.queues.iter().map(|q| q * k).collect();
        let named = queues_ms.iter().sum::<f64>()
            + (self.base + self.transmission + self.loss + self.client_send + self.server) * k;
        KindAttribution {
            round_trip_ms: rt,
            queues_ms,
            base_rtt_ms: self.base * k,
            transmission_ms: self.transmission * k,
            loss_recovery_ms: self.loss * k,
            client_send_ms: self.client_send * k,
            server_ms: self.server * k,
            hosts_ms: rt - named,
            probes: self.probes,
            probes_by_packet: self.by_packet,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::Confidence;
    use crate::report::ProbeSummary;
    use labnet::spec::{Host, Interface, LinkEnds};

    const LAB0: u64 = 1_000_000_000;

    fn probe(start_ms: u64, end_ms: u64, foreign: bool, port: u16) -> ProbeRecord {
        let dur = (end_ms - start_ms) as f64;
        ProbeRecord {
            start_mono_ns: LAB0 + start_ms * 1_000_000,
            end_mono_ns: LAB0 + end_ms * 1_000_000,
            start_s: 0.0,
            end_s: 0.0,
            tcp_ms: foreign.then_some(dur / 3.0),
            tls_ms: foreign.then_some(dur / 3.0),
            http_ms: if foreign { dur / 3.0 } else { dur },
            on: (!foreign).then(|| "down".into()),
            local: format!("10.77.1.1:{port}"),
            remote: "10.77.2.1:4043".into(),
            interval: 0,
            in_window: true,
            server_received_mono_ns: None,
        }
    }

    fn line(t_ms: u64, sojourn_ms: u64, flow: &str) -> LogLine {
        LogLine {
            time_ns: t_ms * 1_000_000,
            event: EventKind::Dequeue,
            id: 0,
            bytes: 1500,
            sojourn_ns: Some(sojourn_ms * 1_000_000),
            flow: Some(flow.into()),
            ecn: wire::Ecn::NotEct,
            cause: None,
        }
    }

    fn summary(rpm: f64, probes: Vec<ProbeRecord>) -> ProbeSummary {
        ProbeSummary {
            rpm: Some(rpm),
            tcp_ms: None,
            tls_ms: None,
            http_ms: None,
            in_window: probes.len(),
            total: probes.len(),
            probes,
        }
    }

    /// A path of 10 ms each way with 180 ms in the down queue and 0 up: every round trip is
    /// 200 ms, of which 90 % queue and 10 % base. The foreign probe's three exchanges (TCP,
    /// TLS, HTTP) follow one another with no time in the hosts.
    #[test]
    fn queue_and_base_shares_add_up_to_the_loaded_round_trip() {
        let foreign = probe(0, 600, true, 40000);
        let selfp = probe(100, 300, false, 40001);
        let down_f = "tcp 10.77.2.1:4043 > 10.77.1.1:40000";
        let up_f = "tcp 10.77.1.1:40000 > 10.77.2.1:4043";
        let down_s = "tcp 10.77.2.1:4043 > 10.77.1.1:40001";
        let up_s = "tcp 10.77.1.1:40001 > 10.77.2.1:4043";
        let down = vec![
            line(190, 180, down_f),
            line(390, 180, down_f),
            line(590, 180, down_f),
            line(200, 180, down_s),
            line(250, 180, down_s),
            // Before the probe: not counted.
            line(50, 900, down_s),
        ];
        let up = vec![
            line(0, 0, up_f),
            line(200, 0, up_f),
            line(400, 0, up_f),
            line(110, 0, up_s),
        ];
        let r = RpmReport {
            config_url: String::new(),
            protocol: "h2".into(),
            load: crate::algorithm::Load::Both,
            rpm: Some(300.0),
            rpm_confidence: Confidence::High,
            down_bps: 0.0,
            up_bps: 0.0,
            goodput_confidence: Confidence::High,
            flows_down: 1,
            flows_up: 1,
            duration_s: 1.0,
            foreign: summary(300.0, vec![foreign]),
            self_probes: summary(300.0, vec![selfp]),
            idle: Default::default(),
            failed_probes: 0,
            failed_flows: 0,
            start_mono_ns: LAB0,
            intervals: vec![],
        };
        let links = path(&up, &down);
        let a = attribute(&r, LAB0, &links).unwrap();
        assert!((a.loaded_rtt_ms - 200.0).abs() < 1e-9);
        assert!((a.queues[1].share - 0.9).abs() < 1e-9, "{a:?}");
        assert!(a.queues[0].share.abs() < 1e-9);
        assert!((a.base_share() - 0.1).abs() < 1e-9);
        assert!(a.hosts_ms.abs() < 1e-6);
        assert!((a.foreign.network_share() - 1.0).abs() < 1e-9);
        assert!((a.self_probes.queues_ms[1] - 180.0).abs() < 1e-9);
        assert_eq!(
            a.line(),
            "RPM 300 (High confidence); loaded RTT 200 ms: 90 % in `path` down FIFO queue, 10 % base RTT, 0 % hosts"
        );
    }

    #[test]
    fn the_parts_name_each_queue_then_the_rest_in_order_and_add_up_to_the_round_trip() {
        let queue = |link: &str, side: &str, spec: &str, ms: f64| QueuePart {
            link: link.into(),
            side: side.into(),
            queue: spec.into(),
            ms,
            share: ms / 200.0,
        };
        let kind = KindAttribution {
            round_trip_ms: 50.0,
            queues_ms: vec![4.0, 1.0],
            base_rtt_ms: 20.0,
            transmission_ms: 2.0,
            loss_recovery_ms: 3.0,
            client_send_ms: 5.0,
            server_ms: 6.0,
            hosts_ms: 9.0,
            probes: 10,
            probes_by_packet: 10,
        };
        let a = Attribution {
            rpm: 300.0,
            confidence: "High".into(),
            loaded_rtt_ms: 200.0,
            queues: vec![
                queue("dsl", "up", "fifo limit 1000", 120.0),
                queue("wifi", "down", "fq_codel", 10.0),
            ],
            base_rtt_ms: 20.0,
            transmission_ms: 2.0,
            loss_recovery_ms: 3.0,
            client_send_ms: 25.0,
            server_ms: 15.0,
            hosts_ms: 5.0,
            foreign: kind.clone(),
            self_probes: KindAttribution {
                hosts_ms: -2.0,
                ..kind
            },
        };
        let parts = a.parts();
        let names: Vec<String> = parts.iter().map(|(p, _)| p.name()).collect();
        assert_eq!(
            names,
            [
                "dsl up FIFO queue",
                "wifi down FQ-CoDel queue",
                "base RTT",
                "transmission",
                "client",
                "server",
                "loss recovery",
                "unexplained"
            ]
        );
        let ms: Vec<f64> = parts.iter().map(|(_, ms)| *ms).collect();
        assert_eq!(ms, [120.0, 10.0, 20.0, 2.0, 25.0, 15.0, 3.0, 5.0]);
        assert_eq!(ms.iter().sum::<f64>(), a.loaded_rtt_ms);
        // A kind's parts keep the attribution's queue names with the kind's own times.
        let f: Vec<f64> = a.parts_of(&a.foreign).iter().map(|(_, ms)| *ms).collect();
        assert_eq!(f, [4.0, 1.0, 20.0, 2.0, 5.0, 6.0, 3.0, 9.0]);
        assert_eq!(f.iter().sum::<f64>(), a.foreign.round_trip_ms);
        assert_eq!(a.parts_of(&a.foreign)[1].0, parts[1].0);
        // Named parts that over-explain leave nothing unexplained to draw, not a negative bar.
        let s = a.parts_of(&a.self_probes);
        assert_eq!(s.last(), Some(&(Part::Unexplained, 0.0)));
    }

    #[test]
    fn a_probe_that_lost_a_packet_spent_its_unexplained_time_in_loss_recovery() {
        // The foreign probe's round trip is 300 ms: 180 ms queued down, 20 ms base RTT, and a
        // drop of its flow's: the other 100 ms were TCP recovering it. The self probe's is
        // 200 ms, all queue and base.
        let foreign = probe(0, 900, true, 40000);
        let selfp = probe(100, 300, false, 40001);
        let down_f = "tcp 10.77.2.1:4043 > 10.77.1.1:40000";
        let down_s = "tcp 10.77.2.1:4043 > 10.77.1.1:40001";
        let mut drop = line(200, 0, down_f);
        drop.event = EventKind::Drop;
        drop.sojourn_ns = None;
        let down = vec![line(190, 180, down_f), drop, line(250, 180, down_s)];
        let up = vec![
            line(10, 0, "tcp 10.77.1.1:40000 > 10.77.2.1:4043"),
            line(110, 0, "tcp 10.77.1.1:40001 > 10.77.2.1:4043"),
        ];
        let mut r = report(250.0, 200.0, vec![foreign], 300.0, vec![selfp]);
        r.rpm_confidence = Confidence::Medium;
        let links = path(&up, &down);
        let a = attribute(&r, LAB0, &links).unwrap();
        assert!((a.foreign.loss_recovery_ms - 100.0).abs() < 1e-6, "{a:?}");
        assert!((a.foreign.network_share() - 1.0).abs() < 1e-9);
        assert_eq!(a.self_probes.loss_recovery_ms, 0.0);
        // Loaded round trip 60000 / 250 = 240 ms, of which the foreign probes' weight
        // (200 / 500) times their 100 ms is loss recovery.
        assert!((a.loss_recovery_ms - 40.0).abs() < 1e-6, "{a:?}");
        assert!(a.hosts_ms.abs() < 1e-6, "{a:?}");
        assert!(
            a.line().contains("17 % loss recovery, 0 % hosts"),
            "{}",
            a.line()
        );
    }

    fn report(
        rpm: f64,
        f_rpm: f64,
        f: Vec<ProbeRecord>,
        s_rpm: f64,
        s: Vec<ProbeRecord>,
    ) -> RpmReport {
        RpmReport {
            config_url: String::new(),
            protocol: "h2".into(),
            load: crate::algorithm::Load::Both,
            rpm: Some(rpm),
            rpm_confidence: Confidence::High,
            down_bps: 0.0,
            up_bps: 0.0,
            goodput_confidence: Confidence::High,
            flows_down: 1,
            flows_up: 1,
            duration_s: 1.0,
            foreign: summary(f_rpm, f),
            self_probes: summary(s_rpm, s),
            idle: Default::default(),
            failed_probes: 0,
            failed_flows: 0,
            start_mono_ns: LAB0,
            intervals: vec![],
        }
    }

    /// A path of 10 ms each way. The self probe, written at 100 ms: 50 ms in the client's
    /// send buffer (its packet enters the up queue at 150), 80 ms there, 10 ms up, the
    /// server reads it 1 ms after it arrives (241), its answer's packet enters the down queue
    /// at 271, 100 ms there, 10 ms down, and the client reads it 2 ms after it arrives (383).
    fn self_probe_path() -> (ProbeRecord, Vec<LogLine>, Vec<LogLine>) {
        let mut selfp = probe(100, 383, false, 40001);
        selfp.server_received_mono_ns = Some(LAB0 + 241_000_000);
        let up_s = "tcp 10.77.1.1:40001 > 10.77.2.1:4043";
        let down_s = "tcp 10.77.2.1:4043 > 10.77.1.1:40001";
        let up = vec![
            line(10, 0, "tcp 10.77.1.1:40000 > 10.77.2.1:4043"),
            // The upload's packets before and after the request's: the first arrived earlier,
            // the last after the server had read the request.
            line(200, 80, up_s),
            line(230, 80, up_s),
            line(235, 80, up_s),
        ];
        let down = vec![
            line(50, 0, "tcp 10.77.2.1:4043 > 10.77.1.1:40000"),
            line(360, 100, down_s),
            line(371, 100, down_s),
            line(380, 100, down_s),
        ];
        (selfp, up, down)
    }

    fn path<'a>(up: &'a [LogLine], down: &'a [LogLine]) -> [LinkLog<'a>; 2] {
        [
            LinkLog {
                link: "path",
                side: "up",
                queue: "fifo limit 1000",
                delay_ms: 10.0,
                rate_bps: None,
                lines: up,
            },
            LinkLog {
                link: "path",
                side: "down",
                queue: "fifo limit 1000",
                delay_ms: 10.0,
                rate_bps: None,
                lines: down,
            },
        ]
    }

    #[test]
    fn a_self_probe_is_cut_into_client_buffer_queues_base_server_and_receiving() {
        let (selfp, up, down) = self_probe_path();
        // The foreign probe: 20 ms a round trip, all base RTT.
        let foreign = probe(0, 60, true, 40000);
        let r = report(
            (3000.0 + 60_000.0 / 283.0) / 2.0,
            3000.0,
            vec![foreign],
            60_000.0 / 283.0,
            vec![selfp],
        );
        let links = path(&up, &down);
        let a = attribute(&r, LAB0, &links).unwrap();
        let s = &a.self_probes;
        assert_eq!((s.probes, s.probes_by_packet), (1, 1));
        let near = |x: f64, want: f64| (x - want).abs() < 1e-6;
        assert!(near(s.client_send_ms, 50.0), "{s:?}");
        assert!(
            near(s.queues_ms[0], 80.0) && near(s.queues_ms[1], 100.0),
            "{s:?}"
        );
        assert!(near(s.base_rtt_ms, 20.0), "{s:?}");
        // From the request's arrival (240) to the answer entering the path (271).
        assert!(near(s.server_ms, 31.0), "{s:?}");
        // Only the client's 2 ms of receiving is left unnamed.
        assert!(near(s.hosts_ms, 2.0), "{s:?}");
        assert!((s.named_share() - 281.0 / 283.0).abs() < 1e-9);
        // The loaded round trip adds up from the weighted parts but for the client's
        // receiving.
        assert!((a.named_share() - 1.0).abs() < 0.01, "{a:?}");
        assert!(a.line().contains("in the client"), "{}", a.line());
        assert!(a.line().contains("in the server"), "{}", a.line());
    }

    #[test]
    fn a_packets_transmission_at_the_links_rate_is_its_own_part() {
        // 1500 bytes at 1 Mbit/s: 12 ms on the wire after the queue.
        assert_eq!(transmission_ns(1500, Some(1_000_000)), 12_000_000);
        assert_eq!(transmission_ns(1500, None), 0);
        // The same self probe, its links at 10 Mbit/s: each 1500-byte packet takes 1.2 ms,
        // which the server's part and the client's receiving no longer hold. The server
        // reads the request 1 ms after its packet has arrived, now at 241.2 ms.
        let (mut selfp, up, down) = self_probe_path();
        selfp.server_received_mono_ns = Some(LAB0 + 242_200_000);
        let mut links = path(&up, &down);
        links[0].rate_bps = Some(10_000_000);
        links[1].rate_bps = Some(10_000_000);
        let r = report(
            (3000.0 + 60_000.0 / 283.0) / 2.0,
            3000.0,
            vec![probe(0, 60, true, 40000)],
            60_000.0 / 283.0,
            vec![selfp],
        );
        let a = attribute(&r, LAB0, &links).unwrap();
        let s = &a.self_probes;
        let near = |x: f64, want: f64| (x - want).abs() < 1e-6;
        assert!(near(s.transmission_ms, 2.4), "{s:?}");
        assert!(near(s.server_ms, 31.0 - 1.2), "{s:?}");
        assert!(near(s.hosts_ms, 2.0 - 1.2), "{s:?}");
        assert!(a.line().contains("% transmission"), "{}", a.line());
    }

    #[test]
    fn packets_that_cannot_be_the_self_probes_leave_it_to_the_mean_sojourn() {
        let (mut selfp, up, down) = self_probe_path();
        // The server says it read the request before any of the upload's packets arrived:
        // the packets found would have entered the path before the request was written.
        selfp.server_received_mono_ns = Some(LAB0 + 101_000_000);
        let r = report(
            300.0,
            3000.0,
            vec![probe(0, 60, true, 40000)],
            212.0,
            vec![selfp],
        );
        let links = path(&up, &down);
        let a = attribute(&r, LAB0, &links).unwrap();
        assert_eq!(a.self_probes.probes_by_packet, 0);
        assert_eq!(a.self_probes.client_send_ms, 0.0);
        assert_eq!(a.self_probes.server_ms, 0.0);
        // Without the server's time, too.
        let (mut selfp, up, down) = self_probe_path();
        selfp.server_received_mono_ns = None;
        let r = report(
            300.0,
            3000.0,
            vec![probe(0, 60, true, 40000)],
            212.0,
            vec![selfp],
        );
        let links = path(&up, &down);
        assert_eq!(
            attribute(&r, LAB0, &links)
                .unwrap()
                .self_probes
                .probes_by_packet,
            0
        );
    }

    /// A log line at `t_us` (µs) of lab time; a dequeue after `sojourn_us`, or a drop.
    fn line_us(t_us: u64, sojourn_us: Option<u64>, flow: &str) -> LogLine {
        let mut l = line(0, 0, flow);
        l.time_ns = t_us * 1000;
        match sojourn_us {
            Some(s) => l.sojourn_ns = Some(s * 1000),
            None => {
                l.event = EventKind::Drop;
                l.sojourn_ns = None;
            }
        }
        l
    }

    /// A foreign probe on a path of 10 ms each way, taken apart packet by packet, ms from its
    /// start: its SYN is dropped at 0.5 and sent again at 1000.5 (2 ms in the up queue); the
    /// SYN-ACK leaves at once (3 ms down); the client takes 1.0 ms before its ClientHello
    /// (2 up), the server 1.2 ms before its reply (3 down), the client 1.6 ms before its
    /// Finished and GET (2 up), the server 1.5 ms before its answer (3 down), and the client
    /// reads the answer 0.9 ms after it arrived, at 1081.7.
    #[test]
    fn a_foreign_probes_chain_of_packets_names_each_hosts_work_and_its_loss_recovery() {
        let up_f = "tcp 10.77.1.1:40000 > 10.77.2.1:4043";
        let down_f = "tcp 10.77.2.1:4043 > 10.77.1.1:40000";
        // (enqueue µs, sojourn µs): dequeued at their sum.
        let deq = |enq: u64, soj: u64, f: &str| line_us(enq + soj, Some(soj), f);
        let up = vec![
            line_us(500, None, up_f),
            deq(1_000_500, 2000, up_f),
            deq(1_026_500, 2000, up_f),
            deq(1_054_300, 2000, up_f),
            // The client's ACK of the answer, after the probe: not its.
            deq(1_082_000, 0, up_f),
            line(110, 0, "tcp 10.77.1.1:40001 > 10.77.2.1:4043"),
        ];
        let down = vec![
            deq(1_012_500, 3000, down_f),
            // The server's ACK of the ClientHello, before its reply: not on the way.
            deq(1_038_600, 3000, down_f),
            deq(1_039_700, 3000, down_f),
            deq(1_067_800, 3000, down_f),
            line(250, 180, "tcp 10.77.2.1:4043 > 10.77.1.1:40001"),
        ];
        let total_ms = 1081.7;
        let mut foreign = probe(0, 1, true, 40000);
        foreign.end_mono_ns = LAB0 + 1_081_700_000;
        (foreign.tcp_ms, foreign.tls_ms) = (Some(1025.5), Some(27.2));
        foreign.http_ms = total_ms - 1025.5 - 27.2;
        let rt_f = total_ms / 3.0;
        let r = report(
            (60_000.0 / rt_f + 300.0) / 2.0,
            60_000.0 / rt_f,
            vec![foreign],
            300.0,
            vec![probe(100, 300, false, 40001)],
        );
        let links = path(&up, &down);
        let a = attribute(&r, LAB0, &links).unwrap();
        let f = &a.foreign;
        assert_eq!((f.probes, f.probes_by_packet), (1, 1));
        let near = |x: f64, want_per_probe: f64| (x - want_per_probe / 3.0).abs() < 1e-6;
        assert!(near(f.loss_recovery_ms, 1000.5), "{f:?}");
        assert!(near(f.client_send_ms, 1.0 + 1.6), "{f:?}");
        assert!(near(f.server_ms, 1.2 + 1.5), "{f:?}");
        assert!(
            near(f.queues_ms[0], 6.0) && near(f.queues_ms[1], 9.0),
            "{f:?}"
        );
        assert!(near(f.base_rtt_ms, 60.0), "{f:?}");
        // Only the client's reading of the answer is left.
        assert!(near(f.hosts_ms, 0.9), "{f:?}");
        assert!(a.line().contains("in the client"), "{}", a.line());
    }

    /// A connection whose packets do not start with the client sending after the probe
    /// began (the server's packet that the walk back reaches had no packet of the client's
    /// before it) is not the probe's alone: its time per queue is the mean sojourn instead.
    #[test]
    fn a_foreign_chain_that_does_not_start_at_the_client_is_not_taken_apart() {
        let up_f = "tcp 10.77.1.1:40000 > 10.77.2.1:4043";
        let down_f = "tcp 10.77.2.1:4043 > 10.77.1.1:40000";
        // The client's only packet entered the path before the probe began (a connection
        // that was already open); the server's answer followed it.
        let up = vec![
            line_us(0, Some(0), up_f),
            line(110, 0, "tcp 10.77.1.1:40001 > 10.77.2.1:4043"),
        ];
        let down = vec![
            line_us(15_000, Some(5000), down_f),
            line(250, 180, "tcp 10.77.2.1:4043 > 10.77.1.1:40001"),
        ];
        let mut foreign = probe(5, 30, true, 40000);
        (foreign.tcp_ms, foreign.tls_ms, foreign.http_ms) =
            (Some(25.0 / 3.0), Some(25.0 / 3.0), 25.0 / 3.0);
        let r = report(
            (60_000.0 / (25.0 / 3.0) + 300.0) / 2.0,
            60_000.0 / (25.0 / 3.0),
            vec![foreign],
            300.0,
            vec![probe(100, 300, false, 40001)],
        );
        let links = path(&up, &down);
        let a = attribute(&r, LAB0, &links).unwrap();
        let f = &a.foreign;
        assert_eq!((f.probes, f.probes_by_packet), (1, 0), "{f:?}");
        assert_eq!((f.client_send_ms, f.server_ms), (0.0, 0.0), "{f:?}");
        // The down packet's 5 ms sojourn, per crossing.
        assert!((f.queues_ms[1] - 5.0).abs() < 1e-6, "{f:?}");
    }

    /// A lab of one link, `path`, or of two each way: client – `dsl` – home – `core` – server.
    fn lab(links: &[(&str, &str, &str)]) -> Topology {
        let host = |name: &str, i: usize| Host {
            name: name.into(),
            settings: Default::default(),
            family: Default::default(),
            interfaces: vec![Interface {
                name: "eth0".into(),
                ipv4: labnet::spec::iface_addrs(i).0,
                ipv6: labnet::spec::iface_addrs(i).1,
            }],
            aliases: vec![],
        };
        Topology {
            hosts: vec![host("client", 1), host("server", 2)],
            routers: vec!["home".into()],
            links: (links.iter())
                .map(|(name, a, b)| LinkEnds {
                    name: name.to_string(),
                    a: a.to_string(),
                    b: b.to_string(),
                })
                .collect(),
        }
    }

    fn two_hop_lab() -> Topology {
        lab(&[("dsl", "client", "home"), ("core", "home", "server")])
    }

    /// The up and down hops of [`two_hop_lab`]: (index among [`TwoHops::links`], delay µs).
    const UP: [(usize, u64); 2] = [(0, 5000), (2, 10_000)];
    const DOWN: [(usize, u64); 2] = [(3, 10_000), (1, 5000)];

    /// The link logs of [`two_hop_lab`]: dsl up and down (5 ms), core up and down (10 ms).
    #[derive(Default)]
    struct TwoHops {
        logs: [Vec<LogLine>; 4],
        next_id: u64,
    }

    impl TwoHops {
        /// A packet of `flow` entering the first of `hops` at `enq_us` (µs of lab time),
        /// queued `sojourns_us` at each hop it crosses, and dropped entering the next if
        /// there are fewer sojourns than hops; when it reached the end of its last crossing.
        fn send(
            &mut self,
            hops: &[(usize, u64)],
            flow: &str,
            enq_us: u64,
            sojourns_us: &[u64],
        ) -> u64 {
            let id = self.next_id;
            self.next_id += 1;
            let mut t = enq_us;
            for (&(i, delay_us), &s) in hops.iter().zip(sojourns_us) {
                self.logs[i].push(LogLine {
                    id,
                    ..line_us(t + s, Some(s), flow)
                });
                t += s + delay_us;
            }
            if let Some(&(i, _)) = hops.get(sojourns_us.len()) {
                self.logs[i].push(LogLine {
                    id,
                    ..line_us(t, None, flow)
                });
            }
            t
        }

        fn links(&self) -> Vec<LinkLog<'_>> {
            let dirs = [
                ("dsl", "up", 5.0),
                ("dsl", "down", 5.0),
                ("core", "up", 10.0),
                ("core", "down", 10.0),
            ];
            dirs.iter()
                .zip(&self.logs)
                .map(|(&(link, side, delay_ms), lines)| LinkLog {
                    link,
                    side,
                    queue: "fifo limit 1000",
                    delay_ms,
                    rate_bps: None,
                    lines,
                })
                .collect()
        }
    }

    const FOREIGN_UP: &str = "tcp 10.77.1.1:40000 > 10.77.2.1:4043";
    const FOREIGN_DOWN: &str = "tcp 10.77.2.1:4043 > 10.77.1.1:40000";

    /// A foreign probe's three exchanges from `start_us`, across [`two_hop_lab`]: 20 ms in the
    /// dsl uplink's queue each time, 2 in core's, 1 and 3 on the way down; the client waits
    /// 0.5, 1.0 and 1.6 ms before sending, the server 0.5, 1.2 and 1.5 ms before answering,
    /// and the client reads the answer 0.9 ms after it arrived. The probe, ending then.
    fn foreign_across_two_hops(n: &mut TwoHops, start_us: u64) -> ProbeRecord {
        let mut t = start_us;
        for (client_us, server_us) in [(500, 500), (1000, 1200), (1600, 1500)] {
            t = n.send(&UP, FOREIGN_UP, t + client_us, &[20_000, 2000]);
            t = n.send(&DOWN, FOREIGN_DOWN, t + server_us, &[1000, 3000]);
        }
        let mut foreign = probe(0, 1, true, 40000);
        foreign.end_mono_ns = LAB0 + (t + 900) * 1000;
        let total_ms = (t + 900) as f64 / 1000.0;
        (foreign.tcp_ms, foreign.tls_ms) = (Some(total_ms / 3.0), Some(total_ms / 3.0));
        foreign.http_ms = total_ms / 3.0;
        foreign
    }

    /// A self probe across [`two_hop_lab`] on a loaded connection, ms: written at 200, its
    /// request's packet enters the dsl uplink at 230 (30 ms in the client's send buffer), 40
    /// ms there, 5 ms on, 2 ms in core's queue, 10 ms on: at the server at 287, which reads it
    /// at 288; the answer's packet enters core's downlink at 300 (13 ms in the server), 1 ms
    /// there, 10 on, 50 ms in dsl's, 5 on: at the client at 366, which reads it at 368. The
    /// upload's packets before and after, and the download's after, are not the probe's.
    fn self_across_two_hops(n: &mut TwoHops) -> ProbeRecord {
        let up = "tcp 10.77.1.1:40001 > 10.77.2.1:4043";
        let down = "tcp 10.77.2.1:4043 > 10.77.1.1:40001";
        n.send(&UP, up, 100_000, &[40_000, 2000]);
        assert_eq!(n.send(&UP, up, 230_000, &[40_000, 2000]), 287_000);
        n.send(&UP, up, 240_000, &[40_000, 2000]);
        assert_eq!(n.send(&DOWN, down, 300_000, &[1000, 50_000]), 366_000);
        n.send(&DOWN, down, 310_000, &[1000, 50_000]);
        let mut selfp = probe(200, 368, false, 40001);
        selfp.server_received_mono_ns = Some(LAB0 + 288_000_000);
        selfp
    }

    /// The report of one foreign and one self probe, each kind's RPM its probe's.
    fn report_of(foreign: ProbeRecord, selfp: ProbeRecord) -> RpmReport {
        let (f_rpm, s_rpm) = (
            60_000.0 / foreign.round_trip_ms(),
            60_000.0 / selfp.round_trip_ms(),
        );
        report(
            (f_rpm + s_rpm) / 2.0,
            f_rpm,
            vec![foreign],
            s_rpm,
            vec![selfp],
        )
    }

    #[test]
    fn on_two_hops_each_way_a_probes_packets_are_followed_link_by_link_and_its_parts_add_up() {
        let mut n = TwoHops::default();
        let foreign = foreign_across_two_hops(&mut n, 0);
        let selfp = self_across_two_hops(&mut n);
        let r = report_of(foreign, selfp);
        let links = n.links();
        let a = attribute_in(&r, LAB0, &links, &two_hop_lab()).unwrap();
        let near = |x: f64, want: f64| (x - want).abs() < 1e-6;
        // The foreign probe's 175.2 ms, per round trip (a third): per exchange 20 + 2 ms
        // queued up, 1 + 3 down, 30 ms of delays; the hosts' waits between.
        let f = &a.foreign;
        assert_eq!((f.probes, f.probes_by_packet), (1, 1), "{f:?}");
        assert!(near(f.round_trip_ms, 58.4), "{f:?}");
        let queues = [20.0, 3.0, 2.0, 1.0];
        assert!((0..4).all(|i| near(f.queues_ms[i], queues[i])), "{f:?}");
        assert!(near(f.base_rtt_ms, 30.0), "{f:?}");
        assert!(near(f.client_send_ms, 3.1 / 3.0), "{f:?}");
        assert!(near(f.server_ms, 3.2 / 3.0), "{f:?}");
        assert!(near(f.hosts_ms, 0.9 / 3.0), "{f:?}");
        assert_eq!(f.loss_recovery_ms, 0.0);
        // The self probe's 168 ms.
        let s = &a.self_probes;
        assert_eq!((s.probes, s.probes_by_packet), (1, 1), "{s:?}");
        let queues = [40.0, 50.0, 2.0, 1.0];
        assert!((0..4).all(|i| near(s.queues_ms[i], queues[i])), "{s:?}");
        assert!(near(s.base_rtt_ms, 30.0), "{s:?}");
        assert!(near(s.client_send_ms, 30.0), "{s:?}");
        assert!(near(s.server_ms, 13.0), "{s:?}");
        assert!(near(s.hosts_ms, 2.0), "{s:?}");
        // The loaded round trip: each queue a share of it no larger than the whole, and the
        // parts adding up to it, but for the client's reading of the answers.
        assert!(
            a.queues.iter().all(|q| (0.0..=1.0).contains(&q.share)),
            "{a:?}"
        );
        let (w_f, w_s) = (168.0 / (58.4 + 168.0), 58.4 / (58.4 + 168.0));
        assert!(near(a.hosts_ms, w_f * 0.3 + w_s * 2.0), "{a:?}");
        assert!(a.line().contains("in `dsl` up FIFO queue"), "{}", a.line());
        // Without the lab's tree of links the hops' order is unknown: mean sojourns.
        let without = attribute(&r, LAB0, &links).unwrap();
        assert_eq!(without.foreign.probes_by_packet, 0);
        assert_eq!(without.self_probes.probes_by_packet, 0);
    }

    #[test]
    fn a_packet_dropped_at_the_second_hop_is_its_senders_loss_recovery() {
        let mut n = TwoHops::default();
        // The SYN crosses the dsl uplink and is dropped entering core's; the client sends it
        // again a second later, and the probe goes on as without the drop.
        assert_eq!(n.send(&UP, FOREIGN_UP, 500, &[20_000]), 25_500);
        let foreign = foreign_across_two_hops(&mut n, 1_000_000);
        let r = report_of(foreign, self_across_two_hops(&mut n));
        let links = n.links();
        let a = attribute_in(&r, LAB0, &links, &two_hop_lab()).unwrap();
        let f = &a.foreign;
        assert_eq!(f.probes_by_packet, 1, "{f:?}");
        let near = |x: f64, want_per_probe: f64| (x - want_per_probe / 3.0).abs() < 1e-6;
        // From the start to the SYN sent again: recovery, not the client's work.
        assert!(near(f.loss_recovery_ms, 1000.5), "{f:?}");
        assert!(near(f.client_send_ms, 1.0 + 1.6), "{f:?}");
        assert!(near(f.server_ms, 0.5 + 1.2 + 1.5), "{f:?}");
        // The dropped SYN's crossing of the dsl uplink is on no chain.
        assert!(near(f.queues_ms[0], 60.0), "{f:?}");
        assert!(near(f.hosts_ms, 0.9), "{f:?}");
    }

    #[test]
    fn a_chain_that_cannot_be_followed_from_hop_to_hop_falls_back_to_the_mean_sojourn() {
        let mut n = TwoHops::default();
        let foreign = foreign_across_two_hops(&mut n, 0);
        let selfp = self_across_two_hops(&mut n);
        // The self probe's packets on the dsl uplink are not those that entered core's.
        for l in &mut n.logs[0] {
            if l.flow.as_deref() == Some("tcp 10.77.1.1:40001 > 10.77.2.1:4043") {
                l.id += 100;
            }
        }
        let r = report_of(foreign, selfp);
        let links = n.links();
        let with = attribute_in(&r, LAB0, &links, &two_hop_lab()).unwrap();
        assert_eq!(with.foreign.probes_by_packet, 1);
        assert_eq!(with.self_probes.probes_by_packet, 0);
        let without = attribute(&r, LAB0, &links).unwrap();
        assert_eq!(with.self_probes, without.self_probes);
    }

    #[test]
    fn a_labs_single_link_each_way_is_taken_apart_as_without_the_lab() {
        let (selfp, up, down) = self_probe_path();
        let r = report_of(probe(0, 60, true, 40000), selfp);
        let links = path(&up, &down);
        let one = lab(&[("path", "client", "server")]);
        let with = attribute_in(&r, LAB0, &links, &one).unwrap();
        assert_eq!(with.self_probes.probes_by_packet, 1);
        assert_eq!(with, attribute(&r, LAB0, &links).unwrap());
    }

    #[test]
    fn probes_without_packets_in_the_logs_give_no_attribution() {
        let r = RpmReport {
            config_url: String::new(),
            protocol: "h2".into(),
            load: crate::algorithm::Load::Both,
            rpm: Some(300.0),
            rpm_confidence: Confidence::High,
            down_bps: 0.0,
            up_bps: 0.0,
            goodput_confidence: Confidence::High,
            flows_down: 1,
            flows_up: 1,
            duration_s: 1.0,
            foreign: summary(300.0, vec![probe(0, 600, true, 40000)]),
            self_probes: summary(300.0, vec![probe(0, 200, false, 40001)]),
            idle: Default::default(),
            failed_probes: 0,
            failed_flows: 0,
            start_mono_ns: LAB0,
            intervals: vec![],
        };
        assert!(attribute(&r, LAB0, &[]).is_none());
    }
}
