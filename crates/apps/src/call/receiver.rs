//! The receiving half of a call endpoint, pure: counts what arrives (packets, bytes, ECN
//! codepoints, losses by sequence gaps), reassembles frames, decodes them as a video decoder
//! does, asks for a keyframe when the picture freezes, detects stalls and freezes, and builds
//! the feedback that goes back to the sender.
//!
//! A frame is complete when all its packets arrived (no retransmission, no FEC); an unfinished
//! frame is abandoned once a newer one completes. A stall is a gap longer than the threshold
//! between two complete frames: the network's view.
//!
//! The decoder is the viewer's view. Frames come in groups of pictures: a keyframe, then frames
//! that each depend on the one before (as a real-time encoder makes them, one reference frame,
//! no B-frames). A complete frame is shown only if it is a keyframe or the frame before it was
//! shown; a lost packet therefore freezes the picture until the next keyframe. On the first
//! frame it cannot show, the receiver sends a picture-loss indication at once (RFC 4585 §6.3.1;
//! a two-party session has no dither, `T_dither_max = 0`, §3.4, and may send it as early
//! feedback, §3.5); while the picture stays frozen it asks again every [`KEYFRAME_WAIT`] unless
//! a keyframe's packets arrived within that time, as WebRTC's receiver does (its
//! `kMaxWaitForKeyFrame`, 200 ms, and its "is a keyframe being received" test).
//!
//! A freeze is a gap between two shown frames at least `max(3 × avg, avg + 150 ms)`, `avg` the
//! mean gap of the last 30 shown frames: the W3C WebRTC statistics' `freezeCount` and
//! `totalFreezesDuration` (webrtc-stats, RTCInboundRtpStreamStats), counted once five gaps are
//! known, as libwebrtc does. Before the first shown frame nothing is a stall or a freeze (the
//! call is still starting).
//!
//! Not here: sockets and clocks (the `call` loop), the congestion response and the keyframes
//! themselves (the sender side).

use std::collections::{BTreeMap, VecDeque};

use congestion::EcnCounts;
use wire::{Duration, Ecn, Instant};

use super::packet::{Echo, FeedbackPacket, Media, MAX_ECHOES};

/// Frames being reassembled at once; older unfinished ones are abandoned.
const MAX_FRAMES_IN_PROGRESS: usize = 64;

/// How long a frozen receiver waits for a keyframe before asking again, and how recent a
/// keyframe's packet must be for it to wait on: WebRTC's `kMaxWaitForKeyFrame`.
pub const KEYFRAME_WAIT: Duration = Duration::from_millis(200);

/// Shown frames whose mean gap sets the freeze threshold (webrtc-stats: the last 30).
const FREEZE_AVG_FRAMES: usize = 30;
/// Gaps known before a freeze can be counted (libwebrtc's video quality observer: 5).
const FREEZE_MIN_GAPS: usize = 5;
/// A freeze is at least this much longer than the mean gap (webrtc-stats: 150 ms).
const FREEZE_MIN_EXTRA: Duration = Duration::from_millis(150);

/// A stretch without a new picture: a stall (no complete frame) or a freeze (no shown frame).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallStall {
    pub start: Instant,
    pub duration: Duration,
}

/// What a second of receiving looked like: the packets that arrived in it, and the frames whose
/// last packet did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RxSecond {
    /// Complete frames.
    pub frames: u64,
    /// Frames the decoder showed.
    pub shown: u64,
    pub bytes: u64,
    /// Stall time inside the second, as known at its end.
    pub stall: Duration,
    /// Freeze time inside the second, as known at its end.
    pub freeze: Duration,
}

#[derive(Clone, Debug)]
struct FrameInProgress {
    got: Vec<bool>,
    missing: usize,
}

/// One packet handled since the open second began.
#[derive(Clone, Copy, Debug)]
struct Arrival {
    at: Instant,
    bytes: u64,
    completed: bool,
    shown: bool,
}

/// The decoder: which frame the picture shows, and whether it waits for a keyframe.
#[derive(Clone, Debug, Default)]
struct Decoder {
    /// The newest frame shown: the next delta frame must follow it.
    last_shown: Option<u32>,
    shown: u64,
    /// Since the first frame it could not show, until a keyframe is shown.
    keyframe_needed: bool,
    /// The last picture-loss indication of this freeze.
    last_pli_at: Option<Instant>,
    plis: u64,
    /// When a keyframe's packet last arrived.
    last_keyframe_packet_at: Option<Instant>,
}

