//! DNS64 (RFC 6147) for the lab's own names: answers DNS queries from a small zone (name → A,
//! AAAA, CNAME), synthesising AAAA records from A records under the NAT64 prefix.
//!
//! What it does: AAAA synthesis when a name has no AAAA (or only ones in ::ffff:0:0/96,
//! §5.1.4), the synthesised TTL rule (§5.1.7), CNAME chains (§5.1.6), NXDOMAIN passed through
//! (§5.1.2), PTR answers for ip6.arpa names under the prefix with a CNAME to the in-addr.arpa
//! name (§5.3.1), the RFC 7050/8880 `ipv4only.arpa` names, and FORMERR/NOTIMP/REFUSED for
//! queries it cannot answer. A queries get the zone's A records unchanged.
//!
//! What it does not do: recursion to the outside world (the lab is closed: every name is the
//! zone's), DNSSEC (no signatures; the DO bit is not honoured, as §5.5 allows a validator-less
//! DNS64 to), and I/O: the lab shell owns the sockets and calls [`Dns64::answer`] or
//! [`serve_once`].

use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::rdata::{A, AAAA, CNAME, PTR, SOA};
use hickory_proto::rr::{DNSClass, Name, RData, Record, RecordType};

use crate::prefix::Prefix;

/// RFC 7050 §2.2 / RFC 8880 §2: the name whose A records reveal the NAT64 prefix.
pub const IPV4ONLY_ARPA: &str = "ipv4only.arpa.";
/// The well-known addresses of `ipv4only.arpa` (RFC 7050 §2.2).
pub const IPV4ONLY_ADDRS: [Ipv4Addr; 2] =
    [Ipv4Addr::new(192, 0, 0, 170), Ipv4Addr::new(192, 0, 0, 171)];
/// Longest CNAME chain followed before answering SERVFAIL (a loop, most likely).
const MAX_CNAME_CHAIN: usize = 8;
/// A DNS header is 12 bytes (RFC 1035 §4.1.1).
const HEADER_BYTES: usize = 12;
/// UDP answers without EDNS are at most 512 bytes (RFC 1035 §4.2.1).
const UDP_PLAIN_LIMIT_BYTES: usize = 512;
/// The EDNS UDP payload size this server offers (the DNS Flag Day 2020 value).
const EDNS_PAYLOAD_BYTES: u16 = 1232;

/// Why bytes got no DNS answer at all.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DnsError {
    /// Too short to hold even a header, so no FORMERR can carry its id.
    TooShort(usize),
    /// A response, not a query: answering would risk a loop.
    NotAQuery,
    /// The answer could not be encoded (the text says why).
    Encode(String),
    /// A zone entry with a name that is not a domain name.
    BadName(String),
}

impl fmt::Display for DnsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DnsError::TooShort(n) => write!(f, "dns message of {n} bytes is shorter than a header"),
            DnsError::NotAQuery => write!(f, "dns message is a response, not a query"),
            DnsError::Encode(e) => write!(f, "cannot encode dns answer: {e}"),
            DnsError::BadName(n) => write!(f, "{n:?} is not a domain name"),
        }
    }
}

impl std::error::Error for DnsError {}

/// One name's records.
#[derive(Clone, Debug, Default)]
struct Entry {
    a: Vec<(Ipv4Addr, u32)>,
    aaaa: Vec<(Ipv6Addr, u32)>,
    cname: Option<(Name, u32)>,
}

/// The names the DNS64 answers for: the lab's hosts. Names are case-insensitive and taken as
/// fully qualified (`server` is `server.`).
#[derive(Clone, Debug, Default)]
pub struct Zone {
    names: HashMap<Name, Entry>,
}

fn fqdn(name: &str) -> Result<Name, DnsError> {
    let mut n = Name::from_ascii(name).map_err(|_| DnsError::BadName(name.to_string()))?;
    n.set_fqdn(true);
    Ok(n.to_lowercase())
}

