//! The few syscalls nix does not wrap, each turned into `io::Result`.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// `_IOW('T', 202, int)` from linux/if_tun.h.
const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
const IFF_TUN: libc::c_short = 0x0001;
const IFF_NO_PI: libc::c_short = 0x1000;

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// Creates a TUN device named `name` in the calling thread's network namespace and returns the
/// non-blocking, close-on-exec descriptor that carries its packets (raw IP, no packet info).
pub fn open_tun(name: &str) -> io::Result<OwnedFd> {
    let path = CString::new("/dev/net/tun").expect("no NUL");
    // SAFETY: path is a valid C string; the returned descriptor is owned below.
    let fd = cvt(unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_RDWR | libc::O_CLOEXEC | libc::O_NONBLOCK,
        )
    })?;
    // SAFETY: fd was just opened and is not owned elsewhere.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: ifreq is plain old data; all-zero is a valid value.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    let bytes = name.as_bytes();
    if bytes.len() >= ifr.ifr_name.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("interface name '{name}' is too long"),
        ));
    }
    for (d, s) in ifr.ifr_name.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    ifr.ifr_ifru.ifru_flags = IFF_TUN | IFF_NO_PI;
    // SAFETY: TUNSETIFF reads a struct ifreq, which ifr is, for the duration of the call.
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETIFF, &mut ifr) })?;
    Ok(fd)
}

/// The index of interface `name` in the calling thread's network namespace.
pub fn if_index(name: &str) -> io::Result<u32> {
    let c = CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: c is a valid C string.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if idx == 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(idx)
    }
}

/// Reads one packet; `Ok(None)` when none is waiting.
pub fn read_packet(fd: RawFd, buf: &mut [u8]) -> io::Result<Option<usize>> {
    // SAFETY: buf is valid for writes of buf.len() bytes.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::WouldBlock {
            return Ok(None);
        }
        return Err(e);
    }
    Ok(Some(n as usize))
}

/// Writes one packet.
pub fn write_packet(fd: RawFd, data: &[u8]) -> io::Result<()> {
    // SAFETY: data is valid for reads of data.len() bytes.
    let n = unsafe { libc::write(fd, data.as_ptr().cast(), data.len()) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Nanoseconds on CLOCK_MONOTONIC.
pub fn monotonic_ns() -> u64 {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .expect("CLOCK_MONOTONIC exists");
    t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64
}

/// Nanoseconds since the Unix epoch.
pub fn realtime_ns() -> u64 {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_REALTIME)
        .expect("CLOCK_REALTIME exists");
    t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64
}

/// Lowers this thread's timer slack to 1 ns so that sub-millisecond timers fire on time
/// (the default slack is 50 µs).
pub fn tight_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes an integer and changes only this thread.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
}

/// Runs the calling thread at a modest real-time priority (SCHED_FIFO 10). With
/// SCHED_RESET_ON_FORK, programs started from here run with normal scheduling. See
/// `labnet::lifecycle::PriorityPolicy` for when the loop uses it. Failure is harmless.
pub fn realtime_priority() -> bool {
    let param = libc::sched_param { sched_priority: 10 };
    // SAFETY: sched_setscheduler reads param for the duration of the call.
    unsafe {
        libc::sched_setscheduler(0, libc::SCHED_FIFO | libc::SCHED_RESET_ON_FORK, &param) == 0
    }
}

/// Back to ordinary scheduling (SCHED_OTHER), keeping reset-on-fork. Failure is harmless.
pub fn normal_policy() -> bool {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: sched_setscheduler reads param for the duration of the call.
    unsafe {
        libc::sched_setscheduler(0, libc::SCHED_OTHER | libc::SCHED_RESET_ON_FORK, &param) == 0
    }
}

/// The strongest ordinary priority (nice -20) for the calling thread. Failure is harmless.
pub fn high_priority() -> bool {
    // SAFETY: setpriority takes plain integers; 0 names the calling thread.
    unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, -20) == 0 }
}

/// User plus system CPU seconds this process has used (its children not included).
pub fn cpu_seconds() -> f64 {
    match nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF) {
        Ok(u) => {
            let t = |tv: nix::sys::time::TimeVal| tv.tv_sec() as f64 + tv.tv_usec() as f64 / 1e6;
            t(u.user_time()) + t(u.system_time())
        }
        Err(_) => 0.0,
    }
}

/// Keeps capability `cap` (one the caller holds) across the next `execve` by a non-root uid,
/// as an ambient capability. Only raw syscalls on stack data: callable between fork and exec.
/// Failure is harmless (the capability is then lost at exec).
pub fn keep_ambient_cap(cap: u32) {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: libc::c_int,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    // _LINUX_CAPABILITY_VERSION_3 (linux/capability.h): two 32-bit words per set.
    let mut hdr = Header {
        version: 0x2008_0522,
        pid: 0,
    };
    let mut data = [Data {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: capget and capset read and write the header and two data words given.
    unsafe {
        if libc::syscall(libc::SYS_capget, &mut hdr, data.as_mut_ptr()) != 0 {
            return;
        }
        data[(cap / 32) as usize].inheritable |= 1 << (cap % 32);
        if libc::syscall(libc::SYS_capset, &hdr, data.as_ptr()) != 0 {
            return;
        }
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_RAISE as libc::c_ulong,
            cap as libc::c_ulong,
            0,
            0,
        );
    }
}
