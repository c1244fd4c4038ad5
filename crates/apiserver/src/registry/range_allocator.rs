//! A bitmap over a range of numbered items (Service IPs, node ports), with upstream's random scan and a compact snapshot for the store, as kube-apiserver's `registry/core/service/allocator`.

use base64::Engine as _;
use rand::Rng;

/// Why an allocation failed (upstream's `allocator` errors).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RangeError {
    /// The item is taken.
    #[error("provided value is already allocated")]
    Allocated,
    /// Every item is taken.
    #[error("range is full")]
    Full,
    /// The item is outside the range.
    #[error("provided value is not in the range")]
    NotInRange,
}

/// A set of allocated items `0..size`, as upstream's `AllocationBitmap`: dynamic allocations
/// start at a random item of the upper band (`offset..size`) and scan forward, then the lower
/// band, so that the lower band stays free for static (requested) allocations as upstream's
/// `randomScanStrategyWithOffset`.
///
/// Invariant: `count` is the number of set bits of `bits`, all below `size`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BitmapRange {
    size: u32,
    offset: u32,
    count: u32,
    bits: Vec<u64>,
}

impl BitmapRange {
    /// An empty range of `size` items whose first `offset` are left for static allocation.
    pub fn new(size: u32, offset: u32) -> Self {
        Self {
            size,
            offset: offset.min(size),
            count: 0,
            bits: vec![0; (size as usize).div_ceil(64)],
        }
    }

    /// How many items the range has.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// How many are allocated.
    pub fn used(&self) -> u32 {
        self.count
    }

    /// Whether `item` is allocated.
    pub fn has(&self, item: u32) -> bool {
        item < self.size && self.bits[(item / 64) as usize] & (1 << (item % 64)) != 0
    }

    fn set(&mut self, item: u32, on: bool) {
        let word = &mut self.bits[(item / 64) as usize];
        let bit = 1u64 << (item % 64);
        if on && *word & bit == 0 {
            *word |= bit;
            self.count += 1;
        } else if !on && *word & bit != 0 {
            *word &= !bit;
            self.count -= 1;
        }
    }

    /// Allocates `item`, as upstream's `Allocate`.
    pub fn allocate(&mut self, item: u32) -> Result<(), RangeError> {
        if item >= self.size {
            return Err(RangeError::NotInRange);
        }
        if self.has(item) {
            return Err(RangeError::Allocated);
        }
        self.set(item, true);
        Ok(())
    }

    /// Allocates a free item, as upstream's `AllocateNext` with the random scan: upper band
    /// first from a random start, then the lower band from a random start.
    pub fn allocate_next(&mut self, rng: &mut impl Rng) -> Result<u32, RangeError> {
        if self.count >= self.size {
            return Err(RangeError::Full);
        }
        let bands = [(self.offset, self.size), (0, self.offset)];
        for (start, end) in bands {
            if start >= end {
                continue;
            }
            let first = rng.random_range(start..end);
            let found = (first..end).chain(start..first).find(|i| !self.has(*i));
            if let Some(item) = found {
                self.set(item, true);
                return Ok(item);
            }
        }
        Err(RangeError::Full)
    }

    /// Frees `item` (free already is fine), as upstream's `Release`.
    pub fn release(&mut self, item: u32) {
        if item < self.size {
            self.set(item, false);
        }
    }

