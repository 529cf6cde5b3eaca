//! Where a connection's time went: the time budget and the request/response exchanges.
//!
//! [`Timeline`] is fed one [`Utterance`]-or-ACK at a time by [`crate::tcp`] (in capture order,
//! with its time) and attributes every interval between two consecutive packets to exactly
//! one part of a [`TimeBudget`], so that the parts add up to the connection's duration by
//! construction. It keeps a few counters per connection and one row per exchange (capped),
//! never per packet. It does not parse headers and does not name causes: the stories in
//! [`crate::stories`] read what it found.
//!
//! The model: a connection is a conversation. An *utterance* is a packet that occupies
//! sequence space or ends the conversation (SYN, new or retransmitted data, FIN, RST); pure
//! ACKs are not. The time between two utterances is a *gap*:
//!
//! - between utterances of two different sides (a *turn*: the request is complete and the
//!   server answers), the gap at a capture point X is the round trip X <-> speaker plus the
//!   speaker's own time; the round trip is network, the rest the speaker's application
//!   (server or client). The split waits for the end, when the round trips are best known.
//! - between utterances of the same side, a gap shorter than half a round trip is transfer;
//!   a gap during which the other side's ACK moved the speaker's data on is a round trip
//!   waited for (network, up to one round trip; the rest is stalled when the peer's window
//!   had no room for a full segment, transfer when the sender had more to send, so that the
//!   path set the pace, and otherwise the speaker's application); a gap with data
//!   outstanding and no ACK that ends in a retransmission is a timer (retransmission
//!   timeout, stalled); any other gap is transfer when the sender had more to send and the
//!   speaker's application when it had not. "More to send": data still in flight at the
//!   capture point when it spoke again, or a last segment that was full-sized and not
//!   pushed (stacks set PSH at the end of each write).
//! - any time while a side advertises a zero window is stalled.

use wire::{Duration, Instant};

use crate::model::*;

/// Exchanges listed per connection; beyond, they still count in the connection's budget.
const MAX_EXCHANGES: usize = 10_000;

/// Gaps between one side's segments at or below this are transfer even on a path whose round
/// trip is shorter: a token bucket or a link scheduler releases data in bursts a few
/// milliseconds apart (a 16 kB burst at 20 Mbit/s every 6.5 ms), and an application pause
/// shorter than this is not worth a name.
const MIN_TRANSFER_GAP: Duration = Duration::from_millis(10);

/// What [`Timeline::packet`] needs from one packet.
#[derive(Copy, Clone, Debug)]
pub(crate) struct PacketInfo<'a> {
    pub time: Instant,
    /// 0 when sent by `a`, 1 by `b`.
    pub side: usize,
    pub syn: bool,
    pub fin: bool,
    pub rst: bool,
    pub ack: bool,
    /// Carries bytes sent before (or is a repeated SYN or SYN-ACK).
    pub retx: bool,
    /// Payload bytes sent for the first time.
    pub new_bytes: u64,
    /// Carries payload (new or not), a SYN or a FIN: occupies sequence space.
    pub seq_space: bool,
    /// The packet's ACK moved the other side's cumulative ACK forward.
    pub acked_new: bool,
    /// `acked_new`, and after this packet everything the other side sent is acknowledged.
    pub other_all_acked: bool,
    /// The window this packet advertises is zero (None for SYNs, RSTs and packets without ACK).
    pub zero_window: Option<bool>,
    /// The sender had data (or a SYN/FIN) sent and not acknowledged before this packet.
    pub outstanding_before: bool,
    /// Before this packet, the sender's receive window from the peer had no room for another
    /// full-sized segment.
    pub window_full_before: bool,
    /// The payload is a full-sized segment (the peer's MSS less options, or a larger
    /// offloaded super-segment) without PSH: the sender had more to send right after it.
    pub full_sized: bool,
    /// Payload bytes as captured (may be cut by the snaplen).
    pub payload: &'a [u8],
    /// The TCP sequence number, as sent.
    pub seq: u32,
    /// The path's round trip as known so far (the round trips from the capture point to `a`
    /// and to `b`, added), ns, when both are known; only for packets that occupy sequence
    /// space or reset the connection.
    pub rtt_path_ns: Option<u64>,
}

