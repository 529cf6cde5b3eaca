//! Small statistics the programs and the demos share: nearest-rank percentiles and a meter
//! that cuts a byte count into fixed reporting intervals.
//!
//! Pure: time is passed in. It neither stores samples for the caller nor writes records.

use wire::{Duration, Instant};

/// The value below which `p` percent of the samples lie, by the nearest-rank method (the
/// smallest sample with at least `p` % of the samples at or below it). `None` without samples.
/// `sorted` must be in ascending order.
pub fn percentile_sorted(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let p = p.clamp(0.0, 100.0);
    // rank = ceil(p/100 * n), at least 1.
    let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    Some(sorted[rank.min(sorted.len()) - 1])
}

/// The percentiles every report prints.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Percentiles {
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
    pub count: usize,
}

impl Percentiles {
    /// Percentiles of unsorted samples (NaNs are ignored); `None` without samples.
    pub fn of(samples: &[f64]) -> Option<Percentiles> {
        let mut v: Vec<f64> = samples.iter().copied().filter(|x| !x.is_nan()).collect();
        v.sort_by(f64::total_cmp);
        Some(Percentiles {
            p50: percentile_sorted(&v, 50.0)?,
            p95: percentile_sorted(&v, 95.0)?,
            p99: percentile_sorted(&v, 99.0)?,
            max: *v.last()?,
            count: v.len(),
        })
    }
}

/// Goodput in Mbit/s of `bytes` over `over`; zero for an empty span.
pub fn mbps(bytes: u64, over: Duration) -> f64 {
    let s = over.as_secs_f64();
    if s <= 0.0 {
        0.0
    } else {
        bytes as f64 * 8.0 / s / 1e6
    }
}

/// One finished reporting interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IntervalBytes {
    /// The end of the interval.
    pub end: Instant,
    pub bytes: u64,
}

/// Cuts a stream of byte counts into intervals `[start + k·interval, start + (k+1)·interval)`.
/// Bytes are attributed to the interval in which they were counted; an interval with no
/// bytes still appears (as zero), so that a stalled transfer shows as a run of zeros.
#[derive(Clone, Debug)]
pub struct IntervalMeter {
    interval: Duration,
    next_end: Instant,
    bytes: u64,
    total: u64,
}

impl IntervalMeter {
    pub fn new(start: Instant, interval: Duration) -> IntervalMeter {
        assert!(!interval.is_zero(), "a reporting interval must be positive");
        IntervalMeter {
            interval,
            next_end: start + interval,
            bytes: 0,
            total: 0,
        }
    }

    /// Closes every interval that ended at or before `now`, in order.
    pub fn poll(&mut self, now: Instant) -> Vec<IntervalBytes> {
        let mut done = Vec::new();
        // Bounded: a caller that slept for hours gets one zero line per missed interval,
        // capped so that a clock jump cannot allocate without limit.
        while now >= self.next_end && done.len() < 100_000 {
            done.push(IntervalBytes {
                end: self.next_end,
                bytes: self.bytes,
            });
            self.bytes = 0;
            self.next_end += self.interval;
        }
        done
    }

    /// Counts `bytes` at `now`, first closing the intervals that ended before it.
    pub fn add(&mut self, now: Instant, bytes: u64) -> Vec<IntervalBytes> {
        let done = self.poll(now);
        self.bytes += bytes;
        self.total += bytes;
        done
    }

    pub fn total(&self) -> u64 {
        self.total
    }
    pub fn interval(&self) -> Duration {
        self.interval
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles_pick_real_samples() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        let p = Percentiles::of(&v).unwrap();
        assert_eq!(
            (p.p50, p.p95, p.p99, p.max, p.count),
            (50.0, 95.0, 99.0, 100.0, 100)
        );
        let few = Percentiles::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((few.p50, few.p99), (2.0, 3.0));
        assert!(Percentiles::of(&[]).is_none());
        assert!(Percentiles::of(&[f64::NAN]).is_none());
    }

    #[test]
    fn meter_attributes_bytes_to_their_interval_and_reports_empty_ones() {
        let s = Duration::from_secs(1);
        let mut m = IntervalMeter::new(Instant::ZERO, s);
        assert!(m.add(Instant::from_millis(100), 10).is_empty());
        assert!(m.add(Instant::from_millis(900), 5).is_empty());
        let done = m.add(Instant::from_millis(3500), 7);
        assert_eq!(
            done,
            vec![
                IntervalBytes {
                    end: Instant::from_secs(1),
                    bytes: 15
                },
                IntervalBytes {
                    end: Instant::from_secs(2),
                    bytes: 0
                },
                IntervalBytes {
                    end: Instant::from_secs(3),
                    bytes: 0
                },
            ]
        );
        assert_eq!(
            m.poll(Instant::from_secs(4)),
            vec![IntervalBytes {
                end: Instant::from_secs(4),
                bytes: 7
            }]
        );
        assert_eq!(m.total(), 22);
    }

    #[test]
    fn goodput_is_bits_per_second_in_millions() {
        assert_eq!(mbps(1_250_000, Duration::from_secs(1)), 10.0);
        assert_eq!(mbps(5, Duration::ZERO), 0.0);
    }
}
