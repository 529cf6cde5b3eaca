//! Random loss on entry to a link: Bernoulli, or the Gilbert-Elliott model as netem has it.
//!
//! Syntax follows netem (tc-netem(8), "LOSS"): `5%` is Bernoulli; `gemodel P [R [1-H [1-K]]]`
//! is Gilbert-Elliott with P the good→bad and R the bad→good transition probability, 1-H the
//! loss probability in the bad state and 1-K in the good state. Defaults as iproute2's q_netem.c
//! sets them: R = 100 %, 1-H = 100 %, 1-K = 0 %. As in netem's `loss_gilb_ell`, each packet
//! first decides the state transition, then whether it is lost, using the loss probability of the
//! state the packet found the chain in.

use std::fmt;

use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// A loss model's parameters, probabilities in [0, 1].
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum LossModel {
    None,
    Bernoulli {
        p: f64,
    },
    GilbertElliott {
        p: f64,
        r: f64,
        one_minus_h: f64,
        one_minus_k: f64,
    },
}

/// The chain's state (only Gilbert-Elliott has one).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum LossState {
    #[default]
    Good,
    Bad,
}

impl LossModel {
    /// Decides the fate of one packet; `true` means lost.
    pub fn lose(&self, state: &mut LossState, rng: &mut ChaCha8Rng) -> bool {
        match *self {
            LossModel::None => false,
            LossModel::Bernoulli { p } => p > 0.0 && rng.gen::<f64>() < p,
            LossModel::GilbertElliott {
                p,
                r,
                one_minus_h,
                one_minus_k,
            } => match *state {
                LossState::Good => {
                    if rng.gen::<f64>() < p {
                        *state = LossState::Bad;
                    }
                    rng.gen::<f64>() < one_minus_k
                }
                LossState::Bad => {
                    if rng.gen::<f64>() < r {
                        *state = LossState::Good;
                    }
                    rng.gen::<f64>() < one_minus_h
                }
            },
        }
    }

    /// The long-run loss rate: for Gilbert-Elliott, π_G·(1-K) + π_B·(1-H) with the stationary
    /// probabilities π_B = P/(P+R), π_G = R/(P+R).
    pub fn mean_loss(&self) -> f64 {
        match *self {
            LossModel::None => 0.0,
            LossModel::Bernoulli { p } => p,
            LossModel::GilbertElliott {
                p,
                r,
                one_minus_h,
                one_minus_k,
            } => {
                if p + r == 0.0 {
                    return one_minus_k;
                }
                let pi_bad = p / (p + r);
                (1.0 - pi_bad) * one_minus_k + pi_bad * one_minus_h
            }
        }
    }

    /// Parses netem loss syntax: `1%`, `0.5%`, `gemodel 1% 10% 70% 0.1%`.
    pub fn parse(s: &str) -> Result<LossModel, String> {
        let words: Vec<&str> = s.split_whitespace().collect();
        let expected = "try 1%, 0.5%, gemodel 1% 10% [70% [0.1%]]";
        let pct = |w: &str| -> Result<f64, String> {
            let v = w.strip_suffix('%').and_then(|n| n.parse::<f64>().ok());
            match v {
                Some(v) if (0.0..=100.0).contains(&v) => Ok(v / 100.0),
                _ => Err(format!("cannot read '{w}' as a percentage ({expected})")),
            }
        };
        match words.as_slice() {
            [] => Err(format!("empty loss spec ({expected})")),
            [one] => Ok(match pct(one)? {
                0.0 => LossModel::None,
                p => LossModel::Bernoulli { p },
            }),
            ["gemodel", rest @ ..] if (1..=4).contains(&rest.len()) => {
                let p = pct(rest[0])?;
                let r = rest.get(1).map(|w| pct(w)).transpose()?.unwrap_or(1.0);
                let one_minus_h = rest.get(2).map(|w| pct(w)).transpose()?.unwrap_or(1.0);
                let one_minus_k = rest.get(3).map(|w| pct(w)).transpose()?.unwrap_or(0.0);
                Ok(LossModel::GilbertElliott {
                    p,
                    r,
                    one_minus_h,
                    one_minus_k,
                })
            }
            ["gemodel", ..] => Err(format!("gemodel takes 1 to 4 percentages ({expected})")),
            [first, ..] => Err(format!("cannot read loss model '{first}' ({expected})")),
        }
    }
}

