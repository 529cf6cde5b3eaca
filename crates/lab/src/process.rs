//! Programs in lab hosts: started inside a host's network namespace with the lab's own name
//! resolution, as the invoking user when latencylab runs under sudo, and killed with the lab.
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
//! Everything a program's child does between fork and exec is a raw syscall on data prepared
//! before the fork (no allocation).

use std::collections::BTreeMap;
use std::ffi::CString;
use std::fs;
use std::io::{self, IoSlice, IoSliceMut};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant as StdInstant};

use anyhow::{anyhow, bail, Context, Result};
use nix::sys::socket::{
    recvmsg, sendmsg, socketpair, AddressFamily, ControlMessage, ControlMessageOwned, MsgFlags,
    SockFlag, SockType,
};
use serde::{Deserialize, Serialize};

/// Who lab programs run as.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunAs {
    pub uid: u32,
    pub gid: u32,
    pub groups: Vec<u32>,
    pub home: Option<String>,
    pub user: Option<String>,
}

/// The invoking user when run through sudo (SUDO_UID/SUDO_GID), root otherwise.
pub fn invoking_user() -> Option<RunAs> {
    let uid: u32 = std::env::var("SUDO_UID").ok()?.parse().ok()?;
    let gid: u32 = std::env::var("SUDO_GID").ok()?.parse().ok()?;
    if uid == 0 {
        return None;
    }
    let user = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten();
    let groups = user
        .as_ref()
        .and_then(|u| {
            let name = CString::new(u.name.clone()).ok()?;
            nix::unistd::getgrouplist(&name, nix::unistd::Gid::from_raw(gid)).ok()
        })
        .map(|g| g.into_iter().map(|g| g.as_raw()).collect())
        .unwrap_or_else(|| vec![gid]);
    Some(RunAs {
        uid,
        gid,
        groups,
        home: user.as_ref().map(|u| u.dir.display().to_string()),
        user: user.map(|u| u.name),
    })
}

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
    /// The environment of every program (`labnet::programs::lab_env`); each also gets
    /// `LATENCYLAB_HOST`.
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
enum Request {
    /// The next hosts, in order; their namespaces come beside, one descriptor each.
    Hosts(Vec<HostFiles>),
    Setup(LabSetup),
    Start(StartSpec),
}

/// The largest message. Requests to start a program are small; [`Request::Hosts`] carries at
/// most [`HOSTS_PER_MESSAGE`] hosts' paths, and [`Request::Setup`] names every host's address
/// (about 40 bytes a host: 40 KB for a thousand hosts).
const MAX_MESSAGE: usize = 1 << 20;

/// Hosts told in one message: the kernel passes at most 253 descriptors in one (SCM_MAX_FD).
const HOSTS_PER_MESSAGE: usize = 200;

