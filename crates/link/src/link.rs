//! One direction of a link: entry (down, loss), queue discipline, transmitter, propagation.
//!
//! Time is virtual and exact: a packet is dequeued when the transmitter becomes free (rate mode)
//! or at its trace opportunity (trace mode), whatever moment the caller happens to call in, so
//! a late event loop does not change what the queue sees. Serialization of `len + overhead`
//! bytes at rate R takes exactly ⌈(len + overhead)·8·10⁹ / R⌉ ns. Packets leave in the order
//! they were transmitted, even if the delay is lowered while they are in flight.
//!
//! The path of a packet, with the impairments of [`Impairments`] where they act:
//!
//! 1. entry: a down link (`down`), a black hole (`blackhole`), the drop filters (`filter`), the
//!    narrow link's MTU (`too_big`, with an ICMP error or IPv4 fragments for the caller to route),
//!    the loss model (`loss`);
//! 2. the queue discipline, then the transmitter: the rate, the trace, and the packets-per-second
//!    ceiling (each packet holds the transmitter for at least 1/N s);
//! 3. the wire: corruption (one bit flipped), ECN bleaching, then the arrival time: delay plus
//!    jitter, kept in order unless the jitter says `reorder`; a packet chosen by `reorder` skips
//!    the delay; a duplicate follows its original, `late_by` later;
//! 4. the far end: slots gather arrivals and let them out in bursts.
//!
//! Each impairment draws from its own seeded random stream, so turning one on does not change
//! the choices of another (the same packets are lost with or without jitter).

use std::collections::VecDeque;

use qdisc::{Qdisc, QdiscEvent};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use wire::{Duration, Ecn, FlowKey, Instant, Packet};

use crate::capacity::{Capacity, TRACE_OPPORTUNITY_BYTES};
use crate::impair::Impairments;
use crate::jitter::{Correlated, Sampler};
use crate::loss::{LossModel, LossState};
use crate::mtu::{self, TooBig};
use crate::overtaking::OutOfLine;
use crate::stats::LinkStats;
use crate::DropCause;
use crate::Jitter;

/// What can be changed on a running link.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkParams {
    pub capacity: Capacity,
    /// One-way propagation delay.
    pub delay: Duration,
    pub loss: LossModel,
    /// Bytes added to each packet's IP length when charging capacity (link-layer framing, as
    /// netem's `rate … packetoverhead`); 0 counts IP bytes only.
    pub overhead_bytes: u32,
    /// A down link drops everything offered to it (cause `down`).
    pub up: bool,
    /// Clear the ECN field of every packet leaving the link (a middlebox that bleaches ECN,
    /// RFC 9000 §13.4.2's reason for ECN validation). The link's own queue still sees it.
    pub bleach_ecn: bool,
    /// A link that is up (nothing tells the hosts otherwise) but drops everything offered
    /// (cause `blackhole`): a Wi-Fi associated to a dead access point.
    pub blackhole: bool,
    /// Jitter, duplication, reordering, corruption, the packet-rate ceiling, slots, drop
    /// filters, a narrow MTU.
    pub impair: Impairments,
}

impl Default for LinkParams {
    fn default() -> Self {
        LinkParams {
            capacity: Capacity::Unlimited,
            delay: Duration::ZERO,
            loss: LossModel::None,
            overhead_bytes: 0,
            up: true,
            bleach_ecn: false,
            blackhole: false,
            impair: Impairments::default(),
        }
    }
}

/// A packet event, as the link log records it.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    pub time: Instant,
    pub kind: EventKind,
    pub id: u64,
    pub bytes: usize,
    pub flow: Option<FlowKey>,
    /// The ECN field after the event (CE for a mark).
    pub ecn: Ecn,
    /// Time spent in the queue, for dequeue and for drops from the queue.
    pub sojourn: Option<Duration>,
    pub cause: Option<DropCause>,
    /// The discipline's class (DualPI2: 1 = L4S queue).
    pub class: u8,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum EventKind {
    Enqueue,
    Dequeue,
    Drop,
    Mark,
    /// A copy of the packet was made on the wire (it arrives `late_by` after the original).
    Duplicate,
    /// A bit of the packet was flipped on the wire.
    Corrupt,
}

impl EventKind {
    pub const fn name(self) -> &'static str {
        match self {
            EventKind::Enqueue => "enqueue",
            EventKind::Dequeue => "dequeue",
            EventKind::Drop => "drop",
            EventKind::Mark => "mark",
            EventKind::Duplicate => "duplicate",
            EventKind::Corrupt => "corrupt",
        }
    }
}

/// Sees every packet event of a link.
pub trait Observer {
    fn event(&mut self, ev: &Event);
}

/// An observer that ignores everything.
impl Observer for () {
    fn event(&mut self, _ev: &Event) {}
}

impl<F: FnMut(&Event)> Observer for F {
    fn event(&mut self, ev: &Event) {
        self(ev)
    }
}

fn event_of(time: Instant, kind: EventKind, p: &Packet, detail: bool) -> Event {
    Event {
        time,
        kind,
        id: p.id,
        bytes: p.len(),
        // Parsing the 5-tuple is the costly part of an event; skipped when nobody reads it.
        flow: if detail { p.flow_key() } else { None },
        ecn: p.ecn(),
        sojourn: None,
        cause: None,
        class: p.class,
    }
}

/// Where a trace-driven transmitter stands.
#[derive(Clone, Debug)]
struct TraceCursor {
    loop_no: u64,
    idx: usize,
}

/// One direction of a link.
pub struct Link {
    params: LinkParams,
    qdisc: Box<dyn Qdisc>,
    rng: ChaCha8Rng,
    loss_state: LossState,
    /// One random stream per impairment (see the module docs).
    rngs: ImpairRngs,
    /// The jitter of `params`, ready to draw from.
    jitter: Option<Sampler>,
    jitter_cor: Correlated,
    reorder_cor: Correlated,
    /// Where the packet-rate ceiling is in its cycle of N packets per second.
    pps_phase: u32,
    /// Rate mode: when the transmitter is free again.
    busy_until: Instant,
    /// Trace mode: when loop 0 of the trace started, and the next opportunity to use.
    trace_epoch: Instant,
    trace_next: Option<TraceCursor>,
    /// Trace mode: the packet being sent across opportunities, with the bytes it still needs.
    in_service: Option<(Packet, u64)>,
    /// Transmitted, propagating, in line: (arrival time at the far end, packet), in order of
    /// arrival, which is the order of transmission.
    in_flight: VecDeque<(Instant, Packet)>,
    /// Transmitted, propagating, out of line: packets sent ahead by `reorder`, late duplicates,
    /// packets under reordering jitter, the slow path (netem keeps an rbtree; here a timing
    /// wheel sized to the link's delay, as arrival times never go back), while the packets in
    /// line stay a plain queue.
    overtaking: OutOfLine,
    /// The latest arrival of a packet that keeps its place in line: a later packet in line never
    /// arrives before it (a duplicate that comes late, or a packet chosen by `reorder`, does).
    in_line_until: Instant,
    /// Slots: arrived packets with the moment their slot lets them out, in order.
    slotted: VecDeque<(Instant, Packet)>,
    slot: SlotState,
    /// Packets the router in front of the link sends back or on: ICMP errors and IPv4
    /// fragments (see [`Link::take_bounced`]).
    bounced: Vec<Packet>,
    /// Empty buffers for duplicates' copies, so that a copy costs a memcpy and not an
    /// allocation: refilled by [`Link::recycle`] and by the link's own drops, only while the
    /// link duplicates, and never beyond [`SPARE_BUFFERS`].
    spare: Vec<Vec<u8>>,
    events: Vec<QdiscEvent>,
    stats: LinkStats,
    /// Whether events carry the flow (see [`Link::set_event_detail`]).
    event_detail: bool,
    /// Whether a super-packet crosses whole ([`Link::carries_whole`]), kept up to date at
    /// every change of parameters or event detail.
    carries_whole: bool,
}

/// Buffers a duplicating link keeps for its copies. A burst of copies beyond this allocates.
pub const SPARE_BUFFERS: usize = 256;

