//! The user's consent to each MCP server: given once for a server as it is (its command line
//! or URL) and the tools it lists; anything changed asks again. Kept in the user's data
//! directory, never in a workspace.
//!
//! A server a workspace brings whose URL leads to a loopback, private or link-local address is
//! refused unless the user says otherwise, since a repository's `.mcp.json` could otherwise
//! point rawko at whatever listens on the user's machine or LAN. The consent to such a server
//! says so and records the URL and the addresses it was given for ([`PrivateEndpoint`]); they
//! are admitted for that server from then on, and another URL or address asks again.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use rawko_capability::http::grant::{AddrClass, classify};

/// The file, in the data directory.
pub const FILE: &str = "mcp-consent.json";

/// An HTTP server's endpoint that is a loopback, private or link-local address.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PrivateEndpoint {
    /// The server's URL as configured.
    pub url: String,
    /// Where its host name leads (or the address it is).
    pub addresses: Vec<IpAddr>,
}

impl PrivateEndpoint {
    /// `on a loopback address (127.0.0.1)`, for consent questions and refusals.
    pub fn describe(&self) -> String {
        let class = self
            .addresses
            .first()
            .map(|a| classify(*a))
            .unwrap_or(AddrClass::Private);
        let all = self
            .addresses
            .iter()
            .map(IpAddr::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        if self.addresses.len() > 1 {
            let class = class.to_string();
            format!("on {} addresses ({all})", class.trim_start_matches("a "))
        } else {
            format!("on {class} address ({all})")
        }
    }

    /// Whether consent given for `self` covers `now`: the same URL, leading to no address it
    /// was not given for.
    pub fn covers(&self, now: &PrivateEndpoint) -> bool {
        self.url == now.url && now.addresses.iter().all(|a| self.addresses.contains(a))
    }
}

/// One server's consent as kept in the file: the fingerprint alone (as older rawkos wrote
/// it), or with the private endpoint it was given for.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(untagged)]
enum Record {
    Plain(String),
    Full {
        fingerprint: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        private: Option<PrivateEndpoint>,
    },
}

impl Record {
    fn fingerprint(&self) -> &str {
        match self {
            Record::Plain(f) | Record::Full { fingerprint: f, .. } => f,
        }
    }

    fn private(&self) -> Option<&PrivateEndpoint> {
        match self {
            Record::Plain(_) => None,
            Record::Full { private, .. } => private.as_ref(),
        }
    }
}

/// The consents file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum ConsentError {
    #[error("{}: {source} (remove it to be asked again)", path.display())]
    Corrupt {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Consents given, by server name: the fingerprint consented to.
#[derive(Debug, Default)]
pub struct Consents {
    path: PathBuf,
    given: BTreeMap<String, Record>,
}

impl Consents {
    /// Read the consents under `data_dir` (none yet is no error; an unreadable file is).
    pub fn load(data_dir: &Path) -> Result<Consents, ConsentError> {
        let path = data_dir.join(FILE);
        let given = match std::fs::read_to_string(&path) {
            Ok(text) => match serde_json::from_str(&text) {
                Ok(given) => given,
                Err(source) => return Err(ConsentError::Corrupt { path, source }),
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(source) => return Err(ConsentError::Io { path, source }),
        };
        Ok(Consents { path, given })
    }

    /// Whether the user consented to `server` as it is now (`fingerprint`).
    pub fn given(&self, server: &str, fingerprint: &str) -> bool {
        self.given
            .get(server)
            .is_some_and(|r| r.fingerprint() == fingerprint)
    }

    /// Whether consent was given once to something else under this name: the server or its
    /// tools changed since.
    pub fn changed(&self, server: &str, fingerprint: &str) -> bool {
        self.given
            .get(server)
            .is_some_and(|r| r.fingerprint() != fingerprint)
    }

    /// The private endpoint the consent to `server` admits, if it admits one.
    pub fn private(&self, server: &str) -> Option<&PrivateEndpoint> {
        self.given.get(server).and_then(Record::private)
    }

    /// Record consent to `server` as it is now, reached at `private` if that is where it is,
    /// and save (atomically: a write beside, renamed).
    pub fn give(
        &mut self,
        server: &str,
        fingerprint: &str,
        private: Option<&PrivateEndpoint>,
    ) -> Result<(), ConsentError> {
        let record = match private {
            None => Record::Plain(fingerprint.to_string()),
            Some(p) => Record::Full {
                fingerprint: fingerprint.to_string(),
                private: Some(p.clone()),
            },
        };
        self.given.insert(server.to_string(), record);
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(|source| ConsentError::Io {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        let tmp = self.path.with_extension("json.tmp");
        let text = serde_json::to_string_pretty(&self.given).expect("plain records");
        std::fs::write(&tmp, text)
            .and_then(|()| std::fs::rename(&tmp, &self.path))
            .map_err(|source| ConsentError::Io {
                path: self.path.clone(),
                source,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consent_holds_for_the_same_fingerprint_only_and_survives_a_reload() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = Consents::load(dir.path()).unwrap();
        assert!(!c.given("s", "f1") && !c.changed("s", "f1"));
        c.give("s", "f1", None).unwrap();
        let c = Consents::load(dir.path()).unwrap();
        assert!(c.given("s", "f1"));
        assert!(!c.given("s", "f2") && c.changed("s", "f2"));
        std::fs::write(dir.path().join(FILE), "{not json").unwrap();
        assert!(
            Consents::load(dir.path())
                .unwrap_err()
                .to_string()
                .contains("remove it")
        );
    }

    fn endpoint(url: &str, addresses: &[&str]) -> PrivateEndpoint {
        PrivateEndpoint {
            url: url.into(),
            addresses: addresses.iter().map(|a| a.parse().unwrap()).collect(),
        }
    }

    #[test]
    fn a_private_endpoint_is_kept_with_the_consent_and_covers_only_itself() {
        let dir = tempfile::tempdir().unwrap();
        // A file as an older rawko wrote it still reads.
        std::fs::write(dir.path().join(FILE), r#"{"old": "f0"}"#).unwrap();
        let mut c = Consents::load(dir.path()).unwrap();
        assert!(c.given("old", "f0") && c.private("old").is_none());
        let local = endpoint("http://localhost:8123/mcp", &["127.0.0.1", "::1"]);
        c.give("web", "f1", Some(&local)).unwrap();
        let c = Consents::load(dir.path()).unwrap();
        assert!(c.given("web", "f1") && c.given("old", "f0"));
        let kept = c.private("web").unwrap();
        assert_eq!(kept, &local);
        assert!(kept.covers(&endpoint("http://localhost:8123/mcp", &["127.0.0.1"])));
        assert!(!kept.covers(&endpoint("http://localhost:8124/mcp", &["127.0.0.1"])));
        assert!(!kept.covers(&endpoint("http://localhost:8123/mcp", &["10.0.0.2"])));
        assert_eq!(
            endpoint("http://127.0.0.1:1/mcp", &["127.0.0.1"]).describe(),
            "on a loopback address (127.0.0.1)"
        );
        assert_eq!(
            endpoint("http://nas.lan/mcp", &["192.168.1.5", "fd00::5"]).describe(),
            "on private addresses (192.168.1.5, fd00::5)"
        );
    }
}
