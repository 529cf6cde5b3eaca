//! The CLAT of 464XLAT (RFC 6877): the customer-side stateless translator that gives an
//! IPv6-only host a private IPv4 address, so that IPv4 literals and AF_INET-only programs work
//! through the carrier's NAT64 (the PLAT). It translates per RFC 7915 (SIIT) with the same
//! header code as the NAT64 ([`crate::translate`]); only the address mapping is its own, and it
//! keeps no per-flow state:
//!
//! - from the host (IPv4 → IPv6): the source, the host's private address (192.0.0.2 from
//!   192.0.0.0/29, RFC 7335), becomes the CLAT's own IPv6 address (RFC 6877 §6.3); the
//!   destination D becomes Pref64::D under the carrier's prefix (RFC 6052);
//! - from the network (IPv6 → IPv4): packets to the CLAT's IPv6 address from Pref64::S come
//!   back as S → the host's private address. ICMPv6 errors from an IPv6 address outside the
//!   prefix (a router on the IPv6 path) come from 192.0.0.8, the IPv4 dummy address
//!   (RFC 7600 §6, as RFC 7915 §5.1 and RFC 6791 ask).
//!
//! Ports and ICMP identifiers are never changed. The prefix is discovered per RFC 7050 from the
//! AAAA records of `ipv4only.arpa` ([`discovery_query`], [`prefixes_from_answer`]) or given.
//! Nothing here sends the query: the caller owns the resolver and the clock.

use std::net::{Ipv4Addr, Ipv6Addr};

use hickory_proto::op::{Message, MessageType, Query};
use hickory_proto::rr::{Name, RData, RecordType};
use wire::{Duration, Instant};

use crate::prefix::Prefix;
use crate::state::{Flow6, Key4, Proto, TcpFlags};
use crate::translate::{bad_v4, Dst6, Ends4, Ends6, Engine, HeaderParams, Mapping, Src4};
use crate::{ConfigError, DropReason, Outcome, Stats, Verdict};

/// The host's private IPv4 address: the first host of 192.0.0.0/29, which RFC 7335 sets
/// aside for the IPv4 side of a CLAT, after the gateway.
pub const HOST_IPV4: Ipv4Addr = Ipv4Addr::new(192, 0, 0, 2);
/// The host's IPv4 gateway, the CLAT itself: the source of the ICMPv4 errors it sends.
pub const GATEWAY_IPV4: Ipv4Addr = Ipv4Addr::new(192, 0, 0, 1);
/// The prefix length of the host's IPv4 network, 192.0.0.0/29 (RFC 7335).
pub const HOST_PREFIX_LEN: u8 = 29;
/// The IPv4 dummy address (RFC 7600 §6): the source of translated ICMP errors whose IPv6
/// source has no IPv4 address.
pub const DUMMY_IPV4: Ipv4Addr = Ipv4Addr::new(192, 0, 0, 8);
/// The name whose AAAA records reveal the NAT64 prefix (RFC 7050 §2.2, RFC 8880).
pub const DISCOVERY_NAME: &str = "ipv4only.arpa.";
/// Its two well-known IPv4 addresses (RFC 7050 §2.2).
pub const WELL_KNOWN_IPV4: [Ipv4Addr; 2] =
    [Ipv4Addr::new(192, 0, 0, 170), Ipv4Addr::new(192, 0, 0, 171)];

/// Parameters of a [`Clat`].
#[derive(Clone, Debug)]
pub struct ClatParams {
    /// The carrier's Pref64::/n, under which IPv4 destinations are reached.
    pub prefix: Prefix,
    /// The host's private IPv4 address (its only IPv4 source).
    pub ipv4: Ipv4Addr,
    /// The CLAT's own IPv6 address, which the host's IPv4 address maps to (RFC 6877 §6.3: a
    /// dedicated address, so the host's own IPv6 traffic and the translated traffic stay
    /// apart). Must be unicast and outside the prefix.
    pub ipv6: Ipv6Addr,
    /// MTU of the IPv4 side (the host's interface).
    pub mtu4_bytes: u16,
    /// MTU of the IPv6 side (the host's uplink); at least 1280.
    pub mtu6_bytes: u16,
    /// Check TCP, UDP and ICMP checksums and drop (and count) wrong ones.
    pub verify_checksums: bool,
    /// How long a first fragment's translation is kept (FRAGMENT_MIN, 2 s). A stateless
    /// translator needs it for nothing but the shared bookkeeping; kept for symmetry.
    pub fragment_timeout: Duration,
    pub max_fragments: usize,
}

