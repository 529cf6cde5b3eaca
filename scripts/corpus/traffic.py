#!/usr/bin/env python3
"""Small traffic programs for the analyzer's capture corpus (scripts/corpus/build).

Plain sockets on the real Linux stack, no latencylab involved. Each mode is one side of one
scenario; the server side listens, accepts the given number of connections and serves each
in a thread, the client side connects and drives the exchange. Modes:

  nagle     request written in two pieces (Nagle holds the second until the peer's ACK),
            a reply once the whole request is in, think time before the next request
  bulk      the server sends as fast as it can for a while, the client reads everything
  slowread  bulk through a small receive buffer (the window limits the sender)
  applimit  the server writes a small block every period (the application limits)
  idle      one short exchange, then the connection sits idle with keep-alives
"""
import argparse
import socket
import threading
import time


def serve(args):
    fam = socket.AF_INET6 if ":" in args.addr else socket.AF_INET
    ls = socket.socket(fam, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    cubic(ls)
    ls.bind((args.addr, args.port))
    ls.listen(16)
    print("listening", flush=True)
    threads = []
    for _ in range(args.conns):
        c, _ = ls.accept()
        t = threading.Thread(target=server_conn, args=(args, c))
        t.start()
        threads.append(t)
    for t in threads:
        t.join()


def cubic(s):
    # CUBIC, Linux's default, rather than whatever the machine runs (root may pick any
    # available algorithm per socket; accepted sockets inherit the listener's).
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, b"cubic")


def recv_exact(s, n):
    got = 0
    while got < n:
        b = s.recv(n - got)
        if not b:
            return False
        got += len(b)
    return True


def server_conn(args, c):
    with c:
        if args.mode == "nagle":
            while recv_exact(c, 2 * args.piece):
                c.sendall(b"r" * args.reply)
        elif args.mode in ("bulk", "slowread"):
            block = b"x" * 65536
            end = time.monotonic() + args.seconds
            try:
                while time.monotonic() < end:
                    c.sendall(block)
            except OSError:
                pass
            c.shutdown(socket.SHUT_WR)
            while c.recv(65536):
                pass
        elif args.mode == "applimit":
            block = b"a" * args.reply
            end = time.monotonic() + args.seconds
            while time.monotonic() < end:
                c.sendall(block)
                time.sleep(args.period_ms / 1000)
            c.shutdown(socket.SHUT_WR)
            while c.recv(65536):
                pass
        elif args.mode == "idle":
            recv_exact(c, args.piece)
            c.sendall(b"r" * args.reply)
            while c.recv(65536):
                pass


def client_conn(args):
    fam = socket.AF_INET6 if ":" in args.addr else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_STREAM)
    cubic(s)
    if args.mode == "slowread":
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, args.rcvbuf)
    if args.mode == "idle":
        s.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, 1)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, 1)
    s.connect((args.addr, args.port))
    with s:
        if args.mode == "nagle":
            for _ in range(args.exchanges):
                s.send(b"h" * args.piece)
                s.send(b"b" * args.piece)
                recv_exact(s, args.reply)
                time.sleep(args.think_ms / 1000)
        elif args.mode in ("bulk", "slowread", "applimit"):
            while s.recv(1 << 20):
                pass
        elif args.mode == "idle":
            s.sendall(b"q" * args.piece)
            recv_exact(s, args.reply)
            time.sleep(args.seconds)
        s.shutdown(socket.SHUT_WR)
        while s.recv(65536):
            pass


def main():
    p = argparse.ArgumentParser()
    p.add_argument("role", choices=["server", "client"])
    p.add_argument("mode", choices=["nagle", "bulk", "slowread", "applimit", "idle"])
    p.add_argument("--addr", required=True)
    p.add_argument("--port", type=int, default=5001)
    p.add_argument("--conns", type=int, default=1)
    p.add_argument("--piece", type=int, default=60)
    p.add_argument("--reply", type=int, default=200)
    p.add_argument("--exchanges", type=int, default=40)
    p.add_argument("--think-ms", type=float, default=20)
    p.add_argument("--seconds", type=float, default=3)
    p.add_argument("--period-ms", type=float, default=100)
    p.add_argument("--rcvbuf", type=int, default=4096)
    args = p.parse_args()
    if args.role == "server":
        serve(args)
    else:
        ts = [threading.Thread(target=client_conn, args=(args,)) for _ in range(args.conns)]
        for t in ts:
            t.start()
            time.sleep(0.05)
        for t in ts:
            t.join()


if __name__ == "__main__":
    main()
