//! The programs of a running lab as the shell knows them: asked for, given a process id by the
//! launcher (in the order they were asked for), ended with a status. The stop rules
//! ([`crate::lifecycle`]) read their facts from here. Also what a program finds in its host:
//! its environment (the lab's, made once, and its host's name) and its resolver file.
//!
//! Not here: starting processes, signals, descriptors (the `launcher` crate, `lab::starter`,
//! `lab::process`).

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::Path;

use crate::spec::{Host, LabConfig};

/// One program the lab asked the launcher to start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Program {
    /// `server`, `COMMAND`, or the run file's program name.
    pub name: String,
    /// Known once the launcher has said it started.
    pub pid: Option<i32>,
    /// It leads a process group of its own (signals go to the whole group).
    pub own_group: bool,
    /// The lab waits for it to end.
    pub wait: bool,
    pub is_command: bool,
    /// Its exit status (128 + signal when killed), once it has ended.
    pub status: Option<i32>,
}

impl Program {
    pub fn running(&self) -> bool {
        self.status.is_none()
    }
}

/// What went wrong between the lab and its launcher.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProgramsError {
    /// The launcher reported a start nobody asked for.
    UnaskedStart(i32),
}

impl std::fmt::Display for ProgramsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProgramsError::UnaskedStart(pid) => write!(
                f,
                "the launcher started a program nobody asked for (pid {pid})"
            ),
        }
    }
}

impl std::error::Error for ProgramsError {}

/// The lab's programs, in the order they were asked for, with what the loop asks of them on
/// every turn (COMMAND's status, whether the programs the lab waits for have ended) kept up to
/// date as they start and end, rather than found by a pass over every program: a lab of a
/// thousand programs made two such passes per loop turn.
#[derive(Clone, Debug, Default)]
pub struct Programs {
    list: Vec<Program>,
    /// Each running program's index, by process id.
    by_pid: HashMap<i32, usize>,
    /// Every program before this index has a process id or has ended.
    next_start: usize,
    /// COMMAND's index.
    command: Option<usize>,
    /// Programs that have not ended.
    running: usize,
    /// Programs the lab waits for, and how many of them have not ended.
    waited: usize,
    waited_running: usize,
}

impl Programs {
    /// A program was asked for; returns its index.
    pub fn asked(&mut self, name: &str, own_group: bool, wait: bool, is_command: bool) -> usize {
        let i = self.list.len();
        self.list.push(Program {
            name: name.to_string(),
            pid: None,
            own_group,
            wait,
            is_command,
            status: None,
        });
        self.running += 1;
        if wait {
            self.waited += 1;
            self.waited_running += 1;
        }
        if is_command {
            self.command.get_or_insert(i);
        }
        i
    }

    /// The launcher started the oldest program still waiting for its process id; returns its
    /// index.
    pub fn started(&mut self, pid: i32) -> Result<usize, ProgramsError> {
        let waiting = |p: &Program| p.pid.is_none() && p.running();
        while self.list.get(self.next_start).is_some_and(|p| !waiting(p)) {
            self.next_start += 1;
        }
        let i = self.next_start;
        let p = self
            .list
            .get_mut(i)
            .ok_or(ProgramsError::UnaskedStart(pid))?;
        p.pid = Some(pid);
        self.by_pid.insert(pid, i);
        Ok(i)
    }

    /// The name of the program the launcher is starting now (the one a start failure is about).
    pub fn starting_name(&self) -> &str {
        self.list
            .iter()
            .find(|p| p.pid.is_none())
            .map_or("?", |p| p.name.as_str())
    }

    /// Process `pid` ended; returns the program, or `None` for a process that is not one of
    /// the lab's programs.
    pub fn exited(&mut self, pid: i32, status: i32) -> Option<&Program> {
        let i = self.by_pid.remove(&pid)?;
        let p = &mut self.list[i];
        if p.running() {
            self.running -= 1;
            if p.wait {
                self.waited_running -= 1;
            }
        }
        p.status = Some(status);
        Some(p)
    }

