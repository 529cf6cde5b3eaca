//! TUN offloads in software: the `virtio_net_hdr` that a TUN device opened with
//! `IFF_VNET_HDR` puts before every packet, the segmentation of a TCP or UDP super-packet
//! (TSO/USO) into the datagrams the host's kernel would have sent without offloads, and the
//! completion of a checksum the kernel left partial. The inverse, [`Coalescer`], joins
//! consecutive in-order TCP segments of one flow into one super-packet for a host to receive.
//!
//! Not here: the devices and the `TUNSETOFFLOAD` ioctl (the `lab` shell), the decision of what
//! to coalesce and when (the caller's).
//!
//! References: the virtio specification v1.2 §5.1.6 (`struct virtio_net_hdr`, little-endian);
//! Linux `include/uapi/linux/virtio_net.h` (flag and GSO type values) and `net/ipv4/tcp_offload.c`
//! (`tcp_gso_segment`: FIN and PSH only on the last segment, CWR only on the first, the IPv4
//! identification incremented per segment); RFC 9293 §3.1 and RFC 768 (checksums over a
//! pseudo-header), RFC 1071 (the sum).

use std::fmt;

use crate::checksum;

/// Bytes of `struct virtio_net_hdr` (without `num_buffers`): the size set with
/// `TUNSETVNETHDRSZ`.
pub const VNET_HDR_LEN: usize = 10;

/// A `virtio_net_hdr` that asks for nothing: a complete packet, no segmentation.
pub const VNET_HDR_NONE: [u8; VNET_HDR_LEN] = [0; VNET_HDR_LEN];

/// `VIRTIO_NET_HDR_F_NEEDS_CSUM`: the checksum at `csum_start + csum_offset` holds only the
/// pseudo-header's sum; the rest from `csum_start` on is to be added.
pub const F_NEEDS_CSUM: u8 = 1;
/// `VIRTIO_NET_HDR_F_DATA_VALID`: the checksums were checked already.
pub const F_DATA_VALID: u8 = 2;

/// `VIRTIO_NET_HDR_GSO_*`, the low seven bits of `gso_type`.
pub const GSO_NONE: u8 = 0;
pub const GSO_TCPV4: u8 = 1;
pub const GSO_UDP: u8 = 3;
pub const GSO_TCPV6: u8 = 4;
pub const GSO_UDP_L4: u8 = 5;
/// `VIRTIO_NET_HDR_GSO_ECN`: the TCP super-packet has CWR set (RFC 3168 §6.1.2).
pub const GSO_ECN: u8 = 0x80;

const TCP_FIN: u8 = 0x01;
const TCP_PSH: u8 = 0x08;
const TCP_CWR: u8 = 0x80;
const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = 17;

/// `struct virtio_net_hdr` (virtio v1.2 §5.1.6), every field as the device wrote it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VnetHdr {
    pub flags: u8,
    pub gso_type: u8,
    /// Bytes of headers (IP and transport) before the payload; advisory.
    pub hdr_len: u16,
    /// Payload bytes per segment (the MSS for TCP).
    pub gso_size: u16,
    /// Offset of the transport header, where the checksum starts.
    pub csum_start: u16,
    /// Offset of the checksum field within the transport header.
    pub csum_offset: u16,
}

/// Why a packet could not be segmented or its checksum finished.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GsoError {
    /// Fewer bytes than the virtio header.
    ShortHeader(usize),
    /// A GSO type this module does not segment (`VIRTIO_NET_HDR_GSO_UDP`, unknown values).
    UnsupportedType(u8),
    /// `csum_start`/`csum_offset` point outside the packet.
    ChecksumOutside { start: u16, offset: u16, len: usize },
    /// A GSO packet without `F_NEEDS_CSUM` or with a `gso_size` of zero.
    BadGso,
    /// The IP or transport header does not fit the GSO type.
    BadHeaders(&'static str),
}

impl fmt::Display for GsoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GsoError::ShortHeader(n) => {
                write!(
                    f,
                    "{n} bytes is shorter than a virtio_net_hdr ({VNET_HDR_LEN})"
                )
            }
            GsoError::UnsupportedType(t) => write!(f, "unsupported gso_type {t:#04x}"),
            GsoError::ChecksumOutside { start, offset, len } => write!(
                f,
                "checksum at {start}+{offset} lies outside a packet of {len} bytes"
            ),
            GsoError::BadGso => write!(f, "gso packet without needs_csum or with gso_size 0"),
            GsoError::BadHeaders(what) => write!(f, "bad headers for segmentation: {what}"),
        }
    }
}

impl std::error::Error for GsoError {}

impl VnetHdr {
    /// Reads the first [`VNET_HDR_LEN`] bytes of `b` (little-endian, as virtio 1.x devices
    /// and the TUN driver on a little-endian host write them).
    pub fn parse(b: &[u8]) -> Result<VnetHdr, GsoError> {
        if b.len() < VNET_HDR_LEN {
            return Err(GsoError::ShortHeader(b.len()));
        }
        let u = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        Ok(VnetHdr {
            flags: b[0],
            gso_type: b[1],
            hdr_len: u(2),
            gso_size: u(4),
            csum_start: u(6),
            csum_offset: u(8),
        })
    }

    /// The header's bytes.
    pub fn emit(&self) -> [u8; VNET_HDR_LEN] {
        let mut b = [0; VNET_HDR_LEN];
        b[0] = self.flags;
        b[1] = self.gso_type;
        b[2..4].copy_from_slice(&self.hdr_len.to_le_bytes());
        b[4..6].copy_from_slice(&self.gso_size.to_le_bytes());
        b[6..8].copy_from_slice(&self.csum_start.to_le_bytes());
        b[8..10].copy_from_slice(&self.csum_offset.to_le_bytes());
        b
    }
}

