//! The header translator (RFC 7915), shared by the stateful NAT64 and the stateless CLAT: one
//! state machine with `now` passed in, generic over a [`Mapping`] that says which addresses
//! and ports a packet gets on the other side (session tables for a NAT64, fixed addresses and
//! a prefix for a CLAT). The mapping is all that differs; everything here is one code path.
//!
//! It reads the packet with checked fixed-offset parsing (every length is checked before
//! use), asks the mapping for the addresses, writes the translated header and copies the
//! payload once, adjusting transport checksums incrementally. It answers with ICMP errors
//! where the RFCs say so (Time Exceeded, Packet Too Big, Parameter Problem, Source Route
//! Failed) and translates ICMP errors with their inner packet. It does not reassemble: first
//! fragments are translated and, where the mapping has state, remembered so their later
//! fragments follow; a later fragment that arrives first is dropped by a stateful mapping. It
//! does not fragment: an IPv4 packet without DF that is too big for the IPv6 next hop is
//! dropped and counted.

use std::collections::{HashMap, VecDeque};
use std::net::{Ipv4Addr, Ipv6Addr};

use wire::checksum;
use wire::Instant;

use crate::csum::{self, addr4_sum, addr6_sum, adjust, pseudo4, pseudo6, word};
use crate::icmp::{self, Mtus};
use crate::state::{Flow6, Key4, Proto, TcpFlags};
use crate::{DropReason, Outcome, Stats, Verdict};

const TCP: u8 = 6;
const UDP: u8 = 17;
const ICMP4: u8 = 1;
const ICMP6: u8 = 58;
/// IPv6 extension headers carried through or skipped (RFC 7915 §5.1).
const HOP_BY_HOP: u8 = 0;
const ROUTING: u8 = 43;
const FRAGMENT: u8 = 44;
const DEST_OPTS: u8 = 60;
/// More extension headers than this is treated as an attack, not a packet.
const MAX_EXT_HEADERS: usize = 8;
/// RFC 7915 §5.1: an IPv4 packet up to this size goes without DF, so that a path with a
/// smaller MTU can still fragment it.
const DF_THRESHOLD_BYTES: usize = 1260;
/// ICMPv6 errors are at most the IPv6 minimum MTU (RFC 4443 §2.4 (c)).
const MAX_ICMP6_ERROR_BYTES: usize = 1280;
/// ICMPv4 errors are at most 576 bytes (RFC 1812 §4.3.2.3).
const MAX_ICMP4_ERROR_BYTES: usize = 576;
/// Hop limit / TTL of the errors the translator originates.
const OWN_HOP_LIMIT: u8 = 64;

/// IPv6 fragment header fields.
#[derive(Copy, Clone, Debug)]
struct Frag {
    id: u32,
    /// Offset in 8-byte units.
    offset8: u16,
    more: bool,
}

/// A checked view of an IPv6 header and its extension headers.
#[derive(Clone, Debug)]
struct V6 {
    tc: u8,
    hop: u8,
    src: Ipv6Addr,
    dst: Ipv6Addr,
    /// The upper-layer protocol after the extension headers.
    next: u8,
    /// Offset of the upper-layer header.
    l4: usize,
    /// End of the datagram in the buffer (trailing bytes after Payload Length excluded).
    end: usize,
    /// End as the header claims it; differs from `end` only for a truncated inner packet.
    claimed_end: usize,
    frag: Option<Frag>,
    /// Offset of a non-zero Segments Left field (RFC 7915 §5.1 refuses those).
    segments_left_at: Option<usize>,
}

/// A checked view of an IPv4 header.
#[derive(Clone, Debug)]
struct V4 {
    tos: u8,
    ttl: u8,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    proto: u8,
    l4: usize,
    end: usize,
    total_len: u16,
    id: u16,
    df: bool,
    mf: bool,
    offset8: u16,
    source_route: bool,
}

impl V4 {
    fn is_fragment(&self) -> bool {
        self.mf || self.offset8 != 0
    }
}

fn v6_addr(b: &[u8], off: usize) -> Ipv6Addr {
    let mut a = [0u8; 16];
    a.copy_from_slice(&b[off..off + 16]);
    Ipv6Addr::from(a)
}

fn v4_addr(b: &[u8], off: usize) -> Ipv4Addr {
    Ipv4Addr::new(b[off], b[off + 1], b[off + 2], b[off + 3])
}

/// Parses an IPv6 header and walks its extension headers (RFC 8200 §4). `inner` is for the
/// packet inside an ICMP error, which may be cut short.
fn parse_v6(b: &[u8], inner: bool) -> Result<V6, DropReason> {
    if b.len() < 40 {
        return Err(DropReason::Truncated);
    }
    if b[0] >> 4 != 6 {
        return Err(DropReason::Malformed);
    }
    let plen = usize::from(word(b, 4));
    if plen == 0 {
        // A jumbogram (RFC 2675) or nonsense; neither is translated.
        return Err(DropReason::Malformed);
    }
    let claimed_end = 40 + plen;
    let end = if claimed_end <= b.len() {
        claimed_end
    } else if inner {
        b.len()
    } else {
        return Err(DropReason::Truncated);
    };
    let mut next = b[6];
    let mut off = 40;
    let mut frag = None;
    let mut segments_left_at = None;
    for n in 0.. {
        if n > MAX_EXT_HEADERS {
            return Err(DropReason::UnsupportedExtension);
        }
        match next {
            TCP | UDP | ICMP6 => break,
            HOP_BY_HOP | ROUTING | DEST_OPTS => {
                if next == HOP_BY_HOP && off != 40 {
                    return Err(DropReason::Malformed);
                }
                if off + 8 > end {
                    return Err(DropReason::Truncated);
                }
                if next == ROUTING && b[off + 3] != 0 && segments_left_at.is_none() {
                    segments_left_at = Some(off + 3);
                }
                next = b[off];
                off += (usize::from(b[off + 1]) + 1) * 8;
            }
            FRAGMENT => {
                if off + 8 > end || frag.is_some() {
                    return Err(if frag.is_some() {
                        DropReason::Malformed
                    } else {
                        DropReason::Truncated
                    });
                }
                let fo = word(b, off + 2);
                frag = Some(Frag {
                    id: u32::from_be_bytes([b[off + 4], b[off + 5], b[off + 6], b[off + 7]]),
                    offset8: fo >> 3,
                    more: fo & 1 == 1,
                });
                next = b[off];
                off += 8;
            }
            // ESP, AH, mobility, HIP, shim6 and experimental headers: RFC 7915 §5.1 translates
            // only what it can map; a stateful NAT64 cannot find ports behind them.
            50 | 51 | 135 | 139 | 140 | 253 | 254 => return Err(DropReason::UnsupportedExtension),
            _ => return Err(DropReason::UnsupportedProtocol),
        }
    }
    if off > end {
        return Err(DropReason::Truncated);
    }
    // An atomic fragment (offset 0, no more) is an unfragmented packet (RFC 8021).
    let frag = frag.filter(|f| f.offset8 != 0 || f.more);
    Ok(V6 {
        tc: (b[0] << 4) | (b[1] >> 4),
        hop: b[7],
        src: v6_addr(b, 8),
        dst: v6_addr(b, 24),
        next,
        l4: off,
        end,
        claimed_end,
        frag,
        segments_left_at,
    })
}

/// Parses an IPv4 header (RFC 791). `inner` is for the packet inside an ICMP error: it may
/// be cut short, and its header checksum is not checked.
fn parse_v4(b: &[u8], inner: bool) -> Result<V4, DropReason> {
    if b.len() < 20 {
        return Err(DropReason::Truncated);
    }
    if b[0] >> 4 != 4 {
        return Err(DropReason::Malformed);
    }
    let ihl = usize::from(b[0] & 0x0f) * 4;
    if ihl < 20 {
        return Err(DropReason::Malformed);
    }
    if b.len() < ihl {
        return Err(DropReason::Truncated);
    }
    let total_len = word(b, 2);
    if usize::from(total_len) < ihl {
        return Err(DropReason::Malformed);
    }
    let end = if usize::from(total_len) <= b.len() {
        usize::from(total_len)
    } else if inner {
        b.len()
    } else {
        return Err(DropReason::Truncated);
    };
    if !inner && checksum::checksum(&b[..ihl], 0) != 0 {
        return Err(DropReason::BadChecksum);
    }
    let ff = word(b, 6);
    Ok(V4 {
        tos: b[1],
        ttl: b[8],
        src: v4_addr(b, 12),
        dst: v4_addr(b, 16),
        proto: b[9],
        l4: ihl,
        end,
        total_len,
        id: word(b, 4),
        df: ff & 0x4000 != 0,
        mf: ff & 0x2000 != 0,
        offset8: ff & 0x1fff,
        source_route: has_unexpired_source_route(&b[20..ihl]),
    })
}

/// RFC 7915 §4.1: an unexpired loose or strict source route option (RFC 791 types 131, 137)
/// forbids translation. A route is unexpired while its pointer is within the option.
fn has_unexpired_source_route(mut opts: &[u8]) -> bool {
    while let Some(&ty) = opts.first() {
        match ty {
            0 => return false,
            1 => opts = &opts[1..],
            _ => {
                let Some(&len) = opts.get(1) else {
                    return false;
                };
                let len = usize::from(len);
                if len < 2 || len > opts.len() {
                    return false;
                }
                if matches!(ty, 131 | 137) && len >= 3 && usize::from(opts[2]) <= len {
                    return true;
                }
                opts = &opts[len..];
            }
        }
    }
    false
}

/// Addresses that are never translated to or from (RFC 6052 §3.1 leaves it to policy; these
/// have no meaning across a translator).
pub(crate) fn bad_v4(a: Ipv4Addr) -> bool {
    a.is_unspecified() || a.is_loopback() || a.is_multicast() || a.is_broadcast()
}

fn tcp_flags(seg: &[u8]) -> TcpFlags {
    let f = seg[13];
    TcpFlags {
        syn: f & 0x02 != 0,
        fin: f & 0x01 != 0,
        rst: f & 0x04 != 0,
    }
}

/// Where the checksum of a transport header sits.
fn csum_off(proto: u8) -> usize {
    match proto {
        TCP => 16,
        UDP => 6,
        _ => 2,
    }
}

/// The smallest transport header that has the fields we read (ports, TCP flags, checksum).
fn min_l4(proto: u8) -> usize {
    match proto {
        TCP => 20,
        _ => 8,
    }
}

