//! Reading the protobuf wire format: varints, lengths, fixed-width values, skipping.

use super::error::{Error, Result};

/// Wire type 0.
pub(super) const VARINT: u8 = 0;
/// Wire type 1.
pub(super) const FIXED64: u8 = 1;
/// Wire type 2.
pub(super) const LEN: u8 = 2;
/// Wire type 5.
pub(super) const FIXED32: u8 = 5;

/// A cursor over one message's bytes.
pub(super) struct Reader<'a> {
    /// The message's bytes.
    buf: &'a [u8],
    /// The next byte to read; `pos <= buf.len()`.
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(super) fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    /// Whether every byte has been read.
    pub(super) fn done(&self) -> bool {
        self.pos >= self.buf.len()
    }

    pub(super) fn varint(&mut self) -> Result<u64> {
        let mut value = 0u64;
        for shift in (0..70).step_by(7) {
            let Some(&byte) = self.buf.get(self.pos) else {
                return Err(Error::Malformed("truncated varint"));
            };
            self.pos += 1;
            if shift == 63 && byte > 1 {
                return Err(Error::Malformed("varint overflows 64 bits"));
            }
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(Error::Malformed("varint longer than 10 bytes"))
    }

    /// A field key: (field number, wire type).
    pub(super) fn key(&mut self) -> Result<(u32, u8)> {
        let key = self.varint()?;
        let tag =
            u32::try_from(key >> 3).map_err(|_| Error::Malformed("field number too large"))?;
        if tag == 0 {
            return Err(Error::Malformed("field number 0"));
        }
        Ok((tag, (key & 7) as u8))
    }

    /// A length-delimited payload.
    pub(super) fn bytes(&mut self) -> Result<&'a [u8]> {
        let len =
            usize::try_from(self.varint()?).map_err(|_| Error::Malformed("length too large"))?;
        let end = self
            .pos
            .checked_add(len)
            .filter(|&end| end <= self.buf.len())
            .ok_or(Error::Malformed("length past the end of the message"))?;
        let out = &self.buf[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    /// A fixed-width 64-bit value (`double`, `fixed64`), little-endian.
    pub(super) fn fixed64(&mut self) -> Result<u64> {
        self.fixed::<8>().map(u64::from_le_bytes)
    }

    fn fixed<const N: usize>(&mut self) -> Result<[u8; N]> {
        let end = self.pos.saturating_add(N);
        let bytes = self
            .buf
            .get(self.pos..end)
            .ok_or(Error::Malformed("truncated fixed-width value"))?;
        self.pos = end;
        let mut out = [0u8; N];
        out.copy_from_slice(bytes);
        Ok(out)
    }

    /// Skips a value of `wire_type` (a field the schema does not know).
    pub(super) fn skip(&mut self, wire_type: u8) -> Result<()> {
        match wire_type {
            VARINT => self.varint().map(drop),
            FIXED64 => self.fixed::<8>().map(drop),
            LEN => self.bytes().map(drop),
            FIXED32 => self.fixed::<4>().map(drop),
            _ => Err(Error::Malformed("unsupported wire type")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_lengths() {
        // 300 = 0b1_0010_1100 -> [0xac, 0x02]; then a 3-byte payload.
        let mut r = Reader::new(&[0xac, 0x02, 0x03, b'a', b'b', b'c']);
        assert_eq!(r.varint().expect("varint"), 300);
        assert_eq!(r.bytes().expect("bytes"), b"abc");
        assert!(r.done());
    }

    #[test]
    fn fixed64_is_little_endian() {
        let bytes = 1.5f64.to_le_bytes();
        let mut r = Reader::new(&bytes);
        assert_eq!(f64::from_bits(r.fixed64().expect("fixed64")), 1.5);
        assert!(r.done());
        assert!(Reader::new(&[0; 7]).fixed64().is_err());
    }

    #[test]
    fn truncated_input_is_an_error_not_a_panic() {
        assert!(Reader::new(&[0x80]).varint().is_err());
        assert!(Reader::new(&[0x05, b'a']).bytes().is_err());
        assert!(Reader::new(&[0xff; 11]).varint().is_err());
        assert!(Reader::new(&[1, 2, 3]).skip(FIXED64).is_err());
        assert!(Reader::new(&[0x07]).skip(7).is_err());
        assert!(Reader::new(&[0x00]).key().is_err());
    }
}
