//! A pacer: the earliest time the next packet may leave, so that packets go out at the pacing
//! rate instead of in frame-sized bursts that a shallow L4S queue would mark.
//!
//! It is a leaky bucket with a small allowance: after an idle period the sender may catch up
//! by at most `burst` worth of time, never more. It does not decide the rate (the
//! [`crate::Controller`] does) and sends nothing.

use wire::{Duration, Instant};

/// The pacing state.
#[derive(Clone, Debug)]
pub struct Pacer {
    /// Earliest departure of the next packet.
    next: Instant,
    /// How far in the past `next` may lag after idleness: a burst of this much time.
    burst: Duration,
}

impl Pacer {
    pub fn new(now: Instant, burst: Duration) -> Pacer {
        Pacer { next: now, burst }
    }

    /// When the next packet may be sent.
    pub fn next_send_time(&self) -> Instant {
        self.next
    }

    /// Whether a packet may be sent at `now`.
    pub fn can_send(&self, now: Instant) -> bool {
        now >= self.next
    }

    /// A packet of `bytes` left at `now` while the pacing rate was `rate_bps`:
    /// `next = max(next, now − burst) + bytes × 8 / rate`.
    pub fn on_sent(&mut self, now: Instant, bytes: u64, rate_bps: u64) {
        let floor = now - self.burst;
        let start = self.next.max(floor);
        let gap = wire::Rate::from_bits_per_sec(rate_bps.max(1)).serialization_time(bytes);
        self.next = start + gap;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packets_are_spaced_by_their_serialization_time_at_the_pacing_rate() {
        let mut p = Pacer::new(Instant::ZERO, Duration::ZERO);
        assert!(p.can_send(Instant::ZERO));
        p.on_sent(Instant::ZERO, 1250, 10_000_000);
        assert_eq!(p.next_send_time(), Instant::from_millis(1));
        assert!(!p.can_send(Instant::from_micros(999)));
        p.on_sent(Instant::from_millis(1), 1250, 10_000_000);
        assert_eq!(p.next_send_time(), Instant::from_millis(2));
    }

    #[test]
    fn idleness_earns_at_most_one_burst_allowance() {
        let mut p = Pacer::new(Instant::ZERO, Duration::from_millis(2));
        // Idle for a second: only 2 ms of credit remain, i.e. two 1 ms packets back to back.
        let now = Instant::from_secs(1);
        p.on_sent(now, 1250, 10_000_000);
        assert!(p.can_send(now));
        p.on_sent(now, 1250, 10_000_000);
        assert!(p.can_send(now));
        p.on_sent(now, 1250, 10_000_000);
        assert!(!p.can_send(now));
    }
}