    pub fn get(&self, i: usize) -> &Program {
        &self.list[i]
    }

    pub fn all(&self) -> &[Program] {
        &self.list
    }

    /// Programs that have not ended (some may not have a process id yet).
    pub fn running(&self) -> impl Iterator<Item = &Program> {
        self.list.iter().filter(|p| p.running())
    }

    /// COMMAND's exit status once it has ended.
    pub fn command_status(&self) -> Option<i32> {
        self.command.and_then(|i| self.list[i].status)
    }

    pub fn command_running(&self) -> bool {
        self.command.is_some_and(|i| self.list[i].running())
    }

    pub fn all_ended(&self) -> bool {
        self.running == 0
    }

    /// Whether the programs a lab without COMMAND or `duration` waits for have ended: every
    /// program marked `wait`, or every program when none is.
    pub fn waited_ended(&self) -> bool {
        if self.waited > 0 {
            self.waited_running == 0
        } else {
            self.running == 0
        }
    }
}

/// `s` as one word of a program's line, which the lab runs with `sh -c`: itself when no character of it is special to the shell,
/// otherwise in single quotes (a quote inside as `'\''`).
pub fn sh_word(s: &str) -> Cow<'_, str> {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_-./:=+,@%".contains(c);
    if !s.is_empty() && s.chars().all(plain) {
        Cow::Borrowed(s)
    } else {
        Cow::Owned(format!("'{}'", s.replace('\'', r"'\''")))
    }
}

/// A program's environment in `host`: its host's name, then what every program of the lab
/// shares ([`lab_env`]).
pub fn program_env(
    cfg: &LabConfig,
    host: &str,
    exe_dir: Option<&Path>,
    path: &str,
    out_dir: Option<&Path>,
) -> Vec<(String, String)> {
    let mut env = vec![("LATENCYLAB_HOST".to_string(), host.to_string())];
    env.extend(lab_env(cfg, exe_dir, path, out_dir));
    env
}

/// What every program's environment has, whatever its host: every host's address by name
/// (`LATENCYLAB_SERVER=10.77.1.1`), the run directory, and `exe_dir` (where latencylab itself
/// is) ahead of `path`, so that `latencylab bulk-client` and friends resolve inside the lab even
/// under sudo, whose PATH leaves out ~/.cargo/bin. Made once per lab: it grows with the hosts.
pub fn lab_env(
    cfg: &LabConfig,
    exe_dir: Option<&Path>,
    path: &str,
    out_dir: Option<&Path>,
) -> Vec<(String, String)> {
    let mut env = Vec::with_capacity(cfg.hosts.len() + 2);
    if let Some(dir) = exe_dir {
        env.push(("PATH".into(), format!("{}:{path}", dir.display())));
    }
    for h in &cfg.hosts {
        let i = &h.interfaces[0];
        env.push((
            format!(
                "LATENCYLAB_{}",
                h.name.to_ascii_uppercase().replace('-', "_")
            ),
            if h.has_ipv4() {
                i.ipv4.to_string()
            } else {
                i.ipv6.to_string()
            },
        ));
    }
    if let Some(d) = out_dir {
        env.push(("LATENCYLAB_OUT".into(), d.display().to_string()));
    }
    env
}

/// The /etc/resolv.conf a host's programs see: in a NAT64 lab an IPv6-only host asks the lab's
/// DNS64; every other host has no resolver, since the lab's names are in its /etc/hosts and
/// nothing else resolves (closed world).
pub fn resolv_conf_for(cfg: &LabConfig, host: &Host) -> String {
    match &cfg.nat64 {
        Some(n) if !host.has_ipv4() => format!(
            "# latencylab: the lab's DNS64\nnameserver {}\noptions timeout:1 attempts:2\n",
            n.dns
        ),
        _ => "# latencylab: no DNS server in this lab\nnameserver 127.0.0.1\noptions timeout:1 attempts:1\n".into(),
    }
}

