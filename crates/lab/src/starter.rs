//! Starting a program in a lab host: its namespace, its own /etc/hosts and /etc/resolv.conf,
//! its stdio (the terminal for COMMAND, the run directory or stderr for the others) and its
//! environment, all told to the [`Launcher`] once when the lab is up; each start is then a
//! request naming the host and the command. What goes in the files and the environment is
//! decided in `labnet::programs`; here the files are written.

use std::collections::HashMap;
use std::fs;
use std::os::fd::{AsFd, BorrowedFd};
use std::path::PathBuf;

use anyhow::{Context, Result};
use labnet::programs::{gai_file, lab_env, NameFiles};
use labnet::spec::LabConfig;

use crate::cleanup::runtime_dir;
use crate::netns::HostNs;
use crate::process::{self, HostFiles, LabSetup, Launcher, StartSpec};
use crate::runner::RunOptions;

/// Writes the hosts' name files ([`NameFiles`]) in the lab's runtime directory, and returns
/// each host's /etc/hosts and /etc/resolv.conf.
pub(crate) fn write_name_files(cfg: &LabConfig, pid: u32) -> Result<Vec<(PathBuf, PathBuf)>> {
    let rt = runtime_dir(pid);
    fs::create_dir_all(&rt).with_context(|| format!("creating {}", rt.display()))?;
    let plan = NameFiles::of(cfg);
    for (name, text) in &plan.files {
        fs::write(rt.join(name), text)?;
    }
    Ok(plan
        .hosts
        .iter()
        .map(|(h, r)| (rt.join(h), rt.join(r)))
        .collect())
}

/// Starts programs in the lab's hosts, through the [`Launcher`].
pub(crate) struct Starter<'a> {
    /// Each host's index in the lab, by name: a start names its host, and a lab of a thousand
    /// hosts compared the name with every host's for each of its thousand programs.
    host_index: HashMap<&'a str, usize>,
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
                let gai = hosts_file.parent().map(|d| d.join(gai_file(&h.name)));
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
        let host_index = cfg.hosts.iter().enumerate();
        Ok(Starter {
            host_index: host_index.map(|(i, h)| (h.name.as_str(), i)).collect(),
            launcher,
        })
    }

    /// Keeps the calling thread (the engine) off the CPU where programs start while `apart`
    /// (it runs real-time), or lets it run on every CPU the lab may use again
    /// ([`process::CpuPlan`]). Nothing when starts are not kept apart (one CPU).
    pub fn engine_apart_from_starts(&self, apart: bool) {
        if let Some(c) = self.launcher.cpus() {
            process::set_affinity(0, if apart { &c.engine } else { &c.allowed });
        }
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
        let hi = *self.host_index.get(host).context("validated host")?;
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
