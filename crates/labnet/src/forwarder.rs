//! The lab's forwarder as a state machine: the network of links built from a [`LabConfig`],
//! fed with the packets hosts send (`handle_packet`), giving back the packets that reach a
//! host (`poll_transmit`) and every link event (`poll_event`), and saying when it next has
//! something to do (`next_wakeup`). No devices, no clock: the real-time shell (`lab`) reads
//! and writes TUN devices around it, and [`crate::sim`] drives it in simulated time.
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

use link::net::{Hop, LinkId, Network, NodeId};
use link::{Event, Link, LinkParams};
use wire::{Instant, Packet};

use crate::clat::ClatPlan;
use crate::live;
use crate::run_dir::{ClatSummary, LinkSummary, Nat64Summary};
use crate::spec::{Attach, LabConfig, Side, UsageError, DEFAULT_MTU};
use crate::translator::{Role, Translator};

/// Rounds of translate-and-forward within one delivery: a packet meets the translator once
/// each way, so more would be a routing loop.
const MAX_TRANSLATION_ROUNDS: usize = 8;

/// A host interface as the forwarder sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Iface {
    pub host: String,
    pub iface: String,
    pub node: NodeId,
}

/// A link direction's identity, for logs and the summary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirInfo {
    pub link: String,
    pub side: Side,
    pub queue: String,
    /// Index of the link in the configuration.
    pub link_index: usize,
}

/// A packet that reached a host interface.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transmit {
    /// Index into [`Forwarder::ifaces`].
    pub iface: usize,
    /// When the links delivered it: the caller writes it at `now`, this late.
    pub at: Instant,
    pub data: Vec<u8>,
    /// A TCP super-packet that crossed the lab whole, to be written with this header.
    pub whole: Option<wire::gso::Whole>,
}

pub struct Forwarder {
    net: Network,
    /// Host interfaces in configuration order (hosts, then their interfaces).
    pub ifaces: Vec<Iface>,
    /// Link directions in configuration order (each link's up, then down).
    pub dirs: Vec<DirInfo>,
    next_id: u64,
    /// What the network delivered and the translator has not yet seen or the caller taken.
    out: Vec<(usize, Instant, Packet)>,
    transmit: VecDeque<Transmit>,
    /// Link events, kept only when asked for at build.
    events: VecDeque<(LinkId, Event)>,
    keep_events: bool,
    /// The NAT64 and DNS64 and their node; their endpoints follow the interfaces'.
    translator: Option<(Translator, NodeId)>,
    /// The CLATs, each between its host's interface and the link (464XLAT): what the host
    /// sends in IPv4 is translated before it enters the network, and what reaches the CLAT's
    /// IPv6 address is translated before the host gets it.
    clats: Vec<ClatRt>,
}

/// A CLAT at a host interface.
struct ClatRt {
    /// Index into [`Forwarder::ifaces`].
    iface: usize,
    /// Its IPv6 address's bytes, to tell its packets from the host's own.
    ipv6: [u8; 16],
    clat: nat64::Clat,
    summary: ClatSummary,
}

impl ClatRt {
    /// Whether `data` is an IPv6 packet for the CLAT rather than for its host.
    fn is_for(&self, data: &[u8]) -> bool {
        data.first().is_some_and(|b| b >> 4 == 6) && data.get(24..40) == Some(&self.ipv6[..])
    }

