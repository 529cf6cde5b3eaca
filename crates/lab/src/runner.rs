//! Running a lab from start to end: checks, namespaces, then the event loop
//! ([`crate::event_loop`]) on the monotonic clock, and teardown on every exit path (normal end,
//! COMMAND failure, Ctrl-C, SIGTERM, an error half-way).
//!
//! The loop blocks SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGCHLD and reads them from a signalfd,
//! so a signal is just another event. Timers are a timerfd armed at the network's next
//! deadline, with the thread's timer slack at 1 ns, armed as early as the timer has lately been
//! late (at most `labnet::lifecycle::SPIN_CEILING`) and the rest waited for by polling, since a
//! sleep overshoots.

use std::fs;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::mpsc::SyncSender;

use anyhow::{anyhow, Context, Result};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use wire::Instant;

use crate::cleanup::{self, runtime_dir};
use crate::engine::Forwarder;
use crate::event_loop::{self, Lab, LiveFeed, LoopIo};
use crate::netns::{self, HostNs};
use crate::output::{self, Summary};
use crate::process::{self, Launcher};
use crate::starter::{write_name_files, Starter};
use crate::sys;
use crate::userns;
use labnet::lifecycle::{EarlyWake, Lifecycle, PriorityMode, PriorityPolicy, StallMeter};
use labnet::messages;
use labnet::programs::Programs;
use labnet::run_dir::{CaptureLimits, RunDir};
use labnet::schedule::Schedule;
use labnet::spec::{LabConfig, UsageError};
use labnet::system;

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
    /// With `out_dir`: how much of each packet the captures keep, and how large their files
    /// (and the link logs') may grow.
    pub capture: CaptureLimits,
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

/// Everything that must be undone, undone in Drop: whichever way the run ends, this runs.
struct Teardown {
    pid: u32,
    hosts: Vec<HostNs>,
    progs: Programs,
    /// Removes the runtime directory and the hosts' processes should this process be killed.
    runtime_watch: Option<cleanup::RemoveWhenGone>,
    trace: StepTrace,
}

impl Drop for Teardown {
    fn drop(&mut self) {
        // The launcher reaps them; whatever is left in a namespace is killed below.
        for p in self.progs.running() {
            event_loop::signal(p, libc::SIGKILL);
            if let Some(pid) = p.pid {
                process::signal(pid, libc::SIGKILL);
            }
        }
        self.trace.step("programs signalled");
        process::kill_all_in_namespaces(&ns_inodes(&self.hosts));
        self.trace.step("processes in the namespaces gone");
        let names = netns::release_hosts(std::mem::take(&mut self.hosts));
        self.trace.step("namespace and TUN descriptors closed");
        netns::unmount_namespaces(&names);
        self.trace.step("namespaces unmounted");
        let _ = fs::remove_dir_all(runtime_dir(self.pid));
        self.trace.step("runtime directory removed");
        drop(self.runtime_watch.take());
        self.trace.step("watcher ended");
    }
}

/// With `LATENCYLAB_TRACE_TEARDOWN=1` in the environment, how long each step of a lab's end
/// took, one line on stderr each (from the end of the loop on); nothing otherwise.
#[derive(Default)]
struct StepTrace {
    last: Option<std::time::Instant>,
}

impl StepTrace {
    fn from_env() -> StepTrace {
        let on = std::env::var_os("LATENCYLAB_TRACE_TEARDOWN").is_some_and(|v| v == "1");
        StepTrace {
            last: on.then(std::time::Instant::now),
        }
    }

    fn step(&mut self, what: &str) {
        if let Some(last) = &mut self.last {
            let now = std::time::Instant::now();
            eprintln!(
                "latencylab: teardown: {what}: {:.1} ms",
                (now - *last).as_secs_f64() * 1e3
            );
            *last = now;
        }
    }
}

/// Checks what can be checked before anything is created: privileges, the TUN device, the
/// hosts' congestion controls.
pub fn preflight(cfg: &LabConfig) -> Result<(), UsageError> {
    let privileged = nix::unistd::geteuid().is_root() || userns::rootless();
    let tun = std::path::Path::new("/dev/net/tun").exists();
    if let Some(line) = system::privilege_refusal(privileged, tun) {
        return Err(UsageError(line));
    }
    let (avail, allowed) = (netns::available_cc(), netns::allowed_cc());
    match system::cc_refusal(cfg, &avail, &allowed, userns::rootless()) {
        Some(line) => Err(UsageError(line)),
        None => Ok(()),
    }
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
    run_lab_live(cfg, opts, None)
}

