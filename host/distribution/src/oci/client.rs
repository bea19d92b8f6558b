//! The registry client: pull and push over [`fetch`]'s hardened HTTP client.

use std::collections::BTreeMap;

use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, LOCATION, WWW_AUTHENTICATE};
use reqwest::{Method, StatusCode, Url};

use super::*;
use crate::fetch::{self, FetchError, MAX_DOC_BYTES, MAX_PLUGIN_BYTES};
use crate::sha256_hex;

impl Reference {
    /// The tag or digest to ask the registry for (the digest when both are given).
    pub(crate) fn reference(&self) -> &str {
        self.digest
            .as_deref()
            .or(self.tag.as_deref())
            .expect("a parsed reference has a tag or a digest")
    }
}

/// The wasm config blob (CNCF wasm OCI artifact layout).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WasmConfig {
    pub(crate) created: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) author: Option<String>,
    pub(crate) architecture: &'static str,
    pub(crate) os: &'static str,
    pub(crate) layer_digests: Vec<String>,
    pub(crate) component: ComponentSummary,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct ComponentSummary {
    pub(crate) exports: Vec<String>,
    pub(crate) imports: Vec<String>,
}

/// What a pull brings back.
#[derive(Debug)]
pub struct Pulled {
    /// `sha256:` digest of the manifest, what a tag pointed at.
    pub manifest_digest: String,
    pub wasm: Vec<u8>,
    pub signature: Option<String>,
}

/// What to push.
#[derive(Debug)]
pub struct Artifact<'a> {
    pub wasm: &'a [u8],
    pub imports: Vec<String>,
    pub exports: Vec<String>,
    pub author: Option<String>,
    pub annotations: BTreeMap<String, String>,
    /// A minisign signature to publish as a referrer of the plugin's manifest.
    pub signature: Option<String>,
}

/// A client for one registry.
#[derive(Debug)]
pub struct Client {
    http: reqwest::Client,
    base: Url,
    /// The `Authorization` header value to send, once a challenge has been answered.
    auth: Option<String>,
    /// Plain HTTP to the registry's own host is allowed (`--insecure-registry`).
    insecure: bool,
}

impl Client {
    pub fn new(reference: &Reference) -> Result<Client, FetchError> {
        Ok(Client {
            http: fetch::client()?,
            base: base(reference)?,
            auth: None,
            insecure: reference.insecure,
        })
    }

    fn url(&self, path: &str) -> Result<Url, FetchError> {
        self.base
            .join(path)
            .map_err(|e| FetchError::Other(format!("{path}: {e}")))
    }

