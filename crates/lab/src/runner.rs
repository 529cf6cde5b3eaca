//! Running a lab from start to end: checks, namespaces, the event loop on the monotonic clock,
//! programs on schedule, and teardown on every exit path (normal end, COMMAND failure, Ctrl-C,
//! SIGTERM, an error half-way).
//!
//! The loop blocks SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGCHLD and reads them from a signalfd,
//! so a signal is just another event. Timers are a timerfd armed at the network's next
//! deadline, with the thread's timer slack at 1 ns; a deadline closer than [`SPIN_NS`] is
//! waited for by polling, since a sleep that short overshoots.

use std::fs;
use std::io::Write;
use std::os::fd::{AsFd, AsRawFd};
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::Duration as StdDuration;

use anyhow::{Context, Result};
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::time::TimeSpec;
use nix::sys::timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};
use wire::Instant;

use crate::cleanup::{self, runtime_dir};
use crate::engine::Forwarder;
use crate::netns::{self, HostNs};
use crate::output::{self, Summary};
use crate::owner;
use crate::process::{self, Launch};
use crate::sys;
use crate::userns;
use labnet::run_dir::RunDir;
use labnet::schedule::{programs_done, Action, ProgramState, Schedule};
use labnet::spec::{secs, LabConfig, UsageError};
use labnet::Setting;

/// The timer is armed this much before a deadline and the rest is busy-waited: a sleeping
/// thread wakes tens of microseconds late, a polling one does not. Measured (docs/
/// PERFORMANCE.md): 50 µs keeps the p99 delivery error under 50 µs at 100 Mbit/s, 20 µs does
/// not. `LATENCYLAB_SPIN_NS` overrides it, trading timing accuracy for CPU.
/// `LATENCYLAB_PRIORITY` (`auto`, the default; `rt`; `nice`; `normal`) chooses the loop's
/// scheduling (see [`Scheduling`]).
const SPIN_NS: u64 = 50_000;
/// How long programs get to exit after SIGTERM before SIGKILL; the network keeps running.
const GRACE: StdDuration = StdDuration::from_secs(2);
/// How long COMMAND waits for `--server` to listen.
const SERVER_READY_TIMEOUT: StdDuration = StdDuration::from_secs(3);

/// How the forwarding loop is scheduled. Two policies, each right in one regime:
/// - real-time (SCHED_FIFO) wakes the loop within microseconds even when the lab's programs keep
///   every core busy, which is what a link at tens of Mbit/s needs;
/// - but at a gigabit and more the loop never blocks, and the kernel then preempts a real-time
///   thread for 50 ms at a time so that ordinary tasks can run, stalling every link; there nice
///   -20 keeps the rate (docs/PERFORMANCE.md).
///
/// `auto` (the default) measures, every [`SCHED_WINDOW_NS`], the share of time the loop was
/// busy (not blocked waiting), and runs real-time while it is mostly idle, nice -20 while it is
/// mostly busy, with hysteresis. `LATENCYLAB_PRIORITY=rt|nice|normal` fixes one.
struct Scheduling {
    auto: bool,
    realtime: bool,
    window_start_ns: u64,
    blocked_ns: u64,
}

const SCHED_WINDOW_NS: u64 = 100_000_000;
/// Busy share above which a real-time loop turns to nice -20, and below which it turns back.
const BUSY_TO_NICE: f64 = 0.6;
const BUSY_TO_RT: f64 = 0.3;

/// The policy for the next window: real-time or not, from the busy share of the last one.
fn next_realtime(realtime: bool, busy: f64) -> bool {
    if realtime {
        busy <= BUSY_TO_NICE
    } else {
        busy < BUSY_TO_RT
    }
}

impl Scheduling {
    fn start(mode: Option<&str>, now_ns: u64) -> Scheduling {
        let auto = !matches!(mode, Some("rt" | "nice" | "normal"));
        let realtime = matches!(mode, Some("rt")) || auto;
        match mode {
            Some("normal") => {}
            Some("nice") => {
                sys::high_priority();
            }
            _ => {
                sys::realtime_priority();
            }
        }
        Scheduling {
            auto,
            realtime,
            window_start_ns: now_ns,
            blocked_ns: 0,
        }
    }

