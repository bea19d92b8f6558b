//! The `http` capability: the only network an adapter plugin has.
//!
//! An adapter instance's grant names the origins it may reach ([`grant`]); names are checked
//! again once resolved ([`resolve`]); the API key is added by the host for the origin it was
//! granted for and redacted from everything the plugin, the log or a recording sees
//! ([`secret`]); redirects, retries, deadlines and size caps are the host's ([`client`]). The WIT
//! side (a call's context, the `send` import and the `response` resource) is the runtime's.

pub mod client;
pub mod grant;
pub mod resolve;
pub mod secret;

pub use client::{
    Credential, CredentialScheme, HttpClient, HttpError, HttpPolicy, HttpStats, Incoming, Outgoing,
};
pub use grant::{AddrClass, Denied, HttpGrant, Origin, Scheme};
pub use secret::{Redactor, Secret};
