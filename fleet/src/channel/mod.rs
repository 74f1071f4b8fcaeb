//! The fleet's channel: TLS 1.3 between the first node and the others, each side known by its
//! own key, pinned as kubeadm pins its CA. A node trusts the first node whose certificate hash
//! its join command carries; the first node knows each node by the certificate it registered
//! with (a registration carries the join token, checked by the layer above). There is no
//! certificate authority to run and no SSH key to hand out.
//!
//! Messages are JSON, each framed by its length, at most [`MAX_FRAME`] bytes (less where the
//! reader says so). A handshake must be done within [`HANDSHAKE_DEADLINE`] and a whole message
//! must arrive within [`IO_TIMEOUT`] of its first byte being awaited, however slowly a peer
//! drips it; a message's buffer grows with the bytes that arrive, not with the length a peer
//! claims. So a peer that stalls costs a thread for a bounded time, and memory for what it
//! really sent.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

mod pinned;

use pinned::Pinned;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use serde::{Deserialize, Serialize, de::DeserializeOwned};
use sha2::{Digest, Sha256};

/// The largest message either side reads.
pub const MAX_FRAME: usize = 1 << 20;
/// How long a whole message may take to arrive, and a write to go out.
pub const IO_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a whole handshake may take.
pub const HANDSHAKE_DEADLINE: Duration = Duration::from_secs(10);
/// The name both sides put in and expect of a certificate; trust comes from the pin alone.
const SERVER_NAME: &str = "berth-fleet";
/// What the first node writes, in the clear, on a connection it will not take for load (too
/// many at once, or from one address) before it closes it: a node told so waits and tries
/// again, rather than take the closed connection for a broken handshake. No TLS record starts
/// with these bytes, so nothing the handshake sends is mistaken for it.
pub const BUSY_NOTICE: &[u8] = b"BERTH-BUSY\n";

#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    #[error("failed to make this node's fleet key")]
    Generate(#[source] rcgen::Error),
    #[error("failed to {what} {path}")]
    File {
        what: &'static str,
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a fleet key: {message}\nhint: remove the folder to make a new key")]
    Damaged {
        path: std::path::PathBuf,
        message: String,
    },
    #[error("the TLS handshake with {peer} failed: {message}")]
    Handshake { peer: String, message: String },
    #[error("{peer} took longer than {limit:?} for {what}")]
    Deadline {
        peer: String,
        what: &'static str,
        limit: Duration,
    },
    #[error("the connection with {peer} broke")]
    Io {
        peer: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{peer} sent a message of {size} bytes, over the {limit} allowed")]
    TooLarge {
        peer: String,
        size: usize,
        limit: usize,
    },
    #[error("{peer} sent a message that is not what was expected: {message}")]
    Malformed { peer: String, message: String },
    #[error(
        "{peer} is too busy to take this connection now (too many at once, or from this address)"
    )]
    Busy { peer: String },
}

impl ChannelError {
    /// Whether the connection failed before any message went out, for a reason that may pass:
    /// the first node busy, not listening yet, or closing the connection unannounced (one
    /// from before it said so). Trying again then repeats nothing.
    pub fn is_transient(&self) -> bool {
        match self {
            ChannelError::Busy { .. } | ChannelError::Deadline { .. } => true,
            ChannelError::Io { source, .. } => matches!(
                source.kind(),
                std::io::ErrorKind::ConnectionRefused
                    | std::io::ErrorKind::ConnectionReset
                    | std::io::ErrorKind::ConnectionAborted
                    | std::io::ErrorKind::UnexpectedEof
                    | std::io::ErrorKind::TimedOut
            ),
            ChannelError::Handshake { message, .. } => {
                message.contains("unexpected end of file") || message.contains("reset by peer")
            }
            _ => false,
        }
    }
}

/// Closes a connection the first node will not take for load, saying so in the clear first
/// (see [`BUSY_NOTICE`]); a peer that does not read it in a moment is not waited for.
pub fn refuse_busy(mut tcp: TcpStream) {
    let _ = tcp.set_write_timeout(Some(Duration::from_millis(200)));
    let _ = tcp.write_all(BUSY_NOTICE);
    let _ = tcp.shutdown(std::net::Shutdown::Write);
}

