//! A network of link directions and nodes: where a packet goes after each hop.
//!
//! A node routes by destination address with a longest-prefix match, to a link direction or to
//! an endpoint (a host interface, or a translator the lab runs). Links are processed in global
//! time order, and a packet that arrives at a node at time `t` enters the next link at exactly
//! `t`, so a multi-hop path is as exact as a single link. A destination no node knows is dropped
//! and counted (`no_route`): the lab is a closed world.

use std::collections::BTreeSet;
use std::net::IpAddr;

use wire::{Instant, Packet};

use crate::link::{Event, Link, Observer};

pub type NodeId = usize;
pub type LinkId = usize;
pub type EndpointId = usize;

/// Where a node sends a packet.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Hop {
    Link(LinkId),
    Deliver(EndpointId),
}

/// A route: destinations within `prefix_len` bits of `prefix` go to `hop`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    pub prefix: IpAddr,
    pub prefix_len: u8,
    pub hop: Hop,
}

impl Route {
    fn matches(&self, dst: IpAddr) -> bool {
        match (self.prefix, dst) {
            (IpAddr::V4(p), IpAddr::V4(d)) => prefix_eq(&p.octets(), &d.octets(), self.prefix_len),
            (IpAddr::V6(p), IpAddr::V6(d)) => prefix_eq(&p.octets(), &d.octets(), self.prefix_len),
            _ => false,
        }
    }
}

fn prefix_eq(a: &[u8], b: &[u8], bits: u8) -> bool {
    let bits = usize::from(bits).min(a.len() * 8);
    let (full, rest) = (bits / 8, bits % 8);
    if a[..full] != b[..full] {
        return false;
    }
    rest == 0 || (a[full] ^ b[full]) >> (8 - rest) == 0
}

#[derive(Default)]
struct Node {
    routes: Vec<Route>,
}

impl Node {
    fn lookup(&self, dst: IpAddr) -> Option<Hop> {
        self.routes
            .iter()
            .filter(|r| r.matches(dst))
            .max_by_key(|r| r.prefix_len)
            .map(|r| r.hop)
    }
}

/// Tags a link's events with its id for the caller's observer.
struct Tagged<'a> {
    link: LinkId,
    obs: &'a mut dyn FnMut(LinkId, &Event),
}

impl Observer for Tagged<'_> {
    fn event(&mut self, ev: &Event) {
        (self.obs)(self.link, ev)
    }
}

/// Nodes joined by link directions.
///
/// Which link is due next is kept in an ordered index of each link's next wake-up, updated
/// whenever a link changes, rather than found by asking every link: a lab of a thousand hosts
/// has two thousand link directions, nearly all idle, and a scan of them all on every loop turn
/// and every link event took most of a core.
#[derive(Default)]
pub struct Network {
    nodes: Vec<Node>,
    links: Vec<(Link, NodeId)>,
    /// Each link's next wake-up and id, for every link that has one: `due[i]` is link `i`'s
    /// entry. Ties go to the lower id, as a scan in id order would take them.
    timers: BTreeSet<(Instant, LinkId)>,
    due: Vec<Option<Instant>>,
    /// Links handed out by [`Network::link_mut`] since the index last looked at them: the
    /// caller may have changed what they wait for.
    stale: Vec<LinkId>,
    /// Packets dropped because no route matched their destination.
    pub no_route: u64,
    scratch: Vec<(Instant, Packet)>,
    /// The link that last took a buffer in [`Network::recycle`].
    recycle_hint: LinkId,
}

impl Network {
    pub fn new() -> Network {
        Network::default()
    }

    pub fn add_node(&mut self) -> NodeId {
        self.nodes.push(Node::default());
        self.nodes.len() - 1
    }

    /// Adds a link direction whose far end is node `to`.
    pub fn add_link(&mut self, link: Link, to: NodeId) -> LinkId {
        self.links.push((link, to));
        self.due.push(None);
        let id = self.links.len() - 1;
        self.reindex(id);
        id
    }