/// A turn's gap waiting for the end to be split into network and the speaker's time.
#[derive(Copy, Clone, Debug)]
struct Turn {
    /// Index into `exchanges` of the exchange the gap belongs to, if any.
    exchange: Option<usize>,
    /// The side that spoke after the gap.
    side: usize,
    gap_ns: u64,
}

/// A period during which one side advertised a zero window.
#[derive(Copy, Clone, Debug, Default)]
pub(crate) struct ZeroWindow {
    pub first: Option<Instant>,
    /// Start of the current period, if the window is zero now.
    pub since: Option<Instant>,
    /// Closed periods.
    pub periods: u64,
    pub total_ns: u64,
    pub longest_ns: u64,
    pub last_end: Option<Instant>,
    /// Packets the other side sent meanwhile (window probes: Linux sends them as bare ACKs
    /// below the window, RFC 9293 §3.8.6.1).
    pub probes: u64,
}

/// Retransmissions of one side that no ACK answered.
#[derive(Clone, Debug, Default)]
pub(crate) struct Unanswered {
    /// First utterance of this side since the other side last said anything.
    pub first_send: Option<Instant>,
    /// Times of this side's retransmissions since then.
    pub retx: Vec<Instant>,
    /// The other side had been heard in this capture when these retransmissions began (it
    /// cannot change within them: any packet from it starts them over).
    pub peer_heard: bool,
    /// The sequence number the retransmissions repeat, while they all repeat one.
    pub retx_seq: Option<u32>,
    /// They repeated more than one sequence number.
    pub mixed: bool,
    /// The first transmission of `retx_seq`, when the capture has it and the other side was
    /// never heard (see `Timeline::unheard_sends`).
    pub original: Option<Instant>,
}

/// New data segments remembered per side while the other side is unheard, to find the first
/// transmission of a segment sent again.
const UNHEARD_SENDS: usize = 64;

/// One connection's timeline (see the module header).
#[derive(Clone, Debug, Default)]
pub(crate) struct Timeline {
    first_time: Option<Instant>,
    last_time: Option<Instant>,
    client: Option<usize>,
    /// Last utterance: time and side.
    last_utter: Option<(Instant, usize)>,
    /// Time since the last utterance, and how much of it with a window at zero.
    pend_ns: u64,
    pend_zw_ns: u64,
    /// An ACK from the side that did not speak last moved its data on during the gap.
    pend_ack: bool,
    zw: [ZeroWindow; 2],
    /// The utterance that ends the gap being resolved waited for the peer's window.
    window_full: bool,
    /// The last utterance was a full-sized segment.
    last_full: bool,
    /// The utterance that ends the gap being resolved came from a sender with more to send
    /// (see `utterance`).
    busy: bool,
    budget: TimeBudget,
    turns: Vec<Turn>,
    exchanges: Vec<Exchange>,
    exchanges_dropped: u64,
    /// The server has sent data since the client's last data (the next client data is a new
    /// exchange).
    server_spoke: bool,
    /// Any data from each side yet.
    spoke: [bool; 2],
    pub(crate) unanswered: [Unanswered; 2],
    /// Any packet seen from each side: silence means nothing from a side the capture never
    /// saw (a capture of one direction only).
    heard: [bool; 2],
    /// While the other side is unheard, the (sequence number, time) of each side's last
    /// [`UNHEARD_SENDS`] new data segments, a ring: a segment sent again is then matched with
    /// its first transmission. Never filled once both sides were heard.
    unheard_sends: [Vec<(u32, Instant)>; 2],
    /// Next slot of each ring in `unheard_sends`, once full.
    unheard_ring_at: [usize; 2],
    /// First SYN from `a`, and RST from `b` if one came before any SYN-ACK.
    pub(crate) syn_at: Option<Instant>,
    /// Every SYN from `a` (the first 16).
    syn_times: Vec<Instant>,
    pub(crate) synack_seen: bool,
    pub(crate) refused_at: Option<Instant>,
    /// The round trips to `a` and `b` as last known (for path_delay's "far above"); set at
    /// the end.
    rtt_last: [Option<Duration>; 2],
}

