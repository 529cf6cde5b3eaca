//! The test's TCP connections, kept to a few milliseconds of unsent data in the sending
//! host (draft-ietf-ippm-responsiveness-09 section 6.1.1: a test endpoint keeps what a
//! request waits behind in its own buffers to about 5 ms of the connection's rate).
//!
//! TCP_NOTSENT_LOWAT alone does not do it. Linux checks the low-water mark only before it
//! starts a new buffer of the socket's send queue (`tcp_sendmsg_locked`, via
//! `sk_stream_memory_free`), and appends to the last one up to the size it hands to
//! segmentation offload, 64 KiB: a writer that writes whenever a write succeeds keeps up to
//! the mark plus 64 KiB unsent, a quarter of a second for one of sixteen flows sharing
//! 20 Mbit/s. [`Paced`] asks the socket how much it holds unsent (SIOCOUTQNSD) before each
//! write and writes only up to the mark; when the socket holds half the mark or more it
//! waits for the kernel's own wake-up, the one `poll` promises for TCP_NOTSENT_LOWAT (the
//! socket turns writable again when its unsent bytes fall below half the mark,
//! `tcp_stream_memory_free`).
//!
//! The mark follows the connection's rate, every 100 ms: 5 ms of what its congestion window
//! lets it send, the window over the smoothed round trip ([`crate::lowat_for_rate`]), so a
//! download and an upload keep it whatever their share of the path. Not of what the program
//! handed it: a mark that small starves the connection whenever a burst of acknowledgements
//! opens its window faster than the program refills it, which lowers what it is handed, which
//! lowers the mark (on a 1 Mbit/s uplink under CoDel, whose dropped acknowledgements each
//! survivor makes up for, the downloads fell to a tenth of the line that way).

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::TcpStream;

/// A TCP stream that hands its socket no more than the low-water mark of unsent bytes.
pub struct Paced {
    tcp: TcpStream,
    /// TCP_NOTSENT_LOWAT in force, bytes; 0: the system's default, and no pacing.
    lowat_bytes: u32,
    /// Whether the mark follows the rate (always, but in tests).
    adapt: bool,
    /// When the mark was last set.
    marked: Instant,
    /// At least the bytes the socket holds unsent: what it said when last asked, plus what was
    /// written since.
    unsent_at_most: u32,
}

impl Paced {
    /// `lowat_bytes` is the mark to start with (0 leaves the socket as the system made it).
    pub fn new(tcp: TcpStream, lowat_bytes: u32) -> Paced {
        crate::set_notsent_lowat(&tcp, lowat_bytes);
        Paced {
            tcp,
            lowat_bytes,
            adapt: true,
            marked: Instant::now(),
            unsent_at_most: 0,
        }
    }

    /// Writes `buf` to the socket, counting it as unsent.
    fn write_counted(&mut self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let r = ready!(Pin::new(&mut self.tcp).poll_write(cx, buf));
        if let Ok(k) = r {
            self.unsent_at_most = self.unsent_at_most.saturating_add(k as u32);
            self.remark();
        }
        Poll::Ready(r)
    }

    /// Every 100 ms the mark moves to 5 ms of the rate the congestion window allows.
    fn remark(&mut self) {
        if !self.adapt || self.marked.elapsed() < Duration::from_millis(100) {
            return;
        }
        self.marked = Instant::now();
        if let Some(rate) = window_rate(self.tcp.as_raw_fd()) {
            self.lowat_bytes = crate::lowat_for_rate(rate);
            crate::set_notsent_lowat(&self.tcp, self.lowat_bytes);
        }
    }
}

/// What the connection's congestion window lets it send, bytes per second: the window in
/// segments times the segment size over the smoothed round trip (TCP_INFO's `tcpi_snd_cwnd`,
/// `tcpi_snd_mss`, `tcpi_rtt`), or `None` before a round trip was measured.
fn window_rate(fd: RawFd) -> Option<f64> {
    // SAFETY: tcp_info is plain data, and all zeros is a valid value of it.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: a valid socket descriptor, and a buffer of `len` bytes for the kernel to fill.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    if r < 0 || info.tcpi_rtt == 0 {
        return None;
    }
    let window_bytes = info.tcpi_snd_cwnd as f64 * info.tcpi_snd_mss as f64;
    Some(window_bytes / (info.tcpi_rtt as f64 / 1e6))
}

/// Bytes the socket holds that TCP has not sent yet (SIOCOUTQNSD, linux/sockios.h).
fn unsent_bytes(fd: RawFd) -> io::Result<u32> {
    let mut n: libc::c_int = 0;
    // SAFETY: a valid socket descriptor and a pointer to a c_int, as SIOCOUTQNSD expects.
    let r = unsafe { libc::ioctl(fd, libc::SIOCOUTQNSD as _, &mut n) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n.max(0) as u32)
}

