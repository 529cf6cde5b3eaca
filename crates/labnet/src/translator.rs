//! The NAT64 and the DNS64 of a `--nat64` lab as two endpoints of the forwarding network: the
//! forwarder hands them the packets routed to them (Pref64::/n and the pool address to the
//! translator, the DNS64's address to the resolver) and injects what they return at their node
//! at the same instant, so the link models apply on both sides as to any other packet.
//!
//! The DNS64 is "virtual": it answers queries straight from the packets, with no socket and
//! no namespace: UDP here, TCP through the minimal responder of [`crate::dns_tcp`]. What the
//! packet logic here does not do is translation or DNS itself: that is the pure `nat64`
//! crate's.
//!
//! RFCs: RFC 8200 (IPv6 header), RFC 768 (UDP), RFC 7766 (DNS over TCP), RFC 1071 (checksum).

use std::collections::BTreeMap;
use std::net::Ipv6Addr;

use nat64::dns64::{self, Dns64, Dns64Params, Zone};
use nat64::{DropReason, Nat64, Params, Verdict};
use wire::build::Ip;
use wire::Instant;

use crate::dns_tcp::TcpDns;
use crate::run_dir::{DnsQuerySummary, DnsSummary, Nat64Summary};
use crate::spec::{Nat64Spec, UsageError};

const IPV6_HEADER_BYTES: usize = 40;
const UDP_HEADER_BYTES: usize = 8;
const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = 17;
const DNS_PORT: u16 = 53;

/// Which of the two endpoints a packet was routed to.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Role {
    Nat64,
    Dns64,
}

pub struct Translator {
    nat: Nat64,
    dns: Dns64,
    dns_addr: Ipv6Addr,
    /// The translator's clock: packets reach it with their own arrival times, which the
    /// translator must never see go backwards.
    clock: Instant,
    /// (name, type) → how many times it was asked.
    queries: BTreeMap<(String, String), u64>,
    dns_answered: u64,
    dns_tcp: TcpDns,
    dns_dropped: u64,
    /// The buffer the next translation is written into: the previous packet's, recycled, so
    /// that translating allocates nothing.
    spare: Vec<u8>,
}

impl Translator {
    pub fn new(spec: &Nat64Spec, zone: Zone, seed: u64) -> Result<Translator, UsageError> {
        let prefix = spec.prefix;
        let params = Params {
            prefix,
            pool4: vec![spec.pool4],
            ..Params::default()
        };
        let nat = Nat64::new(params, seed).map_err(|e| UsageError(format!("nat64: {e}")))?;
        let dns = Dns64::new(
            Dns64Params {
                prefix,
                ..Dns64Params::default()
            },
            zone,
        );
        Ok(Translator {
            nat,
            dns,
            dns_addr: spec.dns,
            clock: Instant::ZERO,
            queries: BTreeMap::new(),
            dns_answered: 0,
            dns_tcp: TcpDns::default(),
            dns_dropped: 0,
            spare: Vec::new(),
        })
    }

    /// Handles a packet that reached endpoint `role` at `at`; appends the packets to inject at
    /// the endpoints' node to `out`.
    pub fn handle(&mut self, role: Role, at: Instant, data: Vec<u8>, out: &mut Vec<Vec<u8>>) {
        self.clock = self.clock.max(at);
        match role {
            Role::Nat64 => {
                let mut buf = std::mem::take(&mut self.spare);
                let verdict = match data.first().map(|b| b >> 4) {
                    Some(6) => self.nat.translate_6to4_into(self.clock, &data, &mut buf),
                    _ => self.nat.translate_4to6_into(self.clock, &data, &mut buf),
                };
                match verdict {
                    // A reply goes back the way the packet came: routing takes it there.
                    Verdict::Forward | Verdict::Reply => {
                        self.spare = data;
                        out.push(buf);
                    }
                    Verdict::Drop(_) => self.spare = buf,
                }
            }
            Role::Dns64 => {
                if !self.dns_packet(&data, out) {
                    self.dns_dropped += 1;
                }
            }
        }
    }

    /// When sessions may next expire.
    pub fn next_timeout(&self) -> Option<Instant> {
        self.nat.next_timeout()
    }

    pub fn expire(&mut self, now: Instant) {
        self.clock = self.clock.max(now);
        self.nat.expire(self.clock);
    }