/// The gaps between events (complete or shown frames) that are long enough to count.
#[derive(Clone, Debug, Default)]
struct Gaps {
    last: Option<Instant>,
    /// The latest gaps, for a threshold that follows the frame rate (freezes only).
    recent: VecDeque<Duration>,
    list: Vec<CallStall>,
}

/// How a gap is judged long enough.
#[derive(Clone, Copy, Debug)]
enum Threshold {
    /// Longer than this.
    Fixed(Duration),
    /// The webrtc-stats freeze rule on the recent gaps.
    Freeze,
}

impl Gaps {
    /// The shortest gap that counts now, `None` while too few gaps are known to tell.
    fn threshold(&self, t: Threshold) -> Option<Duration> {
        match t {
            Threshold::Fixed(d) => Some(d + Duration::from_nanos(1)),
            Threshold::Freeze => {
                if self.recent.len() < FREEZE_MIN_GAPS {
                    return None;
                }
                let sum: Duration = self.recent.iter().copied().sum();
                let avg = sum / self.recent.len() as u32;
                Some((avg * 3).max(avg + FREEZE_MIN_EXTRA))
            }
        }
    }

    fn on_event(&mut self, now: Instant, t: Threshold) {
        if let Some(prev) = self.last {
            let gap = now - prev;
            if self.threshold(t).is_some_and(|min| gap >= min) {
                self.list.push(CallStall {
                    start: prev,
                    duration: gap,
                });
            }
            self.recent.push_back(gap);
            if self.recent.len() > FREEZE_AVG_FRAMES {
                self.recent.pop_front();
            }
        }
        self.last = Some(now);
    }

    /// Where a gap in progress at `now` started, if it counts already.
    fn current_start(&self, now: Instant, t: Threshold) -> Option<Instant> {
        let last = self.last?;
        self.threshold(t)
            .filter(|min| now - last >= *min)
            .map(|_| last)
    }

    /// Gap time inside `[from, to)`: known gaps, plus the current one once it counts.
    fn time_between(&self, from: Instant, to: Instant, t: Threshold) -> Duration {
        let overlap = |s: Instant, e: Instant| e.min(to).saturating_duration_since(s.max(from));
        let mut total: Duration = self
            .list
            .iter()
            .rev()
            .take_while(|s| s.start + s.duration > from)
            .map(|s| overlap(s.start, s.start + s.duration))
            .sum();
        if let Some(last) = self.current_start(to, t) {
            total += overlap(last, to);
        }
        total
    }

