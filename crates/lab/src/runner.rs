//! Running a lab from start to end: checks, namespaces, the event loop on the monotonic clock,
//! programs on schedule, and teardown on every exit path (normal end, COMMAND failure, Ctrl-C,
//! SIGTERM, an error half-way).
//!
//! The loop blocks SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGCHLD and reads them from a signalfd,
//! so a signal is just another event. Timers are a timerfd armed at the network's next
//! deadline, with the thread's timer slack at 1 ns; a deadline closer than [`SPIN_NS`] is
//! waited for by polling, since a sleep that short overshoots.

use std::fs::{self, File};
use std::io::Write;
use std::os::fd::OwnedFd;
use std::os::fd::{AsFd, AsRawFd};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
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
use crate::process::{self, Launch, LaunchEvent, LaunchSpec, Launcher};
use crate::sys;
use crate::userns;
use labnet::lifecycle::{
    earliest, wait_for, Lifecycle, PriorityMode, PriorityPolicy, ServerState, StallMeter, Wait,
    HEARTBEAT, STALL_WORTH_SAYING,
};
use labnet::run_dir::RunDir;
use labnet::schedule::{Action, ProgramState, Schedule};
use labnet::spec::{secs, LabConfig, UsageError};
use labnet::Setting;

/// The timer is armed this much before a deadline and the rest is busy-waited: a sleeping
/// thread wakes tens of microseconds late, a polling one does not. Measured (docs/
/// PERFORMANCE.md): 50 µs keeps the p99 delivery error under 50 µs at 100 Mbit/s, 20 µs does
/// not. `LATENCYLAB_SPIN_NS` overrides it, trading timing accuracy for CPU.
/// `LATENCYLAB_PRIORITY` (`auto`, the default; `rt`; `nice`; `normal`) chooses the loop's
/// scheduling (see `labnet::lifecycle::PriorityPolicy`).
const SPIN_NS: u64 = 50_000;

const TOKEN_SIGNAL: u64 = u64::MAX;
const TOKEN_TIMER: u64 = u64::MAX - 1;
const TOKEN_LAUNCHER: u64 = u64::MAX - 2;

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
    /// With `--server` and COMMAND: whether the server listened when COMMAND started (`false`
    /// when the wait ran out or the server had exited); `None` otherwise.
    pub server_listened: Option<bool>,
}

struct Prog {
    name: String,
    /// Known once the launcher has said it started.
    pid: Option<i32>,
    own_group: bool,
    wait: bool,
    is_command: bool,
    status: Option<i32>,
}

impl Prog {
    fn new(name: &str, own_group: bool, wait: bool, is_command: bool) -> Prog {
        Prog {
            name: name.to_string(),
            pid: None,
            own_group,
            wait,
            is_command,
            status: None,
        }
    }

