//! Nanoseconds each impairment adds per packet to one link direction:
//! `cargo run --release -p link --example impair_bench [WORD]` (with WORD, only the plain link
//! and the configurations whose name contains it, e.g. `duplicate`: for a profiler).
//!
//! A link of 100 Gbit/s (never the bottleneck) with 10 ms of delay and a FIFO is offered one
//! 1500-byte UDP packet per simulated microsecond, and polled at each step. The loop does what
//! the shell does around the link: each packet is copied into a buffer from a pool (the read
//! from the TUN device), each delivered packet is copied out (the write into the far host's) and
//! its buffer goes back to the pool, 4096 at most, the rest to the link (`Link::recycle`, where
//! a duplicating link makes its copies; the lab's engine does not hand its surplus to the links
//! yet, it frees it). The clock starts after 100 000 packets, once the pool and the packets in
//! flight are steady. The configurations take turns, 15 rounds of 300 000 packets each, so that a busy machine slows
//! them alike. Time is the thread's own time on a CPU (the first field of
//! `/proc/thread-self/schedstat`, in ns), so that waiting for a core on a shared machine is not
//! counted. The table gives the minimum and the median per packet, and the difference of the
//! medians from the plain link's: what the impairment costs. This is a program, not library
//! code: reading the clock here is the point.

use std::hint::black_box;

use link::impair::{parse_corrupt, Impairments, NarrowLink};
use link::{Duplicate, Filter, Jitter, Link, LinkParams, PacketRate, Reorder, Slot};
use qdisc::fifo::{Fifo, Limit};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use wire::{Duration, Instant, Packet, Rate};

const PACKETS: u64 = 300_000;
/// The plain link with the delay that order-kept normal jitter of 2 ms adds on average at this
/// packet rate: what more packets in flight cost, with no impairment.
const PLAIN_17MS: &str = "plain, 17 ms";
/// Packets offered before the clock starts: the in-flight packets and late copies of every
/// configuration settle within 100 ms of simulated time.
const WARMUP: u64 = 100_000;
/// Buffers the shell keeps for its reads (crates/lab's engine keeps 4096).
const POOL_BUFFERS: usize = 4096;
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

/// CPU nanoseconds per packet offered, once the link and the pool are in their steady state.
/// Also returns the median delay the link added (delay, jitter, order-keeping), in ms.
fn run(delay: Duration, impair: &Impairments) -> (f64, f64) {
    let params = LinkParams {
        capacity: link::Capacity::Rate(Rate::from_mbit(100_000)),
        delay,
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
    // The shell's pool of written packets' buffers (a stack, as the shell's: the buffer reused
    // next is the one written last); buffers beyond it go back to the link (`Link::recycle`),
    // which lets them go unless it duplicates. Full from the start, and enough beside it for the packets in flight, as a running lab's
    // pool is once its hosts have been idle. Its buffers are shuffled: allocated in a row they
    // would lie at consecutive addresses, and a link that delivers in order would hand them back
    // in that order, a stride the cache's prefetcher follows, which a running lab's pool, long
    // since mixed, does not have (and a link that reorders would pay for the difference).
    let mut pool: Vec<Packet> = (0..POOL_BUFFERS as u64 + 12_000).map(packet).collect();
    pool.shuffle(&mut ChaCha8Rng::seed_from_u64(7));
    let mut out = Vec::new();
    let mut allocated = 0u64;
    // What the shell's read(2) from the TUN device leaves (the kernel's copy of the packet) and
    // what its write(2) into the far host's TUN device copies into.
    let read = packet(0).data;
    let mut written = vec![0u8; 65_536];
    let mut step = |id: u64, allocated: &mut u64| {
        let now = Instant::from_micros(id);
        let mut p = pool.pop().unwrap_or_else(|| {
            *allocated += 1;
            packet(id)
        });
        p.id = id;
        p.data.clear();
        p.data.extend_from_slice(&read);
        p.data[4..6].copy_from_slice(&(id as u16).to_be_bytes());
        l.enqueue(now, p, &mut ());
        l.poll(now, &mut out, &mut ());
        for (_, p) in out.drain(..) {
            written[..p.len()].copy_from_slice(&p.data);
            black_box(&written);
            if pool.len() < POOL_BUFFERS {
                pool.push(p);
            } else {
                l.recycle(p.data);
            }
        }
    };
    // Until the packets in flight, late copies included, and the pool are steady.
    for id in 0..WARMUP {
        step(id, &mut allocated);
    }
    allocated = 0;
    let started = cpu_ns();
    for id in WARMUP..WARMUP + PACKETS {
        step(id, &mut allocated);
    }
    let ns = (cpu_ns() - started) as f64 / PACKETS as f64;
    black_box(l.stats().packets_out);
    // Every packet offered was carried or deliberately dropped: none fell to the queue limit,
    // and reads took their buffers from the pool.
    assert!(
        !l.stats().drops.contains_key("overlimit"),
        "the link was the bottleneck"
    );
    assert_eq!(allocated, 0, "a read had to allocate in the timed loop");
    (ns, l.stats().added_delay.percentiles().p50_ms)
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
        (PLAIN_17MS, Impairments::default()),
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
    let only = std::env::args().nth(1);
    let configs: Vec<(&str, Impairments)> = configs
        .into_iter()
        .enumerate()
        .filter(|(i, (name, _))| *i == 0 || only.as_ref().is_none_or(|w| name.contains(w.as_str())))
        .map(|(_, c)| c)
        .collect();
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); configs.len()];
    let mut delays_ms = vec![0.0; configs.len()];
    for _ in 0..RUNS {
        for (i, (name, imp)) in configs.iter().enumerate() {
            let delay = Duration::from_millis(if *name == PLAIN_17MS { 17 } else { 10 });
            let (ns, delay_ms) = run(delay, imp);
            times[i].push(ns);
            delays_ms[i] = delay_ms;
        }
    }
    let min = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
    let base = median(times[0].clone());
    println!(
        "| link | added delay p50 ms | min ns/packet | median ns/packet | added ns/packet (median) |"
    );
    println!("|---|---:|---:|---:|---:|");
    for (i, (name, _)) in configs.iter().enumerate() {
        let lo = min(&times[i]);
        let med = median(times[i].clone());
        let added = if i == 0 {
            String::new()
        } else {
            format!("{:.0}", med - base)
        };
        let d = delays_ms[i];
        println!("| {name} | {d:.1} | {lo:.0} | {med:.0} | {added} |");
    }
}