    /// Closes a gap in progress at `now`, returning it.
    fn finish(&mut self, now: Instant, t: Threshold) -> Option<CallStall> {
        let start = self.current_start(now, t)?;
        let s = CallStall {
            start,
            duration: now - start,
        };
        self.list.push(s);
        self.last = Some(now);
        Some(s)
    }
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
    frames_completed: u64,
    stalls: Gaps,
    decoder: Decoder,
    freezes: Gaps,
    /// Each packet handled since the open second began. The second it belongs to is decided by
    /// its arrival, not by when it was handled: a packet that arrived before a second's end may
    /// be read after the second was closed, or one that arrived after it before.
    arrivals: Vec<Arrival>,
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
            frames_completed: 0,
            stalls: Gaps::default(),
            decoder: Decoder::default(),
            freezes: Gaps::default(),
            arrivals: Vec::new(),
            second_start: now,
        }
    }

    fn stall_rule(&self) -> Threshold {
        Threshold::Fixed(self.stall_threshold)
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
        if m.keyframe {
            self.decoder.last_keyframe_packet_at = Some(now);
        }
        let completed = self.reassemble(now, m);
        let shown = completed && self.decode(now, m);
        self.arrivals.push(Arrival {
            at: now,
            bytes: len as u64,
            completed,
            shown,
        });
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
        let rule = self.stall_rule();
        self.stalls.on_event(now, rule);
        true
    }

    /// The decoder meets the frame of `m`, complete at `now`: shows it if it can. A frame it
    /// cannot show starts a freeze and a request for a keyframe.
    fn decode(&mut self, now: Instant, m: &Media) -> bool {
        let d = &mut self.decoder;
        let follows = d
            .last_shown
            .is_some_and(|last| m.frame == last.wrapping_add(1));
        if !(m.keyframe || (follows && !d.keyframe_needed)) {
            if !d.keyframe_needed {
                d.keyframe_needed = true;
                d.last_pli_at = None;
            }
            return false;
        }
        if m.keyframe {
            d.keyframe_needed = false;
            d.last_pli_at = None;
        }
        d.last_shown = Some(m.frame);
        d.shown += 1;
        self.freezes.on_event(now, Threshold::Freeze);
        true
    }

    /// When a picture-loss indication is due: at once when the picture froze, then every
    /// [`KEYFRAME_WAIT`] while it stays frozen, but not within [`KEYFRAME_WAIT`] of a keyframe's
    /// packet (one is on its way). `None` while the picture runs.
    pub fn next_pli_at(&self) -> Option<Instant> {
        let d = &self.decoder;
        if !d.keyframe_needed {
            return None;
        }
        let Some(last) = d.last_pli_at else {
            return Some(Instant::ZERO);
        };
        let mut at = last + KEYFRAME_WAIT;
        if let Some(k) = d.last_keyframe_packet_at {
            at = at.max(k + KEYFRAME_WAIT);
        }
        Some(at)
    }

    /// The number of the picture-loss indication to send at `now`, if one is due.
    pub fn poll_pli(&mut self, now: Instant) -> Option<u64> {
        if self.next_pli_at()? > now {
            return None;
        }
        let d = &mut self.decoder;
        d.last_pli_at = Some(now);
        d.plis += 1;
        Some(d.plis)
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
        self.arrivals.retain(|a| {
            if a.at >= now {
                return true;
            }
            s.bytes += a.bytes;
            s.frames += u64::from(a.completed);
            s.shown += u64::from(a.shown);
            false
        });
        s.stall = self
            .stalls
            .time_between(self.second_start, now, self.stall_rule());
        s.freeze = self
            .freezes
            .time_between(self.second_start, now, Threshold::Freeze);
        self.second_start = now;
        s
    }

    /// Ends the call at `now`: a stall and a freeze in progress are closed there; the stall is
    /// returned.
    pub fn finish(&mut self, now: Instant) -> Option<CallStall> {
        self.freezes.finish(now, Threshold::Freeze);
        let rule = self.stall_rule();
        self.stalls.finish(now, rule)
    }

    pub fn stalls(&self) -> &[CallStall] {
        &self.stalls.list
    }
    /// Gaps between shown frames long enough to be freezes.
    pub fn freezes(&self) -> &[CallStall] {
        &self.freezes.list
    }
    pub fn frames_completed(&self) -> u64 {
        self.frames_completed
    }
    /// Frames the decoder showed.
    pub fn frames_shown(&self) -> u64 {
        self.decoder.shown
    }
    /// Picture-loss indications sent.
    pub fn plis(&self) -> u64 {
        self.decoder.plis
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

    fn key(seq: u64, frame: u32, index: u16, count: u16) -> Media {
        Media {
            keyframe: true,
            ..media(seq, frame, index, count)
        }
    }

    /// One-packet frames every 33 ms from `t0`, frame numbers from `first`, sequence numbers
    /// from `seq`, keyframes where `is_key` says; `lost` frames never arrive.
    fn frames(
        r: &mut Receiver,
        t0: u64,
        first: u32,
        n: u32,
        is_key: impl Fn(u32) -> bool,
        lost: &[u32],
    ) {
        for f in first..first + n {
            if lost.contains(&f) {
                continue;
            }
            let m = if is_key(f) {
                key(u64::from(f), f, 0, 1)
            } else {
                media(u64::from(f), f, 0, 1)
            };
            r.on_media(
                ms(t0 + 33 * u64::from(f - first)),
                &m,
                1000,
                Some(Ecn::Ect1),
            );
        }
    }

    #[test]
    fn a_lost_frame_freezes_the_picture_until_a_keyframe_though_later_frames_complete() {
        let mut r = rx();
        // Frame 0 a keyframe; frame 10 lost; 11..29 arrive complete; 30 is a keyframe.
        frames(&mut r, 0, 0, 40, |f| f == 0 || f == 30, &[10]);
        assert_eq!(r.frames_completed(), 39);
        assert_eq!(r.frames_shown(), 10 + 10);
        // Complete frames came every 33 or 66 ms: no stall; the picture stood still from
        // frame 9 (297 ms) to the keyframe (990 ms).
        assert!(r.stalls().is_empty());
        assert_eq!(
            r.freezes(),
            &[CallStall {
                start: ms(297),
                duration: Duration::from_millis(693)
            }]
        );
        let s = r.take_second(ms(1000));
        assert_eq!((s.frames, s.shown), (30, 11));
        assert_eq!(s.freeze, Duration::from_millis(693));
    }

    #[test]
    fn the_first_frame_it_cannot_show_asks_for_a_keyframe_at_once_then_every_200_ms() {
        let mut r = rx();
        frames(&mut r, 0, 0, 5, |f| f == 0, &[]);
        assert_eq!(r.next_pli_at(), None);
        assert_eq!(r.poll_pli(ms(200)), None);
        // Frame 5 lost; frame 6 completes at 198 ms and cannot be shown.
        frames(&mut r, 198, 6, 1, |_| false, &[]);
        assert!(r.next_pli_at().is_some_and(|t| t <= ms(198)));
        assert_eq!(r.poll_pli(ms(198)), Some(1));
        assert_eq!(r.poll_pli(ms(300)), None);
        assert_eq!(r.next_pli_at(), Some(ms(398)));
        assert_eq!(r.poll_pli(ms(398)), Some(2));
        // A packet of the keyframe arrives at 450 ms, the rest is lost: no request within
        // 200 ms of it, then the next one.
        r.on_media(ms(450), &key(20, 12, 0, 3), 1000, Some(Ecn::Ect1));
        assert_eq!(r.next_pli_at(), Some(ms(650)));
        assert_eq!(r.poll_pli(ms(649)), None);
        assert_eq!(r.poll_pli(ms(650)), Some(3));
        // The next keyframe arrives whole: the picture runs, nothing more is asked.
        assert!(r.on_media(ms(700), &key(30, 13, 0, 1), 1000, Some(Ecn::Ect1)));
        assert_eq!(r.next_pli_at(), None);
        assert!(r.on_media(ms(733), &media(31, 14, 0, 1), 1000, Some(Ecn::Ect1)));
        assert_eq!(r.frames_shown(), 5 + 2);
        assert_eq!(r.plis(), 3);
        // A new loss is asked for at once again.
        r.on_media(ms(800), &media(33, 16, 0, 1), 1000, Some(Ecn::Ect1));
        assert_eq!(r.poll_pli(ms(800)), Some(4));
    }

    #[test]
    fn a_freeze_is_a_gap_between_shown_frames_of_three_times_the_mean_or_150_ms_more() {
        // At 30 fps the mean gap is 33 ms: a freeze is 183 ms or more.
        let gap = |hole_ms: u64| {
            let mut r = rx();
            frames(&mut r, 0, 0, 10, |f| f == 0, &[]);
            // The next frames are delayed by the hole and arrive at the same pace.
            let t = 297 + hole_ms;
            r.on_media(ms(t), &media(10, 10, 0, 1), 1000, Some(Ecn::Ect1));
            r.freezes().to_vec()
        };
        assert!(gap(149).is_empty());
        assert_eq!(gap(186).len(), 1);
        assert_eq!(gap(186)[0].duration, Duration::from_millis(186));
        // Too few gaps known: the start of a call is not judged.
        let mut r = rx();
        frames(&mut r, 0, 0, 3, |f| f == 0, &[]);
        r.on_media(ms(1000), &media(3, 3, 0, 1), 1000, Some(Ecn::Ect1));
        assert!(r.freezes().is_empty());
        // A freeze still going at the end of the call is closed there.
        let mut r = rx();
        frames(&mut r, 0, 0, 10, |f| f == 0, &[]);
        assert_eq!(
            r.take_second(ms(1000)).freeze,
            Duration::from_millis(1000 - 297)
        );
        r.finish(ms(1500));
        assert_eq!(
            r.freezes(),
            &[CallStall {
                start: ms(297),
                duration: Duration::from_millis(1203)
            }]
        );
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