impl ClatParams {
    /// A CLAT for `ipv6` under `prefix`, with the host at [`HOST_IPV4`] and 1500-byte MTUs.
    pub fn new(prefix: Prefix, ipv6: Ipv6Addr) -> ClatParams {
        ClatParams {
            prefix,
            ipv4: HOST_IPV4,
            ipv6,
            mtu4_bytes: 1500,
            mtu6_bytes: 1500,
            verify_checksums: true,
            fragment_timeout: Duration::from_secs(2),
            max_fragments: 1024,
        }
    }
}

/// The stateless mapping of a CLAT: one IPv4 host behind one IPv6 address, everything else
/// under the prefix.
pub(crate) struct Stateless {
    prefix: Prefix,
    ipv4: Ipv4Addr,
    ipv6: Ipv6Addr,
}

impl Stateless {
    /// An IPv4 destination under the prefix, refusing addresses that mean nothing elsewhere.
    fn to6(&self, v4: Ipv4Addr) -> Result<Ipv6Addr, DropReason> {
        if bad_v4(v4) {
            return Err(DropReason::BadAddress);
        }
        Ok(self.prefix.embed(v4))
    }

    /// The IPv4 address embedded in an address under the prefix.
    fn to4(&self, v6: Ipv6Addr) -> Result<Ipv4Addr, DropReason> {
        let v4 = self.prefix.extract(v6).ok_or(DropReason::NotInPrefix)?;
        if bad_v4(v4) {
            return Err(DropReason::BadAddress);
        }
        Ok(v4)
    }
}

impl Mapping for Stateless {
    fn addrs_6to4(&self, src: Ipv6Addr, dst: Ipv6Addr) -> Result<(Src4, Ipv4Addr), DropReason> {
        if dst != self.ipv6 {
            return Err(DropReason::NotOurs);
        }
        if src.is_multicast() || src.is_unspecified() {
            return Err(DropReason::BadAddress);
        }
        match self.to4(src) {
            Ok(s) => Ok((Src4::Fixed(s), self.ipv4)),
            Err(DropReason::NotInPrefix) => Ok((Src4::Unmapped, self.ipv4)),
            Err(e) => Err(e),
        }
    }

    fn addrs_4to6(&self, src: Ipv4Addr, dst: Ipv4Addr) -> Result<(Ipv6Addr, Dst6), DropReason> {
        if src != self.ipv4 {
            return Err(DropReason::NotOurs);
        }
        Ok((self.ipv6, Dst6::Fixed(self.to6(dst)?)))
    }

    fn session_6to4(
        &mut self,
        _: Instant,
        _: Flow6,
        _: TcpFlags,
        _: bool,
    ) -> Result<(Ipv4Addr, u16), DropReason> {
        // Never asked: every mapped source is `Src4::Fixed`.
        Err(DropReason::NoSession)
    }

    fn session_4to6(
        &mut self,
        _: Instant,
        _: Key4,
        _: TcpFlags,
    ) -> Result<(Ipv6Addr, u16), DropReason> {
        // Never asked: every destination is `Dst6::Fixed`.
        Err(DropReason::NoSession)
    }

    /// The quoted packet went from the CLAT's address to Pref64::D.
    fn quoted_6to4(&self, _: Proto, q: Ends6) -> Result<Ends4, DropReason> {
        if q.src != self.ipv6 {
            return Err(DropReason::NotOurs);
        }
        Ok(Ends4 {
            src: self.ipv4,
            sport: q.sport,
            dst: self.to4(q.dst)?,
            dport: q.dport,
        })
    }

    /// The quoted packet went from S to the host.
    fn quoted_4to6(&self, _: Proto, q: Ends4) -> Result<Ends6, DropReason> {
        if q.dst != self.ipv4 {
            return Err(DropReason::NotOurs);
        }
        Ok(Ends6 {
            src: self.to6(q.src)?,
            sport: q.sport,
            dst: self.ipv6,
            dport: q.dport,
        })
    }
}

