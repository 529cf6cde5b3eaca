//! `fq_codel`: flow queueing with CoDel (RFC 8290), as Linux's sch_fq_codel.c.
//!
//! Packets are hashed by 5-tuple (with a perturbation drawn from the seed) into `flows`
//! buckets, each a FIFO with its own CoDel state ([`crate::codel_law`]). A deficit round robin
//! with a byte `quantum` serves the buckets, new flows (those that were idle) before old ones
//! (RFC 8290 §4.2). When the packet limit or the memory limit is exceeded, the fattest bucket
//! loses up to half of its bytes from its head, at most `drop_batch` packets (RFC 8290 §4.1;
//! Linux's batch drop). Linux's defaults: limit 10240 packets, 1024 flows, quantum 1514 bytes,
//! target 5 ms, interval 100 ms, 32 MB memory limit, ECN on, drop batch 64.
//!
//! Where we differ from Linux: the bucket index is Linux's multiply-shift reduction of our own
//! 5-tuple hash (`FlowKey::hash32`), not of the kernel's `skb_get_hash`; memory is counted as
//! the packets' IP bytes, not `skb->truesize` (so the 32 MB limit binds later than in Linux);
//! there are no tc filters and no per-bucket classification; packets that are not IP go to
//! bucket 0.

use std::collections::VecDeque;

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use wire::{Instant, Packet};

use crate::codel_law::{self, CodelParams, CodelStats, CodelVars, Head};
use crate::{Cause, Qdisc, QdiscEvent, Stats, Verdict};

/// Parameters of an fq_codel queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Params {
    /// Packets queued in all buckets together; Linux default 10240.
    pub limit_packets: usize,
    /// Number of hash buckets; Linux default 1024.
    pub flows: u32,
    /// Bytes a bucket may send per round; Linux default 1514.
    pub quantum_bytes: u32,
    /// Bytes queued in all buckets together; Linux default 32 MB.
    pub memory_limit_bytes: usize,
    /// At most this many packets per overflow batch drop; Linux default 64.
    pub drop_batch: u32,
    /// The control law run per bucket; fq_codel turns ECN on by default.
    pub codel: CodelParams,
}

impl Default for Params {
    fn default() -> Params {
        Params {
            limit_packets: 10240,
            flows: 1024,
            quantum_bytes: 1514,
            memory_limit_bytes: 32 << 20,
            drop_batch: 64,
            codel: CodelParams {
                ecn: true,
                ..CodelParams::default()
            },
        }
    }
}

/// Which list a bucket is on.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum List {
    None,
    New,
    Old,
}

/// One hash bucket.
#[derive(Debug)]
struct Flow {
    queue: VecDeque<Packet>,
    /// Bytes queued in this bucket (Linux's `backlogs[idx]`).
    backlog_bytes: usize,
    /// DRR deficit in bytes; may go negative by up to a packet.
    deficit: i64,
    list: List,
    vars: CodelVars,
}

/// Counters fq_codel keeps beyond [`Stats`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FqCodelStats {
    /// Packets dropped by overflow batch drops (packet or memory limit).
    pub drop_overlimit: u64,
    /// Of those, packets dropped while the memory limit was exceeded.
    pub drop_overmemory: u64,
    /// Times a bucket was put on the new-flows list.
    pub new_flow_count: u64,
    /// The control law's shared statistics (largest packet).
    pub codel: CodelStats,
}

/// An fq_codel queue.
pub struct FqCodel {
    params: Params,
    perturbation: u32,
    flows: Vec<Flow>,
    new_flows: VecDeque<u32>,
    old_flows: VecDeque<u32>,
    backlog_packets: usize,
    backlog_bytes: usize,
    memory_bytes: usize,
    stats: Stats,
    fq_stats: FqCodelStats,
}

/// A bucket's queue as the control law sees it, keeping every backlog counter in step.
struct FlowHead<'a> {
    queue: &'a mut VecDeque<Packet>,
    flow_bytes: &'a mut usize,
    total_packets: &'a mut usize,
    total_bytes: &'a mut usize,
    memory_bytes: &'a mut usize,
}

impl Head for FlowHead<'_> {
    fn pop(&mut self) -> Option<Packet> {
        let p = self.queue.pop_front()?;
        *self.flow_bytes -= p.len();
        *self.total_packets -= 1;
        *self.total_bytes -= p.len();
        *self.memory_bytes -= p.len();
        Some(p)
    }
    fn backlog_bytes(&self) -> usize {
        *self.total_bytes
    }
}

