//! The few system calls the programs need that std does not offer: integer socket options
//! (IP_TOS, IPV6_TCLASS, IP_RECVTOS, IPV6_RECVTCLASS, TCP_NOTSENT_LOWAT …), `recvmsg` with
//! the received ECN field read from its control message, waiting for a socket to become
//! readable, and SIGTERM/SIGINT turned into a flag.
//!
//! Every call goes through [`cvt`], which turns a `-1` into `io::Error`. This module holds all
//! of the crate's `unsafe`; it does not decide anything (which codepoint to send, when to stop):
//! the callers do.

use std::io;
use std::mem::{size_of, MaybeUninit};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use wire::Ecn;

/// Turns the C convention (`-1` and `errno`) into `io::Result`.
fn cvt<T: Copy + PartialOrd + Default>(ret: T) -> io::Result<T> {
    if ret < T::default() {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// `setsockopt(fd, level, name, &value, sizeof(int))`.
pub fn set_int_option(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: `fd` is a live descriptor for the borrow; the option value is a c_int on the
    // stack whose size we pass, and the kernel only reads it.
    cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&value as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    })?;
    Ok(())
}

/// The address family a socket was created with.
pub fn is_ipv6_socket(addr: &SocketAddr) -> bool {
    addr.is_ipv6()
}

/// Sets the ECN field of every packet the UDP socket sends from now on. On an IPv6 socket both
/// IPV6_TCLASS and (for IPv4-mapped peers of a dual-stack socket) IP_TOS are set; the second
/// may be refused on a v6-only socket, which is harmless.
pub fn set_send_ecn(fd: BorrowedFd<'_>, local: &SocketAddr, ecn: Ecn) -> io::Result<()> {
    let tos = libc::c_int::from(ecn.bits());
    if is_ipv6_socket(local) {
        set_int_option(fd, libc::IPPROTO_IPV6, libc::IPV6_TCLASS, tos)?;
        let _ = set_int_option(fd, libc::IPPROTO_IP, libc::IP_TOS, tos);
        Ok(())
    } else {
        set_int_option(fd, libc::IPPROTO_IP, libc::IP_TOS, tos)
    }
}

/// Asks the kernel to attach the received TOS / traffic class to every datagram, so that
/// [`recv_with_ecn`] can report the ECN field (RFC 3168 §5) as it arrived.
pub fn enable_recv_ecn(fd: BorrowedFd<'_>, local: &SocketAddr) -> io::Result<()> {
    if is_ipv6_socket(local) {
        set_int_option(fd, libc::IPPROTO_IPV6, libc::IPV6_RECVTCLASS, 1)?;
        // IPv4 datagrams arriving on a dual-stack socket carry IP_TOS instead.
        let _ = set_int_option(fd, libc::IPPROTO_IP, libc::IP_RECVTOS, 1);
        Ok(())
    } else {
        set_int_option(fd, libc::IPPROTO_IP, libc::IP_RECVTOS, 1)
    }
}

/// Asks the kernel to stamp every datagram with its arrival time (SO_TIMESTAMPNS), so that a
/// program that was waiting for a CPU still knows when each packet really arrived.
pub fn enable_recv_timestamps(fd: BorrowedFd<'_>) -> io::Result<()> {
    set_int_option(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1)
}

/// One received datagram: its length, its sender, the ECN field it arrived with (`None`
/// when the kernel attached no TOS/traffic-class control message) and the kernel's arrival
/// time in nanoseconds since the Unix epoch (`None` without SO_TIMESTAMPNS).
#[derive(Clone, Copy, Debug)]
pub struct Received {
    pub len: usize,
    pub from: SocketAddr,
    pub ecn: Option<Ecn>,
    pub arrival_unix_ns: Option<u64>,
}

