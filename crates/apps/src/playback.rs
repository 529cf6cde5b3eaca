//! The stream receiver's model of a video player, and the gap statistics of in-order delivery,
//! as pure functions of `(now, bytes)` so that they can be tested in simulated time.
//!
//! [`Playback`]: bytes become media time at the stream's bitrate (`bytes × 8 / bitrate`).
//! Playback starts once `startup` of media is buffered, then consumes media in real time. When
//! the buffer runs dry before the end of the stream, a stall begins at the exact instant it ran
//! dry (computed, not observed at the next read); it ends when `rebuffer` of media is buffered
//! again. A buffer that runs dry after the end of the stream is the end of the video, not a
//! stall.
//!
//! [`Gaps`]: the time between consecutive reads that returned data, the application-level view
//! of head-of-line blocking and queue bursts; the longest gap is the key bufferbloat metric.
//!
//! Neither model reads a clock or a socket; the `stream` program feeds them.

use wire::{Duration, Instant, Rate};

/// How the player behaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlaybackParams {
    /// The media bitrate: bytes received become media seconds at this rate.
    pub bitrate: Rate,
    /// Media buffered before playback first starts.
    pub startup: Duration,
    /// Media buffered before playback resumes after a stall.
    pub rebuffer: Duration,
}

/// A period during which the player had started and then had nothing to show.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stall {
    pub start: Instant,
    pub duration: Duration,
    /// Still stalled when the model was finished.
    pub ongoing: bool,
}

/// What happened in one call to the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlaybackEvent {
    /// Playback started for the first time, `startup_delay` after the request.
    Started {
        at: Instant,
        startup_delay: Duration,
    },
    /// The buffer ran dry at `at`.
    StallStarted { at: Instant },
    /// Playback resumed; the stall is complete.
    StallEnded(Stall),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Waiting for the startup threshold (`stall_start == None`) or for the rebuffer
    /// threshold after running dry at `stall_start`.
    Buffering { stall_start: Option<Instant> },
    /// Playing since `since`, when the media position was `position_at_since`.
    Playing {
        since: Instant,
        position_at_since: Duration,
    },
    /// The stream ended and everything was played (or the model was finished).
    Ended,
}

/// The player model. Feed it with [`Playback::on_data`], end it with
/// [`Playback::on_end_of_stream`] or [`Playback::finish`].
#[derive(Clone, Debug)]
pub struct Playback {
    params: PlaybackParams,
    requested_at: Instant,
    bytes: u64,
    /// Media position reached, as of the last update.
    position: Duration,
    state: State,
    end_of_stream: bool,
    startup_delay: Option<Duration>,
    stalls: Vec<Stall>,
}

impl Playback {
    /// A player that asked for the stream at `requested_at`.
    pub fn new(params: PlaybackParams, requested_at: Instant) -> Playback {
        Playback {
            params,
            requested_at,
            bytes: 0,
            position: Duration::ZERO,
            state: State::Buffering { stall_start: None },
            end_of_stream: false,
            startup_delay: None,
            stalls: Vec::new(),
        }
    }

    /// Media time received so far: bytes × 8 / bitrate.
    pub fn media_received(&self) -> Duration {
        self.params.bitrate.serialization_time(self.bytes)
    }

    /// Media buffered and not yet played at `now` (does not change the model).
    pub fn buffered(&self, now: Instant) -> Duration {
        self.media_received().saturating_sub(self.position_at(now))
    }

    /// Whether the player is showing video at `now`.
    pub fn playing(&self, now: Instant) -> bool {
        match self.state {
            State::Playing { .. } => self.position_at(now) < self.media_received(),
            _ => false,
        }
    }

    fn position_at(&self, now: Instant) -> Duration {
        match self.state {
            State::Playing {
                since,
                position_at_since,
            } => (position_at_since + (now - since)).min(self.media_received()),
            _ => self.position,
        }
    }

    /// Plays up to `now`: a buffer that ran dry before `now` starts a stall at the instant it
    /// ran dry.
    pub fn advance(&mut self, now: Instant) -> Vec<PlaybackEvent> {
        let mut events = Vec::new();
        if let State::Playing {
            since,
            position_at_since,
        } = self.state
        {
            let media = self.media_received();
            let unplayed = media.saturating_sub(position_at_since);
            let dry_at = since + unplayed;
            if dry_at <= now {
                self.position = media;
                if self.end_of_stream {
                    self.state = State::Ended;
                } else {
                    self.state = State::Buffering {
                        stall_start: Some(dry_at),
                    };
                    events.push(PlaybackEvent::StallStarted { at: dry_at });
                }
            } else {
                self.position = position_at_since + (now - since);
            }
        }
        events
    }