fn ns(d: Duration) -> u64 {
    d.as_nanos() as u64
}

/// The longest gap between one side's utterances that is transfer whatever happened in it:
/// half the path's round trip, and at least [`MIN_TRANSFER_GAP`].
fn transfer_gap_ns(rtt_path: Option<u64>) -> u64 {
    rtt_path.map_or(ns(MIN_TRANSFER_GAP), |r| (r / 2).max(ns(MIN_TRANSFER_GAP)))
}

/// The path's round trip, `rtt_to[0] + rtt_to[1]`, in nanoseconds, when both are known.
pub(crate) fn rtt_path_ns(rtt_to: [Option<Duration>; 2]) -> Option<u64> {
    rtt_to[0].zip(rtt_to[1]).map(|(x, y)| ns(x + y))
}

impl Timeline {
    /// Feeds one packet (after the connection's own state has been updated with it).
    #[inline(always)]
    pub(crate) fn packet(&mut self, p: &PacketInfo) {
        let now = p.time;
        self.first_time.get_or_insert(now);
        // The interval since the previous packet joins the pending gap.
        if let Some(prev) = self.last_time {
            let dt = now.as_nanos().saturating_sub(prev.as_nanos());
            self.pend_ns += dt;
            if self.zw.iter().any(|z| z.since.is_some()) {
                self.pend_zw_ns += dt;
            }
        }
        self.last_time = Some(now.max(self.last_time.unwrap_or(now)));
        let d = p.side;
        if let Some((_, s)) = self.last_utter {
            if s != d && p.acked_new {
                self.pend_ack = true;
            }
        }
        // Anything from a side means it is alive: its peer's silence is no longer unanswered.
        let u = &mut self.unanswered[1 - d];
        if u.first_send.is_some() || !u.retx.is_empty() {
            *u = Unanswered::default();
        }
        if !self.heard[d] {
            self.heard[d] = true;
            self.unheard_sends[1 - d] = Vec::new();
        }

        if p.syn && !p.ack && d == 0 {
            self.syn_at.get_or_insert(now);
            if self.syn_times.len() < 16 {
                self.syn_times.push(now);
            }
        }
        if p.syn && p.ack && d == 1 {
            self.synack_seen = true;
        }
        if p.acked_new && p.other_all_acked && self.role(d) == Role::Server && !self.server_spoke {
            if let Some(e) = self.exchanges.last_mut() {
                e.request_acked.get_or_insert(now);
            }
        }
        if p.rst && d == 1 && !self.synack_seen && self.syn_at.is_some() {
            self.refused_at.get_or_insert(now);
        }

        if p.seq_space || p.rst {
            self.utterance(p);
        }

        // Windows change after the interval that ended with this packet was counted.
        if let Some(zero) = p.zero_window {
            let z = &mut self.zw[d];
            match (zero, z.since) {
                (true, None) => {
                    z.since = Some(now);
                    z.first.get_or_insert(now);
                }
                (false, Some(s)) => {
                    let len = ns(now - s);
                    z.periods += 1;
                    z.total_ns += len;
                    z.longest_ns = z.longest_ns.max(len);
                    z.last_end = Some(now);
                    z.since = None;
                }
                _ => {}
            }
        }
        if self.zw[1 - d].since.is_some() {
            self.zw[1 - d].probes += 1;
        }
    }

    fn role(&self, side: usize) -> Role {
        match self.client {
            Some(c) if c == side => Role::Client,
            Some(_) => Role::Server,
            None => Role::Unknown,
        }
    }

