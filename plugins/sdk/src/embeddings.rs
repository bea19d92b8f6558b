//! Embeddings in the provider-neutral shape: what an adapter is asked to embed and the vectors
//! it answers with.
//!
//! These are the `rawko:plugin/embeddings` WIT types (since `rawko:plugin@0.1.1`) as plain Rust
//! values, shared like [`crate::llm`] by adapters and the host. [`Embeddings::checked`] is the
//! one rule for what a usable answer is; adapters apply it to the provider's reply and the host
//! applies it again to the adapter's, so nothing downstream re-checks vectors.

use serde::{Deserialize, Serialize};

use crate::llm::AdapterError;

/// A request for one vector per input text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmbedRequest {
    /// The embedding model, as the provider knows it.
    pub model: String,
    /// Where the provider is.
    #[serde(default)]
    pub base_url: String,
    /// The texts, in order. The caller keeps a request within the provider's limits.
    pub inputs: Vec<String>,
    /// The vector length wanted, for models that can shorten theirs; `None` for the model's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dimensions: Option<u32>,
}

/// Tokens one embeddings request used.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmbedUsage {
    #[serde(default)]
    pub input_tokens: u64,
}

/// The vectors of a request's inputs, one per input in the same order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Embeddings {
    pub vectors: Vec<Vec<f32>>,
    /// The model that answered, as the provider named it.
    #[serde(default)]
    pub model: String,
    #[serde(default)]
    pub usage: EmbedUsage,
}

impl Embeddings {
    /// These embeddings, if they answer `inputs` texts: exactly one vector each, all of the same
    /// non-zero length, every number finite. Otherwise [`AdapterError::Malformed`], saying what
    /// is wrong.
    pub fn checked(self, inputs: usize) -> Result<Embeddings, AdapterError> {
        if self.vectors.len() != inputs {
            return Err(AdapterError::malformed(format!(
                "{} embedding vectors for {inputs} inputs",
                self.vectors.len()
            )));
        }
        let len = self.dimensions();
        for (i, v) in self.vectors.iter().enumerate() {
            if v.is_empty() {
                return Err(AdapterError::malformed(format!(
                    "embedding vector {i} is empty"
                )));
            }
            if v.len() != len {
                return Err(AdapterError::malformed(format!(
                    "embedding vector {i} has {} numbers where vector 0 has {len}",
                    v.len()
                )));
            }
            if let Some(j) = v.iter().position(|x| !x.is_finite()) {
                return Err(AdapterError::malformed(format!(
                    "embedding vector {i} has a number that is not finite at {j}: {}",
                    v[j]
                )));
            }
        }
        Ok(self)
    }

    /// The length of the vectors (of the first; [`Embeddings::checked`] ones are all alike), or 0
    /// when there are none.
    pub fn dimensions(&self) -> usize {
        self.vectors.first().map_or(0, Vec::len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(vectors: Vec<Vec<f32>>) -> Embeddings {
        Embeddings {
            vectors,
            model: "m".into(),
            usage: EmbedUsage::default(),
        }
    }

    #[test]
    fn one_finite_vector_per_input_of_one_length_passes() {
        let e = of(vec![vec![0.5, -1.0], vec![0.0, 2.0]])
            .checked(2)
            .unwrap();
        assert_eq!(e.dimensions(), 2);
        assert_eq!(of(vec![]).checked(0).unwrap().dimensions(), 0);
    }

    #[test]
    fn wrong_counts_ragged_empty_and_non_finite_vectors_are_malformed() {
        for (e, inputs, want) in [
            (of(vec![vec![1.0]]), 2, "1 embedding vectors for 2 inputs"),
            (of(vec![vec![1.0], vec![1.0]]), 1, "2 embedding vectors"),
            (
                of(vec![vec![1.0, 2.0], vec![1.0]]),
                2,
                "vector 1 has 1 numbers",
            ),
            (of(vec![vec![], vec![]]), 2, "vector 0 is empty"),
            (of(vec![vec![1.0], vec![f32::NAN]]), 2, "not finite"),
            (of(vec![vec![f32::INFINITY]]), 1, "not finite"),
        ] {
            match e.checked(inputs) {
                Err(AdapterError::Malformed { message }) => {
                    assert!(message.contains(want), "{message}")
                }
                other => panic!("{want}: {other:?}"),
            }
        }
    }
}