/// A CLAT (RFC 6877): a stateless IPv4 ↔ IPv6 translator for one host. See the module
/// documentation.
pub struct Clat {
    engine: Engine<Stateless>,
    params: ClatParams,
}

impl Clat {
    /// A CLAT with `params`; `seed` starts the IPv4 Identification counter.
    pub fn new(params: ClatParams, seed: u64) -> Result<Clat, ConfigError> {
        if params.mtu4_bytes < 1260 {
            return Err(ConfigError::Mtu4TooSmall(params.mtu4_bytes));
        }
        if params.mtu6_bytes < 1280 {
            return Err(ConfigError::Mtu6TooSmall(params.mtu6_bytes));
        }
        if params.max_fragments == 0 {
            return Err(ConfigError::ZeroTable("max_fragments"));
        }
        let a = params.ipv6;
        if a.is_unspecified() || a.is_multicast() || a.is_loopback() || params.prefix.contains(a) {
            return Err(ConfigError::ClatAddress(a));
        }
        if bad_v4(params.ipv4) {
            return Err(ConfigError::ClatAddress4(params.ipv4));
        }
        let hdr = HeaderParams {
            mtu4_bytes: params.mtu4_bytes,
            mtu6_bytes: params.mtu6_bytes,
            verify_checksums: params.verify_checksums,
            router4: GATEWAY_IPV4,
            router6: params.ipv6,
            unmapped4: DUMMY_IPV4,
            fragment_timeout: params.fragment_timeout,
            max_fragments: params.max_fragments,
        };
        let map = Stateless {
            prefix: params.prefix,
            ipv4: params.ipv4,
            ipv6: params.ipv6,
        };
        Ok(Clat {
            engine: Engine::new(map, hdr, (seed ^ (seed >> 16) ^ (seed >> 32)) as u16),
            params,
        })
    }

    pub fn params(&self) -> &ClatParams {
        &self.params
    }

    /// The counters (a CLAT has no tables: those stay zero).
    pub fn stats(&self) -> Stats {
        self.engine.stats.clone()
    }

    /// When [`Clat::expire`] next has work; may be early, never late.
    pub fn next_timeout(&self) -> Option<Instant> {
        self.engine.next_timeout()
    }

    pub fn expire(&mut self, now: Instant) {
        self.engine.expire(now);
    }

    /// Translates an IPv4 packet the host sent.
    pub fn translate_4to6(&mut self, now: Instant, packet: &[u8]) -> Outcome {
        self.engine.translate_4to6(now, packet)
    }

    /// Translates an IPv6 packet from the network to the CLAT's address.
    pub fn translate_6to4(&mut self, now: Instant, packet: &[u8]) -> Outcome {
        self.engine.translate_6to4(now, packet)
    }

    /// [`Clat::translate_4to6`] writing into `out` (cleared first).
    pub fn translate_4to6_into(
        &mut self,
        now: Instant,
        packet: &[u8],
        out: &mut Vec<u8>,
    ) -> Verdict {
        self.engine.translate_4to6_into(now, packet, out)
    }

    /// [`Clat::translate_6to4`] writing into `out` (cleared first).
    pub fn translate_6to4_into(
        &mut self,
        now: Instant,
        packet: &[u8],
        out: &mut Vec<u8>,
    ) -> Verdict {
        self.engine.translate_6to4_into(now, packet, out)
    }
}

/// The RFC 7050 §3 discovery query: `ipv4only.arpa` AAAA, recursion desired, with `id`.
pub fn discovery_query(id: u16) -> Vec<u8> {
    let mut m = Message::new();
    m.set_id(id).set_recursion_desired(true);
    m.add_query(Query::query(
        Name::from_ascii(DISCOVERY_NAME).expect("a valid name"),
        RecordType::AAAA,
    ));
    m.to_vec().expect("a small message always encodes")
}

/// Why no prefix came out of a discovery answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DiscoveryError {
    /// Not a DNS response.
    Malformed,
    /// A response without AAAA records (the network has no DNS64: not a NAT64 network).
    NoAaaa,
    /// AAAA records, none with a well-known address at exactly one place.
    NoPrefix,
}

impl std::fmt::Display for DiscoveryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DiscoveryError::Malformed => {
                write!(f, "the answer for ipv4only.arpa is not a dns response")
            }
            DiscoveryError::NoAaaa => write!(
                f,
                "ipv4only.arpa has no AAAA record (no DNS64 on this network)"
            ),
            DiscoveryError::NoPrefix => write!(
                f,
                "no AAAA record of ipv4only.arpa embeds 192.0.0.170 or 192.0.0.171 once"
            ),
        }
    }
}

