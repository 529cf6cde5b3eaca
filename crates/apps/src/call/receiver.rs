//! The receiving half of a call endpoint, pure: counts what arrives (packets, bytes, ECN
//! codepoints, losses by sequence gaps), reassembles frames, detects stalls, and builds the
//! feedback that goes back to the sender.
//!
//! A frame counts as received when all its packets arrived (no retransmission, no FEC: a frame
//! with a lost packet is never shown). A stall is a gap longer than the threshold between two
//! complete frames; it starts at the first of them. Before the first complete frame nothing is
//! a stall (the call is still starting).
//!
//! Not here: sockets and clocks (the `call` loop), the congestion response (the sender side).

use std::collections::BTreeMap;

use congestion::EcnCounts;
use wire::{Duration, Ecn, Instant};

use super::packet::{Echo, FeedbackPacket, Media, MAX_ECHOES};

/// Frames being reassembled at once; older unfinished ones are abandoned.
const MAX_FRAMES_IN_PROGRESS: usize = 64;

/// A stall of the received video.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallStall {
    pub start: Instant,
    pub duration: Duration,
}

/// What a second of receiving looked like: the packets that arrived in it, and the frames whose
/// last packet did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RxSecond {
    pub frames: u64,
    pub bytes: u64,
    /// Stall time inside the second, as known at its end.
    pub stall: Duration,
}

#[derive(Clone, Debug)]
struct FrameInProgress {
    got: Vec<bool>,
    missing: usize,
}

/// The receiving state.
#[derive(Clone, Debug)]
pub struct Receiver {
    stall_threshold: Duration,
    report_ecn: bool,
    received: u64,
    received_bytes: u64,
    highest_seq: Option<u64>,
    ecn: EcnCounts,
    /// A datagram arrived without a TOS control message: counts cannot be trusted.
    ecn_unreadable: bool,
    echoes: Vec<(u64, Instant)>,
    fb_seq: u64,
    frames: BTreeMap<u32, FrameInProgress>,
    /// Newest completed frame number, so that late packets of old frames are ignored.
    newest_complete: Option<u32>,
    last_complete_at: Option<Instant>,
    frames_completed: u64,
    stalls: Vec<CallStall>,
    /// Each packet handled since the open second began: (arrival, bytes, completed a frame).
    /// The second it belongs to is decided by its arrival, not by when it was handled: a
    /// packet that arrived before a second's end may be read after the second was closed, or
    /// one that arrived after it before.
    arrivals: Vec<(Instant, u64, bool)>,
    second_start: Instant,
}

impl Receiver {
    /// `report_ecn: false` models a receiver that cannot read the ECN field.
    pub fn new(now: Instant, stall_threshold: Duration, report_ecn: bool) -> Receiver {
        Receiver {
            stall_threshold,
            report_ecn,
            received: 0,
            received_bytes: 0,
            highest_seq: None,
            ecn: EcnCounts::default(),
            ecn_unreadable: false,
            echoes: Vec::new(),
            fb_seq: 0,
            frames: BTreeMap::new(),
            newest_complete: None,
            last_complete_at: None,
            frames_completed: 0,
            stalls: Vec::new(),
            arrivals: Vec::new(),
            second_start: now,
        }
    }

    /// A media packet of `len` bytes arrived at `now` (when it reached the socket, which may
    /// be well before it is handled) with the ECN field `ecn` (`None` when the socket gave no
    /// control message). Returns whether it completed a frame.
    pub fn on_media(&mut self, now: Instant, m: &Media, len: usize, ecn: Option<Ecn>) -> bool {
        self.received += 1;
        self.received_bytes += len as u64;
        self.highest_seq = Some(self.highest_seq.map_or(m.seq, |h| h.max(m.seq)));
        match ecn {
            Some(e) => self.ecn.count(e),
            None => self.ecn_unreadable = true,
        }
        self.echoes.push((m.send_ns, now));
        if self.echoes.len() > MAX_ECHOES {
            self.echoes.remove(0);
        }
        let completed = self.reassemble(now, m);
        self.arrivals.push((now, len as u64, completed));
        completed
    }

