//! A whole lab in simulated time: the [`Forwarder`] of a [`LabConfig`] driven by a virtual
//! clock, with scripted packet sources (what each host interface sends, and when), scripted
//! link changes, and every packet that reaches a host recorded as its sink. The model is
//! quinn-proto's `Pair`: step to the next thing that happens until nothing is left to happen.
//!
//! It runs in microseconds and needs no root, so the lab's routing, queues, link changes and
//! NAT64 rounds are tested here; the real-time shell is tested end to end in `cli/tests`.

use link::net::LinkId;
use link::{Event, LinkParams};
use wire::Instant;

use crate::forwarder::Forwarder;
use crate::spec::LabConfig;

/// A packet that reached a host interface.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Received {
    pub at: Instant,
    /// `HOST-IFACE`.
    pub iface: String,
    pub data: Vec<u8>,
}

pub struct Sim {
    pub fwd: Forwarder,
    pub now: Instant,
    /// (when, interface index, bytes), sent in time order.
    sends: Vec<(Instant, usize, Vec<u8>)>,
    /// (when, link direction, new parameters).
    changes: Vec<(Instant, LinkId, LinkParams)>,
    pub received: Vec<Received>,
    pub events: Vec<(LinkId, Event)>,
}

/// Steps after which a lab that is still busy is taken to be stuck.
const MAX_STEPS: usize = 10_000_000;

impl Sim {
    /// A simulation of a validated lab, keeping every link event.
    pub fn new(cfg: &LabConfig) -> Sim {
        Sim {
            fwd: Forwarder::new(cfg, true).expect("a validated lab builds"),
            now: Instant::ZERO,
            sends: Vec::new(),
            changes: Vec::new(),
            received: Vec::new(),
            events: Vec::new(),
        }
    }

    /// The index of interface `HOST-IFACE`.
    pub fn iface(&self, name: &str) -> usize {
        self.fwd
            .ifaces
            .iter()
            .position(|i| format!("{}-{}", i.host, i.iface) == name)
            .unwrap_or_else(|| panic!("no interface {name}"))
    }

    /// The index of a link direction (`LINK-up`, `LINK-down`).
    pub fn dir(&self, name: &str) -> LinkId {
        self.fwd
            .dirs
            .iter()
            .position(|d| format!("{}-{}", d.link, d.side.name()) == name)
            .unwrap_or_else(|| panic!("no link direction {name}"))
    }

    /// Interface `HOST-IFACE` sends `data` at `at`.
    pub fn send(&mut self, at: Instant, iface: &str, data: Vec<u8>) {
        let i = self.iface(iface);
        self.sends.push((at, i, data));
        self.sends.sort_by_key(|s| s.0);
    }

    /// Link direction `LINK-SIDE` takes `params` at `at`.
    pub fn change(&mut self, at: Instant, dir: &str, params: LinkParams) {
        let d = self.dir(dir);
        self.changes.push((at, d, params));
        self.changes.sort_by_key(|c| c.0);
    }

    /// Runs until nothing is left to send, change, deliver or expire (timers included: a
    /// NAT64 session's lifetime passes too).
    pub fn run(&mut self) {
        self.run_until(Instant::from_nanos(u64::MAX));
    }

    /// Runs everything due by `end`, and leaves the clock at the last thing that happened.
    pub fn run_until(&mut self, end: Instant) {
        for _ in 0..MAX_STEPS {
            let next = [
                self.sends.first().map(|s| s.0),
                self.changes.first().map(|c| c.0),
                self.fwd.next_wakeup(),
            ]
            .into_iter()
            .flatten()
            .min();
            let Some(t) = next.filter(|t| *t <= end) else {
                return;
            };
            self.now = self.now.max(t);
            while self.changes.first().is_some_and(|c| c.0 <= self.now) {
                let (_, d, p) = self.changes.remove(0);
                self.fwd.set_params(self.now, d, p);
            }
            while self.sends.first().is_some_and(|s| s.0 <= self.now) {
                let (_, i, data) = self.sends.remove(0);
                self.fwd.handle_packet(self.now, i, data);
            }
            while let Some(tx) = self.fwd.poll_transmit(self.now) {
                let i = &self.fwd.ifaces[tx.iface];
                self.received.push(Received {
                    at: self.now,
                    iface: format!("{}-{}", i.host, i.iface),
                    data: tx.data,
                });
            }
            while let Some(e) = self.fwd.poll_event() {
                self.events.push(e);
            }
        }
        panic!(
            "the lab is still busy after {MAX_STEPS} steps at {:?}",
            self.now
        );
    }

    /// What reached `HOST-IFACE`.
    pub fn received_at(&self, iface: &str) -> Vec<&Received> {
        self.received.iter().filter(|r| r.iface == iface).collect()
    }
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    use std::path::Path;