    /// Send a request built by `build`, answering one authentication challenge if the registry
    /// makes it. `scope` is the token scope to ask for.
    async fn send(
        &mut self,
        scope: &str,
        build: impl Fn(&reqwest::Client) -> reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, FetchError> {
        for attempt in 0..2 {
            let mut req = build(&self.http);
            if let Some(auth) = &self.auth {
                req = req.header(AUTHORIZATION, auth);
            }
            let req = req
                .build()
                .map_err(|e| FetchError::Other(fetch::describe(&e)))?;
            let url = req.url().clone();
            let own_plain = self.insecure
                && url.scheme() == "http"
                && url.host() == self.base.host()
                && url.port_or_known_default() == self.base.port_or_known_default();
            if !own_plain {
                fetch::check_scheme(&url)?;
            }
            let resp = self.http.execute(req).await.map_err(|e| FetchError::Http {
                url: url.to_string(),
                message: fetch::describe(&e),
            })?;
            if resp.status() != StatusCode::UNAUTHORIZED || attempt == 1 {
                return Ok(resp);
            }
            let challenge = resp
                .headers()
                .get(WWW_AUTHENTICATE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string();
            self.auth = Some(self.answer(&url, &challenge, scope).await?);
        }
        unreachable!("the loop returns on its second pass")
    }

    /// The `Authorization` value answering `challenge`.
    async fn answer(&self, url: &Url, challenge: &str, scope: &str) -> Result<String, FetchError> {
        let creds = credentials_for(url);
        let (scheme, params) = parse_challenge(challenge);
        match scheme.to_ascii_lowercase().as_str() {
            "basic" => {
                let Some((user, pass)) = creds else {
                    return Err(FetchError::Status {
                        url: url.to_string(),
                        status: 401,
                        hint: format!(
                            ": the registry wants a user name and password; set RAWKO_REGISTRY_USERNAME, \
                             RAWKO_REGISTRY_PASSWORD and RAWKO_REGISTRY_HOST={}",
                            host_of(url)
                        ),
                    });
                };
                let probe = self
                    .http
                    .get(url.clone())
                    .basic_auth(user, Some(pass))
                    .build()
                    .map_err(|e| FetchError::Other(fetch::describe(&e)))?;
                let value = probe
                    .headers()
                    .get(AUTHORIZATION)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_string();
                Ok(value)
            }
            "bearer" => {
                let realm = params.get("realm").ok_or_else(|| {
                    FetchError::Other(format!(
                        "{url}: the registry asked for a token without saying where to get one"
                    ))
                })?;
                let mut token_url = Url::parse(realm)
                    .map_err(|e| FetchError::Other(format!("token realm `{realm}`: {e}")))?;
                {
                    let mut q = token_url.query_pairs_mut();
                    if let Some(service) = params.get("service") {
                        q.append_pair("service", service);
                    }
                    // The challenge's own scope, if any, names what this request needs.
                    q.append_pair("scope", params.get("scope").map_or(scope, String::as_str));
                }
                fetch::check_scheme(&token_url)?;
                let mut req = self.http.get(token_url.clone());
                // The registry's credentials go to its own token service, not to any host a
                // challenge names.
                if let Some((user, pass)) = creds
                    && same_site(&token_url, url)
                {
                    req = req.basic_auth(user, Some(pass));
                }
                let resp = req.send().await.map_err(|e| FetchError::Http {
                    url: token_url.to_string(),
                    message: fetch::describe(&e),
                })?;
                if !resp.status().is_success() {
                    return Err(FetchError::Status {
                        url: token_url.to_string(),
                        status: resp.status().as_u16(),
                        hint: ": the registry's token service refused (set RAWKO_REGISTRY_USERNAME, RAWKO_REGISTRY_PASSWORD and RAWKO_REGISTRY_HOST if it needs a login)".into(),
                    });
                }
                let body = fetch::read_body(resp, MAX_DOC_BYTES, None).await?;
                #[derive(Deserialize)]
                struct Token {
                    token: Option<String>,
                    access_token: Option<String>,
                }
                let t: Token = serde_json::from_slice(&body).map_err(|e| {
                    FetchError::Other(format!("{token_url}: not a token response: {e}"))
                })?;
                let token = t.token.or(t.access_token).ok_or_else(|| {
                    FetchError::Other(format!("{token_url}: the token response holds no token"))
                })?;
                Ok(format!("Bearer {token}"))
            }
            _ => Err(FetchError::Status {
                url: url.to_string(),
                status: 401,
                hint: format!(": unsupported authentication `{challenge}`"),
            }),
        }
    }

    /// Pull the plugin `reference` names: its manifest (checked against the digest when the
    /// reference has one), then its one wasm layer (checked against the layer's digest).
    pub async fn pull(&mut self, reference: &Reference) -> Result<Pulled, FetchError> {
        let scope = format!("repository:{}:pull", reference.repository);
        let url = self.url(&format!(
            "v2/{}/manifests/{}",
            reference.repository,
            reference.reference()
        ))?;
        let resp = self
            .send(&scope, |c| {
                c.get(url.clone()).header(
                    ACCEPT,
                    format!("{MANIFEST_MEDIA_TYPE}, application/vnd.docker.distribution.manifest.v2+json"),
                )
            })
            .await?;
        let resp = ok_or_status(resp, "manifest")?;
        let body = fetch::read_body(resp, MAX_DOC_BYTES, None).await?;
        let manifest_digest = format!("sha256:{}", sha256_hex(&body));
        if let Some(want) = &reference.digest
            && *want != manifest_digest
        {
            return Err(FetchError::Other(format!(
                "{reference}: the registry returned a manifest with digest {manifest_digest}, not the one asked for"
            )));
        }
        let layer = choose_layer(&reference.to_string(), &body)
            .map_err(|e| FetchError::Other(e.to_string()))?;
        if layer.layer_size > MAX_PLUGIN_BYTES {
            return Err(FetchError::TooLarge {
                url: reference.to_string(),
                limit: MAX_PLUGIN_BYTES,
            });
        }
        let blob_url = self.url(&format!(
            "v2/{}/blobs/{}",
            reference.repository, layer.layer_digest
        ))?;
        let resp = self.send(&scope, |c| c.get(blob_url.clone())).await?;
        let resp = ok_or_status(resp, "layer")?;
        let wasm = fetch::read_body(resp, layer.layer_size, Some("downloading")).await?;
        let got = format!("sha256:{}", sha256_hex(&wasm));
        if got != layer.layer_digest || wasm.len() as u64 != layer.layer_size {
            return Err(FetchError::Other(format!(
                "{reference}: the wasm layer's bytes do not match its digest {} (got {got}, {} bytes)",
                layer.layer_digest,
                wasm.len()
            )));
        }
        // A signature published as a referrer, else one an earlier rawko put in the manifest.
        let signature = match self
            .find_signature(reference, &scope, &manifest_digest)
            .await?
        {
            Some(s) => Some(s),
            None => layer.signature,
        };
        Ok(Pulled {
            manifest_digest,
            wasm,
            signature,
        })
    }

    /// Push `artifact` to `reference` (which needs a tag); returns the manifest digest.
    pub async fn push(
        &mut self,
        reference: &Reference,
        artifact: &Artifact<'_>,
    ) -> Result<String, FetchError> {
        let Some(tag) = reference.tag.clone() else {
            return Err(FetchError::Other(format!(
                "{reference}: publishing needs a tag (oci://registry/repository:TAG)"
            )));
        };
        let scope = format!("repository:{}:pull,push", reference.repository);
        let layer_digest = format!("sha256:{}", sha256_hex(artifact.wasm));
        let config = WasmConfig {
            created: now_rfc3339(),
            author: artifact.author.clone(),
            architecture: "wasm",
            os: "wasip2",
            layer_digests: vec![layer_digest.clone()],
            component: ComponentSummary {
                exports: artifact.exports.clone(),
                imports: artifact.imports.clone(),
            },
        };
        let config = serde_json::to_vec(&config).expect("the config serializes");
        let config_digest = format!("sha256:{}", sha256_hex(&config));
        self.upload(reference, &scope, &config_digest, &config)
            .await?;
        self.upload(reference, &scope, &layer_digest, artifact.wasm)
            .await?;
        let manifest = ImageManifest {
            schema_version: 2,
            media_type: Some(MANIFEST_MEDIA_TYPE.into()),
            artifact_type: None,
            config: Descriptor {
                media_type: CONFIG_MEDIA_TYPE.into(),
                digest: config_digest,
                size: config.len() as u64,
                artifact_type: None,
                annotations: None,
            },
            layers: vec![Descriptor {
                media_type: WASM_MEDIA_TYPE.into(),
                digest: layer_digest,
                size: artifact.wasm.len() as u64,
                artifact_type: None,
                annotations: None,
            }],
            subject: None,
            annotations: (!artifact.annotations.is_empty()).then(|| artifact.annotations.clone()),
        };
        let body = serde_json::to_vec(&manifest).expect("the manifest serializes");
        let digest = format!("sha256:{}", sha256_hex(&body));
        let url = self.url(&format!("v2/{}/manifests/{tag}", reference.repository))?;
        let resp = self
            .send(&scope, |c| {
                c.put(url.clone())
                    .header(CONTENT_TYPE, MANIFEST_MEDIA_TYPE)
                    .body(body.clone())
            })
            .await?;
        ok_or_status(resp, "manifest upload")?;
        if let Some(sig) = &artifact.signature {
            let subject = Descriptor {
                media_type: MANIFEST_MEDIA_TYPE.into(),
                digest: digest.clone(),
                size: body.len() as u64,
                artifact_type: None,
                annotations: None,
            };
            self.push_signature(reference, &scope, subject, sig.as_bytes())
                .await?;
        }
        Ok(digest)
    }

    /// Publish `signature` as an OCI 1.1 referrer of `subject`: an artifact manifest with an
    /// empty config, the `.minisig` text as its one layer and `subject` set, pushed by digest.
    /// A registry without the referrers API (no `OCI-Subject` in its answer) gets the fallback
    /// too: the referrer added to the image index tagged `sha256-<hex>` of the subject.
    async fn push_signature(
        &mut self,
        reference: &Reference,
        scope: &str,
        subject: Descriptor,
        signature: &[u8],
    ) -> Result<(), FetchError> {
        let repo = reference.repository.clone();
        let empty = b"{}";
        let empty_digest = format!("sha256:{}", sha256_hex(empty));
        self.upload(reference, scope, &empty_digest, empty).await?;
        let sig_digest = format!("sha256:{}", sha256_hex(signature));
        self.upload(reference, scope, &sig_digest, signature)
            .await?;
        let subject_digest = subject.digest.clone();
        let manifest = ImageManifest {
            schema_version: 2,
            media_type: Some(MANIFEST_MEDIA_TYPE.into()),
            artifact_type: Some(SIGNATURE_ARTIFACT_TYPE.into()),
            config: Descriptor {
                media_type: EMPTY_CONFIG_MEDIA_TYPE.into(),
                digest: empty_digest,
                size: empty.len() as u64,
                artifact_type: None,
                annotations: None,
            },
            layers: vec![Descriptor {
                media_type: SIGNATURE_LAYER_MEDIA_TYPE.into(),
                digest: sig_digest,
                size: signature.len() as u64,
                artifact_type: None,
                annotations: None,
            }],
            subject: Some(subject),
            annotations: None,
        };
        let body = serde_json::to_vec(&manifest).expect("the manifest serializes");
        let digest = format!("sha256:{}", sha256_hex(&body));
        let url = self.url(&format!("v2/{repo}/manifests/{digest}"))?;
        let resp = self
            .send(scope, |c| {
                c.put(url.clone())
                    .header(CONTENT_TYPE, MANIFEST_MEDIA_TYPE)
                    .body(body.clone())
            })
            .await?;
        let resp = ok_or_status(resp, "signature upload")?;
        if resp.headers().contains_key("oci-subject") {
            return Ok(());
        }
        // The fallback tag scheme: read the index (if any), add this referrer, write it back.
        let tag = referrers_tag(&subject_digest);
        let tag_url = self.url(&format!("v2/{repo}/manifests/{tag}"))?;
        let resp = self
            .send(scope, |c| {
                c.get(tag_url.clone()).header(ACCEPT, INDEX_MEDIA_TYPE)
            })
            .await?;
        let mut index = if resp.status().is_success() {
            let bytes = fetch::read_body(resp, MAX_DOC_BYTES, None).await?;
            serde_json::from_slice::<ImageIndex>(&bytes)
                .map_err(|e| FetchError::Other(format!("{tag_url}: not an image index: {e}")))?
        } else {
            ImageIndex {
                schema_version: 2,
                media_type: Some(INDEX_MEDIA_TYPE.into()),
                manifests: Vec::new(),
            }
        };
        if !index.manifests.iter().any(|m| m.digest == digest) {
            index.manifests.push(Descriptor {
                media_type: MANIFEST_MEDIA_TYPE.into(),
                digest,
                size: body.len() as u64,
                artifact_type: Some(SIGNATURE_ARTIFACT_TYPE.into()),
                annotations: None,
            });
        }
        let index = serde_json::to_vec(&index).expect("the index serializes");
        let resp = self
            .send(scope, |c| {
                c.put(tag_url.clone())
                    .header(CONTENT_TYPE, INDEX_MEDIA_TYPE)
                    .body(index.clone())
            })
            .await?;
        ok_or_status(resp, "referrers index upload")?;
        Ok(())
    }

    /// The signature published as a referrer of manifest `subject` in `reference`'s
    /// repository: from the referrers API, else from the fallback tag; `None` when there is
    /// none. Every manifest and blob read is checked against its digest.
    async fn find_signature(
        &mut self,
        reference: &Reference,
        scope: &str,
        subject: &str,
    ) -> Result<Option<String>, FetchError> {
        let repo = reference.repository.clone();
        let api = self.url(&format!(
            "v2/{repo}/referrers/{subject}?artifactType={}",
            SIGNATURE_ARTIFACT_TYPE.replace('+', "%2B")
        ))?;
        let resp = self
            .send(scope, |c| {
                c.get(api.clone()).header(ACCEPT, INDEX_MEDIA_TYPE)
            })
            .await?;
        let index_bytes = if resp.status().is_success() {
            Some(fetch::read_body(resp, MAX_DOC_BYTES, None).await?)
        } else {
            let tag = referrers_tag(subject);
            let url = self.url(&format!("v2/{repo}/manifests/{tag}"))?;
            let resp = self
                .send(scope, |c| {
                    c.get(url.clone()).header(ACCEPT, INDEX_MEDIA_TYPE)
                })
                .await?;
            if resp.status().is_success() {
                Some(fetch::read_body(resp, MAX_DOC_BYTES, None).await?)
            } else {
                None
            }
        };
        let Some(index_bytes) = index_bytes else {
            return Ok(None);
        };
        let index: ImageIndex = serde_json::from_slice(&index_bytes).map_err(|e| {
            FetchError::Other(format!(
                "{reference}: the referrers are not an image index: {e}"
            ))
        })?;
        for referrer in index
            .manifests
            .iter()
            .filter(|m| m.artifact_type.as_deref() == Some(SIGNATURE_ARTIFACT_TYPE))
        {
            if !is_sha256_digest(&referrer.digest) {
                continue;
            }
            let url = self.url(&format!("v2/{repo}/manifests/{}", referrer.digest))?;
            let resp = self
                .send(scope, |c| {
                    c.get(url.clone()).header(ACCEPT, MANIFEST_MEDIA_TYPE)
                })
                .await?;
            let resp = ok_or_status(resp, "signature manifest")?;
            let body = fetch::read_body(resp, MAX_DOC_BYTES, None).await?;
            if format!("sha256:{}", sha256_hex(&body)) != referrer.digest {
                return Err(FetchError::Other(format!(
                    "{reference}: a signature manifest does not match its digest {}",
                    referrer.digest
                )));
            }
            let manifest: ImageManifest = serde_json::from_slice(&body).map_err(|e| {
                FetchError::Other(format!("{reference}: a signature manifest: {e}"))
            })?;
            if manifest.subject.as_ref().map(|s| s.digest.as_str()) != Some(subject) {
                continue;
            }
            let Some(layer) = manifest.layers.iter().find(|l| {
                l.media_type == SIGNATURE_LAYER_MEDIA_TYPE && is_sha256_digest(&l.digest)
            }) else {
                continue;
            };
            const MAX_SIGNATURE: u64 = 64 << 10;
            if layer.size > MAX_SIGNATURE {
                continue;
            }
            let url = self.url(&format!("v2/{repo}/blobs/{}", layer.digest))?;
            let resp = self.send(scope, |c| c.get(url.clone())).await?;
            let resp = ok_or_status(resp, "signature")?;
            let text = fetch::read_body(resp, MAX_SIGNATURE, None).await?;
            if format!("sha256:{}", sha256_hex(&text)) != layer.digest {
                return Err(FetchError::Other(format!(
                    "{reference}: a signature does not match its digest {}",
                    layer.digest
                )));
            }
            return Ok(Some(String::from_utf8_lossy(&text).into_owned()));
        }
        Ok(None)
    }

    /// Upload one blob unless the registry has it: a monolithic upload (POST, then PUT with the
    /// digest).
    async fn upload(
        &mut self,
        reference: &Reference,
        scope: &str,
        digest: &str,
        bytes: &[u8],
    ) -> Result<(), FetchError> {
        let repo = &reference.repository;
        let head = self.url(&format!("v2/{repo}/blobs/{digest}"))?;
        let resp = self
            .send(scope, |c| c.request(Method::HEAD, head.clone()))
            .await?;
        if resp.status().is_success() {
            return Ok(());
        }
        let start = self.url(&format!("v2/{repo}/blobs/uploads/"))?;
        let resp = self.send(scope, |c| c.post(start.clone())).await?;
        let resp = ok_or_status(resp, "blob upload")?;
        let location = resp
            .headers()
            .get(LOCATION)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| {
                FetchError::Other(format!("{start}: the registry gave no upload location"))
            })?;
        let mut put = resp
            .url()
            .join(location)
            .map_err(|e| FetchError::Other(format!("upload location `{location}`: {e}")))?;
        put.query_pairs_mut().append_pair("digest", digest);
        let body = bytes.to_vec();
        let resp = self
            .send(scope, |c| {
                c.put(put.clone())
                    .header(CONTENT_TYPE, "application/octet-stream")
                    .body(body.clone())
            })
            .await?;
        ok_or_status(resp, "blob upload")?;
        Ok(())
    }
}

fn ok_or_status(resp: reqwest::Response, what: &str) -> Result<reqwest::Response, FetchError> {
    let status = resp.status();
    if status.is_success() {
        return Ok(resp);
    }
    let hint = match status {
        StatusCode::NOT_FOUND => format!(" (no such {what})"),
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
            " (not allowed; set RAWKO_REGISTRY_USERNAME, RAWKO_REGISTRY_PASSWORD and RAWKO_REGISTRY_HOST if the registry needs a login)".into()
        }
        _ => String::new(),
    };
    Err(FetchError::Status {
        url: resp.url().to_string(),
        status: status.as_u16(),
        hint,
    })
}

