//! Link-layer headers: from a captured record to the IP datagram inside it.
//!
//! Knows the link types tcpdump writes on Linux and BSD (tcpdump.org "LINKTYPE_" list):
//! raw IP (101, 12, 14, 228 IPv4, 229 IPv6), Ethernet (1) with any number of 802.1Q / 802.1ad
//! VLAN tags, Linux cooked capture v1 (113) and v2 (276), BSD null (0, host byte order) and
//! loop (108, network byte order). It does not look past the IP version nibble: checking the
//! IP header is `wire::packet::parse`'s job.

use std::fmt;

/// Why a record's link-layer header could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinkError {
    /// A link type we do not decode.
    Unsupported(u32),
    /// The record is shorter than the link-layer header.
    Truncated { linktype: u32, got: usize },
}

impl fmt::Display for LinkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LinkError::Unsupported(t) => write!(
                f,
                "link type {t} is not supported (raw IP 101/228/229, ethernet 1, sll 113, sll2 276, null 0, loop 108 are)"
            ),
            LinkError::Truncated { linktype, got } => write!(
                f,
                "record of {got} bytes is shorter than its link-layer header (link type {linktype})"
            ),
        }
    }
}

impl std::error::Error for LinkError {}

pub const LINKTYPE_NULL: u32 = 0;
pub const LINKTYPE_ETHERNET: u32 = 1;
pub const LINKTYPE_RAW: u32 = 101;
pub const LINKTYPE_LOOP: u32 = 108;
pub const LINKTYPE_LINUX_SLL: u32 = 113;
pub const LINKTYPE_IPV4: u32 = 228;
pub const LINKTYPE_IPV6: u32 = 229;
pub const LINKTYPE_LINUX_SLL2: u32 = 276;

/// Whether `linktype` is one [`ip_payload`] decodes.
pub fn supported(linktype: u32) -> bool {
    matches!(
        linktype,
        0 | 1 | 12 | 14 | 101 | 108 | 113 | 228 | 229 | 276
    )
}

/// The IP datagram inside a record: `Ok(Some(bytes))` for IPv4/IPv6, `Ok(None)` for other
/// protocols (ARP, LLDP…).
#[inline]
pub fn ip_payload(linktype: u32, data: &[u8]) -> Result<Option<&[u8]>, LinkError> {
    let short = || LinkError::Truncated {
        linktype,
        got: data.len(),
    };
    match linktype {
        12 | 14 | LINKTYPE_RAW | LINKTYPE_IPV4 | LINKTYPE_IPV6 => Ok(ip_by_version(data)),
        LINKTYPE_ETHERNET => {
            // Destination, source, then EtherType; 0x8100 (802.1Q), 0x88a8 (802.1ad) and the
            // pre-standard 0x9100 QinQ tags insert 4 bytes each before the real EtherType.
            let mut off = 12;
            loop {
                let et = be16(data, off).ok_or_else(short)?;
                match et {
                    0x8100 | 0x88a8 | 0x9100 => off += 4,
                    _ => return Ok(by_ethertype(et, data.get(off + 2..).unwrap_or(&[]))),
                }
            }
        }
        LINKTYPE_LINUX_SLL => {
            // 16-byte header; protocol type (an EtherType for IP) in the last two bytes.
            let et = be16(data, 14).ok_or_else(short)?;
            Ok(by_ethertype(et, &data[16..]))
        }
        LINKTYPE_LINUX_SLL2 => {
            // 20-byte header; protocol type first.
            if data.len() < 20 {
                return Err(short());
            }
            let et = be16(data, 0).ok_or_else(short)?;
            Ok(by_ethertype(et, &data[20..]))
        }
        LINKTYPE_NULL | LINKTYPE_LOOP => {
            if data.len() < 4 {
                return Err(short());
            }
            let fam = if linktype == LINKTYPE_LOOP {
                u32::from_be_bytes([data[0], data[1], data[2], data[3]])
            } else {
                // Host byte order of the capturing machine: the family is small, so whichever
                // order gives a value below 256 is the right one.
                let le = u32::from_le_bytes([data[0], data[1], data[2], data[3]]);
                if le < 256 {
                    le
                } else {
                    u32::from_be_bytes([data[0], data[1], data[2], data[3]])
                }
            };
            // AF_INET is 2 everywhere; AF_INET6 is 10 (Linux), 24 (NetBSD, OpenBSD),
            // 28 (FreeBSD), 30 (macOS).
            let ip = &data[4..];
            Ok(match fam {
                2 | 10 | 24 | 28 | 30 => ip_by_version(ip),
                _ => None,
            })
        }
        other => Err(LinkError::Unsupported(other)),
    }
}

