//! Nanoseconds per packet for one enqueue plus one dequeue of each discipline under a
//! standing queue: `cargo run --release -p qdisc --example bench`.
//!
//! Each discipline is filled with a standing queue (1000 packets; for fq_codel 2 packets in
//! each of 1000 flows; 200 for dualpi2, whose classic queue gets a tenth of the link), then
//! every step dequeues one packet and enqueues it again, topping the queue up with whatever
//! the AQM dropped. The simulated clock advances 20 µs per step, so sojourn times sit above
//! the AQM targets and the control laws do their work: drops and marks are part of the cost.
//! The figure is wall time over packets enqueued (each of which is also dequeued or
//! dropped). Packets are recycled, so no allocation is measured. This is a program, not
//! library code: reading the wall clock here is the point.

use std::hint::black_box;
use std::time::Instant as WallClock;

use qdisc::{parse_spec, Qdisc, QdiscEvent};
use wire::{Duration, Ecn, Instant, Packet};

/// An IPv4 UDP datagram of 1500 bytes from port `flow`, with a valid header checksum.
fn packet(id: u64, flow: u16, ecn: Ecn) -> Packet {
    let d = wire::build::Ip::v4([10, 0, 0, 1].into(), [10, 0, 0, 2].into())
        .ecn(ecn)
        .udp_of_len(flow, 5201, 1500);
    Packet {
        data: d,
        id,
        ..Packet::default()
    }
}

fn run(spec: &str, flows: u16, per_flow: usize, ecn: &[Ecn], steps: u64) -> (f64, u64, u64) {
    let mut enqueues = 0u64;
    let mut q: Box<dyn Qdisc> = parse_spec(spec).expect("bench spec").build(1);
    let mut now = Instant::ZERO;
    let step = Duration::from_micros(20);
    let mut events = Vec::new();
    let mut spare: Vec<Packet> = Vec::new();
    let mut id = 0;
    for _ in 0..per_flow {
        for f in 0..flows {
            id += 1;
            q.enqueue(
                now,
                packet(id, f, ecn[id as usize % ecn.len()]),
                &mut events,
            );
            now += Duration::from_nanos(10);
        }
    }
    events.clear();
    let start = WallClock::now();
    for _ in 0..steps {
        now += step;
        q.on_timer(now);
        let p = match q.dequeue(now, &mut events) {
            Some(p) => p,
            None => spare.pop().expect("a packet to send"),
        };
        for e in events.drain(..) {
            if let QdiscEvent::Dropped { packet, .. } = e {
                spare.push(packet);
            }
        }
        // Keep the standing queue standing: what the AQM dropped comes back too.
        q.enqueue(now, black_box(p), &mut events);
        enqueues += 1;
        // At most two refills a step: an AQM that drops at enqueue (PIE) would otherwise
        // be fed the whole spare pool each step.
        for _ in 0..2 {
            if q.backlog_packets() >= usize::from(flows) * per_flow {
                break;
            }
            let Some(p) = spare.pop() else { break };
            q.enqueue(now, p, &mut events);
            enqueues += 1;
        }
        for e in events.drain(..) {
            if let QdiscEvent::Dropped { packet, .. } = e {
                spare.push(packet);
            }
        }
    }
    let ns = start.elapsed().as_nanos() as f64 / enqueues as f64;
    (ns, q.stats().drops(), q.stats().marks())
}

fn main() {
    let steps = 2_000_000;
    let ect0 = [Ecn::Ect0];
    let not_ect = [Ecn::NotEct];
    let mixed = [Ecn::Ect1, Ecn::NotEct];
    let cases: &[(&str, &str, u16, usize, &[Ecn])] = &[
        ("fifo", "fifo limit 1000", 1, 1000, &not_ect),
        ("bfifo", "bfifo limit 1500000", 1, 1000, &not_ect),
        ("codel", "codel", 1, 1000, &not_ect),
        ("codel ecn", "codel ecn", 1, 1000, &ect0),
        ("fq_codel, 1000 flows", "fq_codel", 1000, 2, &ect0),
        (
            "fq_codel noecn, 1000 flows",
            "fq_codel noecn",
            1000,
            2,
            &not_ect,
        ),
        ("pie", "pie", 1, 1000, &not_ect),
        ("pie ecn", "pie ecn", 1, 1000, &ect0),
        ("dualpi2, classic", "dualpi2", 1, 200, &not_ect),
        ("dualpi2, half L4S", "dualpi2", 1, 200, &mixed),
    ];
    println!(
        "{:<28} {:>10} {:>10} {:>10}",
        "discipline", "ns/packet", "drops", "marks"
    );
    for (name, spec, flows, per_flow, ecn) in cases {
        let (ns, drops, marks) = run(spec, *flows, *per_flow, ecn, steps);
        println!("{name:<28} {ns:>10.1} {drops:>10} {marks:>10}");
    }
}