    // Inlined into its one caller, the per-packet step (a call costs more than its body for
    // most packets, and the compiler's choice varied with unrelated changes).
    #[inline(always)]
    fn utterance(&mut self, p: &PacketInfo) {
        let d = p.side;
        let now = p.time;
        if p.syn && !p.ack && d == 0 {
            self.client.get_or_insert(0);
        }
        if p.new_bytes > 0 && self.client.is_none() {
            self.client = Some(d);
        }
        let data = p.new_bytes > 0 || (p.seq_space && !p.syn && !p.fin);
        // Which exchange this gap belongs to.
        let mut target = None;
        if p.new_bytes > 0 && self.role(d) == Role::Client && (!self.spoke[d] || self.server_spoke)
        {
            self.server_spoke = false;
            if self.exchanges.len() < MAX_EXCHANGES {
                self.exchanges.push(Exchange {
                    start: now,
                    name: http_request_name(p.payload),
                    request_bytes: 0,
                    request_end: now,
                    request_acked: None,
                    response_start: None,
                    response_end: None,
                    response_bytes: 0,
                    budget: TimeBudget::default(),
                });
                target = Some(self.exchanges.len() - 1);
            } else {
                self.exchanges_dropped += 1;
            }
        } else if data && !self.exchanges.is_empty() && self.exchanges_dropped == 0 {
            target = Some(self.exchanges.len() - 1);
        }
        let timer = p.outstanding_before && (p.retx || p.rst);
        let closing = (p.fin || p.rst) && p.new_bytes == 0 && !p.retx;
        self.window_full = p.window_full_before;
        // The speaker had more to send: data still in flight here when it spoke again, or its
        // last segment was full-sized and not pushed.
        self.busy = p.outstanding_before || self.last_full;
        self.resolve_gap(Some(d), timer, closing, target, p.rtt_path_ns);

        if p.new_bytes > 0 {
            self.spoke[d] = true;
            let role = self.role(d);
            if role == Role::Server {
                self.server_spoke = true;
            }
            if let Some(i) = target {
                let e = &mut self.exchanges[i];
                if role == Role::Client {
                    e.request_bytes += p.new_bytes;
                    e.request_end = now;
                } else {
                    e.response_start.get_or_insert(now);
                    e.response_end = Some(now);
                    e.response_bytes += p.new_bytes;
                }
            }
        }
        let heard = self.heard[1 - d];
        let u = &mut self.unanswered[d];
        if !heard && p.new_bytes > 0 && !u.retx.is_empty() {
            // New data after retransmissions, and no peer to hear from: the sender's data was
            // acknowledged out of the capture's sight; what went before was not a dead peer.
            *u = Unanswered::default();
        }
        u.first_send.get_or_insert(now);
        if p.retx {
            u.peer_heard = heard;
            u.retx.push(now);
            if u.retx.len() > 64 {
                u.retx.remove(0);
            }
            match u.retx_seq {
                None if !u.mixed => {
                    u.retx_seq = Some(p.seq);
                    if !heard {
                        u.original = self.unheard_sends[d]
                            .iter()
                            .filter(|s| s.0 == p.seq)
                            .map(|s| s.1)
                            .min();
                    }
                }
                Some(s) if s != p.seq => {
                    u.retx_seq = None;
                    u.mixed = true;
                }
                _ => {}
            }
        } else if !heard && p.new_bytes > 0 {
            let ring = &mut self.unheard_sends[d];
            if ring.len() < UNHEARD_SENDS {
                ring.push((p.seq, now));
            } else {
                ring[self.unheard_ring_at[d] % UNHEARD_SENDS] = (p.seq, now);
            }
            self.unheard_ring_at[d] = self.unheard_ring_at[d].wrapping_add(1);
        }
        self.last_utter = Some((now, d));
        self.last_full = p.full_sized;
    }