impl Zone {
    pub fn new() -> Zone {
        Zone::default()
    }
    /// Adds an A record.
    pub fn add_a(
        &mut self,
        name: &str,
        addr: Ipv4Addr,
        ttl_secs: u32,
    ) -> Result<&mut Zone, DnsError> {
        self.names
            .entry(fqdn(name)?)
            .or_default()
            .a
            .push((addr, ttl_secs));
        Ok(self)
    }
    /// Adds an AAAA record.
    pub fn add_aaaa(
        &mut self,
        name: &str,
        addr: Ipv6Addr,
        ttl_secs: u32,
    ) -> Result<&mut Zone, DnsError> {
        self.names
            .entry(fqdn(name)?)
            .or_default()
            .aaaa
            .push((addr, ttl_secs));
        Ok(self)
    }
    /// Makes `name` an alias of `target`.
    pub fn add_cname(
        &mut self,
        name: &str,
        target: &str,
        ttl_secs: u32,
    ) -> Result<&mut Zone, DnsError> {
        let t = fqdn(target)?;
        self.names.entry(fqdn(name)?).or_default().cname = Some((t, ttl_secs));
        Ok(self)
    }

    /// The first name with `addr` among its addresses, for PTR answers.
    fn name_of(&self, addr: IpAddr) -> Option<(&Name, u32)> {
        let mut best: Option<(&Name, u32)> = None;
        for (n, e) in &self.names {
            let hit = match addr {
                IpAddr::V4(a) => e.a.iter().find(|r| r.0 == a).map(|r| r.1),
                IpAddr::V6(a) => e.aaaa.iter().find(|r| r.0 == a).map(|r| r.1),
            };
            // The smallest name wins, so the answer does not depend on hash order.
            if let Some(ttl) = hit {
                if best.is_none_or(|(b, _)| n < b) {
                    best = Some((n, ttl));
                }
            }
        }
        best
    }
}

/// Parameters of the DNS64.
#[derive(Clone, Debug)]
pub struct Dns64Params {
    /// Pref64::/n for synthesis (default 64:ff9b::/96).
    pub prefix: Prefix,
    /// The SOA minimum, used as the negative-caching TTL (RFC 2308) and as the cap on
    /// synthesised AAAA TTLs (RFC 6147 §5.1.7). Default 600 s.
    pub negative_ttl_secs: u32,
    /// TTL of the built-in `ipv4only.arpa` A records (RFC 8880 §7.2 leaves it to the server;
    /// a day, as the records never change).
    pub ipv4only_ttl_secs: u32,
}

impl Default for Dns64Params {
    fn default() -> Dns64Params {
        Dns64Params {
            prefix: Prefix::default(),
            negative_ttl_secs: 600,
            ipv4only_ttl_secs: 86_400,
        }
    }
}

/// A DNS64 over a [`Zone`].
#[derive(Clone, Debug)]
pub struct Dns64 {
    params: Dns64Params,
    zone: Zone,
    ipv4only: Name,
    soa: Record,
}

/// What a name resolves to after its CNAME chain.
struct Resolved {
    chain: Vec<Record>,
    last: Name,
}

impl Dns64 {
    pub fn new(params: Dns64Params, zone: Zone) -> Dns64 {
        let root = Name::root();
        let soa = SOA::new(
            Name::from_ascii("ns.latencylab.").expect("literal name"),
            Name::from_ascii("hostmaster.latencylab.").expect("literal name"),
            1,
            3600,
            600,
            86_400,
            params.negative_ttl_secs,
        );
        Dns64 {
            soa: Record::from_rdata(root, params.negative_ttl_secs, RData::SOA(soa)),
            ipv4only: Name::from_ascii(IPV4ONLY_ARPA).expect("literal name"),
            params,
            zone,
        }
    }

    pub fn params(&self) -> &Dns64Params {
        &self.params
    }

