//! A host of the lab: a network namespace with loopback up, one TUN device per interface,
//! its addresses and routes (set over rtnetlink, not with the `ip` binary), and the sysctls
//! that make it a typical Linux host whatever this machine's own settings are.
//!
//! Each namespace is bind-mounted at /run/netns/ll-PID-HOST, so `ip netns exec` can enter a
//! running lab and a later lab can find and remove what a killed one left behind. A lab without
//! root (see [`crate::userns`]) cannot mount there: its namespaces are only held open by the lab.

use std::collections::BTreeMap;
use std::fs;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use anyhow::{anyhow, bail, Context, Result};
use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_ACK, NLM_F_CREATE, NLM_F_EXCL,
    NLM_F_REQUEST,
};
use netlink_packet_route::address::{
    AddressAttribute, AddressFlags, AddressHeaderFlags, AddressMessage,
};
use netlink_packet_route::link::{LinkAttribute, LinkFlags, LinkMessage};
use netlink_packet_route::route::{
    RouteAddress, RouteAttribute, RouteMessage, RouteMetric, RouteProtocol, RouteScope, RouteType,
};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};
use nix::mount::{mount, umount2, MntFlags, MsFlags};
use nix::sched::{setns, unshare, CloneFlags};

use crate::sys;
use crate::userns;
use labnet::spec::Host;

pub const NETNS_DIR: &str = "/run/netns";
pub use labnet::system::ns_name;

/// A host namespace, alive while this value and its bind mount exist.
pub struct HostNs {
    pub host: String,
    /// The namespace's name under /run/netns.
    pub ns_name: String,
    /// An open handle on the namespace, for `setns` when starting programs.
    pub ns_fd: OwnedFd,
    /// One TUN descriptor per interface, in the host's interface order.
    pub tuns: Vec<OwnedFd>,
}

pub fn ns_path(name: &str) -> PathBuf {
    Path::new(NETNS_DIR).join(name)
}

/// The TUN device's transmit ring, where a host's packets wait for the engine to read them (500
/// by default). Here the host's "wire" is the engine, and a packet dropped before it reaches
/// the emulated link is a loss nobody asked for: a server answering 200 clients five times a
/// second overflowed 500 whenever the engine was late by a fraction of a second (its
/// `tx_dropped` counted them; docs/PERFORMANCE.md, "Big labs"). The ring is 8 bytes a packet
/// of kernel memory (32 KB a host).
const TUN_TX_QUEUE_PACKETS: u32 = 4096;

/// Threads that build hosts at once. Building a namespace is mostly waiting in the kernel (for
/// the routing lock and RCU grace periods, from a few to 70 ms a host on a busy machine), not
/// CPU, so a few more threads than cores overlap the waits (docs/PERFORMANCE.md, "Big labs").
const BUILD_THREADS: usize = 16;

