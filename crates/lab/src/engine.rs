//! The forwarder's I/O: the pure `labnet::forwarder` between the hosts' TUN devices, with a
//! capture of every interface (both directions, as `tcpdump` on that interface would see them)
//! and a log of every link event, handed to their writer thread (`sinks::Captures`). A capture
//! or log that cannot be written (a full disk) stops with a warning; the network goes on.

use std::os::fd::{AsRawFd, RawFd};

use anyhow::Result;
use labnet::forwarder::{self, DirInfo};
use labnet::run_dir::{CaptureLimits, RunDir};
use labnet::spec::LabConfig;
use link::LinkParams;
use wire::gso::{self, Coalescer, VnetHdr, Whole, VNET_HDR_LEN, VNET_HDR_NONE};
use wire::Instant;

use crate::netns::HostNs;
use crate::output::{Captures, EngineSummary, FileId, Opening, Reserve, Summary};
use crate::sys;

/// The largest read from a TUN device: a virtio header and an IPv4/IPv6 datagram (at most
/// 64 KiB, an IPv6 header more).
const MAX_PACKET: usize = VNET_HDR_LEN + 65_536 + 40;
/// Packets read from one interface per loop turn before the others get a go.
const READ_BURST: usize = 64;
/// Bytes a packet may grow by in translation: IPv4 → IPv6 header (20) plus a fragment header (8).
const TRANSLATION_HEADROOM: usize = 28;
/// Packet buffers kept for reuse once written into a host, so that reading a packet does not
/// allocate; beyond this many the rest are freed.
const POOL_BUFFERS: usize = 4096;
/// Buffers of [`MAX_PACKET`] bytes kept for reuse: each super-packet carried whole is read
/// into one and travels in it.
const BIG_BUFFERS: usize = 256;

/// A host interface's device and capture.
pub struct IfaceRt {
    pub fd: RawFd,
    pcap: Option<FileId>,
    /// Each packet read or written carries a `virtio_net_hdr` (the device has offloads).
    vnet: bool,
    /// Consecutive TCP segments of one flow written together go in as one super-packet.
    coalesce: bool,
}

/// A buffer from `pool` (or a new one) holding `bytes`, with room for the bytes a packet may
/// grow by in translation, so that the translator can reuse it.
fn take_pooled(pool: &mut Vec<Vec<u8>>, bytes: &[u8]) -> Vec<u8> {
    let mut data = pool
        .pop()
        .unwrap_or_else(|| Vec::with_capacity(bytes.len() + TRANSLATION_HEADROOM));
    data.clear();
    data.extend_from_slice(bytes);
    data
}

pub struct Forwarder {
    core: forwarder::Forwarder,
    pub ifaces: Vec<IfaceRt>,
    logs: Vec<Option<FileId>>,
    /// The captures and link logs, with `-o`.
    captures: Option<Captures>,
    /// What went wrong without stopping the lab, in words.
    warnings: Vec<String>,
    /// The latest `now` the network was run to.
    last_now: Instant,
    buf: Vec<u8>,
    /// The virtio header and the packet of the last read from a device with offloads (the
    /// packet's buffer of [`MAX_PACKET`] bytes' capacity).
    vnet_hdr: [u8; VNET_HDR_LEN],
    packet: Vec<u8>,
    /// Super-packets may cross the lab whole ([`Forwarder::build`]).
    whole: bool,
    /// Buffers of [`MAX_PACKET`] bytes' capacity, for the next reads.
    big: Vec<Vec<u8>>,
    /// Where a super-packet's segments are built, one at a time.
    scratch: Vec<u8>,
    /// The segments of the last super-packet read, in order.
    segments: Vec<Vec<u8>>,
    /// Buffers of packets already written, for the next packets read.
    pool: Vec<Vec<u8>>,
    /// Packets read with a virtio header that could not be cut into datagrams (dropped).
    pub offload_errors: u64,
    coalescer: Coalescer,
    /// Reads from and writes into the TUN devices.
    reads: u64,
    writes: u64,
    /// Writes into a TUN device that failed (the host's interface was gone or full).
    pub write_errors: u64,
    pub packets_read: u64,
    /// How far from its time each packet was written into its host: actual minus scheduled
    /// time, or scheduled minus actual for a packet written early.
    pub lateness: link::stats::DelayHistogram,
    /// The largest delivery error since the live view last took it, ns.
    pub late_max_ns: u64,
    /// How far ahead of its time a packet may be delivered (the loop's, reported here).
    precision: labnet::lifecycle::Precision,
    /// A host handed over a TCP packet with a wrong checksum of its own: from then on the
    /// coalescer sums every segment's ([`Forwarder::trust_checksums`]).
    host_checksum_bad: bool,
}

