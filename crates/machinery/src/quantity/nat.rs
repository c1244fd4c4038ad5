//! Arbitrary-precision non-negative integers: the `big.nat` magnitude of an `inf.Dec`.

use std::cmp::Ordering;

/// Most decimal digits a scaling may add before [`Nat::mul_pow10`] refuses: far beyond any
/// quantity a person writes, small enough that a hostile exponent cannot exhaust memory.
pub(super) const MAX_POW10: u32 = 4096;

/// A non-negative big integer as little-endian 64-bit words, like Go's `big.nat` on 64-bit
/// platforms.
///
/// Invariant: normalized, no high zero words (zero is the empty vector, Go's nil).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(super) struct Nat(pub(super) Vec<u64>);

impl Nat {
    pub(super) fn from_u64(v: u64) -> Self {
        let mut n = Nat(vec![v]);
        n.norm();
        n
    }

    /// Reads ASCII decimal digits (the caller filters out anything else).
    pub(super) fn from_decimal(digits: impl Iterator<Item = u8>) -> Self {
        let mut n = Nat(Vec::new());
        for d in digits {
            n.mul_add_small(10, u64::from(d - b'0'));
        }
        n
    }

    fn norm(&mut self) {
        while self.0.last() == Some(&0) {
            self.0.pop();
        }
    }

    pub(super) fn is_zero(&self) -> bool {
        self.0.is_empty()
    }

    pub(super) fn mul_add_small(&mut self, m: u64, a: u64) {
        let mut carry = u128::from(a);
        for w in &mut self.0 {
            let t = u128::from(*w) * u128::from(m) + carry;
            *w = t as u64;
            carry = t >> 64;
        }
        if carry != 0 {
            self.0.push(carry as u64);
        }
        self.norm();
    }

    pub(super) fn mul_small(&mut self, m: u64) {
        self.mul_add_small(m, 0);
    }

    /// Multiplies by `10^k`; `false` (and unchanged) when `k` exceeds [`MAX_POW10`].
    #[must_use]
    pub(super) fn mul_pow10(&mut self, mut k: u32) -> bool {
        if k > MAX_POW10 {
            return false;
        }
        if self.is_zero() {
            return true;
        }
        while k > 0 {
            let step = k.min(19);
            self.mul_small(10u64.pow(step));
            k -= step;
        }
        true
    }

    /// Divides by `d` (non-zero), returning the remainder.
    pub(super) fn div_small(&mut self, d: u64) -> u64 {
        let mut rem: u128 = 0;
        for w in self.0.iter_mut().rev() {
            let cur = (rem << 64) | u128::from(*w);
            *w = (cur / u128::from(d)) as u64;
            rem = cur % u128::from(d);
        }
        self.norm();
        rem as u64
    }

    /// The remainder of a division by `d` (non-zero), leaving `self` unchanged.
    pub(super) fn rem_small(&self, d: u64) -> u64 {
        let mut rem: u128 = 0;
        for w in self.0.iter().rev() {
            rem = ((rem << 64) | u128::from(*w)) % u128::from(d);
        }
        rem as u64
    }

    /// Divides by `10^k` rounding away from zero (`inf.RoundUp`); returns whether it was exact.
    pub(super) fn div_pow10_round_up(&mut self, mut k: u32) -> bool {
        let mut inexact = false;
        while k > 0 && !self.is_zero() {
            let step = k.min(19);
            inexact |= self.div_small(10u64.pow(step)) != 0;
            k -= step;
        }
        if inexact {
            self.mul_add_small(1, 1);
        }
        !inexact
    }

    /// Divides out every factor `f` (`removeBigIntFactors`), returning how many there were.
    pub(super) fn remove_factors(&mut self, f: u64) -> i32 {
        let mut times: i32 = 0;
        while !self.is_zero() && self.rem_small(f) == 0 {
            self.div_small(f);
            times = times.wrapping_add(1);
        }
        times
    }

    pub(super) fn cmp(&self, other: &Nat) -> Ordering {
        self.0
            .len()
            .cmp(&other.0.len())
            .then_with(|| self.0.iter().rev().cmp(other.0.iter().rev()))
    }

    /// The decimal digits (`big.Int.String` of the magnitude).
    pub(super) fn to_decimal(&self) -> String {
        const CHUNK: u64 = 10_000_000_000_000_000_000;
        if self.is_zero() {
            return "0".to_owned();
        }
        let mut n = self.clone();
        let mut chunks = Vec::new();
        while !n.is_zero() {
            chunks.push(n.div_small(CHUNK));
        }
        let mut out = String::with_capacity(chunks.len() * 19);
        for (i, c) in chunks.iter().rev().enumerate() {
            if i == 0 {
                out.push_str(&c.to_string());
            } else {
                out.push_str(&format!("{c:019}"));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_round_trip() {
        for s in [
            "0",
            "7",
            "18446744073709551616",
            "12345678901234567890123456789012345",
        ] {
            let n = Nat::from_decimal(s.bytes());
            assert_eq!(n.to_decimal(), s, "{s}");
        }
    }

    #[test]
    fn scaling() {
        let mut n = Nat::from_u64(1234);
        assert!(n.mul_pow10(20));
        assert_eq!(n.to_decimal(), "123400000000000000000000");
        assert_eq!(n.remove_factors(10), 20);
        assert_eq!(n.to_decimal(), "1234");
        assert!(!n.div_pow10_round_up(2));
        assert_eq!(n.to_decimal(), "13");
        assert!(!n.mul_pow10(MAX_POW10 + 1), "hostile exponents are refused");
        let mut m = Nat::from_u64(5);
        assert!(
            !m.div_pow10_round_up(4_000_000_000),
            "tiny values round up to one unit"
        );
        assert_eq!(m.to_decimal(), "1");
    }
}