/// `recvmsg` on a UDP socket, reading the IP_TOS / IPV6_TCLASS control message. Honors the
/// socket's read timeout (SO_RCVTIMEO), returning `WouldBlock` when it expires.
pub fn recv_with_ecn(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<Received> {
    // Room for a few control messages; the kernel sets MSG_CTRUNC if ever too small.
    let mut control = [0u64; 16];
    let mut name = MaybeUninit::<libc::sockaddr_storage>::zeroed();
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: msghdr is plain data; all-zero is a valid (empty) value that we then fill.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_name = name.as_mut_ptr().cast();
    msg.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1 as _;
    msg.msg_control = control.as_mut_ptr().cast();
    // `as _`: the field is size_t on glibc and socklen_t on musl.
    msg.msg_controllen = size_of::<[u64; 16]>() as _;
    // SAFETY: every pointer in `msg` refers to a live local buffer of the stated length
    // (`buf`, `name`, `control`) that outlives the call.
    let len = cvt(unsafe { libc::recvmsg(fd.as_raw_fd(), &mut msg, 0) })? as usize;

    let mut ecn = None;
    let mut arrival_unix_ns = None;
    // SAFETY: the CMSG_* helpers walk the control buffer the kernel just filled, bounded by
    // msg_controllen; each header they return lies inside `control`.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            let level = (*cmsg).cmsg_level;
            let kind = (*cmsg).cmsg_type;
            let data = libc::CMSG_DATA(cmsg);
            let data_len = (*cmsg).cmsg_len as usize - (data as usize - cmsg as usize);
            if level == libc::IPPROTO_IP && kind == libc::IP_TOS && data_len >= 1 {
                // Linux delivers IP_TOS as a single byte.
                ecn = Some(Ecn::from_bits(*data));
            } else if level == libc::IPPROTO_IPV6
                && kind == libc::IPV6_TCLASS
                && data_len >= size_of::<libc::c_int>()
            {
                let tclass = std::ptr::read_unaligned(data.cast::<libc::c_int>());
                ecn = Some(Ecn::from_bits(tclass as u8));
            } else if level == libc::SOL_SOCKET
                && kind == libc::SCM_TIMESTAMPNS
                && data_len >= size_of::<libc::timespec>()
            {
                let ts = std::ptr::read_unaligned(data.cast::<libc::timespec>());
                arrival_unix_ns = Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    // SAFETY: the kernel wrote a socket address of `msg_namelen` bytes into `name`.
    let from = unsafe { sockaddr_to_std(name.as_ptr(), msg.msg_namelen) }.ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "datagram from an unknown family",
        )
    })?;
    Ok(Received {
        len,
        from,
        ecn,
        arrival_unix_ns,
    })
}

/// Reads a `sockaddr_storage` filled by the kernel.
///
/// # Safety
/// `storage` must point to `len` initialised bytes of a socket address.
unsafe fn sockaddr_to_std(
    storage: *const libc::sockaddr_storage,
    len: libc::socklen_t,
) -> Option<SocketAddr> {
    let family = libc::c_int::from((*storage).ss_family);
    if family == libc::AF_INET && len as usize >= size_of::<libc::sockaddr_in>() {
        let sin = &*storage.cast::<libc::sockaddr_in>();
        let ip = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
        Some(SocketAddr::V4(SocketAddrV4::new(
            ip,
            u16::from_be(sin.sin_port),
        )))
    } else if family == libc::AF_INET6 && len as usize >= size_of::<libc::sockaddr_in6>() {
        let sin6 = &*storage.cast::<libc::sockaddr_in6>();
        let ip = Ipv6Addr::from(sin6.sin6_addr.s6_addr);
        Some(SocketAddr::V6(SocketAddrV6::new(
            ip,
            u16::from_be(sin6.sin6_port),
            sin6.sin6_flowinfo,
            sin6.sin6_scope_id,
        )))
    } else {
        None
    }
}

/// Waits until `fd` is readable or `timeout` passes; `Ok(false)` on timeout or a signal.
pub fn wait_readable(fd: BorrowedFd<'_>, timeout: Duration) -> io::Result<bool> {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let ms = u16::try_from(timeout.as_millis()).unwrap_or(u16::MAX);
    let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLIN)];
    match poll(&mut fds, PollTimeout::from(ms)) {
        Ok(n) => Ok(n > 0),
        Err(nix::errno::Errno::EINTR) => Ok(false),
        Err(e) => Err(io::Error::from(e)),
    }
}