/// The TCP stream a handshake runs over, keeping the first bytes the peer sent, so a refusal
/// for load ([`BUSY_NOTICE`]) is told from a broken handshake.
struct Recording<'a> {
    tcp: &'a mut TcpStream,
    first: Vec<u8>,
}

impl Read for Recording<'_> {
    fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        let count = self.tcp.read(buffer)?;
        let room = BUSY_NOTICE.len().saturating_sub(self.first.len());
        self.first.extend_from_slice(&buffer[..count.min(room)]);
        Ok(count)
    }
}

impl Write for Recording<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.tcp.write(bytes)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.tcp.flush()
    }
}

/// A certificate's SHA-256, as `sha256:<hex>`: how each side names the other.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Pin(pub String);

impl Pin {
    pub fn of(certificate: &[u8]) -> Self {
        Pin(format!(
            "sha256:{}",
            hex::encode(Sha256::digest(certificate))
        ))
    }
}

impl std::fmt::Display for Pin {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(&self.0)
    }
}

/// This node's key and self-signed certificate.
pub struct Identity {
    certificate: CertificateDer<'static>,
    key: PrivatePkcs8KeyDer<'static>,
}

impl Identity {
    pub fn generate() -> Result<Self, ChannelError> {
        let made = rcgen::generate_simple_self_signed(vec![SERVER_NAME.to_string()])
            .map_err(ChannelError::Generate)?;
        Ok(Identity {
            certificate: made.cert.der().clone(),
            key: PrivatePkcs8KeyDer::from(made.signing_key.serialize_der()),
        })
    }

    /// The identity kept in `dir` (`fleet.crt`, and `fleet.key` readable by root alone), made
    /// the first time.
    pub fn load_or_create(dir: &Path) -> Result<Self, ChannelError> {
        let (certificate_path, key_path) = (dir.join("fleet.crt"), dir.join("fleet.key"));
        let file_error = |what, path: &Path| {
            let path = path.to_path_buf();
            move |source| ChannelError::File { what, path, source }
        };
        if key_path.exists() {
            let certificate =
                fs_err::read(&certificate_path).map_err(file_error("read", &certificate_path))?;
            let key = fs_err::read(&key_path).map_err(file_error("read", &key_path))?;
            let identity = Identity {
                certificate: CertificateDer::from(certificate),
                key: PrivatePkcs8KeyDer::from(key),
            };
            // A damaged pair is found now, not at the first handshake.
            identity
                .certified_key()
                .map_err(|message| ChannelError::Damaged {
                    path: key_path.clone(),
                    message,
                })?;
            return Ok(identity);
        }
        let identity = Self::generate()?;
        fs_err::create_dir_all(dir).map_err(file_error("create", dir))?;
        berth_formats::files::write_atomically_with_mode(
            &key_path,
            identity.key.secret_pkcs8_der(),
            0o600,
        )
        .map_err(file_error("write", &key_path))?;
        berth_formats::files::write_atomically_with_mode(
            &certificate_path,
            &identity.certificate,
            0o644,
        )
        .map_err(file_error("write", &certificate_path))?;
        Ok(identity)
    }

    pub fn pin(&self) -> Pin {
        Pin::of(&self.certificate)
    }

    fn certified_key(&self) -> Result<Arc<rustls::sign::CertifiedKey>, String> {
        let key = PrivateKeyDer::Pkcs8(self.key.clone_key());
        let signing = provider()
            .key_provider
            .load_private_key(key)
            .map_err(|error| error.to_string())?;
        let certified = rustls::sign::CertifiedKey::new(vec![self.certificate.clone()], signing);
        certified.keys_match().map_err(|error| error.to_string())?;
        Ok(Arc::new(certified))
    }
}

pub(crate) fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The first node's side: its identity, and a client certificate required of every peer.
pub fn server_config(identity: &Identity) -> Result<Arc<rustls::ServerConfig>, ChannelError> {
    let verifier = Arc::new(Pinned {
        expected: None,
        provider: provider(),
    });
    let config = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|error| handshake_error("this node", error))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(
            vec![identity.certificate.clone()],
            PrivateKeyDer::Pkcs8(identity.key.clone_key()),
        )
        .map_err(|error| handshake_error("this node", error))?;
    Ok(Arc::new(config))
}