    fn reassemble(&mut self, now: Instant, m: &Media) -> bool {
        if self.newest_complete.is_some_and(|n| m.frame <= n) {
            return false;
        }
        let f = self
            .frames
            .entry(m.frame)
            .or_insert_with(|| FrameInProgress {
                got: vec![false; usize::from(m.count)],
                missing: usize::from(m.count),
            });
        let i = usize::from(m.index);
        if i >= f.got.len() || f.got[i] {
            return false;
        }
        f.got[i] = true;
        f.missing -= 1;
        if f.missing > 0 {
            while self.frames.len() > MAX_FRAMES_IN_PROGRESS {
                self.frames.pop_first();
            }
            return false;
        }
        // Complete: older unfinished frames will never be shown.
        self.frames = self.frames.split_off(&(m.frame + 1));
        self.newest_complete = Some(m.frame);
        self.frames_completed += 1;
        if let Some(prev) = self.last_complete_at {
            let gap = now - prev;
            if gap > self.stall_threshold {
                self.stalls.push(CallStall {
                    start: prev,
                    duration: gap,
                });
            }
        }
        self.last_complete_at = Some(now);
        true
    }

    /// Whether a feedback should go out at `now`: something new arrived and `interval`
    /// passed since the last one, or the echo list is full.
    pub fn feedback_due(&self, now: Instant, last_sent: Instant, interval: Duration) -> bool {
        !self.echoes.is_empty() && (now - last_sent >= interval || self.echoes.len() >= MAX_ECHOES)
    }

    /// The feedback to send at `now`; empties the echo list.
    pub fn make_feedback(&mut self, now: Instant) -> FeedbackPacket {
        self.fb_seq += 1;
        let expected = self.highest_seq.map_or(0, |h| h + 1);
        let echoes = self
            .echoes
            .drain(..)
            .map(|(send_ns, at)| Echo {
                send_ns,
                hold_us: u32::try_from((now - at).as_micros()).unwrap_or(u32::MAX),
            })
            .collect();
        FeedbackPacket {
            fb_seq: self.fb_seq,
            received: self.received,
            received_bytes: self.received_bytes,
            lost: expected.saturating_sub(self.received),
            ecn: (self.report_ecn && !self.ecn_unreadable).then_some(self.ecn),
            rx_ns: now.as_nanos(),
            echoes,
        }
    }

    /// Closes the second ending at `now` and starts the next. Packets that arrived at `now` or
    /// later, handled already, belong to the next; one that arrived earlier but is handled
    /// only after this call counts in the next, so the caller reads what is waiting first.
    pub fn take_second(&mut self, now: Instant) -> RxSecond {
        let mut s = RxSecond::default();
        self.arrivals.retain(|&(at, bytes, completed)| {
            if at >= now {
                return true;
            }
            s.bytes += bytes;
            s.frames += u64::from(completed);
            false
        });
        s.stall = self.stall_time_between(self.second_start, now);
        self.second_start = now;
        s
    }

    /// Stall time inside `[from, to)`: known stalls, plus the current gap once it exceeds the
    /// threshold.
    fn stall_time_between(&self, from: Instant, to: Instant) -> Duration {
        let overlap = |s: Instant, e: Instant| e.min(to).saturating_duration_since(s.max(from));
        let mut total: Duration = self
            .stalls
            .iter()
            .rev()
            .take_while(|s| s.start + s.duration > from)
            .map(|s| overlap(s.start, s.start + s.duration))
            .sum();
        if let Some(last) = self.current_stall_start(to) {
            total += overlap(last, to);
        }
        total
    }

    fn current_stall_start(&self, now: Instant) -> Option<Instant> {
        self.last_complete_at
            .filter(|&t| now - t > self.stall_threshold)
    }

    /// Ends the call at `now`: a stall in progress is closed there and returned.
    pub fn finish(&mut self, now: Instant) -> Option<CallStall> {
        let start = self.current_stall_start(now)?;
        let s = CallStall {
            start,
            duration: now - start,
        };
        self.stalls.push(s);
        self.last_complete_at = Some(now);
        Some(s)
    }