    /// Attributes the pending gap, which ended with an utterance by `speaker` (None at the
    /// end of the connection). `timer`: the speaker had data unacknowledged and the gap ended
    /// with a retransmission or a reset (or, at the end, its data was never acknowledged).
    /// `closing`: the gap ended with a bare FIN or RST, so the time before it was the other
    /// side's turn (an answer complete and no next request, or a request never answered).
    /// `rtt_path`: the path's round trip as known now, ns.
    #[inline(always)]
    fn resolve_gap(
        &mut self,
        speaker: Option<usize>,
        timer: bool,
        closing: bool,
        target: Option<usize>,
        rtt_path: Option<u64>,
    ) {
        let zw = self.pend_zw_ns.min(self.pend_ns);
        let rest = self.pend_ns - zw;
        // Most gaps: the same side again, within the transfer gap, no window at zero. The
        // general case below gives the same, one part at a time.
        if let (Some((_, s)), Some(d)) = (self.last_utter, speaker) {
            if s == d && zw == 0 && rest <= transfer_gap_ns(rtt_path) {
                self.budget.transfer_ns += rest;
                if let Some(e) = target.and_then(|i| self.exchanges.get_mut(i)) {
                    e.budget.transfer_ns += rest;
                }
                self.pend_ns = 0;
                self.pend_zw_ns = 0;
                self.pend_ack = false;
                return;
            }
        }
        self.resolve_gap_general(speaker, timer, closing, target, rtt_path);
    }

    /// [`Timeline::resolve_gap`] of any gap (out of line: the common one takes a few
    /// instructions).
    #[inline(never)]
    fn resolve_gap_general(
        &mut self,
        speaker: Option<usize>,
        timer: bool,
        closing: bool,
        target: Option<usize>,
        rtt_path: Option<u64>,
    ) {
        let zw = self.pend_zw_ns.min(self.pend_ns);
        let rest = self.pend_ns - zw;
        let mut add = TimeBudget {
            stalled_ns: zw,
            ..TimeBudget::default()
        };
        match (self.last_utter, speaker) {
            // Before the first utterance: ACKs of something the capture missed.
            (None, _) => add.unattributed_ns += rest,
            (Some((_, s)), Some(d)) if s == d => {
                let small = transfer_gap_ns(rtt_path);
                let owner = self.role(if closing { 1 - d } else { d });
                if rest <= small {
                    add.transfer_ns += rest;
                } else if self.pend_ack || self.window_full {
                    // A round trip waited for; beyond it, a window that stayed (nearly)
                    // shut is the same stall as a zero window, and after a full-sized
                    // segment the sender had more to send: the path's pace (a bottleneck
                    // seen from past it spaces the data out).
                    let net = rest.min(rtt_path.unwrap_or(0));
                    add.network_ns += net;
                    if self.window_full {
                        add.stalled_ns += rest - net;
                    } else if self.busy && !closing {
                        add.transfer_ns += rest - net;
                    } else {
                        owner.add(&mut add, rest - net);
                    }
                } else if timer {
                    add.stalled_ns += rest;
                } else if self.busy && !closing {
                    add.transfer_ns += rest;
                } else {
                    owner.add(&mut add, rest);
                }
            }
            (Some(_), Some(d)) => {
                // A turn: split at the end, when the round trip is best known.
                self.turns.push(Turn {
                    exchange: target,
                    side: d,
                    gap_ns: rest,
                });
            }
            (Some((_, s)), None) => {
                // After the last utterance: its ACK is a round trip, the rest is silence
                // this point cannot explain, or a timer if it was never acknowledged.
                if self.pend_ack {
                    let net = self.rtt_last[1 - s].map_or(0, ns).min(rest);
                    add.network_ns += net;
                    add.unattributed_ns += rest - net;
                } else if timer {
                    add.stalled_ns += rest;
                } else {
                    add.unattributed_ns += rest;
                }
            }
        }
        self.credit(&add, target);
        self.pend_ns = 0;
        self.pend_zw_ns = 0;
        self.pend_ack = false;
    }

    fn credit(&mut self, add: &TimeBudget, target: Option<usize>) {
        add_to(&mut self.budget, add);
        if let Some(e) = target.and_then(|i| self.exchanges.get_mut(i)) {
            add_to(&mut e.budget, add);
        }
    }

