//! The operating system's side of a lab as plain data: the names the shell gives namespaces
//! and runtime directories (and finds a killed lab's leftovers by), the sysctls that make a
//! host a typical Linux host, the checks made before anything is created (user namespaces,
//! congestion controls) with the lines that explain a refusal, and the readings of `/proc`
//! the shell takes (transmit drops, listening sockets). The shell (`lab`) makes the calls and
//! reads the files; what they mean is decided here.

use std::net::IpAddr;

use crate::spec::{Host, LabConfig};

/// A lab's namespace names start with this, then the lab's process id and the host's name.
pub const NS_PREFIX: &str = "ll-";

/// The name under /run/netns of host `host`'s namespace in the lab of process `lab_pid`.
pub fn ns_name(lab_pid: u32, host: &str) -> String {
    format!("{NS_PREFIX}{lab_pid}-{host}")
}

/// The lab process that made the namespace called `name`, if the name is a lab's.
pub fn lab_pid_of_ns(name: &str) -> Option<u32> {
    name.strip_prefix(NS_PREFIX)?
        .split('-')
        .next()?
        .parse()
        .ok()
}

/// The prefix of a rootless lab's runtime directory (`latencylab-UID-PID`) for user `uid`.
pub fn rootless_runtime_prefix(uid: u32) -> String {
    format!("latencylab-{uid}-")
}

/// The lab process whose runtime directory is called `name`, given the directories' prefix
/// (empty under root, where they are called by the process id alone).
pub fn lab_pid_of_runtime_dir(name: &str, prefix: &str) -> Option<u32> {
    name.strip_prefix(prefix)?.parse().ok()
}

/// The sysctls (key under /proc/sys, value) of a new host namespace, written before any device
/// exists so that its devices take them: no IPv6 link-local address (so no router solicitations
/// or MLD reports in the captures) and no duplicate address detection delay; the host's TCP
/// settings; TCP Fast Open (RFC 7413) allowed to clients and servers (bits 1 and 2: a program
/// still opts in per socket, and a new namespace's 1 would refuse data in a server's SYNs).
/// `rootless_gid`: without root, `ping` falls back to ICMP datagram sockets, which a new
/// namespace refuses to every group ("1 0"), so the one group mapped is allowed them.
pub fn host_sysctls(host: &Host, rootless_gid: Option<u32>) -> Vec<(&'static str, String)> {
    let s = &host.settings;
    let mut v = vec![
        ("net/ipv6/conf/default/addr_gen_mode", "1".to_string()),
        ("net/ipv6/conf/default/accept_dad", "0".to_string()),
        ("net/ipv6/conf/all/accept_dad", "0".to_string()),
        ("net/ipv4/tcp_congestion_control", s.cc.clone()),
        ("net/ipv4/tcp_ecn", s.ecn.sysctl_value().to_string()),
        (
            "net/ipv4/tcp_slow_start_after_idle",
            u8::from(s.slow_start_after_idle).to_string(),
        ),
        ("net/ipv4/tcp_fastopen", "3".to_string()),
    ];
    if let Some(gid) = rootless_gid {
        v.push(("net/ipv4/ping_group_range", format!("{gid} {gid}")));
    }
    v
}

/// How one interface of a host is set up once its TUN device exists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IfacePlan {
    pub name: String,
    pub mtu_bytes: u32,
    /// Its addresses, each a host route (/32, /128), and for each a default route of its
    /// family through the interface: all traffic goes into the lab's engine, which routes only
    /// the lab's own addresses and drops the rest.
    pub addresses: Vec<IpAddr>,
    /// The default routes' metric: the first interface is preferred.
    pub route_metric: u32,
    /// IPv6 off on the interface (an IPv4-only host; loopback keeps `::1`, so programs that
    /// listen on `::` still work, reached over IPv4).
    pub disable_ipv6: bool,
}

/// The address plan of a host's interfaces, in its interface order. An IPv6-only host gets no
/// IPv4 address and no IPv4 route, so an AF_INET connect() fails at once with ENETUNREACH, as
/// on a carrier's IPv6-only network (Linux has no switch to turn IPv4 off on an interface).
pub fn iface_plan(host: &Host) -> Vec<IfacePlan> {
    host.interfaces
        .iter()
        .enumerate()
        .map(|(k, i)| {
            let mut addresses = Vec::new();
            if host.has_ipv4() {
                addresses.push(IpAddr::V4(i.ipv4));
            }
            if host.has_ipv6() {
                addresses.push(IpAddr::V6(i.ipv6));
            }
            IfacePlan {
                name: i.name.clone(),
                mtu_bytes: host.settings.mtu,
                addresses,
                route_metric: 100 * (k as u32 + 1),
                disable_ipv6: !host.has_ipv6(),
            }
        })
        .collect()
}

