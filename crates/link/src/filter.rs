//! The drop-filter language: which packets a link direction drops on purpose.
//!
//! A filter is a conjunction of words, each optionally negated:
//!
//! ```text
//! filter := term ("and" term)*
//! term   := "not" term | prim
//! prim   := "tcp" ["syn"] ["port" N] | "udp" ["port" N] | "icmp" | "icmpv6"
//!         | "ipv4" | "ipv6" | "ecn" ("notect" | "ect0" | "ect1" | "ce")
//! ```
//!
//! `tcp syn` matches any TCP segment with SYN set (the SYN and the SYN-ACK, as tcpdump's
//! `tcp[tcpflags] & tcp-syn != 0`); `port N` matches either port, as tcpdump's `port`. A
//! fragment after the first has no ports, so `port` never matches it. Bytes that are not a
//! readable IP packet match nothing (not even `not ipv4`). Several filters on one link drop a
//! packet that any of them matches. Enough for a Wi-Fi that is associated but where connects
//! fail (`tcp syn`), broken IPv6 (`ipv6`), a PMTU black hole (`icmp`), QUIC blocked
//! (`udp port 443`).
//!
//! Not here: parentheses and `or` (repeat the option instead), addresses, other TCP flags.

use std::fmt;

use wire::Ecn;

/// One primitive test on a packet.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Prim {
    Tcp { syn: bool, port: Option<u16> },
    Udp { port: Option<u16> },
    Icmp,
    Icmpv6,
    Ipv4,
    Ipv6,
    Ecn(Ecn),
}

/// A word of the conjunction, possibly negated.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Term {
    pub negated: bool,
    pub prim: Prim,
}

/// A parsed drop filter: every term must hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Filter {
    pub terms: Vec<Term>,
}

/// A filter that cannot be read: the text, the word where reading stopped, and what was expected
/// there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FilterError {
    pub text: String,
    /// The offending word, or `None` when the text ended too soon.
    pub word: Option<String>,
    pub expected: &'static str,
}

impl fmt::Display for FilterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.word {
            Some(w) => write!(
                f,
                "cannot read filter '{}': '{w}' where {} was expected",
                self.text, self.expected
            ),
            None => write!(
                f,
                "cannot read filter '{}': it ends where {} was expected",
                self.text, self.expected
            ),
        }
    }
}

impl std::error::Error for FilterError {}

const PRIM_WORDS: &str = "one of tcp, udp, icmp, icmpv6, ipv4, ipv6, ecn, not";

fn ecn_name(e: Ecn) -> &'static str {
    match e {
        Ecn::NotEct => "notect",
        Ecn::Ect0 => "ect0",
        Ecn::Ect1 => "ect1",
        Ecn::Ce => "ce",
    }
}

impl Filter {
    pub fn parse(text: &str) -> Result<Filter, FilterError> {
        let words: Vec<&str> = text.split_whitespace().collect();
        let err = |i: usize, expected: &'static str| FilterError {
            text: text.to_string(),
            word: words.get(i).map(|w| w.to_string()),
            expected,
        };
        let mut i = 0;
        let mut terms = Vec::new();
        loop {
            let mut negated = false;
            while words.get(i) == Some(&"not") {
                negated = !negated;
                i += 1;
            }
            let port = |i: &mut usize| -> Result<Option<u16>, FilterError> {
                if words.get(*i) != Some(&"port") {
                    return Ok(None);
                }
                *i += 1;
                let n = words
                    .get(*i)
                    .and_then(|w| w.parse::<u16>().ok())
                    .ok_or_else(|| err(*i, "a port number 0..65535"))?;
                *i += 1;
                Ok(Some(n))
            };
            let prim = match words.get(i).copied() {
                Some("tcp") => {
                    i += 1;
                    let syn = words.get(i) == Some(&"syn");
                    if syn {
                        i += 1;
                    }
                    Prim::Tcp {
                        syn,
                        port: port(&mut i)?,
                    }
                }
                Some("udp") => {
                    i += 1;
                    Prim::Udp {
                        port: port(&mut i)?,
                    }
                }
                Some("icmp") => {
                    i += 1;
                    Prim::Icmp
                }
                Some("icmpv6") => {
                    i += 1;
                    Prim::Icmpv6
                }
                Some("ipv4") => {
                    i += 1;
                    Prim::Ipv4
                }
                Some("ipv6") => {
                    i += 1;
                    Prim::Ipv6
                }
                Some("ecn") => {
                    i += 1;
                    let e = match words.get(i).copied() {
                        Some("notect") => Ecn::NotEct,
                        Some("ect0") => Ecn::Ect0,
                        Some("ect1") => Ecn::Ect1,
                        Some("ce") => Ecn::Ce,
                        _ => return Err(err(i, "one of notect, ect0, ect1, ce")),
                    };
                    i += 1;
                    Prim::Ecn(e)
                }
                _ => return Err(err(i, PRIM_WORDS)),
            };
            terms.push(Term { negated, prim });
            match words.get(i).copied() {
                None => return Ok(Filter { terms }),
                Some("and") => i += 1,
                Some(_) => return Err(err(i, "'and' or the end")),
            }
        }
    }

    /// Whether the packet matches; bytes that are not a readable IP packet never do.
    pub fn matches(&self, data: &[u8]) -> bool {
        match Facts::of(data) {
            Some(f) => self.terms.iter().all(|t| f.has(t.prim) != t.negated),
            None => false,
        }
    }
}