/// As [`wait_readable`] with sub-millisecond precision (ppoll), for the call's pacing loop.
pub fn wait_readable_precise(fd: BorrowedFd<'_>, timeout: Duration) -> io::Result<bool> {
    use nix::poll::{ppoll, PollFd, PollFlags};
    use nix::sys::time::TimeSpec;
    let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLIN)];
    match ppoll(&mut fds, Some(TimeSpec::from_duration(timeout)), None) {
        Ok(n) => Ok(n > 0),
        Err(nix::errno::Errno::EINTR) => Ok(false),
        Err(e) => Err(io::Error::from(e)),
    }
}

/// `SIOCOUTQNSD` from `linux/sockios.h`: bytes in a TCP socket's send queue not yet sent.
const SIOCOUTQNSD: libc::c_ulong = 0x894B;

/// What a TCP socket holds in its send buffer: `queued` bytes not yet acknowledged (SIOCOUTQ),
/// of which `unsent` have not been sent at all (SIOCOUTQNSD).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendQueue {
    pub queued_bytes: u64,
    pub unsent_bytes: u64,
}

/// Reads a TCP socket's send queue.
pub fn send_queue(fd: BorrowedFd<'_>) -> io::Result<SendQueue> {
    let mut outq: libc::c_int = 0;
    let mut notsent: libc::c_int = 0;
    // SAFETY: both ioctls write one c_int through the pointer, which points to a live local.
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCOUTQ as _, &mut outq) })?;
    // SAFETY: as above.
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), SIOCOUTQNSD as _, &mut notsent) })?;
    Ok(SendQueue {
        queued_bytes: u64::try_from(outq).unwrap_or(0),
        unsent_bytes: u64::try_from(notsent).unwrap_or(0),
    })
}

/// `TCPI_OPT_SYN_DATA` of `tcpi_options` (`linux/tcp.h`): the SYN carried data that the other
/// side acknowledged (a client) or accepted (a server): the connection used TCP Fast Open.
const TCPI_OPT_SYN_DATA: u8 = 32;

/// Whether a connected TCP socket exchanged data in its SYN (TCP Fast Open, RFC 7413), from
/// `TCP_INFO`.
pub fn syn_data_acked(fd: BorrowedFd<'_>) -> io::Result<bool> {
    // SAFETY: tcp_info is plain data; all-zero is a valid value.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `info`, a live local of that size.
    cvt(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    })?;
    Ok(info.tcpi_options & TCPI_OPT_SYN_DATA != 0)
}

/// A TCP connection to `addr` that, with `fastopen`, sends its first write in the SYN when it
/// holds a cookie for the server (`TCP_FASTOPEN_CONNECT`, Linux 4.11; without a cookie the SYN
/// asks for one and the data follows the handshake). `connect` then returns before the
/// handshake, and the first write performs it.
pub fn connect_tcp(addr: &SocketAddr, fastopen: bool) -> io::Result<std::net::TcpStream> {
    use std::os::fd::{FromRawFd, OwnedFd};
    let family = if addr.is_ipv6() {
        libc::AF_INET6
    } else {
        libc::AF_INET
    };
    // SAFETY: plain socket(2); the descriptor is owned right below.
    let raw = cvt(unsafe { libc::socket(family, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: `raw` is a fresh descriptor that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    if fastopen {
        set_int_option(fd.as_fd(), libc::IPPROTO_TCP, libc::TCP_FASTOPEN_CONNECT, 1)?;
    }
    let (storage, len) = std_to_sockaddr(addr);
    // SAFETY: `storage` holds a socket address of `len` bytes for the duration of the call.
    let r = unsafe {
        libc::connect(
            fd.as_raw_fd(),
            (&storage as *const libc::sockaddr_storage).cast(),
            len,
        )
    };
    loop_on_eintr(r)?;
    Ok(std::net::TcpStream::from(fd))
}

/// `connect` interrupted by a signal goes on in the background; anything else is an error.
fn loop_on_eintr(r: libc::c_int) -> io::Result<()> {
    if r == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    if e.kind() == io::ErrorKind::Interrupted {
        return Ok(());
    }
    Err(e)
}

/// A `sockaddr_storage` holding `addr`, and its length.
fn std_to_sockaddr(addr: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain data; all-zero is a valid value.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(*a.ip()).to_be(),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
            unsafe { std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin) };
            (storage, size_of::<libc::sockaddr_in>() as libc::socklen_t)
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in6.
            unsafe { std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin6) };
            (storage, size_of::<libc::sockaddr_in6>() as libc::socklen_t)
        }
    }
}

