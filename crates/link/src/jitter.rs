//! Delay variation as netem draws it: a distribution, a spread, and optional correlation.
//!
//! netem (tc-netem(8), `delay TIME JITTER [CORRELATION] [distribution DIST]`) adds to each
//! packet's delay `μ + σ·t`, where σ is the jitter and `t` is read from a table of the chosen
//! distribution's inverse CDF at a (possibly correlated) uniform random index. iproute2's tables
//! (`maketable.c`) hold values in [-4, 4] (scaled by NETEM_DIST_SCALE = 8192), so every
//! distribution is cut at ±4σ. Here the inverse CDFs are computed from their formulas rather
//! than read from iproute2's files:
//!
//! - `uniform`: t = 2u − 1, the ±σ band netem uses when no table is given;
//! - `normal`: t = Φ⁻¹(u), the standard normal;
//! - `pareto`: t = (4/3)·(u^(−1/3) − 1.5), iproute2's `pareto.c` (shape α = 3, scale 1, shifted to
//!   mean 0 and stretched by 4/3);
//! - `paretonormal`: t = ¼·Φ⁻¹(u) + ¾·pareto(u), iproute2's `paretonormal.c` mix, taken at the same
//!   quantile so that the result stays monotone in u (and so correlation still works).
//!
//! Per packet, as in netem, the value comes from a table of the inverse CDF at 4096 evenly
//! spaced quantiles (the size of iproute2's tables, `maketable.c`), so that a draw costs two
//! loads and a multiply instead of a logarithm or a cube root. Where netem takes the nearest
//! entry, here the two neighbours are interpolated linearly, which keeps each value within 0.1 %
//! of σ of the formula for the normal, and within 1 % for the others (at worst in the one cell
//! where a pareto tail meets the 4σ cut, a corner). The table is computed from the formulas above, once, on
//! first use. The eight cells at each end, where the normal's quantile runs off towards ±∞ too
//! steeply for a straight line, are computed exactly (one draw in 256 takes that branch).
//!
//! Correlation is netem's `get_crandom`: u = (1 − ρ)·fresh + ρ·previous. Like netem's, it makes
//! successive delays alike but also narrows the distribution (the sum of two uniforms is not
//! uniform); the docs say so rather than hide it.
//!
//! What this module is not: the decision whether jitter may reorder packets. That belongs to
//! the link (see `Link::launch`), which by default keeps order as a real link does.

use std::fmt;
use std::sync::OnceLock;

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use wire::time::duration_nanos;
use wire::units::{format_duration_exact, parse_time};
use wire::Duration;

use crate::impair::{fmt_pct, parse_pct, round_pct, ParseError};

/// The shape of the delay variation.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum Distribution {
    #[default]
    Uniform,
    Normal,
    Pareto,
    ParetoNormal,
}

impl Distribution {
    pub const ALL: [Distribution; 4] = [
        Distribution::Uniform,
        Distribution::Normal,
        Distribution::Pareto,
        Distribution::ParetoNormal,
    ];

    pub const fn name(self) -> &'static str {
        match self {
            Distribution::Uniform => "uniform",
            Distribution::Normal => "normal",
            Distribution::Pareto => "pareto",
            Distribution::ParetoNormal => "paretonormal",
        }
    }

    /// The standardized value at quantile `u` ∈ [0, 1), as [`Distribution::at_quantile`] but from
    /// the interpolated table: what each packet draws.
    pub fn sample_at(self, u: f64) -> f64 {
        self.read_table((self != Distribution::Uniform).then(|| self.table()), u)
    }

    /// [`Distribution::sample_at`] with the table already found (`None` for uniform, which
    /// has none).
    #[inline]
    fn read_table(self, table: Option<&'static [f32; TABLE_CELLS + 1]>, u: f64) -> f64 {
        let Some(table) = table else {
            return 2.0 * u - 1.0;
        };
        let x = u * TABLE_CELLS as f64;
        // `as` saturates, so a u outside [0, 1) still lands in a cell.
        let i = (x as usize).min(TABLE_CELLS - 1);
        if !(EXACT_CELLS..TABLE_CELLS - EXACT_CELLS).contains(&i) {
            return self.at_quantile(u);
        }
        let (lo, hi) = (f64::from(table[i]), f64::from(table[i + 1]));
        lo + (x - i as f64) * (hi - lo)
    }

    /// The inverse CDF at quantiles i/[`TABLE_CELLS`], i = 0..=TABLE_CELLS, computed on first use.
    fn table(self) -> &'static [f32; TABLE_CELLS + 1] {
        static TABLES: [OnceLock<Box<[f32; TABLE_CELLS + 1]>>; 4] = [const { OnceLock::new() }; 4];
        TABLES[self as usize].get_or_init(|| {
            let mut t = Box::new([0.0; TABLE_CELLS + 1]);
            for (i, v) in t.iter_mut().enumerate() {
                *v = self.at_quantile(i as f64 / TABLE_CELLS as f64) as f32;
            }
            t
        })
    }

    /// The standardized value at quantile `u` ∈ [0, 1], cut to [-4, 4] as netem's tables are:
    /// the exact definition, which the table follows.
    pub fn at_quantile(self, u: f64) -> f64 {
        // Keep u inside (0, 1): the inverse CDFs diverge at the ends.
        let u = u.clamp(1e-12, 1.0 - 1e-12);
        let t = match self {
            Distribution::Uniform => 2.0 * u - 1.0,
            Distribution::Normal => inverse_normal_cdf(u),
            Distribution::Pareto => pareto(u),
            Distribution::ParetoNormal => 0.25 * inverse_normal_cdf(u) + 0.75 * pareto(u),
        };
        t.clamp(-4.0, 4.0)
    }
}

