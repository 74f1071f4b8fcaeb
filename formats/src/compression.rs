//! How packages and bundles are compressed: gzip (the default, which kURL-format consumers and
//! `tar xzf` read) or zstd (several times faster to write and to read at the same size). A
//! reader never trusts a file's name for it: [`decompress`] tells the two apart by their first
//! bytes, so a node reads either whatever the file is called.

use std::io::{self, Read, Write};

use serde::{Deserialize, Serialize};

/// A compressed stream's format.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    #[default]
    Gzip,
    Zstd,
}

const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// Decoding a zstd frame may take a window of up to 2^27 bytes (128 MiB), zstd's own default
/// bound: a crafted frame asking for more is refused rather than allocated.
const ZSTD_WINDOW_LOG_MAX: u32 = 27;

impl Compression {
    pub const ALL: [Compression; 2] = [Compression::Gzip, Compression::Zstd];

    /// What a compressed tar of this format is called after its stem: `.tar.gz`, `.tar.zst`.
    pub const fn tar_suffix(self) -> &'static str {
        match self {
            Compression::Gzip => ".tar.gz",
            Compression::Zstd => ".tar.zst",
        }
    }

    /// `gzip`, `zstd`: as the command line and the formats spell it.
    pub const fn name(self) -> &'static str {
        match self {
            Compression::Gzip => "gzip",
            Compression::Zstd => "zstd",
        }
    }

    /// For serde's `skip_serializing_if`: gzip, the default, is left out of the files that
    /// name a format, so they read as they did before zstd.
    pub fn is_gzip(&self) -> bool {
        *self == Compression::Gzip
    }

    /// The level used when none is given: gzip's 6 and zstd's 3, each tool's own default.
    pub const fn default_level(self) -> u32 {
        match self {
            Compression::Gzip => 6,
            Compression::Zstd => 3,
        }
    }

    /// The levels this format takes: gzip 0-9, zstd 1-19 (zstd's levels above 19 need a
    /// window larger than a node's decoder accepts).
    pub const fn levels(self) -> std::ops::RangeInclusive<u32> {
        match self {
            Compression::Gzip => 0..=9,
            Compression::Zstd => 1..=19,
        }
    }

    /// The format a compressed stream starting with `head` is in.
    pub fn sniff(head: &[u8]) -> Option<Self> {
        if head.starts_with(&GZIP_MAGIC) {
            Some(Compression::Gzip)
        } else if head.starts_with(&ZSTD_MAGIC) {
            Some(Compression::Zstd)
        } else {
            None
        }
    }

    /// The format a file name's suffix names, if any.
    pub fn of_file_name(name: &str) -> Option<Self> {
        Self::split_tar_name(name).map(|(_, compression)| compression)
    }

    /// `name` without its `.tar.gz` or `.tar.zst`, and the format that suffix names.
    pub fn split_tar_name(name: &str) -> Option<(&str, Self)> {
        Self::ALL.into_iter().find_map(|compression| {
            name.strip_suffix(compression.tar_suffix())
                .map(|stem| (stem, compression))
        })
    }

    /// The media type a server gives a file in this format.
    pub const fn media_type(self) -> &'static str {
        match self {
            Compression::Gzip => "application/gzip",
            Compression::Zstd => "application/zstd",
        }
    }
}

impl std::fmt::Display for Compression {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(self.name())
    }
}

impl std::str::FromStr for Compression {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|compression| compression.name() == text)
            .ok_or_else(|| format!("`{text}` is not a compression: expected gzip or zstd"))
    }
}

/// A format with its level, as a writer is given it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setting {
    pub format: Compression,
    pub level: u32,
}

impl Setting {
    /// `format` at `level`, or at the format's default level; a level the format does not
    /// take is an error that names the range.
    pub fn new(format: Compression, level: Option<u32>) -> Result<Self, String> {
        let level = level.unwrap_or(format.default_level());
        if !format.levels().contains(&level) {
            let levels = format.levels();
            return Err(format!(
                "{format} takes levels {} to {}, not {level}",
                levels.start(),
                levels.end()
            ));
        }
        Ok(Self { format, level })
    }

    pub const fn gzip(level: u32) -> Self {
        Self {
            format: Compression::Gzip,
            level,
        }
    }
}