/// Keeps `data` as a spare buffer if the link `wants` spares and has room.
fn keep_spare(spare: &mut Vec<Vec<u8>>, wants: bool, mut data: Vec<u8>) {
    if wants && spare.len() < SPARE_BUFFERS {
        data.clear();
        spare.push(data);
    }
}

/// Independent streams, so that one impairment's draws never shift another's.
struct ImpairRngs {
    jitter: ChaCha8Rng,
    reorder: ChaCha8Rng,
    duplicate: ChaCha8Rng,
    corrupt: ChaCha8Rng,
    slot: ChaCha8Rng,
}

impl ImpairRngs {
    fn new(seed: u64) -> ImpairRngs {
        let stream = |n: u64| {
            let mut r = ChaCha8Rng::seed_from_u64(seed);
            r.set_stream(n);
            r
        };
        ImpairRngs {
            jitter: stream(1),
            reorder: stream(2),
            duplicate: stream(3),
            corrupt: stream(4),
            slot: stream(5),
        }
    }
}

/// How far ahead of its transmission a packet out of line may arrive: the delay, jitter's 4σ
/// cut, a late duplicate's lateness and the slow path's extra, all at once at worst.
fn out_of_line_span(params: &LinkParams) -> Duration {
    let i = &params.impair;
    let jitter = i
        .jitter
        .as_ref()
        .map_or(Duration::ZERO, |j| j.amount.saturating_mul(4));
    let late = i.duplicate.as_ref().map_or(Duration::ZERO, |d| d.late_by);
    let slow = i.slow.as_ref().map_or(Duration::ZERO, |w| w.extra);
    params
        .delay
        .saturating_add(jitter)
        .saturating_add(late)
        .saturating_add(slow)
}

/// netem's slot bookkeeping: when the current slot opens and what it may still let out.
#[derive(Clone, Debug, Default)]
struct SlotState {
    /// `None` until a packet first asks for a slot.
    opens_at: Option<Instant>,
    packets_left: u32,
    bytes_left: u64,
}

impl Link {
    /// A link that starts at `now` (a trace's loop 0 starts then), with a discipline and a
    /// seed for its loss model and impairments.
    pub fn new(now: Instant, params: LinkParams, qdisc: Box<dyn Qdisc>, seed: u64) -> Link {
        let mut overtaking = OutOfLine::default();
        overtaking.fit(out_of_line_span(&params));
        let jitter = params.impair.jitter.as_ref().map(Jitter::sampler);
        Link {
            params,
            qdisc,
            rng: ChaCha8Rng::seed_from_u64(seed),
            loss_state: LossState::Good,
            rngs: ImpairRngs::new(seed),
            jitter,
            jitter_cor: Correlated::default(),
            reorder_cor: Correlated::default(),
            pps_phase: 0,
            busy_until: now,
            trace_epoch: now,
            trace_next: None,
            in_service: None,
            in_flight: VecDeque::new(),
            overtaking,
            in_line_until: Instant::ZERO,
            slotted: VecDeque::new(),
            slot: SlotState::default(),
            bounced: Vec::new(),
            spare: Vec::new(),
            events: Vec::new(),
            stats: LinkStats::default(),
            event_detail: true,
            carries_whole: false,
        }
    }

    /// Whether the link treats each segment of a super-packet ([`wire::gso::Whole`]) exactly as
    /// it treats the others, so that the super-packet can cross it whole, counted as its
    /// segments: no rate and no trace (the segments, offered together, leave together), the
    /// default discipline (a FIFO of packets: an unlimited link dequeues each packet as it is
    /// queued, so a FIFO's packet limit never binds), no loss, no impairment (jitter, reordering,
    /// duplication, corruption, slots, a packet-rate ceiling, filters, a narrow MTU all act on
    /// single packets), no ECN bleaching, up, and no event log (whose lines are per packet).
    /// The delay is the same for every segment. Any other link cuts a super-packet into its
    /// segments at its entry.
    fn refresh_carries_whole(&mut self) {
        let p = &self.params;
        self.carries_whole = !self.event_detail
            && p.capacity == Capacity::Unlimited
            && self.qdisc.kind() == "fifo"
            && p.loss == LossModel::None
            && p.up
            && !p.blackhole
            && !p.bleach_ecn
            && p.impair == Impairments::default();
    }

    /// Whether a super-packet crosses this link whole (see `refresh_carries_whole`).
    pub fn carries_whole(&self) -> bool {
        self.carries_whole
    }

    /// Cuts `packet`, a super-packet, into its segments as the sending host's kernel would
    /// have, each with the super-packet's id; `None` when it cannot be cut (not reached:
    /// [`wire::gso::Whole::of`] checked what the cut checks).
    fn cut(packet: &mut Packet) -> Option<Vec<Packet>> {
        let w = packet.whole?;
        let mut segments = Vec::with_capacity(w.segments as usize);
        let mut scratch = Vec::new();
        wire::gso::segment(&w.hdr, &mut packet.data, &mut scratch, |s| {
            segments.push(Packet {
                id: packet.id,
                ..Packet::new(s.to_vec())
            })
        })
        .ok()?;
        Some(segments)
    }

    /// With `false`, events leave out the flow (`Event::flow` is `None`): for a caller that logs
    /// nothing, so the hot path does not parse every packet's 5-tuple. On by default.
    pub fn set_event_detail(&mut self, detail: bool) {
        self.event_detail = detail;
        self.refresh_carries_whole();
    }

    pub fn params(&self) -> &LinkParams {
        &self.params
    }
    pub fn stats(&self) -> &LinkStats {
        &self.stats
    }
    /// Records how late the caller delivered one of this link's packets (see
    /// [`LinkStats::lateness`]).
    pub fn record_lateness(&mut self, late: Duration) {
        self.stats.record_lateness(late);
    }
    pub fn qdisc(&self) -> &dyn Qdisc {
        self.qdisc.as_ref()
    }

    /// Changes the link's parameters at `now`; what was due before `now` happens under the old
    /// ones. A packet being serialized finishes at its old rate.
    pub fn set_params(&mut self, now: Instant, params: LinkParams, obs: &mut dyn Observer) {
        self.advance(now, obs);
        let trace_changed = match (&self.params.capacity, &params.capacity) {
            (Capacity::Trace(a), Capacity::Trace(b)) => a != b,
            (Capacity::Trace(_), _) | (_, Capacity::Trace(_)) => true,
            _ => false,
        };
        self.overtaking.fit(out_of_line_span(&params));
        self.jitter = params.impair.jitter.as_ref().map(Jitter::sampler);
        self.params = params;
        self.refresh_carries_whole();
        if trace_changed {
            self.trace_epoch = now;
            self.trace_next = None;
            if self.busy_until < now {
                self.busy_until = now;
            }
        }
        self.advance(now, obs);
    }

    /// Offers a packet to the link at `now`. Afterwards, [`Link::take_bounced`] has what the
    /// router in front of a narrow link sent instead of an oversized packet.
    pub fn enqueue(&mut self, now: Instant, mut packet: Packet, obs: &mut dyn Observer) {
        if packet.whole.is_some() && !self.carries_whole {
            if let Some(segments) = Link::cut(&mut packet) {
                for p in segments {
                    self.enqueue(now, p, obs);
                }
                return;
            }
        }
        self.advance(now, obs);
        self.stats.packets_in += packet.segments();
        self.stats.bytes_in += packet.wire_bytes();
        self.stats.first_in.get_or_insert(now);
        let impair = &self.params.impair;
        let entry_drop = if !self.params.up {
            Some(DropCause::Down)
        } else if self.params.blackhole {
            Some(DropCause::Blackhole)
        } else if impair.drop.iter().any(|f| f.matches(&packet.data)) {
            Some(DropCause::Filter)
        } else if impair
            .narrow
            .as_ref()
            .is_some_and(|n| packet.len() > n.mtu_bytes as usize)
        {
            Some(DropCause::TooBig)
        } else if self.params.loss.lose(&mut self.loss_state, &mut self.rng) {
            Some(DropCause::Loss)
        } else {
            None
        };
        if let Some(cause) = entry_drop {
            *self.stats.drops.entry(cause.name()).or_default() += packet.segments();
            obs.event(&Event {
                cause: Some(cause),
                ..event_of(now, EventKind::Drop, &packet, self.event_detail)
            });
            if cause == DropCause::TooBig {
                self.bounce(&packet);
            }
            self.recycle(packet.data);
            return;
        }
        self.admit(now, packet, obs);
        self.advance(now, obs);
    }

