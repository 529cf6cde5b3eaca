//! The connector's decisions, pure: which interface a request tries first, when a second
//! attempt races it (RFC 8305 §5), which attempt wins, and when the Better Route probe tries
//! the preferred interface again. Time is passed in; the socket loop in the parent module acts
//! on what these types say.

use std::time::Duration;

use wire::Instant;

/// One of the client's two interfaces: `Primary` is the preferred one (Wi-Fi), `Secondary`
/// the fallback (cellular).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Path {
    Primary,
    Secondary,
}

impl Path {
    pub fn other(self) -> Path {
        match self {
            Path::Primary => Path::Secondary,
            Path::Secondary => Path::Primary,
        }
    }
    fn index(self) -> usize {
        match self {
            Path::Primary => 0,
            Path::Secondary => 1,
        }
    }
}

/// What a [`Race`] wants done now.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Start an attempt over this path.
    Start(Path),
    /// Nothing to start before this instant (or before an attempt completes).
    WaitUntil(Instant),
    /// Nothing to start; wait for an attempt to complete or for the request's deadline.
    Wait,
    /// This attempt won: use it and cancel the other one, if started.
    Won(Path),
    /// Every attempt failed.
    Failed,
}

/// The connection attempts of one request. The first path starts at once; the other one
/// after the Connection Attempt Delay, or at once when the first fails (RFC 8305 §5: "starting
/// the next connection attempt ... once the previous attempt fails or the delay passes"). The
/// first attempt to connect wins.
#[derive(Clone, Debug)]
pub struct Race {
    first: Path,
    /// The second path and when it starts; `None` for a request that does not race.
    second: Option<(Path, Instant)>,
    started: [bool; 2],
    failed: [bool; 2],
    winner: Option<Path>,
}

impl Race {
    /// A race started at `now`, `first` at once and `second` (if any) `delay` later.
    pub fn new(now: Instant, first: Path, second: Option<Path>, delay: Duration) -> Race {
        Race {
            first,
            second: second.map(|p| (p, now + delay)),
            started: [false; 2],
            failed: [false; 2],
            winner: None,
        }
    }

    /// What to do at `now`; call again after doing it.
    pub fn poll(&mut self, now: Instant) -> Step {
        if let Some(w) = self.winner {
            return Step::Won(w);
        }
        if !self.started[self.first.index()] {
            self.started[self.first.index()] = true;
            return Step::Start(self.first);
        }
        match self.second {
            Some((p, at)) if !self.started[p.index()] => {
                if now >= at || self.failed[self.first.index()] {
                    self.started[p.index()] = true;
                    Step::Start(p)
                } else {
                    Step::WaitUntil(at)
                }
            }
            _ => {
                let all_failed = [Some(self.first), self.second.map(|s| s.0)]
                    .into_iter()
                    .flatten()
                    .all(|p| self.failed[p.index()]);
                if all_failed {
                    Step::Failed
                } else {
                    Step::Wait
                }
            }
        }
    }

    /// The attempt over `path` connected; the first to do so wins.
    pub fn connected(&mut self, path: Path) {
        if self.winner.is_none() && !self.failed[path.index()] {
            self.winner = Some(path);
        }
    }

    /// The attempt over `path` failed (refused, unreachable, timed out).
    pub fn failed(&mut self, path: Path) {
        self.failed[path.index()] = true;
    }

    /// The paths started so far, in order.
    pub fn attempts(&self) -> u32 {
        self.started.iter().filter(|s| **s).count() as u32
    }
}

/// Where new requests go, across requests: the primary first with the secondary raced after
/// the Connection Attempt Delay while the primary is believed to work; once the secondary
/// won a race, the secondary directly, while a Better Route probe tries the primary every
/// `probe_every` until a connection over it succeeds.
#[derive(Clone, Debug)]
pub struct Policy {
    attempt_delay: Duration,
    probe_every: Duration,
    primary_ok: bool,
    probe_in_flight: bool,
    next_probe: Instant,
}

/// How a request starts.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub first: Path,
    pub second: Option<Path>,
    pub delay: Duration,
}

impl Policy {
    pub fn new(attempt_delay: Duration, probe_every: Duration) -> Policy {
        Policy {
            attempt_delay,
            probe_every,
            primary_ok: true,
            probe_in_flight: false,
            next_probe: Instant::ZERO,
        }
    }

    /// How the next request starts.
    pub fn plan(&self) -> Plan {
        if self.primary_ok {
            Plan {
                first: Path::Primary,
                second: Some(Path::Secondary),
                delay: self.attempt_delay,
            }
        } else {
            // The secondary alone: a race would only wait out the delay on a dead primary.
            Plan {
                first: Path::Secondary,
                second: None,
                delay: Duration::ZERO,
            }
        }
    }

    /// A request's race ended at `now` with `winner` (`None`: every attempt failed).
    pub fn race_over(&mut self, now: Instant, plan: Plan, winner: Option<Path>) {
        let primary_lost = plan.first == Path::Primary && winner != Some(Path::Primary);
        if primary_lost && self.primary_ok {
            self.primary_ok = false;
            self.next_probe = now;
        }
    }

