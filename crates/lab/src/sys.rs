//! The few syscalls nix does not wrap, each turned into `io::Result`.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// `_IOW('T', 202, int)` from linux/if_tun.h.
const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
const IFF_TUN: libc::c_short = 0x0001;
const IFF_NO_PI: libc::c_short = 0x1000;
const IFF_VNET_HDR: libc::c_short = 0x4000;
/// `_IOW('T', 208, unsigned int)`: the offloads the device's reader can take.
const TUNSETOFFLOAD: libc::c_ulong = 0x4004_54d0;
/// `_IOW('T', 216, int)`: the size of the virtio header before each packet.
const TUNSETVNETHDRSZ: libc::c_ulong = 0x4004_54d8;
const TUN_F_CSUM: libc::c_uint = 0x01;
const TUN_F_TSO4: libc::c_uint = 0x02;
const TUN_F_TSO6: libc::c_uint = 0x04;
const TUN_F_USO4: libc::c_uint = 0x20;
const TUN_F_USO6: libc::c_uint = 0x40;

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// How the lab's TUN devices move packets, as `LATENCYLAB_OFFLOAD` asks (read once).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Offload {
    /// `off`: one plain IP packet per read and per write.
    Off,
    /// `segment`: reads with offloads (`IFF_VNET_HDR`, TSO, USO), so that a host's kernel hands
    /// over TCP and UDP super-packets of up to 64 KB with partial checksums, which
    /// `wire::gso` cuts back into the datagrams it would have sent; one datagram per write.
    Segment,
    /// `coalesce`: as `Segment`, and consecutive TCP segments of one flow written at once go
    /// into the receiving host as one super-packet (`wire::gso::Coalescer`).
    Coalesce,
    /// `on`, the default: as `Coalesce`, and a TCP super-packet crosses the lab whole where
    /// nothing treats its segments apart (`engine::Forwarder::build` says when).
    Full,
}

/// The offload mode of this process's TUN devices.
pub fn tun_offload() -> Offload {
    static MODE: std::sync::OnceLock<Offload> = std::sync::OnceLock::new();
    *MODE.get_or_init(|| match std::env::var("LATENCYLAB_OFFLOAD").as_deref() {
        Ok("off" | "0" | "no") => Offload::Off,
        Ok("segment") => Offload::Segment,
        Ok("coalesce") => Offload::Coalesce,
        _ => Offload::Full,
    })
}

/// Creates a TUN device named `name` in the calling thread's network namespace and returns the
/// non-blocking, close-on-exec descriptor that carries its packets (raw IP, no packet info).
/// Unless [`tun_offload`] is `Off`, each packet read or written is preceded by a `virtio_net_hdr`
/// (`wire::gso::VNET_HDR_LEN` bytes), and the device takes checksum offload, TSO for IPv4 and
/// IPv6, and USO where the kernel has it (Linux 6.2).
pub fn open_tun(name: &str) -> io::Result<OwnedFd> {
    open_tun_with(name, 0)
}

/// `IFF_NAPI` from linux/if_tun.h: packets written into the device enter the host's stack
/// through NAPI and GRO, as a network card's do, instead of one by one in the writer's call.
pub const IFF_NAPI: libc::c_short = 0x0010;

/// As [`open_tun`], with `extra_flags` (such as [`IFF_NAPI`]) added to the device's flags.
pub fn open_tun_with(name: &str, extra_flags: libc::c_short) -> io::Result<OwnedFd> {
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
    let offload = tun_offload() != Offload::Off;
    ifr.ifr_ifru.ifru_flags =
        IFF_TUN | IFF_NO_PI | extra_flags | if offload { IFF_VNET_HDR } else { 0 };
    // SAFETY: TUNSETIFF reads a struct ifreq, which ifr is, for the duration of the call.
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETIFF, &mut ifr) })?;
    if offload {
        let size: libc::c_int = wire::gso::VNET_HDR_LEN as libc::c_int;
        // SAFETY: TUNSETVNETHDRSZ reads an int through the pointer during the call.
        cvt(unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETVNETHDRSZ, &size) })?;
        let tso = TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6;
        // SAFETY: TUNSETOFFLOAD takes its flags by value.
        let with_uso =
            unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETOFFLOAD, tso | TUN_F_USO4 | TUN_F_USO6) };
        if with_uso < 0 {
            // A kernel without USO refuses the whole set: TCP offloads alone.
            // SAFETY: as above.
            cvt(unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETOFFLOAD, tso) })?;
        }
    }
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

