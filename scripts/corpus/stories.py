#!/usr/bin/env python3
"""Captures of the classic TCP stories, made without latencylab, for the analyzer's tests.

    scripts/corpus/stories.py build OUTDIR

Each run has three network namespaces of its own (a client, a middle and a server, named
after the pid of the process that makes the run), and a few runs go at once. Client and
server share one Ethernet segment, made of veth pairs and a small delay line in the middle
namespace (the kernel here has no netem): frames from the client's link go through two stages
of D/2 each to the server's link and back, and the middle capture point is a veth pair
between the two stages. tcpdump captures at the client (c0), in the middle (x0) and at the
server (s0).

Each case runs small traffic programs (this file's `server` and `client` subcommands) once
over IPv4 and once over IPv6 and writes OUTDIR/CASE-v4/{client,middle,server}.pcap, with
the truth the programs were told in OUTDIR/CASE-v4/truth.json. Cases: healthy (30 ms path),
slow_server, slow_client, long_path (400 ms), dead_peer (the middle drops everything after
the handshake), dead_peer_late (the same, captured from after the handshake), stopped_reader
(the client does not read for 3 s), refused (nothing listens).

Needs root, ip, ethtool, tcpdump. Does nothing when OUTDIR/STAMP matches this file (a cache
for the test run). Every exit path deletes the namespaces and stops the programs.
"""

import hashlib
import heapq
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import time

HERE = os.path.abspath(__file__)
# Each run has its own server port (a closed one for `refused`), so that a late packet of
# one run (a FIN the blackhole held back) never lands in the next run's captures.
BASE_PORT = 20000
V4 = ("10.78.0.1", "10.78.0.2")
V6 = ("fd78::1", "fd78::2")


# ---------------------------------------------------------------- the delay line (middle)

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4


def bridge(delay_ms, blackhole_file):
    """Forwards m0 <-> x0 and x1 <-> m1, each way after delay_ms: x0/x1 is a veth pair, so a
    frame takes m0 -> x0 ~> x1 -> m1 (and back), D/2 + D/2. While blackhole_file exists,
    stage two (x1 <-> m1) drops everything: the server is gone, the middle still sees it."""
    # The delay is the truth the tests compare the analyzer with, so the line runs ahead of
    # ordinary processes (other cases, builds): otherwise each late wakeup on a busy machine
    # adds to every frame's delay. It sleeps in select() between frames.
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
    except OSError:
        pass
    socks = {}
    for dev in ("m0", "x0", "x1", "m1"):
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        s.bind((dev, 0))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        socks[dev] = s
    route = {"m0": "x0", "x0": "m0", "x1": "m1", "m1": "x1"}
    by_fd = {s.fileno(): dev for dev, s in socks.items()}
    delay = delay_ms / 1e3
    queue = []
    n = 0
    while True:
        timeout = max(0.0, queue[0][0] - time.monotonic()) if queue else 1.0
        ready, _, _ = select.select(list(socks.values()), [], [], timeout)
        now = time.monotonic()
        for s in ready:
            dev = by_fd[s.fileno()]
            while True:
                try:
                    frame, addr = s.recvfrom(65536, socket.MSG_DONTWAIT)
                except BlockingIOError:
                    break
                if addr[2] == PACKET_OUTGOING:
                    continue
                out = route[dev]
                if dev in ("x1", "m1") and os.path.exists(blackhole_file):
                    continue
                n += 1
                heapq.heappush(queue, (now + delay, n, out, frame))
        now = time.monotonic()
        while queue and queue[0][0] <= now:
            _, _, out, frame = heapq.heappop(queue)
            socks[out].send(frame)


# ---------------------------------------------------------------- traffic programs