    /// Closes the books: the tail after the last utterance and the turns' split. `rtt_to` are
    /// the final round-trip estimates to `a` and `b`; `outstanding[side]` whether a side's
    /// data was still unacknowledged at the end; `at_receiver[side]` whether the capture sat
    /// next to the receiver of that side's data.
    pub(crate) fn finish(
        mut self,
        rtt_to: [Option<Duration>; 2],
        outstanding: [bool; 2],
        at_receiver: [bool; 2],
    ) -> (Story, Evidence) {
        self.rtt_last = rtt_to;
        let last_speaker_outstanding = self.last_utter.is_some_and(|(_, s)| outstanding[s]);
        let rtt_path = rtt_path_ns(rtt_to);
        self.resolve_gap(None, last_speaker_outstanding, false, None, rtt_path);
        // Zero windows still closed at the end count until the last packet.
        let end = self.last_time.unwrap_or_default();
        for z in self.zw.iter_mut() {
            if let Some(s) = z.since {
                let len = ns(end - s);
                z.total_ns += len;
                z.longest_ns = z.longest_ns.max(len);
            }
        }
        let turns = std::mem::take(&mut self.turns);
        let mut server_first_byte = Vec::new();
        let mut client_before_request = Vec::new();
        for t in turns {
            let mut add = TimeBudget::default();
            // When the server ACKed the request on its own before answering, that ACK timed
            // this exchange's round trip (plus at most the server's delayed-ACK hold): a path
            // slower now than at its best is network, not server. Next to the server the ACK
            // leaves at once and its delay is the server's own.
            let round_trip = t.exchange.and_then(|i| {
                let e = &self.exchanges[i];
                let ack = e.request_acked?;
                let use_ack = self.role(t.side) == Role::Server
                    && e.response_start.is_some_and(|r| ack < r)
                    && ack >= e.request_end
                    && !at_receiver[1 - t.side];
                use_ack.then(|| ack - e.request_end)
            });
            let rtt = match (rtt_to[t.side], round_trip) {
                (Some(r), Some(x)) => Some(r.max(x)),
                (r, x) => r.or(x),
            };
            match rtt {
                Some(r) => {
                    let net = ns(r).min(t.gap_ns);
                    add.network_ns = net;
                    self.role(t.side).add(&mut add, t.gap_ns - net);
                }
                None => add.unattributed_ns = t.gap_ns,
            }
            if let Some(i) = t.exchange {
                let e = &self.exchanges[i];
                let role = self.role(t.side);
                if role == Role::Server && e.response_start.is_some() {
                    server_first_byte.push((i, add.server_ns));
                } else if role == Role::Client && i == 0 {
                    client_before_request.push((i, add.client_ns));
                }
            }
            self.credit(&add, t.exchange);
        }
        let first = self.first_time.unwrap_or_default();
        let story = Story {
            client: self
                .client
                .map(|c| if c == 0 { Dir::AtoB } else { Dir::BtoA }),
            budget: self.budget,
            exchanges: self.exchanges,
            exchanges_dropped: self.exchanges_dropped,
        };
        debug_assert_eq!(story.budget.total_ns(), ns(end - first));
        let ev = Evidence {
            zero_window: self.zw,
            unanswered: self.unanswered,
            syn_at: self.syn_at,
            syn_times: self.syn_times,
            synack_seen: self.synack_seen,
            refused_at: self.refused_at,
            server_first_byte,
            client_before_request,
            rtt_last: self.rtt_last,
        };
        (story, ev)
    }
}

