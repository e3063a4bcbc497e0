//! Medians and spreads of repeated measurements, and how to print them.

use std::fmt;

/// A set of measurements of one quantity (seconds per operation, bytes, ...)
/// summarised by its median and interquartile range.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// The median.
    pub median: f64,
    /// The 25th percentile.
    pub p25: f64,
    /// The 75th percentile.
    pub p75: f64,
    /// How many measurements.
    pub n: usize,
}

impl Summary {
    /// Summarises `values` (`None` when empty).
    pub fn of(values: &[f64]) -> Option<Summary> {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        Some(Summary { median: quantile(&v, 0.5), p25: quantile(&v, 0.25), p75: quantile(&v, 0.75), n: v.len() })
    }

    /// One measurement.
    pub fn single(value: f64) -> Summary {
        Summary { median: value, p25: value, p75: value, n: 1 }
    }

    /// The summary of `1 / x` (a time per operation turned into a rate):
    /// the quartiles swap.
    pub fn inverse(&self) -> Summary {
        Summary { median: 1.0 / self.median, p25: 1.0 / self.p75, p75: 1.0 / self.p25, n: self.n }
    }

    /// Every value scaled by `k`.
    pub fn scaled(&self, k: f64) -> Summary {
        Summary { median: self.median * k, p25: self.p25 * k, p75: self.p75 * k, n: self.n }
    }

    /// The interquartile range as a share of the median (0.05 = ±2.5%).
    pub fn relative_spread(&self) -> f64 {
        if self.median == 0.0 {
            0.0
        } else {
            (self.p75 - self.p25) / self.median
        }
    }
}

/// Linear interpolation between closest ranks of a sorted slice.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    let pos = q * (sorted.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

/// How to print a quantity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Seconds, printed in s, ms, µs or ns.
    Seconds,
    /// Operations per second.
    PerSecond,
    /// Bytes, printed in MiB.
    Bytes,
}

/// A value in `unit`, with three significant digits.
pub fn format_value(value: f64, unit: Unit) -> String {
    match unit {
        Unit::Seconds => {
            let (v, u) = if value >= 1.0 {
                (value, "s")
            } else if value >= 1e-3 {
                (value * 1e3, "ms")
            } else if value >= 1e-6 {
                (value * 1e6, "µs")
            } else {
                (value * 1e9, "ns")
            };
            format!("{} {u}", sig3(v))
        }
        Unit::PerSecond => {
            let (v, u) = if value >= 1e6 {
                (value / 1e6, "M/s")
            } else if value >= 1e3 {
                (value / 1e3, "k/s")
            } else {
                (value, "/s")
            };
            format!("{}{u}", sig3(v))
        }
        Unit::Bytes => format!("{} MiB", sig3(value / (1024.0 * 1024.0))),
    }
}

fn sig3(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// A summary printed as `median (IQR p25–p75, n=N)`.
pub struct Shown(pub Summary, pub Unit);

impl fmt::Display for Shown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Shown(s, unit) = self;
        if s.n <= 1 {
            return write!(f, "{}", format_value(s.median, *unit));
        }
        write!(f, "{} (IQR {}–{}, n={})", format_value(s.median, *unit), format_value(s.p25, *unit), format_value(s.p75, *unit), s.n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_quartiles() {
        let s = Summary::of(&[5.0, 1.0, 3.0, 2.0, 4.0]).unwrap();
        assert_eq!((s.median, s.p25, s.p75, s.n), (3.0, 2.0, 4.0, 5));
        let even = Summary::of(&[1.0, 2.0, 3.0, 4.0]).unwrap();
        assert_eq!(even.median, 2.5);
        assert!(Summary::of(&[]).is_none());
        // Quartiles of [0.25, 0.5, 1.0] are 0.375 and 0.75; inverted, they swap.
        let r = Summary::of(&[0.5, 0.25, 1.0]).unwrap().inverse();
        assert_eq!(r.median, 2.0);
        assert!((r.p25 - 1.0 / 0.75).abs() < 1e-12 && (r.p75 - 1.0 / 0.375).abs() < 1e-12, "{r:?}");
    }

    #[test]
    fn formats_units() {
        assert_eq!(format_value(0.0123, Unit::Seconds), "12.3 ms");
        assert_eq!(format_value(2.5e-6, Unit::Seconds), "2.50 µs");
        assert_eq!(format_value(425.0, Unit::PerSecond), "425/s");
        assert_eq!(format_value(123_456.0, Unit::PerSecond), "123k/s");
        assert_eq!(format_value(10.0 * 1024.0 * 1024.0, Unit::Bytes), "10.0 MiB");
    }
}
