//! The `shell` preset: the two-host lab of `latencylab shell` (and `ipv6-check`), `client` and
//! `server` joined by the link `path`, whose `up` direction is client→server and `down`
//! server→client.
//!
//! The options themselves are declared in [`crate::options`]. The CLI hands in each link
//! option as the setting it names ([`LinkOption`]); options for
//! both directions apply first and per-direction ones over them, whatever their order on the
//! command line.

use std::path::Path;

use crate::setting::{Direction, Files, Setting};
use crate::spec::{
    host_settings, iface_addrs, usage, Family, Host, Interface, LabConfig, LinkSpec, Nat64Spec,
    Side, UsageError,
};

/// One link option as given: `--down-loss 1%` is `{ option: "--down-loss", side: Some(Down),
/// key: "loss", value: "1%" }`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkOption {
    /// The option's name, for messages.
    pub option: String,
    /// One direction, or both.
    pub side: Option<Side>,
    /// A key of [`Setting::parse`].
    pub key: &'static str,
    pub value: String,
}

/// The options of `latencylab shell`, as typed.
#[derive(Clone, Debug, Default)]
pub struct ShellOptions {
    pub link: Vec<LinkOption>,
    pub cc: Option<String>,
    pub ecn: Option<String>,
    pub mtu: Option<u32>,
    /// Both hosts' `tcp_slow_start_after_idle`.
    pub slow_start_after_idle: Option<bool>,
    pub seed: Option<u64>,
    /// How far ahead of its time the engine may deliver a packet (`--precision`).
    pub precision: crate::lifecycle::Precision,
    /// `client` IPv6-only behind DNS64 + NAT64, `server` IPv4-only.
    pub nat64: bool,
    /// With `nat64`: a CLAT (464XLAT) on the client.
    pub clat: bool,
    /// The CLAT's prefix, as typed; unset, it is discovered per RFC 7050.
    pub clat_prefix: Option<String>,
    /// A named network ([`crate::profiles`]): its rates and round trip apply first, and any
    /// link option given overrides them.
    pub profile: Option<String>,
    /// A shell command line run in `server` for the life of the lab (the shell starts it;
    /// it is no part of the lab's specification).
    pub server: Option<String>,
}

impl ShellOptions {
    /// Adds a link option when it was given.
    pub fn link_option(
        &mut self,
        option: &str,
        side: Option<Side>,
        key: &'static str,
        value: Option<impl ToString>,
    ) {
        if let Some(v) = value {
            self.link.push(LinkOption {
                option: option.into(),
                side,
                key,
                value: v.to_string(),
            });
        }
    }
}