    use link::EventKind;
    use wire::packet::{parse, Transport};
    use wire::Duration;

    use super::*;
    use crate::run_file::parse_run_file;
    use crate::setting::no_files;
    use crate::shell::{shell_config, ShellOptions};

    fn lab(text: &str) -> LabConfig {
        parse_run_file("t.toml", text, Path::new(""), None, &no_files).unwrap()
    }

    fn ms(n: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(n)
    }

    /// A UDP datagram with `seq` as its payload, as a host's stack would send it.
    fn udp(src: IpAddr, dst: IpAddr, sport: u16, dport: u16, seq: u32, len: usize) -> Vec<u8> {
        let mut payload = seq.to_be_bytes().to_vec();
        payload.resize(len.max(4), 0);
        wire::build::Ip::between(src, dst)
            .expect("one family")
            .udp(sport, dport, &payload)
    }

    fn seq_of(data: &[u8]) -> u32 {
        let udp = wire::packet::udp_datagram(data).expect("a whole UDP datagram");
        u32::from_be_bytes(udp.payload[..4].try_into().unwrap())
    }

    fn v4(cfg: &LabConfig, host: &str) -> IpAddr {
        IpAddr::V4(cfg.host(host).unwrap().interfaces[0].ipv4)
    }

    const TWO_HOPS: &str = r#"
        [[host]]
        name = "a"
        [[host]]
        name = "b"
        [[host]]
        name = "c"
        [[router]]
        name = "isp"
        [[link]]
        name = "access"
        a = "a"
        b = "isp"
        delay = "10ms"
        [[link]]
        name = "core"
        a = "isp"
        b = "b"
        delay = "20ms"
        [[link]]
        name = "side"
        a = "c"
        b = "isp"
        delay = "1ms"
    "#;

    #[test]
    fn packets_cross_two_hops_in_order_after_both_delays_and_reach_only_their_host() {
        let cfg = lab(TWO_HOPS);
        let mut sim = Sim::new(&cfg);
        for i in 0..100 {
            let p = udp(v4(&cfg, "a"), v4(&cfg, "b"), 4000, 5000, i, 100);
            sim.send(ms(u64::from(i)), "a-eth0", p);
        }
        sim.run();
        let got = sim.received_at("b-eth0");
        assert_eq!(got.len(), 100);
        assert!(sim.received_at("c-eth0").is_empty());
        for (i, r) in got.iter().enumerate() {
            assert_eq!(seq_of(&r.data), i as u32);
            assert_eq!(r.at, ms(i as u64 + 30), "packet {i}");
        }
    }

    #[test]
    fn two_senders_share_one_bottleneck_at_its_rate() {
        let cfg = lab(&TWO_HOPS.replace(
            "delay = \"20ms\"",
            "delay = \"20ms\"\nrate = \"10mbit\"\nqueue = \"fifo limit 1000\"",
        ));
        let mut sim = Sim::new(&cfg);
        // 400 datagrams of 1250 bytes (IP) from each of a and c at once: 1 ms each at 10 Mbit/s.
        for i in 0..400 {
            for (host, port) in [("a", 4000), ("c", 4001)] {
                let p = udp(v4(&cfg, host), v4(&cfg, "b"), port, 5000, i, 1250 - 28);
                sim.send(ms(0), &format!("{host}-eth0"), p);
            }
        }
        sim.run();
        let got = sim.received_at("b-eth0");
        assert_eq!(got.len(), 800);
        // Back to back at the rate: 1 ms apart, the last 800 ms after the first.
        for w in got.windows(2) {
            assert_eq!(w[1].at - w[0].at, Duration::from_millis(1));
        }
        let span = got.last().unwrap().at - got[0].at;
        assert_eq!(span, Duration::from_millis(799));
        let from_c = got
            .iter()
            .filter(|r| parse(&r.data).unwrap().ip.src == v4(&cfg, "c"))
            .count();
        assert_eq!(from_c, 400);
        let core = &sim.fwd.link_summaries()[sim.dir("core-up")];
        assert_eq!(core.packets_out, 800);
        assert!(core.queue_delay_ms.max >= 790.0, "{core:?}");
    }