/// Waits until `fd` is writable (for a socket with TCP_NOTSENT_LOWAT: until its unsent bytes
/// fell below the mark) or `timeout` passes; `Ok(false)` on timeout or a signal.
pub fn wait_writable(fd: BorrowedFd<'_>, timeout: Duration) -> io::Result<bool> {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let ms = u16::try_from(timeout.as_millis()).unwrap_or(u16::MAX);
    let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLOUT)];
    match poll(&mut fds, PollTimeout::from(ms)) {
        Ok(n) => Ok(n > 0),
        Err(nix::errno::Errno::EINTR) => Ok(false),
        Err(e) => Err(io::Error::from(e)),
    }
}

/// Set by the SIGTERM/SIGINT handler; read by [`signal_received`].
static SIGNALLED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    SIGNALLED.store(true, Ordering::Relaxed);
}

/// Installs handlers so that SIGTERM and SIGINT ask the programs to stop (and flush) instead of
/// killing them mid-line. SA_RESTART keeps blocking calls going; the programs poll the flag at
/// least every few hundred milliseconds through their socket timeouts.
pub fn install_stop_signals() -> io::Result<()> {
    use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
    let action = SigAction::new(
        SigHandler::Handler(on_signal),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    for sig in [Signal::SIGTERM, Signal::SIGINT] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe { sigaction(sig, &action) }.map_err(io::Error::from)?;
    }
    Ok(())
}

/// Whether SIGTERM or SIGINT arrived since [`install_stop_signals`].
pub fn signal_received() -> bool {
    SIGNALLED.load(Ordering::Relaxed)
}

/// `CLOCK_MONOTONIC` in seconds, written once in each program's `start` line so that its
/// times can be aligned with captures taken on the same machine.
pub fn monotonic_s() -> f64 {
    match nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC) {
        Ok(ts) => ts.tv_sec() as f64 + ts.tv_nsec() as f64 / 1e9,
        Err(_) => f64::NAN,
    }
}

/// `IPPROTO_MPTCP` (Linux 5.6), which libc does not name.
pub const IPPROTO_MPTCP: libc::c_int = 262;
/// `SOL_MPTCP` and its `MPTCP_TCPINFO` / `MPTCP_SUBFLOW_ADDRS` options (Linux 5.16,
/// `linux/mptcp.h`).
const SOL_MPTCP: libc::c_int = 284;
const MPTCP_TCPINFO: libc::c_int = 2;
const MPTCP_SUBFLOW_ADDRS: libc::c_int = 3;
/// `struct mptcp_subflow_data`: the header the MPTCP per-subflow options fill.
const SUBFLOW_DATA_LEN: usize = 16;
/// `struct mptcp_subflow_addrs`: two `__kernel_sockaddr_storage`s.
const SUBFLOW_ADDRS_LEN: usize = 256;
/// The part of `struct tcp_info` read back per subflow: up to `tcpi_bytes_acked` (offset 120).
const SUBFLOW_TCPINFO_LEN: usize = 128;
const TCPI_BYTES_ACKED_OFFSET: usize = 120;

/// A non-blocking TCP socket (MPTCP with `mptcp`) of `addr`'s family, bound to the interface
/// `dev` when given (SO_BINDTODEVICE: only its routes, its source address), its `connect`
/// started. [`connect_outcome`] says how it ended once [`wait_any_writable`] saw it writable.
pub fn start_connect(
    addr: &SocketAddr,
    dev: Option<&str>,
    mptcp: bool,
) -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::{FromRawFd, OwnedFd};
    let family = if addr.is_ipv6() {
        libc::AF_INET6
    } else {
        libc::AF_INET
    };
    let proto = if mptcp { IPPROTO_MPTCP } else { 0 };
    let kind = libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK;
    // SAFETY: plain socket(2); the descriptor is owned right below.
    let raw = cvt(unsafe { libc::socket(family, kind, proto) })?;
    // SAFETY: `raw` is a fresh descriptor that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    if let Some(dev) = dev {
        // SAFETY: the name's bytes outlive the call; the length is theirs.
        cvt(unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_BINDTODEVICE,
                dev.as_ptr().cast(),
                dev.len() as libc::socklen_t,
            )
        })?;
    }
    let (storage, len) = std_to_sockaddr(addr);
    // SAFETY: `storage` holds a socket address of `len` bytes for the duration of the call.
    let r = unsafe {
        libc::connect(
            fd.as_raw_fd(),
            (&storage as *const libc::sockaddr_storage).cast(),
            len,
        )
    };
    if r != 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINPROGRESS) {
            return Err(e);
        }
    }
    Ok(fd)
}

