//! ECN validation in the spirit of RFC 9000 §13.4.2: a sender that marks its packets ECT
//! checks, on every feedback, that the receiver's ECN counts account for the packets newly
//! reported received, and with the codepoint it sent.
//!
//! Three failures are recognised: *bleaching* (packets sent ECT arrive Not-ECT: a hop clears
//! the field, so congestion can only be signalled by loss), *re-marking* (ECT(1) sent, ECT(0)
//! received or the reverse: a hop rewrites the field, so an L4S queue would not see the L4S
//! identifier), and *not reported* (the peer sends no counts, or fewer than the packets it
//! reports). RFC 9000 validates during a testing period and then keeps checking; so do we, and
//! a failure is final for the call, as for a QUIC path. A CE count is never a failure.
//!
//! Not here: what to do about a failure (the [`crate::Controller`] falls back to Not-ECT).

use std::fmt;

use wire::{Ecn, Instant};

/// Packets counted per received ECN codepoint (newly reported ones, or cumulative).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EcnCounts {
    pub not_ect: u64,
    pub ect1: u64,
    pub ect0: u64,
    pub ce: u64,
}

impl EcnCounts {
    pub fn total(&self) -> u64 {
        self.not_ect + self.ect1 + self.ect0 + self.ce
    }
    /// Counts one received packet.
    pub fn count(&mut self, ecn: Ecn) {
        match ecn {
            Ecn::NotEct => self.not_ect += 1,
            Ecn::Ect1 => self.ect1 += 1,
            Ecn::Ect0 => self.ect0 += 1,
            Ecn::Ce => self.ce += 1,
        }
    }
    /// `self − earlier`, per codepoint, saturating (a stale report gives zeros).
    pub fn since(&self, earlier: &EcnCounts) -> EcnCounts {
        EcnCounts {
            not_ect: self.not_ect.saturating_sub(earlier.not_ect),
            ect1: self.ect1.saturating_sub(earlier.ect1),
            ect0: self.ect0.saturating_sub(earlier.ect0),
            ce: self.ce.saturating_sub(earlier.ce),
        }
    }
}

/// Why validation failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailReason {
    /// ECT sent, Not-ECT received.
    Bleached,
    /// ECT(1) sent and ECT(0) received, or the reverse.
    Remarked,
    /// The peer reported packets without (enough) ECN counts.
    NotReported,
}

impl FailReason {
    pub fn name(self) -> &'static str {
        match self {
            FailReason::Bleached => "bleached",
            FailReason::Remarked => "remarked",
            FailReason::NotReported => "not-reported",
        }
    }
}

impl fmt::Display for FailReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where validation stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EcnState {
    /// Not sending ECT: nothing to validate.
    Disabled,
    /// Sending ECT, fewer than [`TESTING_PACKETS`] packets validated so far.
    Testing,
    /// At least [`TESTING_PACKETS`] packets came back with consistent counts.
    Capable,
    /// Validation failed at `at`; the sender must stop marking.
    Failed { at: Instant, reason: FailReason },
}

/// Packets to validate before calling the path capable (RFC 9000 §13.4.2.1's testing period
/// suggests ten).
pub const TESTING_PACKETS: u64 = 10;

/// The validator of one path.
#[derive(Clone, Debug)]
pub struct EcnValidator {
    state: EcnState,
    validated: u64,
}

impl EcnValidator {
    /// A validator for a sender that marks its packets with `sent`.
    pub fn new(sent: Ecn) -> EcnValidator {
        EcnValidator {
            state: if sent.is_ect() {
                EcnState::Testing
            } else {
                EcnState::Disabled
            },
            validated: 0,
        }
    }

    pub fn state(&self) -> EcnState {
        self.state
    }

