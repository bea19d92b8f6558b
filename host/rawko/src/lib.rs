//! rawko as a library: the commands of the `rawko` binary (`cli`), and what it shares with the
//! benchmarks and its tests, so that `rawko bench` and `cargo bench -p rawko --bench table`
//! measure a figure with the same code, and the tests record the demo the binary plays.

pub mod alloc;
pub mod bench;
#[doc(hidden)]
pub mod cli;
pub mod demo;
