//! QUIC connections in UDP flows, from the only parts of a packet that are not encrypted: the
//! long header's type, version and connection IDs, the short header's destination connection
//! ID and spin bit (RFC 9000 section 17, RFC 8999 for the version-independent invariants). Per
//! connection: when the client's first Initial and its first 1-RTT packet left or arrived
//! (the handshake time), packets and bytes each way, duration, and the spin-bit RTT where the
//! endpoints spin (RFC 9000 section 17.4).
//!
//! Not seen, and not guessed: everything inside the packets. Payloads and packet numbers are
//! encrypted or header-protected (RFC 9001 section 5), so there are no streams, no
//! acknowledgements, no retransmissions, no losses and no congestion window here; connection
//! IDs issued later (NEW_CONNECTION_ID frames, RFC 9000 section 5.1.1) are encrypted too, and
//! endpoints do move to them mid-connection (quinn's server does, on the same path). A short
//! header with an unknown ID on a flow that carries one QUIC connection is taken as that
//! connection's, its ID as long as the long headers showed for that end; where a flow carries
//! several, it is counted as unmatched.
//!
//! A short header does not carry its connection ID's length: it is learned from the long
//! headers of the same connection (the server's Source Connection ID is what the client puts
//! in its short headers, and the other way round), and a short header is matched by the
//! connection IDs learned so far.
//!
//! RFCs to read before editing: RFC 9000 (sections 5.1, 7.2, 17), RFC 8999, RFC 9001 section
//! 5.4 (what header protection hides), RFC 9369 (QUIC version 2's long-header types), RFC 9312
//! section 3.8 (how an observer measures the spin bit).

use std::fmt;

use wire::Instant;

/// QUIC version 1 (RFC 9000 section 15) and version 2 (RFC 9369 section 3.1).
pub const VERSION_1: u32 = 0x0000_0001;
pub const VERSION_2: u32 = 0x6b33_43cf;

/// The longest connection ID version 1 and 2 allow (RFC 9000 section 17.2).
pub const MAX_CID_LEN: usize = 20;

/// Why bytes are not a QUIC packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum QuicError {
    /// Nothing left in the datagram.
    Empty,
    /// The long header ends before its version and connection IDs.
    TruncatedLongHeader,
    /// A connection ID longer than 20 bytes in a version 1 or 2 packet.
    ConnectionIdTooLong,
    /// A variable-length integer (token length, length) runs past the datagram.
    TruncatedLength,
    /// The Length field says more bytes than the datagram holds.
    LengthPastDatagram,
    /// A version this reader does not know the header layout of, past the invariants.
    UnknownVersion,
    /// A short header whose connection ID matches none learned from long headers.
    UnknownConnectionId,
}

impl fmt::Display for QuicError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            QuicError::Empty => "empty datagram",
            QuicError::TruncatedLongHeader => "long header cut short",
            QuicError::ConnectionIdTooLong => "connection ID over 20 bytes",
            QuicError::TruncatedLength => "length field cut short",
            QuicError::LengthPastDatagram => "length past the datagram",
            QuicError::UnknownVersion => "unknown version",
            QuicError::UnknownConnectionId => {
                "short header with no connection ID learned from a long header"
            }
        })
    }
}

/// A long-header packet's type (RFC 9000 section 17.2, RFC 9369 section 3.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LongType {
    Initial,
    ZeroRtt,
    Handshake,
    Retry,
    /// Version negotiation (version 0, RFC 9000 section 17.2.1).
    VersionNegotiation,
}

/// What is readable of one QUIC packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Header<'a> {
    Long {
        kind: LongType,
        version: u32,
        dcid: &'a [u8],
        scid: &'a [u8],
    },
    /// A 1-RTT packet: the bytes after the first (its connection ID, of a length the reader
    /// must know, then protected ones) and the spin bit.
    Short { spin: bool, rest: &'a [u8] },
}