/// Writes a 20-byte IPv4 header with its checksum.
#[allow(clippy::too_many_arguments)]
pub(crate) fn put_v4_header(
    out: &mut Vec<u8>,
    tos: u8,
    total_len: usize,
    id: u16,
    flags_offset: u16,
    ttl: u8,
    proto: u8,
    src: Ipv4Addr,
    dst: Ipv4Addr,
) {
    let start = out.len();
    out.extend_from_slice(&[0x45, tos]);
    out.extend_from_slice(&(total_len as u16).to_be_bytes());
    out.extend_from_slice(&id.to_be_bytes());
    out.extend_from_slice(&flags_offset.to_be_bytes());
    out.extend_from_slice(&[ttl, proto, 0, 0]);
    out.extend_from_slice(&src.octets());
    out.extend_from_slice(&dst.octets());
    let c = checksum::checksum(&out[start..start + 20], 0);
    out[start + 10..start + 12].copy_from_slice(&c.to_be_bytes());
}

/// Writes a 40-byte IPv6 header; the flow label is zero (RFC 7915 §4.1).
fn put_v6_header(
    out: &mut Vec<u8>,
    tc: u8,
    payload_len: usize,
    next: u8,
    hop: u8,
    src: Ipv6Addr,
    dst: Ipv6Addr,
) {
    out.extend_from_slice(&[0x60 | (tc >> 4), tc << 4, 0, 0]);
    out.extend_from_slice(&(payload_len as u16).to_be_bytes());
    out.extend_from_slice(&[next, hop]);
    out.extend_from_slice(&src.octets());
    out.extend_from_slice(&dst.octets());
}

fn put_frag_header(out: &mut Vec<u8>, next: u8, offset8: u16, more: bool, id: u32) {
    out.extend_from_slice(&[next, 0]);
    out.extend_from_slice(&((offset8 << 3) | u16::from(more)).to_be_bytes());
    out.extend_from_slice(&id.to_be_bytes());
}

/// Rewrites the ports of a TCP/UDP header (or the identifier of an ICMP echo) and adjusts
/// its checksum for the changed words, `old_extra`/`new_extra` being the other covered words
/// that changed (pseudo-header addresses, ICMP type). Fields past the end of `seg` (a
/// truncated inner packet) are left alone.
fn rewrite_l4(seg: &mut [u8], proto: u8, sport: u16, dport: u16, old_extra: u32, new_extra: u32) {
    let (old_ports, new_ports) = if proto == TCP || proto == UDP {
        if seg.len() < 4 {
            return;
        }
        let old = u32::from(word(seg, 0)) + u32::from(word(seg, 2));
        seg[0..2].copy_from_slice(&sport.to_be_bytes());
        seg[2..4].copy_from_slice(&dport.to_be_bytes());
        (old, u32::from(sport) + u32::from(dport))
    } else {
        // ICMP echo: the identifier, at 4..6, plays the port.
        if seg.len() < 6 {
            return;
        }
        let old = u32::from(word(seg, 4));
        seg[4..6].copy_from_slice(&sport.to_be_bytes());
        (old, u32::from(sport))
    };
    let co = csum_off(proto);
    if seg.len() < co + 2 {
        return;
    }
    let old_c = word(seg, co);
    // RFC 768: an IPv4 UDP checksum of zero means "none"; there is nothing to adjust (the
    // caller computes one for IPv6).
    if proto == UDP && old_c == 0 {
        return;
    }
    let mut c = adjust(old_c, old_extra + old_ports, new_extra + new_ports);
    if proto == UDP && c == 0 {
        c = 0xffff;
    }
    seg[co..co + 2].copy_from_slice(&c.to_be_bytes());
}

/// Fragment bookkeeping: the translation of a first fragment, for its later fragments.
struct Fragments {
    /// (IPv6 source, IPv6 destination, identification) → IPv4 source T.
    out: HashMap<(Ipv6Addr, Ipv6Addr, u32), Ipv4Addr>,
    /// (IPv4 source, IPv4 destination, identification, protocol) → IPv6 destination X'.
    inb: HashMap<(Ipv4Addr, Ipv4Addr, u16, u8), Ipv6Addr>,
    /// Expiry order; the timeout is one constant, so insertion order is expiry order.
    expiry: VecDeque<(Instant, FragKey)>,
}

#[derive(Copy, Clone, Debug)]
enum FragKey {
    Out((Ipv6Addr, Ipv6Addr, u32)),
    In((Ipv4Addr, Ipv4Addr, u16, u8)),
}

impl Fragments {
    fn len(&self) -> usize {
        self.out.len() + self.inb.len()
    }
    fn expire(&mut self, now: Instant) {
        while let Some(&(at, k)) = self.expiry.front() {
            if at > now {
                break;
            }
            self.expiry.pop_front();
            match k {
                FragKey::Out(k) => self.out.remove(&k),
                FragKey::In(k) => self.inb.remove(&k).map(|_| Ipv4Addr::UNSPECIFIED),
            };
        }
    }
}

/// How a packet's IPv4 source is found, for a packet from the IPv6 side.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Src4 {
    /// Without state: this address, ports and identifiers unchanged (stateless translation).
    Fixed(Ipv4Addr),
    /// From the session tables, which give the address and the port (T, t).
    Session,
    /// Outside the mapping: only an ICMP error passes, from the stand-in address of
    /// RFC 7915 §5.1 (RFC 6791); anything else is dropped.
    Unmapped,
}

/// How a packet's IPv6 destination is found, for a packet from the IPv4 side.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Dst6 {
    /// Without state: this address, ports and identifiers unchanged.
    Fixed(Ipv6Addr),
    /// From the session tables, which give the address and the port (X', x).
    Session,
}

/// Addresses and ports of a packet in IPv4. For ICMP echo both ports are the identifier.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct Ends4 {
    pub src: Ipv4Addr,
    pub sport: u16,
    pub dst: Ipv4Addr,
    pub dport: u16,
}

/// Addresses and ports of a packet in IPv6. For ICMP echo both ports are the identifier.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct Ends6 {
    pub src: Ipv6Addr,
    pub sport: u16,
    pub dst: Ipv6Addr,
    pub dport: u16,
}

/// Which addresses and ports a packet gets on the other side: the one thing a stateful NAT64
/// (RFC 6146: sessions, a pool) and a stateless translator such as a CLAT (RFC 6877 over
/// RFC 7915: fixed addresses and a prefix) do differently. Headers, ICMP, checksums,
/// fragments and errors with their inner packets are [`Engine`]'s, one code path for both.
pub(crate) trait Mapping {
    /// Checks the addresses of a packet from the IPv6 side; its IPv4 destination, and how its
    /// source is found.
    fn addrs_6to4(&self, src: Ipv6Addr, dst: Ipv6Addr) -> Result<(Src4, Ipv4Addr), DropReason>;
    /// Checks the addresses of a packet from the IPv4 side; its IPv6 source, and how its
    /// destination is found.
    fn addrs_4to6(&self, src: Ipv4Addr, dst: Ipv4Addr) -> Result<(Ipv6Addr, Dst6), DropReason>;
    /// (T, t) for a flow from the IPv6 side whose source is [`Src4::Session`].
    fn session_6to4(
        &mut self,
        now: Instant,
        flow: Flow6,
        tcp: TcpFlags,
        may_create: bool,
    ) -> Result<(Ipv4Addr, u16), DropReason>;
    /// (X', x) for a flow from the IPv4 side whose destination is [`Dst6::Session`].
    fn session_4to6(
        &mut self,
        now: Instant,
        key: Key4,
        tcp: TcpFlags,
    ) -> Result<(Ipv6Addr, u16), DropReason>;
    /// The packet quoted by an ICMPv6 error from the IPv6 side (one the translator sent
    /// there), as it was in IPv4. Changes no state.
    fn quoted_6to4(&self, proto: Proto, q: Ends6) -> Result<Ends4, DropReason>;
    /// The packet quoted by an ICMPv4 error from the IPv4 side, as it was in IPv6.
    fn quoted_4to6(&self, proto: Proto, q: Ends4) -> Result<Ends6, DropReason>;
    /// When [`Mapping::expire`] next has work.
    fn next_timeout(&self) -> Option<Instant> {
        None
    }
    fn expire(&mut self, _now: Instant) {}
}

/// The header translator's own parameters, the same for every mapping.
#[derive(Clone, Debug)]
pub(crate) struct HeaderParams {
    pub mtu4_bytes: u16,
    pub mtu6_bytes: u16,
    pub verify_checksums: bool,
    /// Source of the ICMPv4 errors the translator itself sends.
    pub router4: Ipv4Addr,
    /// Source of the ICMPv6 errors the translator itself sends.
    pub router6: Ipv6Addr,
    /// Source of a translated ICMPv4 error whose IPv6 source has no IPv4 address
    /// ([`Src4::Unmapped`]; RFC 7915 §5.1, RFC 6791).
    pub unmapped4: Ipv4Addr,
    pub fragment_timeout: wire::Duration,
    pub max_fragments: usize,
}

/// RFC 7915 header translation over a [`Mapping`]: packets in, packets (or a counted drop
/// reason) out. The NAT64 and the CLAT are each an `Engine` with their own mapping.
pub(crate) struct Engine<M> {
    pub map: M,
    hdr: HeaderParams,
    frags: Fragments,
    pub stats: Stats,
    /// Identification for IPv4 packets made from unfragmented IPv6 ones (RFC 7915 §5.1 leaves
    /// the algorithm to the translator; a counter from a seeded start is unique enough).
    next_ip_id: u16,
}

impl<M: Mapping> Engine<M> {
    pub fn new(map: M, hdr: HeaderParams, first_ip_id: u16) -> Engine<M> {
        Engine {
            map,
            hdr,
            frags: Fragments {
                out: HashMap::new(),
                inb: HashMap::new(),
                expiry: VecDeque::new(),
            },
            stats: Stats::default(),
            next_ip_id: first_ip_id,
        }
    }

