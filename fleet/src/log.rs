//! The first node's fleet log: one line per refusal, registration and rollout change, also on
//! standard error. What a peer sent is quoted escaped (no newline or terminal escape of its
//! own) and cut short, and the file is rotated, so no peer can forge lines or fill the disk.

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Mutex;

use berth_formats::time::now;

/// The longest line written; longer ones are cut, saying so.
pub const MAX_LINE: usize = 2048;
/// The size past which `fleet.log` is moved to `fleet.log.1` (the one before is dropped).
pub const MAX_LOG_BYTES: u64 = 8 << 20;

pub struct FleetLog {
    path: PathBuf,
    /// One writer at a time, so rotation and appends do not interleave; and the throttle's
    /// count: the second it counts, the lines written and dropped in it.
    lock: Mutex<Throttle>,
}

#[derive(Default)]
struct Throttle {
    second: u64,
    written: usize,
    dropped: usize,
}

/// The most throttled lines written in one second; the others are counted, and the count
/// written with the next line that gets through.
pub const THROTTLED_PER_SECOND: usize = 20;

impl FleetLog {
    pub fn new(path: PathBuf) -> Self {
        Self {
            path,
            lock: Mutex::new(Throttle::default()),
        }
    }

    /// Writes one line: escaped, cut at [`MAX_LINE`] bytes, stamped with the time.
    pub fn write(&self, text: &str) {
        let _guard = self
            .lock
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        self.append(text);
    }

    /// Writes a line of a kind a flood repeats (a connection refused, a handshake that failed):
    /// at most [`THROTTLED_PER_SECOND`] a second, the rest counted.
    pub fn write_throttled(&self, text: &str) {
        let mut throttle = self
            .lock
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let second = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_secs());
        if throttle.second != second {
            if throttle.dropped > 0 {
                let dropped = throttle.dropped;
                self.append(&format!("({dropped} more such lines left out)"));
            }
            *throttle = Throttle {
                second,
                ..Throttle::default()
            };
        }
        if throttle.written < THROTTLED_PER_SECOND {
            throttle.written += 1;
            self.append(text);
        } else {
            throttle.dropped += 1;
        }
    }

    /// Appends a line; the caller holds the lock.
    fn append(&self, text: &str) {
        let line = format!("{} {}\n", now(), escape(text));
        eprint!("berth fleet: {line}");
        if let Some(parent) = self.path.parent() {
            let _ = fs_err::create_dir_all(parent);
        }
        if fs_err::metadata(&self.path).is_ok_and(|metadata| metadata.len() > MAX_LOG_BYTES) {
            let mut rotated = self.path.clone().into_os_string();
            rotated.push(".1");
            let _ = fs_err::rename(&self.path, rotated);
        }
        if let Ok(mut file) = fs_err::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
        {
            let _ = file.write_all(line.as_bytes());
        }
    }
}

/// `text` on one line, control characters escaped, at most [`MAX_LINE`] bytes.
pub fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len().min(MAX_LINE));
    for character in text.chars() {
        if escaped.len() >= MAX_LINE {
            escaped.push_str(&format!("… ({} bytes in all)", text.len()));
            break;
        }
        // Bidirectional overrides escaped too: they reorder what a terminal shows.
        if character.is_control()
            || matches!(character, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
        {
            escaped.extend(character.escape_default());
        } else {
            escaped.push(character);
        }
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_text_stays_on_one_short_line_and_the_file_rotates() {
        assert_eq!(
            escape("a\nforged 2026 line\u{1b}[2J\u{9b}31m\u{202e}"),
            "a\\nforged 2026 line\\u{1b}[2J\\u{9b}31m\\u{202e}"
        );
        let long = escape(&"x".repeat(1 << 20));
        assert!(long.len() < MAX_LINE + 64, "{}", long.len());
        assert!(long.ends_with("(1048576 bytes in all)"), "{long}");

        let dir = tempfile::tempdir().unwrap();
        let log = FleetLog::new(dir.path().join("fleet.log"));
        let line = "y".repeat(MAX_LINE);
        for _ in 0..(MAX_LOG_BYTES as usize / MAX_LINE + 2) {
            log.write(&line);
        }
        let size = |name: &str| fs_err::metadata(dir.path().join(name)).unwrap().len();
        assert!(size("fleet.log.1") > MAX_LOG_BYTES, "rotated");
        assert!(size("fleet.log") < MAX_LOG_BYTES);
    }
}
