//! The Embeddings wire format: `POST {base_url}/embeddings` with `{"model", "input": [...]}`,
//! answered by `{"data": [{"index", "embedding": [...]}], "model", "usage": {"prompt_tokens"}}`.

use rawko_plugin_sdk::embeddings::{EmbedRequest, EmbedUsage, Embeddings};
use rawko_plugin_sdk::llm::AdapterError;
use serde::Deserialize;
use serde_json::{Map, Value, json};

/// The request body for `request`.
pub fn request_body(request: &EmbedRequest) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(request.model));
    body.insert("input".into(), json!(request.inputs));
    if let Some(d) = request.dimensions {
        body.insert("dimensions".into(), json!(d));
    }
    Value::Object(body)
}

#[derive(Deserialize)]
struct List {
    data: Vec<Item>,
    #[serde(default)]
    model: String,
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct Item {
    /// Where the vector's input was in the request; servers that leave it out answer in order.
    index: Option<usize>,
    embedding: Vec<f32>,
}

#[derive(Deserialize)]
struct Usage {
    #[serde(default)]
    prompt_tokens: u64,
}

/// Parse the reply to a request of `inputs` texts into their vectors, in the inputs' order.
/// Anything but one vector per input (by `index`), all of one non-zero length, of finite
/// numbers, is malformed.
pub fn parse_response(body: &[u8], inputs: usize, model: &str) -> Result<Embeddings, AdapterError> {
    let list: List = serde_json::from_slice(body)
        .map_err(|e| AdapterError::malformed(format!("not an embeddings list: {e}")))?;
    if list.data.len() != inputs {
        return Err(AdapterError::malformed(format!(
            "{} embeddings for {inputs} inputs",
            list.data.len()
        )));
    }
    let mut slots: Vec<Option<Vec<f32>>> = vec![None; inputs];
    for (position, item) in list.data.into_iter().enumerate() {
        let i = item.index.unwrap_or(position);
        match slots.get_mut(i) {
            Some(slot @ None) => *slot = Some(item.embedding),
            Some(Some(_)) => {
                return Err(AdapterError::malformed(format!(
                    "two embeddings for input {i}"
                )));
            }
            None => {
                return Err(AdapterError::malformed(format!(
                    "an embedding for input {i}, of {inputs}"
                )));
            }
        }
    }
    // `inputs` items, each in its own slot: every slot is filled.
    let vectors = slots.into_iter().flatten().collect();
    Embeddings {
        vectors,
        model: if list.model.is_empty() {
            model.to_string()
        } else {
            list.model
        },
        usage: EmbedUsage {
            input_tokens: list.usage.map_or(0, |u| u.prompt_tokens),
        },
    }
    .checked(inputs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_body_names_the_model_and_lists_the_inputs() {
        let mut r = EmbedRequest {
            model: "text-embedding-3-small".into(),
            base_url: "https://api.openai.com/v1".into(),
            inputs: vec!["a".into(), "b".into()],
            dimensions: None,
        };
        assert_eq!(
            request_body(&r),
            json!({"model": "text-embedding-3-small", "input": ["a", "b"]})
        );
        r.dimensions = Some(256);
        assert_eq!(request_body(&r)["dimensions"], 256);
    }

    #[test]
    fn vectors_come_back_in_input_order_with_usage() {
        let e = parse_response(
            br#"{"object":"list","data":[
                {"object":"embedding","index":1,"embedding":[0.5,-0.25]},
                {"object":"embedding","index":0,"embedding":[1,2]}],
              "model":"text-embedding-3-small","usage":{"prompt_tokens":7,"total_tokens":7}}"#,
            2,
            "asked",
        )
        .unwrap();
        assert_eq!(e.vectors, [vec![1.0, 2.0], vec![0.5, -0.25]]);
        assert_eq!(e.model, "text-embedding-3-small");
        assert_eq!(e.usage.input_tokens, 7);
        // Without indexes, usage or model: in order, nothing counted, the model asked for.
        let e = parse_response(br#"{"data":[{"embedding":[3]}]}"#, 1, "asked").unwrap();
        assert_eq!(
            (e.vectors, e.model, e.usage.input_tokens),
            (vec![vec![3.0]], "asked".into(), 0)
        );
    }

    #[test]
    fn malformed_lists_are_errors() {
        for body in [
            "not json",
            "{}",
            r#"{"data": null}"#,
            r#"{"data": [{"index": 0, "embedding": [1]}]}"#,
            r#"{"data": [{"index": 0, "embedding": [1]}, {"index": 0, "embedding": [2]}]}"#,
            r#"{"data": [{"index": 0, "embedding": [1]}, {"index": 2, "embedding": [2]}]}"#,
            r#"{"data": [{"index": 0, "embedding": [1, 2]}, {"index": 1, "embedding": [2]}]}"#,
            r#"{"data": [{"index": 0, "embedding": []}, {"index": 1, "embedding": []}]}"#,
            r#"{"data": [{"index": 0, "embedding": [1]}, {"index": 1, "embedding": ["NaN"]}]}"#,
            r#"{"data": [{"index": 0, "embedding": [1]}, {"index": 1, "embedding": [1e39]}]}"#,
            r#"{"data": [{"index": 0, "embedding": "AAAA"}, {"index": 1, "embedding": "AAAA"}]}"#,
        ] {
            let r = parse_response(body.as_bytes(), 2, "m");
            assert!(
                matches!(r, Err(AdapterError::Malformed { .. })),
                "{body}: {r:?}"
            );
        }
    }
}
