//! Named networks: the throttling presets of browsers' developer tools and WebPageTest's
//! connectivity profiles, each with the figures its own source gives and where to read them
//! (docs/profiles.md says how each tool's latency is mapped to a path's round trip).
//!
//! Pure: a table, a lookup, and the link settings a profile stands for. Only presets whose
//! figures can be read in the tool's published source are here.

use crate::spec::Side;

/// Where a preset comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// Chrome DevTools' network throttling presets: `front_end/core/sdk/NetworkManager.ts`
    /// of ChromeDevTools/devtools-frontend (read at commit 00d120bf0e61).
    ChromeDevTools,
    /// Firefox DevTools' throttling profiles:
    /// `devtools/client/shared/components/throttling/profiles.js` of mozilla/gecko-dev (read
    /// at commit 1e270ca69f0e).
    Firefox,
    /// WebPageTest's connectivity profiles: `www/settings/connectivity.ini.sample` of
    /// catchpoint/WebPageTest (read at commit 0c6c27a053d0).
    WebPageTest,
}

impl Source {
    pub fn name(self) -> &'static str {
        match self {
            Source::ChromeDevTools => "Chrome DevTools",
            Source::Firefox => "Firefox DevTools",
            Source::WebPageTest => "WebPageTest",
        }
    }
}

/// One named network.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Profile {
    /// The name `--profile` takes.
    pub name: &'static str,
    /// The preset's name in its tool.
    pub title: &'static str,
    pub source: Source,
    /// Capacity server→client and client→server, bits per second.
    pub down_bits_per_s: u64,
    pub up_bits_per_s: u64,
    /// The path's round-trip propagation delay, milliseconds (half each way).
    pub rtt_ms: u32,
    /// The figures as the source writes them.
    pub source_figures: &'static str,
}

/// Firefox's unit: `K = 1024` bits per second.
const KIBIT: u64 = 1024;
const MIBIT: u64 = 1024 * 1024;