    /// What the router in front of a narrow link does instead of forwarding `p`.
    fn bounce(&mut self, p: &Packet) {
        let Some(n) = &self.params.impair.narrow else {
            return;
        };
        match mtu::too_big(&p.data, n.mtu_bytes, n.router_v4, n.router_v6) {
            TooBig::Fragments(frags) => {
                self.stats.fragmented += 1;
                self.bounced
                    .extend(frags.into_iter().map(|data| Packet { data, ..p.clone() }));
            }
            TooBig::Icmp(data) => {
                self.stats.icmp_too_big += 1;
                self.bounced.push(Packet {
                    data,
                    id: p.id,
                    ..Packet::default()
                });
            }
            TooBig::Silent => {}
        }
    }

    /// Gives back the buffer of a packet this link (or any other) delivered and the caller has
    /// finished with: a duplicating link makes its next copies in such buffers instead of
    /// allocating. A link that does not duplicate, or has enough, lets the buffer go.
    pub fn recycle(&mut self, data: Vec<u8>) {
        keep_spare(
            &mut self.spare,
            self.params.impair.duplicate.is_some(),
            data,
        );
    }

    /// Whether [`Link::recycle`] would keep a buffer now.
    pub fn wants_buffers(&self) -> bool {
        self.params.impair.duplicate.is_some() && self.spare.len() < SPARE_BUFFERS
    }

    /// A copy of `p`, in a spare buffer when there is one.
    fn copy_of(&mut self, p: &Packet) -> Packet {
        let data = match self.spare.pop() {
            Some(mut buf) => {
                buf.extend_from_slice(&p.data);
                buf
            }
            None => p.data.clone(),
        };
        Packet {
            data,
            id: p.id,
            enqueued_at: p.enqueued_at,
            class: p.class,
            whole: p.whole,
        }
    }

    /// Moves out the packets the router in front of the link produced at the last
    /// [`Link::enqueue`]: ICMP errors towards the sender, or the fragments of an IPv4 packet
    /// without DF (which fit the link). The caller routes them from the node before the link.
    pub fn take_bounced(&mut self, out: &mut Vec<Packet>) {
        out.append(&mut self.bounced);
    }

    /// Puts a packet that passed the entry checks into the queue.
    fn admit(&mut self, now: Instant, mut packet: Packet, obs: &mut dyn Observer) {
        // An idle transmitter starts on this packet now, not when it last finished.
        if self.idle() && self.busy_until < now {
            self.busy_until = now;
        }
        packet.enqueued_at = now;
        let mut ev = event_of(now, EventKind::Enqueue, &packet, self.event_detail);
        let verdict = self.qdisc.enqueue(now, packet, &mut self.events);
        if verdict == qdisc::Verdict::Queued {
            ev.class = 0;
            obs.event(&ev);
        }
        self.drain_events(now, Some(&ev), obs);
    }

    fn idle(&self) -> bool {
        self.in_service.is_none() && self.qdisc.backlog_packets() == 0
    }

    /// Reports the discipline's events; `current` describes the packet of the call (for marks).
    fn drain_events(&mut self, now: Instant, current: Option<&Event>, obs: &mut dyn Observer) {
        for e in self.events.drain(..) {
            match e {
                QdiscEvent::Dropped { packet, cause } => {
                    let cause = DropCause::Qdisc(cause);
                    *self.stats.drops.entry(cause.name()).or_default() += packet.segments();
                    let sojourn = now - packet.enqueued_at;
                    obs.event(&Event {
                        sojourn: Some(sojourn),
                        cause: Some(cause),
                        ..event_of(now, EventKind::Drop, &packet, self.event_detail)
                    });
                    let duplicating = self.params.impair.duplicate.is_some();
                    keep_spare(&mut self.spare, duplicating, packet.data);
                }
                QdiscEvent::Marked { id, cause } => {
                    self.stats.ce_marks += 1;
                    *self.stats.marks.entry(cause.name()).or_default() += 1;
                    let mut ev = match current {
                        Some(c) if c.id == id => c.clone(),
                        _ => Event {
                            time: now,
                            kind: EventKind::Mark,
                            id,
                            bytes: 0,
                            flow: None,
                            ecn: Ecn::Ce,
                            sojourn: None,
                            cause: None,
                            class: 0,
                        },
                    };
                    self.stats.marks_by_class[usize::from(ev.class.min(1))] += 1;
                    ev.time = now;
                    ev.kind = EventKind::Mark;
                    ev.ecn = Ecn::Ce;
                    ev.cause = Some(DropCause::Qdisc(cause));
                    obs.event(&ev);
                }
            }
        }
    }

    /// Runs the discipline's timers that are due at or before `t`.
    fn run_timers(&mut self, t: Instant) {
        while let Some(due) = self.qdisc.next_timer() {
            if due > t {
                break;
            }
            self.qdisc.on_timer(due);
        }
    }

    /// Dequeues one packet at `t`, reporting it and the discipline's events.
    fn dequeue_at(&mut self, t: Instant, obs: &mut dyn Observer) -> Option<Packet> {
        self.run_timers(t);
        let p = self.qdisc.dequeue(t, &mut self.events);
        let cur = p.as_ref().map(|p| {
            let sojourn_ns = t.as_nanos().saturating_sub(p.enqueued_at.as_nanos());
            // A super-packet's segments each waited as long.
            let segments = p.segments();
            self.stats
                .queue_delay
                .record_nanos_times(sojourn_ns, segments);
            self.stats.queue_delay_sum_ns += sojourn_ns * segments;
            self.stats.queue_delay_by_class[usize::from(p.class.min(1))]
                .record_nanos_times(sojourn_ns, segments);
            Event {
                sojourn: Some(Duration::from_nanos(sojourn_ns)),
                ..event_of(t, EventKind::Dequeue, p, self.event_detail)
            }
        });
        self.drain_events(t, cur.as_ref(), obs);
        if let Some(ev) = &cur {
            obs.event(ev);
        }
        p
    }

    /// Puts a transmitted packet on the wire at `done`: corruption, ECN bleaching, then its
    /// arrival time (delay, jitter, reordering) and any duplicate.
    fn launch(&mut self, done: Instant, mut p: Packet, obs: &mut dyn Observer) {
        let impair = &self.params.impair;
        if impair.corrupt > 0.0
            && !p.data.is_empty()
            && self.rngs.corrupt.gen::<f64>() < impair.corrupt
        {
            // netem's corruption: one random bit of the datagram, headers included.
            let byte = self.rngs.corrupt.gen_range(0..p.data.len());
            let bit = self.rngs.corrupt.gen_range(0..8);
            p.data[byte] ^= 1 << bit;
            self.stats.corrupted += 1;
            obs.event(&event_of(done, EventKind::Corrupt, &p, false));
        }
        if self.params.bleach_ecn && p.ecn() != Ecn::NotEct {
            // Only a readable IP header has an ECN field to clear.
            let _ = p.set_ecn(Ecn::NotEct);
        }
        let impair = &self.params.impair;
        let reordered = match &impair.reorder {
            Some(r) => self.reorder_cor.next(r.correlation, &mut self.rngs.reorder) < r.probability,
            None => false,
        };
        let (at, in_line) = if reordered {
            // netem's reorder: sent at once, ahead of whatever is still propagating.
            self.stats.reordered += 1;
            (done, false)
        } else {
            let mut at = done + self.params.delay;
            let mut keep_order = true;
            if let Some(j) = self.jitter {
                let offset = j.sample_nanos(&mut self.jitter_cor, &mut self.rngs.jitter);
                let ns = at.as_nanos().saturating_add_signed(offset);
                // The variation never makes a packet arrive before it was sent.
                at = Instant::from_nanos(ns).max(done);
                keep_order = !j.reorders;
            }
            if keep_order {
                at = at.max(self.in_line_until);
                self.in_line_until = at;
            }
            (at, keep_order)
        };
        // A slower path for some packets: later by `extra`, out of line so as to hold back
        // nothing (among themselves they keep their order: same extra, ordered times).
        let (at, in_line) = match &impair.slow {
            Some(w) if w.filter.matches(&p.data) => (at + w.extra, false),
            _ => (at, in_line),
        };
        self.stats
            .added_delay
            .record_nanos_times(at.as_nanos().saturating_sub(done.as_nanos()), p.segments());
        self.stats.packets_out += p.segments();
        self.stats.bytes_out += p.wire_bytes();
        let copy = match &impair.duplicate {
            Some(d) if self.rngs.duplicate.gen::<f64>() < d.probability => {
                let (late_by, copy) = (d.late_by, self.copy_of(&p));
                Some((at + late_by, late_by.is_zero() && in_line, copy))
            }
            _ => None,
        };
        self.fly(at, in_line, p);
        if let Some((copy_at, copy_in_line, copy)) = copy {
            self.stats.duplicated += 1;
            self.stats.packets_out += 1;
            self.stats.bytes_out += copy.len() as u64;
            obs.event(&event_of(
                done,
                EventKind::Duplicate,
                &copy,
                self.event_detail,
            ));
            // Right behind its original; a late copy overtakes nothing and holds back nothing.
            self.fly(copy_at, copy_in_line, copy);
        }
    }

