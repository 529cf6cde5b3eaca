//! Packets with real IPv4/IPv6 headers for the disciplines' tests, so that `flow_key` and
//! `set_ecn` work on them as on the wire.

use wire::build::{Ip, Tcp};
use wire::{Ecn, Instant, Packet};

/// An IPv4 UDP datagram 10.0.0.1:`src_port` > 10.0.0.2:5201 of `len` bytes in all
/// (at least 28), with the ECN field `ecn` and a valid header checksum.
pub fn udp4(id: u64, src_port: u16, len: usize, ecn: Ecn) -> Packet {
    assert!((28..=65535).contains(&len));
    let d = Ip::v4([10, 0, 0, 1].into(), [10, 0, 0, 2].into())
        .ecn(ecn)
        .udp_of_len(src_port, 5201, len);
    Packet {
        data: d,
        id,
        ..Packet::default()
    }
}

/// An IPv6 TCP ACK fd00::1:`src_port` > fd00::2:443 of `len` bytes in all (at least 60).
pub fn tcp6(id: u64, src_port: u16, len: usize, ecn: Ecn) -> Packet {
    assert!((60..=65535).contains(&len));
    let fd = |last: u16| std::net::Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, last);
    let d = Ip::v6(fd(1), fd(2))
        .ecn(ecn)
        .tcp_of_len(&Tcp::new(src_port, 443, 0).ack(0), len);
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