/// Completes the partial checksum of `packet` as `hdr` describes it: the one's-complement sum
/// from `csum_start` to the end (the field holding the pseudo-header's sum) is folded,
/// complemented and stored, a zero written as 0xffff (Linux `skb_checksum_help`).
pub fn finish_checksum(hdr: &VnetHdr, packet: &mut [u8]) -> Result<(), GsoError> {
    let start = usize::from(hdr.csum_start);
    let field = start + usize::from(hdr.csum_offset);
    if field + 2 > packet.len() {
        return Err(GsoError::ChecksumOutside {
            start: hdr.csum_start,
            offset: hdr.csum_offset,
            len: packet.len(),
        });
    }
    let c = checksum::checksum(&packet[start..], 0);
    let c = if c == 0 { 0xffff } else { c };
    packet[field..field + 2].copy_from_slice(&c.to_be_bytes());
    Ok(())
}

/// The IP layer of a super-packet: where the transport header starts and which family.
struct IpLayout {
    v4: bool,
    l4: usize,
}

fn ip_layout(hdr: &VnetHdr, p: &[u8], proto: u8) -> Result<IpLayout, GsoError> {
    let l4 = usize::from(hdr.csum_start);
    match p.first().map(|b| b >> 4) {
        Some(4) => {
            if p.len() < 20 {
                return Err(GsoError::BadHeaders("ipv4 header cut short"));
            }
            let ihl = usize::from(p[0] & 0x0f) * 4;
            if ihl < 20 || ihl != l4 {
                return Err(GsoError::BadHeaders(
                    "csum_start is not the ipv4 header's end",
                ));
            }
            if p[9] != proto {
                return Err(GsoError::BadHeaders(
                    "ipv4 protocol does not match gso_type",
                ));
            }
            // Fragments are not segmented (Linux refuses them too).
            if u16::from_be_bytes([p[6], p[7]]) & 0x3fff != 0 {
                return Err(GsoError::BadHeaders("ipv4 fragment"));
            }
            Ok(IpLayout { v4: true, l4 })
        }
        Some(6) => {
            // Extension headers may lie between the fixed header and csum_start.
            if l4 < 40 || p.len() < 40 {
                return Err(GsoError::BadHeaders("ipv6 header cut short"));
            }
            if l4 == 40 && p[6] != proto {
                return Err(GsoError::BadHeaders(
                    "ipv6 next header does not match gso_type",
                ));
            }
            Ok(IpLayout { v4: false, l4 })
        }
        _ => Err(GsoError::BadHeaders("not ip")),
    }
}

/// The one's-complement sum of the pseudo-header for a transport segment of `l4_len` bytes
/// (RFC 9293 §3.1 for IPv4, RFC 8200 §8.1 for IPv6).
fn pseudo_sum(p: &[u8], v4: bool, proto: u8, l4_len: usize) -> u32 {
    let addrs = if v4 { &p[12..20] } else { &p[8..40] };
    // The length as 32 bits sums the same as IPv4's 16 (its upper half is zero).
    let acc = checksum::sum(addrs, 0);
    let acc = checksum::sum(&(l4_len as u32).to_be_bytes(), acc);
    checksum::sum(&[0, 0, 0, proto], acc)
}

/// Whether the transport checksum of `datagram`, its transport header at `l4` and of protocol
/// `proto` (6 or 17), verifies: the sum over pseudo-header and segment, checksum included, is
/// all ones (RFC 1071 §2).
pub fn transport_checksum_ok(datagram: &[u8], l4: usize, proto: u8) -> bool {
    let v4 = datagram.first().is_some_and(|b| b >> 4 == 4);
    if l4 > datagram.len() || l4 < if v4 { 20 } else { 40 } {
        return false;
    }
    let pseudo = pseudo_sum(datagram, v4, proto, datagram.len() - l4);
    checksum::checksum(&datagram[l4..], pseudo) == 0
}

