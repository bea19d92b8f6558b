//! rawko as a library: what the `rawko` binary shares with the benchmarks, so that `rawko bench`
//! and `cargo bench -p rawko --bench table` measure a figure with the same code.

pub mod bench;
