//! The lab's schedule as a state machine: program starts and link changes at their times, and
//! the end of a lab's `duration`. The shell asks `poll_action(now)` until it says nothing is
//! due, and sleeps until `next_wakeup()`. Whether the lab ends because its programs have ended
//! is [`crate::programs::Programs::waited_ended`], a rule on what the shell knows of its
//! processes.

use wire::Instant;

use crate::spec::{secs, LabConfig};

/// What is due.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Start `cfg.programs[i]`.
    Start(usize),
    /// Apply `cfg.changes[i]`.
    Change(usize),
    /// The lab's `duration` is over.
    DurationOver,
}

pub struct Schedule {
    /// (when, program index), in time order (file order among equal times).
    starts: Vec<(Instant, usize)>,
    /// (when, change index), likewise.
    changes: Vec<(Instant, usize)>,
    next_start: usize,
    next_change: usize,
    stop_at: Option<Instant>,
    stop_told: bool,
    /// Once the lab is ending, no more programs start.
    starts_held: bool,
}

impl Schedule {
    pub fn new(cfg: &LabConfig) -> Schedule {
        let at = |s: f64| Instant::ZERO + secs(s);
        let mut starts: Vec<(Instant, usize)> = cfg
            .programs
            .iter()
            .enumerate()
            .map(|(i, p)| (at(p.at_s), i))
            .collect();
        starts.sort_by_key(|s| s.0);
        let mut changes: Vec<(Instant, usize)> = cfg
            .changes
            .iter()
            .enumerate()
            .map(|(i, c)| (at(c.at_s), i))
            .collect();
        changes.sort_by_key(|c| c.0);
        Schedule {
            starts,
            changes,
            next_start: 0,
            next_change: 0,
            stop_at: cfg.duration_s.map(at),
            stop_told: false,
            starts_held: false,
        }
    }

    /// The next thing due by `now`: program starts first, then link changes, then the end.
    pub fn poll_action(&mut self, now: Instant) -> Option<Action> {
        if !self.starts_held {
            if let Some(&(t, i)) = self.starts.get(self.next_start) {
                if t <= now {
                    self.next_start += 1;
                    return Some(Action::Start(i));
                }
            }
        }
        if let Some(&(t, i)) = self.changes.get(self.next_change) {
            if t <= now {
                self.next_change += 1;
                return Some(Action::Change(i));
            }
        }
        match self.stop_at {
            Some(t) if t <= now && !self.stop_told => {
                self.stop_told = true;
                Some(Action::DurationOver)
            }
            _ => None,
        }
    }

    /// Takes back the start [`Schedule::poll_action`] returned last, which the shell will ask
    /// for again (it starts only so many programs per loop turn).
    pub fn unpoll_start(&mut self) {
        self.next_start = self.next_start.saturating_sub(1);
    }

    /// When something is next due.
    pub fn next_wakeup(&self) -> Option<Instant> {
        let start = (!self.starts_held)
            .then(|| self.starts.get(self.next_start).map(|s| s.0))
            .flatten();
        let change = self.changes.get(self.next_change).map(|c| c.0);
        let stop = self.stop_at.filter(|_| !self.stop_told);
        [start, change, stop].into_iter().flatten().min()
    }

    /// Whether every program has been started.
    pub fn all_started(&self) -> bool {
        self.next_start >= self.starts.len()
    }

    /// Whether the lab has a `duration`.
    pub fn has_duration(&self) -> bool {
        self.stop_at.is_some()
    }

    /// The lab is ending: start nothing more.
    pub fn hold_starts(&mut self) {
        self.starts_held = true;
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use wire::Duration;

    use super::*;
    use crate::run_file::parse_run_file;
    use crate::setting::no_files;

    const LAB: &str = r#"
        duration = "10s"
        [[host]]
        name = "a"
        [[host]]
        name = "b"
        [[link]]
        name = "l"
        a = "a"
        b = "b"
        [[change]]
        at = "5s"
        link = "l"
        state = "off"
        [[change]]
        at = "2s"
        link = "l"
        rate = "1mbit"
        [[program]]
        host = "b"
        run = "server"
        [[program]]
        host = "a"
        at = "2s"
        run = "client"
    "#;

    fn s(n: u64) -> Instant {
        Instant::ZERO + Duration::from_secs(n)
    }

    #[test]
    fn actions_come_in_time_order_starts_before_changes_and_the_end_once() {
        let cfg = parse_run_file("s.toml", LAB, Path::new(""), None, &no_files).unwrap();
        let mut sch = Schedule::new(&cfg);
        let mut seen = Vec::new();
        let mut now = Instant::ZERO;
        while let Some(t) = sch.next_wakeup() {
            now = now.max(t);
            while let Some(a) = sch.poll_action(now) {
                seen.push((now, a));
            }
        }
        assert_eq!(
            seen,
            [
                (s(0), Action::Start(0)),
                (s(2), Action::Start(1)),
                (s(2), Action::Change(1)),
                (s(5), Action::Change(0)),
                (s(10), Action::DurationOver),
            ]
        );
        assert!(sch.all_started());
        // Asking early is harmless, and asking again after the end says nothing.
        assert_eq!(sch.poll_action(s(11)), None);
    }

    #[test]
    fn a_start_taken_back_is_due_again_at_once() {
        let cfg = parse_run_file("s.toml", LAB, Path::new(""), None, &no_files).unwrap();
        let mut sch = Schedule::new(&cfg);
        assert_eq!(sch.poll_action(s(0)), Some(Action::Start(0)));
        sch.unpoll_start();
        assert_eq!(sch.next_wakeup(), Some(s(0)));
        assert_eq!(sch.poll_action(s(0)), Some(Action::Start(0)));
        assert_eq!(sch.next_wakeup(), Some(s(2)));
    }

    #[test]
    fn a_lab_that_is_ending_starts_nothing_more_but_still_changes_links() {
        let cfg = parse_run_file("s.toml", LAB, Path::new(""), None, &no_files).unwrap();
        let mut sch = Schedule::new(&cfg);
        assert_eq!(sch.poll_action(s(0)), Some(Action::Start(0)));
        sch.hold_starts();
        assert_eq!(sch.next_wakeup(), Some(s(2)));
        assert_eq!(sch.poll_action(s(3)), Some(Action::Change(1)));
        assert!(!sch.all_started());
    }
}