/// Sets the IP length field (and the IPv4 identification and header checksum) of `seg`, a
/// datagram of `seg.len()` bytes, the `index`-th segment cut from one whose IPv4 id was `id0`.
fn fix_ip(seg: &mut [u8], v4: bool, id0: u16, index: usize) {
    let len = seg.len();
    if v4 {
        seg[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        seg[4..6].copy_from_slice(&id0.wrapping_add(index as u16).to_be_bytes());
        seg[10..12].copy_from_slice(&[0, 0]);
        let ihl = usize::from(seg[0] & 0x0f) * 4;
        let c = checksum::checksum(&seg[..ihl], 0);
        seg[10..12].copy_from_slice(&c.to_be_bytes());
    } else {
        seg[4..6].copy_from_slice(&((len - 40) as u16).to_be_bytes());
    }
}

/// Writes the transport checksum of `seg` (field at `l4 + field_off`) from scratch.
fn fix_l4_checksum(seg: &mut [u8], v4: bool, l4: usize, proto: u8, field_off: usize) {
    let f = l4 + field_off;
    seg[f..f + 2].copy_from_slice(&[0, 0]);
    let pseudo = pseudo_sum(seg, v4, proto, seg.len() - l4);
    let mut c = checksum::checksum(&seg[l4..], pseudo);
    if proto == PROTO_UDP && c == 0 {
        // RFC 768: a computed zero is sent as all ones (zero means "no checksum").
        c = 0xffff;
    }
    seg[f..f + 2].copy_from_slice(&c.to_be_bytes());
}

/// Where a GSO super-packet's parts lie, checked against its virtio header.
struct Layout {
    proto: u8,
    v4: bool,
    /// Offset of the transport header, and of its checksum field within it.
    l4: usize,
    field_off: usize,
    /// Bytes of IP and transport headers every segment carries.
    headers: usize,
    /// Payload bytes per segment (the last may carry fewer), and the number of segments.
    mss: usize,
    count: usize,
}

/// Checks a super-packet (`hdr.gso_type` not `GSO_NONE`) for segmentation: the GSO type
/// known, a partial checksum where the transport header's checksum lies, IP and transport
/// headers whole, segments that fit the IP length field.
fn layout(hdr: &VnetHdr, packet: &[u8]) -> Result<Layout, GsoError> {
    let kind = hdr.gso_type & !GSO_ECN;
    let proto = match kind {
        GSO_TCPV4 | GSO_TCPV6 => PROTO_TCP,
        GSO_UDP_L4 => PROTO_UDP,
        t => return Err(GsoError::UnsupportedType(t)),
    };
    if hdr.flags & F_NEEDS_CSUM == 0 || hdr.gso_size == 0 {
        return Err(GsoError::BadGso);
    }
    let ip = ip_layout(hdr, packet, proto)?;
    if (kind == GSO_TCPV4) != ip.v4 && kind != GSO_UDP_L4 {
        return Err(GsoError::BadHeaders("ip version does not match gso_type"));
    }
    let (l4_hdr, field_off) = if proto == PROTO_TCP {
        let Some(&off) = packet.get(ip.l4 + 12) else {
            return Err(GsoError::BadHeaders("tcp header cut short"));
        };
        ((usize::from(off >> 4)) * 4, 16)
    } else {
        (8, 6)
    };
    let headers = ip.l4 + l4_hdr;
    if (proto == PROTO_TCP && l4_hdr < 20) || headers > packet.len() {
        return Err(GsoError::BadHeaders("transport header cut short"));
    }
    if usize::from(hdr.csum_offset) != field_off {
        return Err(GsoError::BadHeaders(
            "csum_offset is not the transport checksum",
        ));
    }
    let mss = usize::from(hdr.gso_size);
    let payload = packet.len() - headers;
    let count = payload.div_ceil(mss).max(1);
    let largest = headers + mss.min(payload);
    if largest > usize::from(u16::MAX) + if ip.v4 { 0 } else { 40 } {
        return Err(GsoError::BadHeaders(
            "segments would exceed the ip length field",
        ));
    }
    Ok(Layout {
        proto,
        v4: ip.v4,
        l4: ip.l4,
        field_off,
        headers,
        mss,
        count,
    })
}

/// Splits `packet`, read from a TUN device with virtio header `hdr`, into the datagrams the
/// kernel would have sent without offloads, and hands each to `each` (built in `scratch`, so
/// that no segment allocates). A packet that needs no segmentation is handed over as it is,
/// its checksum finished when partial. Returns the number of datagrams.
///
/// TCP (RFC 9293): each segment carries `gso_size` payload bytes (the last the rest), its
/// sequence number advanced by the payload before it, FIN and PSH only on the last and CWR only
/// on the first (as `tcp_gso_segment`), options copied. UDP (`GSO_UDP_L4`): each datagram its
/// own UDP header and length. IPv4 identification: the first segment's, plus one per segment.
/// Every checksum is computed whole.
pub fn segment(
    hdr: &VnetHdr,
    packet: &mut [u8],
    scratch: &mut Vec<u8>,
    mut each: impl FnMut(&[u8]),
) -> Result<usize, GsoError> {
    if hdr.gso_type & !GSO_ECN == GSO_NONE {
        if hdr.flags & F_NEEDS_CSUM != 0 {
            finish_checksum(hdr, packet)?;
        }
        each(packet);
        return Ok(1);
    }
    let Layout {
        proto,
        v4,
        l4,
        field_off,
        headers,
        mss,
        count,
    } = layout(hdr, packet)?;
    let id0 = u16::from_be_bytes([packet[4], packet[5]]);
    // For TCP (whose header is at least 20 bytes, checked above): sequence number and flags.
    let (seq0, flags0) = if proto == PROTO_TCP {
        let t = &packet[l4..];
        (u32::from_be_bytes([t[4], t[5], t[6], t[7]]), t[13])
    } else {
        (0, 0)
    };
    for i in 0..count {
        let from = headers + i * mss;
        let to = (from + mss).min(packet.len());
        scratch.clear();
        scratch.extend_from_slice(&packet[..headers]);
        scratch.extend_from_slice(&packet[from..to]);
        let seg = &mut scratch[..];
        if v4 {
            fix_ip(seg, true, id0, i);
        } else {
            fix_ip(seg, false, 0, 0);
        }
        if proto == PROTO_TCP {
            let seq = seq0.wrapping_add((i * mss) as u32);
            seg[l4 + 4..l4 + 8].copy_from_slice(&seq.to_be_bytes());
            let mut flags = flags0;
            if i + 1 < count {
                flags &= !(TCP_FIN | TCP_PSH);
            }
            if i > 0 {
                flags &= !TCP_CWR;
            }
            seg[l4 + 13] = flags;
        } else {
            let udp_len = (seg.len() - l4) as u16;
            seg[l4 + 4..l4 + 6].copy_from_slice(&udp_len.to_be_bytes());
        }
        fix_l4_checksum(seg, v4, l4, proto, field_off);
        each(seg);
    }
    Ok(count)
}

/// A TCP super-packet that may cross the lab whole rather than cut into its segments: what
/// [`segment`] would cut into `segments` datagrams of `header_bytes` of headers each, the
/// virtio header it was read with kept to write it into the receiving host as it came (the
/// TCP checksum left partial, `F_NEEDS_CSUM`). A link that would treat its segments apart
/// cuts it with [`segment`] at its entry; one that treats every segment alike counts it as
/// its segments ([`Whole::wire_bytes`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Whole {
    pub hdr: VnetHdr,
    /// The datagrams it stands for (at least 2).
    pub segments: u32,
    /// Bytes of IP and TCP headers that each of them carries.
    pub header_bytes: u16,
}

impl Whole {
    /// `packet`, read with `hdr`, as a super-packet that may travel whole: TCP segmentation
    /// (`GSO_TCPV4`/`GSO_TCPV6`) into at least two segments, the headers as [`segment`] checks
    /// them, and what [`Coalescer`] would join again from its segments: no CWR (`GSO_ECN`, on
    /// the first segment only), no SYN, RST or URG (FIN and PSH, on the last segment only, the
    /// coalescer gives back to the super-packet). `None` for anything else, which is to be
    /// cut (or passed as it is).
    pub fn of(hdr: &VnetHdr, packet: &[u8]) -> Option<Whole> {
        if hdr.gso_type & GSO_ECN != 0 || hdr.gso_type == GSO_NONE {
            return None;
        }
        let l = layout(hdr, packet).ok()?;
        if l.proto != PROTO_TCP || l.count < 2 {
            return None;
        }
        if packet[l.l4 + 13] & TCP_NEVER != 0 {
            return None;
        }
        Some(Whole {
            hdr: *hdr,
            segments: u32::try_from(l.count).ok()?,
            header_bytes: u16::try_from(l.headers).ok()?,
        })
    }

