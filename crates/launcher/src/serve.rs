//! The launcher process: what it was told of the lab, the programs it starts (fork, enter the
//! host, exec) and the exits it reports. It runs from [`crate::Launcher::start`] until the lab
//! goes.
//!
//! The launcher is forked from a process that may have other threads (a test harness, or a
//! lab started late), so it takes no lock another thread could have held at the fork: its
//! errors are plain `io::Error`s, not `anyhow`'s, whose backtrace capture takes std's global
//! backtrace lock (a launcher forked while another thread held it hung at its first error).

use std::collections::BTreeMap;
use std::ffi::CString;
use std::fs;
use std::io::{self, IoSliceMut, Result};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, Stdio};

use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags};

use crate::{
    exit_code_of, set_affinity, CpuPlan, HostFiles, LabSetup, LaunchEvent, Request, RunAs,
    StartSpec, HOSTS_PER_MESSAGE, MAX_MESSAGE,
};

/// The launcher's state: what it was told of the lab, and the programs it runs.
struct Served {
    hosts: Vec<(OwnedFd, HostFiles)>,
    setup: LabSetup,
    /// The soft limit on open descriptors the lab had, which its programs get back (the
    /// launcher holds a namespace per host, which may take more).
    nofile: Option<libc::rlim_t>,
    children: BTreeMap<i32, Child>,
    /// Where programs start, and what they get once exec'd.
    cpus: Option<CpuPlan>,
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
                set_program_env(&s);
                self.setup = s;
                leave_netns_mounts();
                None
            }
            Request::Start(s) => Some(match self.start(&s) {
                Ok(child) => {
                    let pid = child.id() as i32;
                    if let Some(c) = &self.cpus {
                        let_run_anywhere(pid, &c.allowed);
                    }
                    self.children.insert(pid, child);
                    LaunchEvent::Started(pid)
                }
                Err(e) => LaunchEvent::Failed(e.to_string()),
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
        let (ns, files) = self.hosts.get(s.host).ok_or_else(|| {
            io::Error::other(format!(
                "host {} ({}) was never told to the launcher",
                s.host, s.host_name
            ))
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
                    owner::create_dir_all(&d.programs())?;
                    (
                        fs::File::open("/dev/null")?.into(),
                        owner::create_file(&d.program_out(&s.name))?.into(),
                        owner::create_file(&d.program_err(&s.name))?.into(),
                    )
                }
                // Background programs must not mix into COMMAND's stdout (`... -- cmd | jq`).
                (None, false) => (
                    fs::File::open("/dev/null")?.into(),
                    dup(std_fd(2))?,
                    dup(std_fd(2))?,
                ),
            };
        set_env("LATENCYLAB_HOST", &s.host_name);
        spawn(Launch {
            ns: ns.as_fd(),
            stdin,
            stdout,
            stderr,
            files,
            argv: &s.argv,
            own_process_group: s.own_process_group,
            run_as: self.setup.run_as.as_ref(),
            nofile: self.nofile,
        })
    }
}

/// The launcher's life: start what the lab asks for, report what ends, and end with the lab.
pub(crate) fn serve(sock: OwnedFd, lab_pid: i32, cpus: Option<CpuPlan>) -> Result<()> {
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
    // The launcher's forks, and its children until they exec, keep off the engine's CPUs.
    if let Some(c) = &cpus {
        set_affinity(0, &c.start);
    }
    let mut served = Served {
        hosts: Vec::new(),
        setup: LabSetup::default(),
        nofile: None,
        children: BTreeMap::new(),
        cpus,
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
        // One wait per program that has ended, not one per program running: a lab of a
        // thousand programs made a thousand system calls on every request and every exit.
        // Every child of the launcher is a program it started.
        loop {
            let mut raw = 0;
            // SAFETY: waitpid writes the status into our stack integer.
            let pid = unsafe { libc::waitpid(-1, &mut raw, libc::WNOHANG) };
            if pid <= 0 {
                break;
            }
            if served.children.remove(&pid).is_some() {
                let status = exit_code_of(std::process::ExitStatus::from_raw(raw));
                send(&LaunchEvent::Exited { pid, status })?;
            }
        }
    }
}

/// Where `ip netns` and the lab bind-mount network namespaces by name.
const NETNS_DIR: &str = "/run/netns";