    /// A DNS query over UDP gets its answer; TCP segments go to the TCP responder. False when
    /// the packet was not for the DNS64 at all (malformed, wrong port, wrong checksum).
    fn dns_packet(&mut self, data: &[u8], out: &mut Vec<Vec<u8>>) -> bool {
        let Some(ip) = Ipv6View::new(data) else {
            return false;
        };
        if ip.dst != self.dns_addr {
            return false;
        }
        let l4 = ip.payload;
        match ip.next_header {
            PROTO_UDP => {
                let Some((sport, dport)) = ports(l4) else {
                    return false;
                };
                if l4.len() < UDP_HEADER_BYTES {
                    return false;
                }
                let udp_len = usize::from(u16::from_be_bytes([l4[4], l4[5]]));
                if dport != DNS_PORT || udp_len != l4.len() {
                    return false;
                }
                // A zero UDP checksum is invalid over IPv6 (RFC 8200 §8.1).
                if transport_checksum(&ip.src, &ip.dst, PROTO_UDP, l4) != 0 {
                    return false;
                }
                let query = &l4[UDP_HEADER_BYTES..];
                if let Some(q) = dns64::question(query) {
                    *self.queries.entry(q).or_default() += 1;
                }
                // No answer (a response, or too short for a header) is still a packet the
                // DNS64 understood.
                let Some(answer) = dns64::serve_once(&self.dns, query) else {
                    return true;
                };
                self.dns_answered += 1;
                out.push(Ip::v6(ip.dst, ip.src).udp(DNS_PORT, sport, &answer));
                true
            }
            PROTO_TCP => {
                let Some((_, dport)) = ports(l4) else {
                    return false;
                };
                if dport != DNS_PORT || transport_checksum(&ip.src, &ip.dst, PROTO_TCP, l4) != 0 {
                    return false;
                }
                let mut segs = Vec::new();
                let dns = &self.dns;
                let queries = &mut self.queries;
                self.dns_tcp.segment(
                    ip.src,
                    l4,
                    |q| {
                        if let Some(k) = dns64::question(q) {
                            *queries.entry(k).or_default() += 1;
                        }
                        dns64::serve_tcp_once(dns, q)
                    },
                    &mut segs,
                );
                let back = Ip::v6(ip.dst, ip.src);
                out.extend(segs.iter().map(|s| back.tcp(&s.header(), &s.payload)));
                true
            }
            _ => false,
        }
    }

    pub fn summary(&self) -> Nat64Summary {
        let s = self.nat.stats();
        Nat64Summary {
            translated_6to4: s.translated_6to4,
            translated_4to6: s.translated_4to6,
            icmp_errors_translated: s.icmp_errors_translated,
            time_exceeded_sent: s.time_exceeded_sent,
            too_big_sent: s.too_big_sent,
            param_problem_sent: s.param_problem_sent,
            drops: DropReason::ALL
                .iter()
                .filter(|r| s.drops_of(**r) > 0)
                .map(|r| (r.name().to_string(), s.drops_of(*r)))
                .collect(),
            sessions_created: s.tables.sessions_created,
            sessions_expired: s.tables.sessions_expired,
            bindings_created: s.tables.bindings_created,
            table_full: s.tables.table_full,
            pool_exhausted: s.tables.pool_exhausted,
            dns: DnsSummary {
                answered: self.dns_answered,
                answered_tcp: self.dns_tcp.answered,
                dropped: self.dns_dropped,
                queries: self
                    .queries
                    .iter()
                    .map(|((name, qtype), count)| DnsQuerySummary {
                        name: name.clone(),
                        qtype: qtype.clone(),
                        count: *count,
                    })
                    .collect(),
            },
            clat: Vec::new(),
        }
    }
}

/// An IPv6 packet whose upper layer follows the fixed header directly (a resolver's queries
/// carry no extension headers; anything else is not for the DNS64).
struct Ipv6View<'a> {
    src: Ipv6Addr,
    dst: Ipv6Addr,
    next_header: u8,
    payload: &'a [u8],
}