    /// The answer to one query message, without size limit (as over TCP). Malformed queries
    /// get FORMERR, unknown opcodes NOTIMP, classes other than IN REFUSED, when the header can
    /// be read; an `Err` means no answer should be sent.
    pub fn answer(&self, query: &[u8]) -> Result<Vec<u8>, DnsError> {
        self.answer_limited(query, usize::from(u16::MAX))
    }

    /// The answer as over UDP: cut to 512 bytes, or the client's EDNS size (at most 1232),
    /// with TC set when records had to go (RFC 1035 §4.2.1, RFC 6891 §6.2.5).
    pub fn answer_udp(&self, query: &[u8]) -> Result<Vec<u8>, DnsError> {
        self.answer_limited(query, UDP_PLAIN_LIMIT_BYTES)
    }

    fn answer_limited(&self, query: &[u8], plain_limit: usize) -> Result<Vec<u8>, DnsError> {
        if query.len() < HEADER_BYTES {
            return Err(DnsError::TooShort(query.len()));
        }
        // QR bit: never answer a response.
        if query[2] & 0x80 != 0 {
            return Err(DnsError::NotAQuery);
        }
        let id = u16::from_be_bytes([query[0], query[1]]);
        let Ok(msg) = Message::from_vec(query) else {
            return Ok(error_bytes(id, query[2], ResponseCode::FormErr));
        };
        let mut resp = Message::new();
        resp.set_id(msg.id())
            .set_message_type(MessageType::Response)
            .set_op_code(msg.op_code())
            .set_recursion_desired(msg.recursion_desired())
            .set_recursion_available(true);
        let over_udp = plain_limit == UDP_PLAIN_LIMIT_BYTES;
        let mut limit = if over_udp {
            UDP_PLAIN_LIMIT_BYTES
        } else {
            usize::from(u16::MAX)
        };
        if let Some(e) = msg.extensions() {
            let mut edns = Edns::new();
            edns.set_max_payload(EDNS_PAYLOAD_BYTES);
            resp.set_edns(edns);
            if over_udp {
                limit = usize::from(e.max_payload().clamp(512, EDNS_PAYLOAD_BYTES));
            }
        }
        if msg.op_code() != OpCode::Query {
            resp.set_response_code(ResponseCode::NotImp);
            return encode(&resp, limit);
        }
        if msg.queries().len() != 1 {
            resp.set_response_code(ResponseCode::FormErr);
            return encode(&resp, limit);
        }
        let q = &msg.queries()[0];
        resp.add_query(q.clone());
        if !matches!(q.query_class(), DNSClass::IN | DNSClass::ANY) {
            resp.set_response_code(ResponseCode::Refused);
            return encode(&resp, limit);
        }
        self.fill(q, &mut resp);
        encode(&resp, limit)
    }

    /// Follows CNAMEs from `name` (RFC 6147 §5.1.6: synthesis happens at the end of the
    /// chain, and the chain is part of the answer). `None` for a loop or an overlong chain.
    fn resolve(&self, name: &Name) -> Option<Resolved> {
        let mut chain = Vec::new();
        let mut cur = name.to_lowercase();
        for _ in 0..MAX_CNAME_CHAIN {
            match self.zone.names.get(&cur).and_then(|e| e.cname.as_ref()) {
                Some((target, ttl)) => {
                    chain.push(Record::from_rdata(
                        cur.clone(),
                        *ttl,
                        RData::CNAME(CNAME(target.clone())),
                    ));
                    cur = target.clone();
                }
                None => return Some(Resolved { chain, last: cur }),
            }
        }
        None
    }

    fn a_records(&self, name: &Name) -> Option<Vec<(Ipv4Addr, u32)>> {
        if *name == self.ipv4only {
            return Some(
                IPV4ONLY_ADDRS
                    .iter()
                    .map(|&a| (a, self.params.ipv4only_ttl_secs))
                    .collect(),
            );
        }
        self.zone.names.get(name).map(|e| e.a.clone())
    }

    fn exists(&self, name: &Name) -> bool {
        *name == self.ipv4only || self.zone.names.contains_key(name)
    }