    /// `bytes` of the stream were read at `now`.
    pub fn on_data(&mut self, now: Instant, bytes: u64) -> Vec<PlaybackEvent> {
        let mut events = self.advance(now);
        self.bytes += bytes;
        events.extend(self.maybe_resume(now));
        events
    }

    /// The sender closed the stream at `now`: whatever is buffered plays out, and running dry
    /// afterwards is the end of the video, not a stall.
    pub fn on_end_of_stream(&mut self, now: Instant) -> Vec<PlaybackEvent> {
        let mut events = self.advance(now);
        self.end_of_stream = true;
        match self.state {
            State::Buffering { .. } if self.buffered(now).is_zero() => {
                // Dry at the very end: the "stall" was only the wait for the end of file.
                self.state = State::Ended;
            }
            _ => events.extend(self.maybe_resume(now)),
        }
        events
    }

    /// Ends the model at `now` (the program stops): a stall in progress is recorded as ongoing.
    pub fn finish(&mut self, now: Instant) -> Vec<PlaybackEvent> {
        let mut events = self.advance(now);
        if let State::Buffering {
            stall_start: Some(start),
        } = self.state
        {
            let stall = Stall {
                start,
                duration: now - start,
                ongoing: true,
            };
            self.stalls.push(stall);
            events.push(PlaybackEvent::StallEnded(stall));
        }
        self.position = self.position_at(now);
        self.state = State::Ended;
        events
    }

    fn maybe_resume(&mut self, now: Instant) -> Vec<PlaybackEvent> {
        let State::Buffering { stall_start } = self.state else {
            return Vec::new();
        };
        let threshold = if stall_start.is_some() {
            self.params.rebuffer
        } else {
            self.params.startup
        };
        let buffered = self.buffered(now);
        // At the end of the stream there is nothing more to wait for: play what is there.
        let tail_to_play = self.end_of_stream && !buffered.is_zero();
        if buffered < threshold && !tail_to_play {
            return Vec::new();
        }
        self.state = State::Playing {
            since: now,
            position_at_since: self.position,
        };
        match stall_start {
            None => {
                let startup_delay = now - self.requested_at;
                self.startup_delay = Some(startup_delay);
                vec![PlaybackEvent::Started {
                    at: now,
                    startup_delay,
                }]
            }
            Some(start) => {
                let stall = Stall {
                    start,
                    duration: now - start,
                    ongoing: false,
                };
                self.stalls.push(stall);
                vec![PlaybackEvent::StallEnded(stall)]
            }
        }
    }

    /// Completed (and, after [`Playback::finish`], ongoing) stalls.
    pub fn stalls(&self) -> &[Stall] {
        &self.stalls
    }
    /// Time from request to first picture, once playback has started.
    pub fn startup_delay(&self) -> Option<Duration> {
        self.startup_delay
    }
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

/// Gaps between consecutive reads that returned data.
#[derive(Clone, Debug, Default)]
pub struct Gaps {
    last_read: Option<Instant>,
    longest: Option<(Duration, Instant)>,
    interval_max: Option<Duration>,
    /// Every gap, in milliseconds, for percentiles; capped so that a very long run stays
    /// bounded (the longest gap is tracked separately and never lost).
    samples_ms: Vec<f64>,
}

/// At most this many gap samples are kept for percentiles.
const MAX_GAP_SAMPLES: usize = 1_000_000;

impl Gaps {
    pub fn new() -> Gaps {
        Gaps::default()
    }

    /// A read returned data at `now`; the gap since the previous one, if there was one.
    pub fn on_read(&mut self, now: Instant) -> Option<Duration> {
        let gap = self.last_read.map(|t| now - t);
        self.last_read = Some(now);
        if let Some(g) = gap {
            if self.longest.is_none_or(|(l, _)| g > l) {
                self.longest = Some((g, now));
            }
            if self.interval_max.is_none_or(|m| g > m) {
                self.interval_max = Some(g);
            }
            if self.samples_ms.len() < MAX_GAP_SAMPLES {
                self.samples_ms.push(g.as_secs_f64() * 1e3);
            }
        }
        gap
    }

    /// The longest gap and the read that ended it.
    pub fn longest(&self) -> Option<(Duration, Instant)> {
        self.longest
    }

    /// The longest gap since the last call (for per-second lines).
    pub fn take_interval_max(&mut self) -> Option<Duration> {
        self.interval_max.take()
    }

