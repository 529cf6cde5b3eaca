//! Tail-drop FIFOs: `pfifo` limited in packets and `bfifo` limited in bytes, as Linux's
//! sch_fifo.c. The default limits are Linux's: the device's txqueuelen (1000) packets, or
//! txqueuelen × MTU bytes.

use std::collections::VecDeque;

use wire::{Instant, Packet};

use crate::{Cause, Qdisc, QdiscEvent, Stats, Verdict};

/// What the queue counts against its limit.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Limit {
    Packets(usize),
    Bytes(usize),
}

/// A tail-drop FIFO.
pub struct Fifo {
    limit: Limit,
    queue: VecDeque<Packet>,
    bytes: usize,
    stats: Stats,
}

impl Fifo {
    pub fn new(limit: Limit) -> Fifo {
        Fifo {
            limit,
            queue: VecDeque::new(),
            bytes: 0,
            stats: Stats::default(),
        }
    }
}

impl Qdisc for Fifo {
    fn enqueue(&mut self, _now: Instant, packet: Packet, events: &mut Vec<QdiscEvent>) -> Verdict {
        self.stats.packets_in += 1;
        let fits = match self.limit {
            Limit::Packets(n) => self.queue.len() < n,
            // bfifo admits a packet while the backlog plus the packet fits (sch_fifo.c).
            Limit::Bytes(n) => self.bytes + packet.len() <= n,
        };
        if !fits {
            self.stats.record(Cause::Overlimit);
            events.push(QdiscEvent::Dropped {
                packet,
                cause: Cause::Overlimit,
            });
            return Verdict::Dropped;
        }
        self.bytes += packet.len();
        self.queue.push_back(packet);
        self.stats.note_backlog(self.queue.len(), self.bytes);
        Verdict::Queued
    }

    fn dequeue(&mut self, _now: Instant, _events: &mut Vec<QdiscEvent>) -> Option<Packet> {
        let p = self.queue.pop_front()?;
        self.bytes -= p.len();
        self.stats.packets_out += 1;
        self.stats.bytes_out += p.len() as u64;
        Some(p)
    }

    fn backlog_packets(&self) -> usize {
        self.queue.len()
    }
    fn backlog_bytes(&self) -> usize {
        self.bytes
    }
    fn stats(&self) -> &Stats {
        &self.stats
    }
    fn kind(&self) -> &'static str {
        match self.limit {
            Limit::Packets(_) => "fifo",
            Limit::Bytes(_) => "bfifo",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkt(id: u64, len: usize) -> Packet {
        Packet {
            id,
            data: vec![0x45; len],
            ..Packet::default()
        }
    }

    #[test]
    fn fifo_tail_drops_the_packet_over_its_packet_limit() {
        let mut q = Fifo::new(Limit::Packets(2));
        let mut ev = Vec::new();
        let t = Instant::ZERO;
        assert_eq!(q.enqueue(t, pkt(1, 100), &mut ev), Verdict::Queued);
        assert_eq!(q.enqueue(t, pkt(2, 100), &mut ev), Verdict::Queued);
        assert_eq!(q.enqueue(t, pkt(3, 100), &mut ev), Verdict::Dropped);
        assert!(
            matches!(&ev[..], [QdiscEvent::Dropped { packet, cause: Cause::Overlimit }] if packet.id == 3)
        );
        assert_eq!(q.dequeue(t, &mut ev).unwrap().id, 1);
        assert_eq!(q.dequeue(t, &mut ev).unwrap().id, 2);
        assert!(q.dequeue(t, &mut ev).is_none());
        assert_eq!(q.stats().count(Cause::Overlimit), 1);
        assert_eq!(q.stats().packets_out, 2);
    }

    #[test]
    fn bfifo_counts_bytes_and_admits_an_exact_fit() {
        let mut q = Fifo::new(Limit::Bytes(3000));
        let mut ev = Vec::new();
        let t = Instant::ZERO;
        assert_eq!(q.enqueue(t, pkt(1, 1500), &mut ev), Verdict::Queued);
        assert_eq!(q.enqueue(t, pkt(2, 1501), &mut ev), Verdict::Dropped);
        assert_eq!(q.enqueue(t, pkt(3, 1500), &mut ev), Verdict::Queued);
        assert_eq!(q.backlog_bytes(), 3000);
        assert_eq!(q.enqueue(t, pkt(4, 40), &mut ev), Verdict::Dropped);
        q.dequeue(t, &mut ev);
        assert_eq!(q.backlog_bytes(), 1500);
        assert_eq!(q.backlog_packets(), 1);
        assert_eq!(q.stats().max_backlog_bytes, 3000);
    }
}