fn be16(d: &[u8], off: usize) -> Option<u16> {
    d.get(off..off + 2)
        .map(|b| u16::from_be_bytes([b[0], b[1]]))
}

fn by_ethertype(et: u16, payload: &[u8]) -> Option<&[u8]> {
    match et {
        0x0800 | 0x86dd => Some(payload),
        _ => None,
    }
}

fn ip_by_version(d: &[u8]) -> Option<&[u8]> {
    match d.first().map(|b| b >> 4) {
        Some(4) | Some(6) => Some(d),
        _ => None,
    }
}

/// Link-layer framings for tests and the bench generator.
pub mod testwrap {
    /// Ethernet II with the given VLAN tags (TPID, TCI pairs).
    pub fn ethernet(ip: &[u8], vlans: &[(u16, u16)]) -> Vec<u8> {
        let mut b = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];
        for (tpid, tci) in vlans {
            b.extend_from_slice(&tpid.to_be_bytes());
            b.extend_from_slice(&tci.to_be_bytes());
        }
        let et: u16 = if ip.first().map(|v| v >> 4) == Some(6) {
            0x86dd
        } else {
            0x0800
        };
        b.extend_from_slice(&et.to_be_bytes());
        b.extend_from_slice(ip);
        b
    }

    /// Linux cooked capture v1.
    pub fn sll(ip: &[u8]) -> Vec<u8> {
        let mut b = vec![0, 0, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0];
        let et: u16 = if ip.first().map(|v| v >> 4) == Some(6) {
            0x86dd
        } else {
            0x0800
        };
        b.extend_from_slice(&et.to_be_bytes());
        b.extend_from_slice(ip);
        b
    }

    /// Linux cooked capture v2.
    pub fn sll2(ip: &[u8]) -> Vec<u8> {
        let et: u16 = if ip.first().map(|v| v >> 4) == Some(6) {
            0x86dd
        } else {
            0x0800
        };
        let mut b = et.to_be_bytes().to_vec();
        b.extend_from_slice(&[0, 0, 0, 0, 0, 2, 0, 1, 0, 0, 6, 2, 0, 0, 0, 0, 0, 1]);
        b.extend_from_slice(ip);
        b
    }

    /// BSD null, family in little-endian host order.
    pub fn null_le(ip: &[u8]) -> Vec<u8> {
        let fam: u32 = if ip.first().map(|v| v >> 4) == Some(6) {
            30
        } else {
            2
        };
        let mut b = fam.to_le_bytes().to_vec();
        b.extend_from_slice(ip);
        b
    }
}

#[cfg(test)]
mod tests {
    use super::testwrap::*;
    use super::*;

    const V4: [u8; 4] = [0x45, 0, 0, 20];
    const V6: [u8; 4] = [0x60, 0, 0, 0];

    #[test]
    fn every_supported_framing_yields_the_ip_bytes() {
        for ip in [&V4[..], &V6[..]] {
            assert_eq!(ip_payload(101, ip), Ok(Some(ip)));
            assert_eq!(ip_payload(1, &ethernet(ip, &[])), Ok(Some(ip)));
            assert_eq!(
                ip_payload(1, &ethernet(ip, &[(0x88a8, 5), (0x8100, 7)])),
                Ok(Some(ip))
            );
            assert_eq!(ip_payload(113, &sll(ip)), Ok(Some(ip)));
            assert_eq!(ip_payload(276, &sll2(ip)), Ok(Some(ip)));
            assert_eq!(ip_payload(0, &null_le(ip)), Ok(Some(ip)));
            let mut lo = 2u32.to_be_bytes().to_vec();
            lo.extend_from_slice(ip);
            assert_eq!(ip_payload(108, &lo), Ok(Some(ip)));
        }
        assert_eq!(ip_payload(228, &V4), Ok(Some(&V4[..])));
    }

    #[test]
    fn arp_is_not_ip_and_short_headers_are_errors() {
        let mut arp = ethernet(&V4, &[]);
        arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        assert_eq!(ip_payload(1, &arp), Ok(None));
        assert_eq!(
            ip_payload(1, &[0; 13]),
            Err(LinkError::Truncated {
                linktype: 1,
                got: 13
            })
        );
        assert!(ip_payload(276, &[0; 19]).is_err());
        assert_eq!(ip_payload(147, &V4), Err(LinkError::Unsupported(147)));
    }
}
