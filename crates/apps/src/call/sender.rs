//! The sending half of a call endpoint, pure: a synthetic video encoder that produces a frame
//! every `1/fps` sized from the controller's target rate (keyframes bigger), split into
//! packets; a send queue drained at the pacing rate; and the conversion of the peer's
//! cumulative feedback into what the controller wants (new packets, marks, losses, RTTs).
//!
//! Like a real-time encoder, it skips a frame when the packets of earlier frames are still
//! queued for longer than `max_queue_delay` at the pacing rate: late video is worse than
//! fewer frames. Each frame but a keyframe depends on the frame encoded before it, so the
//! receiver's picture freezes after a loss until a keyframe; a picture-loss indication from
//! the receiver makes the next frame a keyframe, unless one was made for a request less than
//! [`MIN_KEYFRAME_REQUEST_INTERVAL`] ago (WebRTC's sender ignores such repeats).
//! Not here: sockets, the control law (crate `congestion`).

use std::collections::VecDeque;

use congestion::{EcnCounts, Feedback};
use wire::{Duration, Instant};

use super::packet::{FeedbackPacket, MEDIA_HEADER_LEN};

/// How long after answering a keyframe request the encoder ignores the next ones: WebRTC's
/// `kMinKeyframeSendIntervalMs` (video/encoder_rtcp_feedback.cc), 300 ms.
pub const MIN_KEYFRAME_REQUEST_INTERVAL: Duration = Duration::from_millis(300);

/// What the encoder produces.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct VideoParams {
    pub fps: u32,
    /// A keyframe every this long (the first frame is one).
    pub keyframe_interval: Duration,
    /// A keyframe's size relative to a normal frame at the same rate.
    pub keyframe_factor: f64,
    /// UDP payload per packet, header included.
    pub packet_bytes: usize,
    /// Skip a frame when the queue would take longer than this to drain.
    pub max_queue_delay: Duration,
}

/// One packet waiting to be sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Queued {
    pub frame: u32,
    pub index: u16,
    pub count: u16,
    pub keyframe: bool,
    pub bytes: usize,
}

/// The encoder and its send queue.
#[derive(Clone, Debug)]
pub struct VideoSource {
    params: VideoParams,
    next_frame_at: Instant,
    next_keyframe_at: Instant,
    frame: u32,
    queue: VecDeque<Queued>,
    queued_bytes: usize,
    /// A keyframe was asked for and not made yet.
    keyframe_requested: bool,
    /// When the last request that was answered came.
    last_request_answered: Option<Instant>,
    pub frames_sent: u64,
    pub frames_skipped: u64,
    /// Keyframes made, the first one and those answering requests included.
    pub keyframes_sent: u64,
}

impl VideoSource {
    pub fn new(params: VideoParams, now: Instant) -> VideoSource {
        VideoSource {
            params,
            next_frame_at: now,
            next_keyframe_at: now,
            frame: 0,
            queue: VecDeque::new(),
            queued_bytes: 0,
            keyframe_requested: false,
            last_request_answered: None,
            frames_sent: 0,
            frames_skipped: 0,
            keyframes_sent: 0,
        }
    }

    /// The receiver asked for a keyframe at `now` (a picture-loss indication): the next frame
    /// encoded is one, unless a request was answered less than
    /// [`MIN_KEYFRAME_REQUEST_INTERVAL`] ago. Returns whether the request was taken.
    pub fn request_keyframe(&mut self, now: Instant) -> bool {
        if self
            .last_request_answered
            .is_some_and(|t| now < t + MIN_KEYFRAME_REQUEST_INTERVAL)
        {
            return false;
        }
        self.last_request_answered = Some(now);
        self.keyframe_requested = true;
        true
    }

    fn frame_interval(&self) -> Duration {
        Duration::from_secs(1) / self.params.fps.max(1)
    }

    /// Starts the camera at `now`: the first frame, a keyframe, is due at once. A listener
    /// calls this when its caller appears, so that the time it waited is no backlog of frames.
    pub fn restart(&mut self, now: Instant) {
        self.next_frame_at = now;
        self.next_keyframe_at = now;
    }

