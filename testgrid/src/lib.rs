//! `berth-testgrid`'s library: the grid runner (`grid`), which the binary drives and the
//! grid's own tests call. The harness the tests share is `berth-testkit`.

pub mod grid;