    pub fn stalls(&self) -> &[CallStall] {
        &self.stalls
    }
    pub fn frames_completed(&self) -> u64 {
        self.frames_completed
    }
    pub fn ecn_counts(&self) -> EcnCounts {
        self.ecn
    }
    pub fn received(&self) -> u64 {
        self.received
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn media(seq: u64, frame: u32, index: u16, count: u16) -> Media {
        Media {
            keyframe: false,
            seq,
            frame,
            index,
            count,
            send_ns: seq * 1000,
        }
    }

    fn ms(v: u64) -> Instant {
        Instant::from_millis(v)
    }

    fn rx() -> Receiver {
        Receiver::new(Instant::ZERO, Duration::from_millis(200), true)
    }

    #[test]
    fn a_frame_counts_once_all_its_packets_arrived_in_any_order() {
        let mut r = rx();
        assert!(!r.on_media(ms(1), &media(1, 0, 1, 3), 1200, Some(Ecn::Ect1)));
        assert!(!r.on_media(ms(2), &media(0, 0, 0, 3), 1200, Some(Ecn::Ect1)));
        assert!(!r.on_media(ms(2), &media(0, 0, 0, 3), 1200, Some(Ecn::Ect1))); // duplicate
        assert!(r.on_media(ms(3), &media(2, 0, 2, 3), 1200, Some(Ecn::Ce)));
        assert_eq!(r.frames_completed(), 1);
        // A late duplicate of a shown frame does not count again.
        assert!(!r.on_media(ms(4), &media(2, 0, 2, 3), 1200, Some(Ecn::Ect1)));
        assert_eq!(r.frames_completed(), 1);
    }

    #[test]
    fn feedback_reports_cumulative_counts_losses_and_one_echo_per_packet() {
        let mut r = rx();
        r.on_media(ms(10), &media(0, 0, 0, 1), 1000, Some(Ecn::Ect1));
        r.on_media(ms(12), &media(3, 1, 0, 1), 1000, Some(Ecn::Ce));
        let f = r.make_feedback(ms(15));
        assert_eq!(
            (f.fb_seq, f.received, f.received_bytes, f.lost),
            (1, 2, 2000, 2)
        );
        // The arrival times are the feedback's time minus each hold.
        assert_eq!(f.rx_ns, 15_000_000);
        assert_eq!(
            f.ecn,
            Some(EcnCounts {
                not_ect: 0,
                ect1: 1,
                ect0: 0,
                ce: 1
            })
        );
        assert_eq!(
            f.echoes,
            vec![
                Echo {
                    send_ns: 0,
                    hold_us: 5000
                },
                Echo {
                    send_ns: 3000,
                    hold_us: 3000
                }
            ]
        );
        assert!(!r.feedback_due(ms(40), ms(15), Duration::from_millis(10)));
        // Late arrivals fill the gap: the loss count goes back down.
        r.on_media(ms(20), &media(1, 0, 0, 1), 1000, Some(Ecn::Ect1));
        r.on_media(ms(20), &media(2, 0, 0, 1), 1000, Some(Ecn::Ect1));
        assert!(r.feedback_due(ms(25), ms(15), Duration::from_millis(10)));
        assert_eq!(r.make_feedback(ms(25)).lost, 0);
    }

    #[test]
    fn a_receiver_that_cannot_read_ecn_reports_no_counts() {
        let mut r = Receiver::new(Instant::ZERO, Duration::from_millis(200), false);
        r.on_media(ms(1), &media(0, 0, 0, 1), 100, Some(Ecn::Ect1));
        assert_eq!(r.make_feedback(ms(2)).ecn, None);
        let mut r = rx();
        r.on_media(ms(1), &media(0, 0, 0, 1), 100, None);
        assert_eq!(r.make_feedback(ms(2)).ecn, None);
    }

    #[test]
    fn a_gap_between_complete_frames_over_the_threshold_is_a_stall() {
        let mut r = rx();
        let mut seq = 0;
        let mut frame = |r: &mut Receiver, t: u64| {
            r.on_media(ms(t), &media(seq, seq as u32, 0, 1), 1000, Some(Ecn::Ect1));
            seq += 1;
        };
        // 30 fps, then a 500 ms hole, then 30 fps again.
        for t in (0..300).step_by(33) {
            frame(&mut r, t);
        }
        for t in (800..1000).step_by(33) {
            frame(&mut r, t);
        }
        assert_eq!(
            r.stalls(),
            &[CallStall {
                start: ms(297),
                duration: Duration::from_millis(503)
            }]
        );
        let s = r.take_second(ms(1000));
        assert_eq!(s.frames, 10 + 7);
        assert_eq!(s.stall, Duration::from_millis(503));
        // Silence after the last frame becomes an ongoing stall, closed by finish.
        assert_eq!(r.take_second(ms(2000)).stall, Duration::from_millis(1000));
        let last = r.finish(ms(2500)).unwrap();
        assert_eq!(last.start, ms(998));
    }

    #[test]
    fn a_late_read_changes_neither_the_rtt_nor_when_a_frame_completed() {
        use crate::call::sender::echo_rtt;
        // A two-packet frame sent at 0 reaches the receiver's socket at 11 and 12 ms, the next
        // frame at 320 ms. The receiving process reads them at once, or 40 ms late (it waited
        // for a CPU); either way the stamp taken when the packet reached the socket comes with
        // it, and the feedback reports how long each packet was held since then.
        let run = |read_delay_ms: u64| {
            let mut r = rx();
            r.on_media(ms(11), &media(0, 0, 0, 2), 1000, Some(Ecn::Ect1));
            r.on_media(ms(12), &media(1, 0, 1, 2), 1000, Some(Ecn::Ect1));
            let fb = r.make_feedback(ms(12 + read_delay_ms));
            // The feedback needs 10 ms to reach the sender, which reads it late too: its RTT is
            // taken at the feedback's own arrival stamp.
            let fb_arrival = ms(12 + read_delay_ms + 10);
            let rtts: Vec<Duration> = fb
                .echoes
                .iter()
                .map(|e| echo_rtt(fb_arrival, e.send_ns, e.hold_us))
                .collect();
            r.on_media(ms(320), &media(2, 1, 0, 1), 1000, Some(Ecn::Ect1));
            let second = r.take_second(ms(1000));
            (rtts, r.stalls().to_vec(), second)
        };
        let (prompt, late) = (run(0), run(40));
        assert_eq!(
            prompt.0,
            [Duration::from_micros(21_000), Duration::from_micros(21_999)]
        );
        assert_eq!(late, prompt);
        // The stall is counted from the frame's last packet's arrival.
        assert_eq!(prompt.1[0].start, ms(12));
        assert_eq!(prompt.2.frames, 2);
    }

    #[test]
    fn a_frame_counts_in_the_second_its_last_packet_arrived_in() {
        let mut r = rx();
        // Frame 0 completes at 990 ms, frame 1 at 1010 ms; the process reads both only at
        // 1030 ms, and then closes the second that ended at 1000 ms.
        r.on_media(ms(980), &media(0, 0, 0, 2), 1000, Some(Ecn::Ect1));
        r.on_media(ms(990), &media(1, 0, 1, 2), 1000, Some(Ecn::Ect1));
        r.on_media(ms(1010), &media(2, 1, 0, 1), 500, Some(Ecn::Ect1));
        let first = r.take_second(ms(1000));
        assert_eq!((first.frames, first.bytes), (1, 2000));
        let second = r.take_second(ms(2000));
        assert_eq!((second.frames, second.bytes), (1, 500));
    }

    #[test]
    fn an_incomplete_frame_is_abandoned_when_a_newer_one_completes() {
        let mut r = rx();
        r.on_media(ms(1), &media(0, 0, 0, 2), 1000, Some(Ecn::Ect1));
        // Packet 1 of frame 0 is lost; frame 1 completes.
        assert!(r.on_media(ms(40), &media(2, 1, 0, 1), 1000, Some(Ecn::Ect1)));
        // The straggler of frame 0 arrives: too late to be shown.
        assert!(!r.on_media(ms(41), &media(1, 0, 1, 2), 1000, Some(Ecn::Ect1)));
        assert_eq!(r.frames_completed(), 1);
    }
}