impl std::error::Error for DiscoveryError {}

/// The addresses of the AAAA records in a DNS response (none when it is not one).
pub fn aaaa_records(msg: &[u8]) -> Vec<Ipv6Addr> {
    let Ok(m) = Message::from_vec(msg) else {
        return Vec::new();
    };
    m.answers()
        .iter()
        .filter_map(|r| match r.data() {
            Some(RData::AAAA(a)) => Some(a.0),
            _ => None,
        })
        .collect()
}

/// The NAT64 prefixes in a response to [`discovery_query`] (RFC 7050 §3): for each AAAA
/// record, the prefix lengths of RFC 6052 at which 192.0.0.170 is embedded; when it is found
/// at more than one length, 192.0.0.171 decides instead, and a record where neither is found
/// exactly once gives nothing. Distinct prefixes in answer order.
pub fn prefixes_from_answer(msg: &[u8]) -> Result<Vec<Prefix>, DiscoveryError> {
    let m = Message::from_vec(msg).map_err(|_| DiscoveryError::Malformed)?;
    if m.message_type() != MessageType::Response {
        return Err(DiscoveryError::Malformed);
    }
    let aaaa: Vec<Ipv6Addr> = m
        .answers()
        .iter()
        .filter_map(|r| match r.data() {
            Some(RData::AAAA(a)) => Some(a.0),
            _ => None,
        })
        .collect();
    if aaaa.is_empty() {
        return Err(DiscoveryError::NoAaaa);
    }
    let mut found: Vec<Prefix> = Vec::new();
    for a in aaaa {
        if let Some(p) = prefix_of(a) {
            if !found.contains(&p) {
                found.push(p);
            }
        }
    }
    if found.is_empty() {
        return Err(DiscoveryError::NoPrefix);
    }
    Ok(found)
}

/// The one prefix under which `a` embeds a well-known address (RFC 7050 §3). Public for
/// clients that get the AAAA records from their resolver rather than a DNS message
/// (`nat64-sample --class local-synthesis`).
pub fn prefix_of(a: Ipv6Addr) -> Option<Prefix> {
    for wka in WELL_KNOWN_IPV4 {
        let at: Vec<Prefix> = [32u8, 40, 48, 56, 64, 96]
            .into_iter()
            .filter_map(|len| {
                let p = Prefix::new(masked(a, len), len).ok()?;
                (p.extract(a) == Some(wka)).then_some(p)
            })
            .collect();
        if at.len() == 1 {
            return Some(at[0]);
        }
    }
    None
}