/// Every profile, in the order `latencylab profiles` lists them.
pub const PROFILES: &[Profile] = &[
    // Chrome's `download`/`upload` multiply the nominal rate by 0.8 or 0.9 and its `latency`
    // (added per request) multiplies the target RTT by 5, 3.75 or 2.75: "adjustment factors
    // to make DevTools' emulation more accurate" at the request level, says the source. A
    // packet-level path takes the nominal figures of the source's comments ("~500Kbps down",
    // "400ms RTT") and its `targetLatency`.
    Profile {
        name: "3g",
        title: "3G (formerly Slow 3G)",
        source: Source::ChromeDevTools,
        down_bits_per_s: 500_000,
        up_bits_per_s: 500_000,
        rtt_ms: 400,
        source_figures: "download 500*1000/8*.8, upload 500*1000/8*.8, latency 400*5, targetLatency 400",
    },
    Profile {
        name: "slow-4g",
        title: "Slow 4G (formerly Fast 3G)",
        source: Source::ChromeDevTools,
        down_bits_per_s: 1_600_000,
        up_bits_per_s: 750_000,
        rtt_ms: 150,
        source_figures: "download 1.6*1000*1000/8*.9, upload 750*1000/8*.9, latency 150*3.75, targetLatency 150",
    },
    Profile {
        name: "fast-4g",
        title: "Fast 4G",
        source: Source::ChromeDevTools,
        down_bits_per_s: 9_000_000,
        up_bits_per_s: 1_500_000,
        rtt_ms: 60,
        source_figures: "download 9*1000*1000/8*.9, upload 1.5*1000*1000/8*.9, latency 60*2.75, targetLatency 60",
    },
    Profile {
        name: "gprs",
        title: "GPRS",
        source: Source::Firefox,
        down_bits_per_s: 50 * KIBIT,
        up_bits_per_s: 20 * KIBIT,
        rtt_ms: 500,
        source_figures: "download 50*KBps, upload 20*KBps, latency 500",
    },
    Profile {
        name: "regular-2g",
        title: "Regular 2G",
        source: Source::Firefox,
        down_bits_per_s: 250 * KIBIT,
        up_bits_per_s: 50 * KIBIT,
        rtt_ms: 300,
        source_figures: "download 250*KBps, upload 50*KBps, latency 300",
    },
    Profile {
        name: "good-2g",
        title: "Good 2G",
        source: Source::Firefox,
        down_bits_per_s: 450 * KIBIT,
        up_bits_per_s: 150 * KIBIT,
        rtt_ms: 150,
        source_figures: "download 450*KBps, upload 150*KBps, latency 150",
    },
    Profile {
        name: "regular-3g",
        title: "Regular 3G",
        source: Source::Firefox,
        down_bits_per_s: 750 * KIBIT,
        up_bits_per_s: 250 * KIBIT,
        rtt_ms: 100,
        source_figures: "download 750*KBps, upload 250*KBps, latency 100",
    },
    Profile {
        name: "good-3g",
        title: "Good 3G",
        source: Source::Firefox,
        down_bits_per_s: 3 * MIBIT / 2,
        up_bits_per_s: 750 * KIBIT,
        rtt_ms: 40,
        source_figures: "download 1.5*MBps, upload 750*KBps, latency 40",
    },
    Profile {
        name: "regular-4g",
        title: "Regular 4G / LTE",
        source: Source::Firefox,
        down_bits_per_s: 4 * MIBIT,
        up_bits_per_s: 3 * MIBIT,
        rtt_ms: 20,
        source_figures: "download 4*MBps, upload 3*MBps, latency 20",
    },
    Profile {
        name: "firefox-dsl",
        title: "DSL",
        source: Source::Firefox,
        down_bits_per_s: 2 * MIBIT,
        up_bits_per_s: MIBIT,
        rtt_ms: 5,
        source_figures: "download 2*MBps, upload 1*MBps, latency 5",
    },
    Profile {
        name: "wifi",
        title: "Wi-Fi",
        source: Source::Firefox,
        down_bits_per_s: 30 * MIBIT,
        up_bits_per_s: 15 * MIBIT,
        rtt_ms: 2,
        source_figures: "download 30*MBps, upload 15*MBps, latency 2",
    },
    Profile {
        name: "cable",
        title: "Cable (5/1 Mbps 28ms RTT)",
        source: Source::WebPageTest,
        down_bits_per_s: 5_000_000,
        up_bits_per_s: 1_000_000,
        rtt_ms: 28,
        source_figures: "bwIn=5000000 bwOut=1000000 latency=28",
    },
    Profile {
        name: "dsl",
        title: "DSL (1.5 Mbps/384 Kbps 50ms RTT)",
        source: Source::WebPageTest,
        down_bits_per_s: 1_500_000,
        up_bits_per_s: 384_000,
        rtt_ms: 50,
        source_figures: "bwIn=1500000 bwOut=384000 latency=50",
    },
    Profile {
        name: "fios",
        title: "FIOS (20/5 Mbps 4ms RTT)",
        source: Source::WebPageTest,
        down_bits_per_s: 20_000_000,
        up_bits_per_s: 5_000_000,
        rtt_ms: 4,
        source_figures: "bwIn=20000000 bwOut=5000000 latency=4",
    },
    Profile {
        name: "dial-up",
        title: "56K Dial-Up (49/30 Kbps 120ms RTT)",
        source: Source::WebPageTest,
        down_bits_per_s: 49_000,
        up_bits_per_s: 30_000,
        rtt_ms: 120,
        source_figures: "bwIn=49000 bwOut=30000 latency=120",
    },
    Profile {
        name: "mobile-3g",
        title: "Mobile 3G (1.6 Mbps/768 Kbps 300ms RTT)",
        source: Source::WebPageTest,
        down_bits_per_s: 1_600_000,
        up_bits_per_s: 768_000,
        rtt_ms: 300,
        source_figures: "bwIn=1600000 bwOut=768000 latency=300",
    },
    Profile {
        name: "mobile-3g-fast",
        title: "Mobile 3G - Fast (1.6 Mbps/768 Kbps 150ms RTT)",
        source: Source::WebPageTest,
        down_bits_per_s: 1_600_000,
        up_bits_per_s: 768_000,
        rtt_ms: 150,
        source_figures: "bwIn=1600000 bwOut=768000 latency=150",
    },
    Profile {
        name: "mobile-3g-slow",
        title: "Mobile 3G - Slow (780 Kbps/330 Kbps 200ms RTT)",
        source: Source::WebPageTest,
        down_bits_per_s: 780_000,
        up_bits_per_s: 330_000,
        rtt_ms: 200,
        source_figures: "bwIn=780000 bwOut=330000 latency=200",
    },
    Profile {
        name: "edge",
        title: "Mobile Edge (240 Kbps/200 Kbps 840ms RTT)",
        source: Source::WebPageTest,
        down_bits_per_s: 240_000,
        up_bits_per_s: 200_000,
        rtt_ms: 840,
        source_figures: "bwIn=240000 bwOut=200000 latency=840",
    },
    Profile {
        name: "2g",
        title: "Mobile 2G (35 Kbps/32 Kbps 1300ms RTT)",
        source: Source::WebPageTest,
        down_bits_per_s: 35_000,
        up_bits_per_s: 32_000,
        rtt_ms: 1300,
        source_figures: "bwIn=35000 bwOut=32000 latency=1300",
    },
];

