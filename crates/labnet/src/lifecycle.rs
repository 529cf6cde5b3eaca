//! The real-time loop's decisions, apart from its system calls: when COMMAND starts, when the
//! lab ends and with what exit status, how long the loop may sleep, which scheduling policy it
//! runs under, and how long it stalled. The shell (`lab::runner`) reads the clock, its signals
//! and its children, hands the facts in with `now`, and does what these answer; here they are
//! tested in simulated time.
//!
//! What is due on the lab's timetable (program starts, link changes, `duration`) is
//! [`crate::schedule`]; this module is everything else the loop decides.

use wire::{Duration, Instant};

/// Programs started in one loop turn at most. Starting one (its stdio files, its environment,
/// a request to the launcher) takes the loop a fraction of a millisecond, but a thousand due at
/// once kept it from reading its interfaces for most of a second; in turns of this many, the
/// packets move between them.
pub const STARTS_PER_TURN: usize = 8;
/// How long programs get to exit after SIGTERM before SIGKILL; the network keeps running.
pub const GRACE: Duration = Duration::from_secs(2);
/// How long COMMAND waits for `--server` to listen.
pub const SERVER_READY_TIMEOUT: Duration = Duration::from_secs(3);
/// While ending, how often the shell looks whether every process has gone.
const STOP_POLL: Duration = Duration::from_millis(10);
/// While COMMAND waits for the server, how often the shell looks whether it listens.
const SERVER_POLL: Duration = Duration::from_millis(5);

/// What the shell knows of `--server` while COMMAND waits for it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ServerState {
    pub listening: bool,
    pub exited: bool,
}

/// Why the lab ends.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum EndCause {
    /// COMMAND ended with this status.
    Command(i32),
    /// The lab's `duration` is over.
    Duration,
    /// The programs the lab waits for have ended.
    Programs,
    /// A stop signal (its number).
    Signal(i32),
}

/// A lab's life from its first loop turn to its end: the stop rules.
#[derive(Clone, Debug)]
pub struct Lifecycle {
    has_command: bool,
    command_pending: bool,
    has_server: bool,
    /// When `--server`'s process started.
    server_started_at: Option<Instant>,
    has_duration: bool,
    duration_over: bool,
    /// Once ending: the moment programs still running get SIGKILL, and why it ends.
    ending: Option<(Instant, EndCause)>,
}

impl Lifecycle {
    /// A lab with or without COMMAND, `--server` and a `duration`, starting at `Instant::ZERO`.
    pub fn new(has_command: bool, has_server: bool, has_duration: bool) -> Lifecycle {
        Lifecycle {
            has_command,
            command_pending: has_command,
            has_server,
            server_started_at: None,
            has_duration,
            duration_over: false,
            ending: None,
        }
    }

    /// Whether COMMAND is to start now: once the server listens, has exited or has had
    /// [`SERVER_READY_TIMEOUT`] since it started (see [`Lifecycle::server_started`]; a server
    /// whose start is slow, as in a lab of hundreds of hosts, is not cut short), and never once
    /// the lab is ending. `server` is asked only while COMMAND waits for a server.
    pub fn command_due(&self, now: Instant, server: impl FnOnce() -> ServerState) -> bool {
        if !self.command_pending || self.ending.is_some() {
            return false;
        }
        if !self.has_server {
            return true;
        }
        let s = server();
        s.listening
            || s.exited
            || self
                .server_started_at
                .is_some_and(|t| now >= t + SERVER_READY_TIMEOUT)
    }

    /// `--server`'s process started at `now` (the launcher said so).
    pub fn server_started(&mut self, now: Instant) {
        self.server_started_at = Some(now);
    }

    pub fn command_started(&mut self) {
        self.command_pending = false;
    }

    /// COMMAND has started, or never will.
    pub fn command_settled(&self) -> bool {
        !self.command_pending
    }

    pub fn duration_over(&mut self) {
        self.duration_over = true;
    }

    /// Applies the stop rules: COMMAND's end ends the lab with its status; so does the end of
    /// `duration`; a lab with neither COMMAND nor `duration` ends once every program has
    /// started and the programs it waits for have ended (`programs_ended`:
    /// [`crate::programs::Programs::waited_ended`]). Returns the cause when the lab begins to
    /// end now: the shell then sends SIGTERM to what still runs.
    pub fn check_end(
        &mut self,
        now: Instant,
        command_status: Option<i32>,
        all_started: bool,
        programs_ended: bool,
    ) -> Option<EndCause> {
        if self.ending.is_some() {
            return None;
        }
        let cause = if let Some(st) = command_status {
            EndCause::Command(st)
        } else if self.duration_over {
            EndCause::Duration
        } else if !self.has_command
            && !self.has_duration
            && all_started
            && !self.command_pending
            && programs_ended
        {
            EndCause::Programs
        } else {
            return None;
        };
        self.ending = Some((now + GRACE, cause));
        Some(cause)
    }