    fn blocked(&mut self, ns: u64) {
        self.blocked_ns += ns;
    }

    fn tick(&mut self, now_ns: u64) {
        let window = now_ns.saturating_sub(self.window_start_ns);
        if window < SCHED_WINDOW_NS {
            return;
        }
        let busy = 1.0 - (self.blocked_ns.min(window) as f64 / window as f64);
        let rt = next_realtime(self.realtime, busy);
        if self.auto && rt != self.realtime {
            if rt {
                sys::realtime_priority();
            } else {
                sys::normal_policy();
                sys::high_priority();
            }
            self.realtime = rt;
        }
        self.window_start_ns = now_ns;
        self.blocked_ns = 0;
    }
}

const TOKEN_SIGNAL: u64 = u64::MAX;
const TOKEN_TIMER: u64 = u64::MAX - 1;

/// What to run besides the configuration's own programs.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    pub out_dir: Option<PathBuf>,
    /// COMMAND and the host it runs in; the lab ends when it ends, with its exit status.
    pub command: Option<(String, Vec<String>)>,
    /// A shell command line run in a host for the life of the lab, started before COMMAND.
    pub server: Option<(String, String)>,
    /// Print nothing on stderr but errors.
    pub quiet: bool,
    /// With `out_dir`: leave out the pcaps and link logs (keep lab.json and summary.json), for
    /// runs so fast that writing every packet would measure the disk.
    pub no_capture: bool,
}

pub struct RunResult {
    /// COMMAND's exit status (128 + signal when killed), or 0 for a run that ended normally,
    /// or 128 + signal when the lab was stopped by one.
    pub exit_code: i32,
    pub summary: Summary,
}

struct Prog {
    name: String,
    child: Child,
    own_group: bool,
    wait: bool,
    is_command: bool,
    status: Option<i32>,
}

/// Everything that must be undone, undone in Drop: whichever way the run ends, this runs.
struct Teardown {
    pid: u32,
    hosts: Vec<HostNs>,
    progs: Vec<Prog>,
    /// Removes the runtime directory and the hosts' processes should this process be killed.
    runtime_watch: Option<cleanup::RemoveWhenGone>,
}

impl Drop for Teardown {
    fn drop(&mut self) {
        for p in &mut self.progs {
            if p.status.is_none() {
                let pid = p.child.id() as i32;
                if p.own_group {
                    process::signal_group(pid, libc::SIGKILL);
                }
                process::signal(pid, libc::SIGKILL);
                let _ = p.child.wait();
            }
        }
        for h in &self.hosts {
            if let Some(ino) = process::ns_inode(h.ns_fd.as_raw_fd()) {
                process::kill_all_in_ns(ino);
            }
        }
        for h in self.hosts.drain(..) {
            netns::remove_ns(&h.ns_name);
            drop(h);
        }
        let _ = fs::remove_dir_all(runtime_dir(self.pid));
    }
}