    /// Signals the program, and its process group when it has one of its own.
    fn signal(&self, sig: libc::c_int) {
        let Some(pid) = self.pid else { return };
        if self.own_group {
            process::signal_group(pid, sig);
        } else {
            process::signal(pid, sig);
        }
    }
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
        // The launcher reaps them; whatever is left in a namespace is killed below.
        for p in self.progs.iter().filter(|p| p.status.is_none()) {
            p.signal(libc::SIGKILL);
            if let Some(pid) = p.pid {
                process::signal(pid, libc::SIGKILL);
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
    // First, while this process is small: forking it later would copy the engine.
    let launcher = Launcher::start()?;

    let sfd = SignalFd::with_flags(mask, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)
        .context("signalfd")?;
    let mut td = Teardown {
        pid,
        hosts: Vec::new(),
        progs: Vec::new(),
        runtime_watch: None,
    };
    let name_files = write_name_files(cfg, pid)?;
    netns::prepare_netns_dir()?;
    for h in &cfg.hosts {
        td.hosts.push(netns::create_host(pid, h)?);
    }
    for c in labnet::clat::ClatPlan::of(cfg)?.map_or(Vec::new(), |p| p.hosts) {
        let iface = &cfg.hosts[c.host].interfaces[0].name;
        netns::add_clat(
            &td.hosts[c.host],
            iface,
            c.ipv4,
            nat64::clat::HOST_PREFIX_LEN,
            c.route_mtu_bytes,
        )?;
    }
    let inodes: Vec<u64> = td
        .hosts
        .iter()
        .filter_map(|h| process::ns_inode(h.ns_fd.as_raw_fd()))
        .collect();
    td.runtime_watch = Some(cleanup::RemoveWhenGone::start(&runtime_dir(pid), &inodes)?);
    let run_dir = opts.out_dir.as_ref().map(RunDir::new);
    if let Some(d) = &run_dir {
        output::prepare_dir(d)?;
        output::write_json(&d.lab_json(), cfg)?;
    }
    let mono_start = sys::monotonic_ns();
    let real_start = sys::realtime_ns();
    let capture_dir = run_dir.as_ref().filter(|_| !opts.no_capture);
    let fwd = Forwarder::build(cfg, &td.hosts, capture_dir, real_start)?;
    let io = LoopIo::new(&fwd, &td.hosts, sfd, &launcher)?;
    sys::tight_timer_slack();
    let mode = PriorityMode::parse(std::env::var("LATENCYLAB_PRIORITY").ok().as_deref());
    match mode {
        PriorityMode::Normal => {}
        PriorityMode::Nice => {
            sys::high_priority();
        }
        PriorityMode::Auto | PriorityMode::Realtime => {
            sys::realtime_priority();
        }
    }
    let spin = wire::Duration::from_nanos(
        std::env::var("LATENCYLAB_SPIN_NS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(SPIN_NS),
    );
    let starter = Starter {
        cfg,
        opts,
        hosts: &td.hosts,
        name_files: &name_files,
        run_as: process::invoking_user(),
        launcher,
    };
    let mut lab = Lab {
        starter,
        cfg,
        opts,
        fwd,
        io,
        mono_start,
        spin,
        priority: PriorityPolicy::new(mode, Instant::ZERO),
        schedule: Schedule::new(cfg),
        life: Lifecycle::new(
            opts.command.is_some(),
            opts.server.is_some(),
            cfg.duration_s.is_some(),
        ),
        link_idx: cfg.link_index(),
        ns_inodes: inodes,
        progs: Vec::new(),
        server: None,
        server_listened: None,
        stalls: StallMeter::default(),
        turn_start: Instant::ZERO,
    };
    if let Some((host, line)) = &opts.server {
        let argv = vec!["sh".into(), "-c".into(), line.clone()];
        lab.starter.start(host, argv, true, "server", false)?;
        lab.progs.push(Prog::new("server", true, false, false));
        lab.server = Some(0);
    }
    if !opts.quiet {
        describe(cfg);
    }
    let result = lab.run();
    td.progs = std::mem::take(&mut lab.progs);
    result?;
    let exit_code = lab.life.exit_code();
    let server_listened = lab.server_listened;
    let mut summary = lab.fwd.finish()?;
    let (stall, stall_at) = lab.stalls.longest();
    summary.engine.longest_stall_ms = stall.as_secs_f64() * 1e3;
    summary.engine.longest_stall_at_s = stall_at.as_secs_f64();
    if let Some(d) = &opts.out_dir {
        output::write_json(&RunDir::new(d).summary_json(), &summary)?;
    }
    if !opts.quiet {
        report(&summary, opts);
    }
    drop(lab);
    drop(td);
    Ok(RunResult {
        exit_code,
        summary,
        server_listened,
    })
}

/// Each host's own /etc/hosts and /etc/resolv.conf, in the lab's runtime directory: in a NAT64
/// lab an IPv6-only host must not find an IPv4-only host's address in /etc/hosts, and asks the
/// DNS64 instead.
fn write_name_files(cfg: &LabConfig, pid: u32) -> Result<Vec<(PathBuf, PathBuf)>> {
    let rt = runtime_dir(pid);
    fs::create_dir_all(&rt).with_context(|| format!("creating {}", rt.display()))?;
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
        if cfg.nat64.as_ref().is_some_and(|n| n.clat.contains(&h.name)) {
            fs::write(gai_file(&hosts_file, &h.name), labnet::clat::GAI_CONF)?;
        }
        name_files.push((hosts_file, resolv_file));
    }
    Ok(name_files)
}

/// A CLAT host's /etc/gai.conf, next to its /etc/hosts.
fn gai_file(hosts_file: &Path, host: &str) -> PathBuf {
    hosts_file.with_file_name(format!("gai-{host}.conf"))
}

/// What starting a program in a host needs: its namespace, its name files, its environment.
struct Starter<'a> {
    cfg: &'a LabConfig,
    opts: &'a RunOptions,
    hosts: &'a [HostNs],
    name_files: &'a [(PathBuf, PathBuf)],
    run_as: Option<process::RunAs>,
    launcher: Launcher,
}

impl Starter<'_> {
    /// Asks for `argv` to start in `host` (its process id comes later, from the launcher):
    /// COMMAND (`command`) with the terminal's stdio, any other program with its output in the
    /// run directory (or on stderr) and no stdin.
    fn start(
        &mut self,
        host: &str,
        argv: Vec<String>,
        own_group: bool,
        name: &str,
        command: bool,
    ) -> Result<()> {
        let hi = self
            .cfg
            .hosts
            .iter()
            .position(|h| h.name == host)
            .context("validated host")?;
        let dup = |fd: std::os::fd::BorrowedFd| fd.try_clone_to_owned();
        let (stdout, stderr): (OwnedFd, OwnedFd) = match (&self.opts.out_dir, command) {
            (_, true) => (
                dup(std::io::stdout().as_fd())?,
                dup(std::io::stderr().as_fd())?,
            ),
            (Some(d), false) => {
                let d = RunDir::new(d);
                owner::create_dir_all(&d.programs())?;
                (
                    owner::create_file(&d.program_out(name))?.into(),
                    owner::create_file(&d.program_err(name))?.into(),
                )
            }
            // Background programs must not mix into COMMAND's stdout (`... -- cmd | jq`).
            (None, false) => (
                dup(std::io::stderr().as_fd())?,
                dup(std::io::stderr().as_fd())?,
            ),
        };
        let stdin: OwnedFd = if command {
            dup(std::io::stdin().as_fd())?
        } else {
            File::open("/dev/null")?.into()
        };
        self.launcher.spawn(Launch {
            ns: self.hosts[hi].ns_fd.try_clone()?,
            stdin,
            stdout,
            stderr,
            how: LaunchSpec {
                hosts_file: self.name_files[hi].0.clone(),
                resolv_file: self.name_files[hi].1.clone(),
                gai_file: Some(gai_file(&self.name_files[hi].0, host)).filter(|p| p.exists()),
                argv,
                env: self.env_for(host),
                own_process_group: own_group,
                run_as: self.run_as.clone(),
            },
        })
    }