    /// Whether a Better Route probe over the primary should start at `now`; if so, it counts
    /// as started.
    pub fn probe_due(&mut self, now: Instant) -> bool {
        if self.primary_ok || self.probe_in_flight || now < self.next_probe {
            return false;
        }
        self.probe_in_flight = true;
        true
    }

    /// The probe started earlier ended at `now`: `connected` moves new requests back to the
    /// primary; otherwise the next probe is due `probe_every` after this one ended.
    pub fn probe_done(&mut self, now: Instant, connected: bool) {
        self.probe_in_flight = false;
        if connected {
            self.primary_ok = true;
        } else {
            self.next_probe = now + self.probe_every;
        }
    }

    /// Whether new requests try the primary first.
    pub fn on_primary(&self) -> bool {
        self.primary_ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }

    const DELAY: Duration = Duration::from_millis(250);

    #[test]
    fn the_second_attempt_starts_after_the_delay_and_the_first_to_connect_wins() {
        let mut r = Race::new(at(0), Path::Primary, Some(Path::Secondary), DELAY);
        assert_eq!(r.poll(at(0)), Step::Start(Path::Primary));
        assert_eq!(r.poll(at(0)), Step::WaitUntil(at(250)));
        assert_eq!(r.poll(at(249)), Step::WaitUntil(at(250)));
        assert_eq!(r.poll(at(250)), Step::Start(Path::Secondary));
        assert_eq!(r.poll(at(251)), Step::Wait);
        r.connected(Path::Secondary);
        // The primary's late success changes nothing: it is the loser, to be cancelled.
        r.connected(Path::Primary);
        assert_eq!(r.poll(at(300)), Step::Won(Path::Secondary));
        assert_eq!(r.attempts(), 2);
    }

    #[test]
    fn a_primary_that_connects_within_the_delay_wins_alone() {
        let mut r = Race::new(at(0), Path::Primary, Some(Path::Secondary), DELAY);
        assert_eq!(r.poll(at(0)), Step::Start(Path::Primary));
        r.connected(Path::Primary);
        assert_eq!(r.poll(at(5)), Step::Won(Path::Primary));
        assert_eq!(r.attempts(), 1);
    }

    #[test]
    fn a_first_attempt_that_fails_starts_the_second_before_the_delay() {
        let mut r = Race::new(at(0), Path::Primary, Some(Path::Secondary), DELAY);
        assert_eq!(r.poll(at(0)), Step::Start(Path::Primary));
        r.failed(Path::Primary);
        assert_eq!(r.poll(at(10)), Step::Start(Path::Secondary));
        r.failed(Path::Secondary);
        assert_eq!(r.poll(at(80)), Step::Failed);
    }

    #[test]
    fn a_race_of_one_path_fails_when_it_fails() {
        let mut r = Race::new(at(0), Path::Secondary, None, Duration::ZERO);
        assert_eq!(r.poll(at(0)), Step::Start(Path::Secondary));
        assert_eq!(r.poll(at(1)), Step::Wait);
        r.failed(Path::Secondary);
        assert_eq!(r.poll(at(2)), Step::Failed);
    }

    #[test]
    fn a_lost_race_moves_requests_to_the_secondary_until_a_probe_connects() {
        let mut p = Policy::new(DELAY, Duration::from_secs(1));
        let plan = p.plan();
        assert_eq!(plan.first, Path::Primary);
        assert_eq!(plan.second, Some(Path::Secondary));
        assert!(!p.probe_due(at(0)), "no probe while the primary works");
        p.race_over(at(2300), plan, Some(Path::Secondary));
        assert!(!p.on_primary());
        let plan = p.plan();
        assert_eq!((plan.first, plan.second), (Path::Secondary, None));
        // One probe at a time, the next one probe_every after a failed one.
        assert!(p.probe_due(at(2300)));
        assert!(!p.probe_due(at(2400)));
        p.probe_done(at(3300), false);
        assert!(!p.probe_due(at(4299)));
        assert!(p.probe_due(at(4300)));
        // A race over the secondary alone says nothing about the primary.
        p.race_over(at(4400), p.plan(), Some(Path::Secondary));
        p.probe_done(at(4305), true);
        assert!(p.on_primary());
        assert_eq!(p.plan().first, Path::Primary);
        assert!(!p.probe_due(at(9000)));
    }

    #[test]
    fn a_race_the_primary_wins_keeps_it_and_starts_no_probe() {
        let mut p = Policy::new(DELAY, Duration::from_secs(1));
        let plan = p.plan();
        p.race_over(at(100), plan, Some(Path::Primary));
        assert!(p.on_primary());
        assert!(!p.probe_due(at(5000)));
        // Every attempt failing also means the primary did not work.
        p.race_over(at(200), plan, None);
        assert!(!p.on_primary());
        assert!(p.probe_due(at(200)));
    }
}
