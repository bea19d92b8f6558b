//! The `http` capability's WIT side: a call's [`HttpCtx`], the `send` import and the `response`
//! resource. What may be reached, with which credential, is decided in
//! [`rawko_capability::http`].

use std::sync::Arc;

use wasmtime::component::{HasData, Linker, Resource, ResourceTable};

use rawko_capability::http::{HttpClient, HttpError, Incoming, Outgoing};

use crate::bindings::http as wit;

/// The `response` resource: a response head and its unread body.
pub type HttpResponse = Incoming;

/// What one plugin call may do with the network: nothing without a client.
#[derive(Debug, Default)]
pub struct HttpCtx {
    client: Option<Arc<HttpClient>>,
    requests: u32,
    open: u32,
}

impl HttpCtx {
    pub fn new(client: Arc<HttpClient>) -> Self {
        HttpCtx {
            client: Some(client),
            requests: 0,
            open: 0,
        }
    }
}

/// What the `http` host functions see of a store: its [`HttpCtx`] and the resource table its
/// responses live in.
pub struct HttpView<'a> {
    pub ctx: &'a mut HttpCtx,
    pub table: &'a mut ResourceTable,
}

/// The `http` capability, for [`HasData`]: its host functions see an [`HttpView`].
pub struct Http;

impl HasData for Http {
    type Data<'a> = HttpView<'a>;
}

/// Link the `http` import, with the view `get` projects from the store's data.
pub fn add_to_linker<T: Send + 'static>(
    linker: &mut Linker<T>,
    get: fn(&mut T) -> HttpView<'_>,
) -> wasmtime::Result<()> {
    wit::add_to_linker::<T, Http>(linker, get)
}

impl From<HttpError> for wit::HttpError {
    fn from(e: HttpError) -> Self {
        match e {
            HttpError::Denied(m) => wit::HttpError::Denied(m),
            HttpError::InvalidRequest(m) => wit::HttpError::InvalidRequest(m),
            HttpError::Connect(m) => wit::HttpError::Connect(m),
            HttpError::Timeout => wit::HttpError::Timeout,
            HttpError::TooLarge(n) => wit::HttpError::TooLarge(n),
            HttpError::Protocol(m) => wit::HttpError::Protocol(m),
        }
    }
}

fn method(m: wit::Method) -> reqwest::Method {
    match m {
        wit::Method::Get => reqwest::Method::GET,
        wit::Method::Head => reqwest::Method::HEAD,
        wit::Method::Post => reqwest::Method::POST,
        wit::Method::Put => reqwest::Method::PUT,
        wit::Method::Patch => reqwest::Method::PATCH,
        wit::Method::Delete => reqwest::Method::DELETE,
    }
}

impl wit::Host for HttpView<'_> {
    async fn send(
        &mut self,
        request: wit::Request,
    ) -> wasmtime::Result<Result<Resource<HttpResponse>, wit::HttpError>> {
        let ctx = &mut *self.ctx;
        let Some(client) = ctx.client.clone() else {
            return Ok(Err(wit::HttpError::Denied(
                "this plugin has no network access".into(),
            )));
        };
        let policy = client.policy();
        if ctx.requests >= policy.max_requests_per_call {
            return Ok(Err(wit::HttpError::Denied(format!(
                "more than {} requests in one call",
                policy.max_requests_per_call
            ))));
        }
        if ctx.open >= policy.max_open_responses {
            return Ok(Err(wit::HttpError::InvalidRequest(format!(
                "more than {} responses open at once; read or drop one first",
                policy.max_open_responses
            ))));
        }
        ctx.requests += 1;
        let out = Outgoing {
            method: method(request.method),
            url: request.url,
            headers: request.headers,
            body: request.body.into(),
            timeout: request
                .timeout_ms
                .map(|ms| std::time::Duration::from_millis(ms.into())),
        };
        match client.send(out).await {
            Ok(incoming) => {
                self.ctx.open += 1;
                Ok(Ok(self.table.push(incoming)?))
            }
            Err(e) => Ok(Err(e.into())),
        }
    }
}

impl wit::HostResponse for HttpView<'_> {
    async fn status(&mut self, r: Resource<HttpResponse>) -> wasmtime::Result<u16> {
        Ok(self.table.get(&r)?.status)
    }

    async fn headers(&mut self, r: Resource<HttpResponse>) -> wasmtime::Result<wit::Headers> {
        Ok(self.table.get(&r)?.headers.clone())
    }

    async fn read(
        &mut self,
        r: Resource<HttpResponse>,
    ) -> wasmtime::Result<Result<Option<Vec<u8>>, wit::HttpError>> {
        let incoming = self.table.get_mut(&r)?;
        Ok(incoming.body.next().await.map_err(Into::into))
    }

    async fn read_all(
        &mut self,
        r: Resource<HttpResponse>,
    ) -> wasmtime::Result<Result<Vec<u8>, wit::HttpError>> {
        let incoming = self.table.get_mut(&r)?;
        Ok(incoming.body.all().await.map_err(Into::into))
    }

    async fn drop(&mut self, r: Resource<HttpResponse>) -> wasmtime::Result<()> {
        self.table.delete(r)?;
        self.ctx.open = self.ctx.open.saturating_sub(1);
        Ok(())
    }
}
