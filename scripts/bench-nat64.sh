#!/bin/sh
# TCP throughput through the lab with and without --nat64, and through tayga (Debian's
# user-space NAT64 over TUN) between three namespaces joined by veth pairs, side by side in one
# run. Needs root, a release build (cargo build --release -p latencylab) and tayga
# (apt install tayga). Everything it creates is removed on exit.
#
#   sudo scripts/bench-nat64.sh [ROUNDS] [DURATION]
set -eu
B=$(realpath "${LATENCYLAB:-target/release/latencylab}")
ROUNDS=${1:-3}
DUR=${2:-8s}
P=tb$$
WORK=$(mktemp -d)
TAYGA_PID=
cleanup() { cleanup_ >/dev/null 2>&1; }
cleanup_() {
    [ -n "$TAYGA_PID" ] && kill "$TAYGA_PID" 2>/dev/null || true
    for n in c t s; do ip netns pids "$P-$n" 2>/dev/null | xargs -r kill 2>/dev/null || true; done
    for n in c t s; do ip netns del "$P-$n" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

goodput() { # the receiver's total goodput from bulk-client's JSON lines
    grep '"type":"total"' | grep '"role":"receiver"' | sed 's/.*"goodput_mbps":\([0-9.]*\).*/\1/'
}

# tayga: client 2001:db8:1::2 (IPv6 only) — t (tayga) — server 198.51.100.2 (IPv4 only).
# tayga refuses the Well-Known Prefix with non-global IPv4 addresses (RFC 6052 §3.1), which
# documentation addresses are too, so it translates under 2001:db8:64::/96 instead: the prefix
# does not change the work per packet.
for n in c t s; do ip netns add "$P-$n"; ip -n "$P-$n" link set lo up; done
ip link add vc netns "$P-c" type veth peer name vtc netns "$P-t"
ip link add vs netns "$P-s" type veth peer name vts netns "$P-t"
ip -n "$P-c" addr add 2001:db8:1::2/64 dev vc nodad
ip -n "$P-c" link set vc up
ip -n "$P-c" route add 2001:db8:64::/96 via 2001:db8:1::1
ip -n "$P-t" addr add 2001:db8:1::1/64 dev vtc nodad
ip -n "$P-t" addr add 198.51.100.1/24 dev vts
ip -n "$P-t" link set vtc up
ip -n "$P-t" link set vts up
ip -n "$P-s" addr add 198.51.100.2/24 dev vs
ip -n "$P-s" link set vs up
ip -n "$P-s" route add default via 198.51.100.1
ip netns exec "$P-t" sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1
cat > "$WORK/tayga.conf" <<CONF
tun-device nat64
ipv4-addr 203.0.113.254
prefix 2001:db8:64::/96
dynamic-pool 203.0.113.0/24
data-dir $WORK
CONF
ip netns exec "$P-t" tayga -c "$WORK/tayga.conf" --mktun >/dev/null
ip -n "$P-t" link set nat64 up
ip -n "$P-t" route add 203.0.113.0/24 dev nat64
ip -n "$P-t" route add 2001:db8:64::/96 dev nat64
ip netns exec "$P-t" tayga -c "$WORK/tayga.conf" -d >"$WORK/tayga.log" 2>&1 &
TAYGA_PID=$!
ip netns exec "$P-s" "$B" bulk-server -o /dev/null >/dev/null 2>&1 &
sleep 0.5

for r in $(seq "$ROUNDS"); do
    plain=$("$B" shell -q --server "$B bulk-server -o /dev/null" -- "$B" bulk-client server --duration "$DUR" 2>/dev/null | goodput)
    plain6=$("$B" shell -q --server "$B bulk-server -o /dev/null" -- "$B" bulk-client '[fd4c:6c61:6200:2::1]:5201' --duration "$DUR" 2>/dev/null | goodput)
    nat=$("$B" shell --nat64 -q --server "$B bulk-server -o /dev/null" -- "$B" bulk-client server --duration "$DUR" 2>/dev/null | goodput)
    tay=$(ip netns exec "$P-c" "$B" bulk-client '[2001:db8:64::c633:6402]:5201' --duration "$DUR" 2>/dev/null | goodput)
    echo "round $r: lab IPv4 $plain Mbit/s, lab IPv6 $plain6 Mbit/s, lab --nat64 $nat Mbit/s, tayga $tay Mbit/s (load $(cut -d' ' -f1 /proc/loadavg))"
done
