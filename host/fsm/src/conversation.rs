//! The provider-neutral conversation an agent has with its model, as the engine stores it.
//!
//! These are the `llm` types of the WIT package as the guest SDK defines them, so what the
//! engine stores, what adapters are sent and what recordings hold is one shape: a task can be
//! resumed, inspected and replayed whatever adapter produced it.

pub use rawko_plugin_sdk::llm::{
    Content, Message, Role, StopReason, Thinking, ToolCall, ToolResult,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_through_json() {
        let m = Message {
            role: Role::Assistant,
            content: vec![
                Content::Text { text: "ok".into() },
                Content::ToolCall(ToolCall {
                    id: "c1".into(),
                    name: "Read".into(),
                    arguments: "{\"path\":\"a\"}".into(),
                }),
            ],
        };
        let json = serde_json::to_value(&m).unwrap();
        // The shape stores and recordings hold: a tag beside the call's own fields.
        assert_eq!(json["content"][1]["type"], "tool_call");
        assert_eq!(json["content"][1]["id"], "c1");
        let back: Message = serde_json::from_value(json).unwrap();
        assert_eq!(back, m);
        assert_eq!(back.tool_calls().count(), 1);
    }
}