/// `a` with every bit past `len` cleared.
fn masked(a: Ipv6Addr, len: u8) -> Ipv6Addr {
    let bits = u128::from(a);
    let mask = if len == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(len))
    };
    Ipv6Addr::from(bits & mask)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dns64::{Dns64, Dns64Params, Zone};
    use crate::Outcome::{Drop, Forward, Reply};
    use etherparse::{NetHeaders, PacketHeaders, TransportHeader};
    use wire::build::{Ip, Tcp};
    use wire::packet::TcpHeader;

    /// The CLAT's IPv6 address and a server S = 198.51.100.10 behind the NAT64.
    fn c6() -> Ipv6Addr {
        "2001:db8:1::464".parse().unwrap()
    }
    const S: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 10);
    fn s6() -> Ipv6Addr {
        "64:ff9b::c633:640a".parse().unwrap()
    }
    fn clat() -> Clat {
        Clat::new(ClatParams::new(Prefix::default(), c6()), 5).unwrap()
    }
    fn now() -> Instant {
        Instant::from_secs(10)
    }
    fn forward(o: Outcome) -> Vec<u8> {
        match o {
            Forward(b) => b,
            other => panic!("expected Forward, got {other:?}"),
        }
    }

    /// etherparse's view, with every checksum checked.
    fn parsed(b: &[u8]) -> (NetHeaders, TransportHeader, Vec<u8>) {
        let h = PacketHeaders::from_ip_slice(b).expect("etherparse reads the packet");
        let payload = h.payload.slice().to_vec();
        let net = h.net.expect("an ip header");
        let tr = h.transport.expect("a transport header");
        match (&net, &tr) {
            (NetHeaders::Ipv4(ip, _), t) => {
                assert_eq!(ip.header_checksum, ip.calc_header_checksum());
                match t {
                    TransportHeader::Udp(u) => {
                        assert_eq!(u.checksum, u.calc_checksum_ipv4(ip, &payload).unwrap())
                    }
                    TransportHeader::Tcp(t) => {
                        assert_eq!(t.checksum, t.calc_checksum_ipv4(ip, &payload).unwrap())
                    }
                    TransportHeader::Icmpv4(i) => {
                        assert_eq!(i.checksum, i.icmp_type.calc_checksum(&payload))
                    }
                    TransportHeader::Icmpv6(_) => panic!("icmpv6 in ipv4"),
                }
            }
            (NetHeaders::Ipv6(ip, _), t) => match t {
                TransportHeader::Udp(u) => {
                    assert_eq!(u.checksum, u.calc_checksum_ipv6(ip, &payload).unwrap())
                }
                TransportHeader::Tcp(t) => {
                    assert_eq!(t.checksum, t.calc_checksum_ipv6(ip, &payload).unwrap())
                }
                TransportHeader::Icmpv6(i) => assert_eq!(
                    i.checksum,
                    i.icmp_type
                        .calc_checksum(ip.source, ip.destination, &payload)
                        .unwrap()
                ),
                TransportHeader::Icmpv4(_) => panic!("icmpv4 in ipv6"),
            },
            _ => panic!("not an ip packet"),
        }
        (net, tr, payload)
    }
    fn addrs6(n: &NetHeaders) -> (Ipv6Addr, Ipv6Addr) {
        let NetHeaders::Ipv6(ip, _) = n else {
            panic!("not ipv6")
        };
        (ip.source.into(), ip.destination.into())
    }
    fn addrs4(n: &NetHeaders) -> (Ipv4Addr, Ipv4Addr) {
        let NetHeaders::Ipv4(ip, _) = n else {
            panic!("not ipv4")
        };
        (ip.source.into(), ip.destination.into())
    }

    #[test]
    fn tcp_from_the_host_leaves_from_the_clat_address_to_the_prefix_and_comes_back() {
        let mut c = clat();
        let seg = Tcp::new(40000, 80, 1).window(65000).flags(TcpHeader::SYN);
        let syn = Ip::v4(HOST_IPV4, S).tcp(&seg, b"");
        let out = forward(c.translate_4to6(now(), &syn));
        let (net, tr, _) = parsed(&out);
        assert_eq!(addrs6(&net), (c6(), s6()));
        let TransportHeader::Tcp(t) = tr else {
            panic!()
        };
        assert!(
            t.syn && (t.source_port, t.destination_port) == (40000, 80),
            "ports kept"
        );

        let seg = Tcp::new(80, 40000, 9)
            .window(65000)
            .flags(TcpHeader::SYN)
            .ack(2);
        let synack = Ip::v6(s6(), c6()).hop_limit(60).tcp(&seg, b"");
        let back = forward(c.translate_6to4(now(), &synack));
        let (net, tr, _) = parsed(&back);
        assert_eq!(addrs4(&net), (S, HOST_IPV4));
        let NetHeaders::Ipv4(ip, _) = net else {
            panic!()
        };
        assert_eq!(
            ip.time_to_live, 59,
            "hop limit 60 decremented (rfc 7915 section 5.1)"
        );
        let TransportHeader::Tcp(t) = tr else {
            panic!()
        };
        assert!(t.syn && t.ack && t.destination_port == 40000);
        let s = c.stats();
        assert_eq!(
            (s.translated_4to6, s.translated_6to4, s.sessions),
            (1, 1, 0)
        );
    }

    #[test]
    fn udp_translates_both_ways_with_ports_and_payload_kept() {
        let mut c = clat();
        let q = Ip::v4(HOST_IPV4, S).udp(5353, 53, b"query");
        let (net, tr, payload) = parsed(&forward(c.translate_4to6(now(), &q)));
        assert_eq!(addrs6(&net), (c6(), s6()));
        assert!(
            matches!(tr, TransportHeader::Udp(u) if (u.source_port, u.destination_port) == (5353, 53))
        );
        assert_eq!(payload, b"query");
        // A reply arriving first needs no state: a stateless translator has none to miss.
        let mut fresh = clat();
        let a = Ip::v6(s6(), c6()).udp(53, 5353, b"answer");
        let (net, _, payload) = parsed(&forward(fresh.translate_6to4(now(), &a)));
        assert_eq!(addrs4(&net), (S, HOST_IPV4));
        assert_eq!(payload, b"answer");
    }

    #[test]
    fn icmp_echo_keeps_its_identifier_both_ways() {
        let mut c = clat();
        let req = Ip::v4(HOST_IPV4, S).echo_request(0x4242, 3, b"ping");
        let (net, tr, _) = parsed(&forward(c.translate_4to6(now(), &req)));
        assert_eq!(addrs6(&net), (c6(), s6()));
        let TransportHeader::Icmpv6(i) = tr else {
            panic!()
        };
        assert_eq!(
            i.icmp_type,
            etherparse::Icmpv6Type::EchoRequest(etherparse::IcmpEchoHeader { id: 0x4242, seq: 3 })
        );
        let rep = Ip::v6(s6(), c6()).echo_reply(0x4242, 3, b"ping");
        let (net, tr, _) = parsed(&forward(c.translate_6to4(now(), &rep)));
        assert_eq!(addrs4(&net), (S, HOST_IPV4));
        let TransportHeader::Icmpv4(i) = tr else {
            panic!()
        };
        assert_eq!(
            i.icmp_type,
            etherparse::Icmpv4Type::EchoReply(etherparse::IcmpEchoHeader { id: 0x4242, seq: 3 })
        );
    }

    #[test]
    fn packet_too_big_from_a_router_outside_the_prefix_becomes_frag_needed_from_the_dummy() {
        let mut c = clat();
        let seg = Tcp::new(40000, 80, 1).window(65000).ack(1);
        let big = Ip::v4(HOST_IPV4, S).tcp(&seg, &[7; 1400]);
        let sent = forward(c.translate_4to6(now(), &big));
        // A router of the IPv6 path, outside the prefix, says the link takes 1300.
        let router: Ipv6Addr = "2001:db8:ffff::1".parse().unwrap();
        let ptb = Ip::v6(router, c6()).icmp(2, 0, [0, 0, 0x05, 0x14], &sent[..1232]);
        let out = forward(c.translate_6to4(now(), &ptb));
        let (net, tr, inner) = parsed(&out);
        assert_eq!(
            addrs4(&net),
            (DUMMY_IPV4, HOST_IPV4),
            "rfc 7600's dummy address"
        );
        let TransportHeader::Icmpv4(i) = tr else {
            panic!()
        };
        assert_eq!(
            i.icmp_type,
            etherparse::Icmpv4Type::DestinationUnreachable(
                etherparse::icmpv4::DestUnreachableHeader::FragmentationNeeded {
                    next_hop_mtu: 1280
                }
            ),
            "1300 - 20 (rfc 7915 section 5.2)"
        );
        // The quoted packet (cut to fit 576 bytes) is the host's own segment again:
        // 192.0.0.2:40000 → S:80, its Total Length as the host sent it.
        assert_eq!(out.len(), 576);
        assert_eq!(u16::from_be_bytes([inner[2], inner[3]]), 1440);
        assert_eq!(&inner[12..16], &HOST_IPV4.octets());
        assert_eq!(&inner[16..20], &S.octets());
        assert_eq!(&inner[20..24], &[0x9c, 0x40, 0, 80]);
        assert_eq!(c.stats().icmp_errors_translated, 1);
    }

    #[test]
    fn port_unreachable_from_the_host_quotes_the_servers_datagram_in_ipv6() {
        let mut c = clat();
        let d = Ip::v6(s6(), c6()).udp(53, 7777, b"late");
        let to_host = forward(c.translate_6to4(now(), &d));
        let err = Ip::v4(HOST_IPV4, S).icmp(3, 3, [0; 4], &to_host);
        let out = forward(c.translate_4to6(now(), &err));
        let (net, tr, inner) = parsed(&out);
        assert_eq!(addrs6(&net), (c6(), s6()));
        let TransportHeader::Icmpv6(i) = tr else {
            panic!()
        };
        assert_eq!(
            i.icmp_type,
            etherparse::Icmpv6Type::DestinationUnreachable(
                etherparse::icmpv6::DestUnreachableCode::Port
            )
        );
        let h = PacketHeaders::from_ip_slice(&inner).unwrap();
        let Some(NetHeaders::Ipv6(iip, _)) = h.net else {
            panic!()
        };
        assert_eq!(
            (Ipv6Addr::from(iip.source), Ipv6Addr::from(iip.destination)),
            (s6(), c6())
        );
        let Some(TransportHeader::Udp(u)) = h.transport else {
            panic!()
        };
        assert_eq!((u.source_port, u.destination_port), (53, 7777));
        assert_eq!(
            u.checksum,
            u.calc_checksum_ipv6(&iip, h.payload.slice()).unwrap()
        );
    }

    /// An IPv4 fragment of the host's, `off8` in 8-byte units.
    fn frag4(id: u16, off8: u16, more: bool, part: &[u8]) -> Vec<u8> {
        Ip::v4(HOST_IPV4, S)
            .dont_fragment(false)
            .fragment(17, id.into(), off8, more, part)
    }

    #[test]
    fn fragments_translate_without_state_even_out_of_order() {
        let mut c = clat();
        let whole = Ip::v4(HOST_IPV4, S).udp(4000, 9, &[5; 40]);
        let l4 = whole[20..].to_vec();
        // The later fragment first: a stateless translator needs nothing from the first.
        let b = forward(c.translate_4to6(now(), &frag4(0x99, 3, false, &l4[24..])));
        let a = forward(c.translate_4to6(now(), &frag4(0x99, 0, true, &l4[..24])));
        for f in [&a, &b] {
            assert_eq!(f[6], 44, "a fragment header");
            assert_eq!(&f[8..24], &c6().octets());
            assert_eq!(&f[24..40], &s6().octets());
            assert_eq!(&f[44..48], &0x99u32.to_be_bytes());
        }
        assert_eq!((a[40], u16::from_be_bytes([a[42], a[43]])), (17, 1));
        assert_eq!(u16::from_be_bytes([b[42], b[43]]), 3 << 3);
        // Reassembled, the IPv6 datagram checks out.
        let mut re = a[..40].to_vec();
        re[6] = 17;
        re.extend_from_slice(&a[48..]);
        re.extend_from_slice(&b[48..]);
        let plen = (re.len() - 40) as u16;
        re[4..6].copy_from_slice(&plen.to_be_bytes());
        let (_, _, payload) = parsed(&re);
        assert_eq!(payload, vec![5; 40]);
    }

    #[test]
    fn packets_that_are_not_the_clats_are_dropped_with_reasons() {
        let mut c = clat();
        let other_src = Ip::v4(Ipv4Addr::new(10, 0, 0, 9), S).udp(1, 2, b"x");
        assert_eq!(
            c.translate_4to6(now(), &other_src),
            Drop(DropReason::NotOurs)
        );
        let to_else = Ip::v6(s6(), "2001:db8:1::1".parse().unwrap()).udp(1, 2, b"x");
        assert_eq!(c.translate_6to4(now(), &to_else), Drop(DropReason::NotOurs));
        let outside = Ip::v6("2001:db8:2::5".parse().unwrap(), c6()).udp(1, 2, b"x");
        assert_eq!(
            c.translate_6to4(now(), &outside),
            Drop(DropReason::NotInPrefix),
            "only errors may come from outside the prefix"
        );
        let multicast = Ip::v4(HOST_IPV4, Ipv4Addr::new(224, 0, 0, 251)).udp(5353, 5353, b"mdns");
        assert_eq!(
            c.translate_4to6(now(), &multicast),
            Drop(DropReason::BadAddress)
        );
        let ttl1 = Ip::v4(HOST_IPV4, S).hop_limit(1).udp(1, 2, b"x");
        let Reply(te) = c.translate_4to6(now(), &ttl1) else {
            panic!("time exceeded expected")
        };
        let (net, _, _) = parsed(&te);
        assert_eq!(
            addrs4(&net),
            (GATEWAY_IPV4, HOST_IPV4),
            "from the host's gateway"
        );
        assert_eq!(c.stats().total_drops(), 5);
        assert!(
            Clat::new(ClatParams::new(Prefix::default(), s6()), 0).is_err(),
            "inside the prefix"
        );
    }

    #[test]
    fn discovery_finds_the_dns64s_prefix_from_ipv4only_arpa() {
        for p in ["64:ff9b::/96", "2001:db8:64::/48", "2001:db8::/32"] {
            let prefix: Prefix = p.parse().unwrap();
            let d = Dns64::new(
                Dns64Params {
                    prefix,
                    ..Dns64Params::default()
                },
                Zone::new(),
            );
            let answer = d.answer(&discovery_query(7)).unwrap();
            assert_eq!(prefixes_from_answer(&answer), Ok(vec![prefix]), "{p}");
        }
        let q = discovery_query(7);
        assert_eq!(prefixes_from_answer(&q), Err(DiscoveryError::Malformed));
        assert_eq!(
            prefixes_from_answer(b"junk"),
            Err(DiscoveryError::Malformed)
        );
    }

    #[test]
    fn a_well_known_address_found_twice_defers_to_the_other() {
        // 192.0.0.170 at /56 and at /96: ambiguous, so 192.0.0.171 must decide, and it is
        // not in this record: no prefix from it (RFC 7050 §3).
        let twice: Ipv6Addr = "2001:db8:0:c0:0:aa:c000:aa".parse().unwrap();
        assert_eq!(prefix_of(twice), None);
        // The record synthesised from 192.0.0.171 decides on its own.
        let other: Ipv6Addr = "64:ff9b::c000:ab".parse().unwrap();
        assert_eq!(prefix_of(other), Some(Prefix::default()));
    }
}