/// The lab's handle on its launcher process.
pub struct Launcher {
    sock: OwnedFd,
    pid: i32,
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
    pub fn start() -> Result<Launcher> {
        let (lab_end, launcher_end) = socketpair(
            AddressFamily::Unix,
            SockType::SeqPacket,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .context("socketpair for the program launcher")?;
        let lab_pid = nix::unistd::getpid();
        // SAFETY: the child only runs `serve` and then `_exit`s; see `start`'s note on threads.
        match unsafe { nix::unistd::fork() }.context("forking the program launcher")? {
            nix::unistd::ForkResult::Child => {
                drop(lab_end);
                let code = match serve(launcher_end, lab_pid.as_raw()) {
                    Ok(()) => 0,
                    Err(_) => 1,
                };
                // SAFETY: _exit ends the process without running the lab's destructors twice.
                unsafe { libc::_exit(code) }
            }
            nix::unistd::ForkResult::Parent { child } => Ok(Launcher {
                sock: lab_end,
                pid: child.as_raw(),
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

    /// What the launcher has said since the last call, without waiting.
    pub fn events(&mut self) -> Result<Vec<LaunchEvent>> {
        let mut out = Vec::new();
        loop {
            match self.recv() {
                Ok(Some(ev)) => out.push(ev),
                Ok(None) => bail!("the program launcher has ended"),
                Err(e) if is_would_block(&e) => return Ok(out),
                Err(e) => return Err(e),
            }
        }
    }

    /// One message, without waiting; `None` at end of stream.
    fn recv(&mut self) -> Result<Option<LaunchEvent>> {
        let flags = MsgFlags::MSG_DONTWAIT;
        let n = nix::sys::socket::recv(self.sock.as_raw_fd(), &mut self.buf, flags)
            .map_err(io::Error::from)
            .context("reading from the program launcher")?;
        if n == 0 {
            return Ok(None);
        }
        serde_json::from_slice(&self.buf[..n])
            .map(Some)
            .map_err(|e| anyhow!("the program launcher's reply: {e}"))
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

fn is_would_block(e: &anyhow::Error) -> bool {
    e.downcast_ref::<io::Error>()
        .is_some_and(|e| e.kind() == io::ErrorKind::WouldBlock)
}

impl Drop for Launcher {
    /// Ends the launcher; a program still running dies with it (its parent-death signal).
    fn drop(&mut self) {
        signal(self.pid, libc::SIGKILL);
        let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(self.pid), None);
    }
}

/// The launcher's state: what it was told of the lab, and the programs it runs.
struct Served {
    hosts: Vec<(OwnedFd, HostFiles)>,
    setup: LabSetup,
    /// The soft limit on open descriptors the lab had, which its programs get back (the
    /// launcher holds a namespace per host, which may take more).
    nofile: Option<libc::rlim_t>,
    children: BTreeMap<i32, Child>,
}

impl Served {
    fn handle(&mut self, r: Request, fds: Vec<OwnedFd>) -> Option<LaunchEvent> {
        match r {
            Request::Hosts(files) if files.len() == fds.len() => {
                self.ensure_fd_room(self.hosts.len() + fds.len());
                self.hosts.extend(fds.into_iter().zip(files));
                None
            }
            Request::Hosts(files) => Some(LaunchEvent::Failed(format!(
                "bad request: {} hosts and {} namespaces",
                files.len(),
                fds.len()
            ))),
            Request::Setup(s) => {
                self.setup = s;
                None
            }
            Request::Start(s) => Some(match self.start(&s) {
                Ok(child) => {
                    let pid = child.id() as i32;
                    self.children.insert(pid, child);
                    LaunchEvent::Started(pid)
                }
                Err(e) => LaunchEvent::Failed(format!("{e:#}")),
            }),
        }
    }

    /// Raises the soft limit on open descriptors so that `hosts` namespaces fit beside the
    /// usual few, within the hard limit (the lab checked that it allows the lab's own need,
    /// which is larger).
    fn ensure_fd_room(&mut self, hosts: usize) {
        let need = hosts as libc::rlim_t + 64;
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit and setrlimit read and write a plain struct on our stack.
        unsafe {
            if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 || lim.rlim_cur >= need {
                return;
            }
            self.nofile.get_or_insert(lim.rlim_cur);
            lim.rlim_cur = need.min(lim.rlim_max);
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }

    /// Starts a program in its host: stdio, environment, then [`spawn`].
    fn start(&self, s: &StartSpec) -> Result<Child> {
        let (ns, files) = self.hosts.get(s.host).with_context(|| {
            format!(
                "host {} ({}) was never told to the launcher",
                s.host, s.host_name
            )
        })?;
        let dup = |fd: BorrowedFd| fd.try_clone_to_owned();
        // SAFETY: 0, 1 and 2 are the lab's own stdio, inherited at the fork and open for the
        // launcher's life.
        let std_fd = |n: RawFd| unsafe { BorrowedFd::borrow_raw(n) };
        let (stdin, stdout, stderr): (OwnedFd, OwnedFd, OwnedFd) =
            match (&self.setup.run_dir, s.command) {
                (_, true) => (dup(std_fd(0))?, dup(std_fd(1))?, dup(std_fd(2))?),
                (Some(d), false) => {
                    let d = labnet::run_dir::RunDir::new(d);
                    crate::owner::create_dir_all(&d.programs())?;
                    (
                        fs::File::open("/dev/null")?.into(),
                        crate::owner::create_file(&d.program_out(&s.name))?.into(),
                        crate::owner::create_file(&d.program_err(&s.name))?.into(),
                    )
                }
                // Background programs must not mix into COMMAND's stdout (`... -- cmd | jq`).
                (None, false) => (
                    fs::File::open("/dev/null")?.into(),
                    dup(std_fd(2))?,
                    dup(std_fd(2))?,
                ),
            };
        let mut env = self.setup.env.clone();
        env.push(("LATENCYLAB_HOST".into(), s.host_name.clone()));
        spawn(Launch {
            ns: ns.as_fd(),
            stdin,
            stdout,
            stderr,
            files,
            argv: &s.argv,
            env: &env,
            own_process_group: s.own_process_group,
            run_as: self.setup.run_as.as_ref(),
            nofile: self.nofile,
        })
    }
}

/// The launcher's life: start what the lab asks for, report what ends, and end with the lab.
fn serve(sock: OwnedFd, lab_pid: i32) -> Result<()> {
    // SAFETY: prctl and getppid take and return plain integers.
    unsafe {
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        );
        if libc::getppid() != lab_pid {
            return Ok(());
        }
    }
    // The lab's stop signals stay blocked here (inherited): the lab decides when programs
    // stop. SIGCHLD is read from a signalfd.
    let mut chld = nix::sys::signal::SigSet::empty();
    chld.add(nix::sys::signal::Signal::SIGCHLD);
    chld.thread_block()?;
    let sfd = nix::sys::signalfd::SignalFd::with_flags(
        &chld,
        nix::sys::signalfd::SfdFlags::SFD_NONBLOCK | nix::sys::signalfd::SfdFlags::SFD_CLOEXEC,
    )?;
    let mut served = Served {
        hosts: Vec::new(),
        setup: LabSetup::default(),
        nofile: None,
        children: BTreeMap::new(),
    };
    let mut buf = vec![0u8; MAX_MESSAGE];
    let send = |r: &LaunchEvent| -> Result<()> {
        let json = serde_json::to_vec(r).expect("plain data serializes");
        nix::sys::socket::send(sock.as_raw_fd(), &json, MsgFlags::empty())?;
        Ok(())
    };
    loop {
        let mut fds = [
            libc::pollfd {
                fd: sock.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: sfd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: fds is valid for 2 entries for the duration of the call. The timeout is the
        // safety net for a SIGCHLD merged away.
        unsafe { libc::poll(fds.as_mut_ptr(), 2, 100) };
        if fds[0].revents != 0 {
            let mut cmsg = nix::cmsg_space!([RawFd; HOSTS_PER_MESSAGE]);
            let mut iov = [IoSliceMut::new(&mut buf)];
            let msg = recvmsg::<()>(
                sock.as_raw_fd(),
                &mut iov,
                Some(&mut cmsg),
                MsgFlags::MSG_CMSG_CLOEXEC,
            )?;
            let n = msg.bytes;
            let mut got: Vec<OwnedFd> = Vec::new();
            for c in msg.cmsgs()? {
                if let ControlMessageOwned::ScmRights(fds) = c {
                    // SAFETY: descriptors received with SCM_RIGHTS are new and ours alone.
                    got.extend(
                        fds.into_iter()
                            .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }),
                    );
                }
            }
            if n == 0 {
                // The lab has gone: so do its programs (their parent-death signal).
                return Ok(());
            }
            let reply = match serde_json::from_slice::<Request>(&buf[..n]) {
                Ok(r) => served.handle(r, got),
                Err(e) => Some(LaunchEvent::Failed(format!("bad request: {e}"))),
            };
            if let Some(r) = reply {
                send(&r)?;
            }
        }
        while let Ok(Some(_)) = sfd.read_signal() {}
        let mut ended = Vec::new();
        for (pid, c) in served.children.iter_mut() {
            if let Ok(Some(st)) = c.try_wait() {
                ended.push((*pid, exit_code_of(st)));
            }
        }
        for (pid, status) in ended {
            served.children.remove(&pid);
            send(&LaunchEvent::Exited { pid, status })?;
        }
    }
}

/// A process's exit status as a shell gives it: its code, or 128 + the signal that killed it.
pub fn exit_code_of(status: ExitStatus) -> i32 {
    status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

fn c(s: &str) -> CString {
    CString::new(s).expect("paths and names have no NUL")
}

/// How to start one program, in the launcher.
struct Launch<'a> {
    /// The host's network namespace.
    ns: BorrowedFd<'a>,
    stdin: OwnedFd,
    stdout: OwnedFd,
    stderr: OwnedFd,
    files: &'a HostFiles,
    argv: &'a [String],
    env: &'a [(String, String)],
    /// A process group of its own (background programs), or the lab's (COMMAND).
    own_process_group: bool,
    run_as: Option<&'a RunAs>,
    /// The soft limit on open descriptors to give back, when the launcher raised its own.
    nofile: Option<libc::rlim_t>,
}

/// Starts a program in a host (in the launcher).
fn spawn(launch: Launch) -> Result<Child> {
    let Launch {
        ns,
        stdin,
        stdout,
        stderr,
        files,
        argv,
        env,
        own_process_group,
        run_as,
        nofile,
    } = launch;
    let (prog, args) = argv.split_first().context("empty command")?;
    let mut cmd = Command::new(prog);
    cmd.args(args)
        .stdout(Stdio::from(stdout))
        .stderr(Stdio::from(stderr))
        .stdin(Stdio::from(stdin));
    for (k, v) in env {
        cmd.env(k, v);
    }
    if let Some(r) = run_as {
        if let Some(h) = &r.home {
            cmd.env("HOME", h);
        }
        if let Some(u) = &r.user {
            cmd.env("USER", u).env("LOGNAME", u);
        }
    }
    let ns_fd = ns.as_raw_fd();
    let hosts_src = c(&files.hosts_file.display().to_string());
    let resolv_src = c(&files.resolv_file.display().to_string());
    let etc_hosts = c("/etc/hosts");
    let etc_resolv = c("/etc/resolv.conf");
    let gai_src = files.gai_file.as_ref().map(|p| c(&p.display().to_string()));
    let etc_gai = c("/etc/gai.conf");
    let root = c("/");
    let sys = c("/sys");
    let sysfs = c("sysfs");
    let own_pg = own_process_group;
    let run_as = run_as.cloned();
    // SAFETY: the closure runs in the child between fork and exec and makes only raw syscalls on
    // values prepared above; it allocates nothing and touches no lock.
    unsafe {
        cmd.pre_exec(move || {
            let check = |r: libc::c_int| {
                if r < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(())
                }
            };
            check(libc::setns(ns_fd, libc::CLONE_NEWNET))?;
            check(libc::unshare(libc::CLONE_NEWNS))?;
            // Our mounts stay ours: nothing propagates back to the machine.
            check(libc::mount(
                std::ptr::null(),
                root.as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_SLAVE,
                std::ptr::null(),
            ))?;
            check(libc::mount(
                hosts_src.as_ptr(),
                etc_hosts.as_ptr(),
                std::ptr::null(),
                libc::MS_BIND,
                std::ptr::null(),
            ))?;
            // A machine without /etc/resolv.conf simply keeps having none.
            libc::mount(
                resolv_src.as_ptr(),
                etc_resolv.as_ptr(),
                std::ptr::null(),
                libc::MS_BIND,
                std::ptr::null(),
            );
            // A machine without /etc/gai.conf keeps glibc's built-in table.
            if let Some(g) = &gai_src {
                libc::mount(
                    g.as_ptr(),
                    etc_gai.as_ptr(),
                    std::ptr::null(),
                    libc::MS_BIND,
                    std::ptr::null(),
                );
            }
            // /sys shows the devices of the namespace that mounts it, as `ip netns exec` does.
            // In a user namespace the machine's /sys is locked in place: the new one goes on top.
            libc::umount2(sys.as_ptr(), libc::MNT_DETACH);
            libc::mount(
                sysfs.as_ptr(),
                sys.as_ptr(),
                sysfs.as_ptr(),
                0,
                std::ptr::null(),
            );
            if let Some(soft) = nofile {
                let mut lim: libc::rlimit = std::mem::zeroed();
                libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
                lim.rlim_cur = soft;
                libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
            }
            if own_pg {
                check(libc::setpgid(0, 0))?;
            }
            // The lab's loop may run at nice -20; its programs run as ordinary processes.
            libc::setpriority(libc::PRIO_PROCESS, 0, 0);
            if let Some(r) = &run_as {
                check(libc::setgroups(r.groups.len(), r.groups.as_ptr()))?;
                check(libc::setgid(r.gid))?;
                check(libc::setuid(r.uid))?;
            }
            // Dies with the lab, even if the lab is killed with SIGKILL.
            check(libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ))?;
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            check(libc::sigprocmask(
                libc::SIG_SETMASK,
                &set,
                std::ptr::null_mut(),
            ))?;
            Ok(())
        });
    }
    cmd.spawn()
        .with_context(|| format!("starting '{}'", argv.join(" ")))
}

/// The inode of a namespace file: processes whose /proc/PID/ns/net has it are in the namespace.
pub fn ns_inode(fd: RawFd) -> Option<u64> {
    nix::sys::stat::fstat(fd).ok().map(|s| s.st_ino)
}

/// Every process (other than this one) whose network namespace is one of `inodes`, in one
/// pass over /proc whatever the number of namespaces.
pub fn processes_in_namespaces(inodes: &[u64]) -> Vec<i32> {
    let me = std::process::id() as i32;
    let mut pids = Vec::new();
    if inodes.is_empty() {
        return pids;
    }
    let wanted: std::collections::HashSet<u64> = inodes.iter().copied().collect();
    let Ok(dir) = fs::read_dir("/proc") else {
        return pids;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        if let Ok(s) = fs::metadata(format!("/proc/{pid}/ns/net")) {
            use std::os::unix::fs::MetadataExt;
            if wanted.contains(&s.ino()) {
                pids.push(pid);
            }
        }
    }
    pids
}

/// Kills every process in the namespaces and waits (up to a second) for them to be gone.
pub fn kill_all_in_namespaces(inodes: &[u64]) {
    let deadline = StdInstant::now() + Duration::from_secs(1);
    loop {
        let pids = processes_in_namespaces(inodes);
        if pids.is_empty() || StdInstant::now() > deadline {
            return;
        }
        for p in pids {
            // SAFETY: kill takes plain integers.
            unsafe {
                libc::kill(p, libc::SIGKILL);
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// True once the process has a listening TCP socket or a bound UDP socket in its namespace
/// (read from /proc/PID/net, which shows the process's namespace).
pub fn has_listener(pid: u32) -> bool {
    [
        ("tcp", true),
        ("tcp6", true),
        ("udp", false),
        ("udp6", false),
    ]
    .iter()
    .any(|(file, tcp)| {
        fs::read_to_string(format!("/proc/{pid}/net/{file}"))
            .is_ok_and(|t| labnet::system::has_listener(&t, *tcp))
    })
}

/// Sends a signal to a process group, ignoring "no such process".
pub fn signal_group(pgid: i32, sig: libc::c_int) {
    // SAFETY: kill takes plain integers; a negative pid names a process group.
    unsafe {
        libc::kill(-pgid, sig);
    }
}

pub fn signal(pid: i32, sig: libc::c_int) {
    // SAFETY: kill takes plain integers.
    unsafe {
        libc::kill(pid, sig);
    }
}
