//! Writes a large synthetic capture for the benchmark: many TCP bulk transfers (synth::Bulk),
//! 16 at a time and interleaved, with losses, SACK, queues and a few ECN connections.
//!
//!     cargo run --release -p analyze --example gen_capture -- OUT.pcap [PACKETS] [SNAPLEN]
//!
//! PACKETS defaults to 2_100_000; SNAPLEN (default 262144: whole packets) cuts records the way
//! `tcpdump -s` does. Deterministic: the same arguments give the same file.

use std::io::BufWriter;

use analyze::synth::Bulk;

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let out = args
        .get(1)
        .expect("usage: gen_capture OUT.pcap [PACKETS] [SNAPLEN]");
    let target: u64 = args
        .get(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(2_100_000);
    let snaplen: u32 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(262_144);
    let f = BufWriter::with_capacity(1 << 20, std::fs::File::create(out)?);
    let mut w = wire::pcap::PcapWriter::with_linktype(f, 101, snaplen)?;
    let mut written = 0u64;
    let mut conn = 0u64;
    let mut t = 1_700_000_000_000_000_000u64;
    // A small xorshift for the variety of each connection (seeded, so runs repeat).
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    while written < target {
        let mut group = Vec::new();
        for k in 0..16u64 {
            let mut b = Bulk::new(
                format!(
                    "10.{}.{}.{}:{}",
                    1 + conn / 65_000 % 200,
                    conn / 250 % 250,
                    1 + conn % 250,
                    30_000 + conn % 30_000
                )
                .parse()
                .unwrap(),
                format!("10.200.0.{}:{}", 1 + k, 443 + k).parse().unwrap(),
            );
            b.isn_client = next() as u32;
            b.isn_server = next() as u32;
            b.start_ns = t + next() % 50_000_000;
            b.bytes = 200_000 + next() % 2_000_000;
            b.window_segments = 10 + (next() % 120) as u32;
            b.rate_bytes_per_s = 1_000_000 + next() % 20_000_000;
            b.base_rtt_ns = 5_000_000 + next() % 80_000_000;
            let nseg = b.bytes / 1448;
            for _ in 0..(next() % 6) {
                b.drop_first_tx.insert(next() % nseg);
            }
            if next() % 4 == 0 {
                b.ecn = true;
                b.ce_threshold_segments = 10;
            }
            group.extend(b.run());
            conn += 1;
        }
        group.sort_by_key(|p| p.0);
        t = group.last().map_or(t, |p| p.0) + 1_000_000;
        for (ts, p) in &group {
            w.write(*ts, p)?;
            written += 1;
        }
    }
    w.flush()?;
    eprintln!("{written} packets, {conn} connections");
    Ok(())
}
