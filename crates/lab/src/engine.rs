//! The forwarder: the lab's network of links built from the configuration, fed with packets
//! read from the hosts' TUN devices and writing the packets that reach a host into its TUN
//! device, capturing both directions as `tcpdump` on that interface would see them.
//!
//! Routing follows the tree of links: for every host interface address, each node's route points
//! at the link that leads towards it (found by a breadth-first walk from the interface). Anything
//! else is dropped at the first node: nothing leaves the lab.
//!
//! In a NAT64 lab the translator and the DNS64 are two more endpoints at one node, routed the
//! same way (Pref64::/n and the pool address to the translator, the DNS64's address to it);
//! what they return is injected at their node at the instant the packet reached them.

use std::collections::VecDeque;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, RawFd};

use anyhow::Result;
use link::net::{Hop, LinkId, Network, NodeId};
use link::{Event, Link, LinkParams};
use wire::{Instant, Packet};

use crate::netns::HostNs;
use crate::output::{self, EngineSummary, LinkLog, LinkSummary, Pcap, Summary};
use crate::sys;
use crate::translator::{Role, Translator};
use labnet::run_dir::RunDir;
use labnet::spec::{Attach, LabConfig, Side, DEFAULT_MTU};

/// The largest packet a TUN device hands us (an IPv4/IPv6 datagram is at most 64 KiB).
const MAX_PACKET: usize = 65_536;
/// Packets read from one interface per loop turn before the others get a go.
const READ_BURST: usize = 64;
/// Rounds of translate-and-forward within one delivery: a packet meets the translator once
/// each way, so more would be a routing loop.
const MAX_TRANSLATION_ROUNDS: usize = 8;
/// Bytes a packet may grow by in translation: IPv4 → IPv6 header (20) plus a fragment header (8).
const TRANSLATION_HEADROOM: usize = 28;

/// A host interface as the forwarder sees it.
pub struct IfaceRt {
    pub host: String,
    pub iface: String,
    pub fd: RawFd,
    pub node: NodeId,
    pcap: Option<Pcap>,
}

/// A link direction's identity, for logs and the summary.
pub struct DirInfo {
    pub link: String,
    pub direction: &'static str,
    pub queue: String,
    /// Index of the link in the configuration.
    pub link_index: usize,
}

pub struct Forwarder {
    pub net: Network,
    pub ifaces: Vec<IfaceRt>,
    pub dirs: Vec<DirInfo>,
    logs: Vec<Option<LinkLog>>,
    next_id: u64,
    real_start_ns: u64,
    buf: Vec<u8>,
    out: Vec<(usize, Instant, Packet)>,
    /// Writes into a TUN device that failed (the host's interface was gone or full).
    pub write_errors: u64,
    pub packets_read: u64,
    /// How late each packet was written into its host: actual minus scheduled time.
    pub lateness: link::stats::DelayHistogram,
    /// The NAT64 and DNS64 and their node; their endpoints follow the interfaces'.
    translator: Option<(Translator, NodeId)>,
}

/// Adds routes for `addrs` at `start` (to `hop`) and at every node reachable from it (to the
/// link leading back towards `start`).
fn route_towards(
    net: &mut Network,
    adj: &[Vec<(NodeId, LinkId)>],
    start: NodeId,
    addrs: &[(IpAddr, u8)],
    hop: Hop,
) {
    for (a, len) in addrs {
        net.add_route(start, *a, *len, hop);
    }
    let mut seen = vec![false; adj.len()];
    seen[start] = true;
    let mut q = VecDeque::from([start]);
    while let Some(n) = q.pop_front() {
        for &(m, _) in &adj[n] {
            if seen[m] {
                continue;
            }
            seen[m] = true;
            // The link from m back to n.
            let back = adj[m]
                .iter()
                .find(|(to, _)| *to == n)
                .expect("links come in pairs")
                .1;
            for (a, len) in addrs {
                net.add_route(m, *a, *len, Hop::Link(back));
            }
            q.push_back(m);
        }
    }
}