    fn fill(&self, q: &Query, resp: &mut Message) {
        let qname = q.name().to_lowercase();
        // Names under ip6.arpa / in-addr.arpa are reverse lookups (§5.3).
        if q.query_type() == RecordType::PTR {
            return self.fill_ptr(q.name(), &qname, resp);
        }
        let Some(r) = self.resolve(&qname) else {
            resp.set_response_code(ResponseCode::ServFail);
            return;
        };
        // Answers carry the owner name as the client wrote it for the first record.
        let mut answers = r.chain;
        if let Some(first) = answers.first_mut() {
            first.set_name(q.name().clone());
        }
        let owner = if answers.is_empty() {
            q.name().clone()
        } else {
            r.last.clone()
        };
        let mut found = false;
        match q.query_type() {
            RecordType::A => {
                for (a, ttl) in self.a_records(&r.last).unwrap_or_default() {
                    answers.push(Record::from_rdata(owner.clone(), ttl, RData::A(A(a))));
                    found = true;
                }
            }
            RecordType::AAAA => {
                // §5.1.4: AAAA records in ::ffff:0:0/96 count as none.
                let real: Vec<_> = self
                    .zone
                    .names
                    .get(&r.last)
                    .map(|e| {
                        e.aaaa
                            .iter()
                            .filter(|(a, _)| !is_v4_mapped(*a))
                            .copied()
                            .collect()
                    })
                    .unwrap_or_default();
                if !real.is_empty() {
                    for (a, ttl) in real {
                        answers.push(Record::from_rdata(owner.clone(), ttl, RData::AAAA(AAAA(a))));
                    }
                } else {
                    // §5.1.7: the synthesised TTL is min(A TTL, SOA minimum).
                    for (a, ttl) in self.a_records(&r.last).unwrap_or_default() {
                        let ttl = ttl.min(self.params.negative_ttl_secs);
                        let v6 = self.params.prefix.embed(a);
                        answers.push(Record::from_rdata(
                            owner.clone(),
                            ttl,
                            RData::AAAA(AAAA(v6)),
                        ));
                    }
                }
                found = answers
                    .iter()
                    .any(|rec| rec.record_type() == RecordType::AAAA);
            }
            RecordType::ANY => {
                for (a, ttl) in self.a_records(&r.last).unwrap_or_default() {
                    answers.push(Record::from_rdata(owner.clone(), ttl, RData::A(A(a))));
                }
                if let Some(e) = self.zone.names.get(&r.last) {
                    for &(a, ttl) in &e.aaaa {
                        answers.push(Record::from_rdata(owner.clone(), ttl, RData::AAAA(AAAA(a))));
                    }
                }
                found = !answers.is_empty();
            }
            // A CNAME query is answered by the chain's first link.
            RecordType::CNAME => {
                answers.truncate(1);
                found = !answers.is_empty();
            }
            _ => {}
        }
        let exists = self.exists(&r.last);
        resp.add_answers(answers);
        if !found {
            // §5.1.2: a name error passes through; NODATA for a name with other records.
            if !exists {
                resp.set_response_code(ResponseCode::NXDomain);
            }
            resp.add_name_server(self.soa.clone());
        }
    }

