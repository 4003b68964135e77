//! MT19937, the generator behind CPython's `random.Random`, so that a link draws exactly the numbers
//! a `random.Random` in the same state would (the model's random loss is defined by that stream, and
//! the golden runs pin it). Its state is handed over from Python (`Random.getstate()`: 624 words and
//! the position), so seeding (CPython hashes str seeds with SHA-512) stays on the Python side.
//! `random()` is CPython's `random_random`: 53 bits from two 32-bit outputs.

const N: usize = 624;
const M: usize = 397;
const MATRIX_A: u32 = 0x9908_b0df;
const UPPER_MASK: u32 = 0x8000_0000;
const LOWER_MASK: u32 = 0x7fff_ffff;

#[derive(Clone)]
pub struct Mt19937 {
    mt: [u32; N],
    mti: usize,
}

impl Mt19937 {
    /// From `Random.getstate()[1]`: 624 state words followed by the position (0..=624).
    pub fn from_state(words: &[u32], pos: usize) -> Result<Self, String> {
        if words.len() != N || pos > N {
            return Err(format!("MT19937 state needs {N} words and a position <= {N}"));
        }
        let mut mt = [0u32; N];
        mt.copy_from_slice(words);
        Ok(Self { mt, mti: pos })
    }

    /// `init_genrand` (the reference seeding; used by the tests' known-answer check).
    pub fn from_seed_u32(seed: u32) -> Self {
        let mut mt = [0u32; N];
        mt[0] = seed;
        for i in 1..N {
            mt[i] = 1_812_433_253u32.wrapping_mul(mt[i - 1] ^ (mt[i - 1] >> 30)).wrapping_add(i as u32);
        }
        Self { mt, mti: N }
    }

    /// The state as `Random.setstate` takes it back (words, position).
    pub fn state(&self) -> (Vec<u32>, usize) {
        (self.mt.to_vec(), self.mti)
    }

    #[inline]
    pub fn next_u32(&mut self) -> u32 {
        if self.mti >= N {
            self.twist();
        }
        let mut y = self.mt[self.mti];
        self.mti += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    fn twist(&mut self) {
        let mag = |y: u32| if y & 1 == 0 { 0 } else { MATRIX_A };
        for kk in 0..N - M {
            let y = (self.mt[kk] & UPPER_MASK) | (self.mt[kk + 1] & LOWER_MASK);
            self.mt[kk] = self.mt[kk + M] ^ (y >> 1) ^ mag(y);
        }
        for kk in N - M..N - 1 {
            let y = (self.mt[kk] & UPPER_MASK) | (self.mt[kk + 1] & LOWER_MASK);
            self.mt[kk] = self.mt[kk + M - N] ^ (y >> 1) ^ mag(y);
        }
        let y = (self.mt[N - 1] & UPPER_MASK) | (self.mt[0] & LOWER_MASK);
        self.mt[N - 1] = self.mt[M - 1] ^ (y >> 1) ^ mag(y);
        self.mti = 0;
    }

    /// CPython's `random()`: a uniform float in [0, 1) with 53 random bits.
    #[inline]
    pub fn random(&mut self) -> f64 {
        let a = (self.next_u32() >> 5) as f64;
        let b = (self.next_u32() >> 6) as f64;
        (a * 67_108_864.0 + b) * (1.0 / 9_007_199_254_740_992.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_outputs_of_init_genrand_5489() {
        // The first outputs of the reference mt19937ar.c seeded with init_genrand(5489).
        let mut g = Mt19937::from_seed_u32(5489);
        let first: Vec<u32> = (0..3).map(|_| g.next_u32()).collect();
        assert_eq!(first, vec![3_499_211_612, 581_869_302, 3_890_346_734]);
    }

    #[test]
    fn state_round_trips() {
        let mut g = Mt19937::from_seed_u32(1);
        g.random();
        let (w, p) = g.state();
        let mut h = Mt19937::from_state(&w, p).unwrap();
        assert_eq!(g.random().to_bits(), h.random().to_bits());
        assert!(Mt19937::from_state(&w[..10], 0).is_err());
    }
}
