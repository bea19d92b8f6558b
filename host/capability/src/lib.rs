//! Capabilities: what a plugin call may touch. Everything is denied unless granted.
//!
//! Each kind of capability is its own module with the same shape: a grant type the user (never
//! a plugin, an agent or a model) creates, and the code that turns it into exactly that much
//! access for one call.

pub mod fs;
#[cfg(feature = "http")]
pub mod http;
pub mod policy;
pub mod protect;
#[cfg(feature = "tls")]
pub mod tls;

pub use fs::{Access, FsGrant, FsGrants, GrantError, ReadError};
#[cfg(feature = "http")]
pub use http::{HttpClient, HttpGrant, HttpPolicy, Origin};
pub use policy::{Decision, Mode};
pub use protect::Protected;
