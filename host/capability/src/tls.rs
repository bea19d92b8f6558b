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

/// Why the server's certificate was not trusted, in plain words, when `error` (or one of its
/// causes) is a certificate rustls refused; `None` for any other error. The clients put it after
/// the host, as `HOST: the server's certificate is not trusted: WHY`.
pub fn untrusted_certificate(error: &(dyn std::error::Error + 'static)) -> Option<String> {
    use rustls::CertificateError as E;
    let why = match find_certificate_error(error)? {
        E::UnknownIssuer => {
            "it is not signed by an authority this machine trusts (self-signed, or from an unknown CA)"
                .to_string()
        }
        E::Expired | E::ExpiredContext { .. } => "it has expired".to_string(),
        E::NotValidYet | E::NotValidYetContext { .. } => "it is not valid yet".to_string(),
        E::NotValidForName => "it is for another host name".to_string(),
        E::NotValidForNameContext { expected, presented } => {
            let names: Vec<&str> = presented
                .iter()
                .map(|p| {
                    p.strip_prefix("DnsName(\"")
                        .and_then(|p| p.strip_suffix("\")"))
                        .unwrap_or(p)
                })
                .collect();
            format!(
                "it is for {}, not {}",
                if names.is_empty() {
                    "no host name".to_string()
                } else {
                    names.join(", ")
                },
                expected.to_str()
            )
        }
        E::Revoked => "it has been revoked".to_string(),
        // What `openssl req -x509` makes unless told otherwise. rustls holds webpki's error as
        // an opaque one, so it is told by its name.
        E::Other(e) if e.to_string() == "CaUsedAsEndEntity" => {
            "it is a certificate authority's own certificate, not a server's (self-signed as a CA)"
                .to_string()
        }
        other => format!("it is invalid ({other:?})"),
    };
    Some(why)
}

/// The certificate error in `error`'s causes. An `io::Error` wrapping another error hides it
/// from `source()` (it reports the inner error's cause instead), so those are opened here.
fn find_certificate_error<'a>(
    error: &'a (dyn std::error::Error + 'static),
) -> Option<&'a rustls::CertificateError> {
    let mut next = Some(error);
    while let Some(e) = next {
        if let Some(rustls::Error::InvalidCertificate(c)) = e.downcast_ref::<rustls::Error>() {
            return Some(c);
        }
        next = match e
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            Some(inner) => Some(inner as &(dyn std::error::Error + 'static)),
            None => e.source(),
        };
    }
    None
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_refused_certificate_is_found_inside_io_errors_and_said_plainly() {
        use std::io::{Error, ErrorKind};
        let refused = rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer);
        let wrapped = Error::other(Error::new(ErrorKind::InvalidData, refused));
        let why = super::untrusted_certificate(&wrapped).expect("found");
        assert!(why.contains("self-signed"), "{why}");
        assert_eq!(super::untrusted_certificate(&Error::other("refused")), None);
    }

    #[test]
    fn the_provider_is_installed_once_and_stays() {
        super::install_provider();
        super::install_provider();
        assert!(rustls::crypto::CryptoProvider::get_default().is_some());
    }
}