def listener(addr, port):
    fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
    ls = socket.socket(fam, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((addr, port))
    ls.listen(8)
    return ls


def server(addr, port, delay_ms, response_bytes, ready_file):
    """Answers one HTTP/1.0 request per connection after delay_ms, then closes; serves until
    killed."""
    ls = listener(addr, port)
    open(ready_file, "w").close()
    while True:
        c, _ = ls.accept()
        c.settimeout(30)
        req = b""
        try:
            while b"\r\n\r\n" not in req:
                got = c.recv(4096)
                if not got:
                    break
                req += got
            if req:
                time.sleep(delay_ms / 1e3)
                head = b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n" % response_bytes
                c.sendall(head + b"x" * response_bytes)
        except OSError:
            pass
        c.close()


def client(addr, port, think_ms, read_pause_ms, give_up_ms, rcvbuf, mark_file):
    """Connects, waits think_ms, sends a GET, reads the answer until the server closes (after
    pausing read_pause_ms before the first read). With give_up_ms, gives up that long after
    sending and resets the connection. With mark_file, touches it 50 ms after the handshake
    (once the handshake's last ACK is through the delay line) before the request."""
    fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_STREAM)
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    try:
        s.connect((addr, port))
    except ConnectionRefusedError:
        print(json.dumps({"refused": True}))
        return
    if mark_file:
        time.sleep(0.05)
        open(mark_file, "w").close()
    time.sleep(think_ms / 1e3)
    t_send = time.monotonic()
    s.sendall(b"GET /story.html HTTP/1.0\r\nHost: server\r\n\r\n")
    if give_up_ms:
        s.settimeout(give_up_ms / 1e3)
    time.sleep(read_pause_ms / 1e3)
    got = 0
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            got += len(b)
    except socket.timeout:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    waited = time.monotonic() - t_send
    s.close()
    print(json.dumps({"bytes": got, "waited_ms": waited * 1e3}))


# ---------------------------------------------------------------- the build

CASES = {
    # path RTT, server delay and client think time (ms), response bytes; the client's read
    # pause (ms) and receive buffer (bytes), when it gives up (ms), whether the middle drops
    # everything after the handshake, whether nothing listens on the port
    "healthy": dict(rtt=30, server_ms=0, think_ms=0, size=20000),
    "slow_server": dict(rtt=30, server_ms=1000, think_ms=0, size=20000),
    "slow_client": dict(rtt=30, server_ms=0, think_ms=1350, size=20000),
    "long_path": dict(rtt=400, server_ms=0, think_ms=0, size=2000),
    "dead_peer": dict(rtt=30, server_ms=0, think_ms=0, size=2000, give_up_ms=5000,
                      blackhole=True),
    # The same dead peer with the captures started after the handshake (as when tcpdump is
    # started once the trouble shows): no handshake and nothing from the server in them.
    "dead_peer_late": dict(rtt=30, server_ms=0, think_ms=1500, size=2000, give_up_ms=5000,
                           blackhole=True, late_capture=True),
    "stopped_reader": dict(rtt=30, server_ms=0, think_ms=0, size=1_000_000,
                           read_pause_ms=3000, rcvbuf=262144),
    "refused": dict(rtt=30, server_ms=0, think_ms=0, size=0, closed=True),
}


def sh(*args, check=True):
    return subprocess.run(args, check=check, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)


def nsx(ns, *args):
    return ["ip", "netns", "exec", ns, *args]


class Lab:
    def __init__(self, tmp):
        p = "sto%d" % os.getpid()
        self.c, self.m, self.s = p + "-c", p + "-m", p + "-s"
        self.tmp = tmp
        self.procs = []

    def up(self):
        for n in (self.c, self.m, self.s):
            sh("ip", "netns", "add", n)
            sh("ip", "-n", n, "link", "set", "lo", "up")
        sh("ip", "link", "add", "c0", "netns", self.c, "type", "veth", "peer", "name", "m0",
           "netns", self.m)
        sh("ip", "link", "add", "s0", "netns", self.s, "type", "veth", "peer", "name", "m1",
           "netns", self.m)
        sh("ip", "-n", self.m, "link", "add", "x0", "type", "veth", "peer", "name", "x1")
        sh(*nsx(self.m, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1",
                "net.ipv6.conf.default.disable_ipv6=1"))
        for ns, dev in ((self.c, "c0"), (self.s, "s0"), (self.m, "m0"), (self.m, "m1"),
                        (self.m, "x0"), (self.m, "x1")):
            # Segments as they are on the wire (no TSO/GSO super-segments) with their checksums
            # filled in: the delay line forwards frames as it reads them.
            sh(*nsx(ns, "ethtool", "-K", dev, "tso", "off", "gso", "off", "gro", "off",
                "tx", "off", "rx", "off"),
               check=False)
            sh("ip", "-n", ns, "link", "set", dev, "up")
        for ns, dev, i in ((self.c, "c0", 0), (self.s, "s0", 1)):
            sh("ip", "-n", ns, "addr", "add", V4[i] + "/24", "dev", dev)
            sh("ip", "-n", ns, "addr", "add", V6[i] + "/64", "dev", dev, "nodad")
        # Static neighbours: no ARP or ND in the middle of a story.
        mac = {}
        for ns, dev in ((self.c, "c0"), (self.s, "s0")):
            out = sh("ip", "-n", ns, "-j", "link", "show", dev).stdout
            mac[dev] = json.loads(out)[0]["address"]
        for ns, dev, peer, other in ((self.c, "c0", 1, "s0"), (self.s, "s0", 0, "c0")):
            for addr in (V4[peer], V6[peer]):
                sh("ip", "-n", ns, "neigh", "replace", addr, "lladdr", mac[other], "dev", dev,
                   "nud", "permanent")

    def spawn(self, ns, *args, stdout=subprocess.DEVNULL):
        p = subprocess.Popen(nsx(ns, *args), stdout=stdout, stderr=subprocess.DEVNULL)
        self.procs.append(p)
        return p

    def stop(self, p):
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if p in self.procs:
            self.procs.remove(p)

    def down(self):
        for p in list(self.procs):
            self.stop(p)
        for n in (self.c, self.m, self.s):
            sh("ip", "netns", "del", n, check=False)


