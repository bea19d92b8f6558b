//! What the engine needs from a model: one completion at a time.
//!
//! The engine talks to this trait, not to adapter plugins directly, so that the agent loop can
//! be tested with a scripted model and so that the arbiter can ask its own adapter.

use std::future::Future;
use std::pin::Pin;

use super::conversation::{Message, StopReason};
use rawko_store::Usage;

/// What a model's window is taken to be when nothing says otherwise.
pub const DEFAULT_WINDOW: u32 = 128_000;

/// A tool as offered to the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub input_schema: serde_json::Value,
}

/// One request for the model's next message.
pub struct CompletionRequest<'a> {
    pub system: &'a str,
    pub messages: &'a [Message],
    pub tools: &'a [ToolSpec],
    /// Called with visible text as it streams in, when the model streams.
    pub on_text: Option<&'a (dyn Fn(&str) + 'a)>,
}

/// The model's reply.
#[derive(Debug, Clone)]
pub struct Completion {
    /// The assistant message.
    pub message: Message,
    pub stop_reason: StopReason,
    pub usage: Usage,
    /// The model that answered, as the provider named it.
    pub model: String,
}

/// Why a completion failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LlmError {
    #[error("cannot reach the model: {0}")]
    Transport(String),
    #[error("the model's provider answered {status}: {message}")]
    Status { status: u16, message: String },
    #[error("the model's answer could not be understood: {0}")]
    Malformed(String),
    #[error("{0}")]
    Other(String),
}

impl LlmError {
    /// A fault that may pass (the network, an overloaded or failing provider, a garbled body)
    /// rather than one that will not (a refused key, a bad request): after the HTTP layer's own
    /// retries, it interrupts the task instead of failing it.
    /// A fault worth asking again in place: an answer that broke off or came garbled, or a
    /// connection error the HTTP layer has not already retried (it says how many attempts it
    /// made). Statuses are retried there, with `Retry-After`.
    pub fn ask_again(&self) -> bool {
        match self {
            LlmError::Malformed(_) => true,
            LlmError::Transport(m) => !m.contains(" attempts)"),
            _ => false,
        }
    }

    pub fn is_transient(&self) -> bool {
        match self {
            LlmError::Transport(_) | LlmError::Malformed(_) => true,
            LlmError::Status { status, .. } => matches!(status, 408 | 425 | 429 | 500..=599),
            LlmError::Other(_) => false,
        }
    }
}

pub type LlmFuture<'a> = Pin<Box<dyn Future<Output = Result<Completion, LlmError>> + 'a>>;

/// A model behind an adapter instance.
pub trait Llm {
    /// The adapter instance's name, for the store and messages.
    fn adapter(&self) -> &str;
    /// The model name it asks for.
    fn model(&self) -> &str;
    /// The model's context window, in tokens.
    fn context_window(&self) -> u32 {
        DEFAULT_WINDOW
    }
    fn complete<'a>(&'a self, request: CompletionRequest<'a>) -> LlmFuture<'a>;
}
