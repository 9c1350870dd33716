//! Handlers by method name, and the [`Context`] a handler gets: the call's body, the
//! connection it came on, and the means to answer it (or not).

use super::codec::Codec;
use super::error::Error;
use super::peer::Peer;
use super::stream::Stream;
use bytes::Bytes;
use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A handler's future, boxed.
pub(crate) type HandlerFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

type Route = Arc<dyn Fn(Context) -> HandlerFuture + Send + Sync>;
type StreamRoute = Arc<dyn Fn(Stream) -> HandlerFuture + Send + Sync>;

/// The text a request for a method without a handler is answered with (arpc's).
pub(crate) const METHOD_NOT_FOUND: &str = "method not found";

/// Handlers by method name, for a server's connections or a client's (the connection is
/// two-way: a server calls its clients' handlers).
///
/// ```
/// use fibr::arpc::Router;
///
/// let router = Router::new()
///     .route("/echo", |ctx| async move { ctx.reply(ctx.body()) })
///     .route("/fail", |ctx| async move { ctx.reply_error("no") })
///     // A handler that never answers (meant for notifies).
///     .route("/log", |ctx| async move { eprintln!("{:?}", ctx.body()) });
/// ```
#[derive(Clone, Default)]
pub struct Router {
    routes: HashMap<Box<[u8]>, Route>,
    streams: HashMap<Box<[u8]>, StreamRoute>,
}

impl fmt::Debug for Router {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut methods: Vec<_> = self
            .routes
            .keys()
            .map(|k| String::from_utf8_lossy(k))
            .collect();
        methods.sort();
        f.debug_struct("Router").field("methods", &methods).finish()
    }
}

impl Router {
    /// No handlers: requests are not answered at all (arpc's behaviour until the first
    /// handler is added; from then on, unknown methods get `method not found`).
    pub fn new() -> Router {
        Router::default()
    }

    /// Calls and notifies of `method` go to `handler`, an async function of the
    /// [`Context`]. It may answer once ([`Context::reply`], [`Context::reply_error`]) or
    /// not at all; it runs on fibr's workers, first within the round that read the call.
    ///
    /// # Panics
    /// If `method` is empty or longer than 127 bytes (no peer could call it).
    #[must_use]
    pub fn route<F, Fut>(mut self, method: &str, handler: F) -> Router
    where
        F: Fn(Context) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        if let Err(e) = crate::proto::arpc::check_method(method.as_bytes()) {
            panic!("arpc route {method:?}: {e}");
        }
        let route: Route = Arc::new(move |ctx| Box::pin(handler(ctx)));
        self.routes.insert(method.as_bytes().into(), route);
        self
    }

    /// Streams the other side opens on `method` go to `handler`, an async function of
    /// the [`Stream`].
    ///
    /// # Panics
    /// If `method` is empty or longer than 127 bytes.
    #[must_use]
    pub fn stream<F, Fut>(mut self, method: &str, handler: F) -> Router
    where
        F: Fn(Stream) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        if let Err(e) = crate::proto::arpc::check_method(method.as_bytes()) {
            panic!("arpc stream route {method:?}: {e}");
        }
        let route: StreamRoute = Arc::new(move |s| Box::pin(handler(s)));
        self.streams.insert(method.as_bytes().into(), route);
        self
    }

    /// Wraps every handler added so far in `middleware`, an async function of the
    /// [`Context`] and the [`Next`] handler: it may look at the call, answer it itself,
    /// or run `next` (before or after work of its own). Handlers added later are not
    /// wrapped; the last middleware added runs first.
    ///
    /// ```
    /// use fibr::arpc::Router;
    ///
    /// let router = Router::new()
    ///     .route("/echo", |ctx| async move { ctx.reply(ctx.body()) })
    ///     .middleware(|ctx, next| async move {
    ///         if ctx.body().len() > 1024 {
    ///             return ctx.reply_error("too big");
    ///         }
    ///         next.run(ctx).await
    ///     });
    /// ```
    #[must_use]
    pub fn middleware<F, Fut>(mut self, middleware: F) -> Router
    where
        F: Fn(Context, Next) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let middleware = Arc::new(middleware);
        for route in self.routes.values_mut() {
            let (inner, mw) = (route.clone(), middleware.clone());
            *route = Arc::new(move |ctx| {
                let next = Next {
                    route: inner.clone(),
                };
                Box::pin(mw(ctx, next))
            });
        }
        self
    }

    /// The handler's future for a call or notify of `ctx.method`; None if no handler has
    /// it.
    pub(crate) fn dispatch(&self, ctx: Context) -> Option<HandlerFuture> {
        let route = self.routes.get(&ctx.method[..])?;
        Some(route(ctx))
    }

    /// The stream handler of `method`, if there is one.
    pub(crate) fn stream_route(&self, method: &[u8]) -> Option<&StreamRoute> {
        self.streams.get(method)
    }

    /// True if no handler was added.
    pub(crate) fn is_empty(&self) -> bool {
        self.routes.is_empty()
    }
}