/// Waits until one of `fds` is writable (a started `connect` has ended) or `timeout` passes;
/// the indexes of the writable ones (empty on timeout or a signal).
pub fn wait_any_writable(fds: &[BorrowedFd<'_>], timeout: Duration) -> io::Result<Vec<usize>> {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let ms = u16::try_from(timeout.as_millis()).unwrap_or(u16::MAX);
    let mut pfds: Vec<PollFd> = fds
        .iter()
        .map(|fd| PollFd::new(*fd, PollFlags::POLLOUT))
        .collect();
    match poll(&mut pfds, PollTimeout::from(ms)) {
        Ok(_) => Ok(pfds
            .iter()
            .enumerate()
            .filter(|(_, p)| p.revents().is_some_and(|r| !r.is_empty()))
            .map(|(i, _)| i)
            .collect()),
        Err(nix::errno::Errno::EINTR) => Ok(Vec::new()),
        Err(e) => Err(io::Error::from(e)),
    }
}

/// How a non-blocking `connect` that has ended went: `SO_ERROR`.
pub fn connect_outcome(fd: BorrowedFd<'_>) -> io::Result<()> {
    let mut err: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `err` is a c_int and `len` its size, as SO_ERROR expects.
    cvt(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ERROR,
            (&mut err as *mut libc::c_int).cast(),
            &mut len,
        )
    })?;
    if err == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(err))
    }
}

/// A listening MPTCP socket on `[::]:port` (both families), which also accepts plain TCP
/// clients (RFC 8684 §3.7 fallback). Fails where the kernel has MPTCP off
/// (`net.mptcp.enabled` 0).
pub fn listen_mptcp(port: u16) -> io::Result<std::net::TcpListener> {
    use std::os::fd::{FromRawFd, OwnedFd};
    // SAFETY: plain socket(2); the descriptor is owned right below.
    let raw = cvt(unsafe {
        libc::socket(
            libc::AF_INET6,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            IPPROTO_MPTCP,
        )
    })?;
    // SAFETY: `raw` is a fresh descriptor that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    set_int_option(fd.as_fd(), libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
    set_int_option(fd.as_fd(), libc::IPPROTO_IPV6, libc::IPV6_V6ONLY, 0)?;
    let addr = SocketAddr::from((Ipv6Addr::UNSPECIFIED, port));
    let (storage, len) = std_to_sockaddr(&addr);
    // SAFETY: `storage` holds a socket address of `len` bytes for the duration of the call.
    cvt(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&storage as *const libc::sockaddr_storage).cast(),
            len,
        )
    })?;
    // SAFETY: listen(2) on a descriptor we own.
    cvt(unsafe { libc::listen(fd.as_raw_fd(), 128) })?;
    Ok(std::net::TcpListener::from(fd))
}

/// One subflow of an MPTCP connection: its local address and the bytes its peer acknowledged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Subflow {
    pub local: SocketAddr,
    pub bytes_acked: u64,
}

/// The subflows of the MPTCP socket `fd` (`MPTCP_SUBFLOW_ADDRS` and `MPTCP_TCPINFO`, which
/// list them in the same order). Empty for a connection that fell back to plain TCP.
pub fn mptcp_subflows(fd: BorrowedFd<'_>) -> io::Result<Vec<Subflow>> {
    const MAX: usize = 8;
    let addrs = subflow_option(fd, MPTCP_SUBFLOW_ADDRS, SUBFLOW_ADDRS_LEN, MAX)?;
    let infos = subflow_option(fd, MPTCP_TCPINFO, SUBFLOW_TCPINFO_LEN, MAX)?;
    Ok(addrs
        .iter()
        .zip(&infos)
        .filter_map(|(a, i)| {
            let local = sockaddr_from_bytes(&a[..128])?;
            let b = i.get(TCPI_BYTES_ACKED_OFFSET..TCPI_BYTES_ACKED_OFFSET + 8)?;
            Some(Subflow {
                local,
                bytes_acked: u64::from_ne_bytes(b.try_into().ok()?),
            })
        })
        .collect())
}