    /// A stop signal arrived. A Ctrl-C from the terminal (`from_tty`) reached COMMAND too,
    /// which shares the lab's process group: the lab then ends when COMMAND does. Any other
    /// stop signal ends the lab. Returns true when the lab begins to end now.
    pub fn on_signal(
        &mut self,
        now: Instant,
        signal: i32,
        from_tty: bool,
        command_running: bool,
    ) -> bool {
        if (from_tty && command_running) || self.ending.is_some() {
            return false;
        }
        self.command_pending = false;
        self.ending = Some((now + GRACE, EndCause::Signal(signal)));
        true
    }

    pub fn is_ending(&self) -> bool {
        self.ending.is_some()
    }

    /// Whether the loop is done: the lab is ending and every process in it has gone
    /// (`quiet`), or the grace time is over.
    pub fn finished(&self, now: Instant, quiet: bool) -> bool {
        matches!(self.ending, Some((deadline, _)) if quiet || now >= deadline)
    }

    /// When the loop must look again even if nothing happens.
    pub fn next_wakeup(&self, now: Instant) -> Option<Instant> {
        match self.ending {
            Some((deadline, _)) => Some(deadline.min(now + STOP_POLL)),
            None if self.command_pending => Some(now + SERVER_POLL),
            None => None,
        }
    }

    /// The lab's exit status: COMMAND's, 128 + the signal's, or 0.
    pub fn exit_code(&self) -> i32 {
        match self.ending {
            Some((_, EndCause::Command(st))) => st,
            Some((_, EndCause::Signal(sig))) => 128 + sig,
            _ => 0,
        }
    }
}

/// How the loop waits for its next event.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Wait {
    /// Look and come straight back: the deadline is within the spin time.
    Poll,
    /// Sleep until a packet or a signal: nothing is due.
    Block,
    /// Sleep with the timer armed at this moment (the deadline less the spin time).
    Timer(Instant),
}

/// The wait before `deadline`: a sleeping thread wakes tens of microseconds late and a polling
/// one does not, so the last `spin` before a deadline is polled. A deadline within `precision`
/// of `now` is not waited for at all: the turn that follows runs the network to
/// [`Precision::run_to`], which covers it.
pub fn wait_for(
    deadline: Option<Instant>,
    now: Instant,
    spin: Duration,
    precision: Precision,
) -> Wait {
    match deadline {
        None => Wait::Block,
        Some(t) if t <= now + spin.max(precision.early) => Wait::Poll,
        Some(t) => Wait::Timer(t - spin),
    }
}

/// How far ahead of its time the engine may write a packet into its host (`--precision`), so
/// that it wakes less often: each loop turn runs the network to the clock's time plus this, and
/// delivers everything due by then. Zero (the default) keeps every deadline: the loop sleeps or
/// polls until each packet's own time.
///
/// With a precision P, the loop still wakes at (or, by the learnt margin, just before) the
/// earliest deadline, and then delivers every packet due within P of it, so that it wakes at
/// most once per P for deliveries; each such packet reaches its host between P early and the
/// wake-up's own lateness late. Packets read meanwhile are dated at the network's time (up to P
/// ahead of the clock), as the network's time never goes back, which shifts what a link does
/// with them by at most P too. The delivery error the engine reports counts the early writes.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Precision {
    /// How early a delivery may be.
    pub early: Duration,
}

/// The largest precision accepted: beyond it, a lab's delays and rates would be more the
/// engine's batching than the links'.
pub const PRECISION_MAX: Duration = Duration::from_millis(100);
/// Values the option's error message suggests.
const PRECISION_EXAMPLES: &str = "10us, 100us, 1ms";

impl Precision {
    /// Every deadline kept: the default.
    pub const EXACT: Precision = Precision {
        early: Duration::ZERO,
    };

    /// Reads `--precision`'s value: a time (`10us`, `1ms`), or `0` for exact, at most
    /// [`PRECISION_MAX`].
    pub fn parse(s: &str) -> Result<Precision, String> {
        let t = s.trim();
        let early = if t == "0" {
            Duration::ZERO
        } else {
            wire::units::parse_time(t)
                .map_err(|_| format!("cannot read '{s}' (try {PRECISION_EXAMPLES}, or 0)"))?
        };
        if early > PRECISION_MAX {
            return Err(format!(
                "'{s}' is more than {} ms (try {PRECISION_EXAMPLES})",
                PRECISION_MAX.as_millis()
            ));
        }
        Ok(Precision { early })
    }

    /// The time a loop turn that began at `clock` runs the network to.
    pub fn run_to(self, clock: Instant) -> Instant {
        clock + self.early
    }

