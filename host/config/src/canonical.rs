//! JSON in one canonical form, for what is written down and compared later (a committed schema,
//! a consent fingerprint): every object's keys sorted, whatever serde_json's `preserve_order`,
//! which any crate in a build may turn on for all of it.

use serde_json::Value;

/// `v` with every object's keys in sorted order.
pub fn sorted(v: Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut entries: Vec<_> = m.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(entries.into_iter().map(|(k, v)| (k, sorted(v))).collect())
        }
        Value::Array(a) => Value::Array(a.into_iter().map(sorted).collect()),
        other => other,
    }
}

/// `v` as compact JSON text with sorted keys.
pub fn to_string(v: &Value) -> String {
    sorted(v.clone()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_come_out_sorted_at_every_depth() {
        let v: Value =
            serde_json::from_str(r#"{"b": 1, "a": {"d": [ {"z": 0, "y": 1} ], "c": 2}}"#).unwrap();
        assert_eq!(to_string(&v), r#"{"a":{"c":2,"d":[{"y":1,"z":0}]},"b":1}"#);
    }
}
