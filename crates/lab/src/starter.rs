//! Starting a program in a lab host: its namespace, its own /etc/hosts and /etc/resolv.conf,
//! its stdio (the terminal for COMMAND, the run directory or stderr for the others) and its
//! environment, all told to the [`Launcher`] once when the lab is up; each start is then a
//! request naming the host and the command. What goes in the files and the environment is
//! decided in `labnet::programs`; here the files are written.

use std::fs;
use std::os::fd::{AsFd, BorrowedFd};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use labnet::programs::{lab_env, resolv_conf_for};
use labnet::spec::LabConfig;

use crate::cleanup::runtime_dir;
use crate::netns::HostNs;
use crate::process::{self, HostFiles, LabSetup, Launcher, StartSpec};
use crate::runner::RunOptions;

/// Each host's /etc/hosts and /etc/resolv.conf, in the lab's runtime directory: in a NAT64
/// lab an IPv6-only host must not find an IPv4-only host's address in /etc/hosts, and asks the
/// DNS64 instead. What a host sees depends only on its address families, so hosts of the same
/// families share one pair of files (a 1000-host lab writes 2 files, not 2000 of 1000 lines).
pub(crate) fn write_name_files(cfg: &LabConfig, pid: u32) -> Result<Vec<(PathBuf, PathBuf)>> {
    let rt = runtime_dir(pid);
    fs::create_dir_all(&rt).with_context(|| format!("creating {}", rt.display()))?;
    let mut written = std::collections::BTreeMap::new();
    let mut name_files = Vec::new();
    for h in &cfg.hosts {
        let families = match (h.has_ipv4(), h.has_ipv6()) {
            (true, true) => "dual",
            (true, false) => "ipv4",
            _ => "ipv6",
        };
        if !written.contains_key(families) {
            let hosts_file = rt.join(format!("hosts-{families}"));
            let resolv_file = rt.join(format!("resolv-{families}.conf"));
            fs::write(&hosts_file, cfg.hosts_file_for(Some(h)))?;
            fs::write(&resolv_file, resolv_conf_for(cfg, h))?;
            written.insert(families, (hosts_file, resolv_file));
        }
        if cfg.nat64.as_ref().is_some_and(|n| n.clat.contains(&h.name)) {
            fs::write(gai_file(&rt, &h.name), labnet::clat::GAI_CONF)?;
        }
        name_files.push(written[families].clone());
    }
    Ok(name_files)
}

/// A CLAT host's /etc/gai.conf, in the directory of its /etc/hosts.
fn gai_file(dir: &Path, host: &str) -> PathBuf {
    dir.join(format!("gai-{host}.conf"))
}

/// Starts programs in the lab's hosts, through the [`Launcher`].
pub(crate) struct Starter<'a> {
    cfg: &'a LabConfig,
    pub launcher: Launcher,
}

impl<'a> Starter<'a> {
    /// Tells the launcher everything about the lab that programs need (each host's namespace
    /// and name files, the environment, who programs run as, where their output goes), before
    /// the loop runs: starting a program is then one small request.
    pub fn new(
        cfg: &'a LabConfig,
        opts: &RunOptions,
        hosts: &[HostNs],
        name_files: &[(PathBuf, PathBuf)],
        run_as: Option<process::RunAs>,
        launcher: Launcher,
    ) -> Result<Starter<'a>> {
        let told: Vec<(BorrowedFd, HostFiles)> = cfg
            .hosts
            .iter()
            .zip(hosts)
            .zip(name_files)
            .map(|((h, ns), (hosts_file, resolv_file))| {
                let gai = hosts_file.parent().map(|d| gai_file(d, &h.name));
                (
                    ns.ns_fd.as_fd(),
                    HostFiles {
                        hosts_file: hosts_file.clone(),
                        resolv_file: resolv_file.clone(),
                        gai_file: gai.filter(|p| p.exists()),
                    },
                )
            })
            .collect();
        let exe_dir = std::env::current_exe()
            .ok()
            .and_then(|p| p.parent().map(|d| d.to_path_buf()));
        let path = std::env::var("PATH").unwrap_or_default();
        let setup = LabSetup {
            env: lab_env(cfg, exe_dir.as_deref(), &path, opts.out_dir.as_deref()),
            run_as,
            run_dir: opts.out_dir.clone(),
        };
        launcher.tell_hosts(&told, setup)?;
        Ok(Starter { cfg, launcher })
    }

    /// Asks for `argv` to start in `host` (its process id comes later, from the launcher):
    /// COMMAND (`command`) with the terminal's stdio, any other program with its output in the
    /// run directory (or on stderr) and no stdin; `own_group`: a process group of its own.
    pub fn start(
        &mut self,
        host: &str,
        argv: Vec<String>,
        own_group: bool,
        name: &str,
        command: bool,
    ) -> Result<()> {
        let hi = self
            .cfg
            .hosts
            .iter()
            .position(|h| h.name == host)
            .context("validated host")?;
        self.launcher.spawn(StartSpec {
            host: hi,
            host_name: host.to_string(),
            name: name.to_string(),
            argv,
            command,
            own_process_group: own_group,
        })
    }
}