    /// Puts link `id`'s current next wake-up in the index.
    fn reindex(&mut self, id: LinkId) {
        let t = self.links[id].0.next_wakeup();
        if t == self.due[id] {
            return;
        }
        if let Some(old) = self.due[id] {
            self.timers.remove(&(old, id));
        }
        if let Some(new) = t {
            self.timers.insert((new, id));
        }
        self.due[id] = t;
    }

    /// Re-indexes the links handed out by [`Network::link_mut`].
    fn reindex_stale(&mut self) {
        while let Some(id) = self.stale.pop() {
            self.reindex(id);
        }
    }

    pub fn add_route(&mut self, node: NodeId, prefix: IpAddr, prefix_len: u8, hop: Hop) {
        self.nodes[node].routes.push(Route {
            prefix,
            prefix_len,
            hop,
        });
    }

    pub fn link(&self, id: LinkId) -> &Link {
        &self.links[id].0
    }

    pub fn link_mut(&mut self, id: LinkId) -> &mut Link {
        if !self.stale.contains(&id) {
            self.stale.push(id);
        }
        &mut self.links[id].0
    }

    pub fn link_count(&self) -> usize {
        self.links.len()
    }

    /// Gives back the buffer of a delivered packet the caller has finished with and does not
    /// keep for itself: a duplicating link with room makes its next copy in it
    /// ([`Link::recycle`]); otherwise it is let go.
    pub fn recycle(&mut self, data: Vec<u8>) {
        // The link that took the last one usually wants the next.
        let hint = self.recycle_hint;
        let wants = match self.links.get(hint) {
            Some((l, _)) if l.wants_buffers() => Some(hint),
            _ => self.links.iter().position(|(l, _)| l.wants_buffers()),
        };
        if let Some(i) = wants {
            self.recycle_hint = i;
            self.links[i].0.recycle(data);
            self.reindex(i);
        }
    }

    /// Whether a super-packet for `dst` appearing at `node` would cross every link on its way
    /// whole ([`Link::carries_whole`]) to the endpoint it reaches: false when some link would
    /// cut it (the caller may as well cut it first) or when it has no route.
    pub fn carries_whole(&self, node: NodeId, dst: IpAddr) -> bool {
        let mut at = node;
        // A route loop would revisit a link: a path longer than every link is one.
        for _ in 0..=self.links.len() {
            match self.nodes[at].lookup(dst) {
                Some(Hop::Link(l)) if self.links[l].0.carries_whole() => at = self.links[l].1,
                Some(Hop::Deliver(_)) => return true,
                Some(Hop::Link(_)) | None => return false,
            }
        }
        false
    }

    /// A packet appears at `node` at `now` (read from a host's interface). Deliveries straight
    /// to an endpoint (no link in between) are appended to `out`.
    pub fn inject(
        &mut self,
        now: Instant,
        node: NodeId,
        packet: Packet,
        out: &mut Vec<(EndpointId, Instant, Packet)>,
        obs: &mut dyn FnMut(LinkId, &Event),
    ) {
        let Some(dst) = packet.flow_key().map(|k| k.dst) else {
            self.no_route += packet.segments();
            return;
        };
        match self.nodes[node].lookup(dst) {
            Some(Hop::Link(l)) => {
                let link = &mut self.links[l].0;
                link.enqueue(
                    now,
                    packet,
                    &mut Tagged {
                        link: l,
                        obs: &mut *obs,
                    },
                );
                // What the router in front of a narrow link sent instead (an ICMP error back
                // to the sender, or fragments that fit) leaves this node like any packet.
                let mut bounced = Vec::new();
                link.take_bounced(&mut bounced);
                self.reindex(l);
                for p in bounced {
                    self.inject(now, node, p, out, obs);
                }
            }
            Some(Hop::Deliver(e)) => out.push((e, now, packet)),
            None => self.no_route += packet.segments(),
        }
    }