/// [`run_lab`], handing a snapshot of every link's counters to `live` every
/// [`labnet::live::INTERVAL`] of lab time, and a last one (`last`) when the lab has ended. The
/// engine never waits for the receiver but for the last snapshot; a receiver that has gone
/// stops the feed. Call [`block_stop_signals`] before starting the receiver's thread.
pub fn run_lab_live(
    cfg: &LabConfig,
    opts: &RunOptions,
    live: Option<SyncSender<labnet::live::Snapshot>>,
) -> Result<RunResult> {
    if let Some(d) = &opts.out_dir {
        crate::files::check_out_dir(d)?;
    }
    preflight(cfg)?;
    let pid = std::process::id();
    // Without root the list is only read (preflight checked it).
    for cc in system::congestion_controls(cfg).filter(|_| !userns::rootless()) {
        if netns::allow_cc(cc)? && !opts.quiet {
            eprintln!("{}", messages::cc_allowed(cc));
        }
    }
    let removed = cleanup::remove_leftovers();
    if let Some(line) = messages::leftovers_removed(&removed).filter(|_| !opts.quiet) {
        eprintln!("{line}");
    }

    // Signals become events from here on (children get an empty mask back in pre_exec).
    let old_mask = block_stop_signals()?;
    let result = run_blocked(cfg, opts, pid, &stop_signals(), live);
    restore_signals(old_mask);
    result
}

/// The name of the claim on the engine's CPUs (an abstract Unix socket: bound by one process
/// at a time, released when it ends however it ends, and no file to leave behind).
const ENGINE_CPUS_CLAIM: &[u8] = b"latencylab-engine-cpus";

/// Claims the CPUs a lab keeps for its engine ([`process::CpuPlan`]), for as long as the
/// returned socket lives; `None` when another lab on the machine holds them. Two labs pinning
/// their engines to the same CPU at the same real-time priority take turns on it, each stalled
/// while the other works (two-core machines have one such CPU); the second lab's engine is
/// better left free to run on any CPU.
fn claim_engine_cpus() -> Option<std::os::unix::net::UnixDatagram> {
    claim(ENGINE_CPUS_CLAIM)
}

/// Binds the abstract Unix socket `name`: `None` while another socket has it.
fn claim(name: &[u8]) -> Option<std::os::unix::net::UnixDatagram> {
    use std::os::linux::net::SocketAddrExt;
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name).ok()?;
    std::os::unix::net::UnixDatagram::bind_addr(&addr).ok()
}

