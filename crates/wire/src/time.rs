//! The one time type of latencylab: a nanosecond [`Instant`] on the lab's monotonic clock, and
//! `std::time::Duration` for spans.
//!
//! Pure crates never read a clock: the `lab` shell reads the monotonic clock once per loop turn
//! and passes the result down as `now`. Simulated-time tests just count nanoseconds from zero.

use std::ops::{Add, AddAssign, Sub};

pub use std::time::Duration;

/// A point in time, in nanoseconds since an arbitrary epoch (the start of a lab or of a test).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(u64);

impl Instant {
    pub const ZERO: Instant = Instant(0);
    /// Later than any time a lab will reach; handy as "never".
    pub const FAR_FUTURE: Instant = Instant(u64::MAX / 2);

    pub const fn from_nanos(ns: u64) -> Instant {
        Instant(ns)
    }
    pub const fn from_micros(us: u64) -> Instant {
        Instant(us * 1_000)
    }
    pub const fn from_millis(ms: u64) -> Instant {
        Instant(ms * 1_000_000)
    }
    pub const fn from_secs(s: u64) -> Instant {
        Instant(s * 1_000_000_000)
    }
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }
    /// `self - earlier`, or zero when `earlier` is later.
    pub fn saturating_duration_since(self, earlier: Instant) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
    pub fn checked_sub(self, d: Duration) -> Option<Instant> {
        self.0.checked_sub(duration_nanos(d)).map(Instant)
    }
}

/// A duration in whole nanoseconds, saturating at `u64::MAX` (584 years).
pub fn duration_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, d: Duration) -> Instant {
        Instant(self.0.saturating_add(duration_nanos(d)))
    }
}

impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}

/// Saturating: an earlier minus a later instant is zero, as a queue's sojourn time never
/// goes negative.
impl Sub<Instant> for Instant {
    type Output = Duration;
    fn sub(self, earlier: Instant) -> Duration {
        self.saturating_duration_since(earlier)
    }
}

impl Sub<Duration> for Instant {
    type Output = Instant;
    fn sub(self, d: Duration) -> Instant {
        Instant(self.0.saturating_sub(duration_nanos(d)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instant_arithmetic_saturates_instead_of_wrapping() {
        let t = Instant::from_millis(5);
        assert_eq!(
            t + Duration::from_micros(250),
            Instant::from_nanos(5_250_000)
        );
        assert_eq!(Instant::from_millis(1) - t, Duration::ZERO);
        assert_eq!(t - Instant::from_millis(2), Duration::from_millis(3));
        assert_eq!(Instant::ZERO - Duration::from_secs(1), Instant::ZERO);
        assert_eq!(
            Instant::FAR_FUTURE + Duration::MAX,
            Instant::from_nanos(u64::MAX)
        );
    }
}
