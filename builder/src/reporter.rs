//! How the library reports progress without knowing how it is shown.
//!
//! The CLI draws bars; tests and non-terminals pass [`Silent`].

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

/// Reports nothing.
pub struct Silent;

struct SilentProgress;

impl Reporter for Silent {
    fn start(&self, _label: &str, _total: Option<u64>) -> Box<dyn Progress> {
        Box::new(SilentProgress)
    }
}

impl Progress for SilentProgress {
    fn advance(&self, _bytes: u64) {}
    fn finish(&self) {}
}
