//! Packets with real IPv4/IPv6 headers for the disciplines' tests, so that `flow_key` and
//! `set_ecn` work on them as on the wire.

use wire::{Ecn, Instant, Packet};

/// An IPv4 UDP datagram 10.0.0.1:`src_port` > 10.0.0.2:5201 of `len` bytes in all
/// (at least 28), with the ECN field `ecn` and a valid header checksum.
pub fn udp4(id: u64, src_port: u16, len: usize, ecn: Ecn) -> Packet {
    assert!((28..=65535).contains(&len));
    let mut d = vec![0u8; len];
    d[0] = 0x45;
    d[1] = ecn.bits();
    d[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    d[6] = 0x40; // DF
    d[8] = 64;
    d[9] = 17;
    d[12..16].copy_from_slice(&[10, 0, 0, 1]);
    d[16..20].copy_from_slice(&[10, 0, 0, 2]);
    let c = wire::checksum::checksum(&d[..20], 0);
    d[10..12].copy_from_slice(&c.to_be_bytes());
    d[20..22].copy_from_slice(&src_port.to_be_bytes());
    d[22..24].copy_from_slice(&5201u16.to_be_bytes());
    d[24..26].copy_from_slice(&((len - 20) as u16).to_be_bytes());
    Packet {
        data: d,
        id,
        ..Packet::default()
    }
}

/// An IPv6 TCP segment fd00::1:`src_port` > fd00::2:443 of `len` bytes in all (at least 60).
pub fn tcp6(id: u64, src_port: u16, len: usize, ecn: Ecn) -> Packet {
    assert!((60..=65535).contains(&len));
    let mut d = vec![0u8; len];
    d[0] = 0x60;
    d[1] = ecn.bits() << 4;
    d[4..6].copy_from_slice(&((len - 40) as u16).to_be_bytes());
    d[6] = 6;
    d[7] = 64;
    d[8] = 0xfd;
    d[23] = 1;
    d[24] = 0xfd;
    d[39] = 2;
    d[40..42].copy_from_slice(&src_port.to_be_bytes());
    d[42..44].copy_from_slice(&443u16.to_be_bytes());
    d[52] = 0x50;
    d[53] = 0x10; // ACK
    Packet {
        data: d,
        id,
        ..Packet::default()
    }
}

/// Milliseconds as an instant, for readable tests.
pub fn ms(v: u64) -> Instant {
    Instant::from_millis(v)
}

/// The header checksum of an IPv4 packet still verifies (sums to zero).
pub fn v4_checksum_ok(p: &Packet) -> bool {
    wire::checksum::checksum(&p.data[..20], 0) == 0
}
