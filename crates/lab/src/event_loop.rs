//! The lab's event loop, one turn at a time: start what is due, move packets, apply the stop
//! rules, sleep until the next packet, signal, launcher report or deadline, and handle what came.
//! Every decision is `labnet`'s (`schedule`, `lifecycle`, `programs`); this module reads the
//! clock and the descriptors and does what they answer.

use anyhow::{bail, Context, Result};
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};
use nix::sys::signalfd::SignalFd;
use nix::sys::time::TimeSpec;
use nix::sys::timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::mpsc::{SyncSender, TrySendError};
use wire::Instant;

use crate::engine::Forwarder;
use crate::netns::HostNs;
use crate::process::{self, LaunchEvent, Launcher};
use crate::runner::RunOptions;
use crate::starter::Starter;
use crate::sys;
use labnet::lifecycle::{
    earliest, wait_for, EarlyWake, Lifecycle, PriorityPolicy, ServerState, StallMeter, Wait,
    HEARTBEAT, STARTS_PER_TURN,
};
use labnet::live;
use labnet::programs::{Program, Programs};
use labnet::schedule::{Action, Schedule};
use labnet::spec::{secs, LabConfig};

const TOKEN_SIGNAL: u64 = u64::MAX;
const TOKEN_TIMER: u64 = u64::MAX - 1;
const TOKEN_LAUNCHER: u64 = u64::MAX - 2;

/// Signals a program, and its process group when it has one of its own.
pub(crate) fn signal(p: &Program, sig: libc::c_int) {
    let Some(pid) = p.pid else { return };
    if p.own_group {
        process::signal_group(pid, sig);
    } else {
        process::signal(pid, sig);
    }
}

/// The loop's descriptors: one epoll over the interfaces, the signalfd, the timerfd and the
/// program launcher's socket.
///
/// A deadline is waited for with `epoll_pwait2`'s nanosecond timeout: one system call per
/// wake-up, where arming a timerfd and reading it when it fires takes three. The timerfd is
/// for kernels older than 5.11, which lack `epoll_pwait2`.
pub(crate) struct LoopIo {
    epoll: Epoll,
    sfd: SignalFd,
    timer: TimerFd,
    /// The absolute monotonic time the timer is armed for.
    armed: Option<u64>,
    /// Whether the kernel has `epoll_pwait2` (until it says otherwise).
    pwait2: bool,
    events: Vec<EpollEvent>,
}

impl LoopIo {
    pub fn new(
        fwd: &Forwarder,
        hosts: &[HostNs],
        sfd: SignalFd,
        launcher: &Launcher,
    ) -> Result<LoopIo> {
        let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC).context("epoll")?;
        for (i, iface) in fwd.ifaces.iter().enumerate() {
            let fd = hosts
                .iter()
                .flat_map(|h| h.tuns.iter())
                .find(|t| t.as_raw_fd() == iface.fd)
                .expect("own fd");
            epoll.add(fd.as_fd(), EpollEvent::new(EpollFlags::EPOLLIN, i as u64))?;
        }
        epoll.add(
            sfd.as_fd(),
            EpollEvent::new(EpollFlags::EPOLLIN, TOKEN_SIGNAL),
        )?;
        let timer = TimerFd::new(
            ClockId::CLOCK_MONOTONIC,
            TimerFlags::TFD_NONBLOCK | TimerFlags::TFD_CLOEXEC,
        )?;
        epoll.add(
            timer.as_fd(),
            EpollEvent::new(EpollFlags::EPOLLIN, TOKEN_TIMER),
        )?;
        epoll.add(
            launcher.fd(),
            EpollEvent::new(EpollFlags::EPOLLIN, TOKEN_LAUNCHER),
        )?;
        Ok(LoopIo {
            epoll,
            sfd,
            timer,
            armed: None,
            // `LATENCYLAB_TIMER=timerfd` takes the older kernels' way, to compare or test it.
            pwait2: std::env::var("LATENCYLAB_TIMER").as_deref() != Ok("timerfd"),
            events: vec![EpollEvent::empty(); 64],
        })
    }

    /// Waits as `wait` says (`mono_start` turns lab time into the monotonic clock's, which
    /// read `mono_now` just before) and returns how many events came.
    fn wait(&mut self, wait: Wait, mono_start: u64, mono_now: u64) -> Result<usize> {
        if self.pwait2 {
            let timeout_ns = match wait {
                Wait::Poll => Some(0),
                Wait::Block => None,
                Wait::Timer(t) => Some((mono_start + t.as_nanos()).saturating_sub(mono_now)),
            };
            let fd = self.epoll.0.as_raw_fd();
            match sys::epoll_wait_ns(fd, &mut self.events, timeout_ns) {
                Ok(n) => return Ok(n),
                // A stop and continue (SIGSTOP, a debugger, Ctrl-Z) interrupts the wait: look
                // again.
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => return Ok(0),
                Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => self.pwait2 = false,
                Err(e) => return Err(e).context("epoll_pwait2"),
            }
        }
        let timeout = match wait {
            Wait::Poll => EpollTimeout::ZERO,
            Wait::Block => EpollTimeout::NONE,
            Wait::Timer(t) => {
                let abs = mono_start + t.as_nanos();
                // The timer stays armed until it fires; re-arm only for a new deadline.
                if self.armed != Some(abs) {
                    let ts =
                        TimeSpec::new((abs / 1_000_000_000) as i64, (abs % 1_000_000_000) as i64);
                    self.timer.set(
                        Expiration::OneShot(ts),
                        TimerSetTimeFlags::TFD_TIMER_ABSTIME,
                    )?;
                    self.armed = Some(abs);
                }
                EpollTimeout::NONE
            }
        };
        match self.epoll.wait(&mut self.events, timeout) {
            // As above.
            Err(nix::errno::Errno::EINTR) => Ok(0),
            r => Ok(r?),
        }
    }
}