/// Builds and validates the two-host lab. Trace files are read through `files`.
pub fn shell_config(o: &ShellOptions, files: &dyn Files) -> Result<LabConfig, UsageError> {
    let mut up = Direction::default();
    let mut down = Direction::default();
    if let Some(name) = &o.profile {
        let p = crate::profiles::find(name).map_err(|e| UsageError(format!("--profile: {e}")))?;
        for (side, key, value) in p.settings() {
            let s = Setting::parse(key, &value, Path::new(""), files)
                .map_err(|e| UsageError(format!("--profile {name}: {e}")))?;
            if side != Some(Side::Down) {
                s.apply(&mut up);
            }
            if side != Some(Side::Up) {
                s.apply(&mut down);
            }
        }
    }
    let both = o.link.iter().filter(|x| x.side.is_none());
    let one = o.link.iter().filter(|x| x.side.is_some());
    let mut seen: Vec<(Option<Side>, &'static str, &str)> = Vec::new();
    for x in both.chain(one) {
        let s = Setting::parse(x.key, &x.value, Path::new(""), files)
            .map_err(|e| UsageError(format!("{}: {e}", x.option)))?;
        if let Some((_, _, other)) = seen
            .iter()
            .find(|(side, field, _)| *side == x.side && *field == s.field())
        {
            return usage(format!(
                "{other} and {} both set the {}: give one of them",
                x.option,
                s.field().replace('_', " ")
            ));
        }
        seen.push((x.side, s.field(), &x.option));
        if x.side != Some(Side::Down) {
            s.apply(&mut up);
        }
        if x.side != Some(Side::Up) {
            s.apply(&mut down);
        }
    }
    let settings = host_settings(
        "--",
        None,
        o.cc.as_deref(),
        o.ecn.as_deref(),
        o.mtu,
        o.slow_start_after_idle,
    )?;
    let mut hosts = Vec::new();
    for (i, name) in ["client", "server"].into_iter().enumerate() {
        let (ipv4, ipv6) = iface_addrs(i + 1);
        let family = match (o.nat64, i) {
            (false, _) => Family::Dual,
            (true, 0) => Family::Ipv6Only,
            (true, _) => Family::Ipv4Only,
        };
        hosts.push(Host {
            name: name.into(),
            settings: settings.clone(),
            family,
            interfaces: vec![Interface {
                name: "eth0".into(),
                ipv4,
                ipv6,
            }],
            aliases: vec![],
        });
    }
    let cfg = LabConfig {
        seed: o.seed.unwrap_or(1),
        duration_s: None,
        hosts,
        routers: vec![],
        links: vec![LinkSpec {
            name: "path".into(),
            a: "client".into(),
            b: "server".into(),
            up,
            down,
        }],
        changes: vec![],
        programs: vec![],
        // At the server's end of the path, as a carrier's translator sits past the access
        // link: the path carries the client's IPv6, and the server meets it as IPv4.
        nat64: o.nat64.then(|| Nat64Spec::at("server")),
        precision: o.precision,
    };
    let mut cfg = cfg;
    if (o.clat || o.clat_prefix.is_some()) && !o.nat64 {
        return usage("--clat needs --nat64 (a CLAT translates for an IPv6-only client)");
    }
    if let Some(n) = &mut cfg.nat64 {
        if o.clat || o.clat_prefix.is_some() {
            n.clat = vec!["client".into()];
        }
        if let Some(p) = &o.clat_prefix {
            n.clat_prefix = Some(
                p.parse()
                    .map_err(|e| UsageError(format!("--clat-prefix: {e} (try 64:ff9b::/96)")))?,
            );
        }
    }
    cfg.validate()?;
    Ok(cfg)
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, Ipv6Addr};

    use link::Capacity;
    use wire::{Duration, Rate};

    use super::*;
    use crate::setting::no_files;
    use crate::spec::{EcnMode, HostSettings};

    fn shell(f: impl FnOnce(&mut ShellOptions)) -> Result<LabConfig, UsageError> {
        let mut o = ShellOptions::default();
        f(&mut o);
        shell_config(&o, &no_files)
    }

    fn opt(o: &mut ShellOptions, option: &str, side: Option<Side>, key: &'static str, v: &str) {
        o.link_option(option, side, key, Some(v));
    }

    #[test]
    fn shell_defaults_are_a_typical_linux_host_on_an_unlimited_path() {
        let c = shell(|_| {}).unwrap();
        assert_eq!(
            c.hosts[0].settings,
            HostSettings {
                cc: "cubic".into(),
                ecn: EcnMode::Passive,
                mtu: 1500,
                slow_start_after_idle: true,
            }
        );
        assert_eq!(c.links[0].up.params.capacity, Capacity::Unlimited);
        assert_eq!(c.hosts[0].interfaces[0].ipv4, Ipv4Addr::new(10, 77, 1, 1));
        assert_eq!(
            c.hosts[1].interfaces[0].ipv6,
            "fd4c:6c61:6200:2::1".parse::<Ipv6Addr>().unwrap()
        );
    }

    #[test]
    fn per_direction_options_win_over_both_way_ones_whatever_their_order() {
        let c = shell(|o| {
            opt(o, "--down", Some(Side::Down), "rate", "8mbit");
            opt(o, "--up", Some(Side::Up), "rate", "1mbit");
            opt(o, "--up-delay", Some(Side::Up), "delay", "30ms");
            opt(o, "--rtt", None, "rtt", "40ms");
            opt(o, "--queue", None, "queue", "fifo limit 50");
            opt(o, "--down-loss", Some(Side::Down), "loss", "1%");
        })
        .unwrap();
        let l = &c.links[0];
        assert_eq!(
            (&l.down.params.capacity, &l.up.params.capacity),
            (
                &Capacity::Rate(Rate::from_mbit(8)),
                &Capacity::Rate(Rate::from_mbit(1))
            )
        );
        assert_eq!(
            (l.down.params.delay, l.up.params.delay),
            (Duration::from_millis(20), Duration::from_millis(30))
        );
        assert_eq!(l.up.queue.to_string(), "fifo limit 50");
        assert_eq!(
            (l.down.params.loss.to_string(), l.up.params.loss.to_string()),
            ("1%".into(), "0%".into())
        );
    }

    #[test]
    fn bad_shell_options_name_the_option_and_the_value() {
        let e = |f: fn(&mut ShellOptions)| shell(f).unwrap_err().0;
        assert_eq!(
            e(|o| opt(o, "--rate", None, "rate", "10mbits")),
            "--rate: cannot read '10mbits' (try 10mbit, 500kbit, 1gbit)"
        );
        assert_eq!(
            e(|o| opt(o, "--rtt", None, "rtt", "40")),
            "--rtt: cannot read '40' (try 20ms, 500us, 1.5s)"
        );
        assert!(e(|o| opt(o, "--queue", None, "queue", "fifo lim 5"))
            .starts_with("--queue: fifo: unknown keyword 'lim'"));
        assert!(e(|o| opt(o, "--loss", None, "loss", "5")).starts_with("--loss: cannot read '5'"));
        assert_eq!(
            e(|o| o.ecn = Some("maybe".into())),
            "--ecn: cannot read 'maybe' (try on, off, passive)"
        );
        assert!(e(|o| o.mtu = Some(500)).starts_with("--mtu: cannot use 500"));
        assert!(e(|o| opt(
            o,
            "--down-trace",
            Some(Side::Down),
            "trace",
            "/nonexistent.trace"
        ))
        .starts_with("--down-trace: cannot read trace file"));
        assert_eq!(
            e(|o| {
                opt(o, "--delay", None, "delay", "10ms");
                opt(o, "--rtt", None, "rtt", "40ms");
            }),
            "--delay and --rtt both set the delay: give one of them"
        );
    }

    #[test]
    fn a_profile_sets_rates_and_rtt_and_explicit_options_win() {
        let c = shell(|o| o.profile = Some("3g".into())).unwrap();
        let l = &c.links[0];
        assert_eq!(
            l.down.params.capacity,
            Capacity::Rate(Rate::from_bits_per_sec(500_000))
        );
        assert_eq!(l.up.params.delay, Duration::from_millis(200));
        let c = shell(|o| {
            o.profile = Some("slow-4g".into());
            opt(o, "--rate", None, "rate", "8mbit");
            opt(o, "--up-delay", Some(Side::Up), "delay", "30ms");
        })
        .unwrap();
        let l = &c.links[0];
        assert_eq!(l.down.params.capacity, Capacity::Rate(Rate::from_mbit(8)));
        assert_eq!(l.up.params.capacity, Capacity::Rate(Rate::from_mbit(8)));
        assert_eq!(
            (l.down.params.delay, l.up.params.delay),
            (Duration::from_millis(75), Duration::from_millis(30))
        );
        let e = shell(|o| o.profile = Some("6g".into())).unwrap_err().0;
        assert!(
            e.starts_with("--profile: unknown profile '6g' (known: 3g, "),
            "{e}"
        );
    }

    #[test]
    fn shell_nat64_makes_an_ipv6_only_client_and_an_ipv4_only_server_behind_a_translator() {
        let c = shell(|o| o.nat64 = true).unwrap();
        assert_eq!(c.hosts[0].family, Family::Ipv6Only);
        assert_eq!(c.hosts[1].family, Family::Ipv4Only);
        let n = c.nat64.as_ref().unwrap();
        assert_eq!(n.at, "server");
        assert_eq!(n.pool4, Ipv4Addr::new(10, 77, 0, 64));
        assert!(shell(|_| {}).unwrap().nat64.is_none());
    }
}
