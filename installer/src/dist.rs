//! Where packages come from: a local dist folder or an HTTP(S) dist URL, laid out as
//! `versions.json` and `<name>-<version>.tar.gz` with its `.sha256` beside it.
//!
//! Downloads retry with backoff and resume with `Range` where they stopped; a local dist is
//! linked into the package cache, not copied, where the filesystem allows.

use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::time::Duration;

use berth_formats::Sha256Digest;
use berth_formats::package_index::parse_checksum_file;

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
    #[error("{location} is not a sha256sum line")]
    BadChecksum { location: String },
    #[error("`{text}` is not a dist: give a folder or an http(s):// URL")]
    BadDist { text: String },
}

const ATTEMPTS: u32 = 5;

/// The most a small file (versions.json, a `.sha256`) may be.
const SMALL_FILE_LIMIT: u64 = 16 << 20;

/// How long a server may go without sending a byte before the attempt is given up (and
/// retried): `BERTH_STALL_TIMEOUT` seconds, 60 by default.
fn stall_timeout() -> Duration {
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
            Dist::Local(dir) => fs_err::read(dir.join(file)).map_err(|source| {
                if source.kind() == std::io::ErrorKind::NotFound {
                    FetchError::Missing { location }
                } else {
                    FetchError::Io { location, source }
                }
            }),
            Dist::Http(_, client) => with_retries(&location, || {
                let response = client
                    .get(&location)
                    .send()
                    .map_err(|e| Attempt::Retry(e.to_string()))?;
                check_status(&location, response.status())?;
                let mut bytes = Vec::new();
                std::io::Read::take(response, SMALL_FILE_LIMIT + 1)
                    .read_to_end(&mut bytes)
                    .map_err(|e| Attempt::Retry(e.to_string()))?;
                if bytes.len() as u64 > SMALL_FILE_LIMIT {
                    return Err(Attempt::Stop(FetchError::TooLarge {
                        location: location.clone(),
                        limit: SMALL_FILE_LIMIT,
                    }));
                }
                Ok(bytes)
            }),
        }
    }

    /// The digest `<file>.sha256` gives for `file`.
    pub fn checksum(&self, file: &str) -> Result<Sha256Digest, FetchError> {
        let checksum_file = berth_formats::release::checksum_file(file);
        let text = self.read(&checksum_file)?;
        parse_checksum_file(&String::from_utf8_lossy(&text)).map_err(|_| FetchError::BadChecksum {
            location: self.location(&checksum_file),
        })
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
    let room = crate::unpack::free_space(folder).saturating_sub(crate::unpack::DISK_RESERVE);
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
    let mut buffer = vec![0; 1 << 16];
    let mut received: u64 = 0;
    loop {
        if crate::interrupt::received().is_some() {
            return Err(Attempt::Stop(FetchError::Interrupted {
                location: location.to_string(),
            }));
        }
        let count = response
            .read(&mut buffer)
            .map_err(|e| Attempt::Retry(format!("the connection dropped: {e}")))?;
        if count == 0 {
            break;
        }
        received += count as u64;
        if received > room {
            return Err(too_large());
        }
        file.write_all(&buffer[..count]).map_err(|source| {
            Attempt::Stop(FetchError::Io {
                location: partial.display().to_string(),
                source,
            })
        })?;
    }
    file.flush().map_err(|e| Attempt::Retry(e.to_string()))
}
