//! Where go-spew's text goes: straight into the hasher, or into a buffer (tests, debugging).

/// Where the printed text goes: the FNV hasher in production, a buffer in tests.
pub(super) trait Sink {
    /// Appends `bytes` to the output.
    fn put(&mut self, bytes: &[u8]);
}

impl Sink for super::fnv::Fnv32a {
    fn put(&mut self, bytes: &[u8]) {
        self.update(bytes);
    }
}

impl Sink for Vec<u8> {
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// Writes a signed decimal without allocating.
pub(super) fn put_i64(out: &mut impl Sink, v: i64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    let mut n = v.unsigned_abs();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if v < 0 {
        out.put(b"-");
    }
    out.put(&buf[i..]);
}

/// Writes an unsigned decimal without allocating.
pub(super) fn put_u64(out: &mut impl Sink, v: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    let mut n = v;
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.put(&buf[i..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_print_like_go() {
        let mut out = Vec::new();
        for v in [0, 7, -7, i64::MIN, i64::MAX] {
            put_i64(&mut out, v);
            out.put(b" ");
        }
        put_u64(&mut out, u64::MAX);
        assert_eq!(
            String::from_utf8_lossy(&out),
            "0 7 -7 -9223372036854775808 9223372036854775807 18446744073709551615"
        );
    }
}