/// A QUIC variable-length integer (RFC 9000 section 16) at the start of `b`: value and length.
pub fn varint(b: &[u8]) -> Option<(u64, usize)> {
    let first = *b.first()?;
    let len = 1usize << (first >> 6);
    if b.len() < len {
        return None;
    }
    let mut v = u64::from(first & 0x3f);
    for &x in &b[1..len] {
        v = v << 8 | u64::from(x);
    }
    Some((v, len))
}

/// Reads the packets of one UDP datagram: long-header packets coalesced one after another
/// (RFC 9000 section 12.2), a short-header packet last (it has no length, so it takes the rest).
/// Returns what was read before the first error, and the error.
pub fn packets(datagram: &[u8]) -> (Vec<Header<'_>>, Option<QuicError>) {
    let mut out = Vec::new();
    let mut b = datagram;
    loop {
        match one(b) {
            Ok((h, rest)) => {
                out.push(h);
                // Padding after the last packet is zeros, which are no packet.
                if rest.is_empty() || rest.iter().all(|&x| x == 0) {
                    return (out, None);
                }
                b = rest;
            }
            Err(e) => return (out, Some(e)),
        }
    }
}

/// One packet at the start of `b`, and what follows it.
fn one(b: &[u8]) -> Result<(Header<'_>, &[u8]), QuicError> {
    let first = *b.first().ok_or(QuicError::Empty)?;
    // The fixed bit (0x40) is not checked: an endpoint whose peer sent the grease_quic_bit
    // transport parameter clears it at random (RFC 9287 section 3), and that parameter is
    // encrypted. A flow is read as QUIC only once it began with an Initial that has it set.
    if first & 0x80 == 0 {
        // RFC 9000 section 17.3.1: 0x20 is the spin bit, not header-protected (RFC 9001
        // section 5.4.1 masks only the low five bits).
        return Ok((
            Header::Short {
                spin: first & 0x20 != 0,
                rest: &b[1..],
            },
            &[],
        ));
    }
    // Long header: first byte, version (4), DCID length (1), DCID, SCID length (1), SCID.
    if b.len() < 6 {
        return Err(QuicError::TruncatedLongHeader);
    }
    let version = u32::from_be_bytes([b[1], b[2], b[3], b[4]]);
    let dlen = usize::from(b[5]);
    let d_end = 6 + dlen;
    if b.len() < d_end + 1 {
        return Err(QuicError::TruncatedLongHeader);
    }
    let slen = usize::from(b[d_end]);
    let s_end = d_end + 1 + slen;
    if b.len() < s_end {
        return Err(QuicError::TruncatedLongHeader);
    }
    let (dcid, scid) = (&b[6..d_end], &b[d_end + 1..s_end]);
    if version == 0 {
        // Version negotiation: the rest is a list of versions, to the end of the datagram.
        let h = Header::Long {
            kind: LongType::VersionNegotiation,
            version,
            dcid,
            scid,
        };
        return Ok((h, &[]));
    }
    let bits = (first >> 4) & 0x03;
    let kind = match (version, bits) {
        (VERSION_1, 0) | (VERSION_2, 1) => LongType::Initial,
        (VERSION_1, 1) | (VERSION_2, 2) => LongType::ZeroRtt,
        (VERSION_1, 2) | (VERSION_2, 3) => LongType::Handshake,
        (VERSION_1, 3) | (VERSION_2, 0) => LongType::Retry,
        _ => return Err(QuicError::UnknownVersion),
    };
    if dlen > MAX_CID_LEN || slen > MAX_CID_LEN {
        return Err(QuicError::ConnectionIdTooLong);
    }
    let h = Header::Long {
        kind,
        version,
        dcid,
        scid,
    };
    let mut rest = &b[s_end..];
    match kind {
        // A Retry runs to the end of the datagram (RFC 9000 section 17.2.5).
        LongType::Retry | LongType::VersionNegotiation => Ok((h, &[])),
        _ => {
            if kind == LongType::Initial {
                let (token_len, n) = varint(rest).ok_or(QuicError::TruncatedLength)?;
                let skip = usize::try_from(token_len)
                    .ok()
                    .and_then(|t| t.checked_add(n))
                    .filter(|&s| s <= rest.len())
                    .ok_or(QuicError::LengthPastDatagram)?;
                rest = &rest[skip..];
            }
            // Length: the packet number and the payload (RFC 9000 section 17.2).
            let (len, n) = varint(rest).ok_or(QuicError::TruncatedLength)?;
            let end = usize::try_from(len)
                .ok()
                .and_then(|l| l.checked_add(n))
                .filter(|&e| e <= rest.len())
                .ok_or(QuicError::LengthPastDatagram)?;
            Ok((h, &rest[end..]))
        }
    }
}