/// Whether `p`, a datagram as its host sent it, is not TCP or carries a correct TCP checksum.
fn tcp_checksum_whole(p: &[u8]) -> bool {
    let (l4, proto) = match p.first().map(|b| b >> 4) {
        Some(4) if p.len() >= 20 => (usize::from(p[0] & 0x0f) * 4, p[9]),
        Some(6) if p.len() >= 40 => (40, p[6]),
        _ => return true,
    };
    proto != 6 || gso::transport_checksum_ok(p, l4, 6)
}

impl Forwarder {
    /// Builds the network for `cfg` over the hosts' TUN devices. With `out_dir`, every
    /// interface gets a pcap and every link direction a log.
    pub fn build(
        cfg: &LabConfig,
        hosts: &[HostNs],
        out_dir: Option<&RunDir>,
        limits: CaptureLimits,
        real_start_ns: u64,
    ) -> Result<Forwarder> {
        let core = forwarder::Forwarder::new(cfg, out_dir.is_some())?;
        // The files are created here, so that one that cannot be is an error of the start.
        let mut opening = out_dir.map(|d| (Opening::new(limits), d));
        let mut ifaces = Vec::new();
        for (h, ns) in cfg.hosts.iter().zip(hosts) {
            for (ii, iface) in h.interfaces.iter().enumerate() {
                let pcap = match &mut opening {
                    Some((o, d)) => Some(o.pcap(&d.capture(&h.name, &iface.name))?),
                    None => None,
                };
                ifaces.push(IfaceRt {
                    fd: ns.tuns[ii].as_raw_fd(),
                    pcap,
                    vnet: sys::tun_offload() != sys::Offload::Off,
                    coalesce: matches!(
                        sys::tun_offload(),
                        sys::Offload::Coalesce | sys::Offload::Full
                    ),
                });
            }
        }
        let mut logs = Vec::new();
        for dir in &core.dirs {
            logs.push(match &mut opening {
                Some((o, d)) => Some(o.log(&d.link_log(&dir.link, dir.side))?),
                None => None,
            });
        }
        let captures = match opening {
            Some((o, d)) => Some(o.start(Reserve::take(d), real_start_ns)?),
            None => None,
        };
        let mut f = Forwarder {
            core,
            ifaces,
            logs,
            captures,
            warnings: Vec::new(),
            last_now: Instant::ZERO,
            buf: vec![0; MAX_PACKET],
            vnet_hdr: [0; VNET_HDR_LEN],
            packet: Vec::with_capacity(MAX_PACKET),
            whole: false,
            big: Vec::new(),
            scratch: Vec::new(),
            segments: Vec::new(),
            pool: Vec::new(),
            offload_errors: 0,
            coalescer: Coalescer::default(),
            reads: 0,
            writes: 0,
            write_errors: 0,
            packets_read: 0,
            lateness: Default::default(),
            late_max_ns: 0,
            precision: cfg.precision,
            host_checksum_bad: false,
        };
        f.trust_checksums();
        // A super-packet read from a host crosses the lab whole, without being cut into its
        // segments and joined again, when the network can carry it so (no translation, no
        // link log) and nothing here needs its segments: no captures (which show the
        // datagrams as the wire carries them), and devices that take super-packets in (full
        // offloads; `LATENCYLAB_OFFLOAD=coalesce` cuts them all). Each link still cuts one it
        // would treat segment by segment.
        f.whole = sys::tun_offload() == sys::Offload::Full
            && f.captures.is_none()
            && f.core.carries_whole()
            && f.ifaces.iter().all(|i| i.coalesce);
        Ok(f)
    }

