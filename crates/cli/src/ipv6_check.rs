//! `latencylab ipv6-check`: runs COMMAND as the IPv6-only client of a `--nat64` lab and says
//! what broke. This module gathers the evidence (strace of COMMAND, the client's capture, the
//! DNS64's query log, the lab's counters, whether `--server` listened first); the rules that
//! turn it into findings are the pure crate `ipv6check`.

use std::collections::BTreeMap;
use std::fs;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use ipv6check::{analyze, parse_strace, passed, render, Evidence, Flows};
use lab::config::LabConfig;
use lab::RunOptions;
use labnet::run_dir::RunDir;
use labnet::shell::shell_config;

use crate::evidence::EvidenceDir;
use crate::shell::{shell_options, ShellArgs};

/// Run COMMAND on an IPv6-only network (DNS64 + NAT64 to an IPv4-only server) and report what
/// broke: IPv4 literals, AF_INET-only code, A-only lookups, IPv4 preflight checks, connections
/// that never completed.
#[derive(Args, Debug)]
#[command(
    after_help = "Example:\n  latencylab ipv6-check --server 'latencylab probe-server' -- ./my-app server\n\nThe report goes to stderr, after COMMAND's own output; COMMAND's stdout is its own.\nExit status: 0 when nothing broke, 1 when something did (a finding, or COMMAND failed), 2 for a bad option.\nIPv4 literals, AF_INET sockets and IPv4 preflight checks are seen with strace (install it: apt install strace).\nWithout -o the evidence (strace.txt, captures, summary.json) is removed at the end; -o DIR keeps it."
)]
pub struct CheckArgs {
    #[command(flatten)]
    lab: ShellArgs,
}

/// `strace`'s path, if it is installed.
fn find_strace() -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join("strace"))
        .find(|p| p.is_file())
}

/// The line for a COMMAND whose program does not exist: a path with nothing there, or a name
/// found in no directory of `path_var` (the client runs with this `PATH`). Checked before the
/// lab is built: a check of a program that cannot start would only report that the cause of
/// its failure was not seen.
fn missing_program(program: &str, path_var: &std::ffi::OsStr) -> Option<String> {
    let exists = if program.contains('/') {
        Path::new(program).exists()
    } else {
        std::env::split_paths(path_var).any(|d| d.join(program).is_file())
    };
    (!exists).then(|| {
        if program.contains('/') {
            format!("ipv6-check: the program '{program}' does not exist (COMMAND is a program and its arguments)")
        } else {
            format!("ipv6-check: the program '{program}' does not exist: it is in no directory of PATH (COMMAND is a program and its arguments)")
        }
    })
}

/// The client's flows, from its capture.
fn flows(pcap: &Path) -> Result<Flows> {
    let f = fs::File::open(pcap).with_context(|| format!("reading {}", pcap.display()))?;
    let mut flows = Flows::default();
    analyze::capture::for_each_ip_packet(f, |_, ip| flows.packet(ip))
        .with_context(|| format!("reading {}", pcap.display()))?;
    Ok(flows)
}

fn names_of_v4(cfg: &LabConfig) -> BTreeMap<Ipv4Addr, Vec<String>> {
    let mut m: BTreeMap<Ipv4Addr, Vec<String>> = BTreeMap::new();
    for h in cfg.hosts.iter().filter(|h| h.has_ipv4()) {
        for (k, i) in h.interfaces.iter().enumerate() {
            let e = m.entry(i.ipv4).or_default();
            if k == 0 {
                e.push(h.name.clone());
            }
            e.push(format!("{}-{}", h.name, i.name));
        }
    }
    m
}

pub fn run(a: CheckArgs) -> Result<ExitCode> {
    let mut opts = shell_options(&a.lab)?;
    opts.nat64 = true;
    let cfg = shell_config(&opts, &lab::files::read)?;
    // The evidence is whole captures of a given command: what would change that is refused.
    if a.lab.rpm {
        return Err(lab::UsageError(
            "ipv6-check: --rpm does not apply (it checks COMMAND; for RPM on an IPv6-only \
             network: latencylab shell --nat64 --rpm)"
                .into(),
        )
        .into());
    }
    if a.lab.no_capture || a.lab.capture.any() {
        return Err(lab::UsageError(
            "ipv6-check: --no-capture, --snaplen, -C and -W do not apply (the check reads \
             whole captures)"
                .into(),
        )
        .into());
    }
    if a.lab.command.is_empty() {
        return Err(lab::UsageError(
            "ipv6-check needs a COMMAND to check (try: latencylab ipv6-check -- curl -s http://server/)".into(),
        )
        .into());
    }
    let path_var = std::env::var_os("PATH").unwrap_or_default();
    if let Some(line) = missing_program(&a.lab.command[0], &path_var) {
        return Err(lab::UsageError(line).into());
    }
    let web = crate::watch::watch_every_lab(&a.lab.watch, Some("ipv6-check"))?;
    // The evidence needs captures: in the user's -o directory, or a scratch one.
    let dir = EvidenceDir::create(a.lab.out.as_deref(), "ipv6-check")?;
    let result = check(&a, &cfg, opts.server.as_deref(), &dir.path);
    dir.finish(" (strace.txt, captures/, summary.json)");
    if let Some(v) = web {
        v.finish();
    }
    result
}