/// A CLAT host's /etc/gai.conf, named in the lab's runtime directory beside the name files.
pub fn gai_file(host: &str) -> String {
    format!("gai-{host}.conf")
}

/// The files a lab's hosts see as /etc/hosts, /etc/resolv.conf and /etc/gai.conf, by name in
/// the lab's runtime directory. In a NAT64 lab an IPv6-only host must not find an IPv4-only
/// host's address in /etc/hosts, and asks the DNS64 instead. What a host sees depends only on
/// its address families, so hosts of the same families share one pair of files (a 1000-host
/// lab writes 2 files, not 2000 of 1000 lines); a host with a CLAT also has a [`gai_file`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NameFiles {
    /// Each file to write, once: its name and its text.
    pub files: Vec<(String, String)>,
    /// Each host's /etc/hosts and /etc/resolv.conf (names in `files`), in the lab's host order.
    pub hosts: Vec<(String, String)>,
}

impl NameFiles {
    pub fn of(cfg: &LabConfig) -> NameFiles {
        let mut plan = NameFiles::default();
        for h in &cfg.hosts {
            let families = match (h.has_ipv4(), h.has_ipv6()) {
                (true, true) => "dual",
                (true, false) => "ipv4",
                _ => "ipv6",
            };
            let pair = (
                format!("hosts-{families}"),
                format!("resolv-{families}.conf"),
            );
            if !plan.hosts.contains(&pair) {
                plan.files
                    .push((pair.0.clone(), cfg.hosts_file_for(Some(h))));
                plan.files.push((pair.1.clone(), resolv_conf_for(cfg, h)));
            }
            if cfg.nat64.as_ref().is_some_and(|n| n.clat.contains(&h.name)) {
                plan.files
                    .push((gai_file(&h.name), crate::clat::GAI_CONF.to_string()));
            }
            plan.hosts.push(pair);
        }
        plan
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::setting::no_files;
    use crate::shell::{shell_config, ShellOptions};

    #[test]
    fn process_ids_go_to_programs_in_the_order_they_were_asked_for() {
        let mut ps = Programs::default();
        assert_eq!(ps.asked("server", true, false, false), 0);
        assert_eq!(ps.asked("COMMAND", false, true, true), 1);
        assert_eq!(ps.starting_name(), "server");
        assert_eq!(ps.started(100), Ok(0));
        assert_eq!(ps.starting_name(), "COMMAND");
        assert_eq!(ps.started(101), Ok(1));
        assert_eq!(ps.started(102), Err(ProgramsError::UnaskedStart(102)));
        assert!(ps.command_running());
        assert_eq!(ps.exited(999, 0), None, "not one of ours");
        assert_eq!(ps.exited(101, 3).map(|p| p.name.as_str()), Some("COMMAND"));
        assert_eq!(ps.command_status(), Some(3));
        assert!(!ps.command_running());
        assert!(!ps.all_ended());
        assert_eq!(ps.running().count(), 1);
        ps.exited(100, 143);
        assert!(ps.all_ended());
        assert_eq!(ps.exited(100, 0), None, "reported once");
    }

    #[test]
    fn the_programs_waited_for_are_those_marked_wait_or_else_all() {
        let lab = |waits: &[bool]| {
            let mut ps = Programs::default();
            for (i, &wait) in waits.iter().enumerate() {
                ps.asked(&format!("p{i}"), true, wait, false);
                assert_eq!(ps.started(100 + i as i32), Ok(i));
            }
            ps
        };
        let mut ps = lab(&[true, false]);
        ps.exited(101, 0);
        assert!(!ps.waited_ended(), "the waited one still runs");
        let mut ps = lab(&[true, false]);
        ps.exited(100, 0);
        assert!(
            ps.waited_ended(),
            "the waited one ended, the other still runs"
        );
        assert!(!ps.all_ended());
        let mut ps = lab(&[false, false]);
        ps.exited(101, 0);
        assert!(!ps.waited_ended(), "none waited for: every program");
        ps.exited(100, 0);
        assert!(ps.waited_ended() && ps.all_ended());
        assert!(Programs::default().waited_ended());
    }

    #[test]
    fn a_program_that_ended_before_its_start_was_reported_takes_no_process_id() {
        let mut ps = Programs::default();
        ps.asked("a", true, false, false);
        ps.asked("b", true, false, false);
        // A lab that ends marks what never started as ended, so later ids go to the rest.
        ps.list[0].status = Some(0);
        assert_eq!(ps.started(7), Ok(1));
    }

    #[test]
    fn a_programs_environment_names_every_host_and_puts_latencylab_first_on_path() {
        let cfg = shell_config(&ShellOptions::default(), &no_files).unwrap();
        let env = program_env(
            &cfg,
            "client",
            Some(Path::new("/opt/ll")),
            "/usr/bin",
            Some(Path::new("/tmp/run")),
        );
        let get = |k: &str| env.iter().find(|e| e.0 == k).map(|e| e.1.as_str());
        assert_eq!(get("LATENCYLAB_HOST"), Some("client"));
        assert_eq!(get("PATH"), Some("/opt/ll:/usr/bin"));
        assert_eq!(get("LATENCYLAB_SERVER"), Some("10.77.2.1"));
        assert_eq!(get("LATENCYLAB_OUT"), Some("/tmp/run"));
        assert_eq!(
            env[1..],
            lab_env(
                &cfg,
                Some(Path::new("/opt/ll")),
                "/usr/bin",
                Some(Path::new("/tmp/run"))
            )[..],
            "the host's name, then what every program shares"
        );
        let resolv = resolv_conf_for(&cfg, &cfg.hosts[0]);
        assert!(resolv.contains("nameserver 127.0.0.1"), "{resolv}");
    }

    #[test]
    fn hosts_of_the_same_families_share_name_files_and_a_clat_host_gets_a_gai_conf() {
        let dual = shell_config(&ShellOptions::default(), &no_files).unwrap();
        let plan = NameFiles::of(&dual);
        let names: Vec<&str> = plan.files.iter().map(|f| f.0.as_str()).collect();
        assert_eq!(names, ["hosts-dual", "resolv-dual.conf"]);
        assert_eq!(plan.hosts, vec![plan.hosts[0].clone(); 2]);

        let o = ShellOptions {
            nat64: true,
            clat: true,
            ..ShellOptions::default()
        };
        let nat64 = shell_config(&o, &no_files).unwrap();
        let plan = NameFiles::of(&nat64);
        let names: Vec<&str> = plan.files.iter().map(|f| f.0.as_str()).collect();
        assert_eq!(
            names,
            [
                "hosts-ipv6",
                "resolv-ipv6.conf",
                "gai-client.conf",
                "hosts-ipv4",
                "resolv-ipv4.conf"
            ]
        );
        let text = |name: &str| &plan.files.iter().find(|f| f.0 == name).unwrap().1;
        assert!(text("resolv-ipv6.conf").contains("DNS64"));
        assert!(!text("hosts-ipv6").contains(&nat64.hosts[1].interfaces[0].ipv4.to_string()));
        assert_eq!(text("gai-client.conf"), crate::clat::GAI_CONF);
        assert_eq!(plan.hosts[1].0, "hosts-ipv4");
    }

    #[test]
    fn a_word_is_left_bare_only_when_sh_would_read_it_as_itself() {
        assert_eq!(sh_word("latencylab"), "latencylab");
        assert_eq!(sh_word("/tmp/out-1/page.toml"), "/tmp/out-1/page.toml");
        assert_eq!(sh_word(""), "''");
        assert_eq!(sh_word("$HOME"), "'$HOME'");
        for word in ["my page.toml", "o'neil", "a;b", "*", "`x`", "a\\b"] {
            let o = std::process::Command::new("sh")
                .args(["-c", &format!("printf '%s' {}", sh_word(word))])
                .output()
                .unwrap();
            assert_eq!(String::from_utf8_lossy(&o.stdout), word);
        }
    }
}
