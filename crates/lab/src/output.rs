//! The files of a run directory, opened and written: pcaps, link logs, JSON. What the files
//! are called and what their lines and fields mean is defined once, in `labnet::run_dir`.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use labnet::run_dir::{self, RunDir};
use link::Event;
use serde::Serialize;
use wire::pcap::PcapWriter;

use crate::owner;

pub use labnet::run_dir::{
    DelaySummary, DnsQuerySummary, DnsSummary, EngineSummary, LinkSummary, Nat64Summary,
    SubQueueSummary, Summary,
};

/// Creates the run directory and its `captures/` and `links/` subdirectories, for the user (see
/// [`owner`]), like every file below.
pub fn prepare_dir(dir: &RunDir) -> Result<()> {
    for p in [dir.captures(), dir.links()] {
        owner::create_dir_all(&p).with_context(|| format!("-o: cannot create {}", p.display()))?;
    }
    Ok(())
}

pub type Pcap = PcapWriter<BufWriter<File>>;

pub fn open_pcap(path: &Path) -> Result<Pcap> {
    let f = owner::create_file(path).with_context(|| format!("creating {}", path.display()))?;
    PcapWriter::new(BufWriter::with_capacity(1 << 20, f))
        .with_context(|| format!("writing {}", path.display()))
}

/// One link direction's event log.
pub struct LinkLog {
    out: BufWriter<File>,
    pub path: PathBuf,
}

impl LinkLog {
    pub fn create(path: &Path) -> Result<LinkLog> {
        let f = owner::create_file(path).with_context(|| format!("creating {}", path.display()))?;
        let mut out = BufWriter::with_capacity(1 << 20, f);
        out.write_all(run_dir::LOG_HEADER.as_bytes())?;
        Ok(LinkLog {
            out,
            path: path.to_path_buf(),
        })
    }

    pub fn write(&mut self, e: &Event) -> std::io::Result<()> {
        run_dir::write_event(&mut self.out, e)
    }

    pub fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

pub fn write_json(path: &Path, value: &impl Serialize) -> Result<()> {
    let text = serde_json::to_string_pretty(value).expect("plain data serializes");
    owner::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))
}