    /// When the next frame is due.
    pub fn next_frame_at(&self) -> Instant {
        self.next_frame_at
    }

    /// Encodes the frames due by `now`, if any, at `rate_bps`, and queues their packets (or
    /// skips one when the queue is too long at `pacing_bps`). Returns whether a frame was
    /// queued.
    ///
    /// Frames are captured on a fixed grid, as a camera does whether or not the process runs:
    /// a process that got a CPU late encodes the frames captured meanwhile, one after the
    /// other, except those older than `max_queue_delay`, which a real-time encoder would no
    /// longer send (skipped).
    pub fn poll_frame(&mut self, now: Instant, rate_bps: u64, pacing_bps: u64) -> bool {
        let mut queued = false;
        while self.next_frame_at <= now {
            let captured = self.next_frame_at;
            self.next_frame_at += self.frame_interval();
            if now - captured > self.params.max_queue_delay {
                self.frames_skipped += 1;
                continue;
            }
            queued |= self.encode(now, rate_bps, pacing_bps);
        }
        queued
    }

    /// Encodes one frame at `now` (see [`VideoSource::poll_frame`]).
    fn encode(&mut self, now: Instant, rate_bps: u64, pacing_bps: u64) -> bool {
        let keyframe = now >= self.next_keyframe_at || self.keyframe_requested;
        let backlog = wire::Rate::from_bits_per_sec(pacing_bps.max(1))
            .serialization_time(self.queued_bytes as u64);
        // A keyframe is never skipped: the decoder needs it.
        if !keyframe && backlog > self.params.max_queue_delay {
            self.frames_skipped += 1;
            return false;
        }
        if keyframe {
            self.next_keyframe_at = now + self.params.keyframe_interval;
            self.keyframe_requested = false;
            self.keyframes_sent += 1;
        }
        let mut bytes = rate_bps as f64 / 8.0 / f64::from(self.params.fps.max(1));
        if keyframe {
            bytes *= self.params.keyframe_factor;
        }
        let payload = self
            .params
            .packet_bytes
            .saturating_sub(MEDIA_HEADER_LEN)
            .max(1);
        let total = (bytes as usize).max(payload / 2);
        let count = total.div_ceil(payload).clamp(1, usize::from(u16::MAX));
        let per_packet = total.div_ceil(count) + MEDIA_HEADER_LEN;
        for index in 0..count {
            self.queue.push_back(Queued {
                frame: self.frame,
                index: index as u16,
                count: count as u16,
                keyframe,
                bytes: per_packet.min(self.params.packet_bytes),
            });
            self.queued_bytes += per_packet;
        }
        self.frame = self.frame.wrapping_add(1);
        self.frames_sent += 1;
        true
    }

    /// The next packet to send, removed from the queue.
    pub fn pop(&mut self) -> Option<Queued> {
        let q = self.queue.pop_front()?;
        self.queued_bytes = self.queued_bytes.saturating_sub(q.bytes);
        Some(q)
    }

    pub fn has_queued(&self) -> bool {
        !self.queue.is_empty()
    }
}

/// Turns the peer's cumulative feedback into per-feedback news for the controller.
#[derive(Clone, Debug, Default)]
pub struct FeedbackTracker {
    last: Option<FeedbackPacket>,
}

impl FeedbackTracker {
    /// The news in `fb`, or `None` if it is older than one already seen (reordered).
    pub fn on_feedback(&mut self, fb: &FeedbackPacket) -> Option<Feedback> {
        let prev = match &self.last {
            Some(p) if fb.fb_seq <= p.fb_seq => return None,
            Some(p) => p.clone(),
            None => FeedbackPacket::default(),
        };
        let ecn = fb
            .ecn
            .map(|c| c.since(&prev.ecn.unwrap_or(EcnCounts::default())));
        let news = Feedback {
            acked_packets: fb.received.saturating_sub(prev.received),
            acked_bytes: fb.received_bytes.saturating_sub(prev.received_bytes),
            lost_packets: fb.lost.saturating_sub(prev.lost),
            ecn,
            rtt: None,
        };
        self.last = Some(FeedbackPacket {
            echoes: Vec::new(),
            ..fb.clone()
        });
        Some(news)
    }
}