/// Moves the launcher into a mount namespace of its own without the namespaces bind-mounted
/// under /run/netns, once the lab's are there (the lab has told its hosts), so that the
/// programs, whose mount namespaces are copies of the launcher's, do not carry them.
///
/// Every program starts in a new mount namespace (its own /etc/hosts): the kernel copies every
/// mount into it as it starts, and takes every one down as it ends, in system calls that do not
/// yield the CPU. A lab of N hosts has N bind mounts there (and other labs theirs), so a
/// thousand programs cost a thousand times a thousand mounts' copies and teardowns, in
/// stretches of milliseconds of kernel time during which nothing else runs on that CPU. The
/// launcher holds each host's namespace open by descriptor and needs none of the names; the
/// programs lose only the sight of other namespaces' names (`ip netns exec` inside a lab host).
///
/// The launcher's mounts are made slaves first, so that taking /run/netns down here never
/// propagates back to the machine, while the machine's later mounts still reach the programs.
/// Without the privilege for it (a rootless lab, which mounts nothing there), nothing changes.
fn leave_netns_mounts() {
    let dir = c(NETNS_DIR);
    let root = c("/");
    // SAFETY: unshare, mount and umount2 take plain integers and NUL-terminated strings that
    // outlive the calls.
    unsafe {
        if libc::unshare(libc::CLONE_NEWNS) != 0 {
            return;
        }
        let slave = libc::MS_REC | libc::MS_SLAVE;
        if libc::mount(
            std::ptr::null(),
            root.as_ptr(),
            std::ptr::null(),
            slave,
            std::ptr::null(),
        ) != 0
        {
            return;
        }
        // /run/netns may be bound on itself more than once (each `ip netns add` that found it
        // not yet a mount point did it); each detach takes one layer with everything under it.
        for _ in 0..16 {
            if libc::umount2(dir.as_ptr(), libc::MNT_DETACH) != 0 {
                break;
            }
        }
    }
}

/// Gives a program every CPU the lab may use, once its start is over: `spawn` returns when the
/// exec has succeeded (its close-on-exec pipe closed). Were it given them before the exec, the
/// exec itself would be free to move to the engine's CPU (the kernel balances a task at exec).
/// A child the program may already have forked in the meantime (`sh -c 'a & b'`) gets them
/// too; any later one inherits them.
fn let_run_anywhere(pid: i32, allowed: &[usize]) {
    set_affinity(pid, allowed);
    if let Ok(children) = fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")) {
        for child in children.split_whitespace().filter_map(|c| c.parse().ok()) {
            set_affinity(child, allowed);
        }
    }
}

/// Makes the launcher's own environment what every program gets (the lab's variables, and
/// who programs run as), once: a program inherits it at its exec as it is. Built for each
/// program instead (std's `Command::env`), it cost a map of one variable per host, made and
/// turned into an array for every program: hosts × programs. Only `LATENCYLAB_HOST` changes
/// from one program to the next, set before each start.
fn set_program_env(s: &LabSetup) {
    for (k, v) in &s.env {
        set_env(k, v);
    }
    if let Some(r) = &s.run_as {
        if let Some(h) = &r.home {
            set_env("HOME", h);
        }
        if let Some(u) = &r.user {
            set_env("USER", u);
            set_env("LOGNAME", u);
        }
    }
}

/// Sets a variable of the launcher's environment, which the programs it starts inherit. A
/// name or value with a NUL byte cannot be passed to a program and is left out.
fn set_env(name: &str, value: &str) {
    let (Ok(name), Ok(value)) = (CString::new(name), CString::new(value)) else {
        return;
    };
    // SAFETY: the launcher has one thread (forked from the lab's one thread), so nothing reads
    // the environment meanwhile; setenv copies both strings. libc's setenv rather than std's:
    // std's takes a lock that another thread of the lab may have held when the launcher was
    // forked.
    unsafe { libc::setenv(name.as_ptr(), value.as_ptr(), 1) };
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
        own_process_group,
        run_as,
        nofile,
    } = launch;
    let (prog, args) = argv
        .split_first()
        .ok_or_else(|| io::Error::other("empty command"))?;
    let mut cmd = Command::new(prog);
    cmd.args(args)
        .stdout(Stdio::from(stdout))
        .stderr(Stdio::from(stderr))
        .stdin(Stdio::from(stdin));
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
        .map_err(|e| io::Error::new(e.kind(), format!("starting '{}': {e}", argv.join(" "))))
}