    /// In milliseconds, for summary.json.
    pub fn as_millis_f64(self) -> f64 {
        self.early.as_nanos() as f64 / 1e6
    }
}

impl std::fmt::Display for Precision {
    /// `exact`, or the precision in the unit that reads best (`10 µs`, `1 ms`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ns = self.early.as_nanos();
        if ns == 0 {
            write!(f, "exact")
        } else if ns.is_multiple_of(1_000_000) {
            write!(f, "{} ms", ns / 1_000_000)
        } else if ns.is_multiple_of(1_000) {
            write!(f, "{} µs", ns / 1_000)
        } else {
            write!(f, "{ns} ns")
        }
    }
}

/// How early the loop arms its timer before a deadline, learnt from how late the timer has been
/// waking it. A sleeping thread wakes some microseconds after its timer (the scheduler, the
/// hypervisor); the loop polls the last stretch before a deadline to be on time, and polling
/// costs a core while it lasts. So the timer is armed only as early as it has recently been
/// late: the margin jumps to a later wake at once (a late delivery is what the margin is for)
/// and shrinks by 1/[`EARLY_WAKE_DECAY`] of itself per wake, following the worst of the last
/// few dozen wakes, never below [`EARLY_WAKE_MIN`] nor above the ceiling it was made with.
#[derive(Clone, Debug)]
pub struct EarlyWake {
    margin: Duration,
    ceiling: Duration,
    fixed: bool,
}

/// The most a timer is armed before a deadline, the rest polled: a sleeping thread wakes some
/// microseconds late, a polling one does not.
pub const SPIN_CEILING: Duration = Duration::from_micros(50);
/// The smallest margin: a timer is never exactly on time, and a microsecond of polling is cheap.
pub const EARLY_WAKE_MIN: Duration = Duration::from_micros(2);
/// Each timer wake shrinks the margin by this fraction of itself (1/32: after 22 punctual
/// wakes, half of it is left).
const EARLY_WAKE_DECAY: u64 = 32;

impl EarlyWake {
    /// A margin that learns, starting at (and never above) `ceiling`.
    pub fn learning(ceiling: Duration) -> EarlyWake {
        EarlyWake {
            margin: ceiling,
            ceiling,
            fixed: false,
        }
    }

    /// The loop's margin as `LATENCYLAB_SPIN_NS` asks: a number of nanoseconds fixes it
    /// (trading timing accuracy for CPU); anything else, or nothing, learns below
    /// [`SPIN_CEILING`] (docs/PERFORMANCE.md).
    pub fn from_setting(spin_ns: Option<&str>) -> EarlyWake {
        match spin_ns.and_then(|v| v.parse().ok()) {
            Some(ns) => EarlyWake::fixed(Duration::from_nanos(ns)),
            None => EarlyWake::learning(SPIN_CEILING),
        }
    }

    /// A margin that stays `margin` whatever the timer does.
    pub fn fixed(margin: Duration) -> EarlyWake {
        EarlyWake {
            margin,
            ceiling: margin,
            fixed: true,
        }
    }

    pub fn margin(&self) -> Duration {
        self.margin
    }

    /// The timer armed for `due` let the loop run again at `now`. A wake before `due` (a
    /// packet or a signal came first) says nothing about the timer.
    pub fn woke(&mut self, due: Instant, now: Instant) {
        if self.fixed || now < due {
            return;
        }
        let late = now - due;
        let m = self.margin.as_nanos() as u64;
        let decayed = Duration::from_nanos(m - m / EARLY_WAKE_DECAY);
        self.margin = late.max(decayed).clamp(EARLY_WAKE_MIN, self.ceiling);
    }
}

/// The earliest of several optional deadlines.
pub fn earliest(deadlines: impl IntoIterator<Item = Option<Instant>>) -> Option<Instant> {
    deadlines.into_iter().flatten().min()
}

/// How the forwarding loop is scheduled, as asked by `LATENCYLAB_PRIORITY`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum PriorityMode {
    /// Real-time while mostly idle, nice -20 while mostly busy (see [`PriorityPolicy`]).
    Auto,
    Realtime,
    Nice,
    Normal,
}

impl PriorityMode {
    /// `rt`, `nice` or `normal`; anything else (or nothing) is `auto`.
    pub fn parse(s: Option<&str>) -> PriorityMode {
        match s {
            Some("rt") => PriorityMode::Realtime,
            Some("nice") => PriorityMode::Nice,
            Some("normal") => PriorityMode::Normal,
            _ => PriorityMode::Auto,
        }
    }
}

