//! Nanoseconds each impairment adds per packet to one link direction:
//! `cargo run --release -p link --example impair_bench`.
//!
//! A link of 100 Gbit/s (never the bottleneck) with 10 ms of delay and a FIFO is offered one 1500-byte UDP packet per
//! simulated microsecond, and polled at each step; delivered packets are recycled, so no
//! allocation is measured but the duplicates' copies. Each packet's IP header is written just
//! before it is offered, as the shell's read from the TUN device leaves it in cache. The
//! configurations take turns, 15 rounds of 300 000 packets each, so that a busy machine slows
//! them alike. Time is the thread's own time on a CPU (the first field of
//! `/proc/thread-self/schedstat`, in ns), so that waiting for a core on a shared machine is not
//! counted. The table gives the minimum and the median per packet, and the difference of the
//! medians from the plain link's: what the impairment costs. This is a program, not library
//! code: reading the clock here is the point.

use std::hint::black_box;

use link::impair::{parse_corrupt, Impairments, NarrowLink};
use link::{Duplicate, Filter, Jitter, Link, LinkParams, PacketRate, Reorder, Slot};
use qdisc::fifo::{Fifo, Limit};
use wire::{Duration, Instant, Packet, Rate};

const PACKETS: u64 = 300_000;
const RUNS: usize = 15;

fn packet(id: u64) -> Packet {
    let d = wire::build::Ip::v4([10, 0, 0, 1].into(), [10, 0, 0, 2].into())
        .udp_of_len(40000, 5201, 1500);
    Packet {
        data: d,
        id,
        ..Packet::default()
    }
}

/// Nanoseconds this thread has run on a CPU.
fn cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .expect("/proc/thread-self/schedstat (Linux with schedstats)")
}

/// CPU nanoseconds per packet offered.
fn run(impair: &Impairments) -> f64 {
    let params = LinkParams {
        capacity: link::Capacity::Rate(Rate::from_mbit(100_000)),
        delay: Duration::from_millis(10),
        impair: impair.clone(),
        ..LinkParams::default()
    };
    let mut l = Link::new(
        Instant::ZERO,
        params,
        Box::new(Fifo::new(Limit::Packets(100_000))),
        1,
    );
    l.set_event_detail(false);
    let mut spare: std::collections::VecDeque<Packet> = (0..40_000).map(packet).collect();
    let mut out = Vec::new();
    let started = cpu_ns();
    for id in 0..PACKETS {
        let now = Instant::from_micros(id);
        let mut p = spare.pop_back().unwrap_or_else(|| packet(id));
        p.id = id;
        p.data[4..6].copy_from_slice(&(id as u16).to_be_bytes());
        l.enqueue(now, p, &mut ());
        l.poll(now, &mut out, &mut ());
        spare.extend(out.drain(..).map(|(_, p)| p));
        // The shell frees what it has written; here the oldest beyond the pool are freed, and
        // the packet reused next is one just delivered, warm as a fresh read would be.
        while spare.len() > 40_000 {
            spare.pop_front();
        }
    }
    let ns = (cpu_ns() - started) as f64 / PACKETS as f64;
    black_box(l.stats().packets_out);
    // Every packet offered was carried or deliberately dropped: none fell to the queue limit,
    // and none had to be allocated inside the timed loop.
    assert!(
        !l.stats().drops.contains_key("overlimit"),
        "the link was the bottleneck"
    );
    ns
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let with = |f: &dyn Fn(&mut Impairments)| {
        let mut i = Impairments::default();
        f(&mut i);
        i
    };
    let configs: Vec<(&str, Impairments)> = vec![
        ("plain (100 Gbit/s, 10 ms)", Impairments::default()),
        (
            "jitter 2ms uniform",
            with(&|i| i.jitter = Some(Jitter::parse("2ms").unwrap())),
        ),
        (
            "jitter 2ms normal",
            with(&|i| i.jitter = Some(Jitter::parse("2ms normal").unwrap())),
        ),
        (
            "jitter 2ms paretonormal 25%",
            with(&|i| i.jitter = Some(Jitter::parse("2ms paretonormal 25%").unwrap())),
        ),
        (
            "jitter 2ms normal reorder",
            with(&|i| i.jitter = Some(Jitter::parse("2ms normal reorder").unwrap())),
        ),
        (
            "duplicate 10%",
            with(&|i| i.duplicate = Some(Duplicate::parse("10%").unwrap())),
        ),
        (
            "duplicate 10% 50ms",
            with(&|i| i.duplicate = Some(Duplicate::parse("10% 50ms").unwrap())),
        ),
        (
            "reorder 25% 50%",
            with(&|i| i.reorder = Some(Reorder::parse("25% 50%").unwrap())),
        ),
        (
            "corrupt 1%",
            with(&|i| i.corrupt = parse_corrupt("1%").unwrap()),
        ),
        (
            "pps 2000000",
            with(&|i| i.pps = Some(PacketRate::parse("2000000").unwrap())),
        ),
        (
            "slot 1ms 2ms",
            with(&|i| i.slot = Some(Slot::parse("1ms 2ms").unwrap())),
        ),
        (
            "drop 'tcp syn'",
            with(&|i| i.drop = vec![Filter::parse("tcp syn").unwrap()]),
        ),
        (
            "drop 3 filters",
            with(&|i| {
                i.drop = ["tcp syn", "udp port 443", "ipv6 and not ecn ect1"]
                    .iter()
                    .map(|f| Filter::parse(f).unwrap())
                    .collect()
            }),
        ),
        (
            "mtu 9000",
            with(&|i| {
                i.narrow = Some(NarrowLink {
                    mtu_bytes: 9000,
                    router_v4: "10.0.9.1".parse().unwrap(),
                    router_v6: "fd00::9:1".parse().unwrap(),
                })
            }),
        ),
    ];
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); configs.len()];
    for _ in 0..RUNS {
        for (i, (_, imp)) in configs.iter().enumerate() {
            times[i].push(run(imp));
        }
    }
    let min = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
    let base = median(times[0].clone());
    println!("| link | min ns/packet | median ns/packet | added ns/packet (median) |");
    println!("|---|---:|---:|---:|");
    for (i, (name, _)) in configs.iter().enumerate() {
        let lo = min(&times[i]);
        let med = median(times[i].clone());
        let added = if i == 0 {
            String::new()
        } else {
            format!("{:.0}", med - base)
        };
        println!("| {name} | {lo:.0} | {med:.0} | {added} |");
    }
}
