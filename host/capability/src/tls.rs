//! The TLS crypto every HTTPS client of rawko uses: ring's, installed as the process's rustls
//! provider before a client is built (reqwest builds none of its own, to leave aws-lc out of the
//! build).

/// Install ring as the process's rustls crypto provider, unless one is installed already.
/// Every function that builds a `reqwest::Client` calls this first; it is cheap after the first.
pub fn install_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Losing a race to another thread installing the same provider is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_provider_is_installed_once_and_stays() {
        super::install_provider();
        super::install_provider();
        assert!(rustls::crypto::CryptoProvider::get_default().is_some());
    }
}