fn run_blocked(
    cfg: &LabConfig,
    opts: &RunOptions,
    pid: u32,
    mask: &SigSet,
    live: Option<SyncSender<labnet::live::Snapshot>>,
) -> Result<RunResult> {
    // First, while this process is small: forking it later would copy the engine.
    // `LATENCYLAB_PIN=off` leaves starts and the engine on every CPU, to compare; so does a lab
    // started while another keeps the engine's CPUs.
    let engine_cpus = (std::env::var("LATENCYLAB_PIN").as_deref() != Ok("off"))
        .then(claim_engine_cpus)
        .flatten();
    let launcher = Launcher::start(engine_cpus.is_some())?;
    // A host holds two descriptors (its namespace, its TUN device) and, with `-o`, a capture and
    // two link logs: a 1000-host lab needs more than the usual soft limit of 1024. Raised after
    // the launcher's fork, so programs keep the limit they would have had.
    raise_fd_limit(system::open_files_needed(cfg, opts.out_dir.is_some()))?;

    let sfd = SignalFd::with_flags(mask, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)
        .context("signalfd")?;
    let mut td = Teardown {
        pid,
        hosts: Vec::new(),
        progs: Programs::default(),
        runtime_watch: None,
        trace: StepTrace::default(),
    };
    let name_files = write_name_files(cfg, pid)?;
    netns::prepare_netns_dir()?;
    td.hosts = netns::create_hosts(pid, &cfg.hosts)?;
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
    let inodes = ns_inodes(&td.hosts);
    td.runtime_watch = Some(cleanup::RemoveWhenGone::start(&runtime_dir(pid), &inodes)?);
    let run_dir = opts.out_dir.as_ref().map(RunDir::new);
    if let Some(d) = &run_dir {
        output::prepare_dir(d)?;
        output::write_json(&d.lab_json(), cfg)?;
    }
    let mono_start = sys::monotonic_ns();
    let real_start = sys::realtime_ns();
    let capture_dir = run_dir.as_ref().filter(|_| !opts.no_capture);
    let fwd = Forwarder::build(cfg, &td.hosts, capture_dir, opts.capture, real_start)?;
    let io = LoopIo::new(&fwd, &td.hosts, sfd, &launcher)?;
    sys::tight_timer_slack();
    let mode = PriorityMode::parse(std::env::var("LATENCYLAB_PRIORITY").ok().as_deref());
    let realtime = match mode {
        PriorityMode::Normal => false,
        PriorityMode::Nice => {
            sys::high_priority();
            false
        }
        PriorityMode::Auto | PriorityMode::Realtime => sys::realtime_priority(),
    };
    let early = EarlyWake::from_setting(std::env::var("LATENCYLAB_SPIN_NS").ok().as_deref());
    let starter = Starter::new(
        cfg,
        opts,
        &td.hosts,
        &name_files,
        process::invoking_user(),
        launcher,
    )?;
    // A thread this one made while it is kept apart would inherit that: it is undone as soon
    // as the loop ends, before the teardown's threads.
    starter.engine_apart_from_starts(realtime);
    let mut lab = Lab {
        starter,
        cfg,
        opts,
        fwd,
        io,
        mono_start,
        early,
        priority: PriorityPolicy::new(mode, Instant::ZERO),
        schedule: Schedule::new(cfg),
        life: Lifecycle::new(
            opts.command.is_some(),
            opts.server.is_some(),
            cfg.duration_s.is_some(),
        ),
        link_idx: cfg.link_index(),
        ns_inodes: inodes,
        progs: Programs::default(),
        server: None,
        server_listened: None,
        listen_watch: None,
        stalls: StallMeter::default(),
        turn_start: Instant::ZERO,
        live: None,
    };
    lab.live = live.map(|tx| LiveFeed {
        tx,
        dirs: std::sync::Arc::new(lab.fwd.live_dirs()),
        next: Instant::ZERO,
    });
    if let Some((host, line)) = &opts.server {
        let argv = vec!["sh".into(), "-c".into(), line.clone()];
        lab.starter.start(host, argv, true, "server", false)?;
        lab.server = Some(lab.progs.asked("server", true, false, false));
    }
    if !opts.quiet {
        for line in messages::lab_up(cfg) {
            eprintln!("{line}");
        }
    }
    let result = lab.run();
    lab.starter.engine_apart_from_starts(false);
    td.trace = StepTrace::from_env();
    td.progs = std::mem::take(&mut lab.progs);
    result?;
    let exit_code = lab.life.exit_code();
    let server_listened = lab.server_listened;
    let mut summary = lab.fwd.finish()?;
    td.trace.step("links finished");
    summary.engine.host_tx_dropped = netns::tun_tx_drops(&td.hosts);
    td.trace.step("TUN transmit drops read");
    let (stall, stall_at) = lab.stalls.longest();
    summary.engine.longest_stall_ms = stall.as_secs_f64() * 1e3;
    summary.engine.longest_stall_at_s = stall_at.as_secs_f64();
    summary.engine.stalls = (lab.stalls.over_worth_saying().iter())
        .map(|&(at, d)| labnet::run_dir::Stall {
            at_s: at.as_secs_f64(),
            ms: d.as_secs_f64() * 1e3,
        })
        .collect();
    let (count, total) = lab.stalls.over_worth_saying_total();
    summary.engine.stalls_over_1ms = count;
    summary.engine.stalls_over_1ms_total_ms = total.as_secs_f64() * 1e3;
    summary.engine.stalls_unlisted_max_ms = lab.stalls.longest_unkept().as_secs_f64() * 1e3;
    summary.engine.clock_monotonic_start_ns = lab.mono_start;
    if let Some(d) = &opts.out_dir {
        output::write_json(&RunDir::new(d).summary_json(), &summary)?;
    }
    if !opts.quiet {
        let mut err = std::io::stderr().lock();
        for line in messages::run_summary(&summary, opts.out_dir.as_deref()) {
            let _ = writeln!(err, "{line}");
        }
    }
    td.trace.step("summary written");
    drop(lab);
    td.trace.step("engine and launcher ended");
    drop(td);
    Ok(RunResult {
        exit_code,
        summary,
        server_listened,
    })
}

/// The inodes of the hosts' namespaces, by which their processes are found.
fn ns_inodes(hosts: &[HostNs]) -> Vec<u64> {
    let inode = |h: &HostNs| process::ns_inode(h.ns_fd.as_raw_fd());
    hosts.iter().filter_map(inode).collect()
}

/// Raises the soft limit on open descriptors to `need`, if it is lower, within the hard limit.
fn raise_fd_limit(need: u64) -> Result<()> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).context("getrlimit(RLIMIT_NOFILE)")?;
    match system::fd_soft_limit(soft, hard, need).map_err(|e| anyhow!(e))? {
        Some(s) => setrlimit(Resource::RLIMIT_NOFILE, s, hard).context("setrlimit(RLIMIT_NOFILE)"),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_is_held_by_one_socket_at_a_time_and_freed_with_it() {
        // A name of this test's own: labs running beside it hold the engine's.
        let name = format!("latencylab-claim-test-{}", std::process::id());
        let first = claim(name.as_bytes()).expect("a free name is claimed");
        assert!(claim(name.as_bytes()).is_none(), "claimed twice");
        drop(first);
        assert!(
            claim(name.as_bytes()).is_some(),
            "not freed with its socket"
        );
    }
}