    /// Lets the coalescer take segments' TCP checksums as correct when they must be: every
    /// segment it sees was either cut by `gso::segment` (which computes each checksum whole)
    /// or sent by a host whose checksums have all verified so far, and no link direction
    /// corrupts packets (a flipped bit must reach the host with its bad checksum, so with
    /// corruption anywhere each segment is summed). Summing each segment again was 14 % of
    /// the engine's CPU at unlimited rates (docs/PERFORMANCE.md).
    fn trust_checksums(&mut self) {
        let corrupting =
            (0..self.core.dirs.len()).any(|d| self.core.params(d).impair.corrupt > 0.0);
        self.coalescer
            .trust_checksums(!corrupting && !self.host_checksum_bad);
    }

    /// The link directions, in configuration order.
    pub fn dirs(&self) -> &[DirInfo] {
        &self.core.dirs
    }

    /// Reads what interface `i` has sent, up to a burst, and feeds it to the network at `now`
    /// (the clock's time), or at the time the network was last run to if that is later (the
    /// loop runs it a little ahead of the clock, see [`Forwarder::poll`]). Returns true when
    /// more may be waiting.
    ///
    /// Every packet after the first is taken at `clock()`, read again: one the host sent while
    /// the burst's earlier packets were handled (a capture's write into a full buffer can take
    /// milliseconds) would otherwise be dated back to the burst's start and reach its
    /// destination sooner than the link allows, faster than light in the captures' terms.
    pub fn read_iface(
        &mut self,
        i: usize,
        real: Instant,
        clock: impl Fn() -> Instant,
    ) -> std::io::Result<bool> {
        let mut now = real.max(self.last_now);
        for k in 0..READ_BURST {
            if k > 0 {
                now = clock().max(now);
            }
            if self.ifaces[i].vnet {
                let fd = self.ifaces[i].fd;
                let Some(n) = sys::read_packet_vnet(fd, &mut self.vnet_hdr, &mut self.packet)?
                else {
                    self.flush(now, real);
                    return Ok(false);
                };
                self.reads += 1;
                if self.take_whole(i, n, now) {
                    continue;
                }
                self.cut(i, n, now);
                let mut segments = std::mem::take(&mut self.segments);
                for data in segments.drain(..) {
                    self.take_packet(i, now, data);
                }
                self.segments = segments;
            } else {
                let Some(n) = sys::read_packet(self.ifaces[i].fd, &mut self.buf)? else {
                    self.flush(now, real);
                    return Ok(false);
                };
                self.reads += 1;
                let data = take_pooled(&mut self.pool, &self.buf[..n]);
                self.take_packet(i, now, data);
            }
        }
        self.flush(now, real);
        Ok(true)
    }

