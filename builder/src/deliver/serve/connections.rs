//! serve's own accept loop: axum's has no header-read timeout and no bound on connections.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use tokio::sync::Semaphore;

/// Limits on the connections a server takes.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// Connections open at once; more wait in the listen queue.
    pub max_connections: usize,
    /// How long a client may take to send a request's head.
    pub header_timeout: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            max_connections: 512,
            header_timeout: Duration::from_secs(10),
        }
    }
}

/// Serves `router` on `listener` with `limits`: a client that sends its request head slowly
/// is cut off, and no more than `max_connections` are served at once.
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    limits: ConnectionLimits,
) -> std::io::Result<()> {
    let connections = Arc::new(Semaphore::new(limits.max_connections));
    loop {
        let permit = Arc::clone(&connections)
            .acquire_owned()
            .await
            .expect("the semaphore is never closed");
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            // Out of file descriptors, say: wait a little instead of spinning.
            Err(error) => {
                tracing::warn!("accept: {error}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        // Handlers learn who asked (`ConnectInfo`): a client's share of installers is counted
        // by its address.
        let service = hyper_util::service::TowerToHyperService::new(
            router
                .clone()
                .layer(axum::Extension(axum::extract::ConnectInfo(peer))),
        );
        tokio::spawn(async move {
            let _permit = permit;
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(limits.header_timeout);
            let connection =
                builder.serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            if let Err(error) = connection.await {
                tracing::debug!("connection: {error}");
            }
        });
    }
}