/// The registry credentials from the environment, if they are `registry`'s: given for the host
/// (and port) `RAWKO_REGISTRY_HOST` names, and for no other, as container tools key logins by
/// registry.
fn credentials_for(registry: &Url) -> Option<(String, String)> {
    let user = std::env::var("RAWKO_REGISTRY_USERNAME")
        .ok()
        .filter(|u| !u.is_empty())?;
    let pass = std::env::var("RAWKO_REGISTRY_PASSWORD").unwrap_or_default();
    let Some(host) = std::env::var("RAWKO_REGISTRY_HOST")
        .ok()
        .filter(|h| !h.trim().is_empty())
    else {
        tracing::warn!(
            "RAWKO_REGISTRY_USERNAME is set but RAWKO_REGISTRY_HOST is not: the credentials are \
             sent nowhere until it names their registry"
        );
        return None;
    };
    if host.trim().eq_ignore_ascii_case(&host_of(registry)) {
        Some((user, pass))
    } else {
        tracing::debug!(
            "registry credentials are for {host}, not {}: not sent",
            host_of(registry)
        );
        None
    }
}

/// `host` or `host:port` of `url`, lowercase.
fn host_of(url: &Url) -> String {
    let host = url.host_str().unwrap_or_default().to_ascii_lowercase();
    match url.port() {
        Some(p) => format!("{host}:{p}"),
        None => host,
    }
}