impl fmt::Display for Filter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, t) in self.terms.iter().enumerate() {
            if i > 0 {
                f.write_str(" and ")?;
            }
            if t.negated {
                f.write_str("not ")?;
            }
            match t.prim {
                Prim::Tcp { syn, port } => {
                    f.write_str("tcp")?;
                    if syn {
                        f.write_str(" syn")?;
                    }
                    if let Some(p) = port {
                        write!(f, " port {p}")?;
                    }
                }
                Prim::Udp { port } => {
                    f.write_str("udp")?;
                    if let Some(p) = port {
                        write!(f, " port {p}")?;
                    }
                }
                Prim::Icmp => f.write_str("icmp")?,
                Prim::Icmpv6 => f.write_str("icmpv6")?,
                Prim::Ipv4 => f.write_str("ipv4")?,
                Prim::Ipv6 => f.write_str("ipv6")?,
                Prim::Ecn(e) => write!(f, "ecn {}", ecn_name(e))?,
            }
        }
        Ok(())
    }
}

/// What the filter words can ask of one packet, read once.
struct Facts {
    version: u8,
    proto: u8,
    ecn: Ecn,
    /// Source and destination port, for a TCP or UDP header that is present (not a later
    /// fragment).
    ports: Option<(u16, u16)>,
    tcp_flags: u8,
}

impl Facts {
    fn of(data: &[u8]) -> Option<Facts> {
        let (version, proto, l4, first_fragment) = match data.first()? >> 4 {
            4 if data.len() >= 20 => {
                let ihl = usize::from(data[0] & 0x0f) * 4;
                let offset = u16::from_be_bytes([data[6], data[7]]) & 0x1fff;
                (4, data[9], ihl, offset == 0)
            }
            6 if data.len() >= 40 => {
                if matches!(data[6], 6 | 17 | 58 | 1) {
                    (6, data[6], 40, true)
                } else {
                    // Extension headers: the checked parse finds the upper layer.
                    let h = wire::packet::parse(data).ok()?;
                    let first = !h.ip.fragment
                        || matches!(
                            h.transport,
                            wire::packet::Transport::Tcp(_) | wire::packet::Transport::Udp { .. }
                        );
                    (6, h.ip.proto.0, h.ip.header_len, first)
                }
            }
            _ => return None,
        };
        let ports = match proto {
            6 | 17 if first_fragment => data.get(l4..l4 + 4).map(|b| {
                (
                    u16::from_be_bytes([b[0], b[1]]),
                    u16::from_be_bytes([b[2], b[3]]),
                )
            }),
            _ => None,
        };
        let tcp_flags = match proto {
            6 if first_fragment => data.get(l4 + 13).copied().unwrap_or(0),
            _ => 0,
        };
        Some(Facts {
            version,
            proto,
            ecn: wire::packet::ecn_of(data),
            ports,
            tcp_flags,
        })
    }