/// Creates every host's namespace with its TUN devices, configured, in `hosts` order. Runs on
/// threads of their own because `unshare(CLONE_NEWNET)` moves the calling thread; each thread
/// builds one host after another (each `unshare` makes a new namespace). On an error, the hosts
/// already built are removed and the first error in host order is returned.
pub fn create_hosts(lab_pid: u32, hosts: &[Host]) -> Result<Vec<HostNs>> {
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let threads = hosts.len().clamp(1, BUILD_THREADS);
    let mut built: Vec<(usize, Result<HostNs>)> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    while !failed.load(Ordering::Relaxed) {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(host) = hosts.get(i) else { break };
                        let name = ns_name(lab_pid, &host.name);
                        let r = build_in_new_netns(&name, host).with_context(|| {
                            format!("building host '{}' (namespace {name})", host.name)
                        });
                        failed.fetch_or(r.is_err(), Ordering::Relaxed);
                        mine.push((i, r));
                    }
                    mine
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| match w.join() {
                Ok(mine) => mine,
                Err(_) => vec![(usize::MAX, Err(anyhow!("a thread building hosts panicked")))],
            })
            .collect()
    });
    built.sort_by_key(|b| b.0);
    if built.iter().all(|b| b.1.is_ok()) {
        return Ok(built.into_iter().filter_map(|b| b.1.ok()).collect());
    }
    let mut first_error = None;
    let mut done = Vec::new();
    for (_, r) in built {
        match r {
            Ok(h) => done.push(h),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    remove_hosts(done);
    Err(first_error.expect("an error was seen"))
}

/// Packets each host's kernel dropped at its TUN devices' transmit queues (`tx_dropped`), by
/// host name, for the hosts that dropped any. Read from /proc/net/dev inside each namespace, on
/// threads that enter them.
pub fn tun_tx_drops(hosts: &[HostNs]) -> BTreeMap<String, u64> {
    let threads = hosts.len().clamp(1, BUILD_THREADS);
    let chunk = hosts.len().div_ceil(threads).max(1);
    std::thread::scope(|s| {
        let workers: Vec<_> = hosts
            .chunks(chunk)
            .map(|part| {
                s.spawn(move || {
                    part.iter()
                        .filter_map(|h| {
                            setns(&h.ns_fd, CloneFlags::CLONE_NEWNET).ok()?;
                            let dev = fs::read_to_string("/proc/thread-self/net/dev").ok()?;
                            let n = labnet::system::tx_dropped(&dev);
                            (n > 0).then(|| (h.host.clone(), n))
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap_or_default())
            .collect()
    })
}

/// Removes hosts: [`release_hosts`], then [`unmount_namespaces`].
pub fn remove_hosts(hosts: Vec<HostNs>) {
    unmount_namespaces(&release_hosts(hosts));
}

/// `TUNSETPERSIST`: `_IOW('T', 203, int)` (linux/if_tun.h).
const TUNSETPERSIST: libc::c_ulong = 0x4004_54cb;

/// Closes the hosts' descriptors (their namespaces, their TUN devices) on several threads at
/// once, and returns the names of their namespaces, still mounted under /run/netns.
///
/// Each TUN device is first made persistent. Closing the last descriptor of a device that is not
/// unregisters it there and then, and an unregistration waits under the kernel's routing lock
/// for RCU grace periods and an `rcu_barrier` (10-35 ms a device under load; the 250-host lab
/// spent most of its teardown there). A persistent device outlives its descriptor and goes with
/// its namespace: once nothing holds the namespace, the kernel's namespace cleanup unregisters
/// every device of every namespace freed together in one batch (`default_device_exit_batch`),
/// asynchronously, as it does after `ip netns del`. A TUN device has a link type, so it is
/// deleted there, never moved to the machine's namespace. Should the ioctl fail, the close
/// unregisters the device as before.
pub fn release_hosts(hosts: Vec<HostNs>) -> Vec<String> {
    let names = hosts.iter().map(|h| h.ns_name.clone()).collect();
    on_threads(hosts, |h| {
        for fd in &h.tuns {
            // SAFETY: an ioctl on a descriptor we own, with an integer argument.
            unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETPERSIST, 1 as libc::c_ulong) };
        }
        drop(h);
    });
    names
}

/// Removes the namespaces' bind mounts (each unmount waits for an RCU grace period, so they
/// run on several threads at once); the kernel frees each namespace once nothing holds it.
pub fn unmount_namespaces(names: &[String]) {
    on_threads(names.to_vec(), |name| remove_ns(&name));
}

/// Runs `f` on every item, on up to [`BUILD_THREADS`] threads.
fn on_threads<T: Send>(items: Vec<T>, f: impl Fn(T) + Sync) {
    let threads = items.len().clamp(1, BUILD_THREADS);
    let chunk = items.len().div_ceil(threads).max(1);
    let mut items = items;
    let f = &f;
    std::thread::scope(|s| {
        while !items.is_empty() {
            let rest = items.split_off(items.len().saturating_sub(chunk));
            s.spawn(move || rest.into_iter().for_each(f));
        }
    });
}

/// Makes /run/netns a shared mount point of its own before any namespace is mounted in it, as
/// iproute2 does. Otherwise a later `ip netns add` bind-mounts the directory over itself and
/// hides the namespaces already mounted there, which then can no longer be removed by name.
pub fn prepare_netns_dir() -> Result<()> {
    if userns::rootless() {
        return Ok(());
    }
    fs::create_dir_all(NETNS_DIR).with_context(|| format!("creating {NETNS_DIR}"))?;
    let shared = MsFlags::MS_SHARED | MsFlags::MS_REC;
    if mount(None::<&str>, NETNS_DIR, None::<&str>, shared, None::<&str>).is_ok() {
        return Ok(());
    }
    // EINVAL: not a mount point yet.
    mount(
        Some(NETNS_DIR),
        NETNS_DIR,
        None::<&str>,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        None::<&str>,
    )
    .with_context(|| format!("bind-mounting {NETNS_DIR} on itself"))?;
    mount(None::<&str>, NETNS_DIR, None::<&str>, shared, None::<&str>)
        .with_context(|| format!("making {NETNS_DIR} a shared mount"))
}

fn build_in_new_netns(name: &str, host: &Host) -> Result<HostNs> {
    // Without root, no name under /run/netns: the lab's descriptor holds the namespace, which
    // the kernel frees with the lab.
    if userns::rootless() {
        unshare(CloneFlags::CLONE_NEWNET).context("unshare(CLONE_NEWNET)")?;
        return configure(name, host, None);
    }
    let path = ns_path(name);
    fs::File::create(&path).with_context(|| format!("creating {}", path.display()))?;
    unshare(CloneFlags::CLONE_NEWNET).context("unshare(CLONE_NEWNET)")?;
    // From here on, a failure must undo the mount point.
    let result = configure(name, host, Some(&path));
    if result.is_err() {
        let _ = umount2(&path, MntFlags::MNT_DETACH);
        let _ = fs::remove_file(&path);
    }
    result
}

fn configure(name: &str, host: &Host, path: Option<&Path>) -> Result<HostNs> {
    if let Some(path) = path {
        mount(
            Some("/proc/thread-self/ns/net"),
            path,
            None::<&str>,
            MsFlags::MS_BIND,
            None::<&str>,
        )
        .with_context(|| format!("bind-mounting the namespace at {}", path.display()))?;
    }
    let ns_fd: OwnedFd = fs::File::open("/proc/thread-self/ns/net")
        .context("opening the namespace")?
        .into();

    let gid = userns::rootless().then(|| nix::unistd::getgid().as_raw());
    for (key, value) in labnet::system::host_sysctls(host, gid) {
        sysctl(key, &value)?;
    }

    let mut rtnl = Rtnl::new()?;
    rtnl.link_up(sys::if_index("lo").context("finding lo")?, None)?;
    let mut tuns = Vec::new();
    for plan in labnet::system::iface_plan(host) {
        let fd = sys::open_tun(&plan.name)
            .with_context(|| format!("creating TUN device {}", plan.name))?;
        let idx = sys::if_index(&plan.name)?;
        rtnl.link_up(idx, Some(plan.mtu_bytes))
            .with_context(|| format!("bringing {} up with MTU {}", plan.name, plan.mtu_bytes))?;
        for addr in plan.addresses {
            rtnl.add_address(idx, addr, labnet::system::host_prefix_len(addr))?;
            rtnl.add_default_route(idx, addr.is_ipv6(), plan.route_metric)?;
        }
        if plan.disable_ipv6 {
            sysctl(&format!("net/ipv6/conf/{}/disable_ipv6", plan.name), "1")?;
        }
        tuns.push(fd);
    }
    Ok(HostNs {
        host: host.name.clone(),
        ns_name: name.to_string(),
        ns_fd,
        tuns,
    })
}

/// Gives a host with a CLAT (464XLAT) its private IPv4 side: `ipv4/prefix_len` on its first
/// interface and an IPv4 default route through it, into the lab's engine, where the CLAT
/// translates. The host stays IPv6-only otherwise: its IPv6 address and route are untouched.
pub fn add_clat(
    ns: &HostNs,
    iface: &str,
    ipv4: std::net::Ipv4Addr,
    prefix_len: u8,
    route_mtu_bytes: u32,
) -> Result<()> {
    let fd = ns
        .ns_fd
        .try_clone()
        .context("duplicating the namespace handle")?;
    let iface = iface.to_string();
    std::thread::spawn(move || -> Result<()> {
        nix::sched::setns(&fd, CloneFlags::CLONE_NEWNET).context("setns(CLONE_NEWNET)")?;
        let mut rtnl = Rtnl::new()?;
        let idx = sys::if_index(&iface).with_context(|| format!("finding {iface}"))?;
        rtnl.add_address(idx, IpAddr::V4(ipv4), prefix_len)?;
        rtnl.add_default_route_mtu(idx, false, 100, Some(route_mtu_bytes))
    })
    .join()
    .map_err(|_| anyhow!("the thread configuring the CLAT of '{}' panicked", ns.host))?
    .with_context(|| {
        format!(
            "giving host '{}' its CLAT address {ipv4}/{prefix_len}",
            ns.host
        )
    })
}

/// Writes a sysctl of the calling thread's network namespace.
pub fn sysctl(key: &str, value: &str) -> Result<()> {
    let p = format!("/proc/sys/{key}");
    fs::write(&p, value).with_context(|| format!("writing {value} to {p}"))
}

/// The congestion controls this kernel offers.
pub fn available_cc() -> Vec<String> {
    let list = fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control");
    labnet::system::cc_names(&list.unwrap_or_default())
}

/// The congestion controls a namespace other than the machine's own may default to.
pub fn allowed_cc() -> Vec<String> {
    let list = fs::read_to_string("/proc/sys/net/ipv4/tcp_allowed_congestion_control");
    labnet::system::cc_names(&list.unwrap_or_default())
}

/// A namespace other than the machine's own may only default to a congestion control in the
/// machine-wide `tcp_allowed_congestion_control` list (the kernel answers EPERM otherwise). Adds
/// `cc` to that list if it is missing, which lets lab hosts use it and changes nothing of the
/// machine's own default. Returns true when the list was changed. Call from the initial
/// namespace.
pub fn allow_cc(cc: &str) -> Result<bool> {
    let p = "/proc/sys/net/ipv4/tcp_allowed_congestion_control";
    let allowed = fs::read_to_string(p).with_context(|| format!("reading {p}"))?;
    let Some(list) = labnet::system::allowed_with(&allowed, cc) else {
        return Ok(false);
    };
    fs::write(p, &list).with_context(|| format!("writing '{list}' to {p}"))?;
    Ok(true)
}

/// A blocking rtnetlink socket in the calling thread's namespace, one request at a time.
struct Rtnl {
    socket: Socket,
    seq: u32,
    buf: Vec<u8>,
}

impl Rtnl {
    fn new() -> Result<Rtnl> {
        let mut socket = Socket::new(NETLINK_ROUTE).context("opening a netlink socket")?;
        socket.bind_auto().context("binding the netlink socket")?;
        socket
            .connect(&SocketAddr::new(0, 0))
            .context("connecting the netlink socket")?;
        Ok(Rtnl {
            socket,
            seq: 0,
            buf: vec![0; 8192],
        })
    }

    /// Sends a request and waits for the kernel's acknowledgement.
    fn request(&mut self, msg: RouteNetlinkMessage, flags: u16, what: &str) -> Result<()> {
        self.seq += 1;
        let mut hdr = NetlinkHeader::default();
        hdr.flags = NLM_F_REQUEST | NLM_F_ACK | flags;
        hdr.sequence_number = self.seq;
        let mut nl = NetlinkMessage::new(hdr, NetlinkPayload::from(msg));
        nl.finalize();
        let mut out = vec![0; nl.buffer_len()];
        nl.serialize(&mut out);
        self.socket
            .send(&out, 0)
            .with_context(|| format!("netlink: sending {what}"))?;
        loop {
            let n = self
                .socket
                .recv(&mut &mut self.buf[..], 0)
                .with_context(|| format!("netlink: {what}"))?;
            let mut off = 0;
            while off < n {
                let reply = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&self.buf[off..n])
                    .map_err(|e| anyhow!("netlink: bad reply to {what}: {e}"))?;
                let len = reply.header.length as usize;
                if reply.header.sequence_number == self.seq {
                    if let NetlinkPayload::Error(e) = reply.payload {
                        return match e.code {
                            None => Ok(()),
                            Some(code) => bail!(
                                "netlink: {what}: {}",
                                std::io::Error::from_raw_os_error(-code.get())
                            ),
                        };
                    }
                }
                if len == 0 {
                    break;
                }
                off += len;
            }
        }
    }

    fn link_up(&mut self, index: u32, mtu: Option<u32>) -> Result<()> {
        let mut m = LinkMessage::default();
        m.header.index = index;
        m.header.flags = LinkFlags::Up;
        m.header.change_mask = LinkFlags::Up;
        if let Some(mtu) = mtu {
            m.attributes.push(LinkAttribute::Mtu(mtu));
            m.attributes
                .push(LinkAttribute::TxQueueLen(TUN_TX_QUEUE_PACKETS));
        }
        self.request(RouteNetlinkMessage::SetLink(m), 0, "set link up")
    }

    fn add_address(&mut self, index: u32, addr: IpAddr, prefix_len: u8) -> Result<()> {
        let mut m = AddressMessage::default();
        m.header.family = match addr {
            IpAddr::V4(_) => AddressFamily::Inet,
            IpAddr::V6(_) => AddressFamily::Inet6,
        };
        m.header.prefix_len = prefix_len;
        m.header.index = index;
        m.header.flags = AddressHeaderFlags::Nodad;
        m.attributes.push(AddressAttribute::Local(addr));
        m.attributes.push(AddressAttribute::Address(addr));
        m.attributes
            .push(AddressAttribute::Flags(AddressFlags::Nodad));
        self.request(
            RouteNetlinkMessage::NewAddress(m),
            NLM_F_CREATE | NLM_F_EXCL,
            &format!("add address {addr}"),
        )
    }

    fn add_default_route(&mut self, index: u32, v6: bool, metric: u32) -> Result<()> {
        self.add_default_route_mtu(index, v6, metric, None)
    }

    /// A default route, with its own MTU when `mtu` is given (which also sets the MSS TCP
    /// announces over it).
    fn add_default_route_mtu(
        &mut self,
        index: u32,
        v6: bool,
        metric: u32,
        mtu: Option<u32>,
    ) -> Result<()> {
        let mut m = RouteMessage::default();
        m.header.address_family = if v6 {
            AddressFamily::Inet6
        } else {
            AddressFamily::Inet
        };
        m.header.destination_prefix_length = 0;
        m.header.table = netlink_packet_route::route::RouteHeader::RT_TABLE_MAIN;
        m.header.protocol = RouteProtocol::Static;
        m.header.scope = RouteScope::Link;
        m.header.kind = RouteType::Unicast;
        m.attributes.push(RouteAttribute::Oif(index));
        m.attributes.push(RouteAttribute::Priority(metric));
        if let Some(mtu) = mtu {
            m.attributes
                .push(RouteAttribute::Metrics(vec![RouteMetric::Mtu(mtu)]));
        }
        let dst = if v6 {
            RouteAddress::Inet6(std::net::Ipv6Addr::UNSPECIFIED)
        } else {
            RouteAddress::Inet(std::net::Ipv4Addr::UNSPECIFIED)
        };
        m.attributes.push(RouteAttribute::Destination(dst));
        self.request(
            RouteNetlinkMessage::NewRoute(m),
            NLM_F_CREATE | NLM_F_EXCL,
            "add default route",
        )
    }
}

/// Removes a namespace's bind mount; the kernel frees the namespace (and its TUN devices) once
/// no process and no descriptor holds it.
pub fn remove_ns(name: &str) {
    let p = ns_path(name);
    let _ = umount2(&p, MntFlags::MNT_DETACH);
    let _ = fs::remove_file(&p);
}
