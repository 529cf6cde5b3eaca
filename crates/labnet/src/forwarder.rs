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

use crate::run_dir::{LinkSummary, Nat64Summary};
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
        })
    }

    /// A packet sent by host interface `iface` at `now`.
    pub fn handle_packet(&mut self, now: Instant, iface: usize, data: Vec<u8>) {
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
            Packet {
                id,
                ..Packet::new(data)
            },
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

    /// The translator's figures, in a NAT64 lab.
    pub fn nat64_summary(&self) -> Option<Nat64Summary> {
        self.translator.as_ref().map(|(t, _)| t.summary())
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
                    self.transmit.push_back(Transmit {
                        iface: e,
                        at,
                        data: p.data,
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
