//! The ceiling of any forwarder that reads and writes TUN devices on this machine: two network
//! namespaces, each with a TUN device opened as the lab opens its hosts' (`IFF_VNET_HDR`, TSO,
//! checksum offload), joined by a forwarder that does nothing but move each super-packet, with
//! its virtio header unchanged, from one device into the other. No link model, no clock, no
//! capture. The same iperf3 download then runs over a plain veth pair, alternated round by
//! round, so the forwarder's rate is given as a share of the kernel's own path.
//!
//! Three forwarders:
//! - `one`: one thread waits on both devices and writes each packet as soon as it is read, as
//!   the lab's engine does.
//! - `pipeline`: per direction a reader thread and a writer thread joined by a bounded queue,
//!   so that the copy out of one device and the copy into the other run on two cores at once
//!   (the most a second engine thread could overlap).
//! - `napi`: as `one`, with the devices opened `IFF_NAPI`, so that what is written enters the
//!   receiving host through NAPI and GRO.
//!
//! And two to run alone: `pinned` (as `one`, its thread on the last CPU, where the lab pins its
//! engine) and `rps` (as `pinned`, with each device's received packets steered to the other
//! CPUs by Receive Packet Steering).
//!
//! Usage (as root, iperf3 on the PATH):
//! `cargo run --release -p lab --example tun_floor [SECONDS] [ROUNDS] [FORWARDER]` (default 8 s,
//! 2 rounds; FORWARDER: that one alone, no veth pair, to profile it or alternate it with
//! another).

use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::Duration;

use lab::sys::{cpu_seconds, open_tun_with, read_packet_vnet, write_packet_vnet, IFF_NAPI};
use wire::gso::VNET_HDR_LEN;

/// Room for the largest super-packet a host hands over (64 KiB of IP packet).
const PACKET_CAPACITY_BYTES: usize = 65_536;
/// Super-packets in flight between a reader and its writer.
const PIPELINE_DEPTH: usize = 64;

/// Namespaces named after this process, removed on every exit path by `Drop`.
struct Namespaces(Vec<String>);

impl Namespaces {
    fn new(names: &[&str]) -> Self {
        let me = std::process::id();
        let names: Vec<String> = names.iter().map(|n| format!("llfloor-{n}-{me}")).collect();
        for name in &names {
            ip(&["netns", "add", name]);
            // The machine's default congestion control must not decide the comparison.
            ip(&[
                "netns",
                "exec",
                name,
                "sysctl",
                "-qw",
                "net.ipv4.tcp_congestion_control=cubic",
            ]);
            ip(&["-n", name, "link", "set", "lo", "up"]);
        }
        Namespaces(names)
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        for name in &self.0 {
            let _ = Command::new("ip").args(["netns", "del", name]).status();
        }
    }
}

/// Runs `ip ARGS`, which must succeed.
fn ip(args: &[&str]) {
    let status = Command::new("ip")
        .args(args)
        .status()
        .unwrap_or_else(|e| panic!("cannot run ip: {e}"));
    assert!(status.success(), "ip {args:?} failed");
}

/// Opens a TUN device named `tun0` inside namespace `ns` (on a thread that enters it), with
/// `extra_flags` beside the lab's own.
fn tun_in(ns: &str, extra_flags: libc::c_short) -> OwnedFd {
    let path = format!("/run/netns/{ns}");
    thread::scope(|s| {
        s.spawn(|| {
            let file = File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
            nix::sched::setns(file.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
            open_tun_with("tun0", extra_flags).expect("open TUN")
        })
        .join()
        .expect("TUN thread")
    })
}

fn set_blocking(fd: RawFd) {
    // SAFETY: F_GETFL/F_SETFL on a descriptor this process owns.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK);
    }
}

/// What a forwarder moved, and when to stop.
#[derive(Default)]
struct Counters {
    stop: AtomicBool,
    packets: AtomicU64,
    reads: AtomicU64,
}

/// One blocking read: `None` when the device is gone or the run is over.
fn read_one(fd: RawFd, hdr: &mut [u8; VNET_HDR_LEN], data: &mut Vec<u8>) -> Option<()> {
    loop {
        match read_packet_vnet(fd, hdr, data) {
            Ok(Some(_)) => return Some(()),
            Ok(None) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return None,
        }
    }
}