/// Runs `command` as the client of the NAT64 lab `cfg` (under strace when it is installed),
/// with `server` (a shell command line) in its server host, the lab's output in `dir`, and
/// gathers the evidence for the rules. `demo nat64` runs its samples through this too.
pub fn gather(
    cfg: &LabConfig,
    dir: &Path,
    command: &[String],
    server: Option<&str>,
    quiet: bool,
) -> Result<Evidence> {
    let strace = find_strace();
    let trace_file = dir.join("strace.txt");
    let mut command = command.to_vec();
    if let Some(s) = &strace {
        // COMMAND (and strace) run as the user who invoked sudo: the file must be theirs.
        lab::owner::write(&trace_file, "")
            .with_context(|| format!("creating {}", trace_file.display()))?;
        let mut wrapped = vec![
            s.display().to_string(),
            "-f".into(),
            "-qq".into(),
            "-e".into(),
            format!("trace={}", ipv6check::strace::TRACED),
            "-e".into(),
            "signal=none".into(),
            "-o".into(),
            trace_file.display().to_string(),
            "--".into(),
        ];
        wrapped.append(&mut command);
        command = wrapped;
    }
    let run = RunOptions {
        out_dir: Some(dir.to_path_buf()),
        command: Some(("client".into(), command)),
        server: server.map(|s| ("server".into(), s.to_string())),
        quiet,
        // The client's capture is evidence: --no-capture does not apply here, nor do
        // --snaplen, -C and -W (whole packets, in one file).
        no_capture: false,
        capture: Default::default(),
    };
    let result = demo::run_lab(cfg, &run)?;
    let nat = result.summary.nat64.clone().unwrap_or_default();
    let flows = flows(&RunDir::new(dir).capture("client", "eth0"))?;
    Ok(Evidence {
        calls: match &strace {
            Some(_) => Some(parse_strace(
                &fs::read_to_string(&trace_file)
                    .with_context(|| format!("reading {}", trace_file.display()))?,
            )),
            None => None,
        },
        queries: nat
            .dns
            .queries
            .iter()
            .map(|q| ((q.name.clone(), q.qtype.clone()), q.count))
            .collect(),
        names_of_v4: names_of_v4(cfg),
        prefix: cfg.nat64.as_ref().map(|n| n.prefix).unwrap_or_default(),
        tcp: flows.tcp(),
        udp_unanswered: flows.udp_unanswered(),
        nat64_drops: nat.drops.clone(),
        no_route: result.summary.no_route,
        server_listening: result.server_listened,
        exit_code: result.exit_code,
        clat: cfg
            .nat64
            .as_ref()
            .is_some_and(|n| n.clat.iter().any(|h| h == "client")),
    })
}

fn check(a: &CheckArgs, cfg: &LabConfig, server: Option<&str>, dir: &Path) -> Result<ExitCode> {
    let evidence = gather(cfg, dir, &a.lab.command, server, a.lab.quiet)?;
    let verdict = analyze(&evidence);
    eprint!("{}", render(&evidence, &verdict));
    Ok(if passed(&evidence, &verdict) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_that_does_not_exist_is_named_and_one_that_does_passes() {
        let path = std::ffi::OsString::from("/nonexistent-dir:/bin:/usr/bin");
        let line = missing_program("/nonexistent", &path).unwrap();
        assert!(line.contains("'/nonexistent' does not exist"), "{line}");
        let line = missing_program("no-such-program-anywhere", &path).unwrap();
        assert!(line.contains("no directory of PATH"), "{line}");
        assert_eq!(missing_program("sh", &path), None);
        assert_eq!(missing_program("/bin/sh", &path), None);
    }
}