/// A stream being compressed into `W`, in either format.
///
/// zstd always runs in its multi-threaded streaming mode, on at least one worker: its output
/// is then the same bytes whatever the number of workers (unlike its single-threaded mode), so
/// a package is reproducible from a 2-core laptop to a 64-core CI machine.
pub enum Encoder<W: Write> {
    Gzip(flate2::write::GzEncoder<W>),
    /// One standard gzip stream compressed on several threads, as pigz writes it: 128 KiB
    /// blocks compressed at once and written in order, one header and one trailer.
    ParallelGzip(gzp::par::compress::ParCompress<'static, gzp::deflate::Gzip, W>),
    Zstd(zstd::stream::write::Encoder<'static, W>),
}

impl<W: Write> Encoder<W> {
    /// An encoder of `setting` writing into `out`, zstd on `workers` threads (at least one).
    /// The gzip header carries no name and no time.
    pub fn new(out: W, setting: Setting, workers: u32) -> io::Result<Self> {
        Ok(match setting.format {
            Compression::Gzip => Encoder::Gzip(
                flate2::GzBuilder::new().write(out, flate2::Compression::new(setting.level)),
            ),
            Compression::Zstd => {
                let mut encoder = zstd::stream::write::Encoder::new(out, setting.level as i32)?;
                encoder.multithread(workers.max(1))?;
                encoder.include_checksum(true)?;
                Encoder::Zstd(encoder)
            }
        })
    }

    /// An encoder of `setting` on every core of the machine, gzip included: for a stream
    /// whose bytes need not match another machine's (an airgap bundle is mostly layers that
    /// are compressed already; one thread deflating them again was most of its time). A
    /// package is written with [`Encoder::new`], whose gzip is the same everywhere.
    pub fn on_every_core(out: W, setting: Setting) -> io::Result<Self>
    where
        W: Send + 'static,
    {
        match setting.format {
            Compression::Gzip => Ok(Encoder::ParallelGzip(
                gzp::par::compress::ParCompressBuilder::new()
                    .compression_level(gzp::Compression::new(setting.level))
                    .num_threads(all_cores() as usize)
                    .map_err(io::Error::other)?
                    .from_writer(out),
            )),
            Compression::Zstd => Self::new(out, setting, all_cores()),
        }
    }

    /// Ends the compressed stream and hands back what it wrote to.
    pub fn finish(self) -> io::Result<W> {
        match self {
            Encoder::Gzip(encoder) => encoder.finish(),
            Encoder::ParallelGzip(mut encoder) => {
                gzp::ZWriter::finish(&mut encoder).map_err(io::Error::other)
            }
            Encoder::Zstd(encoder) => encoder.finish(),
        }
    }
}

impl<W: Write> Write for Encoder<W> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        match self {
            Encoder::Gzip(encoder) => encoder.write(bytes),
            Encoder::ParallelGzip(encoder) => encoder.write(bytes),
            Encoder::Zstd(encoder) => encoder.write(bytes),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Encoder::Gzip(encoder) => encoder.flush(),
            Encoder::ParallelGzip(encoder) => encoder.flush(),
            Encoder::Zstd(encoder) => encoder.flush(),
        }
    }
}

/// The number of zstd workers a writer that has the machine to itself uses: one per core.
pub fn all_cores() -> u32 {
    std::thread::available_parallelism().map_or(1, |cores| cores.get() as u32)
}

/// A reader of the decompressed bytes of `reader`, gzip or zstd, told apart by the stream's
/// first bytes. A stream in neither format is an error that says what its first bytes are.
pub fn decompress<'a, R: Read + 'a>(mut reader: R) -> io::Result<Box<dyn Read + 'a>> {
    let mut head = [0u8; 4];
    let mut filled = 0;
    while filled < head.len() {
        match reader.read(&mut head[filled..]) {
            Ok(0) => break,
            Ok(count) => filled += count,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    let head = &head[..filled];
    let ended = std::rc::Rc::new(std::cell::Cell::new(false));
    let whole = EndSeen {
        inner: io::Cursor::new(head.to_vec()).chain(reader),
        ended: ended.clone(),
    };
    match Compression::sniff(head) {
        Some(Compression::Gzip) => Ok(Box::new(CutShort {
            inner: flate2::read::MultiGzDecoder::new(whole),
            ended,
        })),
        Some(Compression::Zstd) => {
            let mut decoder = zstd::stream::read::Decoder::new(whole)?;
            decoder.window_log_max(ZSTD_WINDOW_LOG_MAX)?;
            Ok(Box::new(CutShort {
                inner: decoder,
                ended,
            }))
        }
        None if head.is_empty() => Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the stream is empty, not gzip or zstd",
        )),
        None => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "the stream is neither gzip nor zstd (it starts with bytes {})",
                hex::encode(head)
            ),
        )),
    }
}

/// A reader that notes when the one it wraps has ended.
struct EndSeen<R> {
    inner: R,
    ended: std::rc::Rc<std::cell::Cell<bool>>,
}

impl<R: Read> Read for EndSeen<R> {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        let count = self.inner.read(buffer)?;
        if count == 0 && !buffer.is_empty() {
            self.ended.set(true);
        }
        Ok(count)
    }
}

/// A decompressor whose error, once the compressed bytes have ended, says what it means: the
/// file was cut short ("incomplete deflate stream" alone sends users looking for corruption).
struct CutShort<R> {
    inner: R,
    ended: std::rc::Rc<std::cell::Cell<bool>>,
}