    fn summary(&self) -> ClatSummary {
        let s = self.clat.stats();
        ClatSummary {
            translated_4to6: s.translated_4to6,
            translated_6to4: s.translated_6to4,
            icmp_errors_translated: s.icmp_errors_translated,
            drops: nat64::DropReason::ALL
                .iter()
                .filter(|r| s.drops_of(**r) > 0)
                .map(|r| (r.name().to_string(), s.drops_of(*r)))
                .collect(),
            ..self.summary.clone()
        }
    }
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
    /// Builds the network for a validated `cfg`. With `keep_events`, every link event is
    /// kept for [`Forwarder::poll_event`] (and flows are parsed for it).
    pub fn new(cfg: &LabConfig, keep_events: bool) -> Result<Forwarder, UsageError> {
        let mut net = Network::new();
        let mut ifaces = Vec::new();
        let mut iface_node = Vec::new(); // (host index, iface index) → global iface index
        for (hi, h) in cfg.hosts.iter().enumerate() {
            for (ii, iface) in h.interfaces.iter().enumerate() {
                let node = net.add_node();
                ifaces.push(Iface {
                    host: h.name.clone(),
                    iface: iface.name.clone(),
                    node,
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
                let mut params = d.params.clone();
                if let Some(n) = &mut params.impair.narrow {
                    (n.router_v4, n.router_v6) = crate::spec::link_router_addrs(li);
                }
                let mut spec = d.queue.clone();
                // AQMs keep at least an MTU or two queued; the lab's largest MTU is theirs.
                spec.set_mtu(mtu as usize);
                let seed = dir_seed(cfg.seed, li, di);
                let mut link = Link::new(now, params, spec.build(seed), seed);
                // Only the link log reads an event's flow.
                link.set_event_detail(keep_events);
                let id = net.add_link(link, to);
                adj[from].push((to, id));
                dirs.push(DirInfo {
                    link: l.name.clone(),
                    side,
                    queue: spec.to_string(),
                    link_index: li,
                });
            }
        }
        let clat_plan = ClatPlan::of(cfg)?;
        let mut clats = Vec::new();
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
            let clat_host = clat_plan.as_ref().and_then(|p| {
                p.hosts
                    .iter()
                    .find(|c| c.host == *hi && *ii == 0)
                    .map(|c| (p, c))
            });
            if let Some((plan, c)) = clat_host {
                addrs.push((IpAddr::V6(c.ipv6), 128u8));
                let clat = nat64::Clat::new(plan.params(cfg, c), dir_seed(cfg.seed, *g, 7))
                    .map_err(|e| UsageError(format!("nat64: clat on '{}': {e}", host.name)))?;
                clats.push(ClatRt {
                    iface: *g,
                    ipv6: c.ipv6.octets(),
                    clat,
                    summary: ClatSummary {
                        host: host.name.clone(),
                        iface: iface.name.clone(),
                        ipv4: format!("{}/{}", c.ipv4, nat64::clat::HOST_PREFIX_LEN),
                        ipv6: c.ipv6.to_string(),
                        prefix: plan.prefix.to_string(),
                        prefix_source: plan.source.describe(),
                        ..ClatSummary::default()
                    },
                });
            }
            route_towards(&mut net, &adj, ifaces[*g].node, &addrs, Hop::Deliver(*g));
        }
        let translator = match &cfg.nat64 {
            None => None,
            Some(spec) => {
                let node = node_of(cfg.attach(&spec.at)?);
                let t = Translator::new(spec, cfg.dns_zone(), dir_seed(cfg.seed, usize::MAX, 0))?;
                let prefix = spec.prefix;
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
            next_id: 0,
            out: Vec::new(),
            transmit: VecDeque::new(),
            events: VecDeque::new(),
            keep_events,
            translator,
            clats,
        })
    }

    /// Whether [`Forwarder::handle_whole`] may carry super-packets whole: in a lab without a
    /// translator or a CLAT (which translate single datagrams) and without link logs (a line
    /// per packet). Each link decides again for itself (`link::Link`), cutting what it cannot
    /// carry whole.
    pub fn carries_whole(&self) -> bool {
        self.translator.is_none() && self.clats.is_empty() && !self.keep_events
    }

    /// Whether a super-packet `data` from host interface `iface` would reach its host whole
    /// (every link on its way carries it so): the caller cuts any other itself.
    pub fn path_carries_whole(&self, iface: usize, data: &[u8]) -> bool {
        self.carries_whole()
            && wire::packet::flow_key(data)
                .is_some_and(|k| self.net.carries_whole(self.ifaces[iface].node, k.dst))
    }

    /// A TCP super-packet `data` sent by host interface `iface` at `now`, standing for the
    /// segments `whole` describes: the network counts and times it as those segments and
    /// cuts it where a link would treat them apart; what reaches a host whole comes out of
    /// [`Forwarder::poll_transmit`] with its `whole`. In a lab that cannot carry it whole
    /// ([`Forwarder::carries_whole`]) it is cut here and each segment sent in turn.
    pub fn handle_whole(
        &mut self,
        now: Instant,
        iface: usize,
        mut data: Vec<u8>,
        whole: wire::gso::Whole,
    ) {
        if !self.carries_whole() {
            let mut segments = Vec::new();
            let mut scratch = Vec::new();
            let cut = wire::gso::segment(&whole.hdr, &mut data, &mut scratch, |s| {
                segments.push(s.to_vec())
            });
            if cut.is_ok() {
                for s in segments {
                    self.handle_packet(now, iface, s);
                }
                return;
            }
        }
        let packet = Packet {
            whole: Some(whole),
            ..Packet::new(data)
        };
        self.inject(now, iface, packet);
    }

    /// A packet sent by host interface `iface` at `now`.
    pub fn handle_packet(&mut self, now: Instant, iface: usize, data: Vec<u8>) {
        // An IPv4 packet from a host with a CLAT: translated on the host's side (a reply, an
        // ICMPv4 error from the CLAT, goes straight back to the host).
        let data = match self.clats.iter_mut().find(|c| c.iface == iface) {
            Some(c) if data.first().is_some_and(|b| b >> 4 == 4) => {
                let mut out = Vec::with_capacity(data.len() + 28);
                match c.clat.translate_4to6_into(now, &data, &mut out) {
                    nat64::Verdict::Forward => out,
                    nat64::Verdict::Reply => {
                        self.transmit.push_back(Transmit {
                            iface,
                            at: now,
                            data: out,
                            whole: None,
                        });
                        return;
                    }
                    nat64::Verdict::Drop(_) => return,
                }
            }
            _ => data,
        };
        self.inject(now, iface, Packet::new(data));
    }

    /// `packet`, numbered here, into the network at host interface `iface`'s node.
    fn inject(&mut self, now: Instant, iface: usize, packet: Packet) {
        let id = self.next_id;
        self.next_id += 1;
        let (events, keep) = (&mut self.events, self.keep_events);
        let mut obs = |l: LinkId, e: &Event| {
            if keep {
                events.push_back((l, e.clone()));
            }
        };
        self.net.inject(
            now,
            self.ifaces[iface].node,
            Packet { id, ..packet },
            &mut self.out,
            &mut obs,
        );
        self.deliver(now);
    }

    /// The next packet that has reached a host by `now`.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
        if self.transmit.is_empty() {
            self.advance(now);
        }
        self.transmit.pop_front()
    }