impl FqCodel {
    /// `flows` must be at least 1 (the spec parser guarantees it; 0 is taken as 1).
    pub fn new(mut params: Params, seed: u64) -> FqCodel {
        params.flows = params.flows.max(1);
        let n = params.flows as usize;
        FqCodel {
            perturbation: ChaCha8Rng::seed_from_u64(seed).next_u32(),
            flows: (0..n)
                .map(|_| Flow {
                    queue: VecDeque::new(),
                    backlog_bytes: 0,
                    deficit: 0,
                    list: List::None,
                    vars: CodelVars::default(),
                })
                .collect(),
            params,
            new_flows: VecDeque::new(),
            old_flows: VecDeque::new(),
            backlog_packets: 0,
            backlog_bytes: 0,
            memory_bytes: 0,
            stats: Stats::default(),
            fq_stats: FqCodelStats::default(),
        }
    }

    pub fn fq_stats(&self) -> &FqCodelStats {
        &self.fq_stats
    }

    /// The bucket a packet goes to: Linux's `reciprocal_scale(hash, flows)`, i.e.
    /// `hash · flows / 2³²`.
    pub fn bucket(&self, packet: &Packet) -> usize {
        match packet.flow_key() {
            Some(key) => {
                let h = key.hash32(self.perturbation);
                ((u64::from(h) * u64::from(self.params.flows)) >> 32) as usize
            }
            None => 0,
        }
    }

    /// The control law's state of a bucket, for logs and tests.
    pub fn flow_vars(&self, bucket: usize) -> Option<&CodelVars> {
        self.flows.get(bucket).map(|f| &f.vars)
    }

    /// Drops up to half the fattest bucket's bytes from its head, at most `drop_batch`
    /// packets (Linux `fq_codel_drop`). Returns the bucket.
    fn drop_from_fattest(&mut self, memory_limited: bool, events: &mut Vec<QdiscEvent>) -> usize {
        // A linear scan, as Linux: it only runs on overflow, and then drops a batch so that
        // it runs rarely.
        let (fat, max_bytes) = self.flows.iter().enumerate().fold((0, 0), |best, (i, f)| {
            if f.backlog_bytes > best.1 {
                (i, f.backlog_bytes)
            } else {
                best
            }
        });
        let threshold = max_bytes / 2;
        let flow = &mut self.flows[fat];
        let mut dropped_bytes = 0;
        let mut dropped = 0u32;
        while let Some(p) = flow.queue.pop_front() {
            dropped_bytes += p.len();
            dropped += 1;
            self.stats.record(Cause::Overlimit);
            events.push(QdiscEvent::Dropped {
                packet: p,
                cause: Cause::Overlimit,
            });
            if dropped >= self.params.drop_batch || dropped_bytes >= threshold {
                break;
            }
        }
        // Tell CoDel to signal harder on this flow too (Linux).
        flow.vars.count = flow.vars.count.wrapping_add(dropped);
        flow.backlog_bytes -= dropped_bytes;
        self.backlog_bytes -= dropped_bytes;
        self.memory_bytes -= dropped_bytes;
        self.backlog_packets -= dropped as usize;
        self.fq_stats.drop_overlimit += u64::from(dropped);
        if memory_limited {
            self.fq_stats.drop_overmemory += u64::from(dropped);
        }
        fat
    }
}

impl Qdisc for FqCodel {
    fn enqueue(
        &mut self,
        now: Instant,
        mut packet: Packet,
        events: &mut Vec<QdiscEvent>,
    ) -> Verdict {
        self.stats.packets_in += 1;
        let idx = self.bucket(&packet);
        let len = packet.len();
        packet.enqueued_at = now;
        let flow = &mut self.flows[idx];
        flow.queue.push_back(packet);
        flow.backlog_bytes += len;
        if flow.list == List::None {
            // An idle bucket becomes a new flow with a full quantum (RFC 8290 §4.1).
            flow.list = List::New;
            flow.deficit = i64::from(self.params.quantum_bytes);
            self.new_flows.push_back(idx as u32);
            self.fq_stats.new_flow_count += 1;
        }
        self.backlog_packets += 1;
        self.backlog_bytes += len;
        self.memory_bytes += len;
        let memory_limited = self.memory_bytes > self.params.memory_limit_bytes;
        if self.backlog_packets <= self.params.limit_packets && !memory_limited {
            self.stats
                .note_backlog(self.backlog_packets, self.backlog_bytes);
            return Verdict::Queued;
        }
        let fat = self.drop_from_fattest(memory_limited, events);
        self.stats
            .note_backlog(self.backlog_packets, self.backlog_bytes);
        // Drops come from the head, so the new packet (at the tail) went only if its whole
        // bucket did.
        if fat == idx && self.flows[idx].queue.is_empty() {
            Verdict::Dropped
        } else {
            Verdict::Queued
        }
    }