/// How many bytes may be written now under the mark and how many the socket holds unsent, or
/// `WouldBlock`.
///
/// Writable when the unsent bytes are below half the mark, the rule of `tcp_poll`, so that a
/// write is at least half the mark (whole packets) and the kernel's wake-up comes at the same
/// point. Before it says `WouldBlock` it polls the socket once: that is what marks it as
/// having a waiting writer (SOCK_NOSPACE), without which the kernel wakes nobody when the
/// unsent bytes fall.
fn room(fd: RawFd, lowat_bytes: u32, wanted: usize) -> io::Result<(usize, u32)> {
    let free = |unsent: u32| ((lowat_bytes - unsent.min(lowat_bytes)) as usize, unsent);
    let unsent = unsent_bytes(fd)?;
    if unsent.saturating_mul(2) < lowat_bytes {
        return Ok(free(unsent));
    }
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: one valid pollfd, no timeout.
    let r = unsafe { libc::poll(&mut p, 1, 0) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    // A connection that failed or was shut down will never drain: let the write say so.
    if p.revents & (libc::POLLERR | libc::POLLHUP) != 0 {
        return Ok((wanted, 0));
    }
    let unsent = unsent_bytes(fd)?;
    if unsent.saturating_mul(2) < lowat_bytes {
        return Ok(free(unsent));
    }
    Err(io::ErrorKind::WouldBlock.into())
}

impl AsyncWrite for Paced {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.lowat_bytes == 0 || buf.is_empty() {
            return Pin::new(&mut this.tcp).poll_write(cx, buf);
        }
        loop {
            // What the socket said it held, plus what was written since, is more than it holds
            // now (TCP can only have sent some of it): while that is under half the mark, the
            // socket need not be asked. At high rates, where the mark is large, that spares
            // an ioctl per write.
            let lowat = this.lowat_bytes;
            if this.unsent_at_most.saturating_mul(2) < lowat {
                let n = ((lowat - this.unsent_at_most) as usize).clamp(1, buf.len());
                return this.write_counted(cx, &buf[..n]);
            }
            ready!(this.tcp.poll_write_ready(cx))?;
            let (fd, lowat) = (this.tcp.as_raw_fd(), this.lowat_bytes);
            // Through `try_io`, so that a `WouldBlock` clears the socket's write readiness and
            // the next `poll_write_ready` waits for the kernel's wake-up (unless one came
            // meanwhile: tokio then keeps the readiness, and the loop looks again).
            match this
                .tcp
                .try_io(Interest::WRITABLE, || room(fd, lowat, buf.len()))
            {
                Ok((n, unsent)) => {
                    this.unsent_at_most = unsent;
                    return this.write_counted(cx, &buf[..n.clamp(1, buf.len())]);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_shutdown(cx)
    }
}

impl AsyncRead for Paced {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_read(cx, buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Over loopback, with a reader that stops reading: the plain socket takes far more than
    /// its mark unsent; the paced one stays within the mark, and everything written arrives
    /// once the reader reads again.
    #[tokio::test(flavor = "current_thread")]
    async fn a_paced_socket_keeps_its_unsent_bytes_within_the_mark() {
        const MARK: u32 = 16 * 1024;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let held = |paced: bool| {
            let listener = &listener;
            async move {
                let tcp = TcpStream::connect(addr).await.unwrap();
                let (mut peer, _) = listener.accept().await.unwrap();
                let mut w = Paced::new(tcp, if paced { MARK } else { 0 });
                w.adapt = false;
                if !paced {
                    crate::set_notsent_lowat(&w.tcp, MARK);
                }
                let chunk = vec![7u8; 4096];
                let mut written = 0usize;
                let mut max_unsent = 0u32;
                // Write until the socket stops taking data for 200 ms.
                loop {
                    let r = tokio::time::timeout(Duration::from_millis(200), w.write(&chunk)).await;
                    match r {
                        Ok(Ok(n)) => written += n,
                        Ok(Err(e)) => panic!("write: {e}"),
                        Err(_) => break,
                    }
                    let u = unsent_bytes(w.tcp.as_raw_fd()).unwrap();
                    max_unsent = max_unsent.max(u);
                }
                // Everything written arrives.
                let reader = tokio::spawn(async move {
                    let mut got = 0usize;
                    let mut buf = vec![0u8; 65536];
                    while got < written {
                        let n = peer.read(&mut buf).await.unwrap();
                        assert!(n > 0, "the stream ended early");
                        got += n;
                    }
                    got
                });
                // The writer's pending bytes drain as the reader reads.
                w.flush().await.unwrap();
                assert_eq!(reader.await.unwrap(), written);
                max_unsent
            }
        };
        let plain = held(false).await;
        let paced = held(true).await;
        assert!(paced <= MARK, "paced: {paced} bytes unsent, mark {MARK}");
        assert!(
            plain > 2 * MARK,
            "the plain socket held only {plain} bytes unsent: the test shows nothing"
        );
    }
}