    /// Checks one feedback: `acked` packets newly reported received, all sent with `sent`,
    /// and the newly reported counts (`None` if the feedback carried none). Returns the
    /// failure reason the first time validation fails.
    pub fn on_feedback(
        &mut self,
        now: Instant,
        sent: Ecn,
        acked: u64,
        counts: Option<EcnCounts>,
    ) -> Option<FailReason> {
        if matches!(self.state, EcnState::Disabled | EcnState::Failed { .. })
            || !sent.is_ect()
            || acked == 0
        {
            return None;
        }
        let reason = match counts {
            None => Some(FailReason::NotReported),
            Some(c) if c.not_ect > 0 => Some(FailReason::Bleached),
            Some(c) if sent == Ecn::Ect1 && c.ect0 > 0 => Some(FailReason::Remarked),
            Some(c) if sent == Ecn::Ect0 && c.ect1 > 0 => Some(FailReason::Remarked),
            // RFC 9000 §13.4.2.1: the counts must grow by at least the packets newly
            // acknowledged that were sent with ECT.
            Some(c) if c.total() < acked => Some(FailReason::NotReported),
            Some(_) => None,
        };
        match reason {
            Some(r) => {
                self.state = EcnState::Failed { at: now, reason: r };
                Some(r)
            }
            None => {
                self.validated += acked;
                if self.validated >= TESTING_PACKETS {
                    self.state = EcnState::Capable;
                }
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(not_ect: u64, ect1: u64, ect0: u64, ce: u64) -> Option<EcnCounts> {
        Some(EcnCounts {
            not_ect,
            ect1,
            ect0,
            ce,
        })
    }

    #[test]
    fn consistent_counts_with_ce_marks_make_the_path_capable() {
        let mut v = EcnValidator::new(Ecn::Ect1);
        assert_eq!(v.state(), EcnState::Testing);
        let t = Instant::from_millis(10);
        assert_eq!(v.on_feedback(t, Ecn::Ect1, 6, counts(0, 4, 0, 2)), None);
        assert_eq!(v.state(), EcnState::Testing);
        assert_eq!(v.on_feedback(t, Ecn::Ect1, 6, counts(0, 6, 0, 0)), None);
        assert_eq!(v.state(), EcnState::Capable);
    }

    #[test]
    fn each_failure_is_recognised_and_final() {
        let t = Instant::from_millis(10);
        for (sent, c, reason) in [
            (Ecn::Ect1, counts(5, 0, 0, 0), FailReason::Bleached),
            (Ecn::Ect1, counts(0, 3, 2, 0), FailReason::Remarked),
            (Ecn::Ect0, counts(0, 1, 4, 0), FailReason::Remarked),
            (Ecn::Ect1, None, FailReason::NotReported),
            (Ecn::Ect1, counts(0, 2, 0, 0), FailReason::NotReported),
        ] {
            let mut v = EcnValidator::new(sent);
            assert_eq!(v.on_feedback(t, sent, 5, c), Some(reason), "{c:?}");
            assert_eq!(v.state(), EcnState::Failed { at: t, reason });
            // Once failed, later good feedback does not revive it and nothing is re-reported.
            assert_eq!(v.on_feedback(t, sent, 5, counts(0, 5, 0, 0)), None);
            assert!(matches!(v.state(), EcnState::Failed { .. }));
        }
    }

    #[test]
    fn a_sender_that_does_not_mark_has_nothing_to_validate() {
        let mut v = EcnValidator::new(Ecn::NotEct);
        assert_eq!(
            v.on_feedback(Instant::ZERO, Ecn::NotEct, 5, counts(5, 0, 0, 0)),
            None
        );
        assert_eq!(v.state(), EcnState::Disabled);
    }

    #[test]
    fn cumulative_counts_subtract_per_codepoint() {
        let a = EcnCounts {
            not_ect: 1,
            ect1: 10,
            ect0: 0,
            ce: 2,
        };
        let b = EcnCounts {
            not_ect: 1,
            ect1: 15,
            ect0: 0,
            ce: 5,
        };
        assert_eq!(
            b.since(&a),
            EcnCounts {
                not_ect: 0,
                ect1: 5,
                ect0: 0,
                ce: 3
            }
        );
        assert_eq!(a.since(&b).total(), 0);
    }
}