/// The rest of the chain a middleware wraps: the next middleware, or the handler.
pub struct Next {
    route: Route,
}

impl fmt::Debug for Next {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Next").finish_non_exhaustive()
    }
}

impl Next {
    /// Runs the rest of the chain with `ctx`.
    pub async fn run(self, ctx: Context) {
        (self.route)(ctx).await
    }
}

/// A call or notify that came in, as its handler gets it.
pub struct Context {
    peer: Peer,
    seq: u64,
    method: Bytes,
    body: Bytes,
    is_async: bool,
    is_notify: bool,
    answered: AtomicBool,
}

impl fmt::Debug for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context")
            .field("method", &self.method())
            .field("seq", &self.seq)
            .field("notify", &self.is_notify)
            .field("body_len", &self.body.len())
            .finish()
    }
}

impl Context {
    /// A call (`seq`, answered with the async bit `is_async`) or a notify, with `frame`
    /// holding the method then the body.
    pub(crate) fn new(
        peer: Peer,
        seq: u64,
        frame: Bytes,
        method_len: usize,
        is_async: bool,
        is_notify: bool,
    ) -> Context {
        Context {
            peer,
            seq,
            method: frame.slice(..method_len),
            body: frame.slice(method_len..),
            is_async,
            is_notify,
            answered: AtomicBool::new(false),
        }
    }

    /// The method called.
    pub fn method(&self) -> &str {
        // Routes are `str`s, so a dispatched method is UTF-8.
        std::str::from_utf8(&self.method).unwrap_or_default()
    }

    /// The body as it came.
    pub fn body(&self) -> &Bytes {
        &self.body
    }

    /// The body decoded by `codec`.
    pub fn bind<T>(&self, codec: &impl Codec<T>) -> Result<T, Error> {
        codec.decode(&self.body)
    }

    /// True for a notify, which cannot be answered.
    pub fn is_notify(&self) -> bool {
        self.is_notify
    }

    /// The connection the call came on: the handler can call and notify the other side.
    pub fn peer(&self) -> &Peer {
        &self.peer
    }

    /// Answers with `body`. Only the first answer goes out; a notify gets none.
    pub fn reply(&self, body: impl AsRef<[u8]>) {
        self.answer(false, body.as_ref());
    }

    /// Answers with `value` encoded by `codec` (an error reply if it cannot be encoded).
    pub fn reply_with<T>(&self, codec: &impl Codec<T>, value: &T) {
        match codec.encode(value) {
            Ok(b) => self.reply(b),
            Err(e) => self.reply_error(e),
        }
    }

    /// Answers with an error: its text is what the caller's error says.
    pub fn reply_error(&self, text: impl fmt::Display) {
        self.answer(true, text.to_string().as_bytes());
    }

    fn answer(&self, error: bool, body: &[u8]) {
        if self.is_notify || self.answered.swap(true, Ordering::AcqRel) {
            return;
        }
        self.peer
            .session
            .answer(self.seq, &self.method, self.is_async, error, body);
    }
}