    /// A program's environment: its host's name and every host's address by name.
    fn env_for(&self, host: &str) -> Vec<(String, String)> {
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
        for h in &self.cfg.hosts {
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
        if let Some(d) = &self.opts.out_dir {
            env.push(("LATENCYLAB_OUT".into(), d.display().to_string()));
        }
        env
    }
}

/// The loop's descriptors: one epoll over the interfaces, the signalfd, the timerfd and the
/// program launcher's socket.
struct LoopIo {
    epoll: Epoll,
    sfd: SignalFd,
    timer: TimerFd,
    /// The absolute monotonic time the timer is armed for.
    armed: Option<u64>,
    events: Vec<EpollEvent>,
}

impl LoopIo {
    fn new(
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
            events: vec![EpollEvent::empty(); 64],
        })
    }

    /// Waits as `wait` says (`mono_start` turns lab time into the monotonic clock's) and
    /// returns how many events came.
    fn wait(&mut self, wait: Wait, mono_start: u64) -> Result<usize> {
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
            // A stop and continue (SIGSTOP, a debugger, Ctrl-Z) interrupts the wait: look again.
            Err(nix::errno::Errno::EINTR) => Ok(0),
            r => Ok(r?),
        }
    }
}

/// A lab while it runs: the network, the programs and the rules, driven one loop turn at a
/// time by [`Lab::run`].
struct Lab<'a> {
    starter: Starter<'a>,
    cfg: &'a LabConfig,
    opts: &'a RunOptions,
    fwd: Forwarder,
    io: LoopIo,
    /// The monotonic clock's reading at the lab's `Instant::ZERO`.
    mono_start: u64,
    spin: wire::Duration,
    priority: PriorityPolicy,
    schedule: Schedule,
    life: Lifecycle,
    link_idx: std::collections::BTreeMap<String, usize>,
    ns_inodes: Vec<u64>,
    progs: Vec<Prog>,
    /// `--server`'s index in `progs`.
    server: Option<usize>,
    /// Whether the server listened when COMMAND started.
    server_listened: Option<bool>,
    stalls: StallMeter,
    /// When the current loop turn began (the end of the last wait).
    turn_start: Instant,
}