/// Reads one packet from a device opened with offloads: its virtio header into `hdr`, the
/// packet into `data` (cleared first, and filled up to its capacity at most), in one `readv`;
/// `Ok(None)` when none is waiting. Returns the bytes read, header included.
pub fn read_packet_vnet(
    fd: RawFd,
    hdr: &mut [u8; wire::gso::VNET_HDR_LEN],
    data: &mut Vec<u8>,
) -> io::Result<Option<usize>> {
    data.clear();
    let spare = data.spare_capacity_mut();
    let iov = [
        libc::iovec {
            iov_base: hdr.as_mut_ptr().cast(),
            iov_len: hdr.len(),
        },
        libc::iovec {
            iov_base: spare.as_mut_ptr().cast(),
            iov_len: spare.len(),
        },
    ];
    // SAFETY: both iovecs point at live, writable buffers of their lengths.
    let n = unsafe { libc::readv(fd, iov.as_ptr(), iov.len() as libc::c_int) };
    if n < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::WouldBlock {
            return Ok(None);
        }
        return Err(e);
    }
    let n = n as usize;
    let body = n.saturating_sub(hdr.len());
    // SAFETY: readv filled the first `body` bytes of the spare capacity (at most its length).
    unsafe { data.set_len(body) };
    Ok(Some(n))
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

/// Writes one packet after the virtio header `hdr` (a device opened with offloads), in one
/// `writev`.
pub fn write_packet_vnet(
    fd: RawFd,
    hdr: &[u8; wire::gso::VNET_HDR_LEN],
    data: &[u8],
) -> io::Result<()> {
    let iov = [
        libc::iovec {
            iov_base: hdr.as_ptr() as *mut libc::c_void,
            iov_len: hdr.len(),
        },
        libc::iovec {
            iov_base: data.as_ptr() as *mut libc::c_void,
            iov_len: data.len(),
        },
    ];
    // SAFETY: both iovecs point at live buffers of their lengths; writev only reads them.
    let n = unsafe { libc::writev(fd, iov.as_ptr(), iov.len() as libc::c_int) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Waits on the epoll instance `epfd` for at most `timeout_ns` nanoseconds (`None`: until an
/// event) with `epoll_pwait2` (Linux 5.11), whose timeout is as fine as a timerfd's, and fills
/// `events`. Called through `syscall` so that an older C library does not matter; an older
/// kernel answers `ENOSYS`.
pub fn epoll_wait_ns(
    epfd: RawFd,
    events: &mut [nix::sys::epoll::EpollEvent],
    timeout_ns: Option<u64>,
) -> io::Result<usize> {
    let ts = timeout_ns.map(|ns| libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    });
    let tsp = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: EpollEvent is a transparent wrapper of epoll_event and `events` is valid for
    // writes of its length; `tsp` is null or points at a live timespec; with no signal mask
    // the mask's size is not read.
    let n = unsafe {
        libc::syscall(
            libc::SYS_epoll_pwait2,
            epfd,
            events.as_mut_ptr().cast::<libc::epoll_event>(),
            events.len().min(libc::c_int::MAX as usize) as libc::c_int,
            tsp,
            std::ptr::null::<libc::sigset_t>(),
            0usize,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
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

#[cfg(test)]
mod tests {
    use super::*;
    use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags};
    use nix::sys::eventfd::{EfdFlags, EventFd};
    use std::os::fd::AsFd;

    #[test]
    fn epoll_wait_ns_sleeps_at_least_its_timeout_and_returns_what_is_ready() {
        let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC).unwrap();
        let efd = EventFd::from_flags(EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK).unwrap();
        epoll
            .add(efd.as_fd(), EpollEvent::new(EpollFlags::EPOLLIN, 7))
            .unwrap();
        let mut events = vec![EpollEvent::empty(); 4];
        let fd = epoll.0.as_raw_fd();
        // Nothing ready: a zero timeout comes straight back, a timeout is never cut short.
        match epoll_wait_ns(fd, &mut events, Some(0)) {
            Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {
                eprintln!("skipped: this kernel has no epoll_pwait2 (Linux 5.11)");
                return;
            }
            r => assert_eq!(r.unwrap(), 0),
        }
        let start = monotonic_ns();
        assert_eq!(epoll_wait_ns(fd, &mut events, Some(1_500_000)).unwrap(), 0);
        assert!(monotonic_ns() - start >= 1_500_000);
        efd.write(1).unwrap();
        assert_eq!(epoll_wait_ns(fd, &mut events, None).unwrap(), 1);
        assert_eq!(events[0].data(), 7);
    }
}