    /// The bytes of the datagrams it stands for, `len` being the super-packet's: its payload
    /// once, its headers once per segment.
    pub fn wire_bytes(&self, len: usize) -> u64 {
        len as u64 + u64::from(self.segments - 1) * u64::from(self.header_bytes)
    }
}

/// What a host's kernel hands over, with TSO, for the TCP datagram `datagram` (IPv4 without
/// options or IPv6 with TCP after the fixed header, its checksum whatever it is): the virtio
/// header that asks for segments of `mss` payload bytes, and the datagram with its checksum
/// left partial (the pseudo-header's sum). For tests and simulations of the offload path.
pub fn tso(mut datagram: Vec<u8>, mss: u16) -> (VnetHdr, Vec<u8>) {
    let v4 = datagram.first().is_some_and(|b| b >> 4 == 4);
    let l4 = if v4 { 20 } else { 40 };
    let pseudo = !checksum::finish(pseudo_sum(&datagram, v4, PROTO_TCP, datagram.len() - l4));
    datagram[l4 + 16..l4 + 18].copy_from_slice(&pseudo.to_be_bytes());
    let hdr = VnetHdr {
        flags: F_NEEDS_CSUM,
        gso_type: if v4 { GSO_TCPV4 } else { GSO_TCPV6 },
        hdr_len: (l4 + usize::from(datagram[l4 + 12] >> 4) * 4) as u16,
        gso_size: mss,
        csum_start: l4 as u16,
        csum_offset: 16,
    };
    (hdr, datagram)
}

/// The most bytes a coalesced super-packet holds: IPv4's total length field.
pub const COALESCE_MAX_BYTES: usize = u16::MAX as usize;

/// TCP flags a coalesced run may not carry at all: SYN, RST, URG, and CWR (whose run the
/// receiver would have to cut at the first segment; `tcp_gro_receive` ends a run on it too).
const TCP_NEVER: u8 = 0x02 | 0x04 | 0x20 | TCP_CWR;

/// Joins consecutive in-order TCP segments of one flow into one super-packet with a
/// `virtio_net_hdr` (`GSO_TCPV4`/`GSO_TCPV6`, `gso_size` the first segment's payload,
/// `F_NEEDS_CSUM`), for a host to receive with one write: what Linux's GRO does
/// (`tcp_gro_receive`), and no more. A segment joins only when the result is exactly the
/// segments' sum: the same addresses, ports, IP header (TOS and so the ECN field, TTL, DF,
/// flow label; IPv4 without options and its identification one more than the last), the
/// same acknowledgment, window, data offset and option bytes; its sequence number the next
/// expected; its payload no larger than the first's; no SYN, RST, URG or CWR; its transport
/// checksum correct (a segment corrupted on a link must reach the host as it is, and a
/// super-packet's checksum is left to be trusted). A run ends after a segment shorter than the
/// first or with PSH or FIN, which the super-packet then carries.
#[derive(Debug, Default)]
pub struct Coalescer {
    /// The first segment's headers and every segment's payload.
    buf: Vec<u8>,
    /// Segments joined so far (0: nothing is being built).
    count: usize,
    v4: bool,
    /// Bytes of IP header, and of IP and TCP headers.
    l4: usize,
    headers: usize,
    /// The first segment's payload bytes: every other's at most, the run's `gso_size`.
    mss: usize,
    next_seq: u32,
    next_id: u16,
    /// No segment may join any more (the last was short, or had PSH or FIN).
    closed: bool,
    /// Segments' transport checksums are taken as correct without summing them
    /// ([`Coalescer::trust_checksums`]).
    trusted: bool,
}

impl Coalescer {
    /// Whether a super-packet is being built.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Segments in the super-packet being built.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether each segment's transport checksum is summed before it may join (`false`, the
    /// default) or taken as correct (`true`). Trusting is for a caller that knows every segment
    /// offered carries the checksum the segmenter computed and that no byte of it changed
    /// since (no corrupting link, no host handing over a checksum of its own that may be
    /// wrong): the sum would then only repeat the segmenter's, a whole pass over the payload.
    pub fn trust_checksums(&mut self, trusted: bool) {
        self.trusted = trusted;
    }

    /// Offers `seg`, a complete datagram: true when it joined the super-packet being built or,
    /// when none is, started one; false when it cannot, and the caller is to [`take`] what is
    /// built before it (and offer it again, or write it alone).
    ///
    /// [`take`]: Coalescer::take
    pub fn push(&mut self, seg: &[u8]) -> bool {
        if self.count == 0 {
            return self.start(seg);
        }
        if self.closed || !self.joins(seg) {
            return false;
        }
        let payload = &seg[self.headers..];
        self.buf.extend_from_slice(payload);
        self.count += 1;
        self.next_seq = self.next_seq.wrapping_add(payload.len() as u32);
        self.next_id = self.next_id.wrapping_add(1);
        let flags = seg[self.l4 + 13];
        if payload.len() < self.mss || flags & (TCP_FIN | TCP_PSH) != 0 {
            self.closed = true;
            // The run's last segment gives the super-packet its FIN and PSH.
            self.buf[self.l4 + 13] |= flags & (TCP_FIN | TCP_PSH);
        }
        true
    }