/// The prefix length of a host route to `addr`.
pub fn host_prefix_len(addr: IpAddr) -> u8 {
    if addr.is_ipv4() {
        32
    } else {
        128
    }
}

/// How a refusal line ends: the other way to run a lab.
pub const OR_SUDO: &str = "or run latencylab with sudo";

/// The system setting that forbids unprivileged user namespaces, when one does, as the line to
/// print: (Debian's and Ubuntu's sysctl, the per-user limit, Ubuntu's AppArmor restriction).
pub fn forbidding_setting(
    unprivileged_userns_clone: Option<&str>,
    max_user_namespaces: Option<&str>,
    apparmor_restrict: Option<&str>,
) -> Option<String> {
    if unprivileged_userns_clone == Some("0") {
        return Some(format!(
            "unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone = 0): \
             allow them with `sudo sysctl -w kernel.unprivileged_userns_clone=1`, {OR_SUDO}"
        ));
    }
    if max_user_namespaces == Some("0") {
        return Some(format!(
            "user namespaces are disabled (user.max_user_namespaces = 0): allow them with \
             `sudo sysctl -w user.max_user_namespaces=10000`, {OR_SUDO}"
        ));
    }
    if apparmor_restrict == Some("1") {
        return Some(format!(
            "AppArmor restricts unprivileged user namespaces \
             (kernel.apparmor_restrict_unprivileged_userns = 1): allow them with `sudo sysctl -w \
             kernel.apparmor_restrict_unprivileged_userns=0` or an AppArmor profile for \
             latencylab with `userns,`, {OR_SUDO}"
        ));
    }
    None
}

/// The line for a `/dev/net/tun` the user may not open: `missing` when the open said so,
/// else its permission bits (`mode`, if they could be read) and the open's error.
pub fn tun_refusal(missing: bool, mode: Option<u32>, error: &str) -> String {
    if missing {
        return format!(
            "/dev/net/tun is missing: load the tun module (`sudo modprobe tun`), {OR_SUDO}"
        );
    }
    let mode = mode.map_or("missing".into(), |m| format!("mode {:04o}", m & 0o7777));
    format!(
        "/dev/net/tun is not open to you ({mode}, {error}): open it with `sudo chmod 0666 \
         /dev/net/tun` (the default on Debian, Ubuntu and Fedora; a TUN device still needs \
         CAP_NET_ADMIN in its namespace), {OR_SUDO}"
    )
}

/// The line for a congestion control that a lab without root cannot give its hosts: only the
/// machine's root can load a module or add to the list non-initial namespaces may use.
pub fn cc_line(cc: &str, host: &str, available: &[String], allowed: &[String]) -> Option<String> {
    if !available.iter().any(|a| a == cc) {
        return Some(format!(
            "--cc: '{cc}' (host {host}) is not loaded in this kernel (available: {}): load it \
             with `sudo modprobe tcp_{cc}`, {OR_SUDO}",
            available.join(", ")
        ));
    }
    if !allowed.iter().any(|a| a == cc) {
        return Some(format!(
            "--cc: '{cc}' (host {host}) is not in net.ipv4.tcp_allowed_congestion_control ({}): \
             allow it with `sudo sysctl -w net.ipv4.tcp_allowed_congestion_control='{} {cc}'`, \
             {OR_SUDO}",
            allowed.join(" "),
            allowed.join(" ")
        ));
    }
    None
}

/// The first host whose congestion control this kernel cannot give it, as the line to print:
/// `available` and `allowed` are the kernel's two lists (an empty `available` could not be
/// read, and checks nothing). Under root a missing name in `allowed` is added by the shell;
/// without root (`rootless`) it cannot be.
pub fn cc_refusal(
    cfg: &LabConfig,
    available: &[String],
    allowed: &[String],
    rootless: bool,
) -> Option<String> {
    if rootless {
        if let Some(line) = cfg
            .hosts
            .iter()
            .find_map(|h| cc_line(&h.settings.cc, &h.name, available, allowed))
        {
            return Some(line);
        }
    }
    let h = cfg
        .hosts
        .iter()
        .find(|h| !available.is_empty() && !available.contains(&h.settings.cc))?;
    Some(format!(
        "--cc: '{}' (host {}) is not available in this kernel (available: {})",
        h.settings.cc,
        h.name,
        available.join(", ")
    ))
}