    /// The next link event (only when built with `keep_events`), with its link direction.
    pub fn poll_event(&mut self) -> Option<(LinkId, Event)> {
        self.events.pop_front()
    }

    /// When the network or the translator next has something to do.
    pub fn next_wakeup(&self) -> Option<Instant> {
        let t = self.translator.as_ref().and_then(|(t, _)| t.next_timeout());
        match (self.net.next_wakeup(), t) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Applies new parameters to a link direction at `now`.
    pub fn set_params(&mut self, now: Instant, dir: LinkId, params: LinkParams) {
        let (events, keep) = (&mut self.events, self.keep_events);
        let mut obs = |e: &Event| {
            if keep {
                events.push_back((dir, e.clone()));
            }
        };
        self.net.link_mut(dir).set_params(now, params, &mut obs);
    }

    /// A link direction's current parameters.
    pub fn params(&self, dir: LinkId) -> &LinkParams {
        self.net.link(dir).params()
    }

    /// Packets for addresses outside the lab, dropped at the first hop.
    pub fn no_route(&self) -> u64 {
        self.net.no_route
    }

    /// Each link direction's figures, in [`Forwarder::dirs`] order.
    pub fn link_summaries(&self) -> Vec<LinkSummary> {
        self.dirs
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let link = self.net.link(i);
                LinkSummary::new(
                    &d.link,
                    d.side.name(),
                    &d.queue,
                    link.params(),
                    link.stats(),
                )
            })
            .collect()
    }

    /// Each link direction's name and side, in the order of [`Forwarder::live_counts`].
    pub fn live_dirs(&self) -> Vec<(String, String)> {
        (self.dirs.iter())
            .map(|d| (d.link.clone(), d.side.name().to_string()))
            .collect()
    }

    /// Every link direction's counters now, for the live view.
    pub fn live_counts(&self) -> Vec<live::Counts> {
        (0..self.dirs.len())
            .map(|i| live::Counts::of(self.net.link(i)))
            .collect()
    }

    /// The translator's figures, in a NAT64 lab, with its CLATs'.
    pub fn nat64_summary(&self) -> Option<Nat64Summary> {
        self.translator.as_ref().map(|(t, _)| {
            let mut s = t.summary();
            s.clat = self.clats.iter().map(ClatRt::summary).collect();
            s
        })
    }

    /// Runs the network and the translator's timers up to `now`.
    fn advance(&mut self, now: Instant) {
        if let Some((t, _)) = &mut self.translator {
            if t.next_timeout().is_some_and(|d| d <= now) {
                t.expire(now);
            }
        }
        let (events, keep) = (&mut self.events, self.keep_events);
        let mut obs = |l: LinkId, e: &Event| {
            if keep {
                events.push_back((l, e.clone()));
            }
        };
        self.net.poll(now, &mut self.out, &mut obs);
        self.deliver(now);
    }

    /// Queues what reached the hosts for [`Forwarder::poll_transmit`]; what reached the
    /// translator or the DNS64 is handled and its result injected at their node, then the
    /// network runs again up to `now` for it.
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
                if e < self.ifaces.len() {
                    let mut data = p.data;
                    if let Some(c) = self
                        .clats
                        .iter_mut()
                        .find(|c| c.iface == e && c.is_for(&data))
                    {
                        let mut out = Vec::with_capacity(data.len());
                        match c.clat.translate_6to4_into(at, &data, &mut out) {
                            nat64::Verdict::Forward => data = out,
                            nat64::Verdict::Reply => {
                                // An ICMPv6 error from the CLAT goes back into the network.
                                let (events, keep) = (&mut self.events, self.keep_events);
                                let mut obs = |l: LinkId, e: &Event| {
                                    if keep {
                                        events.push_back((l, e.clone()));
                                    }
                                };
                                let packet = Packet {
                                    id: p.id,
                                    ..Packet::new(out)
                                };
                                let node = self.ifaces[e].node;
                                self.net.inject(at, node, packet, &mut self.out, &mut obs);
                                injected = true;
                                continue;
                            }
                            nat64::Verdict::Drop(_) => continue,
                        }
                    }
                    self.transmit.push_back(Transmit {
                        iface: e,
                        at,
                        data,
                        whole: p.whole,
                    });
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
                    let (events, keep) = (&mut self.events, self.keep_events);
                    let mut obs = |l: LinkId, e: &Event| {
                        if keep {
                            events.push_back((l, e.clone()));
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
                let (events, keep) = (&mut self.events, self.keep_events);
                let mut obs = |l: LinkId, e: &Event| {
                    if keep {
                        events.push_back((l, e.clone()));
                    }
                };
                self.net.poll(now, &mut self.out, &mut obs);
            }
        }
        // A loop between the translator and a route: count what is left as unroutable.
        self.net.no_route += self.out.len() as u64;
        self.out.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::setting::no_files;
    use crate::shell::{shell_config, ShellOptions};
    use std::net::{IpAddr, Ipv4Addr};
    use wire::build::Ip;
    use wire::packet::{parse, Transport};

    const SERVER: Ipv4Addr = Ipv4Addr::new(10, 77, 2, 1);
    const CLAT_HOST: Ipv4Addr = Ipv4Addr::new(192, 0, 0, 2);

    fn clat_lab() -> Forwarder {
        let o = ShellOptions {
            nat64: true,
            clat: true,
            ..ShellOptions::default()
        };
        Forwarder::new(&shell_config(&o, &no_files).unwrap(), false).unwrap()
    }

    /// Everything delivered by `t`, as (interface, packet).
    fn drain(f: &mut Forwarder, t: Instant) -> Vec<(usize, Vec<u8>)> {
        std::iter::from_fn(|| f.poll_transmit(t))
            .map(|x| (x.iface, x.data))
            .collect()
    }

    fn udp4(src: Ipv4Addr, dst: Ipv4Addr, sport: u16, dport: u16) -> Vec<u8> {
        Ip::v4(src, dst).udp(sport, dport, b"through 464xlat")
    }

    #[test]
    fn an_ipv4_literal_from_a_clat_host_crosses_clat_and_nat64_and_the_answer_comes_back() {
        let mut f = clat_lab();
        f.handle_packet(Instant::ZERO, 0, udp4(CLAT_HOST, SERVER, 40000, 7));
        let got = drain(&mut f, Instant::from_secs(1));
        assert_eq!(got.len(), 1, "{got:?}");
        let (iface, p) = &got[0];
        assert_eq!(*iface, 1, "the server");
        let h = parse(p).unwrap();
        // The server meets the NAT64's pool address: client → CLAT → IPv6 → NAT64 → IPv4.
        assert_eq!(
            (h.ip.src, h.ip.dst),
            (IpAddr::V4(crate::spec::NAT64_POOL4), IpAddr::V4(SERVER))
        );
        let Transport::Udp { src_port, .. } = h.transport else {
            panic!("{h:?}")
        };
        f.handle_packet(
            Instant::from_secs(1),
            1,
            udp4(SERVER, crate::spec::NAT64_POOL4, 7, src_port),
        );
        let got = drain(&mut f, Instant::from_secs(2));
        assert_eq!(got.len(), 1, "{got:?}");
        let h = parse(&got[0].1).unwrap();
        assert_eq!(got[0].0, 0, "the client");
        assert_eq!(
            (h.ip.src, h.ip.dst),
            (IpAddr::V4(SERVER), IpAddr::V4(CLAT_HOST)),
            "the client sees IPv4 from the server's own address"
        );
        let s = f.nat64_summary().unwrap();
        assert_eq!((s.translated_6to4, s.translated_4to6), (1, 1));
        let c = &s.clat[0];
        assert_eq!((c.translated_4to6, c.translated_6to4), (1, 1));
        assert_eq!(
            (
                c.host.as_str(),
                c.ipv4.as_str(),
                c.ipv6.as_str(),
                c.prefix.as_str()
            ),
            (
                "client",
                "192.0.0.2/29",
                "fd4c:6c61:6200:1::464",
                "64:ff9b::/96"
            )
        );
        assert!(c.prefix_source.contains("RFC 7050"), "{}", c.prefix_source);
    }

    #[test]
    fn the_clients_own_ipv6_passes_the_clat_untouched_and_bad_ipv4_is_counted() {
        let mut f = clat_lab();
        let client6 = crate::spec::iface_addrs(1).1;
        let server6 = "64:ff9b::10.77.2.1".parse().unwrap();
        let v = Ip::v6(client6, server6).udp(5000, 7, b"native ipv6 to the nat64");
        f.handle_packet(Instant::ZERO, 0, v);
        // A source that is not the CLAT host's private address is not translated.
        f.handle_packet(
            Instant::ZERO,
            0,
            udp4(Ipv4Addr::new(10, 1, 1, 1), SERVER, 1, 7),
        );
        let got = drain(&mut f, Instant::from_secs(1));
        assert_eq!(got.len(), 1);
        let s = f.nat64_summary().unwrap();
        assert_eq!(
            s.translated_6to4, 1,
            "the NAT64 translated the client's own IPv6"
        );
        assert_eq!(s.clat[0].translated_4to6, 0);
        assert_eq!(s.clat[0].drops.get("not-ours"), Some(&1));
    }

    /// A TSO super-packet from the shell lab's client to its server (7 segments), with the
    /// segments a cut gives.
    fn super_packet() -> (Vec<u8>, wire::gso::Whole, Vec<Vec<u8>>) {
        let client = crate::spec::iface_addrs(1).0;
        let d = Ip::v4(client, SERVER).tcp(&wire::build::Tcp::new(40000, 5201, 1), &[9; 10_000]);
        let (hdr, data) = wire::gso::tso(d, 1448);
        let whole = wire::gso::Whole::of(&hdr, &data).unwrap();
        let mut segments = Vec::new();
        wire::gso::segment(&hdr, &mut data.clone(), &mut Vec::new(), |s| {
            segments.push(s.to_vec())
        })
        .unwrap();
        (data, whole, segments)
    }

    /// What reached the hosts by 1 s, as (interface, length, whole), and the links' summaries.
    fn outcome(mut f: Forwarder) -> (Vec<(usize, usize, bool)>, Vec<LinkSummary>) {
        let got = std::iter::from_fn(|| f.poll_transmit(Instant::from_secs(1)))
            .map(|t| (t.iface, t.data.len(), t.whole.is_some()))
            .collect();
        (got, f.link_summaries())
    }

    #[test]
    fn a_super_packet_reaches_the_host_whole_through_plain_links_counted_as_its_segments() {
        let cfg = shell_config(&ShellOptions::default(), &no_files).unwrap();
        let (data, whole, segments) = super_packet();
        let mut f = Forwarder::new(&cfg, false).unwrap();
        assert!(f.path_carries_whole(0, &data));
        f.handle_whole(Instant::ZERO, 0, data.clone(), whole);
        let (got, links) = outcome(f);
        assert_eq!(got, [(1, data.len(), true)]);
        let mut g = Forwarder::new(&cfg, false).unwrap();
        for s in &segments {
            g.handle_packet(Instant::ZERO, 0, s.clone());
        }
        let (cut, cut_links) = outcome(g);
        assert_eq!(cut.len(), 7);
        assert_eq!(links, cut_links, "the links count it as its segments");
        // With link logs, or a rate on the way, the host gets the segments.
        let mut logged = Forwarder::new(&cfg, true).unwrap();
        assert!(!logged.carries_whole());
        logged.handle_whole(Instant::ZERO, 0, data.clone(), whole);
        assert_eq!(outcome(logged).0, cut);
        let mut paced = Forwarder::new(&cfg, false).unwrap();
        for d in 0..paced.dirs.len() {
            let params = LinkParams {
                capacity: link::Capacity::Rate(wire::Rate::from_mbit(100)),
                ..LinkParams::default()
            };
            paced.set_params(Instant::ZERO, d, params);
        }
        assert!(!paced.path_carries_whole(0, &data));
        paced.handle_whole(Instant::ZERO, 0, data, whole);
        assert_eq!(outcome(paced).0, cut);
    }

    #[test]
    fn a_lab_that_translates_cuts_super_packets_before_they_enter() {
        let f = clat_lab();
        assert!(
            !f.carries_whole(),
            "the clat and the nat64 translate datagrams"
        );
    }

    #[test]
    fn a_lab_without_clat_has_none() {
        let o = ShellOptions {
            nat64: true,
            ..ShellOptions::default()
        };
        let f = Forwarder::new(&shell_config(&o, &no_files).unwrap(), false).unwrap();
        assert!(f.nat64_summary().unwrap().clat.is_empty());
    }
}
