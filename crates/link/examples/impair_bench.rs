//! Nanoseconds each impairment adds per packet to one link direction:
//! `cargo build --release -p link --example impair_bench && target/release/examples/impair_bench
//! [WORD] [--rounds N] [--alone] [--plain MS]... [--seed S]` (with WORD, only the plain links and
//! the configurations whose name contains it, e.g. `duplicate`, or the one whose whole name it
//! is; with `--alone` as well, not even the plain links: for a profiler, whose samples are then
//! those configurations' alone; `--plain MS` adds a plain link of that delay, and with `--alone`
//! and no WORD runs only such links; `--seed S` fixes the orders of the turns and rebuilds, drawn
//! from the clock otherwise and printed).
//!
//! A link of 100 Gbit/s (never the bottleneck) with 10 ms of delay and a FIFO is offered one
//! 1500-byte UDP packet per simulated microsecond, and polled at each step. The loop does what
//! the shell does around the link: each packet is copied into a buffer from a pool (the read
//! from the TUN device), each delivered packet is copied out (the write into the far host's) and
//! its buffer goes back to the pool, 4096 at most, the rest to the link (`Link::recycle`, where
//! a duplicating link makes its copies; the lab's engine does not hand its surplus to the links
//! yet, it frees it).
//!
//! **The measurement.** Every configuration gets its own link and pool ("rig"), warmed up with
//! 100 000 packets, and all rigs live side by side, built anew (in a new order) every ten rounds:
//! where a rig's buffers lie in memory changes its cost by some ns a packet, which a rig kept for
//! the whole run would carry into every round as a bias. Then come many short rounds; in each,
//! every rig takes a turn, in a new order each round: 20 000 packets untimed (its buffers back in
//! cache after the other rigs' turns: the turn's deliveries then read buffers this turn wrote),
//! then 20 000 timed. A round lasts well under a second, so a change of the machine's load or clock
//! frequency hits every configuration of the round alike, and each configuration's cost is compared
//! with a plain link's *in the same round*: the figure given is the median, over the rounds, of
//! these paired differences, with a 95 % confidence interval of that median (from the order
//! statistics: no assumption about the distribution) and the interquartile range of single rounds.
//! Two identical plain links are both measured; their difference must come out at 0 within the
//! interval, which checks the method. Time is the thread's own CPU time
//! (`CLOCK_THREAD_CPUTIME_ID`), so that waiting for a core on a shared machine is not counted, and
//! the process pins itself to one CPU, so that a turn is never split between two cores' caches.
//!
//! **Which plain link.** An impairment changes how long packets stay in flight (order-kept
//! jitter holds packets behind the latest one, `reorder` sends a quarter ahead, late copies
//! stay 50 ms), and so how many buffers the loop cycles through and how long since each was
//! last touched. Each configuration is therefore also compared with a plain link holding as
//! many packets in flight: by Little's law, a delay equal to the configuration's mean time in
//! flight per packet offered (measured during the warm-up, rounded to 0.5 ms).
//!
//! **In the same bursts.** Order-kept jitter and slots hand packets over in bursts (hundreds to
//! thousands at one poll, then none for as long), which changes the loop's cost without any
//! work of the link's: after a burst the pool holds more buffers than the cache does, and the
//! reads of the gap that follows write into buffers last touched long before. A configuration
//! whose polls hand over [`BURSTY`] packets or more on average is therefore also compared with
//! a plain link polled only at the gaps between its handovers (recorded in its warm-up, replayed
//! in a cycle), with a delay shortened by the wait for the poll so that it holds as many
//! buffers: the difference from that twin is what the impairment's own work costs. This is a
//! program, not library code: reading the clock here is the point.

use std::hint::black_box;

use link::impair::{parse_corrupt, Impairments, NarrowLink};
use link::{Duplicate, Filter, Jitter, Link, LinkParams, PacketRate, Reorder, Slot};
use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
use nix::time::{clock_gettime, ClockId};
use nix::unistd::Pid;
use qdisc::fifo::{Fifo, Limit};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use wire::{Duration, Instant, Packet, Rate};