    fn has(&self, p: Prim) -> bool {
        let port_ok = |want: Option<u16>| match (want, self.ports) {
            (None, _) => true,
            (Some(n), Some((s, d))) => s == n || d == n,
            (Some(_), None) => false,
        };
        match p {
            Prim::Tcp { syn, port } => {
                self.proto == 6
                    && (!syn || (self.ports.is_some() && self.tcp_flags & 0x02 != 0))
                    && port_ok(port)
            }
            Prim::Udp { port } => self.proto == 17 && port_ok(port),
            Prim::Icmp => self.version == 4 && self.proto == 1,
            Prim::Icmpv6 => self.version == 6 && self.proto == 58,
            Prim::Ipv4 => self.version == 4,
            Prim::Ipv6 => self.version == 6,
            Prim::Ecn(e) => self.ecn == e,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use wire::build::{Ip, Tcp};
    use wire::packet::TcpHeader;

    /// An IPv4 packet: TCP with `flags`, UDP, or an ICMP echo request (protocol 1); ports;
    /// ECN bits.
    fn v4(proto: u8, flags: u8, sport: u16, dport: u16, ecn: u8) -> Vec<u8> {
        let ip = Ip::v4([10, 0, 0, 1].into(), [10, 0, 0, 2].into()).ecn(Ecn::from_bits(ecn));
        match proto {
            6 => ip.tcp(&Tcp::new(sport, dport, 0).flags(flags), &[]),
            17 => ip.udp(sport, dport, &[]),
            _ => ip.echo_request(0, 0, &[]),
        }
    }

    /// An IPv6 TCP SYN (next header 6) or ICMPv6 echo request.
    fn v6(next: u8, sport: u16, dport: u16) -> Vec<u8> {
        let fd = |last: u16| std::net::Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, last);
        let ip = Ip::v6(fd(1), fd(2));
        match next {
            6 => ip.tcp(&Tcp::new(sport, dport, 0).flags(TcpHeader::SYN), &[]),
            _ => ip.echo_request(0, 0, &[]),
        }
    }

    fn m(f: &str, p: &[u8]) -> bool {
        Filter::parse(f).unwrap().matches(p)
    }

    #[test]
    fn each_filter_word_matches_what_it_names() {
        let syn = v4(6, 0x02, 40000, 443, 0);
        let synack = v4(6, 0x12, 443, 40000, 0);
        let ack = v4(6, 0x10, 40000, 443, 0);
        let quic = v4(17, 0, 50000, 443, 0);
        let dns = v4(17, 0, 50000, 53, 0);
        let ping = v4(1, 0, 0, 0, 0);
        let ect1 = v4(17, 0, 1, 2, 0b01);
        let syn6 = v6(6, 40000, 80);
        let ping6 = v6(58, 0, 0);

        assert!(m("tcp", &ack) && !m("tcp", &quic));
        assert!(m("tcp syn", &syn) && m("tcp syn", &synack) && !m("tcp syn", &ack));
        assert!(m("tcp syn", &syn6));
        assert!(m("tcp port 443", &ack) && m("tcp port 443", &synack));
        assert!(!m("tcp port 80", &ack) && !m("tcp port 443", &quic));
        assert!(m("udp", &dns) && !m("udp", &ack));
        assert!(m("udp port 443", &quic) && !m("udp port 443", &dns));
        assert!(m("icmp", &ping) && !m("icmp", &ping6) && !m("icmp", &dns));
        assert!(m("icmpv6", &ping6) && !m("icmpv6", &ping));
        assert!(m("ipv4", &ping) && !m("ipv4", &ping6));
        assert!(m("ipv6", &syn6) && !m("ipv6", &syn));
        assert!(m("ecn ect1", &ect1) && !m("ecn ect1", &dns) && m("ecn notect", &dns));
        assert!(m("not ipv6", &syn) && !m("not ipv6", &syn6));
        assert!(m("tcp syn and ipv4", &syn) && !m("tcp syn and ipv4", &syn6));
        assert!(m("udp and not udp port 53", &quic) && !m("udp and not udp port 53", &dns));
        assert!(m("not not tcp", &syn));
    }

    #[test]
    fn garbage_and_later_fragments_match_nothing_port_based() {
        assert!(!m("not ipv4", &[0x45, 0, 0]));
        assert!(!m("not tcp", &[]));
        let mut frag = v4(6, 0x02, 40000, 443, 0);
        frag[7] = 0x10; // fragment offset 16 × 8 bytes
        assert!(m("tcp", &frag));
        assert!(!m("tcp port 443", &frag) && !m("tcp syn", &frag));
    }

    #[test]
    fn bad_filters_name_the_word_and_what_was_expected() {
        let e = Filter::parse("tcp syn or udp").unwrap_err();
        assert_eq!(
            e.to_string(),
            "cannot read filter 'tcp syn or udp': 'or' where 'and' or the end was expected"
        );
        let e = Filter::parse("udp port").unwrap_err();
        assert_eq!(
            e.to_string(),
            "cannot read filter 'udp port': it ends where a port number 0..65535 was expected"
        );
        for bad in [
            "",
            "and tcp",
            "tcp and",
            "ecn ect2",
            "udp port 70000",
            "not",
            "sctp",
        ] {
            assert!(Filter::parse(bad).is_err(), "{bad}");
        }
    }

    fn prim() -> impl Strategy<Value = Prim> {
        let port = proptest::option::of(any::<u16>());
        prop_oneof![
            (any::<bool>(), port.clone()).prop_map(|(syn, port)| Prim::Tcp { syn, port }),
            port.prop_map(|port| Prim::Udp { port }),
            Just(Prim::Icmp),
            Just(Prim::Icmpv6),
            Just(Prim::Ipv4),
            Just(Prim::Ipv6),
            (0u8..4).prop_map(|b| Prim::Ecn(Ecn::from_bits(b))),
        ]
    }

    proptest! {
        #[test]
        fn a_printed_filter_parses_back_to_itself(
            terms in proptest::collection::vec(
                (any::<bool>(), prim()).prop_map(|(negated, prim)| Term { negated, prim }),
                1..6,
            )
        ) {
            let f = Filter { terms };
            prop_assert_eq!(Filter::parse(&f.to_string()).unwrap(), f);
        }

        #[test]
        fn any_text_is_an_error_or_a_filter_that_prints_back(s in "[a-z0-9 ]{0,40}") {
            if let Ok(f) = Filter::parse(&s) {
                prop_assert_eq!(Filter::parse(&f.to_string()).unwrap(), f);
            }
        }

        #[test]
        fn matching_arbitrary_bytes_never_panics(data in proptest::collection::vec(any::<u8>(), 0..100)) {
            let f = Filter::parse("tcp syn port 443 and not ecn ce").unwrap();
            let _ = f.matches(&data);
        }
    }
}