fn exit_code_of(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

/// Checks what can be checked before anything is created: privileges, the TUN device, the
/// hosts' congestion controls.
pub fn preflight(cfg: &LabConfig) -> Result<(), UsageError> {
    if !nix::unistd::geteuid().is_root() && !userns::rootless() {
        return Err(UsageError(
            "latencylab needs root or a user namespace of its own to create network namespaces and TUN devices (call lab::userns::enter first, or try: sudo latencylab ...)".into(),
        ));
    }
    if !std::path::Path::new("/dev/net/tun").exists() {
        return Err(UsageError(
            "/dev/net/tun is missing (load the tun module: modprobe tun)".into(),
        ));
    }
    let avail = netns::available_cc();
    if userns::rootless() {
        let allowed = netns::allowed_cc();
        for h in &cfg.hosts {
            if let Some(line) = userns::cc_line(&h.settings.cc, &h.name, &avail, &allowed) {
                return Err(UsageError(line));
            }
        }
    }
    for h in &cfg.hosts {
        if !avail.is_empty() && !avail.contains(&h.settings.cc) {
            return Err(UsageError(format!(
                "--cc: '{}' (host {}) is not available in this kernel (available: {})",
                h.settings.cc,
                h.name,
                avail.join(", ")
            )));
        }
    }
    Ok(())
}

/// The signals a lab reads from its signalfd.
fn stop_signals() -> SigSet {
    let mut mask = SigSet::empty();
    for s in [
        Signal::SIGINT,
        Signal::SIGTERM,
        Signal::SIGHUP,
        Signal::SIGQUIT,
        Signal::SIGCHLD,
    ] {
        mask.add(s);
    }
    mask
}

/// Blocks the signals a lab handles in the calling thread, and so in every thread it creates
/// afterwards. A process-directed signal goes to any thread that does not block it: a program
/// that runs labs and also has other threads (a thread pool from earlier work, a progress bar)
/// must call this first, from its main thread, or a SIGTERM may kill it without cleaning up
/// and a SIGCHLD may never reach the lab. Returns the previous mask for
/// [`restore_signals`]; signals that arrived meanwhile are delivered then.
pub fn block_stop_signals() -> Result<SigSet> {
    stop_signals()
        .thread_swap_mask(nix::sys::signal::SigmaskHow::SIG_BLOCK)
        .context("blocking signals")
}

pub fn restore_signals(old: SigSet) {
    let _ = old.thread_set_mask();
}

/// Runs a lab to its end. Usage errors come back as `UsageError` inside the anyhow error.
/// Call [`block_stop_signals`] first if the process has other threads.
pub fn run_lab(cfg: &LabConfig, opts: &RunOptions) -> Result<RunResult> {
    preflight(cfg)?;
    let pid = std::process::id();
    let mut ccs: Vec<&str> = cfg.hosts.iter().map(|h| h.settings.cc.as_str()).collect();
    ccs.dedup();
    // Without root the list is only read (preflight checked it).
    for cc in ccs.into_iter().filter(|_| !userns::rootless()) {
        if netns::allow_cc(cc)? && !opts.quiet {
            eprintln!("latencylab: added {cc} to net.ipv4.tcp_allowed_congestion_control so that lab hosts may use it");
        }
    }
    let removed = cleanup::remove_leftovers();
    if !removed.is_empty() && !opts.quiet {
        eprintln!(
            "latencylab: removed what an earlier lab left behind: {}",
            removed.join(", ")
        );
    }

    // Signals become events from here on (children get an empty mask back in pre_exec).
    let mask = stop_signals();
    let old_mask = mask
        .thread_swap_mask(nix::sys::signal::SigmaskHow::SIG_BLOCK)
        .context("blocking signals")?;
    let result = run_blocked(cfg, opts, pid, &mask);
    let _ = old_mask.thread_set_mask();
    result
}

fn run_blocked(cfg: &LabConfig, opts: &RunOptions, pid: u32, mask: &SigSet) -> Result<RunResult> {
    let sfd = SignalFd::with_flags(mask, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)
        .context("signalfd")?;
    let mut td = Teardown {
        pid,
        hosts: Vec::new(),
        progs: Vec::new(),
        runtime_watch: None,
    };

    let rt = runtime_dir(pid);
    fs::create_dir_all(&rt).with_context(|| format!("creating {}", rt.display()))?;
    // Each host's own /etc/hosts and /etc/resolv.conf: in a NAT64 lab an IPv6-only host must
    // not find an IPv4-only host's address in /etc/hosts, and asks the DNS64 instead.
    let mut name_files = Vec::new();
    for h in &cfg.hosts {
        let hosts_file = rt.join(format!("hosts-{}", h.name));
        let resolv_file = rt.join(format!("resolv-{}.conf", h.name));
        fs::write(&hosts_file, cfg.hosts_file_for(Some(h)))?;
        match &cfg.nat64 {
            Some(n) if !h.has_ipv4() => fs::write(
                &resolv_file,
                format!("# latencylab: the lab's DNS64\nnameserver {}\noptions timeout:1 attempts:2\n", n.dns),
            )?,
            // No resolver: the lab's names are in /etc/hosts and nothing else resolves (closed
            // world).
            _ => fs::write(&resolv_file, "# latencylab: no DNS server in this lab\nnameserver 127.0.0.1\noptions timeout:1 attempts:1\n")?,
        }
        name_files.push((hosts_file, resolv_file));
    }

    netns::prepare_netns_dir()?;
    for h in &cfg.hosts {
        td.hosts.push(netns::create_host(pid, h)?);
    }
    let inodes: Vec<u64> = td
        .hosts
        .iter()
        .filter_map(|h| process::ns_inode(h.ns_fd.as_raw_fd()))
        .collect();
    td.runtime_watch = Some(cleanup::RemoveWhenGone::start(&rt, &inodes)?);
    let run_dir = opts.out_dir.as_ref().map(RunDir::new);
    if let Some(d) = &run_dir {
        output::prepare_dir(d)?;
        output::write_json(&d.lab_json(), cfg)?;
    }
    let mono_start = sys::monotonic_ns();
    let real_start = sys::realtime_ns();
    let now_of = |mono: u64| Instant::from_nanos(mono.saturating_sub(mono_start));
    let capture_dir = run_dir.as_ref().filter(|_| !opts.no_capture);
    let mut fwd = Forwarder::build(cfg, &td.hosts, capture_dir, real_start)?;

    let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC).context("epoll")?;
    for (i, iface) in fwd.ifaces.iter().enumerate() {
        let fd = td
            .hosts
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
    sys::tight_timer_slack();
    let mut sched = Scheduling::start(
        std::env::var("LATENCYLAB_PRIORITY").ok().as_deref(),
        sys::monotonic_ns(),
    );
    let spin_ns: u64 = std::env::var("LATENCYLAB_SPIN_NS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(SPIN_NS);

    let run_as = process::invoking_user();
    let ns_inodes: Vec<u64> = td
        .hosts
        .iter()
        .filter_map(|h| process::ns_inode(h.ns_fd.as_raw_fd()))
        .collect();
    let env_for = |host: &str| -> Vec<(String, String)> {
        let mut env = vec![("LATENCYLAB_HOST".to_string(), host.to_string())];
        // `latencylab bulk-client` and friends resolve inside the lab even under sudo, whose
        // PATH leaves out ~/.cargo/bin.
        if let Some(dir) = std::env::current_exe()
            .ok()
            .and_then(|p| p.parent().map(|d| d.to_path_buf()))
        {
            let path = std::env::var("PATH").unwrap_or_default();
            env.push(("PATH".into(), format!("{}:{path}", dir.display())));
        }
        for h in &cfg.hosts {
            let i = &h.interfaces[0];
            env.push((
                format!(
                    "LATENCYLAB_{}",
                    h.name.to_ascii_uppercase().replace('-', "_")
                ),
                if h.has_ipv4() {
                    i.ipv4.to_string()
                } else {
                    i.ipv6.to_string()
                },
            ));
        }
        if let Some(d) = &opts.out_dir {
            env.push(("LATENCYLAB_OUT".into(), d.display().to_string()));
        }
        env
    };
    let launch = |host: &str,
                  argv: Vec<String>,
                  own_group: bool,
                  name: &str,
                  command: bool|
     -> Result<Child> {
        let hi = cfg
            .hosts
            .iter()
            .position(|h| h.name == host)
            .context("validated host")?;
        let (stdout, stderr) = match (&opts.out_dir, command) {
            (_, true) => (Stdio::inherit(), Stdio::inherit()),
            (Some(d), false) => {
                let d = RunDir::new(d);
                owner::create_dir_all(&d.programs())?;
                (
                    Stdio::from(owner::create_file(&d.program_out(name))?),
                    Stdio::from(owner::create_file(&d.program_err(name))?),
                )
            }
            // Background programs must not mix into COMMAND's stdout (`... -- cmd | jq`).
            (None, false) => (
                Stdio::from(std::io::stderr().as_fd().try_clone_to_owned()?),
                Stdio::inherit(),
            ),
        };
        process::spawn(Launch {
            ns_fd: td.hosts[hi].ns_fd.as_raw_fd(),
            hosts_file: &name_files[hi].0,
            resolv_file: &name_files[hi].1,
            argv,
            env: env_for(host),
            stdout,
            stderr,
            stdin: if command {
                Stdio::inherit()
            } else {
                Stdio::null()
            },
            own_process_group: own_group,
            run_as: run_as.clone(),
        })
    };

    let mut progs: Vec<Prog> = Vec::new();
    let mut server_idx = None;
    if let Some((host, line)) = &opts.server {
        let child = launch(
            host,
            vec!["sh".into(), "-c".into(), line.clone()],
            true,
            "server",
            false,
        )?;
        progs.push(Prog {
            name: "server".into(),
            child,
            own_group: true,
            wait: false,
            is_command: false,
            status: None,
        });
        server_idx = Some(progs.len() - 1);
    }
    let mut schedule = Schedule::new(cfg);
    let mut duration_over = false;
    let link_idx = cfg.link_index();
    let mut command_pending = opts.command.clone();
    let server_wait_until = Instant::ZERO + SERVER_READY_TIMEOUT;

    let mut stopping: Option<(Instant, i32)> = None; // (kill deadline, exit code)
    let mut exit_code = 0;
    let mut events = vec![EpollEvent::empty(); 64];
    // The absolute time the timerfd is armed for, and whether SIGCHLD came since the last reap.
    let mut armed: Option<u64> = None;
    let mut child_exited = true;
    let mut next_reap_poll = Instant::ZERO;

    if !opts.quiet {
        describe(cfg);
    }

    let result: Result<()> = (|| loop {
        let now = now_of(sys::monotonic_ns());

        // Start COMMAND once the server listens (or gave up, or there is none).
        if let Some((host, argv)) = &command_pending {
            let ready = match server_idx {
                None => true,
                Some(s) => {
                    process::has_listener(progs[s].child.id())
                        || now >= server_wait_until
                        || progs[s].child.try_wait()?.is_some()
                }
            };
            if ready && stopping.is_none() {
                let child = launch(host, argv.clone(), false, "command", true)?;
                progs.push(Prog {
                    name: "COMMAND".into(),
                    child,
                    own_group: false,
                    wait: true,
                    is_command: true,
                    status: None,
                });
                command_pending = None;
            }
        }
        if stopping.is_some() {
            schedule.hold_starts();
        }
        while let Some(action) = schedule.poll_action(now) {
            match action {
                Action::Start(i) => {
                    let p = &cfg.programs[i];
                    let child = launch(
                        &p.host,
                        vec!["sh".into(), "-c".into(), p.run.clone()],
                        true,
                        &p.name,
                        false,
                    )?;
                    progs.push(Prog {
                        name: p.name.clone(),
                        child,
                        own_group: true,
                        wait: p.wait,
                        is_command: false,
                        status: None,
                    });
                }
                Action::Change(i) => {
                    let c = &cfg.changes[i];
                    let li = link_idx[&c.link];
                    for d in 0..fwd.dirs().len() {
                        let info = &fwd.dirs()[d];
                        if info.link_index == li && c.direction.is_none_or(|x| x == info.side) {
                            let params = c.apply(fwd.params(d));
                            fwd.set_params(Instant::ZERO + secs(c.at_s), d, params);
                        }
                    }
                }
                Action::DurationOver => duration_over = true,
            }
        }

        fwd.poll(now);

        // Has the lab reached its end?
        let all_started = command_pending.is_none() && schedule.all_started();
        let running = |p: &Prog| p.status.is_none();
        if stopping.is_none() {
            let command_done = progs.iter().any(|p| p.is_command && !running(p));
            let end = if command_done {
                exit_code = progs
                    .iter()
                    .find(|p| p.is_command)
                    .and_then(|p| p.status)
                    .unwrap_or(0);
                true
            } else if duration_over {
                true
            } else if opts.command.is_none() && !schedule.has_duration() {
                let states: Vec<ProgramState> = progs
                    .iter()
                    .map(|p| ProgramState {
                        wait: p.wait,
                        running: running(p),
                    })
                    .collect();
                programs_done(all_started, &states)
            } else {
                false
            };
            if end {
                for p in progs.iter().filter(|p| running(p)) {
                    let pid = p.child.id() as i32;
                    if p.own_group {
                        process::signal_group(pid, libc::SIGTERM)
                    } else {
                        process::signal(pid, libc::SIGTERM)
                    }
                }
                stopping = Some((now + GRACE, exit_code));
            }
        }
        if let Some((deadline, _)) = stopping {
            // A program started through `sh -c` may outlive its shell: wait for every process
            // in the lab's namespaces, so that each can finish writing its results.
            let quiet = progs.iter().all(|p| !running(p))
                && ns_inodes
                    .iter()
                    .all(|ino| process::processes_in_ns(*ino).is_empty());
            if quiet || now >= deadline {
                return Ok(());
            }
        }

        // Sleep until the next thing: a packet, a signal, a deadline.
        let mut deadline = fwd.next_wakeup();
        let mut consider = |t: Instant| deadline = Some(deadline.map_or(t, |d: Instant| d.min(t)));
        if let Some(t) = schedule.next_wakeup() {
            consider(t);
        }
        if let Some((t, _)) = stopping {
            consider(t.min(now + wire::Duration::from_millis(10)));
        }
        if command_pending.is_some() {
            consider(now + wire::Duration::from_millis(5));
        }
        let timeout = match deadline {
            None => EpollTimeout::NONE,
            Some(t) if t.as_nanos() <= now.as_nanos() + spin_ns => EpollTimeout::ZERO,
            Some(t) => {
                let abs = mono_start + t.as_nanos() - spin_ns;
                // The timer stays armed until it fires; re-arm only for a new deadline.
                if armed != Some(abs) {
                    let ts =
                        TimeSpec::new((abs / 1_000_000_000) as i64, (abs % 1_000_000_000) as i64);
                    timer.set(
                        Expiration::OneShot(ts),
                        TimerSetTimeFlags::TFD_TIMER_ABSTIME,
                    )?;
                    armed = Some(abs);
                }
                EpollTimeout::NONE
            }
        };
        let before = sys::monotonic_ns();
        let n = epoll.wait(&mut events, timeout)?;
        let after = sys::monotonic_ns();
        if timeout == EpollTimeout::NONE {
            sched.blocked(after - before);
        }
        sched.tick(after);
        let now = now_of(after);
        for ev in &events[..n] {
            match ev.data() {
                TOKEN_TIMER => {
                    let _ = timer.wait();
                    armed = None;
                }
                TOKEN_SIGNAL => {
                    while let Some(si) = sfd.read_signal()? {
                        let sig = si.ssi_signo as i32;
                        if sig == libc::SIGCHLD {
                            child_exited = true;
                            continue;
                        }
                        // A Ctrl-C from the terminal reached COMMAND too (same process group);
                        // the lab ends when COMMAND does. Any other stop signal stops the lab.
                        let from_tty = sig == libc::SIGINT && si.ssi_code == libc::SI_KERNEL;
                        let command_running =
                            progs.iter().any(|p| p.is_command && p.status.is_none());
                        if from_tty && command_running {
                            continue;
                        }
                        if stopping.is_none() {
                            for p in progs.iter().filter(|p| p.status.is_none()) {
                                let pid = p.child.id() as i32;
                                if p.own_group {
                                    process::signal_group(pid, libc::SIGTERM)
                                } else {
                                    process::signal(pid, libc::SIGTERM)
                                }
                            }
                            command_pending = None;
                            exit_code = 128 + sig;
                            stopping = Some((now + GRACE, exit_code));
                        }
                    }
                }
                // Level-triggered: an interface with packets left after a burst is reported again.
                i => {
                    fwd.read_iface(i as usize, now)?;
                }
            }
        }
        // Reap only when a child has exited: a wait per program per loop turn would be most of
        // the loop's system calls at a few thousand packets a second.
        // SIGCHLD is the cue, and a poll every 100 ms the safety net (a process-directed signal
        // can land on another thread of a program that did not block it).
        let reap = std::mem::take(&mut child_exited) || now >= next_reap_poll;
        if reap {
            next_reap_poll = now + wire::Duration::from_millis(100);
        }
        for p in progs.iter_mut().filter(|p| reap && p.status.is_none()) {
            if let Some(st) = p.child.try_wait()? {
                p.status = Some(exit_code_of(st));
                if !opts.quiet && !p.is_command && st.code() != Some(0) && stopping.is_none() {
                    eprintln!(
                        "latencylab: program '{}' ended with status {}",
                        p.name,
                        exit_code_of(st)
                    );
                }
            }
        }
    })();
    td.progs = progs;
    result?;
    if let Some((_, code)) = stopping {
        if exit_code == 0 {
            exit_code = code;
        }
    }
    let summary = fwd.finish()?;
    if let Some(d) = &opts.out_dir {
        output::write_json(&RunDir::new(d).summary_json(), &summary)?;
    }
    if !opts.quiet {
        report(&summary, opts);
    }
    drop(fwd);
    drop(td);
    Ok(RunResult { exit_code, summary })
}

fn describe(cfg: &LabConfig) {
    let mut s = String::from("latencylab: lab up:");
    for h in &cfg.hosts {
        let addrs: Vec<String> = h
            .interfaces
            .iter()
            .map(|i| {
                if h.has_ipv4() {
                    format!("{}.{} {}", h.name, i.name, i.ipv4)
                } else {
                    format!("{}.{} {} (IPv6 only)", h.name, i.name, i.ipv6)
                }
            })
            .collect();
        s.push_str(&format!(" [{}]", addrs.join(", ")));
    }
    eprintln!("{s}");
    if let Some(n) = &cfg.nat64 {
        eprintln!(
            "latencylab:   NAT64 {} (IPv4 {}) and DNS64 {} at {}",
            n.prefix, n.pool4, n.dns, n.at
        );
    }
    for l in &cfg.links {
        for (name, d) in [("up", &l.up), ("down", &l.down)] {
            let s = |x: Setting| x.to_string();
            let p = &d.params;
            eprintln!(
                "latencylab:   {} {name}: {} {} delay, loss {}, queue {}",
                l.name,
                s(Setting::Capacity(p.capacity.clone())),
                s(Setting::Delay(p.delay)),
                s(Setting::Loss(p.loss)),
                d.queue
            );
        }
    }
}

fn report(summary: &Summary, opts: &RunOptions) {
    let mut err = std::io::stderr().lock();
    for l in &summary.links {
        if l.packets_in == 0 {
            continue;
        }
        let drops: u64 = l.drops.values().sum();
        let _ = writeln!(
            err,
            "latencylab: {}-{}: {} packets, {:.2} Mbit/s, queue delay p50 {:.1} ms p99 {:.1} ms, {} dropped, {} CE-marked",
            l.name,
            l.direction,
            l.packets_out,
            l.throughput_bps / 1e6,
            l.queue_delay_ms.p50,
            l.queue_delay_ms.p99,
            drops,
            l.ce_marks
        );
        let _ = writeln!(err, "latencylab:   {}", l.check_line);
    }
    // The engine itself was the bottleneck: say so, so that nobody blames the emulated link.
    let late = &summary.engine.delivery_lateness_ms;
    if late.p99 > 1.0 {
        let _ = writeln!(
            err,
            "latencylab: warning: the emulator delivered packets {:.1} ms late at the 99th \
             percentile (the machine was too busy for these settings): delays and rates above \
             include its own",
            late.p99
        );
    }
    if let Some(n) = &summary.nat64 {
        let drops: Vec<String> = n.drops.iter().map(|(k, v)| format!("{v} {k}")).collect();
        let _ = writeln!(
            err,
            "latencylab: nat64: {} packets 6→4, {} 4→6, dropped: {}; dns64: {} answers",
            n.translated_6to4,
            n.translated_4to6,
            if drops.is_empty() {
                "none".to_string()
            } else {
                drops.join(", ")
            },
            n.dns.answered
        );
    }
    if let Some(d) = &opts.out_dir {
        let _ = writeln!(
            err,
            "latencylab: captures, link logs and summary.json are in {}",
            d.display()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mostly_busy_loop_leaves_real_time_and_a_mostly_idle_one_returns() {
        assert!(next_realtime(true, 0.1));
        assert!(next_realtime(true, 0.6));
        assert!(
            !next_realtime(true, 0.95),
            "a loop that never blocks would be throttled"
        );
        // Hysteresis: between the two thresholds each policy stays.
        assert!(!next_realtime(false, 0.45));
        assert!(next_realtime(true, 0.45));
        assert!(next_realtime(false, 0.1));
    }
}