/// The names in one of the kernel's congestion-control lists (`tcp_available_congestion_control`,
/// `tcp_allowed_congestion_control`).
pub fn cc_names(list: &str) -> Vec<String> {
    list.split_whitespace().map(String::from).collect()
}

/// The machine's `tcp_allowed_congestion_control` with `cc` added, to write back, or `None`
/// when `cc` is in it already.
pub fn allowed_with(allowed: &str, cc: &str) -> Option<String> {
    let missing = !allowed.split_whitespace().any(|a| a == cc);
    missing.then(|| format!("{} {cc}", allowed.trim()))
}

/// Why a lab cannot start here whatever its specification: without root or a user namespace
/// of its own (`privileged`), or without the TUN device.
pub fn privilege_refusal(privileged: bool, tun_exists: bool) -> Option<String> {
    if !privileged {
        return Some("latencylab needs root or a user namespace of its own to create network namespaces and TUN devices (call lab::userns::enter first, or try: sudo latencylab ...)".into());
    }
    (!tun_exists).then(|| "/dev/net/tun is missing (load the tun module: modprobe tun)".into())
}

/// The soft limit on open descriptors to set for a lab that needs `need` (`None`: the current
/// `soft` is enough), or why it cannot be had: the hard limit is below the need.
pub fn fd_soft_limit(soft: u64, hard: u64, need: u64) -> Result<Option<u64>, String> {
    if soft >= need {
        return Ok(None);
    }
    if hard < need {
        return Err(format!(
            "this lab needs about {need} open files and the hard limit is {hard} (raise it: ulimit -Hn {need})"
        ));
    }
    Ok(Some(need))
}

/// The congestion controls the lab's hosts use, each once.
pub fn congestion_controls(cfg: &LabConfig) -> impl Iterator<Item = &str> {
    let ccs: std::collections::BTreeSet<&str> =
        cfg.hosts.iter().map(|h| h.settings.cc.as_str()).collect();
    ccs.into_iter()
}

/// The descriptors a lab holds open: a namespace and a TUN device per host interface, and with
/// captures a pcap and two link logs more, plus some for the loop itself.
pub fn open_files_needed(cfg: &LabConfig, capturing: bool) -> u64 {
    let per_iface = if capturing { 5 } else { 2 };
    let ifaces: usize = cfg.hosts.iter().map(|h| h.interfaces.len()).sum();
    (per_iface * ifaces + 64) as u64
}

/// The sum of the transmit `drop` column of /proc/net/dev over every device but loopback.
pub fn tx_dropped(dev: &str) -> u64 {
    dev.lines()
        .skip(2)
        .filter_map(|l| l.split_once(':'))
        .filter(|(name, _)| name.trim() != "lo")
        // Receive: bytes packets errs drop fifo frame compressed multicast; transmit: bytes
        // packets errs drop ...
        .filter_map(|(_, v)| v.split_whitespace().nth(11)?.parse::<u64>().ok())
        .sum()
}

