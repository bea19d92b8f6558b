use rawko_plugin_sdk::tool::{Context, Tool, ToolError};

#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GreetInput {
    /// Who to greet.
    pub name: String,
    /// A file whose first line is added to the greeting, to exercise filesystem grants.
    #[serde(default)]
    pub from_file: Option<String>,
}

pub struct Greet;

impl Tool for Greet {
    const NAME: &'static str = "Greet";
    const DESCRIPTION: &'static str = "Greets someone, optionally with a line from a file.";
    type Input = GreetInput;

    fn call(input: GreetInput, cx: &Context) -> Result<String, ToolError> {
        let mut out = format!("Hello, {}!", input.name);
        if let Some(file) = input.from_file {
            let path = cx.readable(&file)?;
            let text = std::fs::read_to_string(&path).map_err(|e| ToolError::io(&path, &e))?;
            out.push(' ');
            out.push_str(text.lines().next().unwrap_or_default());
        }
        Ok(out)
    }
}