    fn dequeue(&mut self, now: Instant, events: &mut Vec<QdiscEvent>) -> Option<Packet> {
        let quantum = i64::from(self.params.quantum_bytes);
        loop {
            // New flows first (RFC 8290 §4.2).
            let (from_new, idx) = match (self.new_flows.front(), self.old_flows.front()) {
                (Some(&i), _) => (true, i as usize),
                (None, Some(&i)) => (false, i as usize),
                (None, None) => return None,
            };
            let Self {
                flows,
                new_flows,
                old_flows,
                params,
                stats,
                fq_stats,
                backlog_packets,
                backlog_bytes,
                memory_bytes,
                ..
            } = self;
            let mut leave_list = || {
                if from_new {
                    new_flows.pop_front();
                } else {
                    old_flows.pop_front();
                }
            };
            let flow = &mut flows[idx];
            if flow.deficit <= 0 {
                // Used up its quantum: a new quantum and to the back of the old list.
                flow.deficit += quantum;
                leave_list();
                old_flows.push_back(idx as u32);
                flow.list = List::Old;
                continue;
            }
            let mut head = FlowHead {
                queue: &mut flow.queue,
                flow_bytes: &mut flow.backlog_bytes,
                total_packets: backlog_packets,
                total_bytes: backlog_bytes,
                memory_bytes,
            };
            let got = codel_law::dequeue(
                &params.codel,
                &mut flow.vars,
                &mut fq_stats.codel,
                stats,
                &mut head,
                now,
                events,
            );
            match got {
                Some(p) => {
                    flow.deficit -= p.len() as i64;
                    stats.packets_out += 1;
                    stats.bytes_out += p.len() as u64;
                    return Some(p);
                }
                None => {
                    leave_list();
                    if from_new && !old_flows.is_empty() {
                        // An emptied new flow takes one pass through the old list before it
                        // may be new again, so that a flow cannot starve the old ones by
                        // sending one packet at a time (RFC 8290 §4.2).
                        old_flows.push_back(idx as u32);
                        flow.list = List::Old;
                    } else {
                        flow.list = List::None;
                    }
                }
            }
        }
    }

    fn backlog_packets(&self) -> usize {
        self.backlog_packets
    }
    fn backlog_bytes(&self) -> usize {
        self.backlog_bytes
    }
    fn stats(&self) -> &Stats {
        &self.stats
    }
    fn kind(&self) -> &'static str {
        "fq_codel"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{ms, tcp6, udp4};
    use wire::{Duration, Ecn};

    /// A queue whose control law never fires, to look at the scheduler alone.
    fn scheduler_only(params: Params) -> FqCodel {
        FqCodel::new(
            Params {
                codel: CodelParams {
                    target: Duration::from_secs(100),
                    ..params.codel.clone()
                },
                ..params
            },
            7,
        )
    }

    fn port(p: &Packet) -> u16 {
        p.flow_key().unwrap().src_port
    }

    /// Two source ports that land in different buckets.
    fn two_ports(q: &FqCodel) -> (u16, u16) {
        let a = 1000;
        let b = (1001..)
            .find(|&b| {
                q.bucket(&udp4(0, b, 100, Ecn::NotEct)) != q.bucket(&udp4(0, a, 100, Ecn::NotEct))
            })
            .unwrap();
        (a, b)
    }