    pub fn samples_ms(&self) -> &[f64] {
        &self.samples_ms
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 8 Mbit/s: one media second is 1 MB.
    const MB_PER_MEDIA_S: u64 = 1_000_000;

    fn params() -> PlaybackParams {
        PlaybackParams {
            bitrate: Rate::from_mbit(8),
            startup: Duration::from_secs(2),
            rebuffer: Duration::from_secs(1),
        }
    }

    fn ms(v: u64) -> Instant {
        Instant::from_millis(v)
    }

    #[test]
    fn playback_starts_once_the_startup_threshold_is_buffered() {
        let mut p = Playback::new(params(), Instant::ZERO);
        assert!(p.on_data(ms(500), MB_PER_MEDIA_S).is_empty());
        assert!(!p.playing(ms(600)));
        let ev = p.on_data(ms(900), MB_PER_MEDIA_S);
        assert_eq!(
            ev,
            vec![PlaybackEvent::Started {
                at: ms(900),
                startup_delay: Duration::from_millis(900)
            }]
        );
        assert!(p.playing(ms(1000)));
        assert_eq!(p.buffered(ms(1400)), Duration::from_millis(1500));
    }

    #[test]
    fn a_stall_starts_when_the_buffer_runs_dry_and_ends_at_the_rebuffer_threshold() {
        let mut p = Playback::new(params(), Instant::ZERO);
        p.on_data(ms(1000), 2 * MB_PER_MEDIA_S); // starts at 1 s with 2 s of media
                                                 // Nothing until 5 s: dry at 3 s, the stall starts exactly then.
        let ev = p.on_data(ms(5000), MB_PER_MEDIA_S / 2);
        assert_eq!(ev, vec![PlaybackEvent::StallStarted { at: ms(3000) }]);
        assert!(!p.playing(ms(5100)));
        // 1 s of media in total: the rebuffer threshold; playback resumes.
        let ev = p.on_data(ms(5500), MB_PER_MEDIA_S / 2);
        assert_eq!(
            ev,
            vec![PlaybackEvent::StallEnded(Stall {
                start: ms(3000),
                duration: Duration::from_millis(2500),
                ongoing: false
            })]
        );
        assert_eq!(p.stalls().len(), 1);
    }

    #[test]
    fn data_arriving_at_the_media_rate_never_stalls() {
        let mut p = Playback::new(params(), Instant::ZERO);
        // 250 ms chunks at exactly 8 Mbit/s, 20 s of them.
        for k in 0..80u64 {
            let ev = p.on_data(ms(250 * k + 40), MB_PER_MEDIA_S / 4);
            assert!(!ev
                .iter()
                .any(|e| matches!(e, PlaybackEvent::StallStarted { .. })));
        }
        p.finish(ms(20_040));
        assert!(p.stalls().is_empty());
        assert_eq!(p.startup_delay(), Some(Duration::from_millis(250 * 7 + 40)));
    }

    #[test]
    fn running_dry_after_the_end_of_stream_is_not_a_stall() {
        let mut p = Playback::new(params(), Instant::ZERO);
        p.on_data(ms(100), 3 * MB_PER_MEDIA_S);
        p.on_end_of_stream(ms(200));
        p.advance(ms(10_000));
        p.finish(ms(10_000));
        assert!(p.stalls().is_empty());
    }

    #[test]
    fn a_short_stream_plays_at_end_of_file_below_the_threshold() {
        let mut p = Playback::new(params(), Instant::ZERO);
        p.on_data(ms(100), MB_PER_MEDIA_S / 2);
        let ev = p.on_end_of_stream(ms(150));
        assert!(matches!(ev[..], [PlaybackEvent::Started { .. }]));
        assert!(p.playing(ms(300)));
    }

    #[test]
    fn a_stall_still_in_progress_at_the_end_is_recorded_as_ongoing() {
        let mut p = Playback::new(params(), Instant::ZERO);
        p.on_data(ms(0), 2 * MB_PER_MEDIA_S);
        p.finish(ms(3000));
        assert_eq!(
            p.stalls(),
            &[Stall {
                start: ms(2000),
                duration: Duration::from_millis(1000),
                ongoing: true
            }]
        );
    }

    #[test]
    fn gaps_are_measured_between_reads_and_the_longest_is_kept() {
        let mut g = Gaps::new();
        assert_eq!(g.on_read(ms(10)), None);
        assert_eq!(g.on_read(ms(20)), Some(Duration::from_millis(10)));
        assert_eq!(g.on_read(ms(520)), Some(Duration::from_millis(500)));
        assert_eq!(g.take_interval_max(), Some(Duration::from_millis(500)));
        assert_eq!(g.on_read(ms(530)), Some(Duration::from_millis(10)));
        assert_eq!(g.take_interval_max(), Some(Duration::from_millis(10)));
        assert_eq!(g.take_interval_max(), None);
        assert_eq!(g.longest(), Some((Duration::from_millis(500), ms(520))));
        assert_eq!(g.samples_ms(), &[10.0, 500.0, 10.0]);
    }
}