    /// RFC 6147 §5.3.1: a PTR query for an address under Pref64::/n is answered with a CNAME to
    /// the in-addr.arpa name of the embedded IPv4 address, followed by that name's PTR when
    /// the zone has a host with that address. Other reverse names are answered from the zone.
    fn fill_ptr(&self, asked: &Name, qname: &Name, resp: &mut Message) {
        let addr = qname
            .parse_arpa_name()
            .ok()
            .filter(|net| net.prefix_len() == net.max_prefix_len())
            .map(|net| net.addr());
        let Some(addr) = addr else {
            resp.set_response_code(ResponseCode::NXDomain);
            resp.add_name_server(self.soa.clone());
            return;
        };
        let (target_addr, chain) = match addr {
            IpAddr::V6(a6) => match self.params.prefix.extract(a6) {
                Some(a4) => {
                    let target = Name::from(a4);
                    let cname = Record::from_rdata(
                        asked.clone(),
                        self.params.negative_ttl_secs,
                        RData::CNAME(CNAME(target)),
                    );
                    (IpAddr::V4(a4), Some(cname))
                }
                None => (IpAddr::V6(a6), None),
            },
            v4 => (v4, None),
        };
        let owner = if chain.is_some() {
            Name::from(target_addr)
        } else {
            asked.clone()
        };
        let ptr = if target_addr == IpAddr::V4(IPV4ONLY_ADDRS[0])
            || target_addr == IpAddr::V4(IPV4ONLY_ADDRS[1])
        {
            Some((self.ipv4only.clone(), self.params.ipv4only_ttl_secs))
        } else {
            self.zone
                .name_of(target_addr)
                .map(|(n, ttl)| (n.clone(), ttl))
        };
        let found = ptr.is_some();
        if let Some(c) = chain {
            resp.add_answer(c);
        }
        if let Some((name, ttl)) = ptr {
            resp.add_answer(Record::from_rdata(owner, ttl, RData::PTR(PTR(name))));
        }
        if !found {
            resp.set_response_code(ResponseCode::NXDomain);
            resp.add_name_server(self.soa.clone());
        }
    }
}

fn is_v4_mapped(a: Ipv6Addr) -> bool {
    let s = a.segments();
    s[..5] == [0, 0, 0, 0, 0] && s[5] == 0xffff
}

/// A bare error response (header only) for a query whose body could not be parsed: same id,
/// same opcode, QR set, no records (RFC 1035 §4.1.1).
fn error_bytes(id: u16, flags_hi: u8, rcode: ResponseCode) -> Vec<u8> {
    let mut b = vec![0u8; HEADER_BYTES];
    b[0..2].copy_from_slice(&id.to_be_bytes());
    // QR=1, the query's opcode and RD; AA/TC cleared.
    b[2] = 0x80 | (flags_hi & 0x79);
    b[3] = u16::from(rcode) as u8 & 0x0f;
    b
}

/// Encodes `resp`; when it is larger than `limit`, drops the records and sets TC so the client
/// retries over TCP.
fn encode(resp: &Message, limit: usize) -> Result<Vec<u8>, DnsError> {
    let bytes = resp.to_vec().map_err(|e| DnsError::Encode(e.to_string()))?;
    if bytes.len() <= limit {
        return Ok(bytes);
    }
    let mut cut = resp.clone();
    cut.take_answers();
    cut.take_name_servers();
    cut.take_additionals();
    cut.set_truncated(true);
    cut.to_vec().map_err(|e| DnsError::Encode(e.to_string()))
}

/// The first question of a query, as (lower-case name without the final dot, type mnemonic
/// such as `A` or `AAAA`), for the lab's log of what clients asked. `None` for anything that is
/// not a parseable query with a question.
pub fn question(query: &[u8]) -> Option<(String, String)> {
    if query.len() < HEADER_BYTES || query[2] & 0x80 != 0 {
        return None;
    }
    let msg = Message::from_vec(query).ok()?;
    let q = msg.queries().first()?;
    let name = q.name().to_lowercase().to_ascii();
    let name = name.strip_suffix('.').unwrap_or(&name).to_string();
    Some((name, q.query_type().to_string()))
}

/// One UDP datagram in, at most one out: the helper the lab's DNS loop calls. `None` means
/// send nothing (a response, or bytes too short to answer).
pub fn serve_once(dns: &Dns64, datagram: &[u8]) -> Option<Vec<u8>> {
    dns.answer_udp(datagram).ok()
}