    #[test]
    fn drr_gives_each_backlogged_flow_a_quantum_of_bytes_per_round() {
        let mut q = scheduler_only(Params::default());
        let (a, b) = two_ports(&q);
        let mut ev = Vec::new();
        for i in 0..200 {
            q.enqueue(ms(0), udp4(i, a, 1514, Ecn::NotEct), &mut ev);
            q.enqueue(ms(0), udp4(1000 + i, b, 300, Ecn::NotEct), &mut ev);
        }
        let order: Vec<u16> = (0..40)
            .map(|_| port(&q.dequeue(ms(0), &mut ev).unwrap()))
            .collect();
        // a spends its 1514-byte quantum on one packet; b sends while its deficit is
        // positive: 1514 → 14 after five, → -286 after six. Next round b has 1228: five.
        let mut want = vec![a];
        want.extend([b; 6]);
        want.push(a);
        want.extend([b; 5]);
        assert_eq!(order[..13], want[..]);
        // Over many rounds the bytes sent per flow stay within a quantum of each other.
        let (mut bytes_a, mut bytes_b) = (0i64, 0i64);
        for _ in 0..150 {
            let p = q.dequeue(ms(0), &mut ev).unwrap();
            if port(&p) == a {
                bytes_a += p.len() as i64;
            } else {
                bytes_b += p.len() as i64;
            }
        }
        assert!(
            (bytes_a - bytes_b).abs() <= 1514 + 300,
            "{bytes_a} vs {bytes_b}"
        );
        assert!(ev.is_empty());
    }

    #[test]
    fn a_new_flow_is_served_before_the_backlogged_old_flows() {
        let mut q = scheduler_only(Params::default());
        let (bulk, sparse) = two_ports(&q);
        let mut ev = Vec::new();
        for i in 0..50 {
            q.enqueue(ms(0), udp4(i, bulk, 500, Ecn::NotEct), &mut ev);
        }
        // Four packets use bulk's first quantum; the fifth starts its second, as an old flow.
        for _ in 0..5 {
            assert_eq!(port(&q.dequeue(ms(1), &mut ev).unwrap()), bulk);
        }
        q.enqueue(ms(2), udp4(100, sparse, 100, Ecn::NotEct), &mut ev);
        assert_eq!(port(&q.dequeue(ms(2), &mut ev).unwrap()), sparse);
        // Found empty, the new flow is not forgotten but sent once through the old list
        // (RFC 8290 §4.2), so a packet it sends now waits for bulk's turn.
        assert_eq!(port(&q.dequeue(ms(3), &mut ev).unwrap()), bulk);
        q.enqueue(ms(3), udp4(101, sparse, 100, Ecn::NotEct), &mut ev);
        assert_eq!(port(&q.dequeue(ms(3), &mut ev).unwrap()), bulk);
        assert_eq!(port(&q.dequeue(ms(3), &mut ev).unwrap()), sparse);
        assert_eq!(q.fq_stats().new_flow_count, 2);
    }

