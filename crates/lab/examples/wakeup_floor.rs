//! The floor under the lab's CPU at a paced rate: what one wake-up costs this machine when the
//! loop has nothing else to do. It sleeps with `epoll_pwait2` (nanosecond timeout, timer slack
//! 1 ns, SCHED_FIFO 10 as the lab's loop at 100 Mbit/s) to deadlines spaced like a 100 Mbit/s
//! lab's events, a data packet every 120 µs and its ACK a few µs after, and reports the CPU
//! (user + system, `getrusage`) per wake-up and per forwarded gigabit that the wake-ups alone
//! would cost. It moves no packet: the lab's reads, writes and the hosts' stacks come on top.
//!
//! Usage (as root for SCHED_FIFO; without it the thread stays at normal priority):
//! `cargo run --release -p lab --example wakeup_floor [SECONDS]` (default 5 per variant).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use lab::sys::monotonic_ns;

/// A 1500-byte packet at 100 Mbit/s: 1500 · 8 / 100e6 s.
const DATA_PERIOD_NS: u64 = 120_000;
/// Data packets in a forwarded gigabit of 1500-byte IP packets: 1e9 / (1500 · 8).
const PACKETS_PER_GBIT: f64 = 1e9 / 12_000.0;

/// User plus system CPU nanoseconds of this thread.
fn cpu_ns() -> u64 {
    // SAFETY: rusage is plain old data; getrusage fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: ru is valid for writes.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    (us(ru.ru_utime) + us(ru.ru_stime)) * 1000
}

/// One `epoll_pwait2` on `epfd` with a timeout of `ns` nanoseconds.
fn wait_ns(epfd: i32, ns: u64) {
    let ts = libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    };
    let mut ev = [libc::epoll_event { events: 0, u64: 0 }; 4];
    // SAFETY: ev is valid for 4 events, ts is a live timespec, no signal mask.
    let r = unsafe {
        libc::syscall(
            libc::SYS_epoll_pwait2,
            epfd,
            ev.as_mut_ptr(),
            4,
            &ts as *const libc::timespec,
            std::ptr::null::<libc::sigset_t>(),
            0usize,
        )
    };
    assert!(r >= 0, "epoll_pwait2: {}", std::io::Error::last_os_error());
}

struct Variant {
    name: &'static str,
    /// The ACK's deadline after each data packet's, or none (one wake-up per data packet).
    ack_after_ns: Option<u64>,
    /// Armed this long before each deadline and the rest polled with zero timeouts, as the
    /// lab's learnt margin does (its floor is 2 µs).
    margin_ns: u64,
}

struct Outcome {
    wakeups: u64,
    cpu_ns: u64,
    periods: u64,
    late_p50_ns: u64,
    late_p99_ns: u64,
}

fn run(epfd: i32, v: &Variant, secs: u64) -> Outcome {
    let periods = secs * 1_000_000_000 / DATA_PERIOD_NS;
    let start = monotonic_ns() + 1_000_000;
    let mut late = Vec::with_capacity(2 * periods as usize);
    let mut wakeups = 0;
    let cpu0 = cpu_ns();
    for k in 0..periods {
        let data = start + k * DATA_PERIOD_NS;
        let deadlines = [Some(data), v.ack_after_ns.map(|a| data + a)];
        for due in deadlines.into_iter().flatten() {
            let mut now = monotonic_ns();
            if now + v.margin_ns < due {
                wait_ns(epfd, due - v.margin_ns - now);
                wakeups += 1;
                now = monotonic_ns();
            }
            while now < due {
                wait_ns(epfd, 0);
                now = monotonic_ns();
            }
            late.push(now - due);
        }
    }
    let cpu = cpu_ns() - cpu0;
    late.sort_unstable();
    let pct = |p: f64| late[((late.len() - 1) as f64 * p) as usize];
    Outcome {
        wakeups,
        cpu_ns: cpu,
        periods,
        late_p50_ns: pct(0.5),
        late_p99_ns: pct(0.99),
    }
}

fn main() {
    let secs: u64 = std::env::args()
        .nth(1)
        .map(|s| s.parse().expect("SECONDS: a whole number"))
        .unwrap_or(5);
    // SAFETY: PR_SET_TIMERSLACK takes an integer and changes only this thread.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
    let param = libc::sched_param { sched_priority: 10 };
    // SAFETY: sched_setscheduler reads param for the duration of the call.
    let rt = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } == 0;
    // SAFETY: epoll_create1 returns a new descriptor or -1.
    let epfd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    assert!(epfd >= 0, "epoll_create1");
    // SAFETY: epfd was just created and is owned here.
    let epoll = unsafe { OwnedFd::from_raw_fd(epfd) };

    // What one clock read and one zero-timeout wait cost, for reference.
    let n = 200_000u64;
    let c0 = cpu_ns();
    let mut sink = 0;
    for _ in 0..n {
        sink ^= monotonic_ns();
    }
    let clock_ns = (cpu_ns() - c0) as f64 / n as f64;
    let c0 = cpu_ns();
    for _ in 0..n {
        wait_ns(epoll.as_raw_fd(), 0);
    }
    let poll_ns = (cpu_ns() - c0) as f64 / n as f64;
    std::hint::black_box(sink);

    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load: Vec<&str> = load.split_whitespace().take(3).collect();
    println!(
        "load average {}; {}; {secs} s per variant; a clock read {clock_ns:.0} ns, \
         epoll_pwait2 with a zero timeout {poll_ns:.0} ns of CPU",
        load.join(" "),
        if rt {
            "SCHED_FIFO 10"
        } else {
            "normal priority (not root?)"
        },
    );
    println!();
    println!(
        "| deadlines | margin (µs) | wake-ups per data packet | CPU per wake-up (µs) | \
         CPU per data packet (µs) | s per Gbit | lateness p50 / p99 (µs) |"
    );
    println!("|---|---:|---:|---:|---:|---:|---|");
    let variants = [
        Variant {
            name: "data every 120 µs, ACK 6 µs after",
            ack_after_ns: Some(6_000),
            margin_ns: 0,
        },
        Variant {
            name: "data every 120 µs, ACK 6 µs after",
            ack_after_ns: Some(6_000),
            margin_ns: 2_000,
        },
        Variant {
            name: "data every 120 µs, ACK 60 µs after",
            ack_after_ns: Some(60_000),
            margin_ns: 0,
        },
        Variant {
            name: "data every 120 µs, ACK 60 µs after",
            ack_after_ns: Some(60_000),
            margin_ns: 2_000,
        },
        Variant {
            name: "data every 120 µs only",
            ack_after_ns: None,
            margin_ns: 0,
        },
        Variant {
            name: "data every 120 µs only",
            ack_after_ns: None,
            margin_ns: 2_000,
        },
    ];
    for v in &variants {
        let o = run(epoll.as_raw_fd(), v, secs);
        let per_packet = o.cpu_ns as f64 / o.periods as f64;
        println!(
            "| {} | {} | {:.2} | {:.2} | {:.2} | {:.3} | {:.1} / {:.1} |",
            v.name,
            v.margin_ns / 1000,
            o.wakeups as f64 / o.periods as f64,
            o.cpu_ns as f64 / o.wakeups.max(1) as f64 / 1000.0,
            per_packet / 1000.0,
            per_packet * PACKETS_PER_GBIT / 1e9,
            o.late_p50_ns as f64 / 1000.0,
            o.late_p99_ns as f64 / 1000.0,
        );
    }
}