/// One direction of a QUIC connection.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct QuicDirection {
    /// QUIC packets (several may share a datagram).
    pub packets: u64,
    pub datagrams: u64,
    /// UDP payload bytes.
    pub bytes: u64,
}

/// One QUIC connection as a capture shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct QuicConnection {
    pub version: u32,
    /// The connection IDs in hex: the client's first Destination Connection ID (the one the
    /// Initial keys come from), the client's and the server's own.
    pub original_dcid: String,
    pub client_cid: String,
    pub server_cid: String,
    /// Whether the client is the flow's `a` end.
    pub client_is_a: bool,
    /// The client's first Initial.
    pub first_time: Instant,
    pub last_time: Instant,
    /// The client's first 1-RTT packet: it has the keys, the handshake is done at its end
    /// (RFC 9001 section 4.1.1).
    pub client_first_1rtt: Option<Instant>,
    pub client_to_server: QuicDirection,
    pub server_to_client: QuicDirection,
    /// Connection IDs first seen in short headers, taken as this connection's because it is
    /// the only one on its address pair.
    pub ids_seen_later: u64,
    /// Spin-bit RTT samples, ms: the time between two edges of the spin bit in one direction
    /// (RFC 9000 section 17.4), from the direction with more edges.
    pub spin_rtt_ms: Vec<f64>,
}

impl QuicConnection {
    /// Client's first Initial to its first 1-RTT packet, ms.
    pub fn handshake_ms(&self) -> Option<f64> {
        self.client_first_1rtt
            .map(|t| (t - self.first_time).as_secs_f64() * 1e3)
    }

    /// Whether the spin bit moved: both endpoints spin.
    pub fn spinning(&self) -> bool {
        !self.spin_rtt_ms.is_empty()
    }