/// The profile called `name` (case-insensitive), or a message that quotes it and lists every
/// known name.
pub fn find(name: &str) -> Result<&'static Profile, String> {
    PROFILES
        .iter()
        .find(|p| p.name.eq_ignore_ascii_case(name.trim()))
        .ok_or_else(|| {
            let names: Vec<&str> = PROFILES.iter().map(|p| p.name).collect();
            format!(
                "unknown profile '{name}' (known: {}; see `latencylab profiles`)",
                names.join(", ")
            )
        })
}

impl Profile {
    /// The link settings it stands for, as (direction or both, key of
    /// [`crate::Setting::parse`], value): each direction's rate and the round trip.
    pub fn settings(&self) -> Vec<(Option<Side>, &'static str, String)> {
        vec![
            (
                Some(Side::Down),
                "rate",
                format!("{}bit", self.down_bits_per_s),
            ),
            (Some(Side::Up), "rate", format!("{}bit", self.up_bits_per_s)),
            (None, "rtt", format!("{}ms", self.rtt_ms)),
        ]
    }

    /// One line of `latencylab profiles`.
    pub fn line(&self) -> String {
        let rate = |b: u64| {
            if b >= 1_000_000 {
                format!("{:.3} Mbit/s", b as f64 / 1e6)
            } else {
                format!("{:.1} kbit/s", b as f64 / 1e3)
            }
        };
        format!(
            "{:<15} {:>14} down {:>14} up {:>5} ms RTT   {}: {}",
            self.name,
            rate(self.down_bits_per_s),
            rate(self.up_bits_per_s),
            self.rtt_ms,
            self.source.name(),
            self.title
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_lowercase_words() {
        for (i, p) in PROFILES.iter().enumerate() {
            assert!(
                p.name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
                "{}",
                p.name
            );
            assert!(
                PROFILES[..i].iter().all(|q| q.name != p.name),
                "{} twice",
                p.name
            );
        }
    }

    #[test]
    fn chrome_3g_is_the_sources_nominal_rate_and_target_rtt() {
        let p = find("3G").unwrap();
        assert_eq!(
            (p.down_bits_per_s, p.up_bits_per_s, p.rtt_ms),
            (500_000, 500_000, 400)
        );
        assert_eq!(
            p.settings(),
            vec![
                (Some(Side::Down), "rate", "500000bit".to_string()),
                (Some(Side::Up), "rate", "500000bit".to_string()),
                (None, "rtt", "400ms".to_string()),
            ]
        );
        // Firefox counts in units of 1024 bits per second.
        assert_eq!(find("good-3g").unwrap().down_bits_per_s, 1_572_864);
    }

    #[test]
    fn an_unknown_name_is_quoted_with_every_known_one() {
        let e = find("5g").unwrap_err();
        assert!(e.starts_with("unknown profile '5g' (known: 3g, slow-4g, fast-4g, gprs"));
        assert!(e.contains("edge, 2g;"), "{e}");
    }

    #[test]
    fn every_profiles_settings_parse() {
        for p in PROFILES {
            for (_, key, value) in p.settings() {
                crate::Setting::parse(
                    key,
                    &value,
                    std::path::Path::new(""),
                    &crate::setting::no_files,
                )
                .unwrap_or_else(|e| panic!("{}: {key} {value}: {e}", p.name));
            }
        }
    }
}