/// Cells of the quantile table: the size of the tables iproute2 ships (`maketable.c`'s
/// TABLESIZE, 16384/4).
pub const TABLE_CELLS: usize = 4096;

/// Cells at each end of the table where the quantile is computed, not interpolated: the
/// normal's quantile bends too sharply there for a straight line (the interpolation's error
/// falls as 1/k² with the cell k from the end, and is below 0.1 % of σ from the eighth on).
const EXACT_CELLS: usize = 8;

/// iproute2's pareto table: shape 3, scale 1, minus its mean 1.5, times 4/3. The table runs its
/// index downwards (large values for small u), so here u → 1 − u keeps the quantile increasing.
fn pareto(u: f64) -> f64 {
    // (1 − u)^(−1/α) with α = 3, as a cube root: a third of the time of `powf`.
    (1.0 / (1.0 - u).cbrt() - 1.5) * (4.0 / 3.0)
}

/// Φ⁻¹(p), the standard normal quantile, by Peter Acklam's rational approximation (relative error
/// below 1.15e-9 over (0, 1)): a central rational function for p in [0.02425, 0.97575] and a tail
/// one in q = √(−2 ln p) outside it.
pub fn inverse_normal_cdf(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    const P_LOW: f64 = 0.02425;
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    if p < P_LOW {
        tail((-2.0 * p.ln()).sqrt())
    } else if p <= 1.0 - P_LOW {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    } else {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    }
}

/// A uniform random stream with netem's correlation: each value leans `rho` on the previous.
#[derive(Clone, Debug, Default)]
pub struct Correlated {
    last: f64,
}

impl Correlated {
    /// The next value in [0, 1).
    pub fn next(&mut self, rho: f64, rng: &mut ChaCha8Rng) -> f64 {
        let fresh: f64 = rng.gen();
        if rho == 0.0 {
            return fresh;
        }
        // netem's get_crandom: answer = (value·(2³² − ρ) + last·ρ) / 2³², in fixed point.
        self.last = (1.0 - rho) * fresh + rho * self.last;
        self.last
    }
}

/// `--jitter TIME [DIST] [CORR%] [reorder]`: the spread σ added around the link's delay.
#[derive(Clone, Debug, PartialEq)]
pub struct Jitter {
    /// σ: the half-width for `uniform`, the standard deviation's unit for the others.
    pub amount: Duration,
    pub distribution: Distribution,
    /// ρ in [0, 1]: how much each draw leans on the one before.
    pub correlation: f64,
    /// netem's behaviour: each packet keeps its own delay, so a packet may overtake the one
    /// ahead of it. Off by default: a real link delivers in order.
    pub reorders: bool,
}

const JITTER_EXPECTED: &str = "a time, then optionally a distribution (uniform, normal, pareto, \
     paretonormal), a correlation percentage and the word reorder, e.g. '5ms normal 25% reorder'";

