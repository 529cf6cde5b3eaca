//! The program launcher: programs in lab hosts, started inside a host's network namespace with
//! the lab's own name resolution, as the invoking user when latencylab runs under sudo, and
//! killed with the lab.
//!
//! Programs are started by a [`Launcher`]: a small process forked when the lab starts, before
//! the engine allocates anything per host, which forks and execs each program for the lab and
//! reports its exit. The forwarding loop only writes a request on a socket: a `fork` from the
//! loop would copy the engine's page tables (about 1 MB of memory per host) while every link
//! waits, and stalled a 250-host lab for seconds (docs/PERFORMANCE.md, "Starting programs").
//! The launcher is told the hosts (their namespaces and name files) and the programs' shared
//! environment once, before the loop runs, and itself opens each program's output files, so
//! that a request is a host's index, a name and a command line: a few hundred bytes, no
//! descriptors, no file system work on the loop's thread, whatever the size of the lab.
//!
//! On a machine of two CPUs or more, the launcher and each program until its exec run on one
//! CPU, and the engine on the others ([`CpuPlan`]).
//!
//! This file is the lab's side ([`Launcher`]) and the protocol; `serve.rs` is the launcher
//! process's side. Not here: what the name files and the environment hold (`labnet::programs`),
//! and killing what a host's namespace still holds when the lab ends (`lab::process`).
//! Everything a program's child does between fork and exec is a raw syscall on data prepared
//! before the fork (no allocation).

use std::io::{self, IoSlice};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::ExitStatus;

use anyhow::{anyhow, bail, Context, Result};
use nix::sys::socket::{
    sendmsg, socketpair, AddressFamily, ControlMessage, MsgFlags, SockFlag, SockType,
};
pub use owner::{invoking_user, RunAs};
use serde::{Deserialize, Serialize};

mod serve;

/// What the launcher keeps of one host, told once when the lab is up: its name files. Its
/// namespace goes beside, as SCM_RIGHTS.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct HostFiles {
    /// Files bind-mounted over /etc/hosts and /etc/resolv.conf in the program's mount namespace.
    pub hosts_file: PathBuf,
    pub resolv_file: PathBuf,
    /// A file bind-mounted over /etc/gai.conf (a host with a CLAT), if any.
    #[serde(default)]
    pub gai_file: Option<PathBuf>,
}

/// What every program of the lab shares, told once when the lab is up.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct LabSetup {
    /// The environment of every program (`labnet::programs::lab_env`), besides what the lab's
    /// own has; each also gets `LATENCYLAB_HOST`.
    pub env: Vec<(String, String)>,
    pub run_as: Option<RunAs>,
    /// Where background programs' stdout and stderr go (`programs/NAME.out`, `.err`); on the
    /// lab's stderr without one.
    pub run_dir: Option<PathBuf>,
}

/// How to start one program: a few hundred bytes, whatever the size of the lab.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StartSpec {
    /// The host's index in the lab (the order of [`Launcher::tell_hosts`]).
    pub host: usize,
    pub host_name: String,
    /// Names its output files.
    pub name: String,
    pub argv: Vec<String>,
    /// COMMAND: the lab's own stdin, stdout and stderr (the terminal). Any other program: no
    /// stdin, its output in the run directory (or on stderr).
    pub command: bool,
    /// A process group of its own (background programs), or the lab's (COMMAND, so that the
    /// terminal's Ctrl-C reaches it).
    pub own_process_group: bool,
}

/// What the lab tells the launcher.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum Request {
    /// The next hosts, in order; their namespaces come beside, one descriptor each.
    Hosts(Vec<HostFiles>),
    Setup(LabSetup),
    Start(StartSpec),
}

/// The largest message. Requests to start a program are small; [`Request::Hosts`] carries at
/// most [`HOSTS_PER_MESSAGE`] hosts' paths, and [`Request::Setup`] names every host's address
/// (about 40 bytes a host: 40 KB for a thousand hosts).
pub(crate) const MAX_MESSAGE: usize = 1 << 20;

/// Hosts told in one message: the kernel passes at most 253 descriptors in one (SCM_MAX_FD).
pub(crate) const HOSTS_PER_MESSAGE: usize = 200;