/// A lab while it runs: the network, the programs and the rules, driven one loop turn at a
/// time by [`Lab::run`].
pub(crate) struct Lab<'a> {
    pub starter: Starter<'a>,
    pub cfg: &'a LabConfig,
    pub opts: &'a RunOptions,
    pub fwd: Forwarder,
    pub io: LoopIo,
    /// The monotonic clock's reading at the lab's `Instant::ZERO`.
    pub mono_start: u64,
    pub early: EarlyWake,
    pub priority: PriorityPolicy,
    pub schedule: Schedule,
    pub life: Lifecycle,
    pub link_idx: std::collections::BTreeMap<String, usize>,
    pub ns_inodes: Vec<u64>,
    pub progs: Programs,
    /// `--server`'s index in `progs`.
    pub server: Option<usize>,
    /// Whether the server listened when COMMAND started.
    pub server_listened: Option<bool>,
    /// Looks for the server's listening socket while COMMAND waits for it.
    pub listen_watch: Option<process::ListenWatch>,
    pub stalls: StallMeter,
    /// When the current loop turn began (the end of the last wait).
    pub turn_start: Instant,
    /// The live view's channel, when one watches: a snapshot every [`live::INTERVAL`].
    pub live: Option<LiveFeed>,
}

/// Where the engine hands its snapshots to the live view's thread, and when the next is due.
pub(crate) struct LiveFeed {
    pub tx: SyncSender<live::Snapshot>,
    pub dirs: std::sync::Arc<Vec<(String, String)>>,
    pub next: Instant,
}

