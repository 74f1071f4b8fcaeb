//! Where packages come from: a local dist folder or an HTTP(S) dist URL, laid out as
//! `versions.json` and `<name>-<version>.tar.gz` with its `.sha256` beside it.
//!
//! Downloads retry with backoff and resume with `Range` where they stopped; a local dist is
//! linked into the package cache, not copied, where the filesystem allows.
//!
//! What comes from a dist is checked before it is used: [`trust`] holds the keys a node
//! trusts and the signature checks they make, [`unpack`] verifies a package's digest and
//! extracts it, and [`bundle_stream`] reads an airgap bundle as a stream.

pub mod bundle_stream;
pub mod trust;
pub mod unpack;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A dist: a folder, or a base URL with the one HTTP client every request to it shares.
#[derive(Debug, Clone)]
pub enum Dist {
    Local(PathBuf),
    Http(url::Url, reqwest::blocking::Client),
}

#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("{location} does not exist")]
    Missing { location: String },
    #[error("failed to read {location}")]
    Io {
        location: String,
        #[source]
        source: std::io::Error,
    },
    #[error("failed to download {location} after {attempts} attempts: {message}")]
    Http {
        location: String,
        attempts: u32,
        message: String,
    },
    #[error("{location} is larger than the {limit} bytes there is room for")]
    TooLarge { location: String, limit: u64 },
    #[error("the download of {location} was interrupted")]
    Interrupted { location: String },
    #[error("{location} is refused: {reason}")]
    BadChecksum { location: String, reason: String },
    #[error("`{text}` is not a dist: give a folder or an http(s):// URL")]
    BadDist { text: String },
}

const ATTEMPTS: u32 = 5;

/// The most a small file (versions.json, a `.sha256`) may be.
const SMALL_FILE_LIMIT: u64 = 16 << 20;

/// The slowest a download may go, as curl's `--speed-limit` and `--speed-time`: an attempt
/// that receives less than `BERTH_SPEED_LIMIT` bytes a second (1,024) over
/// `BERTH_SPEED_TIME` seconds (60) is given up (and retried, where it stopped), so a server
/// that drips a byte now and then cannot hold a run, and the node's lock, for good.
fn speed_floor() -> (u64, Duration) {
    let number = |name: &str, default: u64| {
        std::env::var(name)
            .ok()
            .and_then(|text| text.trim().parse().ok())
            .unwrap_or(default)
    };
    (
        number("BERTH_SPEED_LIMIT", 1024),
        Duration::from_secs(number("BERTH_SPEED_TIME", 60).max(1)),
    )
}

/// Reads a response's body chunk by chunk into `sink`, giving the attempt up when the body
/// comes slower than the speed floor.
fn read_body(
    response: impl std::io::Read,
    sink: impl FnMut(&[u8]) -> Result<(), Attempt>,
) -> Result<(), Attempt> {
    let (limit, window) = speed_floor();
    read_body_at_least(response, limit, window, sink)
}

/// [`read_body`] with the floor given: `limit` bytes a second over each `window`.
fn read_body_at_least(
    mut response: impl std::io::Read,
    limit: u64,
    window: Duration,
    mut sink: impl FnMut(&[u8]) -> Result<(), Attempt>,
) -> Result<(), Attempt> {
    let mut buffer = vec![0; 1 << 16];
    let mut window_start = std::time::Instant::now();
    let mut window_bytes: u64 = 0;
    loop {
        let count = response
            .read(&mut buffer)
            .map_err(|e| Attempt::Retry(format!("the connection dropped: {e}")))?;
        if count == 0 {
            return Ok(());
        }
        sink(&buffer[..count])?;
        window_bytes += count as u64;
        if window_start.elapsed() >= window {
            let elapsed = window_start.elapsed().as_secs_f64();
            if (window_bytes as f64) < limit as f64 * elapsed {
                return Err(Attempt::Retry(format!(
                    "it sent {window_bytes} bytes in {elapsed:.1}s, slower than {limit} bytes a second"
                )));
            }
            window_start = std::time::Instant::now();
            window_bytes = 0;
        }
    }
}

/// How long a server may go without sending a byte before the attempt is given up (and
/// retried): `BERTH_STALL_TIMEOUT` seconds, 60 by default.
pub fn stall_timeout() -> Duration {
    std::env::var("BERTH_STALL_TIMEOUT")
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .map_or(Duration::from_secs(60), Duration::from_secs)
}

impl Dist {
    pub fn parse(text: &str) -> Result<Self, FetchError> {
        if text.starts_with("http://") || text.starts_with("https://") {
            let with_slash = if text.ends_with('/') {
                text.to_string()
            } else {
                format!("{text}/")
            };
            let base = url::Url::parse(&with_slash)
                .map_err(|_| FetchError::BadDist { text: text.into() })?;
            let client = reqwest::blocking::Client::builder()
                .connect_timeout(Duration::from_secs(10))
                // reqwest's blocking client applies this to the response head and to each
                // read of the body: a stall, not a long download.
                .timeout(stall_timeout())
                .build()
                .map_err(|error| FetchError::Http {
                    location: text.to_string(),
                    attempts: 0,
                    message: error.to_string(),
                })?;
            Ok(Dist::Http(base, client))
        } else if text.contains("://") {
            Err(FetchError::BadDist { text: text.into() })
        } else {
            Ok(Dist::Local(PathBuf::from(text)))
        }
    }