    /// Hands what is built to `out` and starts afresh: a single segment as it came, with
    /// [`VNET_HDR_NONE`]; several as one super-packet with its lengths set, the IPv4 header
    /// checksum recomputed and the TCP checksum field holding the pseudo-header's sum, as a
    /// device with `F_NEEDS_CSUM` expects. Nothing happens when nothing is built.
    pub fn take(&mut self, out: impl FnOnce(&VnetHdr, &[u8])) {
        match self.count {
            0 => return,
            1 => out(&VnetHdr::default(), &self.buf),
            n => {
                let buf = &mut self.buf[..];
                fix_ip(buf, self.v4, u16::from_be_bytes([buf[4], buf[5]]), 0);
                let pseudo =
                    !checksum::finish(pseudo_sum(buf, self.v4, PROTO_TCP, buf.len() - self.l4));
                buf[self.l4 + 16..self.l4 + 18].copy_from_slice(&pseudo.to_be_bytes());
                let hdr = VnetHdr {
                    flags: F_NEEDS_CSUM,
                    gso_type: if self.v4 { GSO_TCPV4 } else { GSO_TCPV6 },
                    hdr_len: self.headers as u16,
                    gso_size: self.mss as u16,
                    csum_start: self.l4 as u16,
                    csum_offset: 16,
                };
                debug_assert!(n * self.mss >= buf.len() - self.headers);
                out(&hdr, buf);
            }
        }
        self.buf.clear();
        self.count = 0;
        self.closed = false;
    }

    /// Starts a run with `seg` if it may begin one.
    fn start(&mut self, seg: &[u8]) -> bool {
        let (v4, l4) = match seg.first().copied() {
            // IPv4 without options, TCP, not a fragment.
            Some(0x45) if seg.len() >= 40 && seg[9] == PROTO_TCP => {
                if u16::from_be_bytes([seg[6], seg[7]]) & 0x3fff != 0 {
                    return false;
                }
                (true, 20)
            }
            // IPv6 with TCP right after the fixed header.
            Some(b) if b >> 4 == 6 && seg.len() >= 60 && seg[6] == PROTO_TCP => (false, 40),
            _ => return false,
        };
        let ip_len = if v4 {
            usize::from(u16::from_be_bytes([seg[2], seg[3]]))
        } else {
            40 + usize::from(u16::from_be_bytes([seg[4], seg[5]]))
        };
        let headers = l4 + usize::from(seg[l4 + 12] >> 4) * 4;
        let flags = seg[l4 + 13];
        if ip_len != seg.len()
            || headers < l4 + 20
            || headers >= seg.len()
            || flags & TCP_NEVER != 0
            || !(self.trusted || transport_checksum_ok(seg, l4, PROTO_TCP))
        {
            return false;
        }
        self.buf.clear();
        self.buf.extend_from_slice(seg);
        self.count = 1;
        self.v4 = v4;
        self.l4 = l4;
        self.headers = headers;
        self.mss = seg.len() - headers;
        let seq = u32::from_be_bytes([seg[l4 + 4], seg[l4 + 5], seg[l4 + 6], seg[l4 + 7]]);
        self.next_seq = seq.wrapping_add(self.mss as u32);
        self.next_id = u16::from_be_bytes([seg[4], seg[5]]).wrapping_add(1);
        self.closed = flags & (TCP_FIN | TCP_PSH) != 0;
        true
    }