    #[test]
    fn overflow_drops_half_the_fattest_flows_bytes_from_its_head() {
        let mut q = scheduler_only(Params {
            limit_packets: 100,
            ..Params::default()
        });
        let (fat, thin) = two_ports(&q);
        let mut ev = Vec::new();
        for i in 0..80 {
            q.enqueue(ms(0), udp4(i, fat, 1500, Ecn::NotEct), &mut ev);
        }
        for i in 0..20 {
            q.enqueue(ms(0), udp4(100 + i, thin, 1500, Ecn::NotEct), &mut ev);
        }
        assert!(ev.is_empty());
        let count_before = q
            .flow_vars(q.bucket(&udp4(0, fat, 60, Ecn::NotEct)))
            .unwrap()
            .count;
        assert_eq!(
            q.enqueue(ms(0), udp4(999, thin, 1500, Ecn::NotEct), &mut ev),
            Verdict::Queued
        );
        // Half of 80 × 1500 bytes is 40 packets, taken oldest first.
        let ids: Vec<u64> = ev
            .iter()
            .map(|e| match e {
                QdiscEvent::Dropped {
                    packet,
                    cause: Cause::Overlimit,
                } => packet.id,
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(ids, (0..40).collect::<Vec<u64>>());
        assert_eq!(q.backlog_packets(), 61);
        assert_eq!(q.backlog_bytes(), 61 * 1500);
        // And its CoDel count goes up by the batch, to signal harder.
        let fat_bucket = q.bucket(&udp4(0, fat, 60, Ecn::NotEct));
        assert_eq!(q.flow_vars(fat_bucket).unwrap().count, count_before + 40);
        assert_eq!(q.fq_stats().drop_overlimit, 40);
    }

    #[test]
    fn a_batch_drop_takes_at_most_drop_batch_packets() {
        let mut q = scheduler_only(Params {
            limit_packets: 200,
            ..Params::default()
        });
        let mut ev = Vec::new();
        for i in 0..201 {
            q.enqueue(ms(0), udp4(i, 5, 1500, Ecn::NotEct), &mut ev);
        }
        assert_eq!(ev.len(), 64);
        assert_eq!(q.backlog_packets(), 201 - 64);
    }

    #[test]
    fn the_new_packet_is_dropped_only_if_its_whole_flow_goes() {
        let mut q = scheduler_only(Params {
            limit_packets: 1,
            ..Params::default()
        });
        let (a, b) = two_ports(&q);
        let mut ev = Vec::new();
        q.enqueue(ms(0), udp4(1, a, 100, Ecn::NotEct), &mut ev);
        // b's one packet is the fattest flow: it goes.
        assert_eq!(
            q.enqueue(ms(0), udp4(2, b, 1500, Ecn::NotEct), &mut ev),
            Verdict::Dropped
        );
        // A second packet to a makes a the fattest: its head goes, the new packet stays.
        q.enqueue(ms(0), udp4(3, a, 100, Ecn::NotEct), &mut ev);
        let ids: Vec<u64> = ev
            .iter()
            .map(|e| match e {
                QdiscEvent::Dropped { packet, .. } => packet.id,
                _ => 0,
            })
            .collect();
        assert_eq!(ids, [2, 1]);
        assert_eq!(q.dequeue(ms(0), &mut ev).unwrap().id, 3);
    }

    #[test]
    fn the_memory_limit_also_triggers_batch_drops() {
        let mut q = scheduler_only(Params {
            memory_limit_bytes: 15_000,
            ..Params::default()
        });
        let mut ev = Vec::new();
        for i in 0..11 {
            q.enqueue(ms(0), tcp6(i, 9, 1500, Ecn::NotEct), &mut ev);
        }
        assert_eq!(q.fq_stats().drop_overmemory, 6);
        assert_eq!(q.backlog_bytes(), 5 * 1500);
    }

    #[test]
    fn each_flow_has_its_own_codel_state() {
        let mut q = FqCodel::new(Params::default(), 1);
        let (bulk, sparse) = two_ports(&q);
        let mut ev = Vec::new();
        let mut id = 0;
        for t in 0..3000u64 {
            // The bulk flow sends two packets per millisecond into a one-per-millisecond
            // link; the sparse flow one every 20 ms.
            for _ in 0..2 {
                id += 1;
                q.enqueue(ms(t), udp4(id, bulk, 1500, Ecn::NotEct), &mut ev);
            }
            if t % 20 == 0 {
                id += 1;
                q.enqueue(ms(t), udp4(id, sparse, 200, Ecn::NotEct), &mut ev);
            }
            q.dequeue(ms(t), &mut ev);
        }
        let mut dropped_ports = ev.iter().filter_map(|e| match e {
            QdiscEvent::Dropped {
                packet,
                cause: Cause::AqmDequeue,
            } => Some(port(packet)),
            _ => None,
        });
        assert!(dropped_ports.all(|p| p == bulk));
        assert!(q.stats().count(Cause::AqmDequeue) > 20);
        let bulk_vars = q
            .flow_vars(q.bucket(&udp4(0, bulk, 60, Ecn::NotEct)))
            .unwrap();
        let sparse_vars = q
            .flow_vars(q.bucket(&udp4(0, sparse, 60, Ecn::NotEct)))
            .unwrap();
        assert!(bulk_vars.dropping && bulk_vars.count > 1);
        assert!(!sparse_vars.dropping);
        assert_eq!(sparse_vars.count, 0);
        assert!(sparse_vars.ldelay < Duration::from_millis(5));
    }

    #[test]
    fn ecn_is_on_by_default_and_marks_ect_flows() {
        let mut q = FqCodel::new(Params::default(), 3);
        let mut ev = Vec::new();
        for t in 0..2000u64 {
            for k in 0..2 {
                q.enqueue(ms(t), udp4(t * 2 + k, 77, 1500, Ecn::Ect0), &mut ev);
            }
            q.dequeue(ms(t), &mut ev);
        }
        assert!(q.stats().count(Cause::CeMark) > 10);
        assert_eq!(q.stats().count(Cause::AqmDequeue), 0);
    }
}
