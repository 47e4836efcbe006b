//! Little-endian fixed-width integers and LEB128 varints, shared by every on-disk format.
//!
//! Decoders never panic: they return `None` when the input is too short or a varint is
//! over-long, and the caller turns that into a `Corruption` error with file and offset.

/// Appends `v` as 4 little-endian bytes.
pub fn put_fixed32(dst: &mut Vec<u8>, v: u32) {
    dst.extend_from_slice(&v.to_le_bytes());
}

/// Appends `v` as 8 little-endian bytes.
pub fn put_fixed64(dst: &mut Vec<u8>, v: u64) {
    dst.extend_from_slice(&v.to_le_bytes());
}

/// Reads 4 little-endian bytes at the start of `src`.
pub fn decode_fixed32(src: &[u8]) -> Option<u32> {
    Some(u32::from_le_bytes(src.get(..4)?.try_into().ok()?))
}

/// Reads 8 little-endian bytes at the start of `src`.
pub fn decode_fixed64(src: &[u8]) -> Option<u64> {
    Some(u64::from_le_bytes(src.get(..8)?.try_into().ok()?))
}

/// Appends `v` as a LEB128 varint (1..=5 bytes).
pub fn put_varint32(dst: &mut Vec<u8>, v: u32) {
    put_varint64(dst, u64::from(v));
}

/// Appends `v` as a LEB128 varint (1..=10 bytes).
pub fn put_varint64(dst: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        dst.push((v as u8) | 0x80);
        v >>= 7;
    }
    dst.push(v as u8);
}

/// Number of bytes `put_varint64(v)` appends.
pub fn varint_len(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

/// Decodes a varint from the start of `src`; returns the value and bytes consumed.
pub fn decode_varint64(src: &[u8]) -> Option<(u64, usize)> {
    let mut result = 0u64;
    for (i, &byte) in src.iter().enumerate().take(10) {
        let bits = u64::from(byte & 0x7f);
        if i == 9 && bits > 1 {
            return None;
        }
        result |= bits << (7 * i);
        if byte & 0x80 == 0 {
            return Some((result, i + 1));
        }
    }
    None
}

/// Decodes a varint that must fit in 32 bits.
pub fn decode_varint32(src: &[u8]) -> Option<(u32, usize)> {
    let (v, n) = decode_varint64(src)?;
    Some((u32::try_from(v).ok()?, n))
}

/// Appends a varint length followed by the bytes.
pub fn put_length_prefixed(dst: &mut Vec<u8>, bytes: &[u8]) {
    put_varint64(dst, bytes.len() as u64);
    dst.extend_from_slice(bytes);
}

/// Cursor over a byte slice for decoders: every getter returns `None` on short input.
#[derive(Debug, Clone)]
pub struct Decoder<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Decoder<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Decoder { buf, pos: 0 }
    }

    /// Bytes consumed so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    pub fn remaining(&self) -> &'a [u8] {
        &self.buf[self.pos..]
    }

    pub fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    pub fn u8(&mut self) -> Option<u8> {
        let b = *self.buf.get(self.pos)?;
        self.pos += 1;
        Some(b)
    }

    pub fn fixed32(&mut self) -> Option<u32> {
        let v = decode_fixed32(self.remaining())?;
        self.pos += 4;
        Some(v)
    }

    pub fn fixed64(&mut self) -> Option<u64> {
        let v = decode_fixed64(self.remaining())?;
        self.pos += 8;
        Some(v)
    }

    pub fn varint64(&mut self) -> Option<u64> {
        let (v, n) = decode_varint64(self.remaining())?;
        self.pos += n;
        Some(v)
    }

    pub fn varint32(&mut self) -> Option<u32> {
        let (v, n) = decode_varint32(self.remaining())?;
        self.pos += n;
        Some(v)
    }

    /// Takes exactly `n` bytes. Checks the length against the input before slicing, so a
    /// bogus length never causes an allocation or a panic.
    pub fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let out = self.buf.get(self.pos..end)?;
        self.pos = end;
        Some(out)
    }

    /// Takes a varint length and that many bytes.
    pub fn length_prefixed(&mut self) -> Option<&'a [u8]> {
        let n = usize::try_from(self.varint64()?).ok()?;
        self.bytes(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_round_trip_at_boundaries() {
        for v in [0u64, 1, 127, 128, 16383, 16384, u32::MAX as u64, u64::MAX] {
            let mut buf = Vec::new();
            put_varint64(&mut buf, v);
            assert_eq!(buf.len(), varint_len(v));
            assert_eq!(decode_varint64(&buf), Some((v, buf.len())));
        }
    }

    #[test]
    fn truncated_and_overlong_varints_are_rejected() {
        let mut buf = Vec::new();
        put_varint64(&mut buf, u64::MAX);
        for cut in 0..buf.len() {
            assert_eq!(decode_varint64(&buf[..cut]), None);
        }
        assert_eq!(decode_varint64(&[0xff; 11]), None);
        assert_eq!(decode_varint32(&[0xff, 0xff, 0xff, 0xff, 0x1f]), None);
    }

    #[test]
    fn decoder_rejects_length_past_end() {
        let mut buf = Vec::new();
        put_varint64(&mut buf, 1 << 40);
        buf.extend_from_slice(b"abc");
        let mut d = Decoder::new(&buf);
        assert_eq!(d.length_prefixed(), None);
    }
}