impl fmt::Display for LossModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pc = |v: f64| format!("{}%", (v * 1e6).round() / 1e4);
        match *self {
            LossModel::None => f.write_str("0%"),
            LossModel::Bernoulli { p } => f.write_str(&pc(p)),
            LossModel::GilbertElliott {
                p,
                r,
                one_minus_h,
                one_minus_k,
            } => write!(
                f,
                "gemodel {} {} {} {}",
                pc(p),
                pc(r),
                pc(one_minus_h),
                pc(one_minus_k)
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn run(m: LossModel, n: usize, seed: u64) -> (f64, f64) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut st = LossState::Good;
        let (mut lost, mut bad) = (0usize, 0usize);
        for _ in 0..n {
            if st == LossState::Bad {
                bad += 1;
            }
            if m.lose(&mut st, &mut rng) {
                lost += 1;
            }
        }
        (lost as f64 / n as f64, bad as f64 / n as f64)
    }

    #[test]
    fn bernoulli_loses_its_percentage() {
        let (loss, _) = run(LossModel::parse("5%").unwrap(), 200_000, 1);
        assert!((loss - 0.05).abs() < 0.003, "{loss}");
        assert_eq!(run(LossModel::parse("0%").unwrap(), 1000, 1).0, 0.0);
        assert_eq!(run(LossModel::parse("100%").unwrap(), 1000, 1).0, 1.0);
    }

    #[test]
    fn gilbert_elliott_state_probabilities_match_the_chain() {
        // P = 1 %, R = 10 %: π_B = 0.01 / 0.11 ≈ 0.0909; loss 70 % in bad, 0.1 % in good.
        let m = LossModel::parse("gemodel 1% 10% 70% 0.1%").unwrap();
        let (loss, bad) = run(m, 400_000, 7);
        let pi_bad = 0.01 / 0.11;
        assert!((bad - pi_bad).abs() < 0.01, "time in bad {bad} vs {pi_bad}");
        assert!(
            (loss - m.mean_loss()).abs() < 0.01,
            "{loss} vs {}",
            m.mean_loss()
        );
        assert!((m.mean_loss() - (0.9091 * 0.001 + 0.0909 * 0.7)).abs() < 1e-3);
    }

    #[test]
    fn gilbert_elliott_losses_come_in_bursts() {
        // Same mean loss, but bursty: consecutive losses are far more likely than under Bernoulli.
        let m = LossModel::parse("gemodel 1% 20%").unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut st = LossState::Good;
        let (mut pairs, mut losses, mut prev) = (0, 0, false);
        for _ in 0..200_000 {
            let l = m.lose(&mut st, &mut rng);
            if l && prev {
                pairs += 1;
            }
            losses += l as usize;
            prev = l;
        }
        let p_next_given_lost = pairs as f64 / losses as f64;
        assert!(p_next_given_lost > 0.7, "{p_next_given_lost}");
    }

    #[test]
    fn gemodel_defaults_and_errors_follow_netem() {
        assert_eq!(
            LossModel::parse("gemodel 2%").unwrap(),
            LossModel::GilbertElliott {
                p: 0.02,
                r: 1.0,
                one_minus_h: 1.0,
                one_minus_k: 0.0
            }
        );
        assert!(LossModel::parse("5")
            .unwrap_err()
            .contains("cannot read '5'"));
        assert!(LossModel::parse("150%").is_err());
        assert!(LossModel::parse("gemodel").is_err());
        assert!(LossModel::parse("random 5%")
            .unwrap_err()
            .contains("'random'"));
        let m = LossModel::parse("gemodel 1% 10% 70% 0.1%").unwrap();
        assert_eq!(LossModel::parse(&m.to_string()).unwrap(), m);
    }
}
