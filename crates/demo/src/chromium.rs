//! Headless Chromium loading a web demo's page inside a lab, beside the project's own
//! page-load client: its command line (the flags every demo gives it, and what differs: the
//! protocols, the server's pinned key, a network log), a fresh profile around each run, the run,
//! and the page's times read back from the DOM it prints; and when it is left out (not
//! installed, or `--no-chromium`).
//!
//! Not here: each demo's lab (it builds the lab around the program given), what a demo reads
//! from the run beyond the page's times (captures: the analyzer; the network log:
//! `web::netlog`), and the page's timing script (`web::page`).

use labnet::run_dir::RunDir;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use lab::config::LabConfig;

use crate::common;
use crate::params::Args;
use crate::web_common::wait_for;

/// Where the web demos find headless Chromium.
pub const CHROMIUM: &str = "/usr/bin/chromium";

/// Chromium's program in the lab: its DOM is `programs/chromium.out`, its messages
/// `programs/chromium.err`.
const PROGRAM: &str = "chromium";

/// Chromium's network log in the run directory.
const NET_LOG: &str = "netlog.json";

/// Why Chromium is left out: `--no-chromium` (in a demo that has it), or Chromium not
/// installed; `None` when Chromium loads the page too.
pub fn skipped(a: &Args) -> Option<String> {
    if a.declares("no-chromium") && a.flag("no-chromium") {
        Some("--no-chromium".into())
    } else if !Path::new(CHROMIUM).exists() {
        Some(format!("{CHROMIUM} is not installed"))
    } else {
        None
    }
}

/// A table cell of Chromium's page load, s: the time, or that it did not run and why.
pub fn seconds_cell(s: Option<f64>, note: Option<&str>) -> String {
    match (s, note) {
        (Some(s), _) => format!("{s:.2}"),
        (None, Some(n)) => format!("not run: {n}"),
        (None, None) => "not run".into(),
    }
}

/// How Chromium loads a demo's page: what differs from one demo to the next.
#[derive(Clone, Copy, Debug)]
pub struct Load<'a> {
    /// The page, as the client host names it (`http://server/`).
    pub url: &'a str,
    /// The flags that choose its protocols (`--disable-quic`, `--disable-http2`,
    /// `--origin-to-force-quic-on=server:443` …).
    pub protocols: &'a str,
    /// The file the server writes its key's pin into (`web-server --spki-out`): Chromium waits
    /// for it and trusts the server by it, its documented way to trust a test server, over
    /// QUIC too. `None` over plain HTTP.
    pub spki_pin: Option<&'a Path>,
    /// Whether Chromium writes its network log (`--log-net-log`), kept as the run's
    /// `netlog.json`.
    pub net_log: bool,
}

/// What one load left: its run directory, and the times the page's script put in the title.
#[derive(Clone, Debug, PartialEq)]
pub struct PageLoad {
    pub dir: PathBuf,
    /// The last byte of the last response (Resource Timing's latest `responseEnd`), s.
    pub page_load_s: Option<f64>,
    /// Navigation Timing's `loadEventStart`, s.
    pub load_event_s: Option<f64>,
}

impl PageLoad {
    /// The client's capture of the run.
    pub fn client_capture(&self) -> PathBuf {
        RunDir::new(&self.dir).capture("client", "eth0")
    }

    /// Chromium's network log, where the load asked for one.
    pub fn net_log(&self) -> PathBuf {
        self.dir.join(NET_LOG)
    }

    /// Why the load has no time, `who` being the Chromium run it names ("Chromium over QUIC").
    pub fn no_time_note(&self, who: &str) -> String {
        format!(
            "{who} ran but its DOM had no last response time (see {})",
            RunDir::new(&self.dir).program_err(PROGRAM).display()
        )
    }
}

