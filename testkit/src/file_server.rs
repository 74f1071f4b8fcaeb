//! A static file server that can misbehave on purpose, as a flaky dist mirror would.

use std::net::TcpListener;
use std::path::Path;

/// A static file server on loopback for a folder, answering `Range` requests (as a dist
/// mirror does), with a fault on one path if asked.
pub struct FileServer {
    pub url: String,
    /// Every request line received, in order, with its `Range` header when present.
    pub requests: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

/// What a [`FileServer`] does wrong, and to which path.
#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    None,
    /// The first answer for the path stops halfway through.
    DropFirst(String),
    /// Every answer for the path stops halfway through.
    DropAlways(String),
    /// The path's answer sends its head and part of its body, then nothing, for ever.
    Stall(String),
    /// The path's answer never ends (no length, zeros for ever).
    Endless(String),
}

impl FileServer {
    pub fn serve(dir: &Path, drop_first: Option<&str>) -> FileServer {
        Self::serve_with(
            dir,
            drop_first.map_or(Fault::None, |path| Fault::DropFirst(path.to_string())),
        )
    }

    pub fn serve_with(dir: &Path, fault: Fault) -> FileServer {
        use std::io::{BufRead, BufReader, Write};
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let requests = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = requests.clone();
        let dir = dir.to_path_buf();
        let fault = std::sync::Arc::new(std::sync::Mutex::new(fault));
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let (seen, dir, fault) = (seen.clone(), dir.clone(), fault.clone());
                // A connection of its own thread: a stalled answer holds no other up.
                std::thread::spawn(move || {
                    let mut reader = BufReader::new(stream.try_clone().unwrap());
                    let mut request = String::new();
                    let _ = reader.read_line(&mut request);
                    let mut range = None;
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                            break;
                        }
                        if let Some(value) = line.to_ascii_lowercase().strip_prefix("range: bytes=")
                        {
                            range = Some(value.trim().to_string());
                        }
                    }
                    let path = request.split_whitespace().nth(1).unwrap_or("/").to_string();
                    seen.lock().unwrap().push(match &range {
                        Some(range) => format!("GET {path} bytes={range}"),
                        None => format!("GET {path}"),
                    });
                    let fault = {
                        let mut fault = fault.lock().unwrap();
                        let now = fault.clone();
                        if now == Fault::DropFirst(path.clone()) {
                            *fault = Fault::None;
                        }
                        now
                    };
                    if fault == Fault::Endless(path.clone()) {
                        let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n");
                        let zeros = vec![0u8; 1 << 16];
                        while stream.write_all(&zeros).is_ok() {}
                        return;
                    }
                    let Ok(body) = fs_err::read(dir.join(path.trim_start_matches('/'))) else {
                        let _ = stream.write_all(
                            b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                        );
                        return;
                    };
                    let length = body.len();
                    let start = range
                        .as_deref()
                        .and_then(|r| r.trim_end_matches('-').parse::<usize>().ok())
                        .unwrap_or(0)
                        .min(length);
                    let head = if range.is_some() {
                        format!(
                            "HTTP/1.1 206 Partial Content\r\nContent-Length: {}\r\nContent-Range: bytes {start}-{}/{length}\r\nConnection: close\r\n\r\n",
                            length - start,
                            length.saturating_sub(1)
                        )
                    } else {
                        format!(
                            "HTTP/1.1 200 OK\r\nContent-Length: {length}\r\nConnection: close\r\n\r\n"
                        )
                    };
                    let _ = stream.write_all(head.as_bytes());
                    let half = start + (length - start) / 2;
                    match fault {
                        Fault::DropFirst(faulty) | Fault::DropAlways(faulty) if faulty == path => {
                            let _ = stream.write_all(&body[start..half]);
                        }
                        Fault::Stall(faulty) if faulty == path => {
                            let _ = stream.write_all(&body[start..half]);
                            let _ = stream.flush();
                            // Holds the connection open, sending nothing, until the client goes.
                            let mut buffer = [0u8; 1];
                            let _ = std::io::Read::read(&mut stream, &mut buffer);
                        }
                        _ => {
                            let _ = stream.write_all(&body[start..]);
                        }
                    }
                    let _ = stream.flush();
                });
            }
        });
        FileServer { url, requests }
    }
}