const PLAIN: &str = "plain (100 Gbit/s, 10 ms)";
/// The same link again: its difference from [`PLAIN`] checks the method (it must be 0).
const PLAIN_AGAIN: &str = "plain again (the same link)";
/// The plain link with the delay that order-kept normal jitter of 2 ms adds on average at this
/// packet rate: what more packets in flight cost, with no impairment.
const PLAIN_17MS: &str = "plain, 17 ms";
/// Packets offered to each rig before the first round: the in-flight packets and late copies
/// of every configuration settle within 100 ms of simulated time.
const WARMUP: u64 = 100_000;
/// Packets of each turn before the clock starts: more than any configuration holds in flight
/// (at most about 18 000), so that the timed packets' buffers were all written in this turn.
const LEAD_IN: u64 = 20_000;
/// Packets timed in each turn.
const TIMED: u64 = 20_000;
const ROUNDS: usize = 150;
/// Rounds between rebuilds of every rig (see `main`).
const ROUNDS_PER_BUILD: usize = 10;
/// Buffers the shell keeps for its reads (crates/lab's engine keeps 4096).
const POOL_BUFFERS: usize = 4096;

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
    let t = clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID).expect("CLOCK_THREAD_CPUTIME_ID");
    t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64
}

/// Pins the process to the last CPU it may run on; the CPU, or why not.
fn pin() -> Result<usize, String> {
    let allowed = sched_getaffinity(Pid::from_raw(0)).map_err(|e| e.to_string())?;
    let cpu = (0..CpuSet::count())
        .rev()
        .find(|&c| allowed.is_set(c).unwrap_or(false))
        .ok_or("no CPU allowed")?;
    let mut one = CpuSet::new();
    one.set(cpu).map_err(|e| e.to_string())?;
    sched_setaffinity(Pid::from_raw(0), &one).map_err(|e| e.to_string())?;
    Ok(cpu)
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// One configuration's link with the loop around it, as the shell runs it.
struct Rig {
    link: Link,
    /// The shell's pool of written packets' buffers (a stack, as the shell's: the buffer reused
    /// next is the one written last); buffers beyond it go back to the link (`Link::recycle`),
    /// which lets them go unless it duplicates. Its buffers are shuffled: allocated in a row
    /// they would lie at consecutive addresses, and a link that delivers in order would hand
    /// them back in that order, a stride the cache's prefetcher follows, which a running lab's
    /// pool, long since mixed, does not have (and a link that reorders would pay for the
    /// difference).
    pool: Vec<Packet>,
    out: Vec<(Instant, Packet)>,
    /// What the shell's read(2) from the TUN device leaves (the kernel's copy of the packet).
    read: Vec<u8>,
    /// What its write(2) into the far host's TUN device copies into.
    written: Vec<u8>,
    /// The next packet's id, which is also the microsecond it is offered at.
    next_id: u64,
    /// Reads that found the pool empty and allocated.
    allocated: u64,
    /// Nanoseconds in flight, summed over the packets delivered (copies included).
    in_flight_ns: u128,
    /// While recording: the steps at which a poll handed packets over.
    handovers: Option<Vec<u64>>,
    /// A twin that replays another configuration's handovers: polls only after these gaps.
    polls: Option<PollGaps>,
}

/// The gaps, in steps, between another rig's polls that handed packets over, replayed in a
/// cycle: a plain link polled this way hands its packets over in the same bursts.
struct PollGaps {
    gaps: Vec<u64>,
    next: usize,
    /// The step of the next poll.
    due: u64,
}

impl Rig {
    fn new(delay: Duration, impair: &Impairments) -> Rig {
        let params = LinkParams {
            capacity: link::Capacity::Rate(Rate::from_mbit(100_000)),
            delay,
            impair: impair.clone(),
            ..LinkParams::default()
        };
        let mut link = Link::new(
            Instant::ZERO,
            params,
            Box::new(Fifo::new(Limit::Packets(100_000))),
            1,
        );
        link.set_event_detail(false);
        // Full from the start, and enough beside it for the packets in flight, as a running
        // lab's pool is once its hosts have been idle.
        let mut pool: Vec<Packet> = (0..POOL_BUFFERS as u64 + 12_000).map(packet).collect();
        pool.shuffle(&mut ChaCha8Rng::seed_from_u64(7));
        Rig {
            link,
            pool,
            out: Vec::new(),
            read: packet(0).data,
            written: vec![0u8; 65_536],
            next_id: 0,
            allocated: 0,
            in_flight_ns: 0,
            handovers: None,
            polls: None,
        }
    }

    /// Whether to poll at step `id`: at every step, or at a replayed handover.
    fn polls_at(&mut self, id: u64) -> bool {
        let Some(g) = &mut self.polls else {
            return true;
        };
        if id < g.due {
            return false;
        }
        g.due = id + g.gaps[g.next];
        g.next = (g.next + 1) % g.gaps.len();
        true
    }

    /// Offers `n` packets, one per simulated microsecond, polling after each (a twin: after
    /// those at its replayed handovers).
    fn run(&mut self, n: u64) {
        for _ in 0..n {
            let id = self.next_id;
            self.next_id += 1;
            let now = Instant::from_micros(id);
            let mut p = self.pool.pop().unwrap_or_else(|| {
                self.allocated += 1;
                packet(id)
            });
            p.id = id;
            p.data.clear();
            p.data.extend_from_slice(&self.read);
            p.data[4..6].copy_from_slice(&(id as u16).to_be_bytes());
            self.link.enqueue(now, p, &mut ());
            if self.polls_at(id) {
                self.link.poll(now, &mut self.out, &mut ());
            }
            if let Some(h) = &mut self.handovers {
                if !self.out.is_empty() {
                    h.push(id);
                }
            }
            // Until handed over: a twin polled in bursts holds its packets past their arrival.
            for (_, p) in self.out.drain(..) {
                self.in_flight_ns += u128::from(now.as_nanos() - p.id * 1000);
                self.written[..p.len()].copy_from_slice(&p.data);
                black_box(&self.written);
                if self.pool.len() < POOL_BUFFERS {
                    self.pool.push(p);
                } else {
                    self.link.recycle(p.data);
                }
            }
        }
    }

    /// The warm-up: returns the mean time in flight per packet offered (Little's law: a plain
    /// link with this delay holds as many packets in flight), over its second half, and the
    /// gaps between the polls that handed packets over in that half.
    fn warm_up(&mut self) -> (Duration, Vec<u64>) {
        self.run(WARMUP / 2);
        self.in_flight_ns = 0;
        self.handovers = Some(Vec::new());
        self.run(WARMUP / 2);
        self.allocated = 0;
        let steps = self.handovers.take().unwrap_or_default();
        let gaps = steps.windows(2).map(|w| w[1] - w[0]).collect();
        let in_flight = Duration::from_nanos((self.in_flight_ns / u128::from(WARMUP / 2)) as u64);
        (in_flight, gaps)
    }

    /// One turn of a round: CPU nanoseconds per timed packet.
    fn turn(&mut self) -> f64 {
        self.run(LEAD_IN);
        let started = cpu_ns();
        self.run(TIMED);
        (cpu_ns() - started) as f64 / TIMED as f64
    }

    /// Every packet offered was carried or deliberately dropped: none fell to the queue limit.
    fn check(&self) {
        black_box(self.link.stats().packets_out);
        assert!(
            !self.link.stats().drops.contains_key("overlimit"),
            "the link was the bottleneck"
        );
    }
}

/// The median of paired differences, a 95 % confidence interval of it, and the interquartile
/// range of single rounds.
struct Spread {
    median: f64,
    ci: (f64, f64),
    iqr: (f64, f64),
}

/// The confidence interval of a median from order statistics: the number of samples below the
/// median is Binomial(n, 1/2), so ranks n/2 ± 1.96·√n/2 bracket it with 95 % confidence.
fn spread(mut v: Vec<f64>) -> Spread {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let at = |q: f64| v[((q * n as f64) as usize).min(n - 1)];
    let half = 1.96 * (n as f64).sqrt() / 2.0;
    let lo = ((n as f64 / 2.0 - half).floor().max(0.0)) as usize;
    let hi = ((n as f64 / 2.0 + half).ceil() as usize).min(n - 1);
    Spread {
        median: at(0.5),
        ci: (v[lo], v[hi]),
        iqr: (at(0.25), at(0.75)),
    }
}

/// Handovers of at least this many packets on average make a configuration bursty: it gets a
/// plain twin polled at its handovers' gaps.
const BURSTY: f64 = 4.0;

/// What a rig is built from, again at each rebuild.
struct Spec {
    name: String,
    delay: Duration,
    impair: Impairments,
    /// A twin's poll gaps (see [`PollGaps`]).
    gaps: Option<Vec<u64>>,
}

impl Spec {
    fn build(&self) -> Rig {
        let mut rig = Rig::new(self.delay, &self.impair);
        rig.polls = self.gaps.clone().map(|gaps| PollGaps {
            gaps,
            next: 0,
            due: 0,
        });
        rig
    }
}

/// A delay rounded to 0.5 ms: a few plain links serve every configuration.
fn half_ms(d: Duration) -> Duration {
    Duration::from_micros((d.as_micros() as u64 + 250) / 500 * 500)
}

fn main() {
    let with = |f: &dyn Fn(&mut Impairments)| {
        let mut i = Impairments::default();
        f(&mut i);
        i
    };
    let ms = Duration::from_millis;
    let configs: Vec<(&str, Duration, Impairments)> = vec![
        (PLAIN, ms(10), Impairments::default()),
        (PLAIN_AGAIN, ms(10), Impairments::default()),
        (PLAIN_17MS, ms(17), Impairments::default()),
        (
            "jitter 2ms uniform",
            ms(10),
            with(&|i| i.jitter = Some(Jitter::parse("2ms").unwrap())),
        ),
        (
            "jitter 2ms normal",
            ms(10),
            with(&|i| i.jitter = Some(Jitter::parse("2ms normal").unwrap())),
        ),
        (
            "jitter 2ms paretonormal 25%",
            ms(10),
            with(&|i| i.jitter = Some(Jitter::parse("2ms paretonormal 25%").unwrap())),
        ),
        (
            "jitter 2ms normal reorder",
            ms(10),
            with(&|i| i.jitter = Some(Jitter::parse("2ms normal reorder").unwrap())),
        ),
        (
            "duplicate 10%",
            ms(10),
            with(&|i| i.duplicate = Some(Duplicate::parse("10%").unwrap())),
        ),
        (
            "duplicate 10% 50ms",
            ms(10),
            with(&|i| i.duplicate = Some(Duplicate::parse("10% 50ms").unwrap())),
        ),
        (
            "reorder 25% 50%",
            ms(10),
            with(&|i| i.reorder = Some(Reorder::parse("25% 50%").unwrap())),
        ),
        (
            "corrupt 1%",
            ms(10),
            with(&|i| i.corrupt = parse_corrupt("1%").unwrap()),
        ),
        (
            "pps 2000000",
            ms(10),
            with(&|i| i.pps = Some(PacketRate::parse("2000000").unwrap())),
        ),
        (
            "slot 1ms 2ms",
            ms(10),
            with(&|i| i.slot = Some(Slot::parse("1ms 2ms").unwrap())),
        ),
        (
            "drop 'tcp syn'",
            ms(10),
            with(&|i| i.drop = vec![Filter::parse("tcp syn").unwrap()]),
        ),
        (
            "drop 3 filters",
            ms(10),
            with(&|i| {
                i.drop = ["tcp syn", "udp port 443", "ipv6 and not ecn ect1"]
                    .iter()
                    .map(|f| Filter::parse(f).unwrap())
                    .collect()
            }),
        ),
        (
            "mtu 9000",
            ms(10),
            with(&|i| {
                i.narrow = Some(NarrowLink {
                    mtu_bytes: 9000,
                    router_v4: "10.0.9.1".parse().unwrap(),
                    router_v6: "fd00::9:1".parse().unwrap(),
                })
            }),
        ),
    ];
    let mut args = std::env::args().skip(1);
    let mut only = None;
    let mut rounds = ROUNDS;
    let mut alone = false;
    // Drawn from the clock unless given: see the rebuilds below.
    let mut seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::from(d.subsec_nanos() % 1_000_000));
    let mut plains: Vec<Duration> = Vec::new();
    while let Some(a) = args.next() {
        let mut value = |what: &str| {
            let v = args.next().unwrap_or_default();
            v.parse::<f64>()
                .ok()
                .filter(|x| *x >= 0.0)
                .unwrap_or_else(|| panic!("{a} wants {what}, not {v:?}"))
        };
        match a.as_str() {
            "--alone" => alone = true,
            "--rounds" => rounds = (value("a count above 0") as usize).max(1),
            "--seed" => seed = value("a whole number") as u64,
            "--plain" => plains.push(Duration::from_micros(
                (value("a delay in milliseconds") * 1e3) as u64,
            )),
            _ => only = Some(a),
        }
    }
    // A word that is a configuration's whole name selects it alone; otherwise every
    // configuration whose name contains it.
    let exact = only
        .as_ref()
        .is_some_and(|w| configs.iter().any(|(name, _, _)| *name == w.as_str()));
    let selected = |name: &str| match &only {
        Some(w) if exact => name == w.as_str(),
        Some(w) => name.contains(w.as_str()),
        // `--alone --plain MS` alone: only those plain links.
        None => !alone || plains.is_empty(),
    };
    let mut specs: Vec<Spec> = configs
        .into_iter()
        .filter(|(name, _, _)| {
            (!alone && (*name == PLAIN || *name == PLAIN_AGAIN)) || selected(name)
        })
        .map(|(name, delay, impair)| Spec {
            name: name.to_string(),
            delay,
            impair,
            gaps: None,
        })
        .collect();
    specs.extend(plains.iter().map(|d| Spec {
        name: format!("plain, {:.1} ms", d.as_secs_f64() * 1e3),
        delay: *d,
        impair: Impairments::default(),
        gaps: None,
    }));
    let pinned = pin();
    let load_before = loadavg();
    // The configurations, then the plain links of equal time in flight that they need, then
    // the plain links polled in the bursty ones' handovers.
    let mut rigs: Vec<Rig> = Vec::new();
    let mut in_flight: Vec<Duration> = Vec::new();
    let mut per_handover: Vec<f64> = Vec::new();
    let mut gaps: Vec<Vec<u64>> = Vec::new();
    for spec in &specs {
        let mut rig = spec.build();
        let (t, g) = rig.warm_up();
        in_flight.push(t);
        per_handover.push((WARMUP / 2) as f64 / (g.len() + 1) as f64);
        gaps.push(g);
        rigs.push(rig);
    }
    let configured = specs.len();
    let is_plain = |s: &Spec| s.impair == Impairments::default() && s.gaps.is_none();
    let mut matched: Vec<Option<usize>> = vec![None; configured];
    let mut burst_twin: Vec<Option<usize>> = vec![None; configured];
    let impaired: Vec<usize> = (0..configured)
        .filter(|&i| !alone && !is_plain(&specs[i]))
        .collect();
    for i in impaired {
        let d = half_ms(in_flight[i]);
        let j = match specs.iter().position(|s| is_plain(s) && s.delay == d) {
            Some(j) => j,
            None => {
                specs.push(Spec {
                    name: format!("plain, {:.1} ms", d.as_secs_f64() * 1e3),
                    delay: d,
                    impair: Impairments::default(),
                    gaps: None,
                });
                specs.len() - 1
            }
        };
        matched[i] = Some(j);
        if per_handover[i] >= BURSTY && !gaps[i].is_empty() {
            // The twin holds as many buffers: a packet waits for its poll half its gap on
            // average, Σg²/2Σg steps of a microsecond, so its delay is that much shorter.
            let g = &gaps[i];
            let wait_us =
                g.iter().map(|g| g * g).sum::<u64>() as f64 / (2 * g.iter().sum::<u64>()) as f64;
            let d = half_ms(in_flight[i].saturating_sub(Duration::from_micros(wait_us as u64)));
            specs.push(Spec {
                name: format!(
                    "plain, {:.1} ms, in the handovers of {}",
                    d.as_secs_f64() * 1e3,
                    specs[i].name
                ),
                delay: d,
                impair: Impairments::default(),
                gaps: Some(g.clone()),
            });
            burst_twin[i] = Some(specs.len() - 1);
        }
    }
    for spec in &specs[rigs.len()..] {
        let mut rig = spec.build();
        let (t, g) = rig.warm_up();
        in_flight.push(t);
        per_handover.push((WARMUP / 2) as f64 / (g.len() + 1) as f64);
        rigs.push(rig);
    }
    let n = rigs.len();
    let mut ns = vec![Vec::with_capacity(rounds); n];
    let mut allocated = vec![0; n];
    let mut turn_order = ChaCha8Rng::seed_from_u64(11 + 1000 * seed);
    for r in 0..rounds {
        if r % ROUNDS_PER_BUILD == 0 {
            // New rigs, built in a new order: where a rig's buffers and link lie in memory (and
            // so which of them share cache sets) changes its cost by some ns a packet; built
            // anew, that becomes spread between builds instead of a bias the rounds all share.
            // The first build too: the rigs above were built in the configurations' order, the
            // first of them on a fresh heap. And the orders come from a seed drawn per run: with
            // the same orders in every run, every run had the same layouts, and the identical
            // plain twin came out a few ns dearer in every run (by as much as 15 ns, and cheaper
            // with other seeds).
            for (a, rig) in allocated.iter_mut().zip(&rigs) {
                rig.check();
                *a += rig.allocated;
            }
            rigs.clear();
            let mut order: Vec<usize> = (0..n).collect();
            order.shuffle(&mut ChaCha8Rng::seed_from_u64(r as u64 + 1000 * seed));
            let mut built: Vec<Option<Rig>> = (0..n).map(|_| None).collect();
            for i in order {
                let mut rig = specs[i].build();
                rig.warm_up();
                built[i] = Some(rig);
            }
            rigs = built.into_iter().map(|r| r.expect("built")).collect();
        }
        // The turns in a new order each round: a rig's turn costs a little more or less after
        // some rigs than after others (what they left in the caches), and a rotation would
        // keep each rig behind the same one in almost every round.
        let mut turns: Vec<usize> = (0..n).collect();
        turns.shuffle(&mut turn_order);
        for i in turns {
            ns[i].push(rigs[i].turn());
        }
    }
    for ((a, rig), spec) in allocated.iter_mut().zip(&rigs).zip(&specs) {
        rig.check();
        *a += rig.allocated;
        // A lab's engine allocates too when its pool runs dry: a cost of the configuration,
        // counted in its time, and said here.
        if *a > 0 {
            println!(
                "{}: {a} reads found the pool empty and allocated",
                spec.name
            );
        }
    }
    let pin_note = match pinned {
        Ok(cpu) => format!("pinned to CPU {cpu}"),
        Err(e) => format!("not pinned ({e})"),
    };
    println!(
        "{rounds} rounds, every link built anew each {ROUNDS_PER_BUILD}; in each round, every link \
         in turn, in a new order each round: {LEAD_IN} packets untimed, then {TIMED} timed (thread CPU time); {pin_note}; seed {seed}; load average {load_before} at the start, {} at the end.",
        loadavg()
    );
    println!(
        "\"added\": the median over the rounds of (this link's ns/packet - the other's, same round), \
         [its 95 % confidence interval], (the interquartile range of single rounds). \
         \"in the handovers of\": a plain link polled only at the gaps between another's polls \
         that handed packets over, so that it hands them over in the same bursts."
    );
    println!();
    println!(
        "| link | time in flight ms | packets per handover | ns/packet (median) | added vs plain 10 ms | plain of equal time in flight | added vs it | added vs a plain link in its handovers |"
    );
    println!("|---|---:|---:|---:|---:|---|---:|---:|");
    let paired =
        |i: usize, j: usize| -> Vec<f64> { ns[i].iter().zip(&ns[j]).map(|(a, b)| a - b).collect() };
    let cell = |s: Spread| {
        format!(
            "{:.0} [{:.0}, {:.0}] ({:.0} to {:.0})",
            s.median, s.ci.0, s.ci.1, s.iqr.0, s.iqr.1
        )
    };
    for i in 0..n {
        let own = spread(ns[i].clone()).median;
        let t = in_flight[i].as_secs_f64() * 1e3;
        let vs_plain = if i == 0 || alone {
            String::new()
        } else {
            cell(spread(paired(i, 0)))
        };
        let (twin, vs_twin) = match matched.get(i).copied().flatten() {
            Some(j) => (specs[j].name.clone(), cell(spread(paired(i, j)))),
            None => (String::new(), String::new()),
        };
        let vs_bursts = match burst_twin.get(i).copied().flatten() {
            Some(j) => cell(spread(paired(i, j))),
            None => String::new(),
        };
        println!(
            "| {} | {t:.1} | {:.1} | {own:.0} | {vs_plain} | {twin} | {vs_twin} | {vs_bursts} |",
            specs[i].name, per_handover[i]
        );
    }
}