/// Where the lab's parts run on a machine of two CPUs or more: the kernel work of starting a
/// program on one CPU, the engine on the others.
///
/// On a kernel without forced preemption (`CONFIG_PREEMPT_NONE`, `preempt=none`), a task in a
/// system call keeps its CPU until the call returns, and a real-time thread woken on that CPU
/// waits for it: the engine, woken on the CPU where a program was being forked, entering its
/// namespaces, mounting its name files or exec'ing, delivered its packets milliseconds late
/// (docs/PERFORMANCE.md, "Big labs"). So the launcher runs on [`CpuPlan::start`], each program
/// inherits that at its fork and gets [`CpuPlan::allowed`] back as soon as its exec has
/// succeeded (programs are not restricted once they run), and the engine stays on
/// [`CpuPlan::engine`] while it runs real-time. With one CPU there is nothing to split.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuPlan {
    /// Every CPU the lab may use: its affinity when it started (within any cpuset or
    /// `taskset`), in increasing order.
    pub allowed: Vec<usize>,
    /// Where the launcher, and each program until its exec, run: the first allowed CPU.
    pub start: Vec<usize>,
    /// Where the engine runs: every other allowed CPU.
    pub engine: Vec<usize>,
}

impl CpuPlan {
    /// The plan for a lab allowed on `allowed` (in increasing order); `None` for fewer than two
    /// CPUs.
    pub fn split(allowed: &[usize]) -> Option<CpuPlan> {
        let (&first, rest) = allowed.split_first()?;
        if rest.is_empty() {
            return None;
        }
        Some(CpuPlan {
            allowed: allowed.to_vec(),
            start: vec![first],
            engine: rest.to_vec(),
        })
    }

    /// The plan for the calling thread's affinity.
    pub fn of_this_thread() -> Option<CpuPlan> {
        CpuPlan::split(&affinity(0)?)
    }
}

/// The CPUs thread `pid` may run on (0: the calling thread), in increasing order.
pub fn affinity(pid: i32) -> Option<Vec<usize>> {
    let set = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(pid)).ok()?;
    let cpus = 0..nix::sched::CpuSet::count();
    Some(cpus.filter(|&c| set.is_set(c).unwrap_or(false)).collect())
}

/// Lets thread `pid` (0: the calling thread) run only on `cpus`. False when it could not (the
/// process has gone, or a cpuset allows none of them): nothing changed, which is harmless.
pub fn set_affinity(pid: i32, cpus: &[usize]) -> bool {
    let mut set = nix::sched::CpuSet::new();
    if cpus.iter().any(|&c| set.set(c).is_err()) {
        return false;
    }
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(pid), &set).is_ok()
}

/// The lab's handle on its launcher process.
pub struct Launcher {
    sock: OwnedFd,
    pid: i32,
    /// Where starts and the engine run, when they are kept apart.
    cpus: Option<CpuPlan>,
    buf: Vec<u8>,
    /// Requests not sent yet: the socket was full.
    pending: std::collections::VecDeque<StartSpec>,
}

/// What the launcher tells the lab of the programs asked for: starts are answered in the order
/// they were asked.
#[derive(Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LaunchEvent {
    /// The oldest unanswered request runs as this process.
    Started(i32),
    /// The oldest unanswered request could not be started, and why.
    Failed(String),
    /// A program ended with this status (128 + signal when killed).
    Exited { pid: i32, status: i32 },
}

impl Launcher {
    /// Forks the launcher. Call it early, while the process is small and has one thread: the
    /// launcher allocates after the fork, which is safe when no other thread can hold a lock.
    /// Beside other threads (a test harness, a progress bar), the launcher takes no lock of
    /// its own that they could hold: its errors capture no backtrace (`serve.rs`), and what it
    /// would look up once is looked up here first.
    /// `split_cpus`: run starts apart from the engine ([`CpuPlan`]) when there are CPUs to
    /// split; the plan is the calling thread's affinity now.
    pub fn start(split_cpus: bool) -> Result<Launcher> {
        let cpus = if split_cpus {
            CpuPlan::of_this_thread()
        } else {
            None
        };
        let (lab_end, launcher_end) = socketpair(
            AddressFamily::Unix,
            SockType::SeqPacket,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .context("socketpair for the program launcher")?;
        let lab_pid = nix::unistd::getpid();
        // Who owns the programs' output files is looked up here, before the fork (a user
        // database lookup takes the C library's locks), and the launcher inherits the answer.
        let _ = owner::invoking();
        // SAFETY: the child only runs `serve` and then `_exit`s; see `start`'s note on threads.
        match unsafe { nix::unistd::fork() }.context("forking the program launcher")? {
            nix::unistd::ForkResult::Child => {
                drop(lab_end);
                let code = match serve::serve(launcher_end, lab_pid.as_raw(), cpus) {
                    Ok(()) => 0,
                    Err(_) => 1,
                };
                // SAFETY: _exit ends the process without running the lab's destructors twice.
                unsafe { libc::_exit(code) }
            }
            nix::unistd::ForkResult::Parent { child } => Ok(Launcher {
                sock: lab_end,
                pid: child.as_raw(),
                cpus,
                buf: vec![0; MAX_MESSAGE],
                pending: Default::default(),
            }),
        }
    }

    /// Tells the launcher the lab's hosts (their namespaces and name files, in the order
    /// [`StartSpec::host`] counts them) and what every program shares. Once, when the lab is
    /// up and before the loop runs, so that starting a program later asks the loop for one
    /// small message and nothing else. Waits for room on the socket: nothing runs yet that the
    /// launcher could be waiting on.
    pub fn tell_hosts(&self, hosts: &[(BorrowedFd, HostFiles)], setup: LabSetup) -> Result<()> {
        for chunk in hosts.chunks(HOSTS_PER_MESSAGE) {
            let files: Vec<HostFiles> = chunk.iter().map(|h| h.1.clone()).collect();
            let fds: Vec<RawFd> = chunk.iter().map(|h| h.0.as_raw_fd()).collect();
            self.send(&Request::Hosts(files), &fds, MsgFlags::empty())
                .context("telling the program launcher the lab's hosts")?;
        }
        self.send(&Request::Setup(setup), &[], MsgFlags::empty())
            .context("telling the program launcher the programs' environment")?;
        Ok(())
    }

    fn send(&self, r: &Request, fds: &[RawFd], flags: MsgFlags) -> nix::Result<usize> {
        let json = serde_json::to_vec(r).expect("plain data serializes");
        let cmsgs: &[ControlMessage] = if fds.is_empty() {
            &[]
        } else {
            &[ControlMessage::ScmRights(fds)]
        };
        sendmsg::<()>(
            self.sock.as_raw_fd(),
            &[IoSlice::new(&json)],
            cmsgs,
            flags,
            None,
        )
    }

    /// Where starts and the engine run, when they are kept apart ([`CpuPlan`]).
    pub fn cpus(&self) -> Option<&CpuPlan> {
        self.cpus.as_ref()
    }

    /// The launcher's socket, readable when a program has ended.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.sock.as_fd()
    }