    /// The dist as `--dist` takes it, a folder made absolute: what a later run, from another
    /// working folder, can be given again.
    pub fn argument(&self) -> String {
        match self {
            Dist::Local(dir) => std::path::absolute(dir)
                .unwrap_or_else(|_| dir.clone())
                .display()
                .to_string(),
            Dist::Http(base, _) => base.to_string(),
        }
    }

    /// Where the dist's signatures come from, for the keys kept for it: a URL's scheme, host
    /// and port (`https://dist.example.com:443`), or `file://` and a folder's absolute path.
    pub fn origin(&self) -> String {
        match self {
            Dist::Local(dir) => format!(
                "file://{}",
                fs_err::canonicalize(dir)
                    .or_else(|_| std::path::absolute(dir))
                    .unwrap_or_else(|_| dir.clone())
                    .display()
            ),
            Dist::Http(base, _) => format!(
                "{}://{}:{}",
                base.scheme(),
                base.host_str().unwrap_or_default().to_ascii_lowercase(),
                base.port_or_known_default().unwrap_or_default()
            ),
        }
    }

    pub fn location(&self, file: &str) -> String {
        match self {
            Dist::Local(dir) => dir.join(file).display().to_string(),
            Dist::Http(base, _) => base.join(file).map_or_else(|_| file.into(), String::from),
        }
    }

    /// A small file, whole.
    pub fn read(&self, file: &str) -> Result<Vec<u8>, FetchError> {
        let location = self.location(file);
        match self {
            Dist::Local(dir) => {
                // Bounded as a download is: a folder dist may be a mount anyone could fill.
                use std::io::Read as _;
                let mut bytes = Vec::new();
                fs_err::File::open(dir.join(file))
                    .and_then(|opened| opened.take(SMALL_FILE_LIMIT + 1).read_to_end(&mut bytes))
                    .map_err(|source| {
                        if source.kind() == std::io::ErrorKind::NotFound {
                            FetchError::Missing {
                                location: location.clone(),
                            }
                        } else {
                            FetchError::Io {
                                location: location.clone(),
                                source,
                            }
                        }
                    })?;
                if bytes.len() as u64 > SMALL_FILE_LIMIT {
                    return Err(FetchError::TooLarge {
                        location,
                        limit: SMALL_FILE_LIMIT,
                    });
                }
                Ok(bytes)
            }
            Dist::Http(_, client) => with_retries(&location, || {
                let response = client
                    .get(&location)
                    .send()
                    .map_err(|e| Attempt::Retry(e.to_string()))?;
                check_status(&location, response.status())?;
                let mut bytes = Vec::new();
                read_body(response, |chunk| {
                    if bytes.len() as u64 + chunk.len() as u64 > SMALL_FILE_LIMIT {
                        return Err(Attempt::Stop(FetchError::TooLarge {
                            location: location.clone(),
                            limit: SMALL_FILE_LIMIT,
                        }));
                    }
                    bytes.extend_from_slice(chunk);
                    Ok(())
                })?;
                Ok(bytes)
            }),
        }
    }

    /// Puts `file` at `destination` (through `<destination>.partial`, resumed if present).
    pub fn fetch(&self, file: &str, destination: &Path) -> Result<(), FetchError> {
        let location = self.location(file);
        let io = |path: &Path| {
            let location = path.display().to_string();
            move |source| FetchError::Io { location, source }
        };
        let partial = PathBuf::from(format!("{}.partial", destination.display()));
        match self {
            Dist::Local(dir) => {
                let source = dir.join(file);
                if !source.exists() {
                    return Err(FetchError::Missing { location });
                }
                let _ = fs_err::remove_file(&partial);
                if fs_err::hard_link(&source, &partial).is_err() {
                    fs_err::copy(&source, &partial).map_err(io(&source))?;
                }
            }
            Dist::Http(_, client) => {
                let downloaded = with_retries(&location, || download(client, &location, &partial));
                // A body larger than the room there is, or cut short by a signal, is no start
                // for the next run: it goes.
                if matches!(
                    downloaded,
                    Err(FetchError::TooLarge { .. } | FetchError::Interrupted { .. })
                ) {
                    let _ = fs_err::remove_file(&partial);
                }
                downloaded?
            }
        }
        fs_err::rename(&partial, destination).map_err(io(destination))
    }
}

enum Attempt {
    Retry(String),
    Stop(FetchError),
}

fn check_status(location: &str, status: reqwest::StatusCode) -> Result<(), Attempt> {
    if status == reqwest::StatusCode::NOT_FOUND {
        return Err(Attempt::Stop(FetchError::Missing {
            location: location.to_string(),
        }));
    }
    if !status.is_success() {
        return Err(Attempt::Retry(format!("HTTP {status}")));
    }
    Ok(())
}

