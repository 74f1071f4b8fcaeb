//! SHA-256 digests in the `sha256:<hex>` form used by OCI, package indices and asset pins.

use std::fmt;
use std::io::{self, Read, Write};
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::{Digest as _, Sha256};

/// A SHA-256 digest, shown and parsed as `sha256:<64 lowercase hex digits>`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Sha256Digest([u8; 32]);

/// Why a string is not a `sha256:<hex>` digest.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DigestParseError {
    #[error("digest `{0}` does not start with `sha256:`")]
    Algorithm(String),
    #[error("digest `{0}` must have 64 hexadecimal digits after `sha256:`")]
    Hex(String),
}

impl Sha256Digest {
    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        Self(Sha256::digest(bytes).into())
    }

    /// The digest of everything `reader` yields.
    pub fn of_reader(mut reader: impl Read) -> io::Result<Self> {
        let mut hashing = HashingWriter::new(io::sink());
        io::copy(&mut reader, &mut hashing)?;
        Ok(hashing.finish().0)
    }

    /// The digest of a file's bytes, read in large blocks; the error names the file.
    pub fn of_file(path: &std::path::Path) -> io::Result<Self> {
        let file = fs_err::File::open(path)?;
        Self::of_reader(io::BufReader::with_capacity(1 << 20, file))
    }

    /// The 64 hexadecimal digits, without the `sha256:` prefix (the blob file name in an OCI layout).
    pub fn hex(&self) -> String {
        hex::encode(self.0)
    }

    /// Parses bare hexadecimal digits, as in `sha256sum` output.
    pub fn from_hex(text: &str) -> Result<Self, DigestParseError> {
        let mut bytes = [0u8; 32];
        if text.len() != 64 || hex::decode_to_slice(text, &mut bytes).is_err() {
            return Err(DigestParseError::Hex(text.to_string()));
        }
        Ok(Self(bytes))
    }
}

impl FromStr for Sha256Digest {
    type Err = DigestParseError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let hex = text
            .strip_prefix("sha256:")
            .ok_or_else(|| DigestParseError::Algorithm(text.to_string()))?;
        Self::from_hex(hex).map_err(|_| DigestParseError::Hex(text.to_string()))
    }
}

impl fmt::Display for Sha256Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.hex())
    }
}

impl fmt::Debug for Sha256Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl Serialize for Sha256Digest {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl schemars::JsonSchema for Sha256Digest {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Sha256Digest".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"})
    }
}

impl<'de> Deserialize<'de> for Sha256Digest {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// A writer that hashes and counts everything written through it.
pub struct HashingWriter<W> {
    inner: W,
    hasher: Sha256,
    written: u64,
}

impl<W: Write> HashingWriter<W> {
    pub fn new(inner: W) -> Self {
        Self {
            inner,
            hasher: Sha256::new(),
            written: 0,
        }
    }

    /// The digest and size of what was written, and the inner writer.
    pub fn finish(self) -> (Sha256Digest, u64, W) {
        (
            Sha256Digest(self.hasher.finalize().into()),
            self.written,
            self.inner,
        )
    }
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let count = self.inner.write(buf)?;
        self.hasher.update(&buf[..count]);
        self.written += count as u64;
        Ok(count)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Hashes everything read through it, so one pass over a file both uses and checks it.
pub struct HashingReader<R> {
    inner: R,
    digest: StreamingDigest,
}

impl<R: Read> HashingReader<R> {
    pub fn new(inner: R) -> Self {
        Self {
            inner,
            digest: StreamingDigest::new(),
        }
    }

    /// Reads whatever is left, then returns the digest and length of everything read.
    pub fn finish(mut self) -> io::Result<(Sha256Digest, u64)> {
        io::copy(&mut self, &mut io::sink())?;
        let length = self.digest.length();
        Ok((self.digest.finish(), length))
    }
}

impl<R: Read> Read for HashingReader<R> {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        let count = self.inner.read(buffer)?;
        self.digest.update(&buffer[..count]);
        Ok(count)
    }
}

/// A running SHA-256 over streamed chunks, for callers that receive data piecewise.
#[derive(Clone, Default)]
pub struct StreamingDigest {
    hasher: Sha256,
    length: u64,
}

impl StreamingDigest {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn update(&mut self, chunk: &[u8]) {
        self.hasher.update(chunk);
        self.length += chunk.len() as u64;
    }

    /// Bytes seen so far.
    pub fn length(&self) -> u64 {
        self.length
    }

    pub fn finish(self) -> Sha256Digest {
        Sha256Digest(self.hasher.finalize().into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_text() {
        let digest = Sha256Digest::of(b"berth");
        let text = digest.to_string();
        assert!(text.starts_with("sha256:"));
        assert_eq!(text.parse::<Sha256Digest>().unwrap(), digest);
    }

    #[test]
    fn refuses_other_algorithms_and_short_hex() {
        assert!(matches!(
            "md5:abcd".parse::<Sha256Digest>(),
            Err(DigestParseError::Algorithm(_))
        ));
        assert!(matches!(
            "sha256:abcd".parse::<Sha256Digest>(),
            Err(DigestParseError::Hex(_))
        ));
    }

    #[test]
    fn streaming_matches_one_shot() {
        let mut streaming = StreamingDigest::new();
        streaming.update(b"ber");
        streaming.update(b"th");
        assert_eq!(streaming.finish(), Sha256Digest::of(b"berth"));
    }
}
