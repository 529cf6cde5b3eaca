//! The forwarder's I/O: the pure `labnet::forwarder` between the hosts' TUN devices, with a
//! capture of every interface (both directions, as `tcpdump` on that interface would see them)
//! and a log of every link event. A capture or log that cannot be written (a full disk) stops
//! with a warning; the network goes on.

use std::os::fd::{AsRawFd, RawFd};

use anyhow::Result;
use labnet::forwarder::{self, DirInfo};
use labnet::run_dir::{CaptureLimits, RunDir};
use labnet::spec::LabConfig;
use link::LinkParams;
use wire::Instant;

use crate::netns::HostNs;
use crate::output::{self, EngineSummary, LinkLog, Pcap, Reserve, RotatingFile, Summary};
use crate::sys;

/// The largest packet a TUN device hands us (an IPv4/IPv6 datagram is at most 64 KiB).
const MAX_PACKET: usize = 65_536;
/// Packets read from one interface per loop turn before the others get a go.
const READ_BURST: usize = 64;
/// Bytes a packet may grow by in translation: IPv4 → IPv6 header (20) plus a fragment header (8).
const TRANSLATION_HEADROOM: usize = 28;
/// Packet buffers kept for reuse once written into a host, so that reading a packet does not
/// allocate; beyond this many the rest are freed.
const POOL_BUFFERS: usize = 4096;

/// A host interface's device and capture.
pub struct IfaceRt {
    pub fd: RawFd,
    pcap: Option<Pcap>,
}

