//! rawko as a library: what the `rawko` binary shares with the benchmarks and its tests, so that
//! `rawko bench` and `cargo bench -p rawko --bench table` measure a figure with the same code,
//! and the tests record the demo the binary plays.

pub mod bench;
pub mod demo;