/// What the timeline leaves for the stories.
#[derive(Clone, Debug, Default)]
pub(crate) struct Evidence {
    pub zero_window: [ZeroWindow; 2],
    pub unanswered: [Unanswered; 2],
    pub syn_at: Option<Instant>,
    pub syn_times: Vec<Instant>,
    pub synack_seen: bool,
    pub refused_at: Option<Instant>,
    /// Per exchange: the server's time from the complete request to the first byte of its
    /// answer, beyond the round trip, in ns.
    pub server_first_byte: Vec<(usize, u64)>,
    /// The client's time between the handshake and its first request, beyond the round trip.
    pub client_before_request: Vec<(usize, u64)>,
    #[allow(dead_code)]
    pub rtt_last: [Option<Duration>; 2],
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Role {
    Client,
    Server,
    Unknown,
}

impl Role {
    fn add(self, b: &mut TimeBudget, ns: u64) {
        match self {
            Role::Client => b.client_ns += ns,
            Role::Server => b.server_ns += ns,
            Role::Unknown => b.unattributed_ns += ns,
        }
    }
}

fn add_to(b: &mut TimeBudget, x: &TimeBudget) {
    b.network_ns += x.network_ns;
    b.server_ns += x.server_ns;
    b.client_ns += x.client_ns;
    b.transfer_ns += x.transfer_ns;
    b.stalled_ns += x.stalled_ns;
    b.unattributed_ns += x.unattributed_ns;
}

/// "METHOD target" of an HTTP/1.x request line (RFC 9112 §3: method SP request-target SP
/// HTTP-version), when `payload` starts with one; the target is cut at 200 bytes.
pub(crate) fn http_request_name(payload: &[u8]) -> Option<String> {
    const METHODS: [&str; 9] = [
        "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH",
    ];
    let sp = payload.iter().position(|&c| c == b' ')?;
    let method = std::str::from_utf8(&payload[..sp]).ok()?;
    if !METHODS.contains(&method) {
        return None;
    }
    let rest = &payload[sp + 1..];
    let end = rest
        .iter()
        .position(|&c| c == b' ' || c == b'\r' || c == b'\n')
        .unwrap_or(rest.len());
    let target = &rest[..end.min(200)];
    if target.is_empty() || !target.iter().all(|c| c.is_ascii_graphic()) {
        return None;
    }
    // A complete request line ends in " HTTP/1.x"; a cut one is still named.
    let after = &rest[end..];
    if !after.is_empty() && !after.starts_with(b" HTTP/1.") && after.len() >= 8 {
        return None;
    }
    Some(format!("{method} {}", String::from_utf8_lossy(target)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::{self, Tcp};
    use crate::{analyze_bytes, Options};

    proptest::proptest! {
        /// Whatever the packets (any flags, sequence jumps, zero windows, bursts and long
        /// silences), every connection's parts add up to its duration, and each exchange's to
        /// no more than that.
        #[test]
        fn the_budget_adds_up_to_the_duration_of_any_conversation(
            pkts in proptest::collection::vec(
                (proptest::bool::ANY, 0u8..=0xff, 0u32..3000, 0usize..1500, 0u16..4, -5i64..400),
                1..60,
            ),
        ) {
            let c: std::net::SocketAddr = "10.0.0.1:40000".parse().unwrap();
            let s: std::net::SocketAddr = "10.0.0.2:80".parse().unwrap();
            let (mut t, mut seq) = (1_700_000_000_000_000_000i64, [1000u32, 9000u32]);
            let mut out = Vec::new();
            for (from_c, flags, jump, len, win, dt_ms) in pkts {
                t += dt_ms * 1_000_000;
                let i = usize::from(!from_c);
                let (src, dst) = if from_c { (c, s) } else { (s, c) };
                let mut p = Tcp::new(src, dst, seq[i], seq[1 - i], flags);
                p.payload_len = len;
                p.window = win * 1000;
                out.push((t as u64, p.build()));
                seq[i] = seq[i].wrapping_add(jump);
            }
            let a = analyze_bytes("p", &synth::pcap(out), Options::default()).unwrap();
            for c in &a.connections {
                let d = c.duration().as_nanos() as u64;
                proptest::prop_assert_eq!(c.story.budget.total_ns(), d);
                for e in &c.story.exchanges {
                    proptest::prop_assert!(e.budget.total_ns() <= d);
                }
                let _ = crate::text::budget_line(c);
            }
        }
    }

    #[test]
    fn http_request_lines_are_named_by_method_and_target() {
        assert_eq!(
            http_request_name(b"GET /index.html HTTP/1.1\r\nHost: x\r\n\r\n").as_deref(),
            Some("GET /index.html")
        );
        assert_eq!(
            http_request_name(b"POST /a?b=c HTT").as_deref(),
            Some("POST /a?b=c")
        );
        assert_eq!(http_request_name(b"\x16\x03\x01\x02\x00"), None);
        assert_eq!(http_request_name(b"GET  HTTP/1.1"), None);
        assert_eq!(http_request_name(b"FETCH /x HTTP/1.1"), None);
        assert_eq!(http_request_name(b"GET /x SMTP/1.0 and more"), None);
    }
}