impl Lab<'_> {
    fn now(&self) -> Instant {
        Instant::from_nanos(sys::monotonic_ns().saturating_sub(self.mono_start))
    }

    /// The loop: start what is due, move packets, apply the stop rules, sleep until the next
    /// packet, signal, program exit or deadline, and handle what came.
    fn run(&mut self) -> Result<()> {
        // Setting the lab up (captures, logs) before the first turn is no stall.
        self.turn_start = self.now();
        loop {
            let now = self.now();
            self.start_due(now)?;
            self.fwd.poll(now);
            self.check_end(now);
            if self.life.finished(now, self.all_gone()) {
                return Ok(());
            }
            self.wait_and_handle(now)?;
        }
    }

    /// Starts COMMAND once it is due, and every program and link change whose time has come.
    fn start_due(&mut self, now: Instant) -> Result<()> {
        let server = self.server.map(|s| &self.progs[s]);
        let due = self.life.command_due(now, || match server {
            Some(p) => ServerState {
                listening: p.pid.is_some_and(|pid| process::has_listener(pid as u32)),
                exited: p.status.is_some(),
            },
            None => ServerState {
                listening: false,
                exited: false,
            },
        });
        if due {
            self.server_listened = self.server.map(|s| {
                self.progs[s]
                    .pid
                    .is_some_and(|pid| process::has_listener(pid as u32))
            });
            let (host, argv) = self.opts.command.clone().context("a command is due")?;
            self.starter.start(&host, argv, false, "command", true)?;
            self.progs.push(Prog::new("COMMAND", false, true, true));
            self.life.command_started();
        }
        if self.life.is_ending() {
            self.schedule.hold_starts();
        }
        while let Some(action) = self.schedule.poll_action(now) {
            match action {
                Action::Start(i) => {
                    let p = &self.cfg.programs[i];
                    let argv = vec!["sh".into(), "-c".into(), p.run.clone()];
                    self.starter.start(&p.host, argv, true, &p.name, false)?;
                    self.progs.push(Prog::new(&p.name, true, p.wait, false));
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
        let command_status = self
            .progs
            .iter()
            .find(|p| p.is_command)
            .and_then(|p| p.status);
        let states: Vec<ProgramState> = self
            .progs
            .iter()
            .map(|p| ProgramState {
                wait: p.wait,
                running: p.status.is_none(),
            })
            .collect();
        let all_started = self.schedule.all_started();
        if self
            .life
            .check_end(now, command_status, all_started, &states)
            .is_some()
        {
            self.terminate_all();
        }
    }

    fn terminate_all(&self) {
        for p in self.progs.iter().filter(|p| p.status.is_none()) {
            p.signal(libc::SIGTERM);
        }
    }

    /// Whether every program and every process in the lab's namespaces has gone. A program
    /// started through `sh -c` may outlive its shell: each gets to finish writing its results.
    fn all_gone(&self) -> bool {
        self.life.is_ending()
            && self.progs.iter().all(|p| p.status.is_some())
            && self
                .ns_inodes
                .iter()
                .all(|ino| process::processes_in_ns(*ino).is_empty())
    }

    /// Sleeps until the next packet, signal or deadline, and handles what came.
    fn wait_and_handle(&mut self, now: Instant) -> Result<()> {
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
        let wait = wait_for(deadline, now, self.spin);
        let before = self.now();
        self.stalls.turn(self.turn_start, before);
        let n = self.io.wait(wait, self.mono_start)?;
        let now = self.now();
        self.turn_start = now;
        match wait {
            Wait::Timer(due) => self.stalls.woke(due, now),
            Wait::Poll => self.stalls.woke(before, now),
            Wait::Block => {}
        }
        if wait != Wait::Poll {
            self.priority.blocked(now - before);
        }
        match self.priority.poll_switch(now) {
            Some(true) => {
                sys::realtime_priority();
            }
            Some(false) => {
                sys::normal_policy();
                sys::high_priority();
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
                TOKEN_LAUNCHER => self.record_exits()?,
                // Level-triggered: an interface with packets left after a burst is reported again.
                i => {
                    self.fwd.read_iface(i as usize, now)?;
                }
            }
        }
        Ok(())
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
            let command_running = self
                .progs
                .iter()
                .any(|p| p.is_command && p.status.is_none());
            if self.life.on_signal(now, sig, from_tty, command_running) {
                self.terminate_all();
            }
        }
        Ok(())
    }

    /// Records what the launcher reports: process ids of programs started, in the order they
    /// were asked for, and the programs that have ended. A program that starts once the lab is
    /// ending gets SIGTERM at once.
    fn record_exits(&mut self) -> Result<()> {
        let ending = self.life.is_ending();
        for ev in self.starter.launcher.events()? {
            match ev {
                LaunchEvent::Started(pid) => {
                    let p = self
                        .progs
                        .iter_mut()
                        .find(|p| p.pid.is_none() && p.status.is_none())
                        .context("the launcher started a program nobody asked for")?;
                    p.pid = Some(pid);
                    if ending {
                        p.signal(libc::SIGTERM);
                    }
                }
                LaunchEvent::Failed(e) => {
                    let p = self.progs.iter().find(|p| p.pid.is_none());
                    let name = p.map_or("?", |p| p.name.as_str());
                    bail!("starting program '{name}': {e}");
                }
                LaunchEvent::Exited { pid, status } => {
                    let Some(p) = self.progs.iter_mut().find(|p| p.pid == Some(pid)) else {
                        continue;
                    };
                    p.status = Some(status);
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
    if let Ok(Some(p)) = labnet::clat::ClatPlan::of(cfg) {
        for c in &p.hosts {
            eprintln!(
                "latencylab:   CLAT on {}: {}/{} ↔ {}, prefix {} ({})",
                cfg.hosts[c.host].name,
                c.ipv4,
                nat64::clat::HOST_PREFIX_LEN,
                c.ipv6,
                p.prefix,
                p.source.describe()
            );
        }
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
    let stall = summary.engine.longest_stall_ms;
    if stall > STALL_WORTH_SAYING.as_secs_f64() * 1e3 {
        let _ = writeln!(
            err,
            "latencylab: warning: the emulator stalled for {stall:.1} ms at {:.2} s (the lab's \
             process was stopped or not scheduled, or busy in one loop turn): packets waited \
             that long in the hosts' queues, on top of the delays above",
            summary.engine.longest_stall_at_s
        );
    }
    for c in summary.nat64.iter().flat_map(|n| &n.clat) {
        let _ = writeln!(
            err,
            "latencylab: clat on {}.{}: {} ↔ {} with prefix {} ({}); {} packets 4→6, {} 6→4",
            c.host,
            c.iface,
            c.ipv4,
            c.ipv6,
            c.prefix,
            c.prefix_source,
            c.translated_4to6,
            c.translated_6to4
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