impl<R: Read> Read for CutShort<R> {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        self.inner.read(buffer).map_err(|error| {
            if self.ended.get() && error.kind() != io::ErrorKind::Interrupted {
                io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "the compressed data ends early ({error}): the file is cut short, as a download that stopped leaves it; fetch it again"
                    ),
                )
            } else {
                error
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compressed(setting: Setting, workers: u32, data: &[u8]) -> Vec<u8> {
        let mut encoder = Encoder::new(Vec::new(), setting, workers).unwrap();
        encoder.write_all(data).unwrap();
        encoder.finish().unwrap()
    }

    /// Data with enough repetition to compress and enough variety to need several zstd jobs.
    fn sample(size: usize) -> Vec<u8> {
        let mut state = 0x2545_f491_u32;
        (0..size)
            .map(|index| {
                state ^= state << 13;
                state ^= state >> 17;
                state ^= state << 5;
                if index % 7 == 0 {
                    b'a'
                } else {
                    (state % 16) as u8
                }
            })
            .collect()
    }

    #[test]
    fn each_format_reads_back_what_it_wrote_and_is_told_apart_by_its_first_bytes() {
        let data = sample(300_000);
        for format in Compression::ALL {
            let setting = Setting::new(format, None).unwrap();
            let bytes = compressed(setting, 2, &data);
            assert_eq!(Compression::sniff(&bytes), Some(format));
            assert!(bytes.len() < data.len(), "{format} compressed nothing");
            let mut read = Vec::new();
            decompress(bytes.as_slice())
                .unwrap()
                .read_to_end(&mut read)
                .unwrap();
            assert_eq!(read, data, "{format}");
        }
    }

    #[test]
    fn on_every_core_each_format_writes_one_standard_stream_that_reads_back() {
        // Several of parallel gzip's 128 KiB blocks.
        let data = sample(1 << 20);
        for format in Compression::ALL {
            let setting = Setting::new(format, None).unwrap();
            let mut encoder = Encoder::on_every_core(Vec::new(), setting).unwrap();
            encoder.write_all(&data).unwrap();
            let bytes = encoder.finish().unwrap();
            assert_eq!(Compression::sniff(&bytes), Some(format));
            assert!(bytes.len() < data.len(), "{format} compressed nothing");
            // One member, as `gzip -d` and a single-stream reader take it.
            let mut read = Vec::new();
            match format {
                Compression::Gzip => flate2::read::GzDecoder::new(bytes.as_slice())
                    .read_to_end(&mut read)
                    .unwrap(),
                Compression::Zstd => decompress(bytes.as_slice())
                    .unwrap()
                    .read_to_end(&mut read)
                    .unwrap(),
            };
            assert_eq!(read, data, "{format}");
        }
    }

    #[test]
    fn zstd_writes_the_same_bytes_on_any_number_of_workers() {
        // Larger than one zstd job at level 1 (4 windows of 512 KiB), so workers share it.
        let data = sample(12 << 20);
        let setting = Setting::new(Compression::Zstd, Some(1)).unwrap();
        let one = compressed(setting, 1, &data);
        for workers in [2, 5] {
            assert!(
                compressed(setting, workers, &data) == one,
                "{workers} workers wrote other bytes than one"
            );
        }
    }

    #[test]
    fn a_stream_in_neither_format_is_refused_naming_its_first_bytes() {
        let error = decompress(&b"PK\x03\x04rest"[..]).err().unwrap();
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        assert!(error.to_string().contains("504b0304"), "{error}");
        let error = decompress(&b""[..]).err().unwrap();
        assert_eq!(error.kind(), io::ErrorKind::UnexpectedEof);
        // A zstd magic followed by garbage fails on read, not with a panic.
        let mut bytes = ZSTD_MAGIC.to_vec();
        bytes.extend_from_slice(&[0xff; 64]);
        let mut out = Vec::new();
        assert!(
            decompress(bytes.as_slice())
                .and_then(|mut reader| reader.read_to_end(&mut out))
                .is_err()
        );
    }

    #[test]
    fn levels_outside_a_format_are_refused_and_names_parse_back() {
        assert!(Setting::new(Compression::Gzip, Some(10)).is_err());
        assert!(Setting::new(Compression::Zstd, Some(0)).is_err());
        assert_eq!(Setting::new(Compression::Zstd, None).unwrap().level, 3);
        for format in Compression::ALL {
            assert_eq!(format.name().parse::<Compression>(), Ok(format));
            assert_eq!(
                Compression::of_file_name(&format!("a-1{}", format.tar_suffix())),
                Some(format)
            );
        }
        assert!("xz".parse::<Compression>().is_err());
    }

    #[test]
    fn a_stream_cut_short_says_so_in_either_format() {
        let data = sample(300_000);
        for format in [Compression::Gzip, Compression::Zstd] {
            let setting = Setting::new(format, None).unwrap();
            let whole = compressed(setting, 1, &data);
            let cut = &whole[..whole.len() / 2];
            let mut read = Vec::new();
            let error = decompress(cut).unwrap().read_to_end(&mut read).unwrap_err();
            assert_eq!(error.kind(), io::ErrorKind::UnexpectedEof, "{error}");
            assert!(
                error.to_string().contains("the file is cut short"),
                "{error}"
            );
            // Whole, it reads back.
            let mut read = Vec::new();
            decompress(&whole[..])
                .unwrap()
                .read_to_end(&mut read)
                .unwrap();
            assert_eq!(read, data);
        }
    }
}