/// Whether a socket table of /proc/net (`tcp`, `tcp6`, `udp`, `udp6`) has a listening TCP
/// socket (state 0A, `TCP_LISTEN`) or, with `tcp` false, any bound UDP socket.
pub fn has_listener(table: &str, tcp: bool) -> bool {
    table.lines().skip(1).any(|l| {
        let state = l.split_whitespace().nth(3).unwrap_or("");
        !tcp || state == "0A"
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::setting::no_files;
    use crate::shell::{shell_config, ShellOptions};

    #[test]
    fn a_congestion_control_is_added_to_the_allowed_list_only_when_missing() {
        assert_eq!(cc_names("reno cubic bbr\n"), ["reno", "cubic", "bbr"]);
        assert_eq!(
            allowed_with("reno bbr\n", "cubic").as_deref(),
            Some("reno bbr cubic")
        );
        assert_eq!(allowed_with("reno cubic\n", "cubic"), None);
        // A name that only begins like one in the list is another name.
        assert_eq!(allowed_with("bbr2", "bbr").as_deref(), Some("bbr2 bbr"));
    }

    #[test]
    fn a_lab_without_privileges_or_a_tun_device_is_refused_with_what_to_do() {
        assert!(privilege_refusal(false, true)
            .unwrap()
            .contains("sudo latencylab"));
        assert!(privilege_refusal(true, false)
            .unwrap()
            .contains("modprobe tun"));
        assert_eq!(privilege_refusal(true, true), None);
    }

    #[test]
    fn the_descriptor_limit_is_raised_to_the_need_within_the_hard_limit() {
        assert_eq!(fd_soft_limit(1024, 4096, 500), Ok(None));
        assert_eq!(fd_soft_limit(1024, 4096, 2000), Ok(Some(2000)));
        let e = fd_soft_limit(1024, 1500, 2000).unwrap_err();
        assert!(
            e.contains("about 2000 open files") && e.contains("ulimit -Hn 2000"),
            "{e}"
        );
    }

    fn lab(cc: &str) -> LabConfig {
        let o = ShellOptions {
            cc: Some(cc.into()),
            ..ShellOptions::default()
        };
        shell_config(&o, &no_files).unwrap()
    }

    fn v(s: &str) -> Vec<String> {
        s.split(' ').map(String::from).collect()
    }

    #[test]
    fn namespace_and_runtime_names_give_back_their_lab_process() {
        assert_eq!(ns_name(4242, "client"), "ll-4242-client");
        assert_eq!(lab_pid_of_ns(&ns_name(4242, "a-b")), Some(4242));
        assert_eq!(lab_pid_of_ns("ll-x-client"), None);
        assert_eq!(lab_pid_of_ns("other-4242-client"), None);
        let p = rootless_runtime_prefix(1000);
        assert_eq!(lab_pid_of_runtime_dir(&format!("{p}77"), &p), Some(77));
        assert_eq!(lab_pid_of_runtime_dir("latencylab-1001-77", &p), None);
        assert_eq!(lab_pid_of_runtime_dir("77", ""), Some(77));
    }

    #[test]
    fn a_host_gets_its_tcp_settings_and_ping_without_root_its_group() {
        let cfg = lab("reno");
        let h = &cfg.hosts[0];
        let s = host_sysctls(h, None);
        let get = |s: &[(&str, String)], k: &str| s.iter().find(|x| x.0 == k).map(|x| x.1.clone());
        assert_eq!(get(&s, "net/ipv4/tcp_congestion_control").unwrap(), "reno");
        assert_eq!(get(&s, "net/ipv4/tcp_fastopen").unwrap(), "3");
        assert_eq!(get(&s, "net/ipv4/tcp_slow_start_after_idle").unwrap(), "1");
        assert_eq!(get(&s, "net/ipv4/ping_group_range"), None);
        let s = host_sysctls(h, Some(1000));
        assert_eq!(get(&s, "net/ipv4/ping_group_range").unwrap(), "1000 1000");
        assert_eq!(
            s[0].0, "net/ipv6/conf/default/addr_gen_mode",
            "before devices"
        );
    }

    #[test]
    fn interfaces_get_their_families_addresses_and_the_first_the_best_metric() {
        let cfg = lab("cubic");
        let p = iface_plan(&cfg.hosts[0]);
        assert_eq!(p.len(), 1);
        let i = &cfg.hosts[0].interfaces[0];
        assert_eq!(p[0].addresses, vec![IpAddr::V4(i.ipv4), IpAddr::V6(i.ipv6)]);
        assert_eq!((p[0].route_metric, p[0].disable_ipv6), (100, false));
        assert_eq!(p[0].mtu_bytes, cfg.hosts[0].settings.mtu);
        let o = ShellOptions {
            nat64: true,
            ..ShellOptions::default()
        };
        let nat = shell_config(&o, &no_files).unwrap();
        for h in &nat.hosts {
            let p = iface_plan(h);
            let v4 = p[0].addresses.iter().filter(|a| a.is_ipv4()).count();
            let v6 = p[0].addresses.len() - v4;
            assert_eq!((v4 > 0, v6 > 0), (h.has_ipv4(), h.has_ipv6()), "{}", h.name);
            assert_eq!(p[0].disable_ipv6, !h.has_ipv6());
        }
        assert_eq!(host_prefix_len(p[0].addresses[0]), 32);
        assert_eq!(host_prefix_len(p[0].addresses[1]), 128);
    }

    #[test]
    fn each_forbidding_setting_is_named_with_how_to_allow_it() {
        let l = forbidding_setting(Some("0"), Some("100"), None).unwrap();
        assert!(l.contains("kernel.unprivileged_userns_clone = 0"), "{l}");
        assert!(
            l.contains("sysctl -w kernel.unprivileged_userns_clone=1"),
            "{l}"
        );
        let l = forbidding_setting(None, Some("0"), None).unwrap();
        assert!(l.contains("user.max_user_namespaces = 0"), "{l}");
        let l = forbidding_setting(Some("1"), Some("100"), Some("1")).unwrap();
        assert!(
            l.contains("kernel.apparmor_restrict_unprivileged_userns = 1"),
            "{l}"
        );
        for l in [
            forbidding_setting(Some("0"), None, None).unwrap(),
            forbidding_setting(None, None, Some("1")).unwrap(),
        ] {
            assert!(l.ends_with("or run latencylab with sudo"), "{l}");
            assert!(!l.contains('\n'), "one line: {l}");
        }
        assert_eq!(
            forbidding_setting(Some("1"), Some("96364"), Some("0")),
            None
        );
        assert_eq!(forbidding_setting(None, None, None), None);
    }

    #[test]
    fn a_tun_device_missing_or_closed_to_the_user_says_how_to_open_it() {
        let l = tun_refusal(true, None, "no such file");
        assert!(l.contains("sudo modprobe tun"), "{l}");
        let l = tun_refusal(false, Some(0o20600), "permission denied");
        assert!(l.contains("(mode 0600, permission denied)"), "{l}");
        assert!(l.contains("sudo chmod 0666 /dev/net/tun"), "{l}");
        assert!(l.ends_with(OR_SUDO), "{l}");
    }

    #[test]
    fn a_congestion_control_not_loaded_or_not_allowed_is_named() {
        let l = cc_line("vegas", "client", &v("reno cubic"), &v("reno cubic")).unwrap();
        assert!(l.contains("'vegas' (host client) is not loaded"), "{l}");
        assert!(l.contains("sudo modprobe tcp_vegas"), "{l}");
        let l = cc_line("bbr", "server", &v("reno cubic bbr"), &v("reno cubic")).unwrap();
        assert!(
            l.contains("tcp_allowed_congestion_control='reno cubic bbr'"),
            "{l}"
        );
        assert_eq!(
            cc_line("cubic", "client", &v("reno cubic"), &v("cubic")),
            None
        );
    }

    #[test]
    fn a_missing_congestion_control_is_refused_and_one_not_allowed_only_without_root() {
        let cfg = lab("bbr");
        let avail = v("reno cubic bbr");
        let allowed = v("reno cubic");
        assert_eq!(cc_refusal(&cfg, &avail, &allowed, false), None);
        let l = cc_refusal(&cfg, &avail, &allowed, true).unwrap();
        assert!(l.contains("tcp_allowed_congestion_control"), "{l}");
        let l = cc_refusal(&cfg, &v("reno cubic"), &allowed, false).unwrap();
        assert!(l.contains("'bbr' (host client) is not available"), "{l}");
        assert_eq!(cc_refusal(&cfg, &[], &allowed, false), None, "unread");
    }

    #[test]
    fn each_congestion_control_is_named_once() {
        let mut cfg = lab("reno");
        let mut third = cfg.hosts[0].clone();
        third.name = "third".into();
        cfg.hosts.push(third);
        cfg.hosts[1].settings.cc = "bbr".into();
        let ccs: Vec<&str> = congestion_controls(&cfg).collect();
        assert_eq!(ccs, vec!["bbr", "reno"]);
    }

    #[test]
    fn a_lab_needs_more_descriptors_with_captures() {
        let cfg = lab("cubic");
        assert_eq!(open_files_needed(&cfg, false), 2 * 2 + 64);
        assert_eq!(open_files_needed(&cfg, true), 5 * 2 + 64);
    }

    #[test]
    fn tx_drops_are_summed_over_every_device_but_loopback() {
        let dev = "Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:     100       2    0    0    0     0          0         0      100       2    0    7    0     0       0          0
  eth0:  390728    3757    0    0    0     0          0         0   379184    3646    0  111    0     0       0          0
rmnet0:       0       0    0    0    0     0          0         0        0       0    0    4    0     0       0          0
";
        assert_eq!(tx_dropped(dev), 115);
    }

    #[test]
    fn a_listening_tcp_socket_or_any_bound_udp_socket_counts() {
        let head = "  sl  local_address rem_address   st tx_queue rx_queue\n";
        let listen = format!("{head}   0: 00000000:0050 00000000:0000 0A 00000000:00000000\n");
        let established = format!("{head}   0: 0100007F:0050 0100007F:9C40 01 00000000:00000000\n");
        assert!(has_listener(&listen, true));
        assert!(!has_listener(&established, true));
        assert!(has_listener(&established, false), "udp: any socket");
        assert!(!has_listener(head, false));
    }
}