/// A [`Jitter`] made ready to draw from once per packet: its table found and its σ in
/// nanoseconds taken once, when the link's parameters are set, rather than at each draw (a lazy
/// table's check and a u128 product), and the draw inlined where the link makes it. The same
/// draws as [`Jitter::sample_nanos`].
#[derive(Copy, Clone, Debug)]
pub(crate) struct Sampler {
    distribution: Distribution,
    /// `None` for uniform.
    table: Option<&'static [f32; TABLE_CELLS + 1]>,
    sigma_ns: f64,
    correlation: f64,
    pub(crate) reorders: bool,
}

impl Sampler {
    /// A signed offset from the link's delay, in nanoseconds: σ·t with t from the distribution.
    #[inline]
    pub(crate) fn sample_nanos(&self, state: &mut Correlated, rng: &mut ChaCha8Rng) -> i64 {
        let u = state.next(self.correlation, rng);
        let t = self.distribution.read_table(self.table, u);
        (self.sigma_ns * t) as i64
    }
}

impl Jitter {
    /// A signed offset from the link's delay, in nanoseconds: σ·t with t from the distribution.
    pub fn sample_nanos(&self, state: &mut Correlated, rng: &mut ChaCha8Rng) -> i64 {
        self.sampler().sample_nanos(state, rng)
    }

    /// This jitter, ready to draw from (see [`Sampler`]).
    pub(crate) fn sampler(&self) -> Sampler {
        let d = self.distribution;
        Sampler {
            distribution: d,
            table: (d != Distribution::Uniform).then(|| d.table()),
            sigma_ns: duration_nanos(self.amount) as f64,
            correlation: self.correlation,
            reorders: self.reorders,
        }
    }

    /// Parses `5ms`, `5ms normal`, `5ms pareto 25%`, `5ms normal reorder`.
    pub fn parse(s: &str) -> Result<Jitter, ParseError> {
        let err = || ParseError::new(s, JITTER_EXPECTED);
        let mut words = s.split_whitespace();
        let amount = parse_time(words.next().ok_or_else(err)?).map_err(|_| err())?;
        let mut j = Jitter {
            amount,
            distribution: Distribution::Uniform,
            correlation: 0.0,
            reorders: false,
        };
        let (mut got_dist, mut got_corr) = (false, false);
        for w in words {
            if let Some(d) = Distribution::ALL.iter().find(|d| d.name() == w) {
                if got_dist || got_corr || j.reorders {
                    return Err(err());
                }
                j.distribution = *d;
                got_dist = true;
            } else if w == "reorder" && !j.reorders {
                j.reorders = true;
            } else if w.ends_with('%') && !got_corr && !j.reorders {
                j.correlation = round_pct(parse_pct(w).map_err(|_| err())?);
                got_corr = true;
            } else {
                return Err(err());
            }
        }
        Ok(j)
    }
}

