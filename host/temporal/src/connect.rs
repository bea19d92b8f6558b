//! Reaching the Temporal server: its address as users write it, and the connection.

use std::time::Duration;

use temporalio_client::{Client, ClientOptions, Connection, ConnectionOptions, Url};

/// A Temporal frontend's address: `HOST:PORT` (the Temporal CLI's own form) or an `http://` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Address {
    url: Url,
    /// As the user wrote it, for messages.
    written: String,
}

/// Why the server cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error(
        "the Temporal address `{0}` is not HOST:PORT or an http:// URL (the Temporal CLI's \
         form, as in TEMPORAL_ADDRESS=127.0.0.1:7233)"
    )]
    Address(String),
    #[error(
        "the Temporal address `{0}` needs TLS, which this build does not speak: reach the \
         server over plain HTTP on a trusted network (HOST:PORT), or through a local proxy"
    )]
    Tls(String),
    #[error(
        "cannot reach the Temporal server at {address}: {reason} (is it running? \
         `temporal server start-dev` starts one)"
    )]
    Unreachable { address: String, reason: String },
    #[error("the Temporal server at {address} refused namespace `{namespace}`: {reason}")]
    Namespace {
        address: String,
        namespace: String,
        reason: String,
    },
}

impl Address {
    pub fn parse(text: &str) -> Result<Address, ConnectError> {
        let text = text.trim();
        if text.starts_with("https://") {
            return Err(ConnectError::Tls(text.to_string()));
        }
        let with_scheme = if text.contains("://") {
            text.to_string()
        } else {
            format!("http://{text}")
        };
        let url = Url::parse(&with_scheme).map_err(|_| ConnectError::Address(text.into()))?;
        if url.scheme() != "http"
            || url.host_str().is_none_or(str::is_empty)
            || url.port().is_none()
            || !matches!(url.path(), "" | "/")
        {
            return Err(ConnectError::Address(text.to_string()));
        }
        Ok(Address {
            url,
            written: text.to_string(),
        })
    }

    pub fn as_str(&self) -> &str {
        &self.written
    }
}

impl std::fmt::Display for Address {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.written)
    }
}

/// Connect to `address` for `namespace`, as `identity`. A wrong namespace shows at the first
/// call that names it (a start, or a worker's first poll), with the server's own words.
pub async fn connect(
    address: &Address,
    namespace: &str,
    identity: &str,
) -> Result<Client, ConnectError> {
    let unreachable = |reason: String| ConnectError::Unreachable {
        address: address.written.clone(),
        reason,
    };
    let options = ConnectionOptions::new(address.url.clone())
        .identity(identity.to_string())
        .connect_timeout(Duration::from_secs(5))
        .build();
    let connection = Connection::connect(options)
        .await
        .map_err(|e| unreachable(e.to_string()))?;
    Client::new(
        connection,
        ClientOptions::new(namespace.to_string()).build(),
    )
    .map_err(|e| unreachable(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_read_as_the_temporal_cli_writes_them() {
        assert_eq!(
            Address::parse("127.0.0.1:7233").unwrap().url.as_str(),
            "http://127.0.0.1:7233/"
        );
        assert_eq!(
            Address::parse(" localhost:7243 ").unwrap().as_str(),
            "localhost:7243"
        );
        assert!(Address::parse("http://[::1]:7233").is_ok());
        for bad in [
            "",
            "127.0.0.1",
            "ftp://h:1",
            "http://h:1/path",
            ":7233",
            "h:port",
        ] {
            assert!(
                matches!(Address::parse(bad), Err(ConnectError::Address(_))),
                "{bad}"
            );
        }
        assert!(matches!(
            Address::parse("https://h:7233"),
            Err(ConnectError::Tls(_))
        ));
    }
}
