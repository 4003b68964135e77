//! Piecewise-constant series over integer nanoseconds, as `workbench.experiment._series.StepSeries`:
//! `values[i]` holds from `t_ns[i]` until `t_ns[i + 1]`, the last value forever, the first also
//! before `t_ns[0]`.

/// A validated step series (non-empty, equally long, `t_ns` strictly increasing).
#[derive(Clone, Debug, PartialEq)]
pub struct StepSeries {
    pub t_ns: Vec<i64>,
    pub values: Vec<f64>,
}

impl StepSeries {
    pub fn new(t_ns: Vec<i64>, values: Vec<f64>) -> Result<Self, String> {
        if t_ns.is_empty() || t_ns.len() != values.len() {
            return Err("StepSeries needs equally long, non-empty t_ns and values".into());
        }
        if t_ns.windows(2).any(|w| w[1] <= w[0]) {
            return Err("StepSeries t_ns must be strictly increasing".into());
        }
        Ok(Self { t_ns, values })
    }

    pub fn constant(value: f64) -> Self {
        Self { t_ns: vec![0], values: vec![value] }
    }

    /// Index of the step in force at `t_ns` (0 before the first change): bisect_right - 1, at least 0.
    pub fn index_at(&self, t_ns: i64) -> usize {
        self.t_ns.partition_point(|&t| t <= t_ns).saturating_sub(1)
    }

    pub fn at(&self, t_ns: i64) -> f64 {
        self.values[self.index_at(t_ns)]
    }

    /// All values equal (as `StepSeries.is_constant` in Python, a set of one: 0.0 and -0.0 are one value).
    pub fn is_constant(&self) -> bool {
        self.values.iter().all(|&v| v == self.values[0])
    }
}

/// Walks a series forward in time, O(1) amortised per lookup (link times are monotone). It never
/// moves back: a lookup earlier than the last one returns the last one's value.
#[derive(Clone, Debug, Default)]
pub struct Cursor {
    i: usize,
}

impl Cursor {
    #[inline]
    pub fn at(&mut self, s: &StepSeries, t_ns: i64) -> f64 {
        let n = s.t_ns.len();
        let mut i = self.i;
        while i + 1 < n && s.t_ns[i + 1] <= t_ns {
            i += 1;
        }
        self.i = i;
        s.values[i]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_and_value_follow_the_steps() {
        let s = StepSeries::new(vec![10, 20, 30], vec![1.0, 2.0, 3.0]).unwrap();
        assert_eq!(s.index_at(0), 0);
        assert_eq!(s.index_at(19), 0);
        assert_eq!(s.index_at(20), 1);
        assert_eq!(s.at(1_000), 3.0);
        let mut c = Cursor::default();
        assert_eq!(c.at(&s, 25), 2.0);
        assert_eq!(c.at(&s, 5), 2.0); // never moves back
        assert_eq!(c.at(&s, 30), 3.0);
    }

    #[test]
    fn invalid_series_are_refused() {
        assert!(StepSeries::new(vec![], vec![]).is_err());
        assert!(StepSeries::new(vec![0, 0], vec![1.0, 2.0]).is_err());
        assert!(StepSeries::new(vec![0], vec![1.0, 2.0]).is_err());
    }
}