/// `one`: a single thread polls both devices and writes each packet as it is read.
fn forward_one(
    a: RawFd,
    b: RawFd,
    counters: Arc<Counters>,
    pin: Option<usize>,
) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        if let Some(cpu) = pin {
            let mut set = nix::sched::CpuSet::new();
            set.set(cpu).expect("a CPU of this machine");
            nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set).expect("pinning");
        }
        let mut hdr = [0u8; VNET_HDR_LEN];
        let mut data = Vec::with_capacity(PACKET_CAPACITY_BYTES);
        let mut fds = [
            libc::pollfd {
                fd: a,
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: b,
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        while !counters.stop.load(Ordering::Relaxed) {
            // SAFETY: fds is a valid array of two pollfd for the call.
            unsafe { libc::poll(fds.as_mut_ptr(), 2, 100) };
            for (from, to) in [(a, b), (b, a)] {
                counters.reads.fetch_add(1, Ordering::Relaxed);
                while let Ok(Some(_)) = read_packet_vnet(from, &mut hdr, &mut data) {
                    let _ = write_packet_vnet(to, &hdr, &data);
                    counters.packets.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    })
}

/// `pipeline`: a reader and a writer thread for one direction, joined by a bounded queue.
fn forward_pipeline(
    from: RawFd,
    to: RawFd,
    counters: Arc<Counters>,
) -> Vec<thread::JoinHandle<()>> {
    let (full_tx, full_rx) = mpsc::sync_channel::<([u8; VNET_HDR_LEN], Vec<u8>)>(PIPELINE_DEPTH);
    let (empty_tx, empty_rx) = mpsc::channel::<Vec<u8>>();
    for _ in 0..PIPELINE_DEPTH {
        empty_tx
            .send(Vec::with_capacity(PACKET_CAPACITY_BYTES))
            .expect("queue");
    }
    let reader_counters = counters.clone();
    let reader = thread::spawn(move || {
        let mut hdr = [0u8; VNET_HDR_LEN];
        while let Ok(mut data) = empty_rx.recv() {
            if reader_counters.stop.load(Ordering::Relaxed)
                || read_one(from, &mut hdr, &mut data).is_none()
            {
                break;
            }
            reader_counters.reads.fetch_add(1, Ordering::Relaxed);
            if full_tx.send((hdr, data)).is_err() {
                break;
            }
        }
    });
    let writer = thread::spawn(move || {
        while let Ok((hdr, data)) = full_rx.recv() {
            let _ = write_packet_vnet(to, &hdr, &data);
            counters.packets.fetch_add(1, Ordering::Relaxed);
            if empty_tx.send(data).is_err() {
                break;
            }
        }
    });
    vec![reader, writer]
}

/// Runs one iperf3 download of `secs` seconds from `server_ns` (at `server_addr`) to
/// `client_ns`; returns its received rate in Gbit/s.
fn iperf_gbps(server_ns: &str, client_ns: &str, server_addr: &str, secs: u32) -> f64 {
    let mut server = Command::new("ip")
        .args(["netns", "exec", server_ns, "iperf3", "-s", "-1"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("iperf3 server");
    thread::sleep(Duration::from_millis(500));
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            client_ns,
            "iperf3",
            "-c",
            server_addr,
            "-R",
            "-t",
        ])
        .arg(secs.to_string())
        .arg("-J")
        .output()
        .expect("iperf3 client");
    let _ = server.wait();
    let text = String::from_utf8_lossy(&out.stdout);
    // The last "bits_per_second" of the JSON is end.sum_received's.
    let rate = text
        .rsplit("\"bits_per_second\":")
        .next()
        .and_then(|t| t.split([',', '\n', '}']).next())
        .and_then(|t| t.trim().parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no rate in iperf3's output: {text}"));
    rate / 1e9
}

/// One download through a fresh pair of namespaces joined by TUN devices and `mode`'s forwarder:
/// (Gbit/s, forwarder CPU seconds per Gbit, packets per wake-up or read).
fn run_tun(mode: &str, secs: u32) -> (f64, f64, f64) {
    let ns = Namespaces::new(&["a", "b"]);
    let extra = if mode == "napi" { IFF_NAPI } else { 0 };
    let a = tun_in(&ns.0[0], extra);
    let b = tun_in(&ns.0[1], extra);
    for (name, addr) in [(&ns.0[0], "10.233.0.1/24"), (&ns.0[1], "10.233.0.2/24")] {
        ip(&["-n", name, "addr", "add", addr, "dev", "tun0"]);
        ip(&["-n", name, "link", "set", "tun0", "up"]);
    }
    // The lab's engine runs on the last CPU; `rps` steers what is written into each device to
    // the others (Receive Packet Steering), so that the hosts' stacks run beside their
    // programs rather than on the forwarder's CPU.
    let last_cpu = thread::available_parallelism().map_or(1, |n| n.get()) - 1;
    if mode == "rps" {
        let others = (1u64 << last_cpu) - 1;
        for name in &ns.0 {
            ip(&[
                "netns",
                "exec",
                name,
                "sh",
                "-c",
                &format!("echo {others:x} > /sys/class/net/tun0/queues/rx-0/rps_cpus"),
            ]);
        }
    }
    let counters = Arc::new(Counters::default());
    let (ra, rb) = (a.as_raw_fd(), b.as_raw_fd());
    let handles = match mode {
        "one" | "napi" => vec![forward_one(ra, rb, counters.clone(), None)],
        "pinned" | "rps" => vec![forward_one(ra, rb, counters.clone(), Some(last_cpu))],
        _ => {
            set_blocking(ra);
            set_blocking(rb);
            let mut h = forward_pipeline(ra, rb, counters.clone());
            h.extend(forward_pipeline(rb, ra, counters.clone()));
            h
        }
    };
    let cpu_before = cpu_seconds();
    let gbps = iperf_gbps(&ns.0[1], &ns.0[0], "10.233.0.2", secs);
    let cpu = cpu_seconds() - cpu_before;
    counters.stop.store(true, Ordering::Relaxed);
    // Deleting the namespaces removes the devices, which ends the blocking reads.
    drop(ns);
    drop(a);
    drop(b);
    for h in handles {
        let _ = h.join();
    }
    let packets = counters.packets.load(Ordering::Relaxed) as f64;
    let reads = counters.reads.load(Ordering::Relaxed).max(1) as f64;
    (gbps, cpu / (gbps * secs as f64), packets / reads)
}

/// The same download over a plain veth pair between two namespaces.
fn run_veth(secs: u32) -> f64 {
    let ns = Namespaces::new(&["va", "vb"]);
    ip(&[
        "link", "add", "veth0", "netns", &ns.0[0], "type", "veth", "peer", "name", "veth0",
        "netns", &ns.0[1],
    ]);
    for (name, addr) in [(&ns.0[0], "10.234.0.1/24"), (&ns.0[1], "10.234.0.2/24")] {
        ip(&["-n", name, "addr", "add", addr, "dev", "veth0"]);
        ip(&["-n", name, "link", "set", "veth0", "up"]);
    }
    iperf_gbps(&ns.0[1], &ns.0[0], "10.234.0.2", secs)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let secs: u32 = args
        .next()
        .map_or(8, |s| s.parse().expect("SECONDS: a whole number"));
    let rounds: u32 = args
        .next()
        .map_or(2, |s| s.parse().expect("ROUNDS: a whole number"));
    // One forwarder alone (`one`, `pipeline`, `napi`, `pinned`, `rps`), to profile it or to
    // alternate two of them.
    let alone = args.next();
    if alone.is_none() {
        println!("| round | veth pair (Gbit/s) | `one` (Gbit/s) | share | CPU (s per Gbit) | packets per device and wake-up | `pipeline` (Gbit/s) | share | CPU (s per Gbit) | `napi` (Gbit/s) | share | CPU (s per Gbit) |");
        println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    }
    for round in 1..=rounds {
        if let Some(mode) = &alone {
            let (gbps, cpu, _) = run_tun(mode, secs);
            println!("`{mode}`: {gbps:.2} Gbit/s, {cpu:.3} s per Gbit");
            continue;
        }
        let veth = run_veth(secs);
        let (one, one_cpu, one_per) = run_tun("one", secs);
        let (pipe, pipe_cpu, _) = run_tun("pipeline", secs);
        let (napi, napi_cpu, _) = run_tun("napi", secs);
        println!(
            "| {round} | {veth:.2} | {one:.2} | {:.0} % | {one_cpu:.3} | {one_per:.1} | {pipe:.2} | {:.0} % | {pipe_cpu:.3} | {napi:.2} | {:.0} % | {napi_cpu:.3} |",
            100.0 * one / veth,
            100.0 * pipe / veth,
            100.0 * napi / veth,
        );
    }
}
