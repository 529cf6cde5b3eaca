//! One direction of a link: entry (down, loss), queue discipline, transmitter, propagation.
//!
//! Time is virtual and exact: a packet is dequeued when the transmitter becomes free (rate mode)
//! or at its trace opportunity (trace mode), whatever moment the caller happens to call in, so
//! a late event loop does not change what the queue sees. Serialization of `len + overhead`
//! bytes at rate R takes exactly ⌈(len + overhead)·8·10⁹ / R⌉ ns. Packets leave in the order
//! they were transmitted, even if the delay is lowered while they are in flight.

use std::collections::VecDeque;

use qdisc::{Qdisc, QdiscEvent};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use wire::{Duration, Ecn, FlowKey, Instant, Packet};

use crate::capacity::{Capacity, TRACE_OPPORTUNITY_BYTES};
use crate::loss::{LossModel, LossState};
use crate::stats::LinkStats;
use crate::DropCause;

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
}

impl EventKind {
    pub const fn name(self) -> &'static str {
        match self {
            EventKind::Enqueue => "enqueue",
            EventKind::Dequeue => "dequeue",
            EventKind::Drop => "drop",
            EventKind::Mark => "mark",
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
    /// Rate mode: when the transmitter is free again.
    busy_until: Instant,
    /// Trace mode: when loop 0 of the trace started, and the next opportunity to use.
    trace_epoch: Instant,
    trace_next: Option<TraceCursor>,
    /// Trace mode: the packet being sent across opportunities, with the bytes it still needs.
    in_service: Option<(Packet, u64)>,
    /// Transmitted, propagating: (arrival time at the far end, packet), in order.
    in_flight: VecDeque<(Instant, Packet)>,
    events: Vec<QdiscEvent>,
    stats: LinkStats,
    /// Whether events carry the flow (see [`Link::set_event_detail`]).
    event_detail: bool,
}

impl Link {
    /// A link that starts at `now` (a trace's loop 0 starts then), with a discipline and a
    /// seed for its loss model.
    pub fn new(now: Instant, params: LinkParams, qdisc: Box<dyn Qdisc>, seed: u64) -> Link {
        Link {
            params,
            qdisc,
            rng: ChaCha8Rng::seed_from_u64(seed),
            loss_state: LossState::Good,
            busy_until: now,
            trace_epoch: now,
            trace_next: None,
            in_service: None,
            in_flight: VecDeque::new(),
            events: Vec::new(),
            stats: LinkStats::default(),
            event_detail: true,
        }
    }

    /// With `false`, events leave out the flow (`Event::flow` is `None`): for a caller that logs
    /// nothing, so the hot path does not parse every packet's 5-tuple. On by default.
    pub fn set_event_detail(&mut self, detail: bool) {
        self.event_detail = detail;
    }

    pub fn params(&self) -> &LinkParams {
        &self.params
    }
    pub fn stats(&self) -> &LinkStats {
        &self.stats
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
        self.params = params;
        if trace_changed {
            self.trace_epoch = now;
            self.trace_next = None;
            if self.busy_until < now {
                self.busy_until = now;
            }
        }
        self.advance(now, obs);
    }

    /// Offers a packet to the link at `now`.
    pub fn enqueue(&mut self, now: Instant, mut packet: Packet, obs: &mut dyn Observer) {
        self.advance(now, obs);
        self.stats.packets_in += 1;
        self.stats.bytes_in += packet.len() as u64;
        self.stats.first_in.get_or_insert(now);
        let entry_drop = if !self.params.up {
            Some(DropCause::Down)
        } else if self.params.loss.lose(&mut self.loss_state, &mut self.rng) {
            Some(DropCause::Loss)
        } else {
            None
        };
        if let Some(cause) = entry_drop {
            *self.stats.drops.entry(cause.name()).or_default() += 1;
            obs.event(&Event {
                cause: Some(cause),
                ..event_of(now, EventKind::Drop, &packet, self.event_detail)
            });
            return;
        }
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
        self.advance(now, obs);
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
                    *self.stats.drops.entry(cause.name()).or_default() += 1;
                    let sojourn = now - packet.enqueued_at;
                    obs.event(&Event {
                        sojourn: Some(sojourn),
                        cause: Some(cause),
                        ..event_of(now, EventKind::Drop, &packet, self.event_detail)
                    });
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
            let sojourn = t - p.enqueued_at;
            self.stats.queue_delay.record(sojourn);
            self.stats.queue_delay_by_class[usize::from(p.class.min(1))].record(sojourn);
            Event {
                sojourn: Some(sojourn),
                ..event_of(t, EventKind::Dequeue, p, self.event_detail)
            }
        });
        self.drain_events(t, cur.as_ref(), obs);
        if let Some(ev) = &cur {
            obs.event(ev);
        }
        p
    }

    /// Puts a transmitted packet on the wire: it arrives `delay` after `done`, in order.
    fn launch(&mut self, done: Instant, mut p: Packet) {
        if self.params.bleach_ecn && p.ecn() != Ecn::NotEct {
            // Only a readable IP header has an ECN field to clear.
            let _ = p.set_ecn(Ecn::NotEct);
        }
        let mut at = done + self.params.delay;
        if let Some((last, _)) = self.in_flight.back() {
            at = at.max(*last);
        }
        self.stats.packets_out += 1;
        self.stats.bytes_out += p.len() as u64;
        self.in_flight.push_back((at, p));
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
                    let bytes = p.len() as u64 + u64::from(self.params.overhead_bytes);
                    let tx = match &self.params.capacity {
                        Capacity::Rate(r) => r.serialization_time(bytes),
                        _ => Duration::ZERO,
                    };
                    self.busy_until = t + tx;
                    self.launch(self.busy_until, p);
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
                        self.launch(t, p);
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
        while let Some((at, _)) = self.in_flight.front() {
            if *at > now {
                break;
            }
            let (at, p) = self.in_flight.pop_front().expect("peeked");
            self.stats.last_out = Some(at);
            out.push((at, p));
        }
    }

    /// The next moment something happens on this link, if anything is pending.
    pub fn next_wakeup(&self) -> Option<Instant> {
        let mut next = self.in_flight.front().map(|(at, _)| *at);
        let mut consider = |t: Instant| next = Some(next.map_or(t, |n: Instant| n.min(t)));
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

    /// An IPv4 UDP packet of `len` bytes from 10.0.0.1:`sport` to 10.0.0.2:9, with a valid header
    /// checksum.
    pub fn udp(id: u64, len: usize, sport: u16) -> Packet {
        let mut d = vec![0u8; len.max(28)];
        d[0] = 0x45;
        let total = d.len() as u16;
        d[2..4].copy_from_slice(&total.to_be_bytes());
        d[8] = 64;
        d[9] = 17;
        d[12..16].copy_from_slice(&[10, 0, 0, 1]);
        d[16..20].copy_from_slice(&[10, 0, 0, 2]);
        let c = wire::checksum::checksum(&d[..20], 0);
        d[10..12].copy_from_slice(&c.to_be_bytes());
        d[20..22].copy_from_slice(&sport.to_be_bytes());
        d[22..24].copy_from_slice(&9u16.to_be_bytes());
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
}