    #[test]
    fn a_link_that_goes_dark_drops_everything_until_it_comes_back() {
        let cfg = lab(TWO_HOPS);
        let mut sim = Sim::new(&cfg);
        for i in 0..300 {
            let p = udp(v4(&cfg, "a"), v4(&cfg, "b"), 4000, 5000, i, 100);
            sim.send(ms(u64::from(i) * 10), "a-eth0", p);
        }
        let on = sim.fwd.params(sim.dir("access-up")).clone();
        let off = LinkParams {
            up: false,
            ..on.clone()
        };
        sim.change(ms(1000), "access-up", off);
        sim.change(ms(2000), "access-up", on);
        sim.run();
        let seqs: Vec<u32> = sim
            .received_at("b-eth0")
            .iter()
            .map(|r| seq_of(&r.data))
            .collect();
        let expected: Vec<u32> = (0..300).filter(|i| !(100..200).contains(i)).collect();
        assert_eq!(seqs, expected);
        let access_up = sim.dir("access-up");
        let dark = sim
            .events
            .iter()
            .filter(|(l, e)| *l == access_up && e.kind == EventKind::Drop)
            .count();
        assert_eq!(dark, 100);
        assert_eq!(sim.fwd.link_summaries()[access_up].drops["down"], 100);
    }

    #[test]
    fn nat64_translates_both_ways_across_the_path_in_one_delivery() {
        let mut o = ShellOptions {
            nat64: true,
            ..ShellOptions::default()
        };
        o.link_option("--delay", None, "delay", Some("5ms"));
        let cfg = shell_config(&o, &no_files).unwrap();
        let client = IpAddr::V6(cfg.hosts[0].interfaces[0].ipv6);
        let server4 = cfg.hosts[1].interfaces[0].ipv4;
        let synthesised: Ipv6Addr = "64:ff9b::a4d:201".parse().unwrap();
        assert_eq!(server4, Ipv4Addr::new(10, 77, 2, 1));
        let mut sim = Sim::new(&cfg);
        sim.send(
            ms(0),
            "client-eth0",
            udp(client, IpAddr::V6(synthesised), 4000, 53000, 7, 20),
        );
        // Not `run`: that would also let the session expire.
        sim.run_until(ms(9));
        let at_server = sim.received_at("server-eth0");
        assert_eq!(at_server.len(), 1);
        // The translator sits at the server's end of the path: one link delay.
        assert_eq!(at_server[0].at, ms(5));
        let h = parse(&at_server[0].data).unwrap();
        assert_eq!(h.ip.src, IpAddr::V4(Ipv4Addr::new(10, 77, 0, 64)));
        assert_eq!(h.ip.dst, IpAddr::V4(server4));
        let Transport::Udp { src_port, .. } = h.transport else {
            panic!("{h:?}")
        };
        assert_eq!(seq_of(&at_server[0].data), 7);
        // The server's answer, to the translator's address and port, goes back as IPv6.
        let answer = udp(IpAddr::V4(server4), h.ip.src, 53000, src_port, 8, 20);
        sim.send(ms(10), "server-eth0", answer);
        sim.run();
        let at_client = sim.received_at("client-eth0");
        assert_eq!(at_client.len(), 1);
        assert_eq!(at_client[0].at, ms(15));
        let h = parse(&at_client[0].data).unwrap();
        assert_eq!((h.ip.src, h.ip.dst), (IpAddr::V6(synthesised), client));
        assert_eq!(seq_of(&at_client[0].data), 8);
        let nat = sim.fwd.nat64_summary().unwrap();
        assert_eq!((nat.translated_6to4, nat.translated_4to6), (1, 1));
    }

    #[test]
    fn a_packet_for_outside_the_lab_is_dropped_at_the_first_hop() {
        let cfg = lab(TWO_HOPS);
        let mut sim = Sim::new(&cfg);
        let outside = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
        sim.send(ms(0), "a-eth0", udp(v4(&cfg, "a"), outside, 1, 2, 0, 10));
        sim.run();
        assert!(sim.received.is_empty());
        assert_eq!(sim.fwd.no_route(), 1);
        // Dropped before any link: nothing entered one.
        assert!(sim.fwd.link_summaries().iter().all(|l| l.packets_in == 0));
    }

    #[test]
    fn a_lab_run_until_idle_has_nothing_left_in_flight_or_queued() {
        let cfg = lab(&TWO_HOPS.replace(
            "delay = \"20ms\"",
            "delay = \"20ms\"\nrate = \"1mbit\"\nloss = \"10%\"",
        ));
        let mut sim = Sim::new(&cfg);
        for i in 0..200 {
            let p = udp(v4(&cfg, "a"), v4(&cfg, "b"), 4000, 5000, i, 500);
            sim.send(ms(u64::from(i)), "a-eth0", p);
        }
        sim.run();
        assert_eq!(sim.fwd.next_wakeup(), None);
        for l in sim.fwd.link_summaries() {
            let dropped: u64 = l.drops.values().sum();
            assert_eq!(l.packets_in, l.packets_out + dropped, "{l:?}");
        }
        let got = sim.received_at("b-eth0").len() as u64;
        let core = &sim.fwd.link_summaries()[sim.dir("core-up")];
        assert_eq!(got, core.packets_out);
        assert!(got < 200 && got > 150, "{got}");
    }
}