    /// Asks for a program to be started, without waiting: the answer comes as a
    /// [`LaunchEvent`] from [`Launcher::events`]. When the socket is full (hundreds of programs
    /// asked for at once), the request waits here and goes with a later [`Launcher::flush`]:
    /// the loop must never block on the launcher, which may itself be waiting for the loop to
    /// read its answers.
    pub fn spawn(&mut self, s: StartSpec) -> Result<()> {
        self.pending.push_back(s);
        self.flush()
    }

    /// Sends the requests waiting in [`Launcher::spawn`] until the socket is full. Call it when
    /// the launcher has answered (its answers mean it has read requests).
    pub fn flush(&mut self) -> Result<()> {
        while let Some(s) = self.pending.pop_front() {
            let r = Request::Start(s);
            match self.send(&r, &[], MsgFlags::MSG_DONTWAIT) {
                Ok(_) => {}
                Err(e) => {
                    let Request::Start(s) = r else {
                        unreachable!("a start request")
                    };
                    if e == nix::errno::Errno::EAGAIN {
                        self.pending.push_front(s);
                        return Ok(());
                    }
                    return Err(io::Error::from(e)).with_context(|| {
                        format!("asking the launcher to start '{}'", s.argv.join(" "))
                    });
                }
            }
        }
        Ok(())
    }

    /// What the launcher has said since the last call, without waiting. An empty socket is
    /// the usual end of the call, not an error: no error value is made for it (with
    /// `RUST_BACKTRACE` set, each would capture a backtrace, on every loop turn that asks).
    pub fn events(&mut self) -> Result<Vec<LaunchEvent>> {
        let mut out = Vec::new();
        loop {
            let flags = MsgFlags::MSG_DONTWAIT;
            let n = match nix::sys::socket::recv(self.sock.as_raw_fd(), &mut self.buf, flags) {
                Ok(0) => bail!("the program launcher has ended"),
                Ok(n) => n,
                Err(nix::errno::Errno::EAGAIN) => return Ok(out),
                Err(e) => {
                    return Err(io::Error::from(e)).context("reading from the program launcher")
                }
            };
            let ev = serde_json::from_slice(&self.buf[..n])
                .map_err(|e| anyhow!("the program launcher's reply: {e}"))?;
            out.push(ev);
        }
    }

    /// Whether the launcher process is still there (reaps it when it is not).
    pub fn alive(&self) -> bool {
        use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
        let pid = nix::unistd::Pid::from_raw(self.pid);
        matches!(
            waitpid(pid, Some(WaitPidFlag::WNOHANG)),
            Ok(WaitStatus::StillAlive)
        )
    }
}

impl Drop for Launcher {
    /// Ends the launcher; a program still running dies with it (its parent-death signal).
    fn drop(&mut self) {
        // SAFETY: kill takes plain integers.
        unsafe { libc::kill(self.pid, libc::SIGKILL) };
        let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(self.pid), None);
    }
}

