//! `codel`: one FIFO under the CoDel control law (RFC 8289), as Linux's sch_codel.c.
//!
//! Enqueue only checks the packet limit (tail drop, [`Cause::Overlimit`]); every AQM decision
//! is made at dequeue by [`crate::codel_law`], which drops ([`Cause::AqmDequeue`]) or, with
//! `ecn`, marks ECT packets ([`Cause::CeMark`]). Linux's defaults: limit 1000 packets, target
//! 5 ms, interval 100 ms, no ECN, no ce_threshold.

use std::collections::VecDeque;

use wire::{Instant, Packet};

use crate::codel_law::{self, CodelParams, CodelStats, CodelVars, Head};
use crate::{Cause, Qdisc, QdiscEvent, Stats, Verdict};

/// Parameters of a codel queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Params {
    /// Tail-drop limit in packets; Linux default 1000.
    pub limit_packets: usize,
    pub codel: CodelParams,
}

impl Default for Params {
    fn default() -> Params {
        Params {
            limit_packets: 1000,
            codel: CodelParams::default(),
        }
    }
}

/// The queue itself, with its byte count, as the control law's [`Head`].
struct Fifo {
    packets: VecDeque<Packet>,
    bytes: usize,
}

impl Head for Fifo {
    fn pop(&mut self) -> Option<Packet> {
        let p = self.packets.pop_front()?;
        self.bytes -= p.len();
        Some(p)
    }
    fn backlog_bytes(&self) -> usize {
        self.bytes
    }
}

/// A codel queue.
pub struct Codel {
    params: Params,
    queue: Fifo,
    vars: CodelVars,
    cstats: CodelStats,
    stats: Stats,
}

impl Codel {
    pub fn new(params: Params) -> Codel {
        Codel {
            params,
            queue: Fifo {
                packets: VecDeque::new(),
                bytes: 0,
            },
            vars: CodelVars::default(),
            cstats: CodelStats::default(),
            stats: Stats::default(),
        }
    }

    /// The control law's state, for logs and tests.
    pub fn vars(&self) -> &CodelVars {
        &self.vars
    }

    pub fn codel_stats(&self) -> &CodelStats {
        &self.cstats
    }
}

impl Qdisc for Codel {
    fn enqueue(
        &mut self,
        now: Instant,
        mut packet: Packet,
        events: &mut Vec<QdiscEvent>,
    ) -> Verdict {
        self.stats.packets_in += 1;
        if self.queue.packets.len() >= self.params.limit_packets {
            self.stats.record(Cause::Overlimit);
            events.push(QdiscEvent::Dropped {
                packet,
                cause: Cause::Overlimit,
            });
            return Verdict::Dropped;
        }
        packet.enqueued_at = now;
        self.queue.bytes += packet.len();
        self.queue.packets.push_back(packet);
        self.stats
            .note_backlog(self.queue.packets.len(), self.queue.bytes);
        Verdict::Queued
    }

    fn dequeue(&mut self, now: Instant, events: &mut Vec<QdiscEvent>) -> Option<Packet> {
        let p = codel_law::dequeue(
            &self.params.codel,
            &mut self.vars,
            &mut self.cstats,
            &mut self.stats,
            &mut self.queue,
            now,
            events,
        )?;
        self.stats.packets_out += 1;
        self.stats.bytes_out += p.len() as u64;
        Some(p)
    }

    fn backlog_packets(&self) -> usize {
        self.queue.packets.len()
    }
    fn backlog_bytes(&self) -> usize {
        self.queue.bytes
    }
    fn stats(&self) -> &Stats {
        &self.stats
    }
    fn kind(&self) -> &'static str {
        "codel"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{ms, tcp6, udp4};
    use wire::{Duration, Ecn};

    #[test]
    fn codel_tail_drops_over_its_packet_limit() {
        let mut q = Codel::new(Params {
            limit_packets: 3,
            ..Params::default()
        });
        let mut ev = Vec::new();
        for id in 0..4 {
            q.enqueue(ms(0), tcp6(id, 1, 100, Ecn::NotEct), &mut ev);
        }
        assert_eq!(q.backlog_packets(), 3);
        assert_eq!(q.backlog_bytes(), 300);
        assert!(
            matches!(&ev[..], [QdiscEvent::Dropped { packet, cause: Cause::Overlimit }] if packet.id == 3)
        );
    }

    #[test]
    fn codel_keeps_a_ten_percent_overloaded_queue_near_target() {
        // Eleven 1500-byte packets arrive every 10 ms and ten leave: without an AQM the
        // sojourn would grow by 1 ms every 10 ms until the limit.
        let mut q = Codel::new(Params {
            limit_packets: 100_000,
            ..Params::default()
        });
        let mut ev = Vec::new();
        let mut id = 0;
        let mut late = Vec::new();
        for t in 0..20_000u64 {
            for _ in 0..(1 + u64::from(t % 10 == 0)) {
                id += 1;
                q.enqueue(ms(t), udp4(id, 7, 1500, Ecn::NotEct), &mut ev);
            }
            if let Some(p) = q.dequeue(ms(t), &mut ev) {
                if t >= 10_000 {
                    late.push(ms(t) - p.enqueued_at);
                }
            }
        }
        late.sort();
        let median = late[late.len() / 2];
        // A tenth of what arrives must go; CoDel's drop rate ramps until it does, and the
        // standing queue settles near target rather than at the limit.
        assert!(median < Duration::from_millis(30), "median {median:?}");
        assert!(q.stats().count(Cause::AqmDequeue) > 1_500);
        assert_eq!(
            q.stats().packets_in,
            q.stats().packets_out + q.stats().drops() + q.backlog_packets() as u64
        );
    }
}