/// A node's side: its identity, and the first node's pin.
pub fn client_config(
    identity: &Identity,
    first_node: &Pin,
) -> Result<Arc<rustls::ClientConfig>, ChannelError> {
    let verifier = Arc::new(Pinned {
        expected: Some(first_node.clone()),
        provider: provider(),
    });
    let config = rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|error| handshake_error("this node", error))?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_client_auth_cert(
            vec![identity.certificate.clone()],
            PrivateKeyDer::Pkcs8(identity.key.clone_key()),
        )
        .map_err(|error| handshake_error("this node", error))?;
    Ok(Arc::new(config))
}

fn handshake_error(peer: &str, error: impl std::fmt::Display) -> ChannelError {
    ChannelError::Handshake {
        peer: peer.to_string(),
        message: error.to_string(),
    }
}

/// One authenticated connection, and who is at its other end.
pub struct Connection<C> {
    stream: rustls::StreamOwned<C, TcpStream>,
    peer: Pin,
    address: String,
}

/// Completes the first node's side of a handshake with a node that connected.
pub fn accept(
    config: Arc<rustls::ServerConfig>,
    tcp: TcpStream,
) -> Result<Connection<rustls::ServerConnection>, ChannelError> {
    let address = tcp
        .peer_addr()
        .map_or_else(|_| "a node".to_string(), |address| address.to_string());
    let connection =
        rustls::ServerConnection::new(config).map_err(|error| handshake_error(&address, error))?;
    finish(connection, tcp, address)
}

/// Connects to the first node at `address` and completes the handshake.
pub fn connect(
    config: Arc<rustls::ClientConfig>,
    address: SocketAddr,
) -> Result<Connection<rustls::ClientConnection>, ChannelError> {
    let peer = address.to_string();
    let tcp =
        TcpStream::connect_timeout(&address, IO_TIMEOUT).map_err(|source| ChannelError::Io {
            peer: peer.clone(),
            source,
        })?;
    let name = ServerName::try_from(SERVER_NAME).expect("a valid DNS name");
    let connection = rustls::ClientConnection::new(config, name)
        .map_err(|error| handshake_error(&peer, error))?;
    finish(connection, tcp, peer)
}

fn finish<C, D>(
    mut connection: C,
    mut tcp: TcpStream,
    address: String,
) -> Result<Connection<C>, ChannelError>
where
    C: std::ops::DerefMut<Target = rustls::ConnectionCommon<D>>,
    D: rustls::SideData,
{
    let io = |source| ChannelError::Io {
        peer: address.clone(),
        source,
    };
    tcp.set_write_timeout(Some(IO_TIMEOUT)).map_err(io)?;
    let deadline = Instant::now() + HANDSHAKE_DEADLINE;
    while connection.is_handshaking() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ChannelError::Deadline {
                peer: address,
                what: "the handshake",
                limit: HANDSHAKE_DEADLINE,
            });
        }
        tcp.set_read_timeout(Some(left)).map_err(io)?;
        let mut recording = Recording {
            tcp: &mut tcp,
            first: Vec::new(),
        };
        let done = connection.complete_io(&mut recording);
        let told_busy = !recording.first.is_empty() && BUSY_NOTICE.starts_with(&recording.first);
        if let Err(error) = done {
            return Err(if told_busy {
                ChannelError::Busy { peer: address }
            } else {
                handshake_error(&address, error)
            });
        }
    }
    let peer = connection
        .peer_certificates()
        .and_then(|certificates| certificates.first())
        .map(|certificate| Pin::of(certificate))
        .ok_or_else(|| handshake_error(&address, "it presented no certificate"))?;
    Ok(Connection {
        stream: rustls::StreamOwned::new(connection, tcp),
        peer,
        address,
    })
}