fn with_retries<T>(
    location: &str,
    mut attempt: impl FnMut() -> Result<T, Attempt>,
) -> Result<T, FetchError> {
    let mut delay = Duration::from_millis(250);
    let mut last = String::new();
    for number in 1..=ATTEMPTS {
        match attempt() {
            Ok(value) => return Ok(value),
            Err(Attempt::Stop(error)) => return Err(error),
            Err(Attempt::Retry(message)) => last = message,
        }
        if number < ATTEMPTS {
            std::thread::sleep(delay);
            delay *= 2;
        }
    }
    Err(FetchError::Http {
        location: location.to_string(),
        attempts: ATTEMPTS,
        message: last,
    })
}

/// One attempt: continues `partial` from its length when the server honours `Range`.
fn download(
    client: &reqwest::blocking::Client,
    location: &str,
    partial: &Path,
) -> Result<(), Attempt> {
    let have = fs_err::metadata(partial).map(|m| m.len()).unwrap_or(0);
    let mut request = client.get(location);
    if have > 0 {
        request = request.header(reqwest::header::RANGE, format!("bytes={have}-"));
    }
    let mut response = request.send().map_err(|e| Attempt::Retry(e.to_string()))?;
    check_status(location, response.status())?;
    let resumed = response.status() == reqwest::StatusCode::PARTIAL_CONTENT;
    // An endless or oversized body stops before the disk is full.
    let folder = partial.parent().unwrap_or(Path::new("."));
    let room =
        crate::dist::unpack::free_space(folder).saturating_sub(crate::dist::unpack::DISK_RESERVE);
    let too_large = || {
        Attempt::Stop(FetchError::TooLarge {
            location: location.to_string(),
            limit: room,
        })
    };
    if response
        .content_length()
        .is_some_and(|length| length > room)
    {
        return Err(too_large());
    }
    let mut file = fs_err::OpenOptions::new()
        .create(true)
        .write(true)
        .append(resumed)
        .truncate(!resumed)
        .open(partial)
        .map_err(|source| {
            Attempt::Stop(FetchError::Io {
                location: partial.display().to_string(),
                source,
            })
        })?;
    let mut received: u64 = 0;
    read_body(&mut response, |chunk| {
        if crate::interrupt::received().is_some() {
            return Err(Attempt::Stop(FetchError::Interrupted {
                location: location.to_string(),
            }));
        }
        received += chunk.len() as u64;
        if received > room {
            return Err(too_large());
        }
        file.write_all(chunk).map_err(|source| {
            Attempt::Stop(FetchError::Io {
                location: partial.display().to_string(),
                source,
            })
        })
    })?;
    file.flush().map_err(|e| Attempt::Retry(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A body that comes a byte at a time, `pause` apart.
    struct Dripping {
        left: usize,
        pause: Duration,
    }

    impl std::io::Read for Dripping {
        fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
            if self.left == 0 || buffer.is_empty() {
                return Ok(0);
            }
            std::thread::sleep(self.pause);
            self.left -= 1;
            buffer[0] = b'x';
            Ok(1)
        }
    }

    #[test]
    fn a_body_that_drips_is_given_up_at_the_speed_floor_and_its_retries_end() {
        let started = std::time::Instant::now();
        let fetched = with_retries("http://dist/demo-1.0.0.tar.gz", || {
            let body = Dripping {
                left: 1_000_000,
                pause: Duration::from_millis(50),
            };
            read_body_at_least(body, 100, Duration::from_millis(300), |_| Ok(()))
        });
        let error = fetched.unwrap_err().to_string();
        assert!(error.contains("slower than 100 bytes a second"), "{error}");
        assert!(error.contains("after 5 attempts"), "{error}");
        // Five windows and the pauses between attempts, not the million seconds it asks.
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{:?}",
            started.elapsed()
        );
        // A body that keeps up passes whole.
        let mut got = 0;
        let quick = Dripping {
            left: 50,
            pause: Duration::from_millis(1),
        };
        assert!(
            read_body_at_least(quick, 100, Duration::from_millis(20), |chunk| {
                got += chunk.len();
                Ok(())
            })
            .is_ok()
        );
        assert_eq!(got, 50);
    }

    #[test]
    fn a_folder_dists_small_files_are_read_no_further_than_a_downloads() {
        let dir = tempfile::tempdir().unwrap();
        let dist = Dist::Local(dir.path().to_path_buf());
        // Sparse: the bound is what is read, not what is on disk.
        let huge = fs_err::File::create(dir.path().join("versions.json")).unwrap();
        huge.set_len(SMALL_FILE_LIMIT + 1).unwrap();
        let error = dist.read("versions.json").unwrap_err();
        assert!(matches!(error, FetchError::TooLarge { .. }), "{error}");
        fs_err::write(dir.path().join("versions.json.sig"), b"signature").unwrap();
        assert_eq!(dist.read("versions.json.sig").unwrap(), b"signature");
        assert!(matches!(
            dist.read("absent").unwrap_err(),
            FetchError::Missing { .. }
        ));
    }
}