    /// When [`Engine::expire`] next has work; may be early, never late.
    pub fn next_timeout(&self) -> Option<Instant> {
        let f = self.frags.expiry.front().map(|&(at, _)| at);
        match (self.map.next_timeout(), f) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    pub fn expire(&mut self, now: Instant) {
        self.map.expire(now);
        self.frags.expire(now);
    }

    pub fn translate_6to4(&mut self, now: Instant, packet: &[u8]) -> Outcome {
        let mut out = Vec::with_capacity(packet.len());
        outcome(self.translate_6to4_into(now, packet, &mut out), out)
    }

    pub fn translate_4to6(&mut self, now: Instant, packet: &[u8]) -> Outcome {
        let mut out = Vec::with_capacity(packet.len() + 28);
        outcome(self.translate_4to6_into(now, packet, &mut out), out)
    }

    pub fn translate_6to4_into(
        &mut self,
        now: Instant,
        packet: &[u8],
        out: &mut Vec<u8>,
    ) -> Verdict {
        out.clear();
        self.expire(now);
        let v = self.v6_to_v4(now, packet, out);
        self.account(v, true, out)
    }

    pub fn translate_4to6_into(
        &mut self,
        now: Instant,
        packet: &[u8],
        out: &mut Vec<u8>,
    ) -> Verdict {
        out.clear();
        self.expire(now);
        let v = self.v4_to_v6(now, packet, out);
        self.account(v, false, out)
    }

    fn account(
        &mut self,
        v: Result<Verdict, DropReason>,
        six_to_four: bool,
        out: &mut Vec<u8>,
    ) -> Verdict {
        match v {
            Ok(Verdict::Forward) => {
                if six_to_four {
                    self.stats.translated_6to4 += 1;
                } else {
                    self.stats.translated_4to6 += 1;
                }
                Verdict::Forward
            }
            Ok(Verdict::Reply) => {
                self.stats.count_drop(DropReason::Answered);
                Verdict::Reply
            }
            Ok(Verdict::Drop(r)) | Err(r) => {
                out.clear();
                self.stats.count_drop(r);
                Verdict::Drop(r)
            }
        }
    }

    fn mtus(&self) -> Mtus {
        Mtus {
            v4_bytes: self.hdr.mtu4_bytes,
            v6_bytes: self.hdr.mtu6_bytes,
        }
    }

    fn ip_id(&mut self) -> u16 {
        self.next_ip_id = self.next_ip_id.wrapping_add(1);
        self.next_ip_id
    }

    /// Verifies a transport checksum over `seg` with pseudo-header sum `pseudo`, when asked to.
    fn check(&self, seg: &[u8], pseudo: u32) -> Result<(), DropReason> {
        if self.hdr.verify_checksums && csum::checksum(seg, pseudo) != 0 {
            return Err(DropReason::BadChecksum);
        }
        Ok(())
    }

    // ---------------------------------------------------------------- IPv6 → IPv4 (§5)

    fn v6_to_v4(
        &mut self,
        now: Instant,
        b: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<Verdict, DropReason> {
        let ip = parse_v6(b, false)?;
        let (src4, z) = self.map.addrs_6to4(ip.src, ip.dst)?;
        // RFC 7915 §5.1: a routing header with segments left is not translated; Parameter
        // Problem pointing at the field.
        if let Some(at) = ip.segments_left_at {
            return self.reply6(
                b,
                &ip,
                icmp::v6::PARAM_PROBLEM,
                0,
                (at as u32).to_be_bytes(),
                out,
                DropReason::Malformed,
            );
        }
        // RFC 7915 §5.1: hop limit decremented; at zero, Time Exceeded in transit.
        if ip.hop <= 1 {
            return self.reply6(
                b,
                &ip,
                icmp::v6::TIME_EXCEEDED,
                0,
                [0; 4],
                out,
                DropReason::HopLimit,
            );
        }
        let ttl = ip.hop - 1;
        let payload = &b[ip.l4..ip.end];
        if ip.next == ICMP6
            && ip.frag.is_none()
            && payload.len() >= 8
            && icmp::is_error6(payload[0])
        {
            return self.icmp_error_6to4(b, &ip, src4, z, ttl, out);
        }
        if src4 == Src4::Unmapped {
            return Err(DropReason::NotInPrefix);
        }
        let total = 20 + payload.len();
        if total > usize::from(self.hdr.mtu4_bytes) {
            // Packet Too Big with the IPv6 equivalent of the IPv4 next hop's MTU.
            let mtu = u32::from(self.hdr.mtu4_bytes) + 20;
            return self.reply6(
                b,
                &ip,
                icmp::v6::PACKET_TOO_BIG,
                0,
                mtu.to_be_bytes(),
                out,
                DropReason::TooBig,
            );
        }
        let proto4 = if ip.next == ICMP6 { ICMP4 } else { ip.next };

        // Later fragments: addresses only, as the first fragment's translation said.
        if let Some(f) = ip.frag {
            if f.offset8 != 0 {
                let t = match src4 {
                    Src4::Fixed(a) => a,
                    _ => *self
                        .frags
                        .out
                        .get(&(ip.src, ip.dst, f.id))
                        .ok_or(DropReason::Fragment)?,
                };
                put_v4_header(
                    out,
                    ip.tc,
                    total,
                    f.id as u16,
                    (f.offset8 & 0x1fff) | (u16::from(f.more) << 13),
                    ttl,
                    proto4,
                    t,
                    z,
                );
                out.extend_from_slice(payload);
                return Ok(Verdict::Forward);
            }
            if ip.next == ICMP6 {
                // The ICMPv6 checksum covers a pseudo-header with the whole message's length,
                // which a first fragment does not tell.
                return Err(DropReason::Fragment);
            }
        }
        if payload.len() < min_l4(ip.next) {
            return Err(if ip.frag.is_some() {
                DropReason::Fragment
            } else {
                DropReason::Truncated
            });
        }
        if ip.next == ICMP6 && icmp::is_error6(payload[0]) {
            // A fragmented ICMPv6 error.
            return Err(DropReason::Fragment);
        }
        let whole = ip.frag.is_none();
        let ps6 = pseudo6(ip.src, ip.dst, ip.next, payload.len());
        let (dport, flow) = match ip.next {
            TCP | UDP => {
                if ip.next == UDP && word(payload, 6) == 0 {
                    // RFC 8200 §8.1: a zero IPv6 UDP checksum is invalid.
                    return Err(DropReason::Malformed);
                }
                if whole {
                    if ip.next == UDP && usize::from(word(payload, 4)) != payload.len() {
                        return Err(DropReason::Malformed);
                    }
                    self.check(payload, ps6)?;
                }
                let (s, d) = (word(payload, 0), word(payload, 2));
                let proto = if ip.next == TCP {
                    Proto::Tcp
                } else {
                    Proto::Udp
                };
                (
                    d,
                    Flow6 {
                        proto,
                        x: ip.src,
                        xport: s,
                        z,
                        zport: d,
                    },
                )
            }
            _ => {
                let ty = payload[0];
                if ty != icmp::v6::ECHO_REQUEST && ty != icmp::v6::ECHO_REPLY {
                    return Err(DropReason::IcmpUntranslatable);
                }
                self.check(payload, ps6)?;
                let id = word(payload, 4);
                (
                    id,
                    Flow6 {
                        proto: Proto::Icmp,
                        x: ip.src,
                        xport: id,
                        z,
                        zport: id,
                    },
                )
            }
        };
        let (t, tport) = match src4 {
            Src4::Fixed(a) => (a, flow.xport),
            _ => {
                let tcp = if ip.next == TCP {
                    tcp_flags(payload)
                } else {
                    TcpFlags::default()
                };
                // Only an echo request opens an ICMP session; a reply must find one.
                let may_create = !(ip.next == ICMP6 && payload[0] == icmp::v6::ECHO_REPLY);
                let found = self.map.session_6to4(now, flow, tcp, may_create)?;
                if let Some(f) = ip.frag {
                    if self.frags.len() < self.hdr.max_fragments {
                        let k = (ip.src, ip.dst, f.id);
                        self.frags.out.insert(k, found.0);
                        self.frags
                            .expiry
                            .push_back((now + self.hdr.fragment_timeout, FragKey::Out(k)));
                    }
                }
                found
            }
        };

        let (id, flags_offset) = match ip.frag {
            Some(f) => (f.id as u16, u16::from(f.more) << 13),
            None if total > DF_THRESHOLD_BYTES => (self.ip_id(), 0x4000),
            None => (self.ip_id(), 0),
        };
        put_v4_header(out, ip.tc, total, id, flags_offset, ttl, proto4, t, z);
        out.extend_from_slice(payload);
        let seg = &mut out[20..];
        if ip.next == ICMP6 {
            let m = icmp::map_6to4(
                seg[0],
                seg[1],
                [seg[4], seg[5], seg[6], seg[7]],
                self.mtus(),
            )
            .ok_or(DropReason::IcmpUntranslatable)?;
            let old = ps6 + u32::from(word(seg, 0));
            seg[0] = m.ty;
            seg[1] = m.code;
            rewrite_l4(seg, ICMP4, tport, tport, old, u32::from(word(seg, 0)));
        } else {
            let old = addr6_sum(ip.src) + addr6_sum(ip.dst);
            rewrite_l4(seg, ip.next, tport, dport, old, addr4_sum(t) + addr4_sum(z));
        }
        Ok(Verdict::Forward)
    }

    /// RFC 7915 §5.2 (and RFC 6146 §3.5.3 for a NAT64): an ICMPv6 error from the IPv6 side
    /// about a packet the translator sent there. The mapping translates the inner packet back;
    /// the outer source is the mapped one, or for a NAT64 the inner packet's destination T.
    fn icmp_error_6to4(
        &mut self,
        b: &[u8],
        ip: &V6,
        src4: Src4,
        z_outer: Ipv4Addr,
        ttl: u8,
        out: &mut Vec<u8>,
    ) -> Result<Verdict, DropReason> {
        let msg = &b[ip.l4..ip.end];
        if checksum::checksum(msg, pseudo6(ip.src, ip.dst, ICMP6, msg.len())) != 0 {
            return Err(DropReason::BadChecksum);
        }
        let m = icmp::map_6to4(
            msg[0],
            msg[1],
            [msg[4], msg[5], msg[6], msg[7]],
            self.mtus(),
        )
        .ok_or(DropReason::IcmpUntranslatable)?;
        let inner_b = &msg[8..];
        let inner = parse_v6(inner_b, true)?;
        let seg = &inner_b[inner.l4..inner.end];
        let (proto, sport, dport) = inner_ports(inner.next, seg)?;
        let q = self.map.quoted_6to4(
            proto,
            Ends6 {
                src: inner.src,
                sport,
                dst: inner.dst,
                dport,
            },
        )?;
        let outer_src = match src4 {
            Src4::Fixed(a) => a,
            Src4::Session => q.dst,
            Src4::Unmapped => self.hdr.unmapped4,
        };

        out.clear();
        put_v4_header(
            out,
            ip.tc,
            0,
            self.ip_id(),
            0,
            ttl,
            ICMP4,
            outer_src,
            z_outer,
        );
        out.extend_from_slice(&[m.ty, m.code, 0, 0]);
        out.extend_from_slice(&m.rest);
        // Inner IPv4 header: lengths as the original claimed, addresses and ports translated.
        let inner_proto4 = if inner.next == ICMP6 {
            ICMP4
        } else {
            inner.next
        };
        let inner_total = 20 + inner.claimed_end - inner.l4;
        let ff = inner
            .frag
            .map_or(0, |f| (f.offset8 & 0x1fff) | (u16::from(f.more) << 13));
        let inner_id = inner.frag.map_or(0, |f| f.id as u16);
        put_v4_header(
            out,
            inner.tc,
            inner_total,
            inner_id,
            ff,
            inner.hop,
            inner_proto4,
            q.src,
            q.dst,
        );
        let seg_at = out.len();
        out.extend_from_slice(seg);
        {
            let s = &mut out[seg_at..];
            if inner.next == ICMP6 {
                let old = pseudo6(inner.src, inner.dst, ICMP6, inner.claimed_end - inner.l4)
                    + u32::from(word(s, 0));
                s[0] = if s[0] == icmp::v6::ECHO_REQUEST {
                    icmp::v4::ECHO_REQUEST
                } else {
                    icmp::v4::ECHO_REPLY
                };
                rewrite_l4(s, ICMP4, q.sport, q.sport, old, u32::from(word(s, 0)));
            } else {
                let old = addr6_sum(inner.src) + addr6_sum(inner.dst);
                rewrite_l4(
                    s,
                    inner.next,
                    q.sport,
                    q.dport,
                    old,
                    addr4_sum(q.src) + addr4_sum(q.dst),
                );
            }
        }
        out.truncate(MAX_ICMP4_ERROR_BYTES);
        finish_icmp4(out);
        self.stats.icmp_errors_translated += 1;
        Ok(Verdict::Forward)
    }

    /// Answers an IPv6 packet with an ICMPv6 error from the translator (RFC 4443), unless
    /// the packet is itself an ICMPv6 error or came from an address that cannot be answered;
    /// then it is dropped as `otherwise`.
    #[allow(clippy::too_many_arguments)]
    fn reply6(
        &mut self,
        b: &[u8],
        ip: &V6,
        ty: u8,
        code: u8,
        rest: [u8; 4],
        out: &mut Vec<u8>,
        otherwise: DropReason,
    ) -> Result<Verdict, DropReason> {
        let about_error = ip.next == ICMP6
            && ip.frag.is_none_or(|f| f.offset8 == 0)
            && b.get(ip.l4).is_some_and(|&t| icmp::is_error6(t));
        if about_error {
            return Err(otherwise);
        }
        let body = &b[..b.len().min(MAX_ICMP6_ERROR_BYTES - 48)];
        let router6 = self.hdr.router6;
        out.clear();
        put_v6_header(
            out,
            0,
            8 + body.len(),
            ICMP6,
            OWN_HOP_LIMIT,
            router6,
            ip.src,
        );
        out.extend_from_slice(&[ty, code, 0, 0]);
        out.extend_from_slice(&rest);
        out.extend_from_slice(body);
        let c = checksum::checksum(&out[40..], pseudo6(router6, ip.src, ICMP6, out.len() - 40));
        out[42..44].copy_from_slice(&c.to_be_bytes());
        match ty {
            icmp::v6::TIME_EXCEEDED => self.stats.time_exceeded_sent += 1,
            icmp::v6::PACKET_TOO_BIG => self.stats.too_big_sent += 1,
            _ => self.stats.param_problem_sent += 1,
        }
        Ok(Verdict::Reply)
    }

    // ---------------------------------------------------------------- IPv4 → IPv6 (§4)

    fn v4_to_v6(
        &mut self,
        now: Instant,
        b: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<Verdict, DropReason> {
        let ip = parse_v4(b, false)?;
        let (src6, dst6) = self.map.addrs_4to6(ip.src, ip.dst)?;
        if ip.source_route {
            return self.reply4(
                b,
                &ip,
                icmp::v4::DEST_UNREACH,
                icmp::v4::CODE_SOURCE_ROUTE_FAILED,
                [0; 4],
                out,
                DropReason::Malformed,
            );
        }
        // RFC 7915 §4.1: TTL decremented; at zero, Time Exceeded in transit.
        if ip.ttl <= 1 {
            return self.reply4(
                b,
                &ip,
                icmp::v4::TIME_EXCEEDED,
                0,
                [0; 4],
                out,
                DropReason::HopLimit,
            );
        }
        let hop = ip.ttl - 1;
        let payload = &b[ip.l4..ip.end];
        if ip.proto == ICMP4
            && !ip.is_fragment()
            && payload.len() >= 8
            && icmp::is_error4(payload[0])
        {
            return self.icmp_error_4to6(b, &ip, src6, dst6, hop, out);
        }
        let frag_hdr = if ip.is_fragment() { 8 } else { 0 };
        let total = 40 + frag_hdr + payload.len();
        if total > usize::from(self.hdr.mtu6_bytes) {
            if ip.df {
                // Fragmentation Needed with the IPv4 equivalent of the IPv6 next hop's MTU.
                let mtu = self.hdr.mtu6_bytes - 20 - frag_hdr as u16;
                let m = mtu.to_be_bytes();
                return self.reply4(
                    b,
                    &ip,
                    icmp::v4::DEST_UNREACH,
                    icmp::v4::CODE_FRAG_NEEDED,
                    [0, 0, m[0], m[1]],
                    out,
                    DropReason::TooBig,
                );
            }
            return Err(DropReason::TooBig);
        }
        let next = match ip.proto {
            ICMP4 => ICMP6,
            TCP | UDP => ip.proto,
            _ => return Err(DropReason::UnsupportedProtocol),
        };

        if ip.offset8 != 0 {
            let x = match dst6 {
                Dst6::Fixed(a) => a,
                Dst6::Session => *self
                    .frags
                    .inb
                    .get(&(ip.src, ip.dst, ip.id, ip.proto))
                    .ok_or(DropReason::Fragment)?,
            };
            put_v6_header(
                out,
                ip.tos,
                frag_hdr + payload.len(),
                FRAGMENT,
                hop,
                src6,
                x,
            );
            put_frag_header(out, next, ip.offset8, ip.mf, u32::from(ip.id));
            out.extend_from_slice(payload);
            return Ok(Verdict::Forward);
        }
        if ip.is_fragment() && ip.proto == ICMP4 {
            return Err(DropReason::Fragment);
        }
        if payload.len() < min_l4(ip.proto) {
            return Err(if ip.is_fragment() {
                DropReason::Fragment
            } else {
                DropReason::Truncated
            });
        }
        let mut udp_zero = false;
        let (key, tcp) = match ip.proto {
            TCP | UDP => {
                if ip.proto == UDP && word(payload, 6) == 0 {
                    // RFC 7915 §4.5: no IPv4 UDP checksum; one is computed for IPv6, which
                    // needs the whole datagram.
                    if ip.is_fragment() {
                        return Err(DropReason::Fragment);
                    }
                    udp_zero = true;
                }
                if !ip.is_fragment() {
                    if ip.proto == UDP && usize::from(word(payload, 4)) != payload.len() {
                        return Err(DropReason::Malformed);
                    }
                    if !udp_zero {
                        self.check(payload, pseudo4(ip.src, ip.dst, ip.proto, payload.len()))?;
                    }
                }
                let proto = if ip.proto == TCP {
                    Proto::Tcp
                } else {
                    Proto::Udp
                };
                let tcp = if ip.proto == TCP {
                    tcp_flags(payload)
                } else {
                    TcpFlags::default()
                };
                (
                    Key4 {
                        proto,
                        t: ip.dst,
                        tport: word(payload, 2),
                        z: ip.src,
                        zport: word(payload, 0),
                    },
                    tcp,
                )
            }
            _ => {
                let ty = payload[0];
                if ty != icmp::v4::ECHO_REQUEST && ty != icmp::v4::ECHO_REPLY {
                    return Err(DropReason::IcmpUntranslatable);
                }
                self.check(payload, 0)?;
                let id = word(payload, 4);
                (
                    Key4 {
                        proto: Proto::Icmp,
                        t: ip.dst,
                        tport: id,
                        z: ip.src,
                        zport: id,
                    },
                    TcpFlags::default(),
                )
            }
        };
        let (x, xport) = match dst6 {
            Dst6::Fixed(a) => (a, key.tport),
            Dst6::Session => {
                let found = self.map.session_4to6(now, key, tcp)?;
                if ip.is_fragment() && self.frags.len() < self.hdr.max_fragments {
                    let k = (ip.src, ip.dst, ip.id, ip.proto);
                    self.frags.inb.insert(k, found.0);
                    self.frags
                        .expiry
                        .push_back((now + self.hdr.fragment_timeout, FragKey::In(k)));
                }
                found
            }
        };

        if ip.is_fragment() {
            put_v6_header(
                out,
                ip.tos,
                frag_hdr + payload.len(),
                FRAGMENT,
                hop,
                src6,
                x,
            );
            put_frag_header(out, next, 0, true, u32::from(ip.id));
        } else {
            put_v6_header(out, ip.tos, payload.len(), next, hop, src6, x);
        }
        let seg_at = out.len();
        out.extend_from_slice(payload);
        let seg = &mut out[seg_at..];
        if ip.proto == ICMP4 {
            let m = icmp::map_4to6(
                seg[0],
                seg[1],
                [seg[4], seg[5], seg[6], seg[7]],
                0,
                self.mtus(),
            )
            .ok_or(DropReason::IcmpUntranslatable)?;
            let old = u32::from(word(seg, 0));
            seg[0] = m.ty;
            seg[1] = m.code;
            let new = pseudo6(src6, x, ICMP6, seg.len()) + u32::from(word(seg, 0));
            rewrite_l4(seg, ICMP4, xport, xport, old, new);
        } else if udp_zero {
            seg[2..4].copy_from_slice(&xport.to_be_bytes());
            let mut c = csum::checksum(seg, pseudo6(src6, x, UDP, seg.len()));
            if c == 0 {
                c = 0xffff;
            }
            seg[6..8].copy_from_slice(&c.to_be_bytes());
        } else {
            let old = addr4_sum(ip.src) + addr4_sum(ip.dst);
            let sport = word(seg, 0);
            rewrite_l4(
                seg,
                ip.proto,
                sport,
                xport,
                old,
                addr6_sum(src6) + addr6_sum(x),
            );
        }
        Ok(Verdict::Forward)
    }

    /// RFC 7915 §4.2 (and RFC 6146 §3.5.3 for a NAT64): an ICMPv4 error from the IPv4 side
    /// about a packet the translator sent there. The mapping translates the inner packet back;
    /// the outer destination is the mapped one, or for a NAT64 the inner packet's source X'.
    fn icmp_error_4to6(
        &mut self,
        b: &[u8],
        ip: &V4,
        src6: Ipv6Addr,
        dst6: Dst6,
        hop: u8,
        out: &mut Vec<u8>,
    ) -> Result<Verdict, DropReason> {
        let msg = &b[ip.l4..ip.end];
        if checksum::checksum(msg, 0) != 0 {
            return Err(DropReason::BadChecksum);
        }
        let inner_b = &msg[8..];
        let inner = parse_v4(inner_b, true)?;
        let m = icmp::map_4to6(
            msg[0],
            msg[1],
            [msg[4], msg[5], msg[6], msg[7]],
            inner.total_len,
            self.mtus(),
        )
        .ok_or(DropReason::IcmpUntranslatable)?;
        let seg = &inner_b[inner.l4..inner.end];
        if inner.offset8 != 0 {
            return Err(DropReason::Fragment);
        }
        let (proto, sport, dport) = inner_ports(inner.proto, seg)?;
        let q = self.map.quoted_4to6(
            proto,
            Ends4 {
                src: inner.src,
                sport,
                dst: inner.dst,
                dport,
            },
        )?;
        let x = match dst6 {
            Dst6::Fixed(a) => a,
            Dst6::Session => q.src,
        };
        let inner_next = if inner.proto == ICMP4 {
            ICMP6
        } else {
            inner.proto
        };

        out.clear();
        put_v6_header(out, ip.tos, 0, ICMP6, hop, src6, x);
        out.extend_from_slice(&[m.ty, m.code, 0, 0]);
        out.extend_from_slice(&m.rest);
        let inner_plen = usize::from(inner.total_len) - inner.l4;
        if inner.is_fragment() {
            put_v6_header(
                out,
                inner.tos,
                inner_plen + 8,
                FRAGMENT,
                inner.ttl,
                q.src,
                q.dst,
            );
            put_frag_header(
                out,
                inner_next,
                inner.offset8,
                inner.mf,
                u32::from(inner.id),
            );
        } else {
            put_v6_header(
                out, inner.tos, inner_plen, inner_next, inner.ttl, q.src, q.dst,
            );
        }
        let seg_at = out.len();
        out.extend_from_slice(seg);
        {
            let s = &mut out[seg_at..];
            if inner.proto == ICMP4 {
                let old = u32::from(word(s, 0));
                s[0] = if s[0] == icmp::v4::ECHO_REQUEST {
                    icmp::v6::ECHO_REQUEST
                } else {
                    icmp::v6::ECHO_REPLY
                };
                let new = pseudo6(q.src, q.dst, ICMP6, inner_plen) + u32::from(word(s, 0));
                rewrite_l4(s, ICMP4, q.sport, q.sport, old, new);
            } else {
                let old = addr4_sum(inner.src) + addr4_sum(inner.dst);
                rewrite_l4(
                    s,
                    inner.proto,
                    q.sport,
                    q.dport,
                    old,
                    addr6_sum(q.src) + addr6_sum(q.dst),
                );
            }
        }
        out.truncate(MAX_ICMP6_ERROR_BYTES);
        let plen = out.len() - 40;
        out[4..6].copy_from_slice(&(plen as u16).to_be_bytes());
        let c = checksum::checksum(&out[40..], pseudo6(src6, x, ICMP6, plen));
        out[42..44].copy_from_slice(&c.to_be_bytes());
        self.stats.icmp_errors_translated += 1;
        Ok(Verdict::Forward)
    }

    /// Answers an IPv4 packet with an ICMPv4 error from the translator (RFC 792, RFC 1812
    /// §4.3.2.7: never about an ICMP error, a later fragment or a non-unicast source).
    #[allow(clippy::too_many_arguments)]
    fn reply4(
        &mut self,
        b: &[u8],
        ip: &V4,
        ty: u8,
        code: u8,
        rest: [u8; 4],
        out: &mut Vec<u8>,
        otherwise: DropReason,
    ) -> Result<Verdict, DropReason> {
        let about_error = ip.proto == ICMP4
            && ip.offset8 == 0
            && b.get(ip.l4).is_some_and(|&t| icmp::is_error4(t));
        if about_error || ip.offset8 != 0 || bad_v4(ip.src) {
            return Err(otherwise);
        }
        let body = &b[..ip.end.min(MAX_ICMP4_ERROR_BYTES - 28)];
        out.clear();
        put_v4_header(
            out,
            0,
            28 + body.len(),
            0,
            0,
            OWN_HOP_LIMIT,
            ICMP4,
            self.hdr.router4,
            ip.src,
        );
        out.extend_from_slice(&[ty, code, 0, 0]);
        out.extend_from_slice(&rest);
        out.extend_from_slice(body);
        finish_icmp4(out);
        match (ty, code) {
            (icmp::v4::TIME_EXCEEDED, _) => self.stats.time_exceeded_sent += 1,
            (_, icmp::v4::CODE_FRAG_NEEDED) => self.stats.too_big_sent += 1,
            _ => self.stats.param_problem_sent += 1,
        }
        Ok(Verdict::Reply)
    }
}

fn outcome(v: Verdict, out: Vec<u8>) -> Outcome {
    match v {
        Verdict::Forward => Outcome::Forward(out),
        Verdict::Reply => Outcome::Reply(out),
        Verdict::Drop(r) => Outcome::Drop(r),
    }
}

/// Sets the total length and both checksums of an IPv4 ICMP message built in `out` (IPv4
/// header at 0, ICMP at 20), after any truncation.
fn finish_icmp4(out: &mut [u8]) {
    let total = out.len() as u16;
    out[2..4].copy_from_slice(&total.to_be_bytes());
    out[10..12].copy_from_slice(&[0, 0]);
    let h = checksum::checksum(&out[..20], 0);
    out[10..12].copy_from_slice(&h.to_be_bytes());
    out[22..24].copy_from_slice(&[0, 0]);
    let c = checksum::checksum(&out[20..], 0);
    out[22..24].copy_from_slice(&c.to_be_bytes());
}

/// The protocol and (source, destination) ports of the packet inside an ICMP error; for ICMP
/// echo the identifier stands for both.
fn inner_ports(next: u8, seg: &[u8]) -> Result<(Proto, u16, u16), DropReason> {
    match next {
        TCP | UDP if seg.len() >= 4 => {
            let p = if next == TCP { Proto::Tcp } else { Proto::Udp };
            Ok((p, word(seg, 0), word(seg, 2)))
        }
        ICMP4 | ICMP6 if seg.len() >= 8 => {
            // Only echo has a session; an error about an error is never sent (RFC 4443
            // §2.4 (e), RFC 1122 §3.2.2), so one that claims to be is not translated.
            let echo = match next {
                ICMP4 => matches!(seg[0], icmp::v4::ECHO_REQUEST | icmp::v4::ECHO_REPLY),
                _ => matches!(seg[0], icmp::v6::ECHO_REQUEST | icmp::v6::ECHO_REPLY),
            };
            if !echo {
                return Err(DropReason::IcmpUntranslatable);
            }
            let id = word(seg, 4);
            Ok((Proto::Icmp, id, id))
        }
        TCP | UDP | ICMP4 | ICMP6 => Err(DropReason::Truncated),
        _ => Err(DropReason::UnsupportedProtocol),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::TcpState;
    use crate::Outcome::{Drop, Forward, Reply};
    use crate::{ConfigError, Nat64, Params};
    use etherparse::{NetHeaders, PacketHeaders, TransportHeader};
    use wire::build::{Ip, Tcp};
    use wire::packet::TcpHeader;
    use wire::Duration;

    const T: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
    const Z: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 10);
    fn x() -> Ipv6Addr {
        "2001:db8::2".parse().unwrap()
    }
    fn y() -> Ipv6Addr {
        "64:ff9b::c633:640a".parse().unwrap() // 64:ff9b::198.51.100.10
    }
    fn nat() -> Nat64 {
        Nat64::new(
            Params {
                pool4: vec![T],
                ..Params::default()
            },
            7,
        )
        .unwrap()
    }
    fn now() -> Instant {
        Instant::from_secs(100)
    }

    fn udp6(
        src: Ipv6Addr,
        dst: Ipv6Addr,
        sport: u16,
        dport: u16,
        hop: u8,
        payload: &[u8],
    ) -> Vec<u8> {
        Ip::v6(src, dst).hop_limit(hop).udp(sport, dport, payload)
    }
    fn udp4(
        src: Ipv4Addr,
        dst: Ipv4Addr,
        sport: u16,
        dport: u16,
        ttl: u8,
        payload: &[u8],
    ) -> Vec<u8> {
        Ip::v4(src, dst).hop_limit(ttl).udp(sport, dport, payload)
    }
    /// Sets the IPv4 TOS byte and fixes the header checksum.
    fn set_tos4(p: &mut [u8], tos: u8) {
        p[1] = tos;
        p[10..12].copy_from_slice(&[0, 0]);
        let c = checksum::checksum(&p[..20], 0);
        p[10..12].copy_from_slice(&c.to_be_bytes());
    }
    fn set_tc6(p: &mut [u8], tc: u8) {
        p[0] = 0x60 | (tc >> 4);
        p[1] = (p[1] & 0x0f) | (tc << 4);
    }
    fn forward(o: Outcome) -> Vec<u8> {
        match o {
            Forward(b) => b,
            other => panic!("expected Forward, got {other:?}"),
        }
    }
    fn reply(o: Outcome) -> Vec<u8> {
        match o {
            Reply(b) => b,
            other => panic!("expected Reply, got {other:?}"),
        }
    }

    /// Parses an IPv4 packet with etherparse and checks its header and transport checksums.
    fn check4(b: &[u8]) -> (etherparse::Ipv4Header, TransportHeader, Vec<u8>) {
        let h = PacketHeaders::from_ip_slice(b).expect("etherparse reads the packet");
        let Some(NetHeaders::Ipv4(ip, _)) = h.net else {
            panic!("not ipv4")
        };
        assert_eq!(
            ip.header_checksum,
            ip.calc_header_checksum(),
            "ipv4 header checksum"
        );
        let payload = h.payload.slice().to_vec();
        let tr = h.transport.expect("a transport header");
        match &tr {
            TransportHeader::Udp(u) => assert_eq!(
                u.checksum,
                u.calc_checksum_ipv4(&ip, &payload).unwrap(),
                "udp checksum"
            ),
            TransportHeader::Tcp(t) => assert_eq!(
                t.checksum,
                t.calc_checksum_ipv4(&ip, &payload).unwrap(),
                "tcp checksum"
            ),
            TransportHeader::Icmpv4(i) => assert_eq!(
                i.checksum,
                i.icmp_type.calc_checksum(&payload),
                "icmp checksum"
            ),
            TransportHeader::Icmpv6(_) => panic!("icmpv6 in ipv4"),
        }
        (ip, tr, payload)
    }

    /// Parses an IPv6 packet with etherparse and checks its transport checksum.
    fn check6(b: &[u8]) -> (etherparse::Ipv6Header, TransportHeader, Vec<u8>) {
        let h = PacketHeaders::from_ip_slice(b).expect("etherparse reads the packet");
        let Some(NetHeaders::Ipv6(ip, _)) = h.net else {
            panic!("not ipv6")
        };
        let payload = h.payload.slice().to_vec();
        let tr = h.transport.expect("a transport header");
        match &tr {
            TransportHeader::Udp(u) => assert_eq!(
                u.checksum,
                u.calc_checksum_ipv6(&ip, &payload).unwrap(),
                "udp checksum"
            ),
            TransportHeader::Tcp(t) => assert_eq!(
                t.checksum,
                t.calc_checksum_ipv6(&ip, &payload).unwrap(),
                "tcp checksum"
            ),
            TransportHeader::Icmpv6(i) => assert_eq!(
                i.checksum,
                i.icmp_type
                    .calc_checksum(ip.source, ip.destination, &payload)
                    .unwrap(),
                "icmpv6 checksum"
            ),
            TransportHeader::Icmpv4(_) => panic!("icmpv4 in ipv6"),
        }
        (ip, tr, payload)
    }

    #[test]
    fn udp_from_ipv6_leaves_as_ipv4_from_the_pool_with_a_valid_checksum() {
        let mut n = nat();
        let mut p = udp6(x(), y(), 5353, 53, 64, b"hello dns");
        set_tc6(&mut p, 0xb9); // DSCP 46, ECT(1)
        let out = forward(n.translate_6to4(now(), &p));
        let (ip, tr, payload) = check4(&out);
        assert_eq!(ip.source, T.octets());
        assert_eq!(ip.destination, Z.octets());
        assert_eq!(ip.time_to_live, 63, "hop limit 64 decremented");
        assert_eq!(
            (ip.dscp.value(), ip.ecn.value()),
            (46, 1),
            "traffic class copied with its ECN bits"
        );
        assert!(
            !ip.dont_fragment,
            "small packets go without DF (rfc 7915 section 5.1)"
        );
        let TransportHeader::Udp(u) = tr else {
            panic!()
        };
        assert_eq!(
            (u.source_port, u.destination_port),
            (5353, 53),
            "port preserved"
        );
        assert_eq!(payload, b"hello dns");
        assert_eq!(n.stats().translated_6to4, 1);
        assert_eq!((n.stats().sessions, n.stats().bindings), (1, 1));
    }

    #[test]
    fn udp_reply_from_ipv4_reaches_the_ipv6_client_with_tos_and_checksum() {
        let mut n = nat();
        forward(n.translate_6to4(now(), &udp6(x(), y(), 5353, 53, 64, b"q")));
        let mut r = udp4(Z, T, 53, 5353, 50, b"answer");
        set_tos4(&mut r, 0x03); // CE
        let out = forward(n.translate_4to6(now(), &r));
        let (ip, tr, payload) = check6(&out);
        assert_eq!(Ipv6Addr::from(ip.source), y());
        assert_eq!(Ipv6Addr::from(ip.destination), x());
        assert_eq!(ip.hop_limit, 49);
        assert_eq!(ip.traffic_class, 0x03, "ECN CE survives");
        assert_eq!(ip.flow_label.value(), 0);
        let TransportHeader::Udp(u) = tr else {
            panic!()
        };
        assert_eq!((u.source_port, u.destination_port), (53, 5353));
        assert_eq!(payload, b"answer");
    }

    #[test]
    fn zero_udp_checksum_from_ipv4_is_computed_for_ipv6() {
        let mut n = nat();
        forward(n.translate_6to4(now(), &udp6(x(), y(), 4000, 9, 64, b"q")));
        let mut r = udp4(Z, T, 9, 4000, 64, b"no checksum here");
        r[26..28].copy_from_slice(&[0, 0]);
        let out = forward(n.translate_4to6(now(), &r));
        let (_, tr, _) = check6(&out);
        let TransportHeader::Udp(u) = tr else {
            panic!()
        };
        assert_ne!(u.checksum, 0);
    }

    /// A segment with `flags` from "SFRA"; A acknowledges `ack`.
    fn segment(sport: u16, dport: u16, seq: u32, ack: u32, flags: &str) -> Tcp {
        let mut t = Tcp::new(sport, dport, seq).window(65000);
        for f in flags.chars() {
            t = match f {
                'S' => t.flags(TcpHeader::SYN),
                'F' => t.flags(TcpHeader::FIN),
                'R' => t.flags(TcpHeader::RST),
                'A' => t.ack(ack),
                _ => t,
            };
        }
        t
    }
    fn tcp6(sport: u16, dport: u16, flags: &str, payload: &[u8]) -> Vec<u8> {
        Ip::v6(x(), y()).tcp(&segment(sport, dport, 1000, 1, flags), payload)
    }
    fn tcp4(sport: u16, dport: u16, flags: &str, payload: &[u8]) -> Vec<u8> {
        Ip::v4(Z, T).tcp(&segment(sport, dport, 5000, 1001, flags), payload)
    }

    #[test]
    fn tcp_handshake_and_data_translate_both_ways_with_valid_checksums() {
        let mut n = nat();
        let syn = forward(n.translate_6to4(now(), &tcp6(40000, 80, "S", b"")));
        let (_, tr, _) = check4(&syn);
        let TransportHeader::Tcp(t) = tr else {
            panic!()
        };
        assert!(t.syn && (t.source_port, t.destination_port) == (40000, 80));
        assert_eq!(n.tcp_state(T, 40000, Z, 80), TcpState::V6Init);

        let synack = forward(n.translate_4to6(now(), &tcp4(80, 40000, "SA", b"")));
        let (ip, tr, _) = check6(&synack);
        assert_eq!(Ipv6Addr::from(ip.destination), x());
        let TransportHeader::Tcp(t) = tr else {
            panic!()
        };
        assert!(t.syn && t.ack && t.destination_port == 40000);
        assert_eq!(n.tcp_state(T, 40000, Z, 80), TcpState::Established);

        let data =
            forward(n.translate_6to4(now(), &tcp6(40000, 80, "A", b"GET / HTTP/1.0\r\n\r\n")));
        let (_, _, payload) = check4(&data);
        assert_eq!(payload, b"GET / HTTP/1.0\r\n\r\n");
        let back = forward(n.translate_4to6(now(), &tcp4(80, 40000, "A", &[0x42; 1000])));
        let (_, _, payload) = check6(&back);
        assert_eq!(payload.len(), 1000);
    }

    #[test]
    fn tcp_to_a_port_nobody_opened_is_dropped_and_counted() {
        let mut n = nat();
        assert_eq!(
            n.translate_4to6(now(), &tcp4(80, 40000, "S", b"")),
            Drop(DropReason::NoSession)
        );
        assert_eq!(
            n.translate_6to4(now(), &tcp6(40000, 80, "A", b"")),
            Drop(DropReason::NoSession)
        );
        assert_eq!(n.stats().drops_of(DropReason::NoSession), 2);
        assert_eq!(n.stats().sessions, 0);
    }

    fn ping6(id: u16, seq: u16, payload: &[u8]) -> Vec<u8> {
        Ip::v6(x(), y()).echo_request(id, seq, payload)
    }

    #[test]
    fn icmp_echo_translates_both_ways_keeping_identifier_and_sequence() {
        let mut n = nat();
        let req = forward(n.translate_6to4(now(), &ping6(0x1234, 1, b"abcdefgh")));
        let (_, tr, payload) = check4(&req);
        let TransportHeader::Icmpv4(i) = tr else {
            panic!()
        };
        let etherparse::Icmpv4Type::EchoRequest(e) = i.icmp_type else {
            panic!("{:?}", i.icmp_type)
        };
        assert_eq!((e.id, e.seq), (0x1234, 1));
        assert_eq!(payload, b"abcdefgh");

        let rep = Ip::v4(Z, T).echo_reply(0x1234, 1, b"abcdefgh");
        let out = forward(n.translate_4to6(now(), &rep));
        let (ip, tr, _) = check6(&out);
        assert_eq!(Ipv6Addr::from(ip.destination), x());
        let TransportHeader::Icmpv6(i) = tr else {
            panic!()
        };
        let etherparse::Icmpv6Type::EchoReply(e) = i.icmp_type else {
            panic!("{:?}", i.icmp_type)
        };
        assert_eq!((e.id, e.seq), (0x1234, 1));
    }

    #[test]
    fn hop_limit_one_is_answered_with_time_exceeded_to_the_sender() {
        let mut n = nat();
        let p = udp6(x(), y(), 5000, 33434, 1, b"traceroute");
        let r = reply(n.translate_6to4(now(), &p));
        let (ip, tr, payload) = check6(&r);
        assert_eq!(Ipv6Addr::from(ip.destination), x());
        assert_eq!(
            Ipv6Addr::from(ip.source),
            "64:ff9b::c000:201".parse::<Ipv6Addr>().unwrap()
        );
        let TransportHeader::Icmpv6(i) = tr else {
            panic!()
        };
        assert!(matches!(
            i.icmp_type,
            etherparse::Icmpv6Type::TimeExceeded(_)
        ));
        assert_eq!(payload, p, "the whole offending packet is quoted");
        assert_eq!(n.stats().time_exceeded_sent, 1);
        assert_eq!(n.stats().sessions, 0, "no session for an expired packet");
    }

    #[test]
    fn ttl_one_from_ipv4_is_answered_with_icmpv4_time_exceeded() {
        let mut n = nat();
        forward(n.translate_6to4(now(), &udp6(x(), y(), 5000, 53, 64, b"q")));
        let r = reply(n.translate_4to6(now(), &udp4(Z, T, 53, 5000, 1, b"a")));
        let (ip, tr, _) = check4(&r);
        assert_eq!(ip.destination, Z.octets());
        let TransportHeader::Icmpv4(i) = tr else {
            panic!()
        };
        assert!(
            matches!(i.icmp_type, etherparse::Icmpv4Type::TimeExceeded(_)),
            "{:?}",
            i.icmp_type
        );
    }

    /// An ICMPv4 error from a router R on the IPv4 side about the packet T:t → Z:z.
    fn icmp4_error(ty: u8, code: u8, rest: [u8; 4], inner: &[u8]) -> Vec<u8> {
        let r = Ipv4Addr::new(203, 0, 113, 254);
        Ip::v4(r, T)
            .hop_limit(60)
            .identification(1)
            .dont_fragment(false)
            .icmp(ty, code, rest, inner)
    }

    #[test]
    fn fragmentation_needed_becomes_packet_too_big_with_the_inner_packet_translated() {
        let mut n = nat();
        let syn = forward(n.translate_6to4(now(), &tcp6(40000, 80, "S", b"")));
        // A router says the SYN (as it left us) needs fragmentation at MTU 1400.
        let err = icmp4_error(3, 4, [0, 0, 0x05, 0x78], &syn);
        let out = forward(n.translate_4to6(now(), &err));
        let (ip, tr, inner) = check6(&out);
        assert_eq!(
            Ipv6Addr::from(ip.source),
            "64:ff9b::cb00:71fe".parse::<Ipv6Addr>().unwrap()
        );
        assert_eq!(Ipv6Addr::from(ip.destination), x());
        let TransportHeader::Icmpv6(i) = tr else {
            panic!()
        };
        let etherparse::Icmpv6Type::PacketTooBig { mtu } = i.icmp_type else {
            panic!("{:?}", i.icmp_type)
        };
        assert_eq!(mtu, 1420, "advertised 1400 + 20 (rfc 7915 section 4.2)");
        // The quoted packet is the client's own SYN again: X' → Y', ports 40000 → 80.
        let h = PacketHeaders::from_ip_slice(&inner).unwrap();
        let Some(NetHeaders::Ipv6(iip, _)) = h.net else {
            panic!()
        };
        assert_eq!(
            (Ipv6Addr::from(iip.source), Ipv6Addr::from(iip.destination)),
            (x(), y())
        );
        let Some(TransportHeader::Tcp(t)) = h.transport else {
            panic!()
        };
        assert_eq!((t.source_port, t.destination_port), (40000, 80));
        assert_eq!(
            t.checksum,
            t.calc_checksum_ipv6(&iip, h.payload.slice()).unwrap(),
            "inner checksum adjusted"
        );
        assert_eq!(n.stats().icmp_errors_translated, 1);
    }

    #[test]
    fn fragmentation_needed_with_zero_mtu_uses_the_plateau() {
        let mut n = Nat64::new(
            Params {
                pool4: vec![T],
                mtu6_bytes: 9000,
                mtu4_bytes: 9000,
                ..Params::default()
            },
            1,
        )
        .unwrap();
        let big = forward(n.translate_6to4(now(), &udp6(x(), y(), 5000, 53, 64, &[0; 1572])));
        assert_eq!(big.len(), 1600);
        let err = icmp4_error(3, 4, [0; 4], &big[..28]);
        let out = forward(n.translate_4to6(now(), &err));
        let (_, tr, _) = check6(&out);
        let TransportHeader::Icmpv6(i) = tr else {
            panic!()
        };
        // Total Length 1600 → plateau 1492 (RFC 1191) → 1512.
        assert_eq!(
            i.icmp_type,
            etherparse::Icmpv6Type::PacketTooBig { mtu: 1512 }
        );
    }

    #[test]
    fn icmpv6_port_unreachable_from_the_client_becomes_icmpv4_port_unreachable() {
        let mut n = nat();
        forward(n.translate_6to4(now(), &udp6(x(), y(), 5000, 53, 64, b"q")));
        let to_client = forward(n.translate_4to6(now(), &udp4(Z, T, 53, 5000, 64, b"late answer")));
        // The client's stack answers with ICMPv6 port unreachable quoting the packet.
        let err = Ip::v6(x(), y()).icmp(1, 4, [0; 4], &to_client);
        let out = forward(n.translate_6to4(now(), &err));
        let (ip, tr, inner) = check4(&out);
        assert_eq!((ip.source, ip.destination), (T.octets(), Z.octets()));
        let TransportHeader::Icmpv4(i) = tr else {
            panic!()
        };
        assert_eq!(
            i.icmp_type,
            etherparse::Icmpv4Type::DestinationUnreachable(
                etherparse::icmpv4::DestUnreachableHeader::Port
            )
        );
        let h = PacketHeaders::from_ip_slice(&inner).unwrap();
        let Some(NetHeaders::Ipv4(iip, _)) = h.net else {
            panic!()
        };
        assert_eq!((iip.source, iip.destination), (Z.octets(), T.octets()));
        assert_eq!(iip.header_checksum, iip.calc_header_checksum());
        let Some(TransportHeader::Udp(u)) = h.transport else {
            panic!()
        };
        assert_eq!((u.source_port, u.destination_port), (53, 5000));
        assert_eq!(
            u.checksum,
            u.calc_checksum_ipv4(&iip, h.payload.slice()).unwrap()
        );
    }

    #[test]
    fn icmp_error_about_an_unknown_session_is_dropped() {
        let mut n = nat();
        let stray = udp4(T, Z, 7777, 53, 64, b"never sent");
        assert_eq!(
            n.translate_4to6(now(), &icmp4_error(3, 3, [0; 4], &stray)),
            Drop(DropReason::NoSession)
        );
    }

    #[test]
    fn ipv4_packet_too_big_for_the_ipv6_hop_with_df_gets_fragmentation_needed() {
        let mut n = nat();
        forward(n.translate_6to4(now(), &tcp6(40000, 80, "S", b"")));
        forward(n.translate_4to6(now(), &tcp4(80, 40000, "SA", b"")));
        let big = tcp4(80, 40000, "A", &[7; 1460]);
        assert_eq!(big.len(), 1500);
        assert_ne!(big[6] & 0x40, 0, "DF");
        let no_df = Ip::v4(Z, T)
            .dont_fragment(false)
            .tcp(&segment(80, 40000, 5000, 1001, "A"), &[7; 1460]);
        let r = reply(n.translate_4to6(now(), &big));
        let (ip, tr, _) = check4(&r);
        assert_eq!(ip.destination, Z.octets());
        let TransportHeader::Icmpv4(i) = tr else {
            panic!()
        };
        assert_eq!(
            i.icmp_type,
            etherparse::Icmpv4Type::DestinationUnreachable(
                etherparse::icmpv4::DestUnreachableHeader::FragmentationNeeded {
                    next_hop_mtu: 1480
                }
            )
        );
        // Without DF it would need IPv6 fragmentation, which is not done: dropped, counted.
        assert_eq!(n.translate_4to6(now(), &no_df), Drop(DropReason::TooBig));
        assert_eq!(n.stats().too_big_sent, 1);
    }

    #[test]
    fn ipv6_packet_too_big_for_the_ipv4_hop_gets_packet_too_big_with_mtu_plus_20() {
        let mut n = Nat64::new(
            Params {
                pool4: vec![T],
                mtu4_bytes: 1300,
                ..Params::default()
            },
            1,
        )
        .unwrap();
        let r = reply(n.translate_6to4(now(), &udp6(x(), y(), 5000, 53, 64, &[0; 1400])));
        let (_, tr, _) = check6(&r);
        let TransportHeader::Icmpv6(i) = tr else {
            panic!()
        };
        assert_eq!(
            i.icmp_type,
            etherparse::Icmpv6Type::PacketTooBig { mtu: 1320 }
        );
    }

    #[test]
    fn big_ipv6_packets_get_df_in_ipv4() {
        let mut n = nat();
        let out = forward(n.translate_6to4(now(), &udp6(x(), y(), 5000, 53, 64, &[0; 1300])));
        let (ip, _, _) = check4(&out);
        assert!(
            ip.dont_fragment,
            "over 1260 bytes DF is set (rfc 7915 section 5.1)"
        );
    }

    #[test]
    fn bad_checksums_are_dropped_and_counted() {
        let mut n = nat();
        let mut p = udp6(x(), y(), 5000, 53, 64, b"payload");
        *p.last_mut().unwrap() ^= 0xff;
        assert_eq!(n.translate_6to4(now(), &p), Drop(DropReason::BadChecksum));
        let mut q = udp4(Z, T, 53, 5000, 64, b"x");
        q[10] ^= 1;
        assert_eq!(n.translate_4to6(now(), &q), Drop(DropReason::BadChecksum));
        let mut ping = ping6(1, 1, b"zz");
        ping[43] ^= 1;
        assert_eq!(
            n.translate_6to4(now(), &ping),
            Drop(DropReason::BadChecksum)
        );
        assert_eq!(n.stats().drops_of(DropReason::BadChecksum), 3);
        assert_eq!(n.stats().sessions, 0);
    }

    #[test]
    fn truncated_and_unsupported_packets_are_dropped_with_reasons() {
        let mut n = nat();
        let p = udp6(x(), y(), 5000, 53, 64, b"payload");
        assert_eq!(
            n.translate_6to4(now(), &p[..30]),
            Drop(DropReason::Truncated)
        );
        assert_eq!(
            n.translate_6to4(now(), &p[..p.len() - 1]),
            Drop(DropReason::Truncated)
        );
        let mut esp = p.clone();
        esp[6] = 50;
        assert_eq!(
            n.translate_6to4(now(), &esp),
            Drop(DropReason::UnsupportedExtension)
        );
        let mut sctp = p.clone();
        sctp[6] = 132;
        assert_eq!(
            n.translate_6to4(now(), &sctp),
            Drop(DropReason::UnsupportedProtocol)
        );
        let outside = udp6(x(), "2001:db8::99".parse().unwrap(), 5000, 53, 64, b"x");
        assert_eq!(
            n.translate_6to4(now(), &outside),
            Drop(DropReason::NotInPrefix)
        );
        let hairpin = udp6(
            x(),
            "64:ff9b::c000:201".parse().unwrap(),
            5000,
            53,
            64,
            b"x",
        );
        assert_eq!(n.translate_6to4(now(), &hairpin), Drop(DropReason::Hairpin));
        let elsewhere = udp4(Z, Ipv4Addr::new(192, 0, 2, 77), 53, 5000, 64, b"x");
        assert_eq!(
            n.translate_4to6(now(), &elsewhere),
            Drop(DropReason::NotInPool)
        );
        assert_eq!(
            n.translate_4to6(now(), &[0x45]),
            Drop(DropReason::Truncated)
        );
        assert_eq!(n.translate_6to4(now(), &[]), Drop(DropReason::Truncated));
        assert_eq!(n.stats().total_drops(), 9);
    }

    #[test]
    fn routing_header_with_segments_left_is_answered_with_parameter_problem() {
        let mut n = nat();
        let p = udp6(x(), y(), 5000, 53, 64, b"x");
        // Insert a type-0-like routing header (8 bytes) with Segments Left 1.
        let mut r = p[..40].to_vec();
        r[6] = ROUTING;
        let plen = word(&p, 4) + 8;
        r[4..6].copy_from_slice(&plen.to_be_bytes());
        r.extend_from_slice(&[UDP, 0, 4, 1, 0, 0, 0, 0]);
        r.extend_from_slice(&p[40..]);
        let out = reply(n.translate_6to4(now(), &r));
        let (_, tr, _) = check6(&out);
        let TransportHeader::Icmpv6(i) = tr else {
            panic!()
        };
        assert_eq!(word(&i.to_bytes(), 0), 0x0400, "parameter problem, code 0");
        assert_eq!(
            &i.to_bytes()[4..8],
            &43u32.to_be_bytes(),
            "pointer at segments left (40 + 3)"
        );
    }

    #[test]
    fn ipv6_fragments_become_ipv4_fragments_and_a_lone_later_fragment_is_dropped() {
        let mut n = nat();
        let whole = udp6(x(), y(), 5000, 53, 64, &[9; 64]);
        let l4 = &whole[40..];
        let frag = |off8: u16, more: bool, part: &[u8]| {
            Ip::v6(x(), y()).fragment(UDP, 0xabcd_0042, off8, more, part)
        };
        let second = frag(4, false, &l4[32..]);
        assert_eq!(n.translate_6to4(now(), &second), Drop(DropReason::Fragment));
        let a = forward(n.translate_6to4(now(), &frag(0, true, &l4[..32])));
        let b = forward(n.translate_6to4(now(), &second));
        assert_eq!(
            (word(&a, 4), word(&a, 6)),
            (0x0042, 0x2000),
            "id from the low bits, MF"
        );
        assert_eq!((word(&b, 4), word(&b, 6)), (0x0042, 4), "offset 32 bytes");
        // Reassembled, the IPv4 datagram checks out.
        let mut re = a[..20].to_vec();
        re.extend_from_slice(&a[20..]);
        re.extend_from_slice(&b[20..]);
        let total = re.len() as u16;
        re[2..4].copy_from_slice(&total.to_be_bytes());
        re[6..8].copy_from_slice(&[0, 0]);
        re[10..12].copy_from_slice(&[0, 0]);
        let c = checksum::checksum(&re[..20], 0);
        re[10..12].copy_from_slice(&c.to_be_bytes());
        let (_, _, payload) = check4(&re);
        assert_eq!(payload, vec![9; 64]);
        // The record of the first fragment lasts FRAGMENT_MIN.
        n.expire(now() + Duration::from_secs(2));
        assert_eq!(
            n.translate_6to4(now() + Duration::from_secs(2), &second),
            Drop(DropReason::Fragment)
        );
    }

    #[test]
    fn ipv4_fragments_gain_an_ipv6_fragment_header() {
        let mut n = nat();
        forward(n.translate_6to4(now(), &udp6(x(), y(), 5000, 53, 64, b"q")));
        let whole = udp4(Z, T, 53, 5000, 64, &[3; 40]);
        let l4 = whole[20..].to_vec();
        let frag = |off8: u16, more: bool, part: &[u8]| {
            Ip::v4(Z, T)
                .dont_fragment(false)
                .fragment(UDP, 0x7777, off8, more, part)
        };
        let a = forward(n.translate_4to6(now(), &frag(0, true, &l4[..24])));
        let b = forward(n.translate_4to6(now(), &frag(3, false, &l4[24..])));
        assert_eq!(a[6], FRAGMENT);
        assert_eq!(
            (a[40], word(&a, 42), &a[44..48]),
            (UDP, 1, &0x7777u32.to_be_bytes()[..])
        );
        assert_eq!((b[40], word(&b, 42)), (UDP, 3 << 3));
        // Reassembled, the IPv6 datagram checks out.
        let mut re = a[..40].to_vec();
        re[6] = UDP;
        re.extend_from_slice(&a[48..]);
        re.extend_from_slice(&b[48..]);
        let plen = re.len() - 40;
        re[4..6].copy_from_slice(&(plen as u16).to_be_bytes());
        let (_, _, payload) = check6(&re);
        assert_eq!(payload, vec![3; 40]);
    }

    #[test]
    fn sessions_time_out_in_simulated_time_and_next_timeout_says_when() {
        let mut n = nat();
        let t0 = Instant::from_secs(1000);
        forward(n.translate_6to4(t0, &udp6(x(), y(), 5000, 53, 64, b"q")));
        forward(n.translate_6to4(t0, &ping6(9, 1, b"p")));
        assert_eq!(
            n.next_timeout(),
            Some(t0 + Duration::from_secs(60)),
            "the icmp session first"
        );
        n.expire(t0 + Duration::from_secs(60));
        assert_eq!(n.stats().sessions, 1);
        assert_eq!(n.next_timeout(), Some(t0 + Duration::from_secs(300)));
        let late = t0 + Duration::from_secs(300);
        assert_eq!(
            n.translate_4to6(late, &udp4(Z, T, 53, 5000, 64, b"a")),
            Drop(DropReason::NoSession)
        );
        assert_eq!((n.stats().sessions, n.stats().bindings), (0, 0));
        assert_eq!(n.stats().tables.sessions_expired, 2);
        assert_eq!(n.next_timeout(), None);
    }

    #[test]
    fn full_session_table_refuses_new_flows_and_counts() {
        let mut n = Nat64::new(
            Params {
                pool4: vec![T],
                max_sessions: 2,
                ..Params::default()
            },
            1,
        )
        .unwrap();
        for port in [1, 2] {
            forward(n.translate_6to4(now(), &udp6(x(), y(), 5000 + port, 53, 64, b"q")));
        }
        assert_eq!(
            n.translate_6to4(now(), &udp6(x(), y(), 5003, 53, 64, b"q")),
            Drop(DropReason::TableFull)
        );
        let s = n.stats();
        assert_eq!(
            (
                s.tables.table_full,
                s.drops_of(DropReason::TableFull),
                s.sessions
            ),
            (1, 1, 2)
        );
        // Existing flows still pass.
        forward(n.translate_6to4(now(), &udp6(x(), y(), 5001, 53, 64, b"q")));
    }

    #[test]
    fn bad_params_are_refused() {
        assert_eq!(
            Nat64::new(Params::default(), 0).err(),
            Some(ConfigError::EmptyPool)
        );
        let p = Params {
            pool4: vec![T],
            udp_timeout: Duration::from_secs(60),
            ..Params::default()
        };
        assert!(matches!(
            Nat64::new(p, 0),
            Err(ConfigError::UdpTimeoutTooShort(_))
        ));
        let p = Params {
            pool4: vec![T],
            mtu6_bytes: 1000,
            ..Params::default()
        };
        assert_eq!(
            Nat64::new(p, 0).err(),
            Some(ConfigError::Mtu6TooSmall(1000))
        );
    }
}

#[cfg(test)]
mod proptests {
    //! The fuzz target's entry points on stable: arbitrary and mutated packets never panic,
    //! and every packet is accounted for exactly once.
    use super::*;
    use crate::{Nat64, Params};
    use proptest::prelude::*;

    const T: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);

    /// Valid packets of each kind to mutate: UDP, TCP SYN, ICMP echo from IPv6; UDP, TCP and an
    /// ICMP error from IPv4.
    fn seeds() -> Vec<(bool, Vec<u8>)> {
        use wire::build::{Ip, Tcp};
        use wire::packet::TcpHeader;
        let x = "2001:db8::2".parse::<Ipv6Addr>().unwrap();
        let y = "64:ff9b::c633:640a".parse::<Ipv6Addr>().unwrap();
        let z = Ipv4Addr::new(198, 51, 100, 10);
        let syn = Tcp::new(40000, 80, 1).window(100).flags(TcpHeader::SYN);
        let syn_ack = Tcp::new(80, 40000, 1)
            .window(100)
            .flags(TcpHeader::SYN)
            .ack(2);
        let inner = Ip::v4(T, z).udp(5000, 53, b"hello");
        vec![
            (true, Ip::v6(x, y).udp(5000, 53, b"hello")),
            (true, Ip::v6(x, y).tcp(&syn, b"")),
            (true, Ip::v6(x, y).echo_request(7, 1, b"ping")),
            (false, Ip::v4(z, T).udp(53, 5000, b"answer")),
            (false, Ip::v4(z, T).tcp(&syn_ack, b"")),
            (false, Ip::v4(z, T).icmp(3, 3, [0; 4], &inner)),
        ]
    }

    fn primed() -> Nat64 {
        let mut n = Nat64::new(
            Params {
                pool4: vec![T],
                ..Params::default()
            },
            3,
        )
        .unwrap();
        for (six, p) in seeds() {
            if six {
                n.translate_6to4(Instant::ZERO, &p);
            }
        }
        n
    }

    fn accounted(n: &Nat64) -> u64 {
        let s = n.stats();
        s.translated_6to4 + s.translated_4to6 + s.total_drops()
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic_and_are_counted(data in proptest::collection::vec(any::<u8>(), 0..200), six in any::<bool>()) {
            let mut n = primed();
            let before = accounted(&n);
            let mut data = data;
            if let Some(b) = data.first_mut() {
                *b = (*b & 0x0f) | if six { 0x60 } else { 0x45 };
            }
            let o = if six { n.translate_6to4(Instant::ZERO, &data) } else { n.translate_4to6(Instant::ZERO, &data) };
            prop_assert_eq!(accounted(&n), before + 1);
            if let Outcome::Drop(r) = o {
                prop_assert!(n.stats().drops_of(r) >= 1);
            }
        }

        #[test]
        fn mutated_valid_packets_never_panic(which in 0usize..6, edits in proptest::collection::vec((any::<u16>(), any::<u8>()), 0..6), cut in any::<u16>()) {
            let mut n = primed();
            let (six, mut p) = seeds().swap_remove(which);
            for (at, val) in edits {
                let i = usize::from(at) % p.len();
                p[i] = val;
            }
            p.truncate(usize::from(cut) % (p.len() + 8));
            let before = accounted(&n);
            let o = if six { n.translate_6to4(Instant::ZERO, &p) } else { n.translate_4to6(Instant::ZERO, &p) };
            prop_assert_eq!(accounted(&n), before + 1);
            // Whatever comes out is a readable IP packet.
            if let Outcome::Forward(b) | Outcome::Reply(b) = o {
                prop_assert!(wire::packet::parse(&b).is_ok());
            }
        }
    }
}