/// The scheduling policy. Two policies, each right in one regime:
/// - real-time (SCHED_FIFO) wakes the loop within microseconds even when the lab's programs
///   keep every core busy, which is what a link at tens of Mbit/s needs;
/// - but at a gigabit and more the loop never blocks, and the kernel then preempts a real-time
///   thread for 50 ms at a time so that ordinary tasks can run, stalling every link; there
///   nice -20 keeps the rate (docs/PERFORMANCE.md).
///
/// `Auto` measures, every [`PRIORITY_WINDOW`], the share of time the loop was busy (not blocked
/// waiting), and runs real-time while it is mostly idle, nice -20 while it is mostly busy, with
/// hysteresis.
#[derive(Clone, Debug)]
pub struct PriorityPolicy {
    auto: bool,
    realtime: bool,
    window_start: Instant,
    blocked: Duration,
}

pub const PRIORITY_WINDOW: Duration = Duration::from_millis(100);
/// Busy share above which a real-time loop turns to nice -20, and below which it turns back.
///
/// The kernel throttles real-time tasks only past 95 % of each second
/// (`kernel.sched_rt_runtime_us` 950000 of `sched_rt_period_us` 1000000), so a loop stays
/// real-time up to 90 %. A lower bound costs timing: a 100 Mbit/s link keeps the loop busy
/// 50–90 % of each window (its spin before each timer counts, and on a loaded machine so does
/// the time it is preempted), and at nice -20 it then waits behind other tasks for a CPU, a
/// scheduler slice of 3–10 ms at a time (docs/PERFORMANCE.md, "The machine's stalls and the
/// engine's").
const BUSY_TO_NICE: f64 = 0.9;
const BUSY_TO_RT: f64 = 0.3;

/// The policy for the next window: real-time or not, from the busy share of the last one.
fn next_realtime(realtime: bool, busy: f64) -> bool {
    if realtime {
        busy <= BUSY_TO_NICE
    } else {
        busy < BUSY_TO_RT
    }
}

impl PriorityPolicy {
    /// The policy at `now`; the shell applies [`PriorityPolicy::realtime`] (or, for `Nice` and
    /// `Normal`, the mode's own) once at the start.
    pub fn new(mode: PriorityMode, now: Instant) -> PriorityPolicy {
        PriorityPolicy {
            auto: mode == PriorityMode::Auto,
            realtime: matches!(mode, PriorityMode::Auto | PriorityMode::Realtime),
            window_start: now,
            blocked: Duration::ZERO,
        }
    }

    pub fn realtime(&self) -> bool {
        self.realtime
    }

    /// The loop slept this long waiting for events.
    pub fn blocked(&mut self, d: Duration) {
        self.blocked += d;
    }

    /// At the end of each window: `Some(true)` to turn real-time, `Some(false)` to turn to
    /// nice -20, `None` to stay.
    pub fn poll_switch(&mut self, now: Instant) -> Option<bool> {
        let window = now - self.window_start;
        if window < PRIORITY_WINDOW {
            return None;
        }
        let busy = 1.0 - self.blocked.min(window).as_secs_f64() / window.as_secs_f64();
        let rt = next_realtime(self.realtime, busy);
        self.window_start = now;
        self.blocked = Duration::ZERO;
        if self.auto && rt != self.realtime {
            self.realtime = rt;
            return Some(rt);
        }
        None
    }
}

/// The loop's own stalls: the longest time a packet could have waited in a host's TUN queue
/// before the loop read it, and when. The loop is unable to read its interfaces while it works
/// through a turn (the gap from one wait to the next) and when it wakes later than it asked to
/// (the process was stopped, descheduled or swapped out). A delivery lateness starts only once
/// a packet has been read, so neither shows there.
///
/// So that a stall while the loop sleeps with nothing due is seen too, the loop never sleeps
/// longer than [`HEARTBEAT`]: a stall of length S is then measured as at least S - HEARTBEAT.
///
/// Besides the longest, it keeps the [`STALLS_KEPT`] longest stalls over
/// [`STALL_WORTH_SAYING`], so that each can be set beside what else the machine did at that
/// moment, whenever in the run it came; of all of them, it counts how many there were and how
/// long they lasted together, and it remembers the longest one it did not keep, which bounds
/// every stall missing from the list.
#[derive(Clone, Debug, Default)]
pub struct StallMeter {
    longest: Duration,
    at: Instant,
    /// The kept stalls, shortest first (a min-heap by length, then time).
    kept: std::collections::BinaryHeap<std::cmp::Reverse<(Duration, Instant)>>,
    /// Every stall over [`STALL_WORTH_SAYING`]: how many, and their sum.
    count: u64,
    total: Duration,
    /// The longest stall over [`STALL_WORTH_SAYING`] that is not kept.
    longest_unkept: Duration,
}

/// How many stalls over [`STALL_WORTH_SAYING`] a [`StallMeter`] keeps, the longest (2 KB in
/// summary.json).
pub const STALLS_KEPT: usize = 128;