/// RTT of one echo received at `now`: `now − send − hold` (never negative).
pub fn echo_rtt(now: Instant, send_ns: u64, hold_us: u32) -> Duration {
    (now - Instant::from_nanos(send_ns)).saturating_sub(Duration::from_micros(u64::from(hold_us)))
}

/// When the echoed packet arrived, on the receiver's clock: `rx_ns − hold`.
pub fn echo_arrival(rx_ns: u64, hold_us: u32) -> Instant {
    Instant::from_nanos(rx_ns) - Duration::from_micros(u64::from(hold_us))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::call::packet::Echo;

    fn params() -> VideoParams {
        VideoParams {
            fps: 30,
            keyframe_interval: Duration::from_secs(2),
            keyframe_factor: 3.0,
            packet_bytes: 1200,
            max_queue_delay: Duration::from_millis(100),
        }
    }

    fn drain(v: &mut VideoSource) -> Vec<Queued> {
        std::iter::from_fn(|| v.pop()).collect()
    }

    #[test]
    fn frames_follow_the_rate_and_keyframes_are_bigger() {
        let mut v = VideoSource::new(params(), Instant::ZERO);
        // 3.6 Mbit/s at 30 fps: 15 kB a frame; the first is a keyframe of 45 kB.
        assert!(v.poll_frame(Instant::ZERO, 3_600_000, 10_000_000));
        let key: usize = drain(&mut v)
            .iter()
            .map(|q| q.bytes - MEDIA_HEADER_LEN)
            .sum();
        assert!((45_000..45_000 + 1200).contains(&key), "{key}");
        assert!(!v.poll_frame(Instant::from_millis(20), 3_600_000, 10_000_000));
        assert!(v.poll_frame(Instant::from_millis(34), 3_600_000, 10_000_000));
        let pkts = drain(&mut v);
        let bytes: usize = pkts.iter().map(|q| q.bytes - MEDIA_HEADER_LEN).sum();
        assert!((15_000..15_000 + 1200).contains(&bytes), "{bytes}");
        assert!(pkts
            .iter()
            .all(|q| q.bytes <= 1200 && !q.keyframe && q.frame == 1));
        assert_eq!(pkts.len(), usize::from(pkts[0].count));
        assert_eq!(v.frames_sent, 2);
    }

    #[test]
    fn a_frame_is_skipped_while_the_queue_is_too_long_to_drain() {
        let mut v = VideoSource::new(params(), Instant::ZERO);
        // A 1 Mbit/s pacing rate cannot drain a 8 Mbit/s keyframe (100 kB) in 100 ms.
        assert!(v.poll_frame(Instant::ZERO, 8_000_000, 1_000_000));
        assert!(!v.poll_frame(Instant::from_millis(34), 8_000_000, 1_000_000));
        assert_eq!(v.frames_skipped, 1);
        drain(&mut v);
        assert!(v.poll_frame(Instant::from_millis(67), 8_000_000, 1_000_000));
    }

    #[test]
    fn a_late_process_encodes_the_frames_captured_meanwhile_unless_too_old() {
        let mut v = VideoSource::new(params(), Instant::ZERO);
        assert!(v.poll_frame(Instant::ZERO, 1_000_000, 100_000_000));
        // 80 ms late: the frames captured at 33 and 67 ms are both encoded now.
        assert!(v.poll_frame(Instant::from_millis(80), 1_000_000, 100_000_000));
        let frames: Vec<u32> = drain(&mut v).iter().map(|q| q.frame).collect();
        assert_eq!(frames.first(), Some(&0));
        assert_eq!(frames.last(), Some(&2));
        assert_eq!((v.frames_sent, v.frames_skipped), (3, 0));
        // At 290 ms: the frames of 100, 133 and 167 ms are over 100 ms old and skipped; those
        // of 200, 233 and 267 ms are encoded.
        assert!(v.poll_frame(Instant::from_millis(290), 1_000_000, 100_000_000));
        assert_eq!((v.frames_sent, v.frames_skipped), (6, 3));
        assert_eq!(v.next_frame_at(), Instant::from_nanos(9 * 33_333_333));
        // A listener whose caller appears at 3 s starts its camera then: no frame of the wait
        // is encoded or counted as skipped.
        drain(&mut v);
        v.restart(Instant::from_secs(3));
        assert!(v.poll_frame(Instant::from_secs(3), 1_000_000, 100_000_000));
        assert_eq!((v.frames_sent, v.frames_skipped), (7, 3));
        assert!(drain(&mut v)[0].keyframe);
    }

    #[test]
    fn a_keyframe_request_makes_the_next_frame_a_keyframe_and_repeats_within_300_ms_are_ignored() {
        let mut v = VideoSource::new(params(), Instant::ZERO);
        let at = |ms| Instant::from_millis(ms);
        assert!(v.poll_frame(at(0), 1_000_000, 100_000_000));
        assert!(drain(&mut v)[0].keyframe);
        assert!(v.poll_frame(at(34), 1_000_000, 100_000_000));
        assert!(!drain(&mut v)[0].keyframe);
        // Asked at 40 ms: the frame of 67 ms is a keyframe, of the keyframe's size.
        assert!(v.request_keyframe(at(40)));
        assert!(v.poll_frame(at(67), 1_000_000, 100_000_000));
        let key = drain(&mut v);
        assert!(key.iter().all(|q| q.keyframe));
        assert_eq!(key.len(), 11);
        // Asked again at 300 ms, 260 ms after the answered request: ignored.
        assert!(!v.request_keyframe(at(300)));
        assert!(v.poll_frame(at(334), 1_000_000, 100_000_000));
        assert!(!drain(&mut v)[0].keyframe);
        // At 340 ms, 300 ms after: taken.
        assert!(v.request_keyframe(at(340)));
        assert!(v.poll_frame(at(367), 1_000_000, 100_000_000));
        assert!(drain(&mut v)[0].keyframe);
        assert_eq!(v.keyframes_sent, 3);
    }

    #[test]
    fn feedback_news_is_the_difference_and_stale_feedback_is_ignored() {
        let mut t = FeedbackTracker::default();
        let fb = |seq, received, lost, ce| FeedbackPacket {
            fb_seq: seq,
            received,
            received_bytes: received * 1000,
            lost,
            ecn: Some(EcnCounts {
                ect1: received - ce,
                ce,
                ..EcnCounts::default()
            }),
            rx_ns: 0,
            echoes: vec![Echo {
                send_ns: 1,
                hold_us: 1,
            }],
        };
        let n = t.on_feedback(&fb(1, 10, 0, 1)).unwrap();
        assert_eq!(
            (n.acked_packets, n.lost_packets, n.ecn.unwrap().ce),
            (10, 0, 1)
        );
        let n = t.on_feedback(&fb(3, 25, 2, 4)).unwrap();
        assert_eq!(
            (n.acked_packets, n.acked_bytes, n.lost_packets),
            (15, 15_000, 2)
        );
        assert_eq!(n.ecn.unwrap().ce, 3);
        assert_eq!(t.on_feedback(&fb(2, 20, 1, 2)), None);
    }

    #[test]
    fn echo_rtt_subtracts_the_receivers_hold_time() {
        let rtt = echo_rtt(Instant::from_millis(50), 10_000_000, 5_000);
        assert_eq!(rtt, Duration::from_millis(35));
        assert_eq!(
            echo_rtt(Instant::from_millis(1), 10_000_000, 0),
            Duration::ZERO
        );
        assert_eq!(echo_arrival(50_000_000, 5_000), Instant::from_millis(45));
    }
}
