//! Starting a program in a lab host: its namespace, its own /etc/hosts and /etc/resolv.conf,
//! its stdio (the terminal for COMMAND, the run directory or stderr for the others) and its
//! environment, handed to the [`Launcher`]. What goes in the files and the environment is
//! decided in `labnet::programs`; here they are written and opened.

use std::fs::{self, File};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use labnet::programs::{program_env, resolv_conf_for};
use labnet::run_dir::RunDir;
use labnet::spec::LabConfig;

use crate::cleanup::runtime_dir;
use crate::netns::HostNs;
use crate::owner;
use crate::process::{self, Launch, LaunchSpec, Launcher};
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

/// What starting a program in a host needs: its namespace, its name files, its environment.
pub(crate) struct Starter<'a> {
    pub cfg: &'a LabConfig,
    pub opts: &'a RunOptions,
    pub hosts: &'a [HostNs],
    pub name_files: &'a [(PathBuf, PathBuf)],
    pub run_as: Option<process::RunAs>,
    pub launcher: Launcher,
}

impl Starter<'_> {
    /// Asks for `argv` to start in `host` (its process id comes later, from the launcher):
    /// COMMAND (`command`) with the terminal's stdio, any other program with its output in the
    /// run directory (or on stderr) and no stdin.
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
        let dup = |fd: std::os::fd::BorrowedFd| fd.try_clone_to_owned();
        let (stdout, stderr): (OwnedFd, OwnedFd) = match (&self.opts.out_dir, command) {
            (_, true) => (
                dup(std::io::stdout().as_fd())?,
                dup(std::io::stderr().as_fd())?,
            ),
            (Some(d), false) => {
                let d = RunDir::new(d);
                owner::create_dir_all(&d.programs())?;
                (
                    owner::create_file(&d.program_out(name))?.into(),
                    owner::create_file(&d.program_err(name))?.into(),
                )
            }
            // Background programs must not mix into COMMAND's stdout (`... -- cmd | jq`).
            (None, false) => (
                dup(std::io::stderr().as_fd())?,
                dup(std::io::stderr().as_fd())?,
            ),
        };
        let stdin: OwnedFd = if command {
            dup(std::io::stdin().as_fd())?
        } else {
            File::open("/dev/null")?.into()
        };
        self.launcher.spawn(Launch {
            ns: self.hosts[hi].ns_fd.try_clone()?,
            stdin,
            stdout,
            stderr,
            how: LaunchSpec {
                hosts_file: self.name_files[hi].0.clone(),
                resolv_file: self.name_files[hi].1.clone(),
                gai_file: self.name_files[hi]
                    .0
                    .parent()
                    .map(|d| gai_file(d, host))
                    .filter(|p| p.exists()),
                argv,
                env: self.env_for(host),
                own_process_group: own_group,
                run_as: self.run_as.clone(),
            },
        })
    }

    /// A program's environment ([`program_env`]).
    fn env_for(&self, host: &str) -> Vec<(String, String)> {
        let exe_dir = std::env::current_exe()
            .ok()
            .and_then(|p| p.parent().map(|d| d.to_path_buf()));
        let path = std::env::var("PATH").unwrap_or_default();
        program_env(
            self.cfg,
            host,
            exe_dir.as_deref(),
            &path,
            self.opts.out_dir.as_deref(),
        )
    }
}