/// A process's exit status as a shell gives it: its code, or 128 + the signal that killed it.
pub fn exit_code_of(status: ExitStatus) -> i32 {
    status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// The launcher's answers until `n` have come, or 30 seconds have passed (a loaded machine
    /// can take seconds to start programs; the wait ends as soon as they have answered).
    fn answers(l: &mut Launcher, n: usize) -> Vec<LaunchEvent> {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut got = Vec::new();
        while got.len() < n && Instant::now() < deadline {
            l.flush().unwrap();
            got.extend(l.events().unwrap());
            std::thread::sleep(Duration::from_millis(5));
        }
        got
    }

    #[test]
    fn a_started_program_is_answered_with_its_pid_then_its_exit_status_and_a_bad_one_with_why() {
        // Entering a namespace and mounting the name files need root (the suite runs as root).
        if !nix::unistd::geteuid().is_root() {
            eprintln!("skipped: starting programs in a namespace needs root");
            return;
        }
        let mut l = Launcher::start(true).unwrap();
        let ns = std::fs::File::open("/proc/self/ns/net").unwrap();
        let files = HostFiles {
            hosts_file: "/etc/hosts".into(),
            resolv_file: "/etc/resolv.conf".into(),
            gai_file: None,
        };
        let setup = LabSetup {
            env: vec![("LATENCYLAB_SRV".into(), "10.77.1.1".into())],
            ..LabSetup::default()
        };
        l.tell_hosts(&[(ns.as_fd(), files)], setup).unwrap();
        let start = |host: usize, argv: &[&str]| StartSpec {
            host,
            host_name: if host == 0 { "a" } else { "b" }.into(),
            name: "p".into(),
            argv: argv.iter().map(|s| s.to_string()).collect(),
            command: false,
            own_process_group: true,
        };
        let check = r#"[ "$LATENCYLAB_HOST" = a ] && [ "$LATENCYLAB_SRV" = 10.77.1.1 ] && exit 3"#;
        l.spawn(start(0, &["sh", "-c", check])).unwrap();
        l.spawn(start(1, &["true"])).unwrap();
        let got = answers(&mut l, 3);
        // Starts are answered in the order asked; an exit may come between them.
        let (exits, starts): (Vec<&LaunchEvent>, Vec<&LaunchEvent>) = got
            .iter()
            .partition(|e| matches!(e, LaunchEvent::Exited { .. }));
        let [LaunchEvent::Started(pid), LaunchEvent::Failed(why)] = starts[..] else {
            panic!("unexpected answers: {got:?}");
        };
        assert!(why.contains("host 1 (b) was never told"), "{why}");
        assert_eq!(
            exits,
            [&LaunchEvent::Exited {
                pid: *pid,
                status: 3
            }]
        );
        assert!(l.alive());
    }

    #[test]
    fn starts_get_the_first_allowed_cpu_and_the_engine_the_others_and_one_cpu_is_not_split() {
        assert_eq!(CpuPlan::split(&[]), None);
        assert_eq!(CpuPlan::split(&[3]), None, "one CPU: nothing to split");
        assert_eq!(
            CpuPlan::split(&[0, 1]),
            Some(CpuPlan {
                allowed: vec![0, 1],
                start: vec![0],
                engine: vec![1],
            })
        );
        // A cpuset or taskset of CPUs 2, 5 and 7.
        let p = CpuPlan::split(&[2, 5, 7]).unwrap();
        assert_eq!((p.start, p.engine), (vec![2], vec![5, 7]));
    }

    #[test]
    fn a_program_runs_on_every_allowed_cpu_once_started_while_the_launcher_keeps_to_one() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("skipped: starting programs in a namespace needs root");
            return;
        }
        let Some(plan) = CpuPlan::of_this_thread() else {
            eprintln!("skipped: one CPU, nothing to split");
            return;
        };
        let mut l = Launcher::start(true).unwrap();
        assert_eq!(l.cpus(), Some(&plan));
        let ns = std::fs::File::open("/proc/self/ns/net").unwrap();
        let files = HostFiles {
            hosts_file: "/etc/hosts".into(),
            resolv_file: "/etc/resolv.conf".into(),
            gai_file: None,
        };
        l.tell_hosts(&[(ns.as_fd(), files)], LabSetup::default())
            .unwrap();
        l.spawn(StartSpec {
            host: 0,
            host_name: "a".into(),
            name: "p".into(),
            argv: vec!["sleep".into(), "2".into()],
            command: false,
            own_process_group: true,
        })
        .unwrap();
        let got = answers(&mut l, 1);
        let [LaunchEvent::Started(pid)] = got[..] else {
            panic!("unexpected answers: {got:?}");
        };
        assert_eq!(affinity(pid), Some(plan.allowed.clone()));
        assert_eq!(affinity(l.pid), Some(plan.start.clone()));
        // SAFETY: kill takes plain integers.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}
