//! `berth-testgrid`'s integration tests, one test binary: the grid end to end, and the
//! repository-wide lints.

mod grid;
mod lint;