#[cfg(test)]
mod proptests {
    //! The fuzz target `clat_translate`'s entry points on stable: arbitrary and mutated
    //! packets never panic, every packet is accounted for once, and what comes out parses.
    use super::*;
    use proptest::prelude::*;

    fn c6() -> Ipv6Addr {
        "2001:db8:1::464".parse().unwrap()
    }

    /// Valid packets to mutate: UDP and an ICMP echo from the host, TCP and a Packet Too Big
    /// from the network.
    fn seeds() -> Vec<(bool, Vec<u8>)> {
        use wire::build::{Ip, Tcp};
        use wire::packet::TcpHeader;
        let s4 = Ipv4Addr::new(198, 51, 100, 10);
        let s6 = Prefix::default().embed(s4);
        let syn_ack = Tcp::new(80, 40000, 1)
            .window(100)
            .flags(TcpHeader::SYN)
            .ack(2);
        let b = Ip::v6(s6, c6()).tcp(&syn_ack, b"");
        vec![
            (false, Ip::v4(HOST_IPV4, s4).udp(5000, 53, b"hello")),
            (false, Ip::v4(HOST_IPV4, s4).echo_request(7, 1, b"ping")),
            (true, b.clone()),
            (true, Ip::v6(s6, c6()).icmp(2, 0, [0, 0, 5, 0], &b)),
        ]
    }

