//! FNV-32 hashers (Go's `hash/fnv` `New32` and `New32a`), writable with [`io::Write`].
//!
//! The pod-template hash ([`compute_hash`](super::compute_hash)) uses FNV-1a, the
//! ControllerRevision hash ([`hash_controller_revision`](crate::controller::history::hash_controller_revision))
//! FNV-1, each as its upstream does.

use std::io;

/// FNV offset basis for 32-bit hashes.
const FNV32_OFFSET: u32 = 0x811c_9dc5;
/// FNV prime for 32-bit hashes.
const FNV32_PRIME: u32 = 0x0100_0193;

/// A 32-bit FNV-1a hasher (Go's `hash/fnv.New32a`), writable with [`io::Write`] so a
/// serializer can stream into it without an intermediate buffer.
#[derive(Debug, Clone, Copy)]
pub struct Fnv32a {
    /// The running hash; starts at the FNV offset basis.
    state: u32,
}

impl Default for Fnv32a {
    fn default() -> Self {
        Self::new()
    }
}

impl Fnv32a {
    /// A fresh hasher.
    pub fn new() -> Self {
        Self {
            state: FNV32_OFFSET,
        }
    }

    /// Feeds `bytes` into the hash.
    pub fn update(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.state ^= u32::from(b);
            self.state = self.state.wrapping_mul(FNV32_PRIME);
        }
    }

    /// The hash of everything fed so far (Go's `Sum32`).
    pub fn sum32(&self) -> u32 {
        self.state
    }
}

impl io::Write for Fnv32a {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.update(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A 32-bit FNV-1 hasher (Go's `hash/fnv.New32`): as [`Fnv32a`] with the multiply before the
/// xor.
#[derive(Debug, Clone, Copy)]
pub struct Fnv32 {
    /// The running hash; starts at the FNV offset basis.
    state: u32,
}

impl Default for Fnv32 {
    fn default() -> Self {
        Self::new()
    }
}

impl Fnv32 {
    /// A fresh hasher.
    pub fn new() -> Self {
        Self {
            state: FNV32_OFFSET,
        }
    }

    /// Feeds `bytes` into the hash.
    pub fn update(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.state = self.state.wrapping_mul(FNV32_PRIME);
            self.state ^= u32::from(b);
        }
    }

    /// The hash of everything fed so far (Go's `Sum32`).
    pub fn sum32(&self) -> u32 {
        self.state
    }
}

impl io::Write for Fnv32 {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.update(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv32a_matches_reference_vectors() {
        struct Case {
            name: &'static str,
            input: &'static [u8],
            want: u32,
        }
        let cases = [
            Case {
                name: "empty",
                input: b"",
                want: 0x811c_9dc5,
            },
            Case {
                name: "a",
                input: b"a",
                want: 0xe40c_292c,
            },
            Case {
                name: "foobar",
                input: b"foobar",
                want: 0xbf9c_f968,
            },
        ];
        for c in cases {
            let mut h = Fnv32a::new();
            h.update(c.input);
            assert_eq!(h.sum32(), c.want, "{}", c.name);
        }
    }

    /// The FNV reference suite's FNV-1 values (the `fnv1_32` column).
    #[test]
    fn fnv32_matches_reference_vectors() {
        for (input, want) in [
            (&b""[..], 0x811c_9dc5_u32),
            (b"a", 0x050c_5d7e),
            (b"foobar", 0x31f0_b262),
        ] {
            let mut h = Fnv32::new();
            h.update(input);
            assert_eq!(h.sum32(), want, "{:?}", String::from_utf8_lossy(input));
        }
    }

    #[test]
    fn io_write_feeds_the_hash() {
        use std::io::Write;
        let mut h = Fnv32a::new();
        write!(h, "foo").expect("infallible");
        h.write_all(b"bar").expect("infallible");
        assert_eq!(h.sum32(), 0xbf9c_f968);
    }
}