/// The per-subflow entries of an MPTCP getsockopt, each `entry` bytes long.
fn subflow_option(
    fd: BorrowedFd<'_>,
    name: libc::c_int,
    entry: usize,
    max: usize,
) -> io::Result<Vec<Vec<u8>>> {
    // u64 words: the header is 8-byte aligned.
    let mut buf = vec![0u64; (SUBFLOW_DATA_LEN + entry * max) / 8];
    let header = [SUBFLOW_DATA_LEN as u32, 0, 0, entry as u32];
    // SAFETY: the buffer is at least 16 bytes long and 8-byte aligned.
    unsafe { std::ptr::copy_nonoverlapping(header.as_ptr(), buf.as_mut_ptr().cast(), 4) };
    let mut len = (buf.len() * 8) as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `buf`.
    cvt(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            SOL_MPTCP,
            name,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    })?;
    // SAFETY: `buf` is plain bytes of the length given.
    let bytes: &[u8] = unsafe { std::slice::from_raw_parts(buf.as_ptr().cast(), buf.len() * 8) };
    let num = u32::from_ne_bytes(bytes[4..8].try_into().expect("4 bytes")) as usize;
    let size_user = u32::from_ne_bytes(bytes[12..16].try_into().expect("4 bytes")) as usize;
    let stride = if size_user == 0 { entry } else { size_user };
    Ok((0..num.min(max))
        .filter_map(|k| {
            let at = SUBFLOW_DATA_LEN + k * stride;
            bytes.get(at..at + entry).map(<[u8]>::to_vec)
        })
        .collect())
}

/// A `struct sockaddr_in` or `sockaddr_in6` in its kernel byte layout.
fn sockaddr_from_bytes(b: &[u8]) -> Option<SocketAddr> {
    let family = libc::c_int::from(u16::from_ne_bytes(b.get(0..2)?.try_into().ok()?));
    let port = u16::from_be_bytes(b.get(2..4)?.try_into().ok()?);
    match family {
        libc::AF_INET => {
            let ip: [u8; 4] = b.get(4..8)?.try_into().ok()?;
            Some(SocketAddr::from((Ipv4Addr::from(ip), port)))
        }
        libc::AF_INET6 => {
            let ip: [u8; 16] = b.get(8..24)?.try_into().ok()?;
            Some(SocketAddr::from((Ipv6Addr::from(ip), port)))
        }
        _ => None,
    }
}

/// `getaddrinfo(host, port)` for stream sockets of `family` (`AF_UNSPEC`, `AF_INET6`, …), with
/// no flags (no AI_ADDRCONFIG): the addresses in the resolver's order (glibc sorts them by
/// RFC 6724). A failed lookup is an error with `gai_strerror`'s words.
pub fn getaddrinfo(host: &str, port: u16, family: libc::c_int) -> io::Result<Vec<SocketAddr>> {
    let node = std::ffi::CString::new(host)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL in the host name"))?;
    let service = std::ffi::CString::new(port.to_string()).expect("digits have no NUL");
    // SAFETY: addrinfo is plain data; all-zero is a valid "no preference" hints value.
    let mut hints: libc::addrinfo = unsafe { std::mem::zeroed() };
    hints.ai_family = family;
    hints.ai_socktype = libc::SOCK_STREAM;
    let mut list: *mut libc::addrinfo = std::ptr::null_mut();
    // SAFETY: node and service are NUL-terminated and outlive the call; hints is initialised;
    // `list` receives a list we free below with freeaddrinfo.
    let rc = unsafe { libc::getaddrinfo(node.as_ptr(), service.as_ptr(), &hints, &mut list) };
    if rc != 0 {
        // SAFETY: gai_strerror returns a static NUL-terminated string for any code.
        let msg = unsafe { std::ffi::CStr::from_ptr(libc::gai_strerror(rc)) };
        return Err(io::Error::other(msg.to_string_lossy().into_owned()));
    }
    let mut out = Vec::new();
    let mut p = list;
    while !p.is_null() {
        // SAFETY: `p` is a node of the list getaddrinfo returned, not yet freed; its ai_addr
        // points to ai_addrlen bytes of a socket address.
        unsafe {
            let ai = &*p;
            if !ai.ai_addr.is_null() {
                if let Some(a) = sockaddr_to_std(ai.ai_addr.cast(), ai.ai_addrlen) {
                    out.push(a);
                }
            }
            p = ai.ai_next;
        }
    }
    // SAFETY: `list` came from a successful getaddrinfo and is freed once.
    unsafe { libc::freeaddrinfo(list) };
    Ok(out)
}

