//! `berth-build`'s integration tests, one test binary: the builder against real registries,
//! apt and yum repositories, S3 and its own server. `support` is their shared harness, on
//! `berth-testkit`.

mod support;

mod apt;
mod kurl_repository;
mod package;
mod readme;
mod rpm;
mod serve;
mod serve_page;
mod upload;
mod versions;
