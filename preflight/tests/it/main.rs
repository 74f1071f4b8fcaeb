//! The host preflights' integration tests, one test binary: checks against what real tools make
//! (openssl's key pairs) and every host-preflight file of kURL.

mod certificate;
mod kurl_files;