def wait_for(path, what, timeout=10):
    end = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > end:
            raise RuntimeError("stories: %s did not start" % what)
        time.sleep(0.02)


def run_case(lab, out, name, fam, spec, port):
    d = os.path.join(out, "%s-%s" % (name, fam))
    os.makedirs(d, exist_ok=True)
    tmp = lab.tmp
    for f in os.listdir(tmp):
        os.unlink(os.path.join(tmp, f))
    caddr, saddr = (V4 if fam == "v4" else V6)
    blackhole = os.path.join(tmp, "blackhole")
    br = lab.spawn(lab.m, sys.executable, HERE, "bridge", str(spec["rtt"] / 4), blackhole)
    ready = os.path.join(tmp, "server-ready")
    srv = lab.spawn(lab.s, sys.executable, HERE, "server", saddr, str(port),
                    str(spec["server_ms"]), str(spec["size"]), ready)
    wait_for(ready, "the server")
    dumps = []

    def start_captures():
        for ns, dev, who in ((lab.c, "c0", "client"), (lab.m, "x0", "middle"),
                             (lab.s, "s0", "server")):
            pcap = os.path.join(d, who + ".pcap")
            p = subprocess.Popen(nsx(ns, "tcpdump", "-i", dev, "-s", "200", "--immediate-mode",
                                     "-U", "-w", pcap,
                                     "tcp port %d" % (port + 1 if spec.get("closed") else port)),
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            lab.procs.append(p)
            # tcpdump says "listening on" once it captures.
            line = p.stderr.readline()
            if "listening" not in line:
                raise RuntimeError("stories: tcpdump on %s: %s" % (dev, line.strip()))
            dumps.append(p)

    late = spec.get("late_capture")
    if not late:
        start_captures()
        time.sleep(0.1)
    mark = blackhole if spec.get("blackhole") else ""
    cl = lab.spawn(lab.c, sys.executable, HERE, "client", saddr,
                   str(port + 1 if spec.get("closed") else port), str(spec["think_ms"]),
                   str(spec.get("read_pause_ms", 0)), str(spec.get("give_up_ms", 0)),
                   str(spec.get("rcvbuf", 0)), mark, stdout=subprocess.PIPE)
    if late:
        # After the handshake (the client marks it), before the request (think_ms later).
        wait_for(mark, "the connection")
        t_mark = time.monotonic()
        start_captures()
        if time.monotonic() - t_mark > 0.8 * spec["think_ms"] / 1e3:
            raise RuntimeError("stories: the captures started too late for the request")
    result = json.loads(cl.communicate(timeout=60)[0] or "{}")
    lab.procs.remove(cl)
    time.sleep(spec["rtt"] / 1e3 + 0.2)
    for p in dumps:
        lab.stop(p)
    lab.stop(srv)
    lab.stop(br)
    truth = dict(spec, case=name, family=fam, client=caddr, server=saddr, port=port,
                 result=result)
    with open(os.path.join(d, "truth.json"), "w") as f:
        json.dump(truth, f, indent=1)


# How many cases run at once (STORIES_JOBS overrides it). Each case is a few seconds of mostly
# idle programs (a delay line, three tcpdumps, a server, a client; about 0.4 s of CPU in all),
# so the build takes the cases' own durations: 44 s one after another, the longest case (7 s)
# at best. On the shared 2-core machine at load 15, four at once took 21 s and seven 19 s, and
# the costs the analyzer measured strayed from what the programs were told by at most 2.3 %
# with four against 4.7 % with seven (the programs' sleeps wake late), 10 % failing the tests.
JOBS = 4


def estimate_s(spec):
    """A case's rough duration, to start the longest first."""
    return (spec.get("give_up_ms", 0) + spec.get("read_pause_ms", 0) + spec["server_ms"]
            + spec["think_ms"] + 3 * spec["rtt"]) / 1e3


def build(out):
    with open(HERE, "rb") as f:
        stamp = hashlib.sha256(f.read()).hexdigest()[:16]
    stamp_file = os.path.join(out, "STAMP")
    if os.path.exists(stamp_file) and open(stamp_file).read().strip() == stamp:
        return 0
    if os.geteuid() != 0:
        print("stories: needs root (network namespaces)", file=sys.stderr)
        return 2
    for tool in ("ip", "ethtool", "tcpdump"):
        if subprocess.run(["sh", "-c", "command -v " + tool], stdout=subprocess.DEVNULL
                          ).returncode != 0:
            print("stories: %s is needed" % tool, file=sys.stderr)
            return 2
    tmp = os.path.join(out, ".tmp")
    os.makedirs(tmp, exist_ok=True)
    only = os.environ.get("STORIES_ONLY")
    todo = []
    for i, (name, spec) in enumerate(CASES.items()):
        if only and name not in only.split(","):
            continue
        for j, fam in enumerate(("v4", "v6")):
            todo.append((estimate_s(spec), name, fam, BASE_PORT + 10 * i + 2 * j))
    todo.sort(key=lambda t: -t[0])
    # Each case is a child process with its own lab (namespaces named after its pid), which
    # deletes on every exit path; SIGTERM here is passed on to the children, then waited for.
    running = {}
    failed = []
    old = signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    try:
        while todo or running:
            while todo and len(running) < int(os.environ.get("STORIES_JOBS", JOBS)):
                _, name, fam, port = todo.pop(0)
                what = "%s-%s" % (name, fam)
                with open(os.path.join(tmp, what + ".err"), "w") as err:
                    p = subprocess.Popen([sys.executable, HERE, "case", out, name, fam,
                                          str(port)], stdout=subprocess.DEVNULL, stderr=err)
                running[p.pid] = (p, what)
            pid, status = os.wait()
            if pid not in running:
                continue
            p, what = running.pop(pid)
            p.returncode = os.waitstatus_to_exitcode(status)
            if p.returncode != 0:
                with open(os.path.join(tmp, what + ".err")) as err:
                    failed.append("%s (exit %d): %s" % (what, p.returncode, err.read().strip()))
                todo.clear()
        if failed:
            print("stories: %s" % "\n".join(failed), file=sys.stderr)
            return 1
        if not only:
            with open(stamp_file, "w") as f:
                f.write(stamp + "\n")
    finally:
        for p, _ in running.values():
            p.send_signal(signal.SIGTERM)
        for p, _ in running.values():
            p.wait()
        signal.signal(signal.SIGTERM, old)
    return 0


def one_case(out, name, fam, port):
    """One case in a lab of its own, deleted on every exit path."""
    tmp = os.path.join(out, ".tmp", "%s-%s" % (name, fam))
    os.makedirs(tmp, exist_ok=True)
    lab = Lab(tmp)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    try:
        lab.up()
        run_case(lab, out, name, fam, CASES[name], port)
    finally:
        lab.down()
    return 0


def main(argv):
    if len(argv) >= 3 and argv[1] == "build":
        return build(argv[2])
    if len(argv) == 6 and argv[1] == "case" and argv[3] in CASES:
        return one_case(argv[2], argv[3], argv[4], int(argv[5]))
    if len(argv) == 4 and argv[1] == "bridge":
        bridge(float(argv[2]), argv[3])
        return 0
    if len(argv) == 7 and argv[1] == "server":
        server(argv[2], int(argv[3]), float(argv[4]), int(argv[5]), argv[6])
        return 0
    if len(argv) == 9 and argv[1] == "client":
        client(argv[2], int(argv[3]), float(argv[4]), float(argv[5]), float(argv[6]),
               int(argv[7]), argv[8])
        return 0
    print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
    return 2


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except KeyboardInterrupt:
        sys.exit(0)