    /// The median spin-bit RTT, ms.
    pub fn spin_rtt_median_ms(&self) -> Option<f64> {
        let mut v = self.spin_rtt_ms.clone();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        Some(v[v.len() / 2])
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The spin bit's edges in one direction.
#[derive(Clone, Debug, Default)]
struct SpinWatch {
    last: Option<bool>,
    last_edge: Option<Instant>,
    samples_ms: Vec<f64>,
}

impl SpinWatch {
    fn see(&mut self, t: Instant, spin: bool) {
        if self.last.is_some_and(|l| l != spin) {
            if let Some(e) = self.last_edge {
                self.samples_ms.push((t - e).as_secs_f64() * 1e3);
            }
            self.last_edge = Some(t);
        }
        self.last = Some(spin);
    }
}

#[derive(Clone, Debug)]
struct Tracked {
    conn: QuicConnection,
    /// The client's address is the flow's `a` end: packets from `a` are the client's.
    client_cids: Vec<Vec<u8>>,
    server_cids: Vec<Vec<u8>>,
    new_ids_learned: u64,
    spin: [SpinWatch; 2],
}

/// The QUIC connections of one UDP flow (one address and port pair), fed datagram by datagram.
#[derive(Clone, Debug, Default)]
pub struct QuicFlow {
    conns: Vec<Tracked>,
    /// Packets not read, by reason.
    rejected: Vec<(QuicError, u64)>,
}

impl QuicFlow {
    /// Whether `payload` starts with a client's Initial of version 1 or 2, its fixed bit set
    /// (a client clears it only towards a server it has met before, RFC 9287 section 3.1):
    /// what makes a UDP flow worth reading as QUIC.
    pub fn starts_quic(payload: &[u8]) -> bool {
        payload.first().is_some_and(|b| b & 0x40 != 0)
            && matches!(
                one(payload),
                Ok((
                    Header::Long {
                        kind: LongType::Initial,
                        ..
                    },
                    _
                ))
            )
    }

    /// One datagram, sent by the flow's `a` end when `from_a`.
    pub fn handle(&mut self, t: Instant, from_a: bool, payload: &[u8], udp_bytes: u64) {
        let (hs, err) = packets(payload);
        if let Some(e) = err {
            self.reject(e);
        }
        let mut counted: Option<usize> = None;
        for h in hs {
            let idx = match &h {
                Header::Long {
                    kind,
                    version,
                    dcid,
                    scid,
                } => self.long(t, from_a, *kind, *version, dcid, scid),
                Header::Short { spin, rest } => {
                    let idx = self.short(from_a, rest);
                    if let Some(i) = idx {
                        let c = &mut self.conns[i];
                        let from_client = from_a == c.conn.client_is_a;
                        if from_client && c.conn.client_first_1rtt.is_none() {
                            c.conn.client_first_1rtt = Some(t);
                        }
                        c.spin[usize::from(!from_client)].see(t, *spin);
                    }
                    idx
                }
            };
            let Some(i) = idx else {
                continue;
            };
            let c = &mut self.conns[i];
            c.conn.last_time = c.conn.last_time.max(t);
            let d = if from_a == c.conn.client_is_a {
                &mut c.conn.client_to_server
            } else {
                &mut c.conn.server_to_client
            };
            d.packets += 1;
            if counted != Some(i) {
                d.datagrams += 1;
                d.bytes += udp_bytes;
                counted = Some(i);
            }
        }
    }

    fn reject(&mut self, e: QuicError) {
        match self.rejected.iter_mut().find(|(r, _)| *r == e) {
            Some((_, n)) => *n += 1,
            None => self.rejected.push((e, 1)),
        }
    }

    fn long(
        &mut self,
        t: Instant,
        from_a: bool,
        kind: LongType,
        version: u32,
        dcid: &[u8],
        scid: &[u8],
    ) -> Option<usize> {
        // The receiver's connection ID is the destination: known if this end spoke before.
        let known = self.conns.iter().position(|c| {
            let ids = if from_a == c.conn.client_is_a {
                &c.server_cids
            } else {
                &c.client_cids
            };
            ids.iter().any(|x| x == dcid)
                || (from_a == c.conn.client_is_a && c.client_cids.iter().any(|x| x == scid))
        });
        match known {
            Some(i) => {
                let c = &mut self.conns[i];
                let ids = if from_a == c.conn.client_is_a {
                    &mut c.client_cids
                } else {
                    &mut c.server_cids
                };
                if !ids.iter().any(|x| x == scid) {
                    ids.push(scid.to_vec());
                }
                if from_a != c.conn.client_is_a && c.conn.server_cid.is_empty() {
                    c.conn.server_cid = hex(scid);
                }
                Some(i)
            }
            None if kind == LongType::Initial => {
                self.conns.push(Tracked {
                    conn: QuicConnection {
                        version,
                        original_dcid: hex(dcid),
                        client_cid: hex(scid),
                        server_cid: String::new(),
                        client_is_a: from_a,
                        first_time: t,
                        last_time: t,
                        client_first_1rtt: None,
                        client_to_server: QuicDirection::default(),
                        server_to_client: QuicDirection::default(),
                        spin_rtt_ms: Vec::new(),
                        ids_seen_later: 0,
                    },
                    client_cids: vec![scid.to_vec()],
                    // The server answers the client's first Initial from the original DCID
                    // until it has chosen its own (RFC 9000 section 7.2).
                    server_cids: vec![dcid.to_vec()],
                    new_ids_learned: 0,
                    spin: Default::default(),
                });
                Some(self.conns.len() - 1)
            }
            None => {
                self.reject(QuicError::UnknownConnectionId);
                None
            }
        }
    }

    /// The connection whose receiver's connection ID starts `rest`: the longest match, so that
    /// a zero-length ID (which every header "starts with") matches last.
    fn short(&mut self, from_a: bool, rest: &[u8]) -> Option<usize> {
        let mut best: Option<(usize, usize)> = None;
        for (i, c) in self.conns.iter().enumerate() {
            let ids = if from_a == c.conn.client_is_a {
                &c.server_cids
            } else {
                &c.client_cids
            };
            for id in ids {
                if rest.starts_with(id) && best.is_none_or(|(_, l)| id.len() > l) {
                    best = Some((i, id.len()));
                }
            }
        }
        if best.is_none() && self.conns.len() == 1 {
            // A new ID of the only connection on this address pair, as long as its first.
            let c = &mut self.conns[0];
            let ids = if from_a == c.conn.client_is_a {
                &mut c.server_cids
            } else {
                &mut c.client_cids
            };
            let len = ids.last().map_or(0, Vec::len);
            if len > 0 && rest.len() >= len {
                ids.push(rest[..len].to_vec());
                c.new_ids_learned += 1;
                best = Some((0, len));
            }
        }
        if best.is_none() {
            self.reject(QuicError::UnknownConnectionId);
        }
        best.map(|(i, _)| i)
    }

    /// The connections, and the packets not read with the reason.
    pub fn finish(self) -> (Vec<QuicConnection>, Vec<(String, u64)>) {
        let conns = self
            .conns
            .into_iter()
            .map(|mut c| {
                c.conn.ids_seen_later = c.new_ids_learned;
                let [a, b] = c.spin;
                c.conn.spin_rtt_ms = if a.samples_ms.len() >= b.samples_ms.len() {
                    a.samples_ms
                } else {
                    b.samples_ms
                };
                c.conn
            })
            .collect();
        let mut rejected: Vec<(String, u64)> = self
            .rejected
            .into_iter()
            .map(|(e, n)| (e.to_string(), n))
            .collect();
        rejected.sort();
        (conns, rejected)
    }
}

/// Reads `data` as datagrams (a direction byte, a length byte, that many bytes; the last one
/// cut short where `data` ends) into one flow and finishes it: the fuzz target's and the
/// property test's entry point. Returns the connections found.
pub fn feed_datagrams(data: &[u8]) -> usize {
    let mut f = QuicFlow::default();
    let mut b = data;
    let mut ms = 0;
    let mut started = false;
    while b.len() >= 2 {
        let (from_a, len) = (b[0] & 1 == 1, usize::from(b[1]));
        let d = &b[2..(2 + len).min(b.len())];
        let _ = packets(d);
        started |= QuicFlow::starts_quic(d);
        if started {
            f.handle(Instant::from_millis(ms), from_a, d, d.len() as u64);
        }
        ms += 1;
        b = &b[(2 + len).min(b.len())..];
    }
    let (conns, _) = f.finish();
    for c in &conns {
        let _ = (c.handshake_ms(), c.spin_rtt_median_ms());
    }
    conns.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::Duration;

    fn t(ms: u64) -> Instant {
        Instant::from_nanos(ms * 1_000_000)
    }

    /// A version 1 long header of `kind_bits`, with an Initial's empty token, and `payload`
    /// bytes of (opaque) packet number and payload.
    fn long(kind_bits: u8, dcid: &[u8], scid: &[u8], payload: usize) -> Vec<u8> {
        let mut p = vec![0xc0 | kind_bits << 4, 0, 0, 0, 1, dcid.len() as u8];
        p.extend_from_slice(dcid);
        p.push(scid.len() as u8);
        p.extend_from_slice(scid);
        if kind_bits == 0 {
            p.push(0); // token length
        }
        // A two-byte varint length (RFC 9000 section 16: 0b01 prefix).
        p.push(0x40 | (payload >> 8) as u8);
        p.push(payload as u8);
        p.extend(std::iter::repeat_n(0xaa, payload));
        p
    }

    fn short(spin: bool, dcid: &[u8], payload: usize) -> Vec<u8> {
        let mut p = vec![0x40 | if spin { 0x20 } else { 0 } | 0x01];
        p.extend_from_slice(dcid);
        p.extend(std::iter::repeat_n(0xbb, payload));
        p
    }

    proptest::proptest! {
        #[test]
        fn any_datagrams_read_without_a_panic(data in proptest::collection::vec(proptest::num::u8::ANY, 0..600)) {
            let _ = feed_datagrams(&data);
        }
    }

    #[test]
    fn varints_read_all_four_lengths() {
        // RFC 9000 appendix A.1's examples.
        assert_eq!(varint(&[0x25]), Some((37, 1)));
        assert_eq!(varint(&[0x7b, 0xbd]), Some((15293, 2)));
        assert_eq!(varint(&[0x9d, 0x7f, 0x3e, 0x7d]), Some((494878333, 4)));
        assert_eq!(
            varint(&[0xc2, 0x19, 0x7c, 0x5e, 0xff, 0x14, 0xe8, 0x8c]),
            Some((151288809941952652, 8))
        );
        assert_eq!(varint(&[0x7b]), None);
        assert_eq!(varint(&[]), None);
    }

    #[test]
    fn coalesced_initial_and_handshake_and_a_short_header_read_in_turn() {
        let mut d = long(0, &[1; 8], &[2; 8], 40);
        d.extend(long(2, &[1; 8], &[2; 8], 30));
        d.extend(short(true, &[1; 8], 20));
        let (hs, err) = packets(&d);
        assert_eq!(err, None);
        assert_eq!(hs.len(), 3);
        assert!(matches!(
            hs[0],
            Header::Long {
                kind: LongType::Initial,
                version: VERSION_1,
                ..
            }
        ));
        assert!(matches!(
            hs[1],
            Header::Long {
                kind: LongType::Handshake,
                ..
            }
        ));
        assert!(matches!(hs[2], Header::Short { spin: true, .. }));
    }

    #[test]
    fn bad_packets_are_rejected_with_their_reason() {
        assert_eq!(packets(&[]).1, Some(QuicError::Empty));
        // A greased short header (fixed bit clear, RFC 9287) is still a short header.
        assert!(matches!(packets(&[0x01, 2, 3]).0[0], Header::Short { .. }));
        assert!(!QuicFlow::starts_quic(&[0x80, 0, 0, 0, 1, 0, 0, 0, 0]));
        assert_eq!(
            packets(&[0xc0, 0, 0]).1,
            Some(QuicError::TruncatedLongHeader)
        );
        let mut p = long(0, &[1; 8], &[2; 8], 40);
        p.truncate(p.len() - 1);
        assert_eq!(packets(&p).1, Some(QuicError::LengthPastDatagram));
        let mut p = vec![0xc0, 0, 0, 0, 1, 21];
        p.extend([0; 22]);
        assert_eq!(packets(&p).1, Some(QuicError::ConnectionIdTooLong));
        let p = [0xc0, 0xff, 0, 0, 0x1d, 0, 0];
        assert_eq!(packets(&p).1, Some(QuicError::UnknownVersion));
        // Version negotiation is read whatever follows.
        let p = [0x80, 0, 0, 0, 0, 1, 9, 1, 7, 0, 0, 0, 1];
        assert!(matches!(
            packets(&p).0[0],
            Header::Long {
                kind: LongType::VersionNegotiation,
                ..
            }
        ));
    }

    #[test]
    fn a_handshake_is_timed_from_the_client_initial_to_its_first_short_header() {
        let mut f = QuicFlow::default();
        let (odcid, ccid, scid) = ([9u8; 8], [1u8; 8], [2u8; 8]);
        // a = client: Initial; the server's Initial + Handshake; the client's Handshake with
        // its first 1-RTT packet coalesced; then data each way.
        let ci = long(0, &odcid, &ccid, 1200);
        assert!(QuicFlow::starts_quic(&ci));
        f.handle(t(0), true, &ci, ci.len() as u64);
        let mut s = long(0, &ccid, &scid, 100);
        s.extend(long(2, &ccid, &scid, 900));
        f.handle(t(41), false, &s, s.len() as u64);
        let mut c = long(2, &scid, &ccid, 50);
        c.extend(short(false, &scid, 30));
        f.handle(t(42), true, &c, c.len() as u64);
        let d = short(true, &ccid, 1200);
        f.handle(t(82), false, &d, d.len() as u64);
        // A connection ID nobody announced in a long header: the only connection's new one.
        f.handle(t(83), false, &short(false, &[7; 8], 20), 29);
        let (conns, rejected) = f.finish();
        assert_eq!(conns.len(), 1);
        let q = &conns[0];
        assert_eq!(q.handshake_ms(), Some(42.0));
        assert_eq!(q.original_dcid, "0909090909090909");
        assert_eq!(q.server_cid, "0202020202020202");
        assert_eq!(q.client_to_server.packets, 3);
        assert_eq!(q.client_to_server.datagrams, 2);
        assert_eq!(q.server_to_client.packets, 4);
        assert_eq!(
            q.server_to_client.bytes,
            (s.len() + d.len() + 29) as u64,
            "bytes are UDP payload bytes of the datagrams"
        );
        assert_eq!(q.ids_seen_later, 1);
        assert_eq!(q.last_time - q.first_time, Duration::from_millis(83));
        assert!(rejected.is_empty(), "{rejected:?}");
    }

    #[test]
    fn the_spin_bit_gives_one_rtt_per_edge_and_nothing_when_it_stays() {
        let mut f = QuicFlow::default();
        let (odcid, ccid, scid) = ([9u8; 8], [1u8; 4], [2u8; 16]);
        let ci = long(0, &odcid, &ccid, 1200);
        f.handle(t(0), true, &ci, 1);
        f.handle(t(40), false, &long(0, &ccid, &scid, 100), 1);
        // The client's spin flips every 40 ms (one RTT), as RFC 9000 section 17.4 has it.
        for (i, ms) in [50u64, 90, 130, 170].iter().enumerate() {
            f.handle(t(*ms), true, &short(i % 2 == 1, &scid, 10), 1);
        }
        let (conns, _) = f.finish();
        assert_eq!(conns[0].spin_rtt_ms, vec![40.0, 40.0]);
        assert_eq!(conns[0].spin_rtt_median_ms(), Some(40.0));
        let mut g = QuicFlow::default();
        g.handle(t(0), true, &ci, 1);
        g.handle(t(40), false, &long(0, &ccid, &scid, 100), 1);
        for ms in [50u64, 90, 130] {
            g.handle(t(ms), true, &short(false, &scid, 10), 1);
        }
        assert!(!g.finish().0[0].spinning());
    }

    #[test]
    fn two_connections_on_one_flow_are_told_apart_by_their_ids() {
        let mut f = QuicFlow::default();
        for (n, at) in [(1u8, 0u64), (2, 5)] {
            let ci = long(0, &[n + 10; 8], &[n; 8], 1200);
            f.handle(t(at), true, &ci, 1);
            f.handle(t(at + 40), false, &long(0, &[n; 8], &[n + 20; 8], 100), 1);
            f.handle(t(at + 41), true, &short(false, &[n + 20; 8], 10), 1);
        }
        // With two connections on the flow, an unknown ID is nobody's.
        f.handle(t(60), false, &short(false, &[7; 8], 10), 1);
        let (conns, rejected) = f.finish();
        assert_eq!(conns.len(), 2);
        assert!(conns.iter().all(|c| c.handshake_ms() == Some(41.0)));
        assert_eq!(
            rejected,
            vec![(QuicError::UnknownConnectionId.to_string(), 1)]
        );
    }
}