    /// Sends the super-packet just read from interface `i` (`n` bytes with its header) into
    /// the network whole, in the buffer it was read into, if it may cross so; false when it is
    /// to be cut.
    fn take_whole(&mut self, i: usize, n: usize, now: Instant) -> bool {
        if !self.whole || n < VNET_HDR_LEN {
            return false;
        }
        let Ok(hdr) = VnetHdr::parse(&self.vnet_hdr) else {
            return false;
        };
        let Some(whole) = Whole::of(&hdr, &self.packet) else {
            return false;
        };
        // One that a link on its way would cut is cut here, into pooled buffers.
        if !self.core.path_carries_whole(i, &self.packet) {
            return false;
        }
        let next = self
            .big
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(MAX_PACKET));
        let data = std::mem::replace(&mut self.packet, next);
        self.packets_read += u64::from(whole.segments);
        self.core.handle_whole(now, i, data, whole);
        true
    }

    /// Cuts the `n` bytes read from interface `i` (a virtio header and a packet, maybe a
    /// super-packet) into the datagrams the host would have sent, into `self.segments`. One
    /// that cannot be cut is dropped, counted, and the first such named in a warning.
    fn cut(&mut self, i: usize, n: usize, now: Instant) {
        let head = &self.vnet_hdr[..n.min(VNET_HDR_LEN)];
        let packet = &mut self.packet[..];
        let pool = &mut self.pool;
        let segments = &mut self.segments;
        let mut host_bad = self.host_checksum_bad;
        let r = VnetHdr::parse(head).and_then(|hdr| {
            // A packet with neither offload carries its host's own checksum: one wrong ends
            // the coalescer's trust before the packet can reach it.
            if !host_bad
                && hdr.gso_type == gso::GSO_NONE
                && hdr.flags & gso::F_NEEDS_CSUM == 0
                && !tcp_checksum_whole(packet)
            {
                host_bad = true;
            }
            gso::segment(&hdr, packet, &mut self.scratch, |s| {
                segments.push(take_pooled(pool, s));
            })
        });
        if host_bad && !self.host_checksum_bad {
            self.host_checksum_bad = true;
            self.trust_checksums();
        }
        if let Err(e) = r {
            self.segments.clear();
            self.offload_errors += 1;
            if self.offload_errors == 1 {
                let w = format!(
                    "a packet of {} bytes from {}'s {} could not be cut into datagrams at \
                     {:.3} s: {e}; it and any like it were dropped",
                    n.saturating_sub(VNET_HDR_LEN),
                    self.core.ifaces[i].host,
                    self.core.ifaces[i].iface,
                    now.as_secs_f64()
                );
                eprintln!("latencylab: warning: {w}");
                self.warnings.push(w);
            }
        }
    }

    /// Captures a datagram sent by interface `i` and feeds it to the network at `now`.
    fn take_packet(&mut self, i: usize, now: Instant, data: Vec<u8>) {
        self.packets_read += 1;
        if let (Some(c), Some(f)) = (&mut self.captures, self.ifaces[i].pcap) {
            c.pcap(f, now, &data);
        }
        self.core.handle_packet(now, i, data);
    }

    /// Runs the network up to `now` and writes what arrived into the hosts. `now` may be ahead
    /// of `real`, the clock's time: the packets due in between are written early, and their
    /// delivery error counted from `real`.
    pub fn poll(&mut self, now: Instant, real: Instant) {
        self.flush(now.max(self.last_now), real);
    }

    /// Writes what reached the hosts by `now` into their TUN devices, and the link events into
    /// the logs; `real` is the clock's time, which may be behind `now`.
    fn flush(&mut self, now: Instant, real: Instant) {
        // The interface whose super-packet `coalescer` is building: segments due by the same
        // `now`, consecutive and of one flow, go into the host with one write.
        let mut open = None;
        while let Some(t) = self.core.poll_transmit(now) {
            // Early or late, the error of a delivery is its distance from its time.
            let error = if real >= t.at {
                real - t.at
            } else {
                t.at - real
            };
            self.late_max_ns = self.late_max_ns.max(error.as_nanos() as u64);
            if let Some(w) = t.whole {
                // Its segments, each delivered this late, after what is being joined.
                self.lateness
                    .record_nanos_times(wire::time::duration_nanos(error), u64::from(w.segments));
                if let Some(j) = open.take() {
                    self.write_coalesced(j);
                }
                let fd = self.ifaces[t.iface].fd;
                if sys::write_packet_vnet(fd, &w.hdr.emit(), &t.data).is_err() {
                    self.write_errors += u64::from(w.segments);
                }
                self.writes += 1;
                self.recycle(t.data);
                continue;
            }
            self.lateness.record(error);
            if let (Some(c), Some(f)) = (&mut self.captures, self.ifaces[t.iface].pcap) {
                c.pcap(f, now, &t.data);
            }
            if self.ifaces[t.iface].coalesce {
                if open == Some(t.iface) && self.coalescer.push(&t.data) {
                    self.recycle(t.data);
                    continue;
                }
                if let Some(j) = open.take() {
                    self.write_coalesced(j);
                }
                if self.coalescer.push(&t.data) {
                    open = Some(t.iface);
                    self.recycle(t.data);
                    continue;
                }
            }
            let iface = &self.ifaces[t.iface];
            let written = if iface.vnet {
                sys::write_packet_vnet(iface.fd, &VNET_HDR_NONE, &t.data)
            } else {
                sys::write_packet(iface.fd, &t.data)
            };
            if written.is_err() {
                self.write_errors += 1;
            }
            self.writes += 1;
            self.recycle(t.data);
        }
        if let Some(j) = open {
            self.write_coalesced(j);
        }
        self.log_events(now);
        self.last_now = now;
    }

    /// Writes what the coalescer built into interface `i`'s host.
    fn write_coalesced(&mut self, i: usize) {
        let fd = self.ifaces[i].fd;
        let segments = self.coalescer.len() as u64;
        let mut failed = false;
        self.coalescer.take(|hdr, data| {
            failed = sys::write_packet_vnet(fd, &hdr.emit(), data).is_err();
        });
        if failed {
            self.write_errors += segments;
        }
        self.writes += 1;
    }

    /// Keeps a written packet's buffer for a packet to come.
    fn recycle(&mut self, data: Vec<u8>) {
        if data.capacity() >= MAX_PACKET {
            if self.big.len() < BIG_BUFFERS {
                self.big.push(data);
            }
        } else if self.pool.len() < POOL_BUFFERS {
            self.pool.push(data);
        }
    }

    /// Writes the link events into the logs.
    fn log_events(&mut self, now: Instant) {
        while let Some((l, e)) = self.core.poll_event() {
            if let (Some(c), Some(f)) = (&mut self.captures, self.logs[l]) {
                c.log(f, now, &e);
            }
        }
    }

    /// The counters of every link direction at `now`, for the live view; the delivery error
    /// since the last snapshot starts again from zero.
    pub fn live_snapshot(
        &mut self,
        now: Instant,
        dirs: &std::sync::Arc<Vec<(String, String)>>,
        last: bool,
    ) -> labnet::live::Snapshot {
        labnet::live::Snapshot {
            at: now,
            dirs: dirs.clone(),
            links: self.core.live_counts(),
            late_max_ns: std::mem::take(&mut self.late_max_ns),
            last,
        }
    }

    /// Each link direction's name and side, in snapshot order.
    pub fn live_dirs(&self) -> Vec<(String, String)> {
        self.core.live_dirs()
    }

    pub fn next_wakeup(&self) -> Option<Instant> {
        self.core.next_wakeup()
    }

    /// A link direction's current parameters.
    pub fn params(&self, dir: usize) -> &LinkParams {
        self.core.params(dir)
    }

    /// Applies new parameters to a link direction at `now`.
    pub fn set_params(&mut self, now: Instant, dir: usize, params: LinkParams) {
        self.core.set_params(now, dir, params);
        self.trust_checksums();
    }

    /// Writes out and closes the captures and logs, and returns the summary.
    pub fn finish(&mut self) -> Result<Summary> {
        self.log_events(self.last_now);
        let captures = self
            .captures
            .as_mut()
            .map(Captures::finish)
            .unwrap_or_default();
        self.warnings.extend(captures.warnings);
        Ok(Summary {
            links: self.core.link_summaries(),
            no_route: self.core.no_route(),
            engine: EngineSummary {
                packets: self.packets_read,
                precision_ms: self.precision.as_millis_f64(),
                delivery_lateness_ms: self.lateness.percentiles().into(),
                write_errors: self.write_errors,
                cpu_s: sys::cpu_seconds(),
                capture_wait_ms: captures.wait.total.as_secs_f64() * 1e3,
                capture_waits: captures.wait.count,
                capture_writer_cpu_s: captures.writer_cpu_s,
                // Measured by the loop, which fills them in.
                longest_stall_ms: 0.0,
                longest_stall_at_s: 0.0,
                stalls: Vec::new(),
                stalls_over_1ms: 0,
                stalls_over_1ms_total_ms: 0.0,
                stalls_unlisted_max_ms: 0.0,
                clock_monotonic_start_ns: 0,
                host_tx_dropped: Default::default(),
                reads: self.reads,
                writes: self.writes,
                offload_errors: self.offload_errors,
            },
            nat64: self.core.nat64_summary(),
            warnings: self.warnings.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};
    use wire::build::{Ip, Tcp};

    #[test]
    fn a_hosts_own_tcp_checksum_is_checked_and_other_packets_pass() {
        let v4 = Ip::v4(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
        let v6 = Ip::v6(Ipv6Addr::LOCALHOST, Ipv6Addr::UNSPECIFIED);
        for ip in [v4, v6] {
            let mut p = ip.tcp(&Tcp::new(1, 2, 3), b"payload");
            assert!(tcp_checksum_whole(&p));
            let last = p.len() - 1;
            p[last] ^= 1;
            assert!(!tcp_checksum_whole(&p), "a flipped bit");
            let mut u = ip.udp(1, 2, b"payload");
            let last = u.len() - 1;
            u[last] ^= 1;
            assert!(tcp_checksum_whole(&u), "not TCP: not the coalescer's");
        }
        assert!(tcp_checksum_whole(&[]));
    }
}