    /// Puts a packet on the wire to arrive at `at`: in line (`at` is never earlier than the
    /// last packet in line) or out of line.
    fn fly(&mut self, at: Instant, in_line: bool, packet: Packet) {
        if in_line {
            debug_assert!(self.in_flight.back().is_none_or(|(t, _)| *t <= at));
            self.in_flight.push_back((at, packet));
        } else {
            self.overtaking.push(at, packet);
        }
    }

    /// The earliest arrival on the wire, in line or not.
    fn next_arrival(&self) -> Option<Instant> {
        let a = self.in_flight.front().map(|(t, _)| *t);
        let b = self.overtaking.peek();
        match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Takes the earliest arrival if it is due by `now`.
    fn pop_arrival(&mut self, now: Instant) -> Option<(Instant, Packet)> {
        let a = self.in_flight.front().map(|(t, _)| *t);
        let b = self.overtaking.peek();
        let from_line = match (a, b) {
            (Some(a), Some(b)) => a <= b,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => return None,
        };
        if from_line {
            if a? > now {
                return None;
            }
            self.in_flight.pop_front()
        } else {
            self.overtaking.pop_due(now)
        }
    }

    /// Does everything due up to `now`: timers, dequeues and transmissions.
    fn advance(&mut self, now: Instant, obs: &mut dyn Observer) {
        match self.params.capacity.clone() {
            Capacity::Unlimited | Capacity::Rate(_) => {
                while self.busy_until <= now && self.qdisc.backlog_packets() > 0 {
                    let t = self.busy_until;
                    let Some(p) = self.dequeue_at(t, obs) else {
                        break;
                    };
                    // A super-packet (only on an unlimited link) is its segments' bytes.
                    let bytes =
                        p.wire_bytes() + p.segments() * u64::from(self.params.overhead_bytes);
                    let tx = match &self.params.capacity {
                        Capacity::Rate(r) => r.serialization_time(bytes),
                        _ => Duration::ZERO,
                    };
                    // A packet-rate ceiling is a forwarding engine in front of the wire: it
                    // holds each packet for 1/N s while the wire serializes the one before, so
                    // the slower of the two sets the pace and the packet leaves after `tx`.
                    let hold = match self.params.impair.pps {
                        Some(pps) => {
                            let h = pps.hold(self.pps_phase);
                            self.pps_phase = pps.next_phase(self.pps_phase);
                            tx.max(h)
                        }
                        None => tx,
                    };
                    self.stats.transmitting += hold;
                    self.stats.wire_bytes += bytes;
                    self.busy_until = t + hold;
                    self.launch(t + tx, p, obs);
                }
            }
            Capacity::Trace(trace) => loop {
                if self.idle() {
                    self.trace_next = None;
                    break;
                }
                let cur = match &self.trace_next {
                    Some(c) => c.clone(),
                    None => {
                        let (loop_no, idx) =
                            trace.first_at_or_after(self.trace_epoch, self.busy_until);
                        TraceCursor { loop_no, idx }
                    }
                };
                let t = trace.time_of(self.trace_epoch, cur.loop_no, cur.idx);
                if t > now {
                    self.trace_next = Some(cur);
                    break;
                }
                let mut budget = TRACE_OPPORTUNITY_BYTES;
                while budget > 0 {
                    if self.in_service.is_none() {
                        match self.dequeue_at(t, obs) {
                            Some(p) => {
                                let need = p.len() as u64 + u64::from(self.params.overhead_bytes);
                                self.in_service = Some((p, need.max(1)));
                            }
                            None => break,
                        }
                    }
                    let (_, need) = self.in_service.as_mut().expect("set above");
                    let used = (*need).min(budget);
                    *need -= used;
                    budget -= used;
                    if *need == 0 {
                        let (p, _) = self.in_service.take().expect("set above");
                        self.launch(t, p, obs);
                    }
                }
                self.busy_until = t;
                let next = if cur.idx + 1 < trace.opportunities_ms.len() {
                    TraceCursor {
                        loop_no: cur.loop_no,
                        idx: cur.idx + 1,
                    }
                } else {
                    TraceCursor {
                        loop_no: cur.loop_no + 1,
                        idx: 0,
                    }
                };
                self.trace_next = Some(next);
            },
        }
        self.run_timers(now);
    }

    /// Moves time to `now` and hands over the packets that reached the far end, each with its
    /// arrival time (≤ `now`).
    pub fn poll(&mut self, now: Instant, out: &mut Vec<(Instant, Packet)>, obs: &mut dyn Observer) {
        self.advance(now, obs);
        let slotted = self.params.impair.slot.is_some();
        while let Some((at, p)) = self.pop_arrival(now) {
            if slotted {
                let d = self.slot_for(at, p.len() as u64);
                self.slotted.push_back((d, p));
            } else {
                self.stats.last_out = Some(at);
                out.push((at, p));
            }
        }
        while let Some((d, _)) = self.slotted.front() {
            if *d > now {
                break;
            }
            let (d, p) = self.slotted.pop_front().expect("peeked");
            self.stats.last_out = Some(d);
            out.push((d, p));
        }
    }

    /// When the slot that lets out a packet ready at `ready` opens (netem's `get_slot_next`):
    /// a slot opened before the packet was ready is stale, so a new one is asked for, opening
    /// a random [min, max] later; a slot that has let out its packets or bytes closes, and the
    /// next opens a new draw after it. Packets are taken in arrival order, so the answer does
    /// not depend on when the caller polls.
    fn slot_for(&mut self, ready: Instant, bytes: u64) -> Instant {
        let Some(slot) = &self.params.impair.slot else {
            return ready;
        };
        let fresh = |opens: Instant, st: &mut SlotState| {
            st.opens_at = Some(opens);
            st.packets_left = slot.max_packets.unwrap_or(u32::MAX);
            st.bytes_left = slot.max_bytes.unwrap_or(u64::MAX);
        };
        match self.slot.opens_at {
            Some(t) if t >= ready => {}
            _ => fresh(ready + slot.draw(&mut self.rngs.slot), &mut self.slot),
        }
        let opens = self.slot.opens_at.expect("set above");
        self.stats
            .slot_wait
            .record_nanos(opens.as_nanos().saturating_sub(ready.as_nanos()));
        self.slot.packets_left = self.slot.packets_left.saturating_sub(1);
        self.slot.bytes_left = self.slot.bytes_left.saturating_sub(bytes);
        if self.slot.packets_left == 0 || self.slot.bytes_left == 0 {
            fresh(opens + slot.draw(&mut self.rngs.slot), &mut self.slot);
        }
        opens
    }

    /// The next moment something happens on this link, if anything is pending.
    pub fn next_wakeup(&self) -> Option<Instant> {
        let mut next = self.next_arrival();
        let mut consider = |t: Instant| next = Some(next.map_or(t, |n: Instant| n.min(t)));
        if let Some((d, _)) = self.slotted.front() {
            consider(*d);
        }
        if let Some(t) = self.qdisc.next_timer() {
            consider(t);
        }
        if !self.idle() {
            match &self.params.capacity {
                Capacity::Trace(trace) => {
                    let t = match &self.trace_next {
                        Some(c) => trace.time_of(self.trace_epoch, c.loop_no, c.idx),
                        None => {
                            let (l, i) = trace.first_at_or_after(self.trace_epoch, self.busy_until);
                            trace.time_of(self.trace_epoch, l, i)
                        }
                    };
                    consider(t);
                }
                _ => consider(self.busy_until),
            }
        }
        next
    }

    /// Packets queued plus in service.
    pub fn backlog_packets(&self) -> usize {
        self.qdisc.backlog_packets() + usize::from(self.in_service.is_some())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::capacity::Trace;
    use qdisc::fifo::{Fifo, Limit};
    use std::sync::Arc;
    use wire::Rate;

    /// An IPv4 UDP packet of `len` bytes from 10.0.0.1:`sport` to 10.0.0.2:9, DF clear.
    pub fn udp(id: u64, len: usize, sport: u16) -> Packet {
        let d = wire::build::Ip::v4([10, 0, 0, 1].into(), [10, 0, 0, 2].into())
            .dont_fragment(false)
            .udp_of_len(sport, 9, len);
        Packet {
            id,
            ..Packet::new(d)
        }
    }

    fn fifo(limit: usize) -> Box<dyn Qdisc> {
        Box::new(Fifo::new(Limit::Packets(limit)))
    }

    fn rate_link(mbit: u64, delay_ms: u64) -> Link {
        let params = LinkParams {
            capacity: Capacity::Rate(Rate::from_mbit(mbit)),
            delay: Duration::from_millis(delay_ms),
            ..LinkParams::default()
        };
        Link::new(Instant::ZERO, params, fifo(1000), 1)
    }

    /// Polls at every wakeup until idle; returns (arrival time, id).
    pub fn drain(link: &mut Link, obs: &mut dyn Observer) -> Vec<(Instant, u64)> {
        let mut got = Vec::new();
        let mut out = Vec::new();
        while let Some(t) = link.next_wakeup() {
            link.poll(t, &mut out, obs);
            got.extend(out.drain(..).map(|(at, p)| (at, p.id)));
        }
        got
    }

    /// A TSO super-packet of 10 000 payload bytes (7 segments), and its segments as a cut gives
    /// them.
    fn super_packet(id: u64) -> (Packet, Vec<Packet>) {
        let d = wire::build::Ip::v4([10, 0, 0, 1].into(), [10, 0, 0, 2].into())
            .tcp(&wire::build::Tcp::new(1, 2, 3), &vec![7; 10_000]);
        let (hdr, data) = wire::gso::tso(d, 1448);
        let whole = wire::gso::Whole::of(&hdr, &data).expect("a plain TSO packet");
        let mut p = Packet {
            id,
            whole: Some(whole),
            ..Packet::new(data)
        };
        let segments = Link::cut(&mut p).expect("cut");
        (p, segments)
    }

    /// What a link did with `packets`, each offered at its id less one in ms: (arrival, id,
    /// length, whole) in order, and its counters as printed.
    fn through(
        params: &LinkParams,
        packets: Vec<Packet>,
    ) -> (Vec<(Instant, u64, usize, bool)>, String) {
        let mut l = Link::new(Instant::ZERO, params.clone(), fifo(1000), 1);
        l.set_event_detail(false);
        for p in packets {
            l.enqueue(Instant::from_millis(p.id - 1), p, &mut ());
        }
        let mut got = Vec::new();
        let mut out = Vec::new();
        while let Some(t) = l.next_wakeup() {
            l.poll(t, &mut out, &mut ());
            got.extend(
                out.drain(..)
                    .map(|(at, p)| (at, p.id, p.len(), p.whole.is_some())),
            );
        }
        (got, format!("{:?}", l.stats()))
    }

    #[test]
    fn a_super_packet_crosses_an_unimpaired_unlimited_link_whole_counted_as_its_segments() {
        let delay = LinkParams {
            delay: Duration::from_millis(5),
            ..LinkParams::default()
        };
        let (p, segments) = super_packet(1);
        let (q, more) = super_packet(2);
        let (whole, whole_stats) = through(&delay, vec![p.clone(), q]);
        let (cut, cut_stats) = through(&delay, segments.iter().chain(&more).cloned().collect());
        assert_eq!(
            whole,
            [
                (Instant::from_millis(5), 1, p.len(), true),
                (Instant::from_millis(6), 2, p.len(), true)
            ]
        );
        assert_eq!(cut.len(), 14);
        assert!(cut[..7].iter().all(|c| c.0 == Instant::from_millis(5)));
        assert_eq!(whole_stats, cut_stats, "the same counters as its segments'");
        // With a log of every packet, it is cut.
        let mut l = Link::new(Instant::ZERO, delay.clone(), fifo(1000), 1);
        l.enqueue(Instant::ZERO, p, &mut ());
        assert_eq!(drain(&mut l, &mut ()).len(), 7);
    }

    #[test]
    fn a_link_that_treats_segments_apart_cuts_a_super_packet_at_its_entry() {
        let rate = LinkParams {
            capacity: Capacity::Rate(Rate::from_mbit(100)),
            delay: Duration::from_millis(5),
            ..LinkParams::default()
        };
        let lossy = LinkParams {
            loss: LossModel::Bernoulli { p: 0.3 },
            ..LinkParams::default()
        };
        let jitter = LinkParams {
            impair: Impairments {
                jitter: Some(crate::Jitter::parse("2ms").unwrap()),
                ..Impairments::default()
            },
            delay: Duration::from_millis(5),
            ..LinkParams::default()
        };
        for params in [rate, lossy, jitter] {
            let (p, segments) = super_packet(1);
            let (q, more) = super_packet(2);
            let (whole, whole_stats) = through(&params, vec![p, q]);
            let (cut, cut_stats) = through(&params, segments.into_iter().chain(more).collect());
            assert_eq!(whole, cut, "{params:?}");
            assert!(whole.iter().all(|w| !w.3));
            assert_eq!(whole_stats, cut_stats);
        }
    }

    #[test]
    fn serialization_then_propagation_at_several_rates() {
        for (mbit, per_packet_us) in [(1, 12_000), (10, 1_200), (100, 120), (1000, 12)] {
            let mut l = rate_link(mbit, 10);
            for id in 0..3 {
                l.enqueue(Instant::ZERO, udp(id, 1500, 1), &mut ());
            }
            let got = drain(&mut l, &mut ());
            let want: Vec<_> = (0..3u64)
                .map(|i| (Instant::from_micros((i + 1) * per_packet_us + 10_000), i))
                .collect();
            assert_eq!(got, want, "at {mbit} mbit");
        }
    }

    #[test]
    fn a_late_caller_does_not_change_departure_times() {
        let mut l = rate_link(10, 0);
        for id in 0..3 {
            l.enqueue(Instant::ZERO, udp(id, 1500, 1), &mut ());
        }
        let mut out = Vec::new();
        // Called once, long after everything was due.
        l.poll(Instant::from_secs(1), &mut out, &mut ());
        let times: Vec<_> = out.iter().map(|(t, _)| t.as_nanos() / 1000).collect();
        assert_eq!(times, vec![1200, 2400, 3600]);
    }

    #[test]
    fn an_idle_link_starts_sending_at_arrival() {
        let mut l = rate_link(10, 0);
        l.enqueue(Instant::ZERO, udp(0, 1500, 1), &mut ());
        l.enqueue(Instant::from_millis(50), udp(1, 1500, 1), &mut ());
        let got = drain(&mut l, &mut ());
        assert_eq!(got[1].0, Instant::from_micros(51_200));
    }

    #[test]
    fn overhead_is_charged_per_packet() {
        let params = LinkParams {
            capacity: Capacity::Rate(Rate::from_mbit(10)),
            overhead_bytes: 100,
            ..LinkParams::default()
        };
        let mut l = Link::new(Instant::ZERO, params, fifo(10), 1);
        l.enqueue(Instant::ZERO, udp(0, 1400, 1), &mut ());
        assert_eq!(drain(&mut l, &mut ())[0].0, Instant::from_micros(1200));
    }

    #[test]
    fn fifo_overflow_is_logged_as_overlimit_with_the_packet() {
        let params = LinkParams {
            capacity: Capacity::Rate(Rate::from_mbit(1)),
            ..LinkParams::default()
        };
        let mut l = Link::new(Instant::ZERO, params, fifo(2), 1);
        let mut log = Vec::new();
        let mut obs = |e: &Event| log.push((e.kind, e.id, e.cause.map(|c| c.name())));
        // The first packet goes straight into service; two more fill the queue; the fourth drops.
        for id in 0..4 {
            l.enqueue(Instant::ZERO, udp(id, 1000, 1), &mut obs);
        }
        assert!(
            log.contains(&(EventKind::Drop, 3, Some("overlimit"))),
            "{log:?}"
        );
        assert_eq!(l.stats().drops.get("overlimit"), Some(&1));
        assert_eq!(drain(&mut l, &mut ()).len(), 3);
    }

    #[test]
    fn sojourn_time_is_measured_at_dequeue() {
        let mut l = rate_link(10, 0);
        let mut sojourns = Vec::new();
        let mut obs = |e: &Event| {
            if e.kind == EventKind::Dequeue {
                sojourns.push(e.sojourn.unwrap().as_micros());
            }
        };
        for id in 0..3 {
            l.enqueue(Instant::ZERO, udp(id, 1500, 1), &mut obs);
        }
        drain(&mut l, &mut obs);
        assert_eq!(sojourns, vec![0, 1200, 2400]);
        let max_ms = l.stats().queue_delay.percentiles().max_ms;
        assert!((max_ms - 2.4).abs() < 0.005, "{max_ms}");
    }

    #[test]
    fn a_down_link_drops_everything_offered() {
        let mut l = rate_link(10, 0);
        let mut p = l.params().clone();
        p.up = false;
        l.set_params(Instant::ZERO, p.clone(), &mut ());
        l.enqueue(Instant::ZERO, udp(0, 100, 1), &mut ());
        p.up = true;
        l.set_params(Instant::from_millis(1), p, &mut ());
        l.enqueue(Instant::from_millis(1), udp(1, 100, 1), &mut ());
        assert_eq!(
            drain(&mut l, &mut ())
                .iter()
                .map(|x| x.1)
                .collect::<Vec<_>>(),
            vec![1]
        );
        assert_eq!(l.stats().drops.get("down"), Some(&1));
    }

    #[test]
    fn a_bleaching_link_clears_ecn_on_the_way_out_with_a_valid_checksum() {
        let params = LinkParams {
            bleach_ecn: true,
            ..LinkParams::default()
        };
        let mut l = Link::new(Instant::ZERO, params, fifo(10), 1);
        let mut p = udp(0, 100, 1);
        p.set_ecn(Ecn::Ect1).unwrap();
        let mut seen = Vec::new();
        l.enqueue(Instant::ZERO, p, &mut |e: &Event| {
            seen.push((e.kind, e.ecn))
        });
        assert_eq!(
            seen,
            vec![
                (EventKind::Enqueue, Ecn::Ect1),
                (EventKind::Dequeue, Ecn::Ect1)
            ]
        );
        let mut out = Vec::new();
        l.poll(Instant::ZERO, &mut out, &mut ());
        assert_eq!(out[0].1.ecn(), Ecn::NotEct);
        assert_eq!(wire::checksum::checksum(&out[0].1.data[..20], 0), 0);
    }

    #[test]
    fn events_carry_the_flow_unless_detail_is_switched_off() {
        let mut flows = Vec::new();
        let mut l = rate_link(10, 0);
        l.enqueue(Instant::ZERO, udp(0, 100, 7), &mut |e: &Event| {
            flows.push(e.flow.map(|f| f.src_port))
        });
        l.set_event_detail(false);
        l.enqueue(Instant::ZERO, udp(1, 100, 7), &mut |e: &Event| {
            flows.push(e.flow.map(|f| f.src_port))
        });
        assert_eq!(flows, vec![Some(7), Some(7), None]);
        assert_eq!(drain(&mut l, &mut ()).len(), 2);
    }

    #[test]
    fn lowering_the_delay_never_reorders() {
        let mut l = rate_link(1000, 100);
        l.enqueue(Instant::ZERO, udp(0, 100, 1), &mut ());
        let mut p = l.params().clone();
        p.delay = Duration::from_millis(1);
        l.set_params(Instant::from_millis(1), p, &mut ());
        l.enqueue(Instant::from_millis(1), udp(1, 100, 1), &mut ());
        let got = drain(&mut l, &mut ());
        assert_eq!(got.iter().map(|x| x.1).collect::<Vec<_>>(), vec![0, 1]);
        assert!(got[1].0 >= got[0].0);
    }

    fn trace_link(text: &str) -> Link {
        let t = Arc::new(Trace::parse("t", text).unwrap());
        let params = LinkParams {
            capacity: Capacity::Trace(t),
            ..LinkParams::default()
        };
        Link::new(Instant::ZERO, params, fifo(100), 1)
    }

    #[test]
    fn trace_delivers_on_the_millisecond_grid_and_loops() {
        let mut l = trace_link("1\n2\n4\n");
        for id in 0..5 {
            l.enqueue(Instant::ZERO, udp(id, 1500, 1), &mut ());
        }
        let got: Vec<_> = drain(&mut l, &mut ())
            .iter()
            .map(|(t, _)| t.as_nanos() / 1_000_000)
            .collect();
        // Loop 0: 1, 2, 4 ms; loop 1 shifted by the 4 ms period: 5, 6 ms.
        assert_eq!(got, vec![1, 2, 4, 5, 6]);
    }

    #[test]
    fn trace_opportunities_are_shared_by_small_packets_and_lost_when_idle() {
        let mut l = trace_link("1\n2\n3\n");
        // Three 500-byte packets fit in one 1500-byte opportunity.
        for id in 0..3 {
            l.enqueue(Instant::ZERO, udp(id, 500, 1), &mut ());
        }
        let got = drain(&mut l, &mut ());
        assert!(
            got.iter().all(|(t, _)| *t == Instant::from_millis(1)),
            "{got:?}"
        );
        // Arriving at 1.5 ms, a packet waits for the 2 ms opportunity: the 1 ms grid.
        l.enqueue(Instant::from_micros(1500), udp(9, 100, 1), &mut ());
        assert_eq!(drain(&mut l, &mut ()), vec![(Instant::from_millis(2), 9)]);
        // Idle through 3 ms and the next loop's 4 ms: those opportunities are gone.
        l.enqueue(Instant::from_micros(4500), udp(10, 100, 1), &mut ());
        assert_eq!(drain(&mut l, &mut ()), vec![(Instant::from_millis(5), 10)]);
    }

    #[test]
    fn a_packet_bigger_than_an_opportunity_spans_two() {
        let mut l = trace_link("1\n2\n3\n");
        l.enqueue(Instant::ZERO, udp(0, 2000, 1), &mut ());
        l.enqueue(Instant::ZERO, udp(1, 1000, 1), &mut ());
        // Packet 0 takes all of 1 ms and 500 B of 2 ms; packet 1 the remaining 1000 B of 2 ms.
        assert_eq!(
            drain(&mut l, &mut ()),
            vec![(Instant::from_millis(2), 0), (Instant::from_millis(2), 1)]
        );
    }

    #[test]
    fn loss_on_entry_is_counted_with_its_cause() {
        let params = LinkParams {
            loss: LossModel::Bernoulli { p: 0.05 },
            ..LinkParams::default()
        };
        let mut l = Link::new(Instant::ZERO, params, fifo(100_000), 1);
        for id in 0..20_000 {
            l.enqueue(Instant::from_micros(id), udp(id, 100, 1), &mut ());
        }
        let lost = *l.stats().drops.get("loss").unwrap() as f64 / 20_000.0;
        assert!((lost - 0.05).abs() < 0.006, "{lost}");
        assert_eq!(
            drain(&mut l, &mut ()).len() as u64 + l.stats().drops["loss"],
            20_000
        );
    }

    fn impaired(delay_ms: u64, impair: Impairments) -> Link {
        let params = LinkParams {
            delay: Duration::from_millis(delay_ms),
            impair,
            ..LinkParams::default()
        };
        Link::new(Instant::ZERO, params, fifo(1_000_000), 1)
    }

    /// Sends `n` packets, one every `gap_us`, and returns (arrival, id) of everything delivered.
    fn stream(l: &mut Link, n: u64, gap_us: u64, len: usize) -> Vec<(Instant, u64)> {
        let mut got = Vec::new();
        let mut out = Vec::new();
        for id in 0..n {
            let t = Instant::from_micros(id * gap_us);
            l.poll(t, &mut out, &mut ());
            l.enqueue(t, udp(id, len, 1), &mut ());
        }
        got.extend(out.drain(..).map(|(at, p)| (at, p.id)));
        got.extend(drain(l, &mut ()));
        got
    }

    fn inversions(got: &[(Instant, u64)]) -> usize {
        got.windows(2).filter(|w| w[1].1 < w[0].1).count()
    }

    fn jitter(spec: &str) -> Impairments {
        Impairments {
            jitter: Some(crate::Jitter::parse(spec).unwrap()),
            ..Impairments::default()
        }
    }

    #[test]
    fn jitter_spreads_the_delay_but_keeps_order_by_default() {
        // As `ping -i 0.01`: a packet every 10 ms, 20 ms ± 5 ms.
        let mut l = impaired(20, jitter("5ms normal"));
        let got = stream(&mut l, 10_000, 10_000, 100);
        assert_eq!(got.len(), 10_000);
        assert_eq!(inversions(&got), 0, "a real link delivers in order");
        let delays: Vec<u64> = got
            .iter()
            .map(|(t, id)| (t.as_nanos() - id * 10_000_000) / 1000)
            .collect();
        let (lo, hi) = (delays.iter().min().unwrap(), delays.iter().max().unwrap());
        // 20 ± 4σ = 0..40 ms; with σ = 5 ms and 10 000 packets the extremes reach well past ±2σ.
        assert!(*lo < 12_000 && *hi > 28_000, "{lo} {hi}");
        let p = l.stats().added_delay.percentiles();
        assert!((p.p50_ms - 20.0).abs() < 1.5, "{p:?}");
    }

    #[test]
    fn jitter_with_reorder_lets_packets_overtake_as_netem_does() {
        let mut l = impaired(20, jitter("5ms normal reorder"));
        let got = stream(&mut l, 10_000, 1_000, 100);
        assert_eq!(got.len(), 10_000);
        assert!(inversions(&got) > 1_000, "{}", inversions(&got));
        // Without order-keeping the added delay is the distribution itself: median 20 ms.
        let p = l.stats().added_delay.percentiles();
        assert!((p.p50_ms - 20.0).abs() < 0.3, "{p:?}");
    }

    #[test]
    fn duplicates_come_in_their_proportion_and_a_late_copy_comes_late() {
        let imp = Impairments {
            duplicate: Some(crate::Duplicate::parse("10% 50ms").unwrap()),
            ..Impairments::default()
        };
        let mut l = impaired(10, imp);
        let mut kinds = Vec::new();
        let mut out = Vec::new();
        for id in 0..100_000u64 {
            let t = Instant::from_micros(id * 10);
            l.enqueue(t, udp(id, 100, 1), &mut |e: &Event| {
                if e.kind == EventKind::Duplicate {
                    kinds.push(e.id)
                }
            });
            l.poll(t, &mut out, &mut ());
        }
        let mut got: Vec<(Instant, u64)> = out.drain(..).map(|(t, p)| (t, p.id)).collect();
        got.extend(drain(&mut l, &mut ()));
        let dups = l.stats().duplicated;
        assert_eq!(dups as usize, kinds.len());
        assert_eq!(got.len() as u64, 100_000 + dups);
        let frac = dups as f64 / 100_000.0;
        assert!((frac - 0.10).abs() < 0.005, "{frac}");
        // Each copy arrives 50 ms after its original: 10 µs·id + 10 ms + 50 ms.
        let mut seen = std::collections::HashMap::new();
        for (t, id) in &got {
            seen.entry(*id).or_insert_with(Vec::new).push(*t);
        }
        for id in &kinds {
            let ts = &seen[id];
            assert_eq!(ts.len(), 2);
            assert_eq!(ts[1] - ts[0], Duration::from_millis(50));
            assert_eq!(ts[0], Instant::from_micros(id * 10 + 10_000));
        }
        // The copies never held back the packets behind their originals.
        let originals: Vec<_> = (0..100_000u64).map(|id| seen[&id][0]).collect();
        assert!(originals.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn a_duplicating_link_makes_its_copies_in_recycled_buffers() {
        let imp = Impairments {
            duplicate: Some(crate::Duplicate::parse("100%").unwrap()),
            ..Impairments::default()
        };
        let mut l = impaired(10, imp);
        let spare: Vec<Vec<u8>> = (0..4).map(|_| Vec::with_capacity(2048)).collect();
        let places: Vec<*const u8> = spare.iter().map(|b| b.as_ptr()).collect();
        for b in spare {
            l.recycle(b);
        }
        let mut out = Vec::new();
        for id in 0..6 {
            l.enqueue(
                Instant::from_micros(id),
                udp(id, 1000 + id as usize, 1),
                &mut (),
            );
        }
        l.poll(Instant::from_millis(20), &mut out, &mut ());
        assert_eq!(out.len(), 12);
        for pair in out.chunks(2) {
            let (original, copy) = (&pair[0].1, &pair[1].1);
            assert_eq!((copy.id, &copy.data), (original.id, &original.data));
        }
        // The first four copies are made in the four spare buffers, the last two in new
        // allocations once the spares have run out.
        let copies: Vec<*const u8> = out
            .iter()
            .skip(1)
            .step_by(2)
            .map(|(_, p)| p.data.as_ptr())
            .collect();
        let mut from_spares: Vec<_> = copies[..4].to_vec();
        let mut expected = places.clone();
        from_spares.sort();
        expected.sort();
        assert_eq!(from_spares, expected);
        assert!(copies[4..].iter().all(|c| !places.contains(c)));
        // A link that does not duplicate keeps nothing.
        let mut plain = impaired(10, Impairments::default());
        plain.recycle(Vec::with_capacity(2048));
        assert!(plain.spare.is_empty());
    }

    #[test]
    fn reorder_sends_its_fraction_ahead_without_the_delay() {
        let imp = Impairments {
            reorder: Some(crate::Reorder::parse("25%").unwrap()),
            ..Impairments::default()
        };
        let mut l = impaired(10, imp);
        let got = stream(&mut l, 40_000, 1_000, 100);
        let frac = l.stats().reordered as f64 / 40_000.0;
        assert!((frac - 0.25).abs() < 0.01, "{frac}");
        let immediate = got
            .iter()
            .filter(|(t, id)| t.as_nanos() == id * 1_000_000)
            .count();
        assert_eq!(immediate as u64, l.stats().reordered);
        assert!(inversions(&got) > 5_000);
    }

    #[test]
    fn a_packet_rate_ceiling_is_exact_over_a_second_whatever_the_sizes() {
        use rand::Rng;
        let mut sizes = ChaCha8Rng::seed_from_u64(5);
        for capacity in [Capacity::Unlimited, Capacity::Rate(Rate::from_mbit(1000))] {
            let params = LinkParams {
                capacity,
                impair: Impairments {
                    pps: Some(crate::PacketRate::parse("1000").unwrap()),
                    ..Impairments::default()
                },
                ..LinkParams::default()
            };
            let mut l = Link::new(Instant::ZERO, params, fifo(10_000), 1);
            for id in 0..3000 {
                l.enqueue(
                    Instant::ZERO,
                    udp(id, sizes.gen_range(40..9000), 1),
                    &mut (),
                );
            }
            let got = drain(&mut l, &mut ());
            let in_first_second = got
                .iter()
                .filter(|(t, _)| *t < Instant::from_secs(1))
                .count();
            assert_eq!(in_first_second, 1000);
            let in_two = got
                .iter()
                .filter(|(t, _)| *t < Instant::from_secs(2))
                .count();
            assert_eq!(in_two, 2000);
        }
    }

    #[test]
    fn with_both_a_rate_and_a_packet_rate_the_slower_sets_the_pace() {
        // 12 Mbit/s: a 1500-byte packet takes 1 ms, a 9000-byte one 6 ms; the ceiling is 2 ms.
        for (len, per_ms) in [(100usize, 2u64), (1500, 2), (9000, 6)] {
            let params = LinkParams {
                capacity: Capacity::Rate(Rate::from_mbit(12)),
                impair: Impairments {
                    pps: Some(crate::PacketRate::parse("500").unwrap()),
                    ..Impairments::default()
                },
                ..LinkParams::default()
            };
            let mut l = Link::new(Instant::ZERO, params, fifo(100), 1);
            for id in 0..10 {
                l.enqueue(Instant::ZERO, udp(id, len, 1), &mut ());
            }
            let got = drain(&mut l, &mut ());
            let gaps: Vec<u64> = got
                .windows(2)
                .map(|w| (w[1].0 - w[0].0).as_nanos() as u64 / 1000)
                .collect();
            assert!(gaps.iter().all(|g| *g == per_ms * 1000), "{len}: {gaps:?}");
        }
    }

    #[test]
    fn slots_let_packets_out_in_bursts_at_slot_boundaries() {
        let imp = Impairments {
            slot: Some(crate::Slot::parse("10ms").unwrap()),
            ..Impairments::default()
        };
        let mut l = impaired(0, imp);
        let got = stream(&mut l, 100, 1_000, 100);
        assert_eq!(got.len(), 100);
        assert_eq!(inversions(&got), 0);
        // Packet 0 asks for a slot at 0 ms: it opens at 10 ms and takes packets 0..=10 (ready by
        // then); packet 11 asks at 11 ms for the slot at 21 ms, and so on.
        let mut bursts: Vec<(u64, usize)> = Vec::new();
        for (t, _) in &got {
            let ms = t.as_nanos() / 1_000_000;
            match bursts.last_mut() {
                Some((m, n)) if *m == ms => *n += 1,
                _ => bursts.push((ms, 1)),
            }
        }
        assert_eq!(&bursts[..3], &[(10, 11), (21, 11), (32, 11)]);
        // A packet limit splits a slot: the next opens a slot time after the one that closed.
        let imp = Impairments {
            slot: Some(crate::Slot::parse("10ms packets 4").unwrap()),
            ..Impairments::default()
        };
        let mut l = impaired(0, imp);
        let mut l_out = Vec::new();
        for id in 0..8 {
            l.enqueue(Instant::ZERO, udp(id, 100, 1), &mut ());
        }
        l.poll(Instant::ZERO, &mut l_out, &mut ());
        let got = drain(&mut l, &mut ());
        let ms: Vec<u64> = got.iter().map(|(t, _)| t.as_nanos() / 1_000_000).collect();
        assert_eq!(ms, [10, 10, 10, 10, 20, 20, 20, 20]);
    }

    #[test]
    fn corruption_flips_exactly_one_bit_of_a_chosen_packet() {
        let imp = Impairments {
            corrupt: 0.2,
            ..Impairments::default()
        };
        let mut l = impaired(0, imp);
        let mut out = Vec::new();
        let mut corrupt_events = 0;
        for id in 0..20_000 {
            l.enqueue(Instant::ZERO, udp(id, 200, 1), &mut |e: &Event| {
                corrupt_events += usize::from(e.kind == EventKind::Corrupt)
            });
        }
        l.poll(Instant::ZERO, &mut out, &mut ());
        let mut flipped = 0;
        for (_, p) in &out {
            let clean = udp(p.id, 200, 1);
            let bits: u32 = p
                .data
                .iter()
                .zip(&clean.data)
                .map(|(a, b)| (a ^ b).count_ones())
                .sum();
            assert!(bits <= 1);
            flipped += bits as u64;
        }
        assert_eq!(flipped, l.stats().corrupted);
        assert_eq!(corrupt_events as u64, flipped);
        let frac = flipped as f64 / 20_000.0;
        assert!((frac - 0.2).abs() < 0.01, "{frac}");
    }

    #[test]
    fn filters_and_a_black_hole_drop_with_their_own_causes() {
        let imp = Impairments {
            drop: vec![crate::Filter::parse("udp port 443").unwrap()],
            ..Impairments::default()
        };
        let mut l = impaired(0, imp);
        let mut causes = Vec::new();
        for (id, port) in [(0, 443u16), (1, 53), (2, 443)] {
            l.enqueue(Instant::ZERO, udp(id, 100, port), &mut |e: &Event| {
                causes.extend(e.cause.map(|c| c.name()))
            });
        }
        assert_eq!(causes, ["filter", "filter"]);
        assert_eq!(
            drain(&mut l, &mut ())
                .iter()
                .map(|x| x.1)
                .collect::<Vec<_>>(),
            [1]
        );
        let mut p = l.params().clone();
        p.blackhole = true;
        l.set_params(Instant::ZERO, p, &mut ());
        l.enqueue(Instant::ZERO, udp(3, 100, 53), &mut ());
        assert!(drain(&mut l, &mut ()).is_empty());
        assert_eq!(l.stats().drops.get("blackhole"), Some(&1));
        assert_eq!(l.stats().drops.get("filter"), Some(&2));
    }

    #[test]
    fn slow_packets_arrive_later_without_holding_back_the_rest() {
        let imp = Impairments {
            slow: Some(crate::Slow::parse("udp port 443 50ms").unwrap()),
            ..Impairments::default()
        };
        let mut l = impaired(10, imp);
        for (id, port) in [(0, 443u16), (1, 53)] {
            l.enqueue(Instant::ZERO, udp(id, 100, port), &mut ());
        }
        let got = drain(&mut l, &mut ());
        let at = |id: u64| got.iter().find(|x| x.1 == id).unwrap().0;
        assert!(at(1) < Instant::from_millis(11), "{got:?}");
        assert!(at(0) >= Instant::from_millis(60), "{got:?}");
    }

    #[test]
    fn a_narrow_link_refuses_big_packets_and_hands_back_the_routers_answer() {
        let imp = Impairments {
            narrow: Some(crate::NarrowLink {
                mtu_bytes: 1400,
                router_v4: "10.9.0.1".parse().unwrap(),
                router_v6: "fd00::9:1".parse().unwrap(),
            }),
            ..Impairments::default()
        };
        let mut l = impaired(0, imp);
        let mut big = udp(0, 1500, 1);
        big.data[6] = 0x40; // DF
        l.enqueue(Instant::ZERO, big, &mut ());
        l.enqueue(Instant::ZERO, udp(1, 1400, 1), &mut ());
        let mut bounced = Vec::new();
        l.take_bounced(&mut bounced);
        assert_eq!(bounced.len(), 1);
        let h = wire::packet::parse(&bounced[0].data).unwrap();
        assert_eq!(h.ip.src.to_string(), "10.9.0.1");
        assert_eq!(l.stats().drops.get("too_big"), Some(&1));
        assert_eq!(
            drain(&mut l, &mut ())
                .iter()
                .map(|x| x.1)
                .collect::<Vec<_>>(),
            [1]
        );
    }

    #[test]
    fn turning_on_an_impairment_does_not_change_which_packets_are_lost() {
        let lost = |imp: Impairments| {
            let params = LinkParams {
                loss: LossModel::Bernoulli { p: 0.1 },
                delay: Duration::from_millis(5),
                impair: imp,
                ..LinkParams::default()
            };
            let mut l = Link::new(Instant::ZERO, params, fifo(10_000), 9);
            let mut ids = Vec::new();
            for id in 0..2000 {
                l.enqueue(
                    Instant::from_micros(id * 100),
                    udp(id, 100, 1),
                    &mut |e: &Event| {
                        if e.kind == EventKind::Drop {
                            ids.push(e.id)
                        }
                    },
                );
            }
            ids
        };
        let plain = lost(Impairments::default());
        let noisy = lost(Impairments {
            corrupt: 0.5,
            duplicate: Some(crate::Duplicate::parse("30%").unwrap()),
            ..jitter("2ms pareto 25%")
        });
        assert!(!plain.is_empty());
        assert_eq!(plain, noisy);
    }
}