/// One TCP message (without its 2-byte length prefix) in, one out.
pub fn serve_tcp_once(dns: &Dns64, message: &[u8]) -> Option<Vec<u8>> {
    dns.answer(message).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zone() -> Zone {
        let mut z = Zone::new();
        z.add_a("server", Ipv4Addr::new(10, 0, 0, 2), 3600).unwrap();
        z.add_a("client", Ipv4Addr::new(10, 0, 0, 1), 30).unwrap();
        z.add_aaaa("client", "fd00::1".parse().unwrap(), 30)
            .unwrap();
        z.add_aaaa("mapped", "::ffff:10.0.0.9".parse().unwrap(), 30)
            .unwrap();
        z.add_a("mapped", Ipv4Addr::new(10, 0, 0, 9), 30).unwrap();
        z.add_cname("www", "alias", 100).unwrap();
        z.add_cname("alias", "server", 200).unwrap();
        z.add_cname("loop1", "loop2", 1).unwrap();
        z.add_cname("loop2", "loop1", 1).unwrap();
        z
    }
    fn dns() -> Dns64 {
        Dns64::new(Dns64Params::default(), zone())
    }
    fn query(name: &str, ty: RecordType) -> Vec<u8> {
        let mut m = Message::new();
        m.set_id(0xbeef).set_recursion_desired(true);
        m.add_query(Query::query(Name::from_ascii(name).unwrap(), ty));
        m.to_vec().unwrap()
    }
    fn ask(d: &Dns64, name: &str, ty: RecordType) -> Message {
        let r = Message::from_vec(&d.answer(&query(name, ty)).unwrap()).unwrap();
        assert_eq!(r.id(), 0xbeef);
        assert_eq!(r.message_type(), MessageType::Response);
        r
    }
    fn aaaa(m: &Message) -> Vec<(Ipv6Addr, u32)> {
        m.answers()
            .iter()
            .filter_map(|r| match r.data() {
                Some(RData::AAAA(a)) => Some((a.0, r.ttl())),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn question_names_the_first_query_and_refuses_responses_and_garbage() {
        assert_eq!(
            question(&query("Server.", RecordType::A)),
            Some(("server".to_string(), "A".to_string()))
        );
        assert_eq!(
            question(&query("ipv4only.arpa.", RecordType::AAAA)),
            Some(("ipv4only.arpa".to_string(), "AAAA".to_string()))
        );
        let answer = dns().answer(&query("server.", RecordType::A)).unwrap();
        assert_eq!(question(&answer), None);
        assert_eq!(question(&[0u8; 5]), None);
        assert_eq!(question(&[0u8; 12]), None, "a header without a question");
    }

    #[test]
    fn aaaa_for_an_ipv4_only_host_is_synthesised_under_the_prefix() {
        let r = ask(&dns(), "server.", RecordType::AAAA);
        assert_eq!(r.response_code(), ResponseCode::NoError);
        // TTL min(3600, SOA minimum 600) (RFC 6147 §5.1.7).
        assert_eq!(aaaa(&r), vec![("64:ff9b::a00:2".parse().unwrap(), 600)]);
    }

    #[test]
    fn synthesised_ttl_is_the_a_ttl_when_that_is_shorter() {
        let mut z = Zone::new();
        z.add_a("short", Ipv4Addr::new(10, 0, 0, 5), 30).unwrap();
        let r = ask(
            &Dns64::new(Dns64Params::default(), z),
            "short",
            RecordType::AAAA,
        );
        assert_eq!(aaaa(&r)[0].1, 30);
    }

    #[test]
    fn real_aaaa_records_are_returned_as_they_are() {
        let r = ask(&dns(), "CLIENT.", RecordType::AAAA);
        assert_eq!(aaaa(&r), vec![("fd00::1".parse().unwrap(), 30)]);
    }

    #[test]
    fn v4_mapped_aaaa_records_count_as_none_and_are_replaced_by_synthesis() {
        let r = ask(&dns(), "mapped.", RecordType::AAAA);
        assert_eq!(aaaa(&r), vec![("64:ff9b::a00:9".parse().unwrap(), 30)]);
    }

    #[test]
    fn ipv4only_arpa_gives_exactly_the_two_well_known_synthesised_addresses() {
        let r = ask(&dns(), "ipv4only.arpa.", RecordType::AAAA);
        let got: Vec<Ipv6Addr> = aaaa(&r).into_iter().map(|a| a.0).collect();
        assert_eq!(
            got,
            vec![
                "64:ff9b::c000:aa".parse::<Ipv6Addr>().unwrap(),
                "64:ff9b::c000:ab".parse().unwrap()
            ]
        );
        let a = ask(&dns(), "ipv4only.arpa.", RecordType::A);
        assert_eq!(a.answers().len(), 2);
        // Another prefix is discovered through the same name (RFC 7050 §3).
        let p = Dns64Params {
            prefix: "2001:db8:64::/96".parse().unwrap(),
            ..Dns64Params::default()
        };
        let r = ask(
            &Dns64::new(p, Zone::new()),
            "ipv4only.arpa.",
            RecordType::AAAA,
        );
        assert_eq!(
            aaaa(&r)[0].0,
            "2001:db8:64::c000:aa".parse::<Ipv6Addr>().unwrap()
        );
    }

    #[test]
    fn a_queries_are_answered_normally() {
        let r = ask(&dns(), "server", RecordType::A);
        let got: Vec<_> = r
            .answers()
            .iter()
            .filter_map(|r| r.data().and_then(|d| d.as_a()).map(|a| a.0))
            .collect();
        assert_eq!(got, vec![Ipv4Addr::new(10, 0, 0, 2)]);
    }

    #[test]
    fn cname_chains_are_followed_and_synthesis_happens_at_the_end() {
        let r = ask(&dns(), "www.", RecordType::AAAA);
        let types: Vec<_> = r.answers().iter().map(|r| r.record_type()).collect();
        assert_eq!(
            types,
            vec![RecordType::CNAME, RecordType::CNAME, RecordType::AAAA]
        );
        assert_eq!(r.answers()[2].name(), &Name::from_ascii("server.").unwrap());
        assert_eq!(aaaa(&r)[0].0, "64:ff9b::a00:2".parse::<Ipv6Addr>().unwrap());
        let looped = ask(&dns(), "loop1.", RecordType::AAAA);
        assert_eq!(looped.response_code(), ResponseCode::ServFail);
    }

    #[test]
    fn unknown_names_get_nxdomain_with_the_soa() {
        let r = ask(&dns(), "nowhere.", RecordType::AAAA);
        assert_eq!(r.response_code(), ResponseCode::NXDomain);
        assert!(r.answers().is_empty());
        assert_eq!(r.name_servers()[0].record_type(), RecordType::SOA);
        let mx = ask(&dns(), "server.", RecordType::MX);
        assert_eq!(
            (mx.response_code(), mx.answers().len()),
            (ResponseCode::NoError, 0),
            "nodata"
        );
    }

    #[test]
    fn ptr_under_the_prefix_answers_with_a_cname_to_in_addr_arpa_and_the_ptr() {
        let q = Name::from(Prefix::default().embed(Ipv4Addr::new(10, 0, 0, 2)));
        let r = ask(&dns(), &q.to_ascii(), RecordType::PTR);
        assert_eq!(r.response_code(), ResponseCode::NoError);
        let c = r.answers()[0].data().and_then(|d| d.as_cname()).unwrap();
        assert_eq!(c.0, Name::from_ascii("2.0.0.10.in-addr.arpa.").unwrap());
        let p = r.answers()[1].data().and_then(|d| d.as_ptr()).unwrap();
        assert_eq!(p.0, Name::from_ascii("server.").unwrap());
        // An address under the prefix that no host has: the CNAME, then NXDOMAIN.
        let q = Name::from(Prefix::default().embed(Ipv4Addr::new(10, 9, 9, 9)));
        let r = ask(&dns(), &q.to_ascii(), RecordType::PTR);
        assert_eq!(r.response_code(), ResponseCode::NXDomain);
        assert_eq!(r.answers().len(), 1);
        // A reverse name outside the prefix is answered from the zone.
        let q = Name::from("fd00::1".parse::<Ipv6Addr>().unwrap());
        let r = ask(&dns(), &q.to_ascii(), RecordType::PTR);
        assert_eq!(
            r.answers()[0].data().and_then(|d| d.as_ptr()).unwrap().0,
            Name::from_ascii("client.").unwrap()
        );
    }

    #[test]
    fn malformed_queries_get_formerr_and_responses_get_nothing() {
        let mut q = query("server.", RecordType::AAAA);
        q.truncate(q.len() - 3);
        let r = dns().answer(&q).unwrap();
        assert_eq!((r[0], r[1]), (0xbe, 0xef));
        assert_eq!(r[2] & 0x80, 0x80, "QR set");
        assert_eq!(r[3] & 0x0f, 1, "FORMERR");
        assert_eq!(dns().answer(&[1, 2, 3]), Err(DnsError::TooShort(3)));
        let resp = dns().answer(&query("server.", RecordType::A)).unwrap();
        assert_eq!(dns().answer(&resp), Err(DnsError::NotAQuery));
        assert_eq!(serve_once(&dns(), &resp), None);
    }

    #[test]
    fn other_opcodes_and_classes_are_refused_politely() {
        let mut m = Message::new();
        m.set_id(1).set_op_code(OpCode::Update);
        m.add_query(Query::query(
            Name::from_ascii("server.").unwrap(),
            RecordType::A,
        ));
        let r = Message::from_vec(&dns().answer(&m.to_vec().unwrap()).unwrap()).unwrap();
        assert_eq!(r.response_code(), ResponseCode::NotImp);
        let mut m = Message::new();
        let mut q = Query::query(Name::from_ascii("server.").unwrap(), RecordType::A);
        q.set_query_class(DNSClass::CH);
        m.set_id(2).add_query(q);
        let r = Message::from_vec(&dns().answer(&m.to_vec().unwrap()).unwrap()).unwrap();
        assert_eq!(r.response_code(), ResponseCode::Refused);
    }

    #[test]
    fn udp_answers_too_big_for_512_bytes_are_truncated() {
        let mut z = Zone::new();
        for i in 0..60 {
            z.add_a("many", Ipv4Addr::new(10, 1, 0, i), 60).unwrap();
        }
        let d = Dns64::new(Dns64Params::default(), z);
        let q = query("many.", RecordType::AAAA);
        let full = Message::from_vec(&d.answer(&q).unwrap()).unwrap();
        assert_eq!(full.answers().len(), 60);
        let udp = serve_once(&d, &q).unwrap();
        assert!(udp.len() <= 512);
        let m = Message::from_vec(&udp).unwrap();
        assert!(m.truncated());
        assert!(m.answers().is_empty());
    }
}

#[cfg(test)]
mod proptests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn arbitrary_dns_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..300)) {
            let mut z = Zone::new();
            z.add_a("server", Ipv4Addr::new(10, 0, 0, 2), 60).unwrap();
            let d = Dns64::new(Dns64Params::default(), z);
            if let Ok(r) = d.answer(&data) {
                prop_assert!(r.len() >= HEADER_BYTES);
                prop_assert_eq!(&r[..2], &data[..2]);
            }
            let _ = serve_once(&d, &data);
        }

        #[test]
        fn mutated_queries_never_panic(edits in proptest::collection::vec((any::<u8>(), any::<u8>()), 0..4), ty in any::<u16>()) {
            let mut m = Message::new();
            m.set_id(9);
            m.add_query(Query::query(Name::from_ascii("server.").unwrap(), RecordType::from(ty)));
            let mut q = m.to_vec().unwrap();
            for (at, val) in edits {
                let i = usize::from(at) % q.len();
                if i >= 2 { q[i] = val; }
            }
            let d = Dns64::new(Dns64Params::default(), Zone::new());
            let _ = d.answer(&q);
            let _ = serve_once(&d, &q);
        }
    }
}