/// Whether two URLs are on the same site: the same host, or two names under the same parent
/// domain (a registry's token service at `auth.example.com` for `registry.example.com`).
fn same_site(a: &Url, b: &Url) -> bool {
    let (Some(x), Some(y)) = (a.host_str(), b.host_str()) else {
        return false;
    };
    if x.eq_ignore_ascii_case(y) {
        return true;
    }
    let is_name = |h: &str| h.parse::<std::net::IpAddr>().is_err() && !h.starts_with('[');
    let site = |h: &str| {
        let labels: Vec<&str> = h.rsplitn(3, '.').collect();
        (labels.len() >= 3).then(|| format!("{}.{}", labels[1], labels[0]).to_ascii_lowercase())
    };
    is_name(x) && is_name(y) && site(x).is_some() && site(x) == site(y)
}

/// Now, as RFC 3339 in UTC (`2024-01-02T03:04:05Z`), as the wasm config's `created` wants it.
fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

/// The registry's base URL: https, or plain HTTP for a registry on this machine (as Docker
/// assumes for localhost, `127.0.0.0/8` and `[::1]`) or one marked insecure.
fn base(reference: &Reference) -> Result<Url, FetchError> {
    let bad =
        |e: url::ParseError| FetchError::Other(format!("registry `{}`: {e}", reference.registry));
    let mut url = Url::parse(&format!("https://{}/", reference.registry)).map_err(bad)?;
    if reference.insecure || fetch::is_loopback(&url) {
        url = Url::parse(&format!("http://{}/", reference.registry)).map_err(bad)?;
    }
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registries_on_this_machine_or_marked_insecure_speak_plain_http() {
        let scheme = |r: &str, insecure: &[&str]| {
            let mut reference = Reference::parse(&format!("oci://{r}/a/b:1")).unwrap();
            let named: Vec<String> = insecure.iter().map(|s| s.to_string()).collect();
            reference.allow_insecure(&named);
            base(&reference).unwrap().scheme().to_string()
        };
        assert_eq!(scheme("127.0.0.1:5000", &[]), "http");
        assert_eq!(scheme("127.1.2.3", &[]), "http");
        assert_eq!(scheme("[::1]:5000", &[]), "http");
        assert_eq!(scheme("localhost:5000", &[]), "http");
        assert_eq!(scheme("ghcr.io", &[]), "https");
        assert_eq!(scheme("[2001:db8::1]:5000", &[]), "https");
        assert_eq!(scheme("registry.lan:5000", &["registry.lan"]), "http");
        assert_eq!(scheme("registry.lan:5000", &["registry.lan:5000"]), "http");
        assert_eq!(scheme("registry.lan:5000", &["registry.lan:6000"]), "https");
        assert_eq!(scheme("[2001:db8::1]:5000", &["[2001:db8::1]"]), "http");
    }

    #[test]
    fn credentials_stay_on_their_registrys_site() {
        let u = |s: &str| Url::parse(s).unwrap();
        assert_eq!(
            host_of(&u("https://Registry.Example.com/v2/")),
            "registry.example.com"
        );
        assert_eq!(host_of(&u("http://127.0.0.1:5000/v2/")), "127.0.0.1:5000");
        let registry = u("https://registry-1.docker.io/v2/a/b/manifests/1");
        assert!(same_site(&u("https://auth.docker.io/token"), &registry));
        assert!(same_site(
            &u("https://registry-1.docker.io/token"),
            &registry
        ));
        assert!(!same_site(&u("https://evil.example/token"), &registry));
        assert!(!same_site(
            &u("https://docker.io.evil.example/token"),
            &registry
        ));
        assert!(!same_site(
            &u("http://127.0.0.2/token"),
            &u("http://127.0.0.1/v2/")
        ));
    }

    #[test]
    fn timestamps_are_rfc3339() {
        let t = now_rfc3339();
        assert_eq!(t.len(), 20, "{t}");
        assert!(t.starts_with("20") && t.ends_with('Z'), "{t}");
    }
}