impl Load<'_> {
    /// Chromium's command: headless, kept in the closed world (no background, update or sync
    /// traffic, a fresh profile in `profile`), writing its network log to `net_log` if given,
    /// printing the DOM after the load event (the page's script puts its times in the title).
    pub fn command(&self, profile: &Path, net_log: Option<&Path>) -> String {
        let mut cmd = String::new();
        if let Some(pin) = self.spki_pin {
            cmd += &wait_for(pin);
        }
        cmd += &format!("exec {CHROMIUM} --headless --no-sandbox --disable-gpu");
        if !self.protocols.is_empty() {
            cmd += &format!(" {}", self.protocols);
        }
        cmd += " --no-first-run --disable-background-networking --disable-component-update \
                --disable-sync";
        if let Some(pin) = self.spki_pin {
            cmd += &format!(
                " --ignore-certificate-errors-spki-list=$(cat {})",
                pin.display()
            );
        }
        cmd += &format!(" --user-data-dir={}", profile.display());
        if let Some(log) = net_log {
            cmd += &format!(" --log-net-log={}", log.display());
        }
        cmd += &format!(" --dump-dom {}", self.url);
        cmd
    }

    /// Loads the page in the lab that `lab` builds around Chromium's program (its name and
    /// command), with the run's output in `dir`, and reads the page's times back.
    pub fn run(
        &self,
        dir: &Path,
        lab: impl FnOnce((&str, String)) -> LabConfig,
    ) -> Result<PageLoad> {
        // The profile and the network log are written beside the run directory, which the lab
        // empties first; the log is moved in afterwards.
        let profile = dir.with_extension("profile");
        let _ = fs::remove_dir_all(&profile);
        fs::create_dir_all(&profile).with_context(|| format!("creating {}", profile.display()))?;
        let profile = profile.canonicalize()?;
        let net_log = dir.with_extension(NET_LOG);
        let written = if self.net_log {
            let _ = fs::remove_file(&net_log);
            Some(std::path::absolute(&net_log)?)
        } else {
            None
        };
        let cfg = lab((PROGRAM, self.command(&profile, written.as_deref())));
        let ran = common::run_lab_in(&cfg, dir);
        let _ = fs::remove_dir_all(&profile);
        ran?;
        // Read back, the run already holds its log.
        if let Some(written) = written.filter(|_| !common::reanalysing()) {
            fs::rename(&written, dir.join(NET_LOG)).with_context(|| {
                format!("Chromium left no network log at {}", net_log.display())
            })?;
        }
        let dom = fs::read_to_string(RunDir::new(dir).program_out(PROGRAM)).unwrap_or_default();
        Ok(PageLoad {
            dir: dir.to_path_buf(),
            page_load_s: web::page::response_end_from_dom(&dom).map(|ms| ms / 1e3),
            load_event_s: web::page::load_time_from_dom(&dom).map(|ms| ms / 1e3),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_load_is_headless_in_a_closed_world_with_a_fresh_profile_printing_the_dom() {
        let plain = Load {
            url: "http://server/",
            protocols: "--disable-quic",
            spki_pin: None,
            net_log: false,
        };
        assert_eq!(
            plain.command(Path::new("/o/chromium.profile"), None),
            "exec /usr/bin/chromium --headless --no-sandbox --disable-gpu --disable-quic \
             --no-first-run --disable-background-networking --disable-component-update \
             --disable-sync --user-data-dir=/o/chromium.profile --dump-dom http://server/"
        );
        let logged = plain.command(Path::new("/p"), Some(Path::new("/o/chromium.netlog.json")));
        assert!(
            logged.ends_with(
                " --user-data-dir=/p --log-net-log=/o/chromium.netlog.json --dump-dom http://server/"
            ),
            "{logged}"
        );
    }

    #[test]
    fn a_pinned_server_is_waited_for_then_trusted_by_its_key() {
        let pin = Path::new("/o/tls/chromium-h3.spki");
        let quic = Load {
            url: "https://server/",
            protocols: "--enable-quic --origin-to-force-quic-on=server:443",
            spki_pin: Some(pin),
            net_log: false,
        };
        let cmd = quic.command(Path::new("/p"), None);
        let (wait, exec) = cmd.split_once("exec ").unwrap();
        assert_eq!(wait, wait_for(pin));
        assert!(
            exec.contains(
                " --disable-sync --ignore-certificate-errors-spki-list=$(cat /o/tls/chromium-h3.spki) \
                 --user-data-dir=/p --dump-dom https://server/"
            ),
            "{cmd}"
        );
        assert!(
            exec.contains(" --origin-to-force-quic-on=server:443 "),
            "{cmd}"
        );
    }

    #[test]
    fn chromium_is_left_out_by_the_option_where_a_demo_has_it_and_its_cell_says_why() {
        let out = std::env::temp_dir();
        let a = Args::of("http-parallel", out.clone(), &[("no-chromium", "true")]).unwrap();
        assert_eq!(skipped(&a).as_deref(), Some("--no-chromium"));
        // A demo without the option runs Chromium wherever it is installed.
        let a = Args::of("conn-reuse", out, &[]).unwrap();
        let installed = Path::new(CHROMIUM).exists();
        assert_eq!(skipped(&a).is_none(), installed);
        assert_eq!(seconds_cell(Some(1.234), Some("x")), "1.23");
        assert_eq!(
            seconds_cell(None, Some("--no-chromium")),
            "not run: --no-chromium"
        );
        assert_eq!(seconds_cell(None, None), "not run");
    }

    #[test]
    fn a_load_without_a_time_points_at_chromiums_messages() {
        let load = PageLoad {
            dir: PathBuf::from("/o/chromium"),
            page_load_s: None,
            load_event_s: None,
        };
        assert_eq!(
            load.no_time_note("Chromium over QUIC"),
            "Chromium over QUIC ran but its DOM had no last response time \
             (see /o/chromium/programs/chromium.err)"
        );
        assert_eq!(
            load.client_capture(),
            Path::new("/o/chromium/captures/client-eth0.pcap")
        );
        assert_eq!(load.net_log(), Path::new("/o/chromium/netlog.json"));
    }
}