/// The longest sleep of an idle loop (see [`StallMeter`]).
pub const HEARTBEAT: Duration = Duration::from_millis(5);
/// A stall longer than this is reported in plain words: packets waited in the hosts' queues
/// that long on top of the emulated links' own delays.
pub const STALL_WORTH_SAYING: Duration = Duration::from_millis(1);

impl StallMeter {
    /// The loop woke at `now` from a wait that was to end by `due` (a timer, or the heartbeat).
    pub fn woke(&mut self, due: Instant, now: Instant) {
        self.record(now - due, due);
    }

    /// A loop turn's work ran from `start` (the end of a wait) to `end` (the next wait).
    pub fn turn(&mut self, start: Instant, end: Instant) {
        self.record(end - start, start);
    }

    fn record(&mut self, d: Duration, at: Instant) {
        if d > STALL_WORTH_SAYING {
            self.count += 1;
            self.total += d;
            self.kept.push(std::cmp::Reverse((d, at)));
            if self.kept.len() > STALLS_KEPT {
                if let Some(std::cmp::Reverse((shortest, _))) = self.kept.pop() {
                    self.longest_unkept = self.longest_unkept.max(shortest);
                }
            }
        }
        if d > self.longest {
            self.longest = d;
            self.at = at;
        }
    }

    /// The longest stall and when it began.
    pub fn longest(&self) -> (Duration, Instant) {
        (self.longest, self.at)
    }

    /// The [`STALLS_KEPT`] longest stalls over [`STALL_WORTH_SAYING`], when each began and how
    /// long it lasted, in the order they happened.
    pub fn over_worth_saying(&self) -> Vec<(Instant, Duration)> {
        let mut v: Vec<(Instant, Duration)> = self.kept.iter().map(|r| (r.0 .1, r.0 .0)).collect();
        v.sort();
        v
    }

    /// How many stalls over [`STALL_WORTH_SAYING`] there were, kept or not, and their sum.
    pub fn over_worth_saying_total(&self) -> (u64, Duration) {
        (self.count, self.total)
    }