    fn run(six: bool, p: &[u8]) -> Result<(), TestCaseError> {
        let mut c = Clat::new(ClatParams::new(Prefix::default(), c6()), 1).unwrap();
        let o = if six {
            c.translate_6to4(Instant::ZERO, p)
        } else {
            c.translate_4to6(Instant::ZERO, p)
        };
        let s = c.stats();
        prop_assert_eq!(s.translated_6to4 + s.translated_4to6 + s.total_drops(), 1);
        if let Outcome::Forward(b) | Outcome::Reply(b) = o {
            prop_assert!(wire::packet::parse(&b).is_ok());
        }
        Ok(())
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic_and_are_counted(data in proptest::collection::vec(any::<u8>(), 0..200), six in any::<bool>()) {
            let mut data = data;
            if let Some(b) = data.first_mut() {
                *b = (*b & 0x0f) | if six { 0x60 } else { 0x45 };
            }
            run(six, &data)?;
            let _ = prefixes_from_answer(&data);
        }

        #[test]
        fn mutated_valid_packets_never_panic(which in 0usize..4, edits in proptest::collection::vec((any::<u16>(), any::<u8>()), 0..6), cut in any::<u16>()) {
            let (six, mut p) = seeds().swap_remove(which);
            for (at, val) in edits {
                let i = usize::from(at) % p.len();
                p[i] = val;
            }
            p.truncate(usize::from(cut) % (p.len() + 8));
            run(six, &p)?;
        }
    }
}