/// A seed for each link direction, derived from the lab's seed so that runs repeat.
fn dir_seed(lab_seed: u64, link: usize, dir: usize) -> u64 {
    // SplitMix64 finalizer over (seed, link, dir): nearby inputs give unrelated streams.
    let mut z = lab_seed ^ ((link as u64) << 1 | dir as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Forwarder {
    /// Builds the network for `cfg` over the hosts' TUN devices. With `out_dir`, every
    /// interface gets a pcap and every link direction a log.
    pub fn build(
        cfg: &LabConfig,
        hosts: &[HostNs],
        out_dir: Option<&RunDir>,
        real_start_ns: u64,
    ) -> Result<Forwarder> {
        let mut net = Network::new();
        let mut ifaces = Vec::new();
        let mut iface_node = Vec::new(); // (host index, iface index) → global iface index
        for (hi, (h, ns)) in cfg.hosts.iter().zip(hosts).enumerate() {
            for (ii, iface) in h.interfaces.iter().enumerate() {
                let node = net.add_node();
                let pcap = match out_dir {
                    Some(d) => Some(output::open_pcap(&d.capture(&h.name, &iface.name))?),
                    None => None,
                };
                ifaces.push(IfaceRt {
                    host: h.name.clone(),
                    iface: iface.name.clone(),
                    fd: ns.tuns[ii].as_raw_fd(),
                    node,
                    pcap,
                });
                iface_node.push(((hi, ii), ifaces.len() - 1));
            }
        }
        let router_nodes: Vec<NodeId> = cfg.routers.iter().map(|_| net.add_node()).collect();
        let node_of = |a: Attach| -> NodeId {
            match a {
                Attach::Iface(h, i) => {
                    let g = iface_node
                        .iter()
                        .find(|(k, _)| *k == (h, i))
                        .expect("validated")
                        .1;
                    ifaces[g].node
                }
                Attach::Router(r) => router_nodes[r],
            }
        };
        let mut adj: Vec<Vec<(NodeId, LinkId)>> =
            vec![Vec::new(); ifaces.len() + router_nodes.len()];
        let mut dirs = Vec::new();
        let mut logs = Vec::new();
        let now = Instant::ZERO;
        let mtu = cfg
            .hosts
            .iter()
            .map(|h| h.settings.mtu)
            .max()
            .unwrap_or(DEFAULT_MTU);
        for (li, l) in cfg.links.iter().enumerate() {
            let (na, nb) = (node_of(cfg.attach(&l.a)?), node_of(cfg.attach(&l.b)?));
            for (di, (side, d, to, from)) in
                [(Side::Up, &l.up, nb, na), (Side::Down, &l.down, na, nb)]
                    .into_iter()
                    .enumerate()
            {
                let name = side.name();
                let params = d.params.clone();
                let mut spec = d.queue.clone();
                // AQMs keep at least an MTU or two queued; the lab's largest MTU is theirs.
                spec.set_mtu(mtu as usize);
                let seed = dir_seed(cfg.seed, li, di);
                let mut link = Link::new(now, params, spec.build(seed), seed);
                // Only the link log reads an event's flow.
                link.set_event_detail(out_dir.is_some());
                let id = net.add_link(link, to);
                adj[from].push((to, id));
                dirs.push(DirInfo {
                    link: l.name.clone(),
                    direction: name,
                    queue: spec.to_string(),
                    link_index: li,
                });
                logs.push(match out_dir {
                    Some(o) => Some(LinkLog::create(&o.link_log(&l.name, side))?),
                    None => None,
                });
            }
        }
        // Routes: walk outwards from each interface; every node reached routes that interface's
        // addresses along the link it was reached through, reversed.
        for ((hi, ii), g) in &iface_node {
            let host = &cfg.hosts[*hi];
            let iface = &host.interfaces[*ii];
            let mut addrs = Vec::new();
            if host.has_ipv4() {
                addrs.push((IpAddr::V4(iface.ipv4), 32u8));
            }
            if host.has_ipv6() {
                addrs.push((IpAddr::V6(iface.ipv6), 128u8));
            }
            route_towards(&mut net, &adj, ifaces[*g].node, &addrs, Hop::Deliver(*g));
        }
        let translator = match &cfg.nat64 {
            None => None,
            Some(spec) => {
                let node = node_of(cfg.attach(&spec.at)?);
                let t = Translator::new(spec, cfg.dns_zone(), dir_seed(cfg.seed, usize::MAX, 0))?;
                let prefix: nat64::Prefix = spec
                    .prefix
                    .parse()
                    .map_err(|e| anyhow::anyhow!("nat64 prefix: {e}"))?;
                let nat_ep = ifaces.len();
                route_towards(
                    &mut net,
                    &adj,
                    node,
                    &[
                        (IpAddr::V6(prefix.addr()), prefix.len_bits()),
                        (IpAddr::V4(spec.pool4), 32),
                    ],
                    Hop::Deliver(nat_ep),
                );
                route_towards(
                    &mut net,
                    &adj,
                    node,
                    &[(IpAddr::V6(spec.dns), 128)],
                    Hop::Deliver(nat_ep + 1),
                );
                Some((t, node))
            }
        };
        Ok(Forwarder {
            net,
            ifaces,
            dirs,
            logs,
            next_id: 0,
            real_start_ns,
            buf: vec![0; MAX_PACKET],
            out: Vec::new(),
            write_errors: 0,
            packets_read: 0,
            lateness: Default::default(),
            translator,
        })
    }

    /// Reads what interface `i` has sent, up to a burst, and feeds it to the network at `now`.
    /// Returns true when more may be waiting.
    pub fn read_iface(&mut self, i: usize, now: Instant) -> std::io::Result<bool> {
        for _ in 0..READ_BURST {
            let Some(n) = sys::read_packet(self.ifaces[i].fd, &mut self.buf)? else {
                return Ok(false);
            };
            // Room for the 20 bytes an IPv4 header grows by in translation to IPv6 (and an
            // IPv6 fragment header), so that the buffer can be recycled by the translator.
            let mut data = Vec::with_capacity(n + TRANSLATION_HEADROOM);
            data.extend_from_slice(&self.buf[..n]);
            self.packets_read += 1;
            if let Some(p) = &mut self.ifaces[i].pcap {
                p.write(self.real_start_ns + now.as_nanos(), &data)?;
            }
            let id = self.next_id;
            self.next_id += 1;
            let logs = &mut self.logs;
            let mut obs = |l: LinkId, e: &Event| {
                if let Some(log) = &mut logs[l] {
                    let _ = log.write(e);
                }
            };
            self.net.inject(
                now,
                self.ifaces[i].node,
                Packet {
                    id,
                    ..Packet::new(data)
                },
                &mut self.out,
                &mut obs,
            );
        }
        self.deliver(now);
        Ok(true)
    }

    /// Runs the network up to `now` and writes what arrived into the hosts.
    pub fn poll(&mut self, now: Instant) {
        if let Some((t, _)) = &mut self.translator {
            if t.next_timeout().is_some_and(|d| d <= now) {
                t.expire(now);
            }
        }
        let logs = &mut self.logs;
        let mut obs = |l: LinkId, e: &Event| {
            if let Some(log) = &mut logs[l] {
                let _ = log.write(e);
            }
        };
        self.net.poll(now, &mut self.out, &mut obs);
        self.deliver(now);
    }

    /// Writes what reached the hosts into their TUN devices; what reached the translator or
    /// the DNS64 is handled and its result injected at their node, then the network runs again
    /// up to `now` for it.
    fn deliver(&mut self, now: Instant) {
        let mut batch = Vec::new();
        let mut replies = Vec::new();
        for _ in 0..MAX_TRANSLATION_ROUNDS {
            if self.out.is_empty() {
                return;
            }
            std::mem::swap(&mut batch, &mut self.out);
            let mut injected = false;
            for (e, at, p) in batch.drain(..) {
                if let Some(iface) = self.ifaces.get_mut(e) {
                    self.lateness.record(now - at);
                    if let Some(pc) = &mut iface.pcap {
                        let _ = pc.write(self.real_start_ns + now.as_nanos(), &p.data);
                    }
                    if sys::write_packet(iface.fd, &p.data).is_err() {
                        self.write_errors += 1;
                    }
                    continue;
                }
                let Some((t, node)) = &mut self.translator else {
                    continue;
                };
                let role = if e == self.ifaces.len() {
                    Role::Nat64
                } else {
                    Role::Dns64
                };
                t.handle(role, at, p.data, &mut replies);
                for data in replies.drain(..) {
                    let logs = &mut self.logs;
                    let mut obs = |l: LinkId, e: &Event| {
                        if let Some(log) = &mut logs[l] {
                            let _ = log.write(e);
                        }
                    };
                    let packet = Packet {
                        id: p.id,
                        ..Packet::new(data)
                    };
                    self.net.inject(at, *node, packet, &mut self.out, &mut obs);
                    injected = true;
                }
            }
            if injected {
                let logs = &mut self.logs;
                let mut obs = |l: LinkId, e: &Event| {
                    if let Some(log) = &mut logs[l] {
                        let _ = log.write(e);
                    }
                };
                self.net.poll(now, &mut self.out, &mut obs);
            }
        }
        // A loop between the translator and a route: count what is left as unroutable.
        self.net.no_route += self.out.len() as u64;
        self.out.clear();
    }

    pub fn next_wakeup(&self) -> Option<Instant> {
        let t = self.translator.as_ref().and_then(|(t, _)| t.next_timeout());
        match (self.net.next_wakeup(), t) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Applies new parameters to a link direction at `now`.
    pub fn set_params(&mut self, now: Instant, dir: LinkId, params: LinkParams) {
        let logs = &mut self.logs;
        let mut obs = |e: &Event| {
            if let Some(log) = &mut logs[dir] {
                let _ = log.write(e);
            }
        };
        self.net.link_mut(dir).set_params(now, params, &mut obs);
    }

    /// Flushes captures and logs and returns the summary.
    pub fn finish(&mut self) -> Result<Summary> {
        for i in &mut self.ifaces {
            if let Some(p) = &mut i.pcap {
                p.flush()?;
            }
        }
        for l in self.logs.iter_mut().flatten() {
            l.flush()?;
        }
        let links = self
            .dirs
            .iter()
            .enumerate()
            .map(|(i, d)| {
                LinkSummary::new(&d.link, d.direction, &d.queue, self.net.link(i).stats())
            })
            .collect();
        Ok(Summary {
            links,
            no_route: self.net.no_route,
            engine: EngineSummary {
                packets: self.packets_read,
                delivery_lateness_ms: self.lateness.percentiles().into(),
                write_errors: self.write_errors,
                cpu_s: sys::cpu_seconds(),
            },
            nat64: self.translator.as_ref().map(|(t, _)| t.summary()),
        })
    }
}