    /// The allocated items, ascending (skipping empty words: cheap for sparse ranges).
    pub fn items(&self) -> impl Iterator<Item = u32> + '_ {
        self.bits
            .iter()
            .enumerate()
            .filter(|(_, word)| **word != 0)
            .flat_map(|(w, word)| {
                let word = *word;
                (0..64u32)
                    .filter(move |b| word & (1 << b) != 0)
                    .map(move |b| w as u32 * 64 + b)
            })
    }

    /// The snapshot kept in the store: the allocated items, delta-encoded as LEB128 varints,
    /// base64. Unlike upstream's big-integer encoding of the whole bitmap, it grows with the
    /// number of allocations, not with the highest item (random allocation sets bits all over
    /// a /12 of 2^20 addresses).
    pub fn snapshot(&self) -> String {
        let mut bytes = Vec::with_capacity(self.count as usize * 3);
        let mut previous = 0u32;
        for item in self.items() {
            let mut delta = item - previous;
            previous = item;
            loop {
                let byte = (delta & 0x7f) as u8;
                delta >>= 7;
                if delta == 0 {
                    bytes.push(byte);
                    break;
                }
                bytes.push(byte | 0x80);
            }
        }
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    /// A range of `size` items (`offset` as in [`Self::new`]) holding a [`Self::snapshot`];
    /// `None` when the snapshot is corrupt or names items outside the range.
    pub fn restore(size: u32, offset: u32, snapshot: &str) -> Option<Self> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(snapshot)
            .ok()?;
        let mut range = Self::new(size, offset);
        let (mut previous, mut delta, mut shift) = (0u32, 0u32, 0u32);
        for byte in bytes {
            delta |= u32::from(byte & 0x7f).checked_shl(shift)?;
            if byte & 0x80 != 0 {
                shift += 7;
                continue;
            }
            let item = previous.checked_add(delta)?;
            range.allocate(item).ok()?;
            previous = item;
            (delta, shift) = (0, 0);
        }
        (shift == 0).then_some(range)
    }
}

/// The lower band a range keeps for static allocations, as upstream's `calculateRangeOffset`
/// for Service IPs: none under 16 items, else `size/16` clamped to 16..=256.
pub fn ip_range_offset(size: u32) -> u32 {
    if size < 16 {
        0
    } else {
        (size / 16).clamp(16, 256)
    }
}

/// The lower band of a node port range, as upstream's port allocator: none under 16 ports,
/// else `size/32` clamped to 16..=128.
pub fn port_range_offset(size: u32) -> u32 {
    if size < 16 {
        0
    } else {
        (size / 32).clamp(16, 128)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocates_every_item_once_then_is_full() {
        let mut range = BitmapRange::new(100, ip_range_offset(100));
        let mut rng = rand::rng();
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..100 {
            let item = range.allocate_next(&mut rng).expect("room");
            assert!(seen.insert(item), "{item} twice");
        }
        assert_eq!(range.allocate_next(&mut rng), Err(RangeError::Full));
        assert_eq!(range.used(), 100);
        range.release(42);
        assert_eq!(range.allocate_next(&mut rng), Ok(42));
    }

    #[test]
    fn dynamic_allocations_prefer_the_upper_band() {
        let mut range = BitmapRange::new(1000, ip_range_offset(1000));
        let mut rng = rand::rng();
        for _ in 0..(1000 - 62) {
            let item = range.allocate_next(&mut rng).expect("room");
            assert!(
                item >= 62,
                "{item} in the static band while the upper band has room"
            );
        }
        assert!(range.allocate_next(&mut rng).expect("lower band") < 62);
    }

    #[test]
    fn static_allocations_and_errors() {
        let mut range = BitmapRange::new(10, 0);
        assert_eq!(range.allocate(3), Ok(()));
        assert_eq!(range.allocate(3), Err(RangeError::Allocated));
        assert_eq!(range.allocate(10), Err(RangeError::NotInRange));
        range.release(3);
        range.release(3);
        assert_eq!(range.used(), 0);
    }

    #[test]
    fn snapshots_round_trip_and_stay_small() {
        let mut range = BitmapRange::new(1 << 20, 256);
        let mut rng = rand::rng();
        for _ in 0..1000 {
            range.allocate_next(&mut rng).expect("room");
        }
        range.allocate(0).expect("first");
        range.allocate((1 << 20) - 1).expect("last");
        let snapshot = range.snapshot();
        assert!(
            snapshot.len() < 4000,
            "{} bytes for 1002 items",
            snapshot.len()
        );
        let restored = BitmapRange::restore(1 << 20, 256, &snapshot).expect("restores");
        assert_eq!(restored, range);
        assert_eq!(BitmapRange::restore(10, 0, "////"), None, "corrupt");
        let big = BitmapRange::restore(1 << 20, 0, &snapshot);
        assert!(big.is_some());
        assert_eq!(
            BitmapRange::restore(100, 0, &snapshot),
            None,
            "items outside the range"
        );
    }

    #[test]
    fn offsets_like_upstream() {
        assert_eq!(ip_range_offset(8), 0);
        assert_eq!(ip_range_offset(100), 16);
        assert_eq!(ip_range_offset(1 << 20), 256);
        assert_eq!(port_range_offset(2768), 86);
    }
}