impl fmt::Display for Jitter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {}",
            format_duration_exact(self.amount),
            self.distribution.name()
        )?;
        if self.correlation > 0.0 {
            write!(f, " {}", fmt_pct(self.correlation))?;
        }
        if self.reorders {
            f.write_str(" reorder")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn samples(j: &Jitter, n: usize) -> Vec<f64> {
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        let mut st = Correlated::default();
        (0..n)
            .map(|_| j.sample_nanos(&mut st, &mut rng) as f64 / 1e6)
            .collect()
    }

    fn mean_sd(v: &[f64]) -> (f64, f64) {
        let m = v.iter().sum::<f64>() / v.len() as f64;
        let var = v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / v.len() as f64;
        (m, var.sqrt())
    }

    /// The exact mean and standard deviation of a distribution, by integrating its quantile
    /// function over a fine grid: what the samples must approach.
    fn exact(d: Distribution) -> (f64, f64) {
        let n = 2_000_000;
        let xs: Vec<f64> = (0..n)
            .map(|i| d.at_quantile((i as f64 + 0.5) / n as f64))
            .collect();
        mean_sd(&xs)
    }

    fn jitter(ms: u64, d: Distribution) -> Jitter {
        Jitter {
            amount: Duration::from_millis(ms),
            distribution: d,
            correlation: 0.0,
            reorders: false,
        }
    }

    #[test]
    fn the_normal_quantile_matches_known_values() {
        for (p, z) in [
            (0.5, 0.0),
            (0.975, 1.959_963_985),
            (0.01, -2.326_347_874),
            (0.841_344_746, 1.0),
            (1e-6, -4.753_424_309),
        ] {
            assert!((inverse_normal_cdf(p) - z).abs() < 1e-6, "Φ⁻¹({p})");
        }
    }

    #[test]
    fn each_distribution_has_its_mean_and_spread_over_100000_packets() {
        for d in Distribution::ALL {
            let (m, sd) = mean_sd(&samples(&jitter(5, d), 100_000));
            let (em, esd) = exact(d);
            // In ms, σ = 5 ms: the sample mean within 0.05 ms, the spread within 2 %.
            assert!(
                (m - 5.0 * em).abs() < 0.05,
                "{d:?} mean {m} vs {}",
                5.0 * em
            );
            assert!(
                (sd - 5.0 * esd).abs() < 0.02 * 5.0 * esd,
                "{d:?} sd {sd} vs {}",
                5.0 * esd
            );
        }
        // And the exact figures are the textbook ones where there is a textbook.
        let (_, u_sd) = exact(Distribution::Uniform);
        assert!((u_sd - 1.0 / 3f64.sqrt()).abs() < 1e-4);
        let (n_m, n_sd) = exact(Distribution::Normal);
        assert!(n_m.abs() < 1e-4 && (n_sd - 1.0).abs() < 1e-3, "{n_sd}");
    }

    #[test]
    fn the_interpolated_table_follows_the_formula_within_1_percent_of_sigma() {
        for d in Distribution::ALL {
            let n = 1_000_000;
            let worst = (0..n)
                .map(|i| {
                    let u = (i as f64 + 0.5) / n as f64;
                    (d.sample_at(u) - d.at_quantile(u)).abs()
                })
                .fold(0.0, f64::max);
            // The worst is the cell where a long tail meets the 4σ cut, a corner.
            assert!(worst < 0.01, "{d:?}: {worst}");
            if d == Distribution::Normal {
                assert!(worst < 0.001, "{worst}");
            }
        }
        // At the table's own points it is the formula, to f32's precision.
        let u = 1000.0 / TABLE_CELLS as f64;
        let d = Distribution::Normal;
        assert!((d.sample_at(u) - d.at_quantile(u)).abs() < 1e-6);
    }

    #[test]
    fn uniform_stays_in_its_band_and_pareto_leans_right() {
        let u = samples(&jitter(5, Distribution::Uniform), 100_000);
        assert!(u.iter().all(|x| x.abs() <= 5.0));
        let mut p = samples(&jitter(5, Distribution::Pareto), 100_000);
        p.sort_by(f64::total_cmp);
        let (lo, med, hi) = (p[1_000], p[50_000], p[99_000]);
        // A long right tail: the 99th percentile is far further above the median than the 1st
        // is below it.
        assert!(hi - med > 3.0 * (med - lo), "{lo} {med} {hi}");
        assert!(p.iter().all(|x| x.abs() <= 20.0), "cut at 4σ");
    }

    #[test]
    fn correlation_makes_successive_draws_alike() {
        let lag1 = |rho: f64| {
            let j = Jitter {
                correlation: rho,
                ..jitter(5, Distribution::Normal)
            };
            let v = samples(&j, 100_000);
            let (m, sd) = mean_sd(&v);
            let c: f64 = v.windows(2).map(|w| (w[0] - m) * (w[1] - m)).sum::<f64>();
            c / (v.len() - 1) as f64 / (sd * sd)
        };
        assert!(lag1(0.0).abs() < 0.02, "{}", lag1(0.0));
        assert!(lag1(0.75) > 0.6, "{}", lag1(0.75));
    }

    #[test]
    fn jitter_parses_netem_words_and_prints_back() {
        let j = Jitter::parse("5ms normal 25% reorder").unwrap();
        assert_eq!(j.amount, Duration::from_millis(5));
        assert_eq!(j.distribution, Distribution::Normal);
        assert!((j.correlation - 0.25).abs() < 1e-12);
        assert!(j.reorders);
        assert_eq!(Jitter::parse(&j.to_string()).unwrap(), j);
        assert_eq!(
            Jitter::parse("2ms").unwrap().to_string(),
            "2ms uniform",
            "uniform is the default, as in netem without a table"
        );
        for bad in [
            "",
            "5",
            "5ms gaussian",
            "5ms 25% normal",
            "5ms normal normal",
            "5ms 120%",
        ] {
            let e = Jitter::parse(bad).unwrap_err();
            assert!(e.to_string().contains(&format!("'{bad}'")), "{e}");
        }
    }
}
