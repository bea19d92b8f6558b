//! What an adapter may reach: a set of origins (scheme, host, port), and which addresses count
//! as private.
//!
//! A grant names origins exactly: `https://api.openai.com` admits that host on port 443 over
//! TLS and nothing else, not `http://` on the same host, not another port, not a subdomain.
//! Names are checked again after resolution: an origin admits only public addresses unless its
//! grant says `private`, so a granted name that resolves to 127.0.0.1, 10.0.0.5 or the cloud
//! metadata address is refused, and reaching a local model server is a decision the user makes
//! on purpose.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use reqwest::Url;

/// `http` or `https`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scheme {
    Http,
    Https,
}

impl Scheme {
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }
}

/// A scheme, a host and a port: what a grant admits.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Origin {
    scheme: Scheme,
    /// Lowercase name, dotted IPv4, or bracketed IPv6, as the URL standard normalises it.
    host: String,
    port: u16,
}

/// Why a URL or address is not admitted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Denied {
    #[error("{0} is not an http or https URL")]
    Scheme(String),
    #[error("{0} has no host")]
    NoHost(String),
    #[error("{0} carries a user name or password; credentials come from the host")]
    UserInfo(String),
    #[error("{origin} is not granted to this adapter (granted: {granted})")]
    NotGranted { origin: String, granted: String },
    #[error(
        "{host} is {class} address {addr}, which this adapter may not reach (set \
         allow_private_network in its config to allow it on purpose)"
    )]
    Address {
        host: String,
        addr: IpAddr,
        class: AddrClass,
    },
}

impl Origin {
    /// The origin of `url`.
    pub fn of(url: &Url) -> Result<Origin, Denied> {
        let scheme = match url.scheme() {
            "http" => Scheme::Http,
            "https" => Scheme::Https,
            _ => return Err(Denied::Scheme(url.to_string())),
        };
        let host = url
            .host_str()
            .filter(|h| !h.is_empty())
            .ok_or_else(|| Denied::NoHost(url.to_string()))?
            .to_string();
        let port = url
            .port_or_known_default()
            .ok_or_else(|| Denied::NoHost(url.to_string()))?;
        Ok(Origin { scheme, host, port })
    }

    /// Parse `text` as a URL and take its origin.
    pub fn parse(text: &str) -> Result<Origin, OriginError> {
        let url = Url::parse(text).map_err(|source| OriginError::NotUrl {
            text: text.to_string(),
            source,
        })?;
        Ok(Origin::of(&url)?)
    }

    pub fn scheme(&self) -> Scheme {
        self.scheme
    }

    pub fn host(&self) -> &str {
        &self.host
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The host as an address, when it is a literal one.
    pub fn ip(&self) -> Option<IpAddr> {
        let h = self.host.trim_start_matches('[').trim_end_matches(']');
        h.parse().ok()
    }
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}://{}:{}", self.scheme.as_str(), self.host, self.port)
    }
}

/// A text that names no origin rawko can reach.
#[derive(Debug, thiserror::Error)]
pub enum OriginError {
    #[error("{text:?} is not a URL: {source}")]
    NotUrl {
        text: String,
        #[source]
        source: url::ParseError,
    },
    #[error(transparent)]
    Denied(#[from] Denied),
}

/// One granted origin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrantEntry {
    pub origin: Origin,
    /// Whether loopback, private and link-local addresses may be reached through it.
    pub private: bool,
}

/// The origins one adapter instance may reach. Empty means no network at all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HttpGrant {
    entries: Vec<GrantEntry>,
}

impl HttpGrant {
    pub fn none() -> Self {
        HttpGrant::default()
    }

    /// Admit `origin`; with `private`, also at loopback, private and link-local addresses.
    pub fn allow(&mut self, origin: Origin, private: bool) {
        match self.entries.iter_mut().find(|e| e.origin == origin) {
            Some(e) => e.private |= private,
            None => self.entries.push(GrantEntry { origin, private }),
        }
    }