extern "C" {
    // glibc's; the libc crate declares `struct hostent` but not the function.
    fn gethostbyname(name: *const libc::c_char) -> *mut libc::hostent;
}

/// `gethostbyname(host)`: the IPv4 addresses of `host`, from the hosts file or A records (the
/// resolver asks for nothing else). Not thread-safe in C (a static result); callers call it from
/// one thread.
pub fn gethostbyname_v4(host: &str) -> io::Result<Vec<Ipv4Addr>> {
    let name = std::ffi::CString::new(host)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL in the host name"))?;
    // SAFETY: `name` is NUL-terminated; the result is glibc's static hostent or NULL.
    let h = unsafe { gethostbyname(name.as_ptr()) };
    if h.is_null() {
        return Err(io::Error::other("gethostbyname found no IPv4 address"));
    }
    let mut out = Vec::new();
    // SAFETY: a non-NULL hostent from gethostbyname: h_addr_list is a NULL-terminated array of
    // pointers to h_length-byte addresses, valid until the next call on this thread.
    unsafe {
        let h = &*h;
        if h.h_addrtype == libc::AF_INET && h.h_length == 4 {
            let mut i = 0;
            loop {
                let a = *h.h_addr_list.add(i);
                if a.is_null() {
                    break;
                }
                let b = std::slice::from_raw_parts(a.cast::<u8>(), 4);
                out.push(Ipv4Addr::new(b[0], b[1], b[2], b[3]));
                i += 1;
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;

    fn ecn_round_trip(bind: &str, ecn: Ecn) -> Option<Ecn> {
        let rx = UdpSocket::bind(bind).unwrap();
        let rx_addr = rx.local_addr().unwrap();
        enable_recv_ecn(rx.as_fd(), &rx_addr).unwrap();
        rx.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let tx = UdpSocket::bind(bind).unwrap();
        set_send_ecn(tx.as_fd(), &tx.local_addr().unwrap(), ecn).unwrap();
        tx.send_to(b"hello", rx_addr).unwrap();
        let mut buf = [0u8; 64];
        let got = recv_with_ecn(rx.as_fd(), &mut buf).unwrap();
        assert_eq!(&buf[..got.len], b"hello");
        assert_eq!(got.from, tx.local_addr().unwrap());
        got.ecn
    }

    #[test]
    fn ecn_codepoint_set_by_sender_is_read_back_on_ipv4_loopback() {
        assert_eq!(ecn_round_trip("127.0.0.1:0", Ecn::Ect1), Some(Ecn::Ect1));
        assert_eq!(ecn_round_trip("127.0.0.1:0", Ecn::Ect0), Some(Ecn::Ect0));
        assert_eq!(
            ecn_round_trip("127.0.0.1:0", Ecn::NotEct),
            Some(Ecn::NotEct)
        );
    }

    #[test]
    fn ecn_codepoint_set_by_sender_is_read_back_on_ipv6_loopback() {
        // Some build machines have no IPv6 loopback; the IPv4 test covers the path then.
        if UdpSocket::bind("[::1]:0").is_err() {
            return;
        }
        assert_eq!(ecn_round_trip("[::1]:0", Ecn::Ect1), Some(Ecn::Ect1));
        assert_eq!(ecn_round_trip("[::1]:0", Ecn::Ect0), Some(Ecn::Ect0));
    }

    #[test]
    fn recv_times_out_with_would_block() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_read_timeout(Some(Duration::from_millis(20)))
            .unwrap();
        let mut buf = [0u8; 8];
        let err = recv_with_ecn(rx.as_fd(), &mut buf).unwrap_err();
        assert!(matches!(
            err.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
        ));
    }
}