pub struct Forwarder {
    core: forwarder::Forwarder,
    pub ifaces: Vec<IfaceRt>,
    logs: Vec<Option<LinkLog>>,
    /// Room on the captures' disk, given back when one of them fails.
    reserve: Option<Reserve>,
    /// Captures and logs stopped by a failed write, in words.
    warnings: Vec<String>,
    /// The latest `now` the network was run to.
    last_now: Instant,
    real_start_ns: u64,
    buf: Vec<u8>,
    /// Buffers of packets already written, for the next packets read.
    pool: Vec<Vec<u8>>,
    /// Writes into a TUN device that failed (the host's interface was gone or full).
    pub write_errors: u64,
    pub packets_read: u64,
    /// How late each packet was written into its host: actual minus scheduled time.
    pub lateness: link::stats::DelayHistogram,
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
        let mut ifaces = Vec::new();
        for (h, ns) in cfg.hosts.iter().zip(hosts) {
            for (ii, iface) in h.interfaces.iter().enumerate() {
                let pcap = match out_dir {
                    Some(d) => Some(output::open_pcap(&d.capture(&h.name, &iface.name), limits)?),
                    None => None,
                };
                ifaces.push(IfaceRt {
                    fd: ns.tuns[ii].as_raw_fd(),
                    pcap,
                });
            }
        }
        let mut logs = Vec::new();
        for d in &core.dirs {
            logs.push(match out_dir {
                Some(o) => Some(LinkLog::create(&o.link_log(&d.link, d.side), limits)?),
                None => None,
            });
        }
        Ok(Forwarder {
            core,
            ifaces,
            logs,
            reserve: out_dir.map(Reserve::take),
            warnings: Vec::new(),
            last_now: Instant::ZERO,
            real_start_ns,
            buf: vec![0; MAX_PACKET],
            pool: Vec::new(),
            write_errors: 0,
            packets_read: 0,
            lateness: Default::default(),
        })
    }

    /// The link directions, in configuration order.
    pub fn dirs(&self) -> &[DirInfo] {
        &self.core.dirs
    }

    /// Reads what interface `i` has sent, up to a burst, and feeds it to the network at `now`.
    /// Returns true when more may be waiting.
    pub fn read_iface(&mut self, i: usize, now: Instant) -> std::io::Result<bool> {
        for _ in 0..READ_BURST {
            let Some(n) = sys::read_packet(self.ifaces[i].fd, &mut self.buf)? else {
                self.flush(now);
                return Ok(false);
            };
            // Room for the 20 bytes an IPv4 header grows by in translation to IPv6 (and an
            // IPv6 fragment header), so that the buffer can be recycled by the translator.
            let mut data = self
                .pool
                .pop()
                .unwrap_or_else(|| Vec::with_capacity(n + TRANSLATION_HEADROOM));
            data.clear();
            data.extend_from_slice(&self.buf[..n]);
            self.packets_read += 1;
            if let Some(p) = &mut self.ifaces[i].pcap {
                if let Err(e) = p.write(self.real_start_ns + now.as_nanos(), &data) {
                    let path = p.file().path().to_path_buf();
                    self.stop_captures(&path, &e, now);
                }
            }
            self.core.handle_packet(now, i, data);
        }
        self.flush(now);
        Ok(true)
    }

    /// Runs the network up to `now` and writes what arrived into the hosts.
    pub fn poll(&mut self, now: Instant) {
        self.flush(now);
    }

    /// Writes what reached the hosts into their TUN devices, and the link events into the logs.
    fn flush(&mut self, now: Instant) {
        while let Some(t) = self.core.poll_transmit(now) {
            let iface = &mut self.ifaces[t.iface];
            self.lateness.record(now - t.at);
            let mut failed = None;
            if let Some(pc) = &mut iface.pcap {
                if let Err(e) = pc.write(self.real_start_ns + now.as_nanos(), &t.data) {
                    failed = Some((pc.file().path().to_path_buf(), e));
                }
            }
            if sys::write_packet(iface.fd, &t.data).is_err() {
                self.write_errors += 1;
            }
            if let Some((path, e)) = failed {
                self.stop_captures(&path, &e, now);
            }
            if self.pool.len() < POOL_BUFFERS {
                self.pool.push(t.data);
            }
        }
        self.log_events(now);
        self.last_now = now;
    }

    /// Writes the link events into the logs.
    fn log_events(&mut self, now: Instant) {
        while let Some((l, e)) = self.core.poll_event() {
            if let Some(log) = &mut self.logs[l] {
                if let Err(err) = log.write(&e) {
                    let path = log.file().path().to_path_buf();
                    self.stop_captures(&path, &err, now);
                }
            }
        }
    }

    /// Every capture and link log.
    fn files(&mut self) -> impl Iterator<Item = &mut RotatingFile> {
        let pcaps = self.ifaces.iter_mut().filter_map(|i| i.pcap.as_mut());
        let logs = self.logs.iter_mut().flatten();
        pcaps.map(Pcap::file).chain(logs.map(LinkLog::file))
    }

    /// Writing `path` failed with `e` at `now`: the disk is full or broken, so every capture
    /// and log stops (what they had buffered is dropped), the reserve is given back (room for
    /// summary.json), and the warning goes to stderr at once and to summary.json at the end.
    fn stop_captures(&mut self, path: &std::path::Path, e: &std::io::Error, now: Instant) {
        for f in self.files() {
            f.stop();
        }
        if let Some(r) = &mut self.reserve {
            r.release();
        }
        let w = format!(
            "captures and link logs stopped at {:.3} s: writing {}: {e}; the lab and its \
             programs went on",
            now.as_secs_f64(),
            path.display()
        );
        eprintln!("latencylab: warning: {w}");
        self.warnings.push(w);
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
    }

    /// Flushes captures and logs and returns the summary.
    pub fn finish(&mut self) -> Result<Summary> {
        let now = self.last_now;
        self.log_events(now);
        let mut failed = None;
        for f in self.files() {
            if let Err(e) = f.flush() {
                failed = Some((f.path().to_path_buf(), e));
                break;
            }
        }
        if let Some((path, e)) = failed {
            self.stop_captures(&path, &e, now);
        }
        Ok(Summary {
            links: self.core.link_summaries(),
            no_route: self.core.no_route(),
            engine: EngineSummary {
                packets: self.packets_read,
                delivery_lateness_ms: self.lateness.percentiles().into(),
                write_errors: self.write_errors,
                cpu_s: sys::cpu_seconds(),
                // Measured by the loop, which fills them in.
                longest_stall_ms: 0.0,
                longest_stall_at_s: 0.0,
                host_tx_dropped: Default::default(),
            },
            nat64: self.core.nat64_summary(),
            warnings: self.warnings.clone(),
        })
    }
}