    /// The longest stall over [`STALL_WORTH_SAYING`] that [`StallMeter::over_worth_saying`]
    /// does not list, or zero when it lists them all: no stall missing from the list was
    /// longer. (It may have been as long: a stall of exactly this length can be missing while
    /// one of the same length is listed.)
    pub fn longest_unkept(&self) -> Duration {
        self.longest_unkept
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Instant {
        Instant::from_millis(n)
    }

    /// Whether the programs the lab waits for have ended.
    const RUNNING: bool = false;
    const ENDED: bool = true;
    const SERVER_UP: ServerState = ServerState {
        listening: true,
        exited: false,
    };
    const SERVER_STARTING: ServerState = ServerState {
        listening: false,
        exited: false,
    };

    #[test]
    fn command_waits_for_the_server_to_listen_or_for_the_timeout() {
        let mut lc = Lifecycle::new(true, true, false);
        assert!(!lc.command_due(ms(0), || SERVER_STARTING));
        lc.server_started(ms(1));
        assert!(lc.command_due(ms(40), || SERVER_UP));
        assert!(!lc.command_due(ms(3000), || SERVER_STARTING));
        assert!(lc.command_due(ms(3001), || SERVER_STARTING));
        assert_eq!(lc.next_wakeup(ms(40)), Some(ms(45)));
        let no_server = Lifecycle::new(true, false, false);
        assert!(no_server.command_due(ms(0), || unreachable!("no server to ask")));
    }

    #[test]
    fn the_wait_for_the_server_counts_from_the_servers_start_not_the_labs() {
        // A big lab: the server's process started 2.5 s after the lab's clock began.
        let mut lc = Lifecycle::new(true, true, false);
        assert!(
            !lc.command_due(ms(3500), || SERVER_STARTING),
            "the server has not even started"
        );
        lc.server_started(ms(2500));
        assert!(!lc.command_due(ms(3500), || SERVER_STARTING));
        assert!(!lc.command_due(ms(5499), || SERVER_STARTING));
        assert!(lc.command_due(ms(5500), || SERVER_STARTING));
        // A server that exited before listening lets COMMAND go at once (it will see why).
        let mut gone = Lifecycle::new(true, true, false);
        gone.server_started(ms(10));
        assert!(gone.command_due(ms(20), || ServerState {
            listening: false,
            exited: true
        }));
    }

    #[test]
    fn commands_end_ends_the_lab_with_its_status_and_programs_get_a_grace_time() {
        let mut lc = Lifecycle::new(true, false, false);
        lc.command_started();
        assert_eq!(lc.check_end(ms(100), None, true, RUNNING), None);
        assert_eq!(
            lc.check_end(ms(200), Some(3), true, RUNNING),
            Some(EndCause::Command(3))
        );
        assert_eq!(lc.exit_code(), 3);
        // Ending is told once; the loop runs on until the processes are gone or the grace ends.
        assert_eq!(lc.check_end(ms(210), Some(3), true, ENDED), None);
        assert!(!lc.finished(ms(210), false));
        assert!(lc.finished(ms(210), true));
        assert!(lc.finished(ms(200) + GRACE, false));
        assert_eq!(lc.next_wakeup(ms(210)), Some(ms(220)));
    }

    #[test]
    fn a_lab_without_command_or_duration_ends_when_its_programs_have() {
        let mut lc = Lifecycle::new(false, false, false);
        assert_eq!(lc.check_end(ms(0), None, false, ENDED), None);
        assert_eq!(lc.check_end(ms(0), None, true, RUNNING), None);
        assert_eq!(
            lc.check_end(ms(5), None, true, ENDED),
            Some(EndCause::Programs)
        );
        assert_eq!(lc.exit_code(), 0);
        // With a duration, programs ending early do not end the lab.
        let mut timed = Lifecycle::new(false, false, true);
        assert_eq!(timed.check_end(ms(5), None, true, ENDED), None);
        timed.duration_over();
        assert_eq!(
            timed.check_end(ms(6), None, true, RUNNING),
            Some(EndCause::Duration)
        );
    }

    #[test]
    fn ctrl_c_from_the_terminal_is_commands_to_answer_and_other_signals_end_the_lab() {
        let mut lc = Lifecycle::new(true, false, false);
        lc.command_started();
        assert!(!lc.on_signal(ms(1), 2, true, true));
        assert!(!lc.is_ending());
        assert!(lc.on_signal(ms(2), 15, false, true));
        assert_eq!(lc.exit_code(), 143);
        assert!(!lc.on_signal(ms(3), 2, false, true), "told once");
        // A signal before COMMAND started: it never starts.
        let mut early = Lifecycle::new(true, true, false);
        assert!(early.on_signal(ms(0), 2, true, false));
        assert!(early.command_settled());
        assert!(!early.command_due(ms(4000), || SERVER_UP));
    }

    #[test]
    fn the_last_spin_time_before_a_deadline_is_polled_and_no_deadline_blocks() {
        let spin = Duration::from_micros(50);
        let exact = Precision::EXACT;
        assert_eq!(wait_for(None, ms(1), spin, exact), Wait::Block);
        assert_eq!(
            wait_for(Some(ms(1) + Duration::from_micros(30)), ms(1), spin, exact),
            Wait::Poll
        );
        assert_eq!(
            wait_for(Some(ms(2)), ms(1), spin, exact),
            Wait::Timer(ms(2) - spin)
        );
        assert_eq!(earliest([None, Some(ms(3)), Some(ms(2))]), Some(ms(2)));
        assert_eq!(earliest([None, None]), None);
    }

    /// The loop's deliveries in simulated time: a packet due every `period` up to `end`; the
    /// loop waits as [`wait_for`] says (a poll costs 1 µs, a timer wakes `late` after its time),
    /// runs the network to [`Precision::run_to`] of its clock and writes every packet due by
    /// then. Returns the timer wake-ups and each delivery's error, written minus due, in ns.
    fn simulate(
        period: Duration,
        end: Instant,
        spin: Duration,
        late: Duration,
        precision: Precision,
    ) -> (u64, Vec<i64>) {
        let due = |k: u64| Instant::ZERO + Duration::from_nanos(period.as_nanos() as u64 * k);
        let (mut clock, mut network, mut next) = (Instant::ZERO, Instant::ZERO, 0);
        let (mut wakeups, mut errors) = (0, Vec::new());
        loop {
            while due(next) <= network && due(next) <= end {
                errors.push(clock.as_nanos() as i64 - due(next).as_nanos() as i64);
                next += 1;
            }
            if due(next) > end {
                break;
            }
            match wait_for(Some(due(next)), clock, spin, precision) {
                Wait::Poll => clock += Duration::from_micros(1),
                Wait::Timer(t) => {
                    clock = clock.max(t) + late;
                    wakeups += 1;
                }
                Wait::Block => unreachable!("a deadline is always given"),
            }
            network = network.max(precision.run_to(clock));
        }
        (wakeups, errors)
    }

    #[test]
    fn an_exact_loop_never_delivers_early_and_wakes_once_per_packet() {
        let us = Duration::from_micros;
        let (wakeups, errors) = simulate(us(120), ms(100), us(2), us(5), Precision::EXACT);
        assert_eq!(errors.len(), 834);
        assert!(errors.iter().all(|&e| e >= 0), "never early");
        assert!(
            errors.iter().all(|&e| e <= 5_000),
            "at most the wake-up's lateness late"
        );
        assert_eq!(wakeups, 833, "one timer per packet but the first");
    }

    #[test]
    fn a_precision_of_a_millisecond_wakes_once_per_millisecond_and_delivers_within_it() {
        let us = Duration::from_micros;
        let p = Precision::parse("1ms").unwrap();
        let (wakeups, errors) = simulate(us(120), ms(100), us(2), us(5), p);
        assert_eq!(errors.len(), 834);
        assert!(
            wakeups <= 100,
            "at most one wake-up per millisecond: {wakeups}"
        );
        assert!(
            wakeups >= 80,
            "each wake-up covers at most 1 ms of packets: {wakeups}"
        );
        assert!(
            errors.iter().all(|&e| e >= -1_000_000),
            "at most 1 ms early"
        );
        assert!(
            errors.iter().all(|&e| e <= 5_000),
            "at most the wake-up's lateness late"
        );
        assert!(errors.iter().any(|&e| e < -500_000), "packets do go early");
    }

    #[test]
    fn a_precision_smaller_than_the_packet_spacing_changes_nothing_but_the_polling() {
        let us = Duration::from_micros;
        let p = Precision::parse("10us").unwrap();
        let (wakeups, errors) = simulate(us(120), ms(100), us(2), us(5), p);
        assert_eq!(wakeups, 833);
        assert!(errors.iter().all(|&e| (-10_000..=5_000).contains(&e)));
    }

    #[test]
    fn the_precision_reads_a_time_or_zero_and_refuses_the_rest() {
        assert_eq!(Precision::parse("0").unwrap(), Precision::EXACT);
        assert_eq!(Precision::parse("0us").unwrap(), Precision::EXACT);
        assert_eq!(
            Precision::parse("100us").unwrap().early,
            Duration::from_micros(100)
        );
        assert_eq!(Precision::parse("1ms").unwrap().to_string(), "1 ms");
        assert_eq!(Precision::parse("10µs").unwrap().to_string(), "10 µs");
        assert_eq!(Precision::EXACT.to_string(), "exact");
        assert_eq!(
            Precision::parse("fast").unwrap_err(),
            "cannot read 'fast' (try 10us, 100us, 1ms, or 0)"
        );
        assert_eq!(
            Precision::parse("1s").unwrap_err(),
            "'1s' is more than 100 ms (try 10us, 100us, 1ms)"
        );
        assert_eq!(Precision::parse("1ms").unwrap().as_millis_f64(), 1.0);
    }

    #[test]
    fn a_mostly_busy_loop_leaves_real_time_and_a_mostly_idle_one_returns() {
        assert!(next_realtime(true, 0.1));
        assert!(next_realtime(true, 0.6));
        assert!(
            next_realtime(true, 0.85),
            "a 100 Mbit/s link keeps the loop this busy: it stays real-time"
        );
        assert!(
            !next_realtime(true, 0.95),
            "a loop that never blocks would be throttled"
        );
        // Hysteresis: between the two thresholds each policy stays.
        assert!(!next_realtime(false, 0.45));
        assert!(next_realtime(true, 0.45));
        assert!(next_realtime(false, 0.1));
    }

    #[test]
    fn the_auto_policy_switches_only_at_window_ends_and_fixed_modes_never() {
        let mut p = PriorityPolicy::new(PriorityMode::Auto, ms(0));
        assert!(p.realtime());
        // A window spent busy (blocked 5 ms of 100): turn to nice.
        p.blocked(Duration::from_millis(5));
        assert_eq!(p.poll_switch(ms(50)), None, "window not over");
        assert_eq!(p.poll_switch(ms(100)), Some(false));
        // A mostly idle window: back to real-time.
        p.blocked(Duration::from_millis(90));
        assert_eq!(p.poll_switch(ms(200)), Some(true));
        let mut fixed = PriorityPolicy::new(PriorityMode::Realtime, ms(0));
        assert_eq!(fixed.poll_switch(ms(100)), None);
        assert_eq!(PriorityMode::parse(Some("nice")), PriorityMode::Nice);
        assert_eq!(PriorityMode::parse(Some("bogus")), PriorityMode::Auto);
    }

    #[test]
    fn the_stall_meter_keeps_the_longest_late_wake_or_long_turn_and_when_it_began() {
        let mut m = StallMeter::default();
        m.turn(ms(10), ms(10) + Duration::from_micros(30));
        m.woke(ms(20), ms(20) + Duration::from_micros(40));
        assert_eq!(m.longest(), (Duration::from_micros(40), ms(20)));
        // Stopped for 200 ms while asleep: the heartbeat due at 105 ms woke at 300 ms.
        m.woke(ms(105), ms(300));
        m.turn(ms(300), ms(302));
        assert_eq!(m.longest(), (Duration::from_millis(195), ms(105)));
        // Waking early (a packet came before the deadline) is no stall.
        m.woke(ms(400), ms(350));
        assert_eq!(m.longest().0, Duration::from_millis(195));
        // Only the stalls over a millisecond are kept, each with when it began.
        m.turn(ms(500), ms(500) + Duration::from_micros(1500));
        assert_eq!(
            m.over_worth_saying(),
            [
                (ms(105), Duration::from_millis(195)),
                (ms(300), Duration::from_millis(2)),
                (ms(500), Duration::from_micros(1500)),
            ]
        );
        assert_eq!(
            m.over_worth_saying_total(),
            (3, Duration::from_micros(198_500))
        );
        assert_eq!(m.longest_unkept(), Duration::ZERO, "all three are listed");
    }

    #[test]
    fn the_stall_meter_lists_the_longest_stalls_wherever_they_came_and_bounds_the_rest() {
        let mut m = StallMeter::default();
        // A start-up with many short stalls, more than the list holds...
        for k in 0..2 * STALLS_KEPT as u64 {
            m.turn(ms(10 * k), ms(10 * k) + Duration::from_micros(1100 + k % 7));
        }
        // ...then, late in the run, three longer ones.
        m.woke(ms(60_000), ms(60_003));
        m.turn(ms(70_000), ms(70_005));
        m.woke(ms(80_000), ms(80_002));
        let kept = m.over_worth_saying();
        assert_eq!(kept.len(), STALLS_KEPT);
        assert_eq!(
            kept[STALLS_KEPT - 3..],
            [
                (ms(60_000), Duration::from_millis(3)),
                (ms(70_000), Duration::from_millis(5)),
                (ms(80_000), Duration::from_millis(2)),
            ],
            "the late stalls are listed, in the order they happened"
        );
        assert!(kept.windows(2).all(|w| w[0].0 < w[1].0), "in time order");
        // Every stall is counted, and the longest one left out bounds those missing.
        let (count, total) = m.over_worth_saying_total();
        assert_eq!(count, 2 * STALLS_KEPT as u64 + 3);
        let short: u64 = (0..2 * STALLS_KEPT as u64).map(|k| 1100 + k % 7).sum();
        assert_eq!(total, Duration::from_micros(short + 10_000));
        let shortest_kept = kept.iter().map(|k| k.1).min().unwrap();
        assert!(m.longest_unkept() <= shortest_kept);
        assert!(m.longest_unkept() >= Duration::from_micros(1100));
        // Shorter stalls than all those kept change nothing in the list.
        m.turn(ms(90_000), ms(90_000) + Duration::from_micros(1001));
        assert_eq!(m.over_worth_saying(), kept);
        assert_eq!(m.over_worth_saying_total().0, count + 1);
    }

    #[test]
    fn the_early_wake_margin_jumps_to_a_late_wake_and_decays_while_the_timer_is_punctual() {
        let us = Duration::from_micros;
        let mut e = EarlyWake::learning(us(50));
        assert_eq!(e.margin(), us(50));
        // Punctual wakes: the margin shrinks by 1/32 each time, down to the floor.
        e.woke(ms(1), ms(1) + us(1));
        assert_eq!(e.margin(), Duration::from_nanos(50_000 - 50_000 / 32));
        for k in 0..400 {
            e.woke(ms(2 + k), ms(2 + k));
        }
        assert_eq!(e.margin(), EARLY_WAKE_MIN);
        // A wake 20 µs late raises it at once; one later than the ceiling is held at the ceiling.
        e.woke(ms(500), ms(500) + us(20));
        assert_eq!(e.margin(), us(20));
        e.woke(ms(501), ms(501) + us(300));
        assert_eq!(e.margin(), us(50));
        // Woken by a packet before the timer: no news about the timer.
        e.woke(ms(600), ms(599));
        assert_eq!(e.margin(), us(50));
        let mut f = EarlyWake::fixed(us(10));
        f.woke(ms(1), ms(1) + us(40));
        assert_eq!(f.margin(), us(10));
        assert_eq!(
            wait_for(Some(ms(1)), ms(1) - us(5), e.margin(), Precision::EXACT),
            Wait::Poll
        );
    }

    #[test]
    fn the_spin_setting_fixes_the_margin_or_leaves_it_to_learn() {
        assert_eq!(
            EarlyWake::from_setting(Some("7000")).margin(),
            Duration::from_micros(7)
        );
        for s in [None, Some("lots")] {
            assert_eq!(EarlyWake::from_setting(s).margin(), SPIN_CEILING);
        }
        let mut w = EarlyWake::from_setting(Some("7000"));
        w.woke(Instant::from_millis(1), Instant::from_millis(2));
        assert_eq!(w.margin(), Duration::from_micros(7), "fixed");
    }
}