    /// Runs every link up to `now` in time order; packets reaching an endpoint are appended to
    /// `out` with their arrival time.
    pub fn poll(
        &mut self,
        now: Instant,
        out: &mut Vec<(EndpointId, Instant, Packet)>,
        obs: &mut dyn FnMut(LinkId, &Event),
    ) {
        self.reindex_stale();
        while let Some(&(t, i)) = self.timers.first() {
            if t > now {
                break;
            }
            let mut arrived = std::mem::take(&mut self.scratch);
            self.links[i].0.poll(
                t,
                &mut arrived,
                &mut Tagged {
                    link: i,
                    obs: &mut *obs,
                },
            );
            self.reindex(i);
            let to = self.links[i].1;
            for (at, p) in arrived.drain(..) {
                self.inject(at, to, p, out, obs);
            }
            self.scratch = arrived;
        }
    }

    /// The next moment any link has something to do.
    pub fn next_wakeup(&self) -> Option<Instant> {
        let stale = self
            .stale
            .iter()
            .filter_map(|&i| self.links[i].0.next_wakeup());
        let indexed = self.timers.first().map(|&(t, _)| t);
        stale.chain(indexed).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::tests::udp;
    use crate::link::LinkParams;
    use crate::Capacity;
    use qdisc::fifo::{Fifo, Limit};
    use wire::{Duration, Rate};

    fn link(mbit: u64, delay_ms: u64) -> Link {
        let p = LinkParams {
            capacity: Capacity::Rate(Rate::from_mbit(mbit)),
            delay: Duration::from_millis(delay_ms),
            ..LinkParams::default()
        };
        Link::new(
            Instant::ZERO,
            p,
            Box::new(Fifo::new(Limit::Packets(100))),
            1,
        )
    }

    fn run(net: &mut Network) -> Vec<(EndpointId, Instant, u64)> {
        let mut out = Vec::new();
        while let Some(t) = net.next_wakeup() {
            net.poll(t, &mut out, &mut |_, _| {});
        }
        out.into_iter().map(|(e, t, p)| (e, t, p.id)).collect()
    }

    #[test]
    fn a_path_carries_a_super_packet_whole_only_if_every_link_on_it_does() {
        // a --(unlimited)--> r --(unlimited or 10 mbit)--> b
        let mut net = Network::new();
        let (a, r, b) = (net.add_node(), net.add_node(), net.add_node());
        let plain = || {
            let mut l = Link::new(
                Instant::ZERO,
                LinkParams::default(),
                Box::new(Fifo::new(Limit::Packets(100))),
                1,
            );
            l.set_event_detail(false);
            l
        };
        let first = net.add_link(plain(), r);
        let second = net.add_link(plain(), b);
        let dst: IpAddr = "10.0.0.2".parse().unwrap();
        net.add_route(a, dst, 32, Hop::Link(first));
        net.add_route(r, dst, 32, Hop::Link(second));
        net.add_route(b, dst, 32, Hop::Deliver(0));
        assert!(net.carries_whole(a, dst));
        assert!(
            !net.carries_whole(a, "10.0.0.3".parse().unwrap()),
            "no route"
        );
        let paced = LinkParams {
            capacity: Capacity::Rate(Rate::from_mbit(10)),
            ..LinkParams::default()
        };
        net.link_mut(second)
            .set_params(Instant::ZERO, paced, &mut ());
        assert!(
            !net.carries_whole(a, dst),
            "the second hop paces its segments"
        );
        assert!(net.link(first).carries_whole());
    }

    #[test]
    fn a_packet_crosses_each_hop_with_that_hops_queue() {
        // a --(100 mbit, 5 ms)--> r --(10 mbit, 10 ms)--> b
        let mut net = Network::new();
        let (a, r, b) = (net.add_node(), net.add_node(), net.add_node());
        let l1 = net.add_link(link(100, 5), r);
        let l2 = net.add_link(link(10, 10), b);
        let dst: IpAddr = "10.0.0.2".parse().unwrap();
        net.add_route(a, dst, 32, Hop::Link(l1));
        net.add_route(r, dst, 32, Hop::Link(l2));
        net.add_route(b, dst, 32, Hop::Deliver(7));
        let mut out = Vec::new();
        for id in 0..3 {
            net.inject(Instant::ZERO, a, udp(id, 1500, 1), &mut out, &mut |_, _| {});
        }
        let got = run(&mut net);
        // Hop 1: departures at 0.12, 0.24, 0.36 ms, arrive +5 ms. Hop 2 (1.2 ms per packet) is the
        // bottleneck: the first starts at 5.12 ms, each next as soon as the one before is sent.
        let us: Vec<u64> = got.iter().map(|(_, t, _)| t.as_nanos() / 1000).collect();
        assert_eq!(
            us,
            vec![
                5_120 + 1_200 + 10_000,
                5_120 + 2_400 + 10_000,
                5_120 + 3_600 + 10_000
            ]
        );
        assert!(got.iter().all(|(e, _, _)| *e == 7));
        assert_eq!(got.iter().map(|x| x.2).collect::<Vec<_>>(), vec![0, 1, 2]);
        assert_eq!(net.link(l2).stats().queue_delay.percentiles().samples, 3);
    }

    #[test]
    fn flows_from_two_hosts_interleave_in_time_order_at_a_shared_bottleneck() {
        let mut net = Network::new();
        let (a, b, r, s) = (
            net.add_node(),
            net.add_node(),
            net.add_node(),
            net.add_node(),
        );
        let la = net.add_link(link(1000, 1), r);
        let lb = net.add_link(link(1000, 2), r);
        let bottleneck = net.add_link(link(10, 0), s);
        let dst: IpAddr = "10.0.0.2".parse().unwrap();
        net.add_route(a, dst, 32, Hop::Link(la));
        net.add_route(b, dst, 32, Hop::Link(lb));
        net.add_route(r, "10.0.0.0".parse().unwrap(), 8, Hop::Link(bottleneck));
        net.add_route(s, dst, 32, Hop::Deliver(0));
        let mut out = Vec::new();
        net.inject(Instant::ZERO, b, udp(1, 1500, 2), &mut out, &mut |_, _| {});
        net.inject(Instant::ZERO, a, udp(0, 1500, 1), &mut out, &mut |_, _| {});
        // a's packet reaches the router first (1 ms vs 2 ms) and so leaves first.
        assert_eq!(
            run(&mut net).iter().map(|x| x.2).collect::<Vec<_>>(),
            vec![0, 1]
        );
    }

    #[test]
    fn longest_prefix_wins_and_unknown_destinations_are_counted() {
        let mut net = Network::new();
        let n = net.add_node();
        net.add_route(n, "10.0.0.0".parse().unwrap(), 8, Hop::Deliver(1));
        net.add_route(n, "10.0.0.2".parse().unwrap(), 32, Hop::Deliver(2));
        net.add_route(n, "fd00::".parse().unwrap(), 8, Hop::Deliver(3));
        let mut out = Vec::new();
        net.inject(Instant::ZERO, n, udp(0, 100, 1), &mut out, &mut |_, _| {});
        assert_eq!(out[0].0, 2);
        let mut other = udp(1, 100, 1);
        other.data[19] = 3; // 10.0.0.3: the /8
        other.data[10] = 0;
        other.data[11] = 0;
        net.inject(Instant::ZERO, n, other, &mut out, &mut |_, _| {});
        assert_eq!(out[1].0, 1);
        let mut outside = udp(2, 100, 1);
        outside.data[16] = 8; // 8.0.0.2: not a lab address
        net.inject(Instant::ZERO, n, outside, &mut out, &mut |_, _| {});
        assert_eq!(out.len(), 2);
        assert_eq!(net.no_route, 1);
        assert!(prefix_eq(&[0b1010_0000], &[0b1011_1111], 3));
        assert!(!prefix_eq(&[0b1010_0000], &[0b1000_0000], 3));
    }

    /// client --(path)--> router --(narrow, MTU 1400)--> server, and back over `back` links.
    /// Returns what reached the client (endpoint 0) and the server (endpoint 1).
    fn narrow_path(df: bool, icmp_filtered: bool) -> (Vec<Packet>, Vec<Packet>) {
        use crate::impair::{Impairments, NarrowLink};
        let mut net = Network::new();
        let (c, r, s) = (net.add_node(), net.add_node(), net.add_node());
        let narrow = LinkParams {
            impair: Impairments {
                narrow: Some(NarrowLink {
                    mtu_bytes: 1400,
                    router_v4: "10.0.9.1".parse().unwrap(),
                    router_v6: "fd00::9:1".parse().unwrap(),
                }),
                ..Impairments::default()
            },
            ..LinkParams::default()
        };
        let back = LinkParams {
            impair: Impairments {
                drop: if icmp_filtered {
                    vec![crate::Filter::parse("icmp").unwrap()]
                } else {
                    Vec::new()
                },
                ..Impairments::default()
            },
            ..LinkParams::default()
        };
        let fifo = || Box::new(Fifo::new(Limit::Packets(100)));
        let up1 = net.add_link(link(100, 1), r);
        let up2 = net.add_link(Link::new(Instant::ZERO, narrow, fifo(), 1), s);
        let down = net.add_link(Link::new(Instant::ZERO, back, fifo(), 1), c);
        let (client, server): (IpAddr, IpAddr) =
            ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        net.add_route(c, server, 32, Hop::Link(up1));
        net.add_route(r, server, 32, Hop::Link(up2));
        net.add_route(r, client, 32, Hop::Link(down));
        net.add_route(s, server, 32, Hop::Deliver(1));
        net.add_route(c, client, 32, Hop::Deliver(0));
        let mut out = Vec::new();
        let big = Packet::new(
            wire::build::Ip::v4([10, 0, 0, 1].into(), [10, 0, 0, 2].into())
                .dont_fragment(df)
                .udp_of_len(1, 9, 1500),
        );
        net.inject(Instant::ZERO, c, big, &mut out, &mut |_, _| {});
        while let Some(t) = net.next_wakeup() {
            net.poll(t, &mut out, &mut |_, _| {});
        }
        let (mut to_client, mut to_server) = (Vec::new(), Vec::new());
        for (e, _, p) in out {
            if e == 0 {
                to_client.push(p)
            } else {
                to_server.push(p)
            }
        }
        (to_client, to_server)
    }

    #[test]
    fn a_narrow_link_sends_the_router_s_icmp_back_unless_icmp_is_filtered() {
        let (to_client, to_server) = narrow_path(true, false);
        assert!(to_server.is_empty());
        assert_eq!(to_client.len(), 1);
        let h = wire::packet::parse(&to_client[0].data).unwrap();
        assert_eq!(h.ip.src.to_string(), "10.0.9.1");
        assert_eq!(
            h.transport,
            wire::packet::Transport::Icmpv4 {
                icmp_type: 3,
                code: 4
            }
        );
        // The PMTU black hole: the error is filtered on the way back; nothing arrives anywhere.
        let (to_client, to_server) = narrow_path(true, true);
        assert!(to_client.is_empty() && to_server.is_empty());
        // Without DF, the router fragments and the fragments go on.
        let (to_client, to_server) = narrow_path(false, true);
        assert!(to_client.is_empty());
        assert_eq!(
            to_server.iter().map(|p| p.len()).collect::<Vec<_>>(),
            [1396, 124]
        );
    }

    #[test]
    fn buffers_given_back_go_to_a_duplicating_link_until_it_has_enough() {
        let mut net = Network::new();
        let to = net.add_node();
        let plain = net.add_link(link(10, 1), to);
        let mut dup = link(10, 1);
        let mut p = dup.params().clone();
        p.impair.duplicate = Some(crate::Duplicate::parse("50%").unwrap());
        dup.set_params(Instant::ZERO, p, &mut ());
        let dup = net.add_link(dup, to);
        assert!(!net.link(plain).wants_buffers() && net.link(dup).wants_buffers());
        for _ in 0..crate::link::SPARE_BUFFERS {
            net.recycle(Vec::with_capacity(1500));
        }
        assert!(!net.link(dup).wants_buffers(), "full");
        net.recycle(Vec::with_capacity(1500));
    }

    /// The next wake-up as a scan of every link would find it.
    fn scanned(net: &Network) -> Option<Instant> {
        (0..net.link_count())
            .filter_map(|i| net.link(i).next_wakeup())
            .min()
    }

    #[test]
    fn the_wakeup_index_agrees_with_a_scan_of_every_link_through_a_star() {
        // Twenty clients behind a router, each sending to the server at its own moments, over
        // links of different rates and delays; the router's link to the server is shared.
        let mut net = Network::new();
        let (r, s) = (net.add_node(), net.add_node());
        let core = net.add_link(link(100, 3), s);
        let server: IpAddr = "10.0.0.2".parse().unwrap();
        net.add_route(r, server, 32, Hop::Link(core));
        net.add_route(s, server, 32, Hop::Deliver(0));
        let clients: Vec<NodeId> = (0..20)
            .map(|k| {
                let c = net.add_node();
                let l = net.add_link(link(1 + k as u64 % 7, 1 + k as u64 % 5), r);
                net.add_route(c, server, 32, Hop::Link(l));
                c
            })
            .collect();
        assert_eq!(net.next_wakeup(), None);
        let mut out = Vec::new();
        let mut now = Instant::ZERO;
        for step in 0..400u64 {
            now += wire::Duration::from_micros(250);
            let c = clients[(step * 7 % 20) as usize];
            if step % 3 != 2 {
                net.inject(
                    now,
                    c,
                    udp(step, 200 + (step % 5) as usize * 300, 1),
                    &mut out,
                    &mut |_, _| {},
                );
            }
            assert_eq!(
                net.next_wakeup(),
                scanned(&net),
                "after a packet at step {step}"
            );
            if let Some(t) = net.next_wakeup().filter(|&t| t <= now) {
                net.poll(t, &mut out, &mut |_, _| {});
                assert_eq!(
                    net.next_wakeup(),
                    scanned(&net),
                    "after a poll at step {step}"
                );
            }
        }
        let before = out.len();
        let got = run(&mut net);
        assert_eq!(net.next_wakeup(), None);
        assert_eq!(
            before + got.len(),
            267,
            "every packet sent reached the server"
        );
        assert!(got.windows(2).all(|w| w[0].1 <= w[1].1), "in time order");
    }

    #[test]
    fn a_link_changed_through_link_mut_is_seen_by_the_next_wakeup() {
        let mut net = Network::new();
        let (a, b) = (net.add_node(), net.add_node());
        let l = net.add_link(link(1, 50), b);
        let dst: IpAddr = "10.0.0.2".parse().unwrap();
        net.add_route(a, dst, 32, Hop::Link(l));
        net.add_route(b, dst, 32, Hop::Deliver(0));
        assert_eq!(net.next_wakeup(), None);
        // A packet put straight into the link, past the network: 1500 bytes at 1 Mbit/s are on
        // the wire until 12 ms, and arrive 50 ms later.
        net.link_mut(l)
            .enqueue(Instant::ZERO, udp(0, 1500, 1), &mut ());
        assert_eq!(net.next_wakeup(), Some(Instant::from_micros(62_000)));
        assert_eq!(net.next_wakeup(), scanned(&net));
        let got = run(&mut net);
        assert_eq!(got, vec![(0, Instant::from_micros(62_000), 0)]);
        assert_eq!(net.next_wakeup(), None);
    }
}
