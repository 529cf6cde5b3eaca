//! Translated packets per second of the pure NAT64 translator (goal: under 200 ns per
//! packet, docs/PERFORMANCE.md).
//!
//!     cargo run --release -p nat64 --example nat64_bench [PACKETS]
//!
//! One established TCP session; the same data segment is translated PACKETS times in each
//! direction, into one reused buffer, for full-size (1500-byte IPv6 / 1480-byte IPv4) and
//! pure-ACK packets, with transport checksum verification on (the default) and off. The
//! wall clock is read here, in the example, never in the library; `now` advances 1 µs per
//! packet in simulated time.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::Instant as Wall;

use nat64::{Nat64, Params, Verdict};
use wire::build::{Ip, Tcp};
use wire::packet::TcpHeader;
use wire::Instant;

const T: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
const Z: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 10);

fn x() -> Ipv6Addr {
    "2001:db8::2".parse().unwrap()
}
fn y() -> Ipv6Addr {
    "64:ff9b::c633:640a".parse().unwrap()
}

fn tcp6(syn: bool, payload: &[u8]) -> Vec<u8> {
    let t = Tcp::new(40000, 80, 1).window(65000);
    let t = if syn {
        t.flags(TcpHeader::SYN)
    } else {
        t.ack(1)
    };
    Ip::v6(x(), y()).tcp(&t, payload)
}
fn tcp4(syn: bool, payload: &[u8]) -> Vec<u8> {
    let t = Tcp::new(80, 40000, 1).window(65000).ack(2);
    let t = if syn { t.flags(TcpHeader::SYN) } else { t };
    Ip::v4(Z, T).tcp(&t, payload)
}

fn run(verify: bool, six: bool, payload_bytes: usize, packets: u64) -> (usize, f64) {
    let params = Params {
        pool4: vec![T],
        verify_checksums: verify,
        ..Params::default()
    };
    let mut n = Nat64::new(params, 1).unwrap();
    let mut out = Vec::with_capacity(2048);
    assert_eq!(
        n.translate_6to4_into(Instant::ZERO, &tcp6(true, b""), &mut out),
        Verdict::Forward
    );
    assert_eq!(
        n.translate_4to6_into(Instant::ZERO, &tcp4(true, b""), &mut out),
        Verdict::Forward
    );
    let payload = vec![0x5a; payload_bytes];
    let p = if six {
        tcp6(false, &payload)
    } else {
        tcp4(false, &payload)
    };
    let start = Wall::now();
    for i in 0..packets {
        let now = Instant::from_micros(i);
        let v = if six {
            n.translate_6to4_into(now, &p, &mut out)
        } else {
            n.translate_4to6_into(now, &p, &mut out)
        };
        debug_assert_eq!(v, Verdict::Forward);
        std::hint::black_box(&out);
    }
    let ns = start.elapsed().as_nanos() as f64 / packets as f64;
    let s = n.stats();
    assert_eq!(
        s.translated_6to4 + s.translated_4to6,
        packets + 2,
        "every packet translated"
    );
    (p.len(), ns)
}

fn main() {
    let packets: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2_000_000);
    println!("{packets} packets per case, one TCP session, one reused output buffer");
    println!(
        "{:<8} {:>8} {:>10} {:>10} {:>12} {:>10}",
        "dir", "in bytes", "checksums", "ns/packet", "packets/s", "Gbit/s"
    );
    for verify in [true, false] {
        for (six, dir) in [(true, "6to4"), (false, "4to6")] {
            for payload in [1440, 0] {
                let (len, ns) = run(verify, six, payload, packets);
                let pps = 1e9 / ns;
                println!(
                    "{:<8} {:>8} {:>10} {:>10.1} {:>12.0} {:>10.2}",
                    dir,
                    len,
                    if verify { "verified" } else { "adjusted" },
                    ns,
                    pps,
                    pps * len as f64 * 8.0 / 1e9
                );
            }
        }
    }
}