impl<C, D> Connection<C>
where
    C: std::ops::DerefMut<Target = rustls::ConnectionCommon<D>>,
    D: rustls::SideData,
{
    /// Who is at the other end: its certificate's pin.
    pub fn peer(&self) -> &Pin {
        &self.peer
    }

    pub fn address(&self) -> &str {
        &self.address
    }

    pub fn send<T: Serialize>(&mut self, message: &T) -> Result<(), ChannelError> {
        let body = serde_json::to_vec(message).map_err(|error| ChannelError::Malformed {
            peer: self.address.clone(),
            message: error.to_string(),
        })?;
        if body.len() > MAX_FRAME {
            return Err(ChannelError::TooLarge {
                peer: "this node".into(),
                size: body.len(),
                limit: MAX_FRAME,
            });
        }
        let length = u32::try_from(body.len()).unwrap_or(u32::MAX).to_be_bytes();
        let io = |source| ChannelError::Io {
            peer: self.address.clone(),
            source,
        };
        self.stream.write_all(&length).map_err(io)?;
        self.stream.write_all(&body).map_err(io)?;
        self.stream.flush().map_err(io)
    }

    /// Writes `bytes` as they are, outside any frame: for tests that play a broken peer.
    pub fn write_raw(&mut self, bytes: &[u8]) -> Result<(), ChannelError> {
        let io = |source| ChannelError::Io {
            peer: self.address.clone(),
            source,
        };
        self.stream.write_all(bytes).map_err(io)?;
        self.stream.flush().map_err(io)
    }

    pub fn receive<T: DeserializeOwned>(&mut self) -> Result<T, ChannelError> {
        self.receive_at_most(MAX_FRAME)
    }

    /// The next message, refused when it claims more than `limit` bytes (at most
    /// [`MAX_FRAME`]). The whole message must arrive within [`IO_TIMEOUT`].
    pub fn receive_at_most<T: DeserializeOwned>(
        &mut self,
        limit: usize,
    ) -> Result<T, ChannelError> {
        let limit = limit.min(MAX_FRAME);
        let deadline = Instant::now() + IO_TIMEOUT;
        let mut length = [0u8; 4];
        self.read_by(deadline, &mut length)?;
        let size = u32::from_be_bytes(length) as usize;
        if size > limit {
            return Err(ChannelError::TooLarge {
                peer: self.address.clone(),
                size,
                limit,
            });
        }
        // Grown as the bytes arrive: a claimed length costs nothing until it is sent.
        let mut body = Vec::with_capacity(size.min(CHUNK));
        let mut chunk = vec![0u8; CHUNK.min(size)];
        while body.len() < size {
            let want = (size - body.len()).min(CHUNK);
            self.read_by(deadline, &mut chunk[..want])?;
            body.extend_from_slice(&chunk[..want]);
        }
        serde_json::from_slice(&body).map_err(|error| ChannelError::Malformed {
            peer: self.address.clone(),
            message: error.to_string(),
        })
    }

    /// Fills `buffer`, giving up at `deadline` however the bytes trickle in.
    fn read_by(&mut self, deadline: Instant, buffer: &mut [u8]) -> Result<(), ChannelError> {
        let mut filled = 0;
        while filled < buffer.len() {
            let left = deadline.saturating_duration_since(Instant::now());
            let io = |source| ChannelError::Io {
                peer: self.address.clone(),
                source,
            };
            if left.is_zero() {
                return Err(ChannelError::Deadline {
                    peer: self.address.clone(),
                    what: "a whole message",
                    limit: IO_TIMEOUT,
                });
            }
            self.stream.sock.set_read_timeout(Some(left)).map_err(io)?;
            match self.stream.read(&mut buffer[filled..]) {
                Ok(0) => {
                    return Err(io(std::io::ErrorKind::UnexpectedEof.into()));
                }
                Ok(read) => filled += read,
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
                Err(error)
                    if matches!(
                        error.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(error) => return Err(io(error)),
            }
        }
        Ok(())
    }
}

/// How much of a message is read at once.
const CHUNK: usize = 64 * 1024;

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Hello {
        text: String,
    }

    /// A first node answering one connection: it reports the client's pin, then echoes.
    fn first_node(
        identity: &Identity,
    ) -> (SocketAddr, std::thread::JoinHandle<Result<Pin, String>>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let config = server_config(identity).unwrap();
        let handle = std::thread::spawn(move || {
            let (tcp, _) = listener.accept().unwrap();
            let mut connection = accept(config, tcp).map_err(|error| error.to_string())?;
            let hello: Hello = connection.receive().map_err(|error| error.to_string())?;
            connection.send(&hello).map_err(|error| error.to_string())?;
            Ok(connection.peer().clone())
        });
        (address, handle)
    }

    #[test]
    fn each_side_knows_the_other_by_its_key() {
        let (server, node) = (Identity::generate().unwrap(), Identity::generate().unwrap());
        let (address, handle) = first_node(&server);
        let mut connection =
            connect(client_config(&node, &server.pin()).unwrap(), address).unwrap();
        assert_eq!(connection.peer(), &server.pin());
        let hello = Hello {
            text: "registered?".into(),
        };
        connection.send(&hello).unwrap();
        assert_eq!(connection.receive::<Hello>().unwrap(), hello);
        assert_eq!(handle.join().unwrap().unwrap(), node.pin());
    }

    #[test]
    fn a_connection_refused_for_load_says_so_and_is_worth_trying_again() {
        let (server, node) = (Identity::generate().unwrap(), Identity::generate().unwrap());
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let refusing = std::thread::spawn(move || {
            let (tcp, _) = listener.accept().unwrap();
            refuse_busy(tcp);
            // Closed without a word, as a first node did before it said so.
            let (tcp, _) = listener.accept().unwrap();
            drop(tcp);
        });
        let config = client_config(&node, &server.pin()).unwrap();
        let busy = connect(config.clone(), address).err().unwrap();
        assert!(matches!(busy, ChannelError::Busy { .. }), "{busy}");
        assert!(busy.to_string().contains("too busy"), "{busy}");
        assert!(busy.is_transient());
        let closed = connect(config, address).err().unwrap();
        assert!(closed.is_transient(), "{closed}");
        refusing.join().unwrap();
        // A first node whose key is not the pinned one is never tried again.
        let wrong = ChannelError::Handshake {
            peer: "x".into(),
            message: "invalid peer certificate: the pin does not match".into(),
        };
        assert!(!wrong.is_transient());
    }

    #[test]
    fn a_first_node_whose_key_is_not_the_pinned_one_is_refused() {
        let (server, node, stranger) = (
            Identity::generate().unwrap(),
            Identity::generate().unwrap(),
            Identity::generate().unwrap(),
        );
        let (address, handle) = first_node(&stranger);
        let error = connect(client_config(&node, &server.pin()).unwrap(), address)
            .err()
            .unwrap()
            .to_string();
        assert!(
            error.contains(&format!("not the {} this node was given", server.pin())),
            "{error}"
        );
        // The first node saw the handshake fail too: nothing was exchanged.
        assert!(handle.join().unwrap().is_err());
    }

    #[test]
    fn an_identity_is_kept_and_a_damaged_key_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let first = Identity::load_or_create(dir.path()).unwrap();
        let again = Identity::load_or_create(dir.path()).unwrap();
        assert_eq!(first.pin(), again.pin());
        use std::os::unix::fs::PermissionsExt;
        let mode = fs_err::metadata(dir.path().join("fleet.key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        // Another key beside the certificate: refused when read.
        let other = Identity::generate().unwrap();
        fs_err::write(dir.path().join("fleet.key"), other.key.secret_pkcs8_der()).unwrap();
        let error = Identity::load_or_create(dir.path())
            .err()
            .unwrap()
            .to_string();
        assert!(error.contains("is not a fleet key"), "{error}");
    }

    #[test]
    fn a_frame_over_the_limit_is_refused_before_it_is_read() {
        let (server, node) = (Identity::generate().unwrap(), Identity::generate().unwrap());
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let config = server_config(&server).unwrap();
        let handle = std::thread::spawn(move || {
            let (tcp, _) = listener.accept().unwrap();
            let mut connection = accept(config, tcp).unwrap();
            connection.receive::<Hello>().err().unwrap().to_string()
        });
        let mut connection =
            connect(client_config(&node, &server.pin()).unwrap(), address).unwrap();
        // A length that claims 16 MiB.
        connection
            .stream
            .write_all(&(16u32 << 20).to_be_bytes())
            .unwrap();
        connection.stream.flush().unwrap();
        let error = handle.join().unwrap();
        assert!(error.contains("over the 1048576 allowed"), "{error}");
    }
}