    /// Whether `seg` may join the run as its next segment.
    fn joins(&self, seg: &[u8]) -> bool {
        let (l4, h) = (self.l4, self.headers);
        let first = &self.buf[..h];
        if seg.len() <= h
            || seg.len() - h > self.mss
            || self.buf.len() + seg.len() - h > COALESCE_MAX_BYTES
        {
            return false;
        }
        let ip_same = if self.v4 {
            // Version/IHL and TOS; flags and fragment offset, TTL, protocol; addresses.
            seg[..2] == first[..2]
                && seg[6..10] == first[6..10]
                && seg[12..20] == first[12..20]
                && u16::from_be_bytes([seg[2], seg[3]]) as usize == seg.len()
                && u16::from_be_bytes([seg[4], seg[5]]) == self.next_id
        } else {
            // Version, traffic class, flow label; next header, hop limit; addresses.
            seg[..4] == first[..4]
                && seg[6..40] == first[6..40]
                && 40 + usize::from(u16::from_be_bytes([seg[4], seg[5]])) == seg.len()
        };
        let (t, f) = (&seg[l4..h], &first[l4..h]);
        let seq = u32::from_be_bytes([t[4], t[5], t[6], t[7]]);
        // Ports; acknowledgment, data offset and AE; window, urgent pointer, options.
        ip_same
            && t[..4] == f[..4]
            && seq == self.next_seq
            && t[8..13] == f[8..13]
            && (t[13] ^ f[13]) & !(TCP_FIN | TCP_PSH) == 0
            && t[14..16] == f[14..16]
            && t[18..] == f[18..]
            && (self.trusted || transport_checksum_ok(seg, l4, PROTO_TCP))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::{Ip, Tcp};
    use crate::packet::{parse, TcpHeader, Transport};
    use crate::testing::{transport_sum_ok, A4, A6, B4, B6};

    /// Turns a complete datagram into what a TUN device with offloads hands over: the
    /// transport checksum replaced by the pseudo-header's folded sum.
    fn partial(mut p: Vec<u8>, proto: u8) -> (Vec<u8>, u16) {
        let (v4, l4) = if p[0] >> 4 == 4 {
            (true, usize::from(p[0] & 0xf) * 4)
        } else {
            (false, 40)
        };
        let field = if proto == PROTO_TCP { 16 } else { 6 };
        let pseudo = !checksum::finish(pseudo_sum(&p, v4, proto, p.len() - l4));
        p[l4 + field..l4 + field + 2].copy_from_slice(&pseudo.to_be_bytes());
        (p, l4 as u16)
    }

    fn payload(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 7 + 3) as u8).collect()
    }

    fn run(hdr: &VnetHdr, p: &mut [u8]) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut scratch = Vec::new();
        let n = segment(hdr, p, &mut scratch, |s| out.push(s.to_vec())).unwrap();
        assert_eq!(n, out.len());
        out
    }

    #[test]
    fn the_header_reads_back_what_it_wrote_in_little_endian() {
        let h = VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_TCPV6 | GSO_ECN,
            hdr_len: 74,
            gso_size: 1428,
            csum_start: 40,
            csum_offset: 16,
        };
        let b = h.emit();
        assert_eq!(b, [1, 0x84, 74, 0, 0x94, 0x05, 40, 0, 16, 0]);
        assert_eq!(VnetHdr::parse(&b), Ok(h));
        assert_eq!(VnetHdr::parse(&b[..9]), Err(GsoError::ShortHeader(9)));
        assert_eq!(VnetHdr::parse(&VNET_HDR_NONE), Ok(VnetHdr::default()));
    }

    #[test]
    fn a_tcpv4_super_packet_becomes_mss_sized_segments_as_the_kernel_cuts_them() {
        let data = payload(3500);
        let seg = Tcp::new(40000, 80, 0xffff_fc00)
            .ack(77)
            .flags(TcpHeader::PSH | TcpHeader::FIN | TcpHeader::CWR);
        let whole = Ip::v4(A4, B4).identification(0xfffe).tcp(&seg, &data);
        let (mut p, l4) = partial(whole, PROTO_TCP);
        let hdr = VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_TCPV4 | GSO_ECN,
            hdr_len: 40,
            gso_size: 1448,
            csum_start: l4,
            csum_offset: 16,
        };
        let out = run(&hdr, &mut p);
        assert_eq!(out.len(), 3);
        let mut got = Vec::new();
        for (i, s) in out.iter().enumerate() {
            assert!(transport_sum_ok(s), "segment {i}'s tcp checksum");
            assert_eq!(
                checksum::checksum(&s[..20], 0),
                0,
                "segment {i}'s ip checksum"
            );
            let h = parse(s).unwrap();
            assert_eq!(h.ip.total_len, s.len());
            let Transport::Tcp(t) = h.transport else {
                panic!("{h:?}")
            };
            assert_eq!(t.seq, 0xffff_fc00u32.wrapping_add(1448 * i as u32));
            assert_eq!(t.ack, 77);
            assert_eq!(t.has(TcpHeader::CWR), i == 0, "cwr on the first only");
            assert_eq!(t.has(TcpHeader::PSH), i == 2, "psh on the last only");
            assert_eq!(t.has(TcpHeader::FIN), i == 2, "fin on the last only");
            assert!(t.has(TcpHeader::ACK));
            assert_eq!(
                u16::from_be_bytes([s[4], s[5]]),
                0xfffeu16.wrapping_add(i as u16)
            );
            got.extend_from_slice(&s[40..]);
        }
        assert_eq!(
            out.iter().map(Vec::len).collect::<Vec<_>>(),
            [1488, 1488, 40 + 3500 - 2 * 1448]
        );
        assert_eq!(got, data, "the payload, in order, once");
    }

    #[test]
    fn a_tcpv6_super_packet_with_options_keeps_them_on_every_segment() {
        let data = payload(2000);
        let mut whole = Ip::v6(A6, B6).tcp(&Tcp::new(1, 2, 100).ack(5), &data);
        // Grow the TCP header by a 12-byte timestamp option (NOP NOP TS).
        let opts = [1, 1, 8, 10, 0, 0, 0, 9, 0, 0, 0, 8];
        whole.splice(60..60, opts);
        whole[52] = (8 << 4) | (whole[52] & 0x0f);
        let (mut p, l4) = partial(whole, PROTO_TCP);
        let hdr = VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_TCPV6,
            hdr_len: 72,
            gso_size: 1000,
            csum_start: l4,
            csum_offset: 16,
        };
        let out = run(&hdr, &mut p);
        assert_eq!(out.len(), 2);
        for (i, s) in out.iter().enumerate() {
            assert!(transport_sum_ok(s));
            assert_eq!(&s[60..72], &opts);
            let h = parse(s).unwrap();
            assert_eq!(usize::from(u16::from_be_bytes([s[4], s[5]])), s.len() - 40);
            let Transport::Tcp(t) = h.transport else {
                panic!()
            };
            assert_eq!(t.seq, 100 + 1000 * i as u32);
            assert_eq!(t.payload_len, 1000);
        }
    }

    #[test]
    fn a_udp_super_packet_becomes_datagrams_each_with_its_own_length_and_checksum() {
        let data = payload(2500);
        let (mut p, l4) = partial(Ip::v4(A4, B4).udp(5000, 443, &data), PROTO_UDP);
        let hdr = VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_UDP_L4,
            hdr_len: 28,
            gso_size: 1200,
            csum_start: l4,
            csum_offset: 6,
        };
        let out = run(&hdr, &mut p);
        assert_eq!(
            out.iter().map(Vec::len).collect::<Vec<_>>(),
            [1228, 1228, 128]
        );
        for s in &out {
            assert!(transport_sum_ok(s));
            let Transport::Udp { payload_len, .. } = parse(s).unwrap().transport else {
                panic!()
            };
            assert_eq!(payload_len, s.len() - 28);
        }
    }

    #[test]
    fn a_partial_checksum_is_finished_and_the_packet_handed_over_whole() {
        let complete = Ip::v6(A6, B6).udp(9, 10, b"finish me");
        let (mut p, l4) = partial(complete.clone(), PROTO_UDP);
        assert_ne!(p, complete);
        let hdr = VnetHdr {
            flags: F_NEEDS_CSUM,
            csum_start: l4,
            csum_offset: 6,
            ..VnetHdr::default()
        };
        assert_eq!(run(&hdr, &mut p), [complete]);
        // Without F_NEEDS_CSUM the bytes pass untouched.
        let mut q = p.clone();
        q[47] ^= 0xff;
        assert_eq!(run(&VnetHdr::default(), &mut q.clone()), [q]);
    }

    #[test]
    fn a_packet_within_one_mss_is_one_segment_with_a_complete_checksum() {
        let whole = Ip::v4(A4, B4).tcp(&Tcp::new(1, 2, 3).flags(TcpHeader::SYN), &[]);
        let (mut p, l4) = partial(whole.clone(), PROTO_TCP);
        let hdr = VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_TCPV4,
            gso_size: 1448,
            csum_start: l4,
            csum_offset: 16,
            ..VnetHdr::default()
        };
        assert_eq!(run(&hdr, &mut p), [whole]);
    }

    #[test]
    fn bad_headers_are_errors_naming_the_fault() {
        let (mut p, l4) = partial(Ip::v4(A4, B4).udp(1, 2, &payload(3000)), PROTO_UDP);
        let mut s = Vec::new();
        let mut go = |h: VnetHdr, p: &mut [u8]| segment(&h, p, &mut s, |_| {}).unwrap_err();
        let tcp = VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_TCPV4,
            gso_size: 1000,
            csum_start: l4,
            csum_offset: 16,
            ..VnetHdr::default()
        };
        assert!(
            matches!(go(tcp, &mut p), GsoError::BadHeaders(_)),
            "udp as tcp"
        );
        let udp = VnetHdr {
            gso_type: GSO_UDP_L4,
            csum_offset: 6,
            ..tcp
        };
        assert_eq!(go(VnetHdr { gso_size: 0, ..udp }, &mut p), GsoError::BadGso);
        assert_eq!(go(VnetHdr { flags: 0, ..udp }, &mut p), GsoError::BadGso);
        assert_eq!(
            go(
                VnetHdr {
                    gso_type: GSO_UDP,
                    ..udp
                },
                &mut p
            ),
            GsoError::UnsupportedType(GSO_UDP)
        );
        assert!(matches!(
            go(
                VnetHdr {
                    csum_start: 24,
                    ..udp
                },
                &mut p
            ),
            GsoError::BadHeaders(_)
        ));
        let none = VnetHdr {
            gso_type: GSO_NONE,
            csum_start: 3027,
            ..udp
        };
        assert!(matches!(
            go(none, &mut p),
            GsoError::ChecksumOutside { start: 3027, .. }
        ));
        assert!(matches!(go(udp, &mut [0x45; 10]), GsoError::BadHeaders(_)));
        assert!(GsoError::BadGso.to_string().contains("gso_size 0"));
    }

    /// The segments of a TCP super-packet of `len` payload bytes cut at `mss`.
    fn tcp_segments(v6: bool, len: usize, mss: u16, flags: u8) -> Vec<Vec<u8>> {
        let ip = if v6 {
            Ip::v6(A6, B6)
        } else {
            Ip::v4(A4, B4).identification(0xfff0)
        };
        let whole = ip.tcp(
            &Tcp::new(443, 50000, 1000).ack(9).flags(flags),
            &payload(len),
        );
        let (mut p, l4) = partial(whole, PROTO_TCP);
        let hdr = VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: if v6 { GSO_TCPV6 } else { GSO_TCPV4 },
            gso_size: mss,
            csum_start: l4,
            csum_offset: 16,
            ..VnetHdr::default()
        };
        run(&hdr, &mut p)
    }

    fn take(c: &mut Coalescer) -> (VnetHdr, Vec<u8>) {
        let mut got = None;
        c.take(|h, b| got = Some((*h, b.to_vec())));
        got.expect("something was built")
    }

    #[test]
    fn a_whole_super_packet_stands_for_the_segments_a_cut_gives() {
        for v6 in [false, true] {
            let ip = if v6 { Ip::v6(A6, B6) } else { Ip::v4(A4, B4) };
            let seg = Tcp::new(40000, 80, 1).ack(77).flags(TcpHeader::PSH);
            let (hdr, mut p) = tso(ip.tcp(&seg, &payload(5000)), 1448);
            let w = Whole::of(&hdr, &p).expect("a plain TSO packet travels whole");
            let out = run(&hdr, &mut p.clone());
            assert_eq!(w.segments as usize, out.len());
            assert_eq!(usize::from(w.header_bytes), if v6 { 60 } else { 40 });
            let bytes: usize = out.iter().map(Vec::len).sum();
            assert_eq!(w.wire_bytes(p.len()), bytes as u64);
            // The coalescer joins the cut segments back into the same super-packet.
            let mut c = Coalescer::default();
            for s in &out {
                assert!(c.push(s));
            }
            let (joined_hdr, joined) = take(&mut c);
            assert_eq!(joined_hdr.gso_size, hdr.gso_size);
            assert_eq!(
                joined[l4_of(&joined)..],
                p[l4_of(&p)..],
                "tcp header and payload"
            );
            let (a, b) = (parse(&joined).unwrap(), parse(&p).unwrap());
            assert_eq!(
                (a.ip.total_len, a.ip.src, a.ip.dst),
                (b.ip.total_len, b.ip.src, b.ip.dst)
            );
            // What a cut would change beyond lengths and checksums keeps it to be cut.
            let mut cwr = hdr;
            cwr.gso_type |= GSO_ECN;
            assert_eq!(Whole::of(&cwr, &p), None, "cwr on the first segment only");
            let l4 = l4_of(&p);
            p[l4 + 13] |= 0x20;
            assert_eq!(Whole::of(&hdr, &p), None, "urg");
        }
        let (hdr, p) = tso(Ip::v4(A4, B4).tcp(&Tcp::new(1, 2, 3), &payload(1000)), 1448);
        assert_eq!(
            Whole::of(&hdr, &p),
            None,
            "one segment: nothing to carry whole"
        );
        let mut none = hdr;
        none.gso_type = GSO_NONE;
        assert_eq!(Whole::of(&none, &p), None);
        let (udp, _) = partial(Ip::v4(A4, B4).udp(1, 2, &payload(3000)), PROTO_UDP);
        let uh = VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_UDP_L4,
            hdr_len: 28,
            gso_size: 1000,
            csum_start: 20,
            csum_offset: 6,
        };
        assert_eq!(Whole::of(&uh, &udp), None, "udp is cut");
    }

    fn l4_of(p: &[u8]) -> usize {
        if p[0] >> 4 == 4 {
            20
        } else {
            40
        }
    }

    #[test]
    fn coalesced_segments_cut_again_give_back_the_same_segments() {
        for v6 in [false, true] {
            let segs = tcp_segments(v6, 5000, 1400, TcpHeader::PSH);
            assert_eq!(segs.len(), 4);
            let mut c = Coalescer::default();
            for s in &segs {
                assert!(c.push(s));
            }
            assert_eq!(c.len(), 4);
            let (hdr, mut p) = take(&mut c);
            assert!(c.is_empty());
            assert_eq!(hdr.gso_type, if v6 { GSO_TCPV6 } else { GSO_TCPV4 });
            assert_eq!(
                (hdr.gso_size, hdr.flags, hdr.csum_offset),
                (1400, F_NEEDS_CSUM, 16)
            );
            let h = parse(&p).unwrap();
            assert_eq!(h.ip.total_len, p.len());
            let Transport::Tcp(t) = h.transport else {
                panic!()
            };
            assert!(t.has(TcpHeader::PSH), "the last segment's psh");
            assert_eq!(run(&hdr, &mut p), segs);
        }
    }

    #[test]
    fn one_segment_comes_out_as_it_went_in() {
        let segs = tcp_segments(false, 100, 1400, 0);
        let mut c = Coalescer::default();
        assert!(c.push(&segs[0]));
        assert_eq!(take(&mut c), (VnetHdr::default(), segs[0].clone()));
        let mut none = true;
        c.take(|_, _| none = false);
        assert!(none, "nothing is left to take");
    }

    #[test]
    fn a_run_ends_where_joining_would_change_what_the_host_receives() {
        let segs = tcp_segments(false, 6000, 1000, TcpHeader::FIN);
        let refused = |first: &[u8], next: &[u8]| {
            let mut c = Coalescer::default();
            assert!(c.push(first));
            !c.push(next)
        };
        // A gap (a segment lost on the link), and the same segment twice (duplication).
        assert!(refused(&segs[0], &segs[2]));
        assert!(refused(&segs[0], &segs[0]));
        // A CE mark on one but not the other, with its IP checksum mended.
        let mut ce = segs[1].clone();
        ce[1] |= 3;
        ce[10..12].copy_from_slice(&[0, 0]);
        let c = checksum::checksum(&ce[..20], 0);
        ce[10..12].copy_from_slice(&c.to_be_bytes());
        assert!(refused(&segs[0], &ce));
        // A bit flipped in the payload (corruption): the host must see the bad checksum.
        let mut bad = segs[1].clone();
        bad[100] ^= 4;
        assert!(refused(&segs[0], &bad));
        assert!(!Coalescer::default().push(&bad), "nor start a run");
        // Unless the caller vouches for every checksum: then it is not summed.
        let mut trusting = Coalescer::default();
        trusting.trust_checksums(true);
        assert!(trusting.push(&segs[0]) && trusting.push(&bad));
        // CWR, and a window that changed (checksums mended by the segmenter's own rule).
        for (at, v) in [(33usize, 0x80u8 | 0x10), (34, 0x12)] {
            let mut s = segs[1].clone();
            s[at] = v;
            fix_l4_checksum(&mut s, true, 20, PROTO_TCP, 16);
            assert!(refused(&segs[0], &s), "byte {at}");
        }
        // After a short segment, or one with FIN, nothing more joins.
        let short = tcp_segments(false, 1500, 1000, 0);
        let mut c = Coalescer::default();
        assert!(c.push(&short[0]) && c.push(&short[1]));
        let mut next = short[1].clone();
        next[24..28].copy_from_slice(&(1000u32 + 1500).to_be_bytes());
        fix_l4_checksum(&mut next, true, 20, PROTO_TCP, 16);
        assert!(!c.push(&next));
        let mut c = Coalescer::default();
        for s in &segs {
            assert!(c.push(s));
        }
        let (hdr, p) = take(&mut c);
        assert_eq!(
            p[33] & TCP_FIN,
            TCP_FIN,
            "the super-packet ends with the fin"
        );
        assert_eq!(usize::from(hdr.gso_size) * 5 + 1000, p.len() - 40);
        // Pure acknowledgments (no payload) and SYNs start no run.
        let ack = Ip::v4(A4, B4).tcp(&Tcp::new(1, 2, 3).ack(4), &[]);
        assert!(!Coalescer::default().push(&ack));
        let syn = Ip::v4(A4, B4).tcp(&Tcp::new(1, 2, 3).flags(TcpHeader::SYN), b"tfo");
        assert!(!Coalescer::default().push(&syn));
    }

    proptest::proptest! {
        #[test]
        fn segments_carry_the_payload_once_in_order_within_the_mss(
            len in 0usize..9000, mss in 1u16..3000, v6 in proptest::bool::ANY, udp in proptest::bool::ANY,
        ) {
            let data = payload(len);
            let ip = if v6 { Ip::v6(A6, B6) } else { Ip::v4(A4, B4) };
            let (whole, proto, gso_type, off) = if udp {
                (ip.udp(1, 2, &data), PROTO_UDP, GSO_UDP_L4, 6)
            } else {
                let t = if v6 { GSO_TCPV6 } else { GSO_TCPV4 };
                (ip.tcp(&Tcp::new(1, 2, 7).flags(TcpHeader::PSH), &data), PROTO_TCP, t, 16)
            };
            let (mut p, l4) = partial(whole, proto);
            let hdr = VnetHdr {
                flags: F_NEEDS_CSUM,
                gso_type,
                gso_size: mss,
                csum_start: l4,
                csum_offset: off,
                ..VnetHdr::default()
            };
            let headers = usize::from(l4) + if udp { 8 } else { 20 };
            let mut got = Vec::new();
            for s in run(&hdr, &mut p) {
                proptest::prop_assert!(s.len() - headers <= usize::from(mss));
                proptest::prop_assert!(transport_checksum_ok(&s, usize::from(l4), proto));
                got.extend_from_slice(&s[headers..]);
            }
            proptest::prop_assert_eq!(got, data);
        }
    }
}