impl<'a> Ipv6View<'a> {
    fn new(data: &'a [u8]) -> Option<Ipv6View<'a>> {
        if data.len() < IPV6_HEADER_BYTES || data[0] >> 4 != 6 {
            return None;
        }
        let payload_len = usize::from(u16::from_be_bytes([data[4], data[5]]));
        let payload = data.get(IPV6_HEADER_BYTES..IPV6_HEADER_BYTES + payload_len)?;
        let addr = |at: usize| {
            let b: [u8; 16] = data[at..at + 16].try_into().expect("16 bytes");
            Ipv6Addr::from(b)
        };
        Some(Ipv6View {
            src: addr(8),
            dst: addr(24),
            next_header: data[6],
            payload,
        })
    }
}

fn ports(l4: &[u8]) -> Option<(u16, u16)> {
    let p = l4.get(..4)?;
    Some((
        u16::from_be_bytes([p[0], p[1]]),
        u16::from_be_bytes([p[2], p[3]]),
    ))
}

/// The checksum over the IPv6 pseudo-header (RFC 8200 §8.1) and `segment`: zero when a
/// segment's own checksum field is right, the value to store when that field is zero.
fn transport_checksum(src: &Ipv6Addr, dst: &Ipv6Addr, proto: u8, segment: &[u8]) -> u16 {
    let mut acc = wire::checksum::sum(&src.octets(), 0);
    acc = wire::checksum::sum(&dst.octets(), acc);
    acc = wire::checksum::sum(&(segment.len() as u32).to_be_bytes(), acc);
    acc = wire::checksum::sum(&[0, 0, 0, proto], acc);
    wire::checksum::checksum(segment, acc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{Nat64Spec, DNS64_ADDR};
    use std::net::Ipv4Addr;

    const CLIENT: Ipv6Addr = Ipv6Addr::new(0xfd4c, 0x6c61, 0x6200, 1, 0, 0, 0, 1);

    /// What the translator sends back for one packet.
    fn handle(t: &mut Translator, role: Role, p: Vec<u8>) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        t.handle(role, Instant::ZERO, p, &mut out);
        out
    }

    fn translator() -> Translator {
        let mut z = Zone::new();
        z.add_a("server", Ipv4Addr::new(10, 77, 2, 1), 300).unwrap();
        Translator::new(&Nat64Spec::at("server"), z, 1).unwrap()
    }

    /// A UDP/IPv6 packet from the client's port 40000.
    fn udp_to(dst: Ipv6Addr, dport: u16, payload: &[u8]) -> Vec<u8> {
        Ip::v6(CLIENT, dst).udp(40000, dport, payload)
    }

    /// A query for `server.` AAAA, id 0x1234, recursion desired.
    const QUERY_SERVER_AAAA: &[u8] = &[
        0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0, 6, b's', b'e', b'r', b'v', b'e', b'r', 0,
        0, 28, 0, 1,
    ];

    #[test]
    fn a_udp_query_is_answered_back_to_its_sender_with_a_valid_checksum() {
        let mut t = translator();
        let q = udp_to(DNS64_ADDR, 53, QUERY_SERVER_AAAA);
        let r = handle(&mut t, Role::Dns64, q);
        assert_eq!(r.len(), 1);
        let v = Ipv6View::new(&r[0]).unwrap();
        assert_eq!(
            (v.src, v.dst, v.next_header),
            (DNS64_ADDR, CLIENT, PROTO_UDP)
        );
        assert_eq!(ports(v.payload), Some((53, 40000)));
        assert_eq!(transport_checksum(&v.src, &v.dst, PROTO_UDP, v.payload), 0);
        let dns = &v.payload[8..];
        assert_eq!(&dns[..2], &[0x12, 0x34]);
        // 10.77.2.1 under 64:ff9b::/96 is the last 4 bytes of the answer.
        assert_eq!(
            &dns[dns.len() - 16..],
            &"64:ff9b::a4d:201".parse::<Ipv6Addr>().unwrap().octets()
        );
        let s = t.summary();
        assert_eq!(s.dns.answered, 1);
        assert_eq!(
            (
                s.dns.queries[0].name.as_str(),
                s.dns.queries[0].qtype.as_str()
            ),
            ("server", "AAAA")
        );
    }

    #[test]
    fn a_query_with_a_wrong_checksum_or_port_is_dropped_and_counted() {
        let mut t = translator();
        let mut q = udp_to(DNS64_ADDR, 53, QUERY_SERVER_AAAA);
        let last = q.len() - 1;
        q[last] ^= 1;
        assert!(handle(&mut t, Role::Dns64, q).is_empty());
        let q = udp_to(DNS64_ADDR, 54, QUERY_SERVER_AAAA);
        assert!(handle(&mut t, Role::Dns64, q.clone()).is_empty());
        assert!(handle(&mut t, Role::Dns64, q[..30].to_vec()).is_empty());
        assert_eq!(t.summary().dns.dropped, 3);
    }

    /// A TCP segment from the client's port 40000 to the DNS64.
    fn tcp_to_dns(seq: u32, ack: u32, flags: u8, payload: &[u8]) -> Vec<u8> {
        let seg = crate::dns_tcp::tests::segment(seq, ack, flags);
        Ip::v6(CLIENT, DNS64_ADDR).tcp(&seg.header(), payload)
    }

    fn tcp_of(p: &[u8]) -> wire::packet::TcpHeader {
        let v = Ipv6View::new(p).unwrap();
        assert_eq!((v.src, v.dst), (DNS64_ADDR, CLIENT));
        assert_eq!(transport_checksum(&v.src, &v.dst, PROTO_TCP, v.payload), 0);
        match wire::packet::parse(p).unwrap().transport {
            wire::packet::Transport::Tcp(t) => t,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_query_over_tcp_is_answered_with_a_length_prefix_and_logged() {
        let mut t = translator();
        let synack = handle(&mut t, Role::Dns64, tcp_to_dns(7, 0, 0x02, b""));
        let h = tcp_of(&synack[0]);
        assert_eq!(h.flags, 0x12);
        let mut q = (QUERY_SERVER_AAAA.len() as u16).to_be_bytes().to_vec();
        q.extend_from_slice(QUERY_SERVER_AAAA);
        let r = handle(&mut t, Role::Dns64, tcp_to_dns(8, h.seq + 1, 0x18, &q));
        assert_eq!(r.len(), 1);
        let a = tcp_of(&r[0]);
        assert_eq!(a.ack, 8 + q.len() as u32);
        let payload = &Ipv6View::new(&r[0]).unwrap().payload[20..];
        assert_eq!(
            usize::from(u16::from_be_bytes([payload[0], payload[1]])),
            payload.len() - 2
        );
        assert_eq!(&payload[2..4], &[0x12, 0x34]);
        let s = t.summary();
        assert_eq!((s.dns.answered, s.dns.answered_tcp), (0, 1));
        assert_eq!(s.dns.queries[0].qtype, "AAAA");
    }

    #[test]
    fn a_tcp_segment_with_a_wrong_checksum_gets_nothing_and_is_counted() {
        let mut t = translator();
        let mut p = tcp_to_dns(7, 0, 0x02, b"");
        p[40 + 16] ^= 1;
        assert!(handle(&mut t, Role::Dns64, p).is_empty());
        assert_eq!(t.summary().dns.dropped, 1);
    }

    #[test]
    fn bad_packets_for_the_translator_are_counted_not_forwarded() {
        let mut t = translator();
        let mut p = udp_to("64:ff9b::a4d:201".parse().unwrap(), 7, b"hello");
        assert_eq!(handle(&mut t, Role::Nat64, p.clone()).len(), 1);
        let last = p.len() - 1;
        p[last] ^= 0xff;
        assert!(handle(&mut t, Role::Nat64, p).is_empty());
        assert!(handle(&mut t, Role::Nat64, vec![0x60, 0, 0]).is_empty());
        assert!(handle(&mut t, Role::Nat64, vec![]).is_empty());
        let s = t.summary();
        assert_eq!(s.translated_6to4, 1);
        assert_eq!(s.drops.get("bad-checksum"), Some(&1));
        assert_eq!(s.drops.values().sum::<u64>(), 3);
    }

    mod prop {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            /// The entry point of the fuzz target `lab_translator`.
            #[test]
            fn arbitrary_packets_at_either_endpoint_never_panic(
                packets in proptest::collection::vec((any::<bool>(), proptest::collection::vec(any::<u8>(), 0..120)), 1..8),
            ) {
                let mut t = translator();
                let mut out = Vec::new();
                for (dns, p) in packets {
                    let role = if dns { Role::Dns64 } else { Role::Nat64 };
                    t.handle(role, Instant::ZERO, p, &mut out);
                }
                for p in &out {
                    prop_assert!(matches!(p.first().map(|b| b >> 4), Some(4) | Some(6)));
                }
            }

            /// Valid DNS-over-TCP segments with some bytes changed after the checksum: the
            /// responder and the translator count or answer, never panic.
            #[test]
            fn mutated_tcp_segments_to_the_dns64_never_panic(
                seq in any::<u32>(), flags in any::<u8>(), payload in proptest::collection::vec(any::<u8>(), 0..80),
                edits in proptest::collection::vec((40usize..140, any::<u8>()), 0..3),
            ) {
                let mut t = translator();
                let mut out = Vec::new();
                t.handle(Role::Dns64, Instant::ZERO, tcp_to_dns(seq.wrapping_sub(1), 0, 0x02, b""), &mut out);
                let mut p = tcp_to_dns(seq, 0, flags, &payload);
                for (at, v) in edits {
                    if at < p.len() { p[at] = v; }
                }
                t.handle(Role::Dns64, Instant::ZERO, p, &mut out);
            }
        }
    }
}