impl Lab<'_> {
    fn now(&self) -> Instant {
        Instant::from_nanos(sys::monotonic_ns().saturating_sub(self.mono_start))
    }

    /// The loop: start what is due, move packets, apply the stop rules, sleep until the next
    /// packet, signal, program exit or deadline, and handle what came.
    pub fn run(&mut self) -> Result<()> {
        // Setting the lab up (captures, logs) before the first turn is no stall.
        self.turn_start = self.now();
        let mut now = self.turn_start;
        let mut real = now;
        loop {
            self.start_due(now)?;
            self.fwd.poll(now, real);
            self.check_end(now);
            if self.life.finished(now, self.all_gone()) {
                self.feed_live(now, true);
                return Ok(());
            }
            self.feed_live(now, false);
            (now, real) = self.wait_and_handle(now)?;
        }
    }

    /// Hands the live view a snapshot when one is due (every turn is within a heartbeat of the
    /// last), and the last one at the end. A view that has fallen behind misses a snapshot
    /// rather than hold the engine up; the last one is waited for.
    fn feed_live(&mut self, now: Instant, last: bool) {
        let Some(feed) = &mut self.live else { return };
        if !last && now < feed.next {
            return;
        }
        feed.next = now + live::INTERVAL;
        let snap = self.fwd.live_snapshot(now, &feed.dirs, last);
        let sent = if last {
            feed.tx.send(snap).is_ok()
        } else {
            !matches!(feed.tx.try_send(snap), Err(TrySendError::Disconnected(_)))
        };
        if !sent {
            self.live = None;
        }
    }

    /// Starts COMMAND once it is due, and every program and link change whose time has come.
    fn start_due(&mut self, now: Instant) -> Result<()> {
        // Requests the launcher had no room for yet (it answers, and so makes room, at its pace).
        self.starter.launcher.flush()?;
        let server = self.server.map(|s| self.progs.get(s));
        let (server_pid, server_exited) = match server {
            Some(p) => (p.pid, p.status.is_some()),
            None => (None, false),
        };
        if let (Some(pid), None, false) =
            (server_pid, &self.listen_watch, self.life.command_settled())
        {
            let cpus = self.starter.launcher.cpus().map(|c| c.start.clone());
            self.listen_watch = Some(process::ListenWatch::start(pid as u32, cpus));
        }
        let listening = self.listen_watch.as_ref().is_some_and(|w| w.listening());
        let due = self.life.command_due(now, || ServerState {
            listening,
            exited: server_exited,
        });
        if due {
            self.server_listened = self.server.map(|_| listening);
            self.listen_watch = None;
            let (host, argv) = self.opts.command.clone().context("a command is due")?;
            self.starter.start(&host, argv, false, "command", true)?;
            self.progs.asked("COMMAND", false, true, true);
            self.life.command_started();
        }
        if self.life.is_ending() {
            self.schedule.hold_starts();
        }
        let mut starts = 0;
        while let Some(action) = self.schedule.poll_action(now) {
            match action {
                Action::Start(i) => {
                    starts += 1;
                    if starts > STARTS_PER_TURN {
                        // Still due: the next turn, right after this one's packets, starts it.
                        self.schedule.unpoll_start();
                        break;
                    }
                    let p = &self.cfg.programs[i];
                    let argv = vec!["sh".into(), "-c".into(), p.run.clone()];
                    self.starter.start(&p.host, argv, true, &p.name, false)?;
                    self.progs.asked(&p.name, true, p.wait, false);
                }
                Action::Change(i) => self.change_link(i),
                Action::DurationOver => self.life.duration_over(),
            }
        }
        Ok(())
    }

    /// Applies `cfg.changes[i]` to the link directions it names, at its scheduled time.
    fn change_link(&mut self, i: usize) {
        let c = &self.cfg.changes[i];
        let li = self.link_idx[&c.link];
        for d in 0..self.fwd.dirs().len() {
            let info = &self.fwd.dirs()[d];
            if info.link_index == li && c.direction.is_none_or(|x| x == info.side) {
                let params = c.apply(self.fwd.params(d));
                self.fwd.set_params(Instant::ZERO + secs(c.at_s), d, params);
            }
        }
    }

    /// Applies the stop rules; when the lab begins to end, what still runs gets SIGTERM.
    fn check_end(&mut self, now: Instant) {
        let all_started = self.schedule.all_started();
        let command_status = self.progs.command_status();
        let ended = self.progs.waited_ended();
        if self
            .life
            .check_end(now, command_status, all_started, ended)
            .is_some()
        {
            self.terminate_all();
        }
    }

    fn terminate_all(&self) {
        for p in self.progs.running() {
            signal(p, libc::SIGTERM);
        }
    }

    /// Whether every program and every process in the lab's namespaces has gone. A program
    /// started through `sh -c` may outlive its shell: each gets to finish writing its results.
    fn all_gone(&self) -> bool {
        self.life.is_ending()
            && self.progs.all_ended()
            && process::processes_in_namespaces(&self.ns_inodes).is_empty()
    }

    /// Sleeps until the next packet, signal or deadline, and handles what came. Returns the
    /// time for the rest of the turn, and the clock's: when the wait ended if it ended with
    /// nothing to handle (a deadline), else after the handling, which may have taken long
    /// enough for the next packet to fall due. A clock read costs as much as a short system
    /// call on some virtual machines, a turn more than both. With a precision (`--precision`),
    /// a deadline within it is not slept for, and the rest of the turn runs the network that
    /// far ahead of the clock ([`labnet::lifecycle::Precision`]).
    fn wait_and_handle(&mut self, now: Instant) -> Result<(Instant, Instant)> {
        let network_now = now;
        // The heartbeat falls on whole multiples of itself, so that an idle loop re-arms its
        // timer once per heartbeat and not on every turn.
        let beat = HEARTBEAT.as_nanos() as u64;
        let heartbeat = Instant::from_nanos((now.as_nanos() / beat + 1) * beat);
        let deadline = earliest([
            self.fwd.next_wakeup(),
            self.schedule.next_wakeup(),
            self.life.next_wakeup(now),
            Some(heartbeat),
        ]);
        let mono_before = sys::monotonic_ns();
        let before = Instant::from_nanos(mono_before.saturating_sub(self.mono_start));
        let precision = self.cfg.precision;
        let wait = wait_for(deadline, before, self.early.margin(), precision);
        self.stalls.turn(self.turn_start, before);
        let n = self.io.wait(wait, self.mono_start, mono_before)?;
        let now = self.now();
        self.turn_start = now;
        match wait {
            Wait::Timer(due) => {
                self.stalls.woke(due, now);
                self.early.woke(due, now);
            }
            Wait::Poll => self.stalls.woke(before, now),
            Wait::Block => {}
        }
        if wait != Wait::Poll {
            self.priority.blocked(now - before);
        }
        match self.priority.poll_switch(now) {
            Some(true) => {
                let realtime = sys::realtime_priority();
                self.starter.engine_apart_from_starts(realtime);
            }
            Some(false) => {
                sys::normal_policy();
                sys::high_priority();
                self.starter.engine_apart_from_starts(false);
            }
            None => {}
        }
        for k in 0..n {
            match self.io.events[k].data() {
                TOKEN_TIMER => {
                    let _ = self.io.timer.wait();
                    self.io.armed = None;
                }
                TOKEN_SIGNAL => self.read_signals(now)?,
                TOKEN_LAUNCHER => {
                    self.record_exits(now)?;
                    self.starter.launcher.flush()?;
                }
                // Level-triggered: an interface with packets left after a burst is reported again.
                // Each interface after the first is read at the clock's time, not the turn's
                // start: a packet its host sent while the turn handled the interfaces before
                // it (a capture's write can take milliseconds) would otherwise be dated back
                // and reach its destination sooner than the link allows.
                i => {
                    let at = if k == 0 { now } else { self.now() };
                    let mono_start = self.mono_start;
                    let clock =
                        || Instant::from_nanos(sys::monotonic_ns().saturating_sub(mono_start));
                    self.fwd.read_iface(i as usize, at, clock)?;
                }
            }
        }
        let real = if n == 0 { now } else { self.now() };
        // The network's time never goes back.
        Ok((precision.run_to(real).max(network_now), real))
    }

    fn read_signals(&mut self, now: Instant) -> Result<()> {
        while let Some(si) = self.io.sfd.read_signal()? {
            let sig = si.ssi_signo as i32;
            // Programs are the launcher's children: a SIGCHLD here is the launcher's own end.
            if sig == libc::SIGCHLD {
                if !self.starter.launcher.alive() {
                    bail!("the program launcher ended unexpectedly");
                }
                continue;
            }
            let from_tty = sig == libc::SIGINT && si.ssi_code == libc::SI_KERNEL;
            let command_running = self.progs.command_running();
            if self.life.on_signal(now, sig, from_tty, command_running) {
                self.terminate_all();
            }
        }
        Ok(())
    }

    /// Records what the launcher reports: process ids of programs started, in the order they
    /// were asked for, and the programs that have ended. A program that starts once the lab is
    /// ending gets SIGTERM at once.
    fn record_exits(&mut self, now: Instant) -> Result<()> {
        let ending = self.life.is_ending();
        for ev in self.starter.launcher.events()? {
            match ev {
                LaunchEvent::Started(pid) => {
                    let i = self.progs.started(pid)?;
                    if Some(i) == self.server {
                        self.life.server_started(now);
                    }
                    if ending {
                        signal(self.progs.get(i), libc::SIGTERM);
                    }
                }
                LaunchEvent::Failed(e) => {
                    bail!("starting program '{}': {e}", self.progs.starting_name());
                }
                LaunchEvent::Exited { pid, status } => {
                    let Some(p) = self.progs.exited(pid, status) else {
                        continue;
                    };
                    if !self.opts.quiet && !p.is_command && status != 0 && !ending {
                        eprintln!(
                            "latencylab: program '{}' ended with status {status}",
                            p.name
                        );
                    }
                }
            }
        }
        Ok(())
    }
}