    pub fn entries(&self) -> &[GrantEntry] {
        &self.entries
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The grant entry admitting `url`, after checking its form and, for a literal address,
    /// the address itself. Names are checked again when they resolve.
    pub fn check_url(&self, url: &Url) -> Result<&GrantEntry, Denied> {
        if !url.username().is_empty() || url.password().is_some() {
            return Err(Denied::UserInfo(redact_url(url)));
        }
        let origin = Origin::of(url)?;
        let Some(entry) = self.entries.iter().find(|e| e.origin == origin) else {
            return Err(Denied::NotGranted {
                origin: origin.to_string(),
                granted: self.describe(),
            });
        };
        if let Some(ip) = origin.ip() {
            check_addr(origin.host(), ip, entry.private)?;
        }
        Ok(entry)
    }

    /// Whether some entry for `host` (any scheme or port) admits private addresses. Used when a
    /// name resolves, where only the name is known.
    pub fn private_allowed(&self, host: &str) -> Option<bool> {
        let mut found = None;
        for e in &self.entries {
            if e.origin.host.eq_ignore_ascii_case(host) {
                found = Some(found.unwrap_or(false) | e.private);
            }
        }
        found
    }

    /// The granted origins, for messages.
    pub fn describe(&self) -> String {
        if self.entries.is_empty() {
            return "nothing".into();
        }
        self.entries
            .iter()
            .map(|e| {
                if e.private {
                    format!("{} (private addresses allowed)", e.origin)
                } else {
                    e.origin.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// `url` without user name or password, for messages.
fn redact_url(url: &Url) -> String {
    let mut u = url.clone();
    let _ = u.set_username("");
    let _ = u.set_password(None);
    u.to_string()
}

/// What kind of network an address belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddrClass {
    Public,
    Loopback,
    /// RFC 1918, shared address space, unique local IPv6.
    Private,
    /// 169.254/16 (where cloud metadata services live) and fe80::/10.
    LinkLocal,
    /// Unspecified, broadcast, multicast, documentation, benchmarking and reserved ranges:
    /// nowhere a model server should be.
    Reserved,
}

impl std::fmt::Display for AddrClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            AddrClass::Public => "a public",
            AddrClass::Loopback => "a loopback",
            AddrClass::Private => "a private",
            AddrClass::LinkLocal => "a link-local",
            AddrClass::Reserved => "a reserved",
        })
    }
}

/// Classify `ip`. IPv4 addresses embedded in IPv6 (mapped, compatible, NAT64) are classified
/// as the IPv4 address they carry, since that is where the packets go.
pub fn classify(ip: IpAddr) -> AddrClass {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

fn classify_v4(ip: Ipv4Addr) -> AddrClass {
    let [a, b, c, _] = ip.octets();
    if ip.is_loopback() {
        AddrClass::Loopback
    } else if ip.is_private() || (a == 100 && (64..128).contains(&b)) {
        AddrClass::Private
    } else if ip.is_link_local() {
        AddrClass::LinkLocal
    } else if a == 0
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || a >= 240
        || (a == 192 && b == 0 && c == 0)
        || (a == 198 && (b == 18 || b == 19))
    {
        AddrClass::Reserved
    } else {
        AddrClass::Public
    }
}

fn classify_v6(ip: Ipv6Addr) -> AddrClass {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return classify_v4(v4);
    }
    let seg = ip.segments();
    // NAT64 (64:ff9b::/96) carries an IPv4 address in its last 32 bits.
    if seg[0] == 0x64 && seg[1] == 0xff9b && seg[2..6] == [0, 0, 0, 0] {
        let [.., a, b] = seg;
        return classify_v4(Ipv4Addr::new(
            (a >> 8) as u8,
            a as u8,
            (b >> 8) as u8,
            b as u8,
        ));
    }
    if ip.is_loopback() {
        AddrClass::Loopback
    } else if ip.is_unspecified() || ip.is_multicast() || seg[0..6] == [0, 0, 0, 0, 0, 0] {
        // The last also covers the deprecated IPv4-compatible form (::a.b.c.d).
        AddrClass::Reserved
    } else if (seg[0] & 0xfe00) == 0xfc00 {
        AddrClass::Private
    } else if (seg[0] & 0xffc0) == 0xfe80 {
        AddrClass::LinkLocal
    } else if seg[0] == 0x2001 && seg[1] == 0xdb8 {
        AddrClass::Reserved
    } else {
        AddrClass::Public
    }
}

/// Admit `ip` (which `host` is or resolved to) only if it is public or private ones are granted.
pub fn check_addr(host: &str, ip: IpAddr, private: bool) -> Result<(), Denied> {
    match classify(ip) {
        AddrClass::Public => Ok(()),
        // Reserved ranges are never a model server, whatever the grant says.
        AddrClass::Reserved => Err(Denied::Address {
            host: host.to_string(),
            addr: ip,
            class: AddrClass::Reserved,
        }),
        _ if private => Ok(()),
        class => Err(Denied::Address {
            host: host.to_string(),
            addr: ip,
            class,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    fn grant(origins: &[(&str, bool)]) -> HttpGrant {
        let mut g = HttpGrant::none();
        for (o, private) in origins {
            g.allow(Origin::parse(o).unwrap(), *private);
        }
        g
    }

    #[test]
    fn origins_match_exactly() {
        let g = grant(&[("https://api.openai.com/v1", false)]);
        assert!(
            g.check_url(&url("https://api.openai.com/v1/chat/completions"))
                .is_ok()
        );
        assert!(g.check_url(&url("https://API.OpenAI.com:443/x")).is_ok());
        for bad in [
            "http://api.openai.com/v1",
            "https://api.openai.com:8443/",
            "https://evil.api.openai.com/",
            "https://api.openai.com.evil.com/",
            "https://api.openai.com./",
            "ftp://api.openai.com/",
            "file:///etc/passwd",
        ] {
            assert!(g.check_url(&url(bad)).is_err(), "{bad} was admitted");
        }
        let e = g
            .check_url(&url("https://user:pw@api.openai.com/"))
            .unwrap_err();
        assert!(!e.to_string().contains("pw"), "{e}");
    }

    #[test]
    fn private_literals_need_a_private_grant() {
        for (u, class) in [
            ("http://127.0.0.1:8080/", AddrClass::Loopback),
            ("http://10.1.2.3:8080/", AddrClass::Private),
            ("http://172.16.0.1:8080/", AddrClass::Private),
            ("http://192.168.1.1:8080/", AddrClass::Private),
            ("http://169.254.169.254:8080/", AddrClass::LinkLocal),
            ("http://[::1]:8080/", AddrClass::Loopback),
            ("http://[fd00::1]:8080/", AddrClass::Private),
            ("http://[fe80::1]:8080/", AddrClass::LinkLocal),
            ("http://[::ffff:127.0.0.1]:8080/", AddrClass::Loopback),
            ("http://[64:ff9b::a9fe:a9fe]:8080/", AddrClass::LinkLocal),
        ] {
            let u = url(u);
            let o = Origin::of(&u).unwrap().to_string();
            let denied = grant(&[(&o, false)]).check_url(&u).unwrap_err();
            assert!(
                matches!(denied, Denied::Address { class: c, .. } if c == class),
                "{u}: {denied}"
            );
            assert!(grant(&[(&o, true)]).check_url(&u).is_ok(), "{u}");
        }
    }

    #[test]
    fn reserved_addresses_are_never_admitted() {
        for u in [
            "http://0.0.0.0:80/",
            "http://[::]:80/",
            "http://224.0.0.1/",
            "http://255.255.255.255/",
        ] {
            let u = url(u);
            let o = Origin::of(&u).unwrap().to_string();
            assert!(grant(&[(&o, true)]).check_url(&u).is_err(), "{u}");
        }
        assert_eq!(classify("8.8.8.8".parse().unwrap()), AddrClass::Public);
        assert_eq!(classify("2606:4700::1".parse().unwrap()), AddrClass::Public);
        assert_eq!(classify("100.64.0.1".parse().unwrap()), AddrClass::Private);
    }
}
