//! Name resolution that checks where a name leads before anything connects to it.
//!
//! Checking the host name of a URL is not enough: a granted name may resolve (or be made to
//! resolve, by whoever controls its DNS) to 127.0.0.1, a LAN address or the cloud metadata
//! service. Every connection the adapter client makes gets its addresses from this resolver,
//! which drops the ones its grant does not admit, and fails with [`AddressDenied`] when none
//! are left.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use super::grant::{Denied, HttpGrant, check_addr};

/// A name resolved only to addresses the grant does not admit. Found again in the error chain
/// by the client, so it is reported as a denial and never retried.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct AddressDenied(pub Denied);

/// The resolver for one adapter instance's client.
#[derive(Debug, Clone)]
pub struct CheckedResolver {
    grant: Arc<HttpGrant>,
    /// Fixed answers for names, like a hosts file, consulted first.
    fixed: Arc<HashMap<String, Vec<IpAddr>>>,
}

impl CheckedResolver {
    pub fn new(grant: Arc<HttpGrant>, fixed: HashMap<String, Vec<IpAddr>>) -> Self {
        CheckedResolver {
            grant,
            fixed: Arc::new(fixed),
        }
    }

    /// The admitted addresses of `host`.
    pub async fn lookup(
        &self,
        host: &str,
    ) -> Result<Vec<IpAddr>, Box<dyn std::error::Error + Send + Sync>> {
        let host = host.to_ascii_lowercase();
        // The client asks only for names of granted URLs; anything else is a bug, refused.
        let Some(private) = self.grant.private_allowed(&host) else {
            return Err(Box::new(AddressDenied(Denied::NotGranted {
                origin: host,
                granted: self.grant.describe(),
            })));
        };
        let found: Vec<IpAddr> = match self.fixed.get(&host) {
            Some(addrs) => addrs.clone(),
            None => tokio::net::lookup_host((host.as_str(), 0))
                .await?
                .map(|a| a.ip())
                .collect(),
        };
        let mut admitted = Vec::new();
        let mut first_denial = None;
        for ip in found {
            match check_addr(&host, ip, private) {
                Ok(()) => admitted.push(ip),
                Err(d) => {
                    first_denial.get_or_insert(d);
                }
            }
        }
        match (admitted.is_empty(), first_denial) {
            (false, _) => Ok(admitted),
            (true, Some(d)) => Err(Box::new(AddressDenied(d))),
            (true, None) => Err(format!("{host} has no addresses").into()),
        }
    }
}

impl Resolve for CheckedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let this = self.clone();
        let host = name.as_str().to_string();
        Box::pin(async move {
            let addrs = this.lookup(&host).await?;
            let addrs: Addrs = Box::new(addrs.into_iter().map(|ip| SocketAddr::new(ip, 0)));
            Ok(addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::grant::{AddrClass, Origin};

    fn resolver(private: bool) -> CheckedResolver {
        let mut g = HttpGrant::none();
        g.allow(Origin::parse("https://model.test").unwrap(), private);
        g.allow(Origin::parse("https://mixed.test").unwrap(), false);
        let mut fixed = HashMap::new();
        fixed.insert("model.test".into(), vec!["127.0.0.1".parse().unwrap()]);
        fixed.insert(
            "mixed.test".into(),
            vec![
                "10.0.0.1".parse().unwrap(),
                "93.184.216.34".parse().unwrap(),
            ],
        );
        CheckedResolver::new(Arc::new(g), fixed)
    }

    fn denied(e: Box<dyn std::error::Error + Send + Sync>) -> Denied {
        e.downcast::<AddressDenied>().expect("an address denial").0
    }

    #[tokio::test]
    async fn a_granted_name_resolving_to_loopback_is_refused() {
        let e = resolver(false).lookup("model.test").await.unwrap_err();
        assert!(matches!(
            denied(e),
            Denied::Address {
                class: AddrClass::Loopback,
                ..
            }
        ));
        assert_eq!(
            resolver(true).lookup("model.test").await.unwrap(),
            vec!["127.0.0.1".parse::<IpAddr>().unwrap()]
        );
    }

    #[tokio::test]
    async fn private_answers_are_dropped_and_ungranted_names_refused() {
        assert_eq!(
            resolver(false).lookup("MIXED.test").await.unwrap(),
            vec!["93.184.216.34".parse::<IpAddr>().unwrap()]
        );
        let e = resolver(true).lookup("other.test").await.unwrap_err();
        assert!(matches!(denied(e), Denied::NotGranted { .. }));
    }
}
