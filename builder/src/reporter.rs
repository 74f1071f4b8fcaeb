//! How the library reports progress without knowing how it is shown.
//!
//! The CLI draws bars on a terminal and hides them elsewhere.

/// Receives progress from long operations.
pub trait Reporter: Send + Sync {
    /// A transfer or write of `total` bytes (if known) starts; returns its handle.
    fn start(&self, label: &str, total: Option<u64>) -> Box<dyn Progress>;
}

/// One running operation.
pub trait Progress: Send + Sync {
    fn advance(&self, bytes: u64);
    fn finish(&self);
}
