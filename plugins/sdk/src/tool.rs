//! Tool plugins: the [`Tool`] trait, the [`Context`] a call runs in, and [`export_tools!`](crate::export_tools).
//!
//! A tool's input is a Rust type: its JSON Schema (what the model is shown and what the host
//! checks inputs against) is derived from the same type that parses it, so the two cannot
//! disagree.

use std::fmt;
use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::de::DeserializeOwned;

/// One tool. Implement it on a unit struct and list the struct in [`export_tools!`](crate::export_tools).
pub trait Tool {
    /// What a model calls the tool: letters, digits, `_` and `-`, starting with a letter.
    const NAME: &'static str;
    /// What the tool does and when to use it, written for the model.
    const DESCRIPTION: &'static str;
    /// The tool's input. Use `#[serde(deny_unknown_fields)]` so that a misspelt field is an error
    /// rather than silently ignored; doc comments on fields become descriptions in the schema.
    type Input: DeserializeOwned + JsonSchema;

    /// Run the tool. The returned text is what the model sees.
    fn call(input: Self::Input, cx: &Context) -> Result<String, ToolError>;
}

/// Why a tool call failed. The message is shown to the model, so say what to do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolError {
    /// The input does not make sense for this tool.
    InvalidInput(String),
    /// A file or directory the input names does not exist.
    NotFound(String),
    /// The input names something this call's grants do not cover.
    Denied(String),
    /// Anything else.
    Failed(String),
}

impl ToolError {
    /// Describe an I/O error on `path`, mapping "not found" and "permission denied" to their
    /// own variants.
    pub fn io(path: &Path, err: &std::io::Error) -> Self {
        use std::io::ErrorKind;
        let path = path.display();
        match err.kind() {
            ErrorKind::NotFound => {
                ToolError::NotFound(format!("{path}: no such file or directory"))
            }
            ErrorKind::PermissionDenied | ErrorKind::ReadOnlyFilesystem => {
                ToolError::Denied(format!("{path}: permission denied ({err})"))
            }
            _ => ToolError::Failed(format!("{path}: {err}")),
        }
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ToolError::InvalidInput(m) => write!(f, "invalid input: {m}"),
            ToolError::NotFound(m) => write!(f, "not found: {m}"),
            ToolError::Denied(m) => write!(f, "denied: {m}"),
            ToolError::Failed(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for ToolError {}

/// What a grant allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Access {
    /// Read files and list directories.
    ReadOnly,
    /// Also create, write and remove.
    ReadWrite,
}

/// One directory a call may use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// Absolute, as preopened in the sandbox.
    pub path: PathBuf,
    pub access: Access,
}

/// What the host tells a tool about the call it is serving.
#[derive(Debug, Clone)]
pub struct Context {
    workspace: PathBuf,
    grants: Vec<Grant>,
    max_output_bytes: usize,
    output: Output,
}

/// Where [`Context::emit`] hands pieces of a result.
#[derive(Clone, Default)]
enum Output {
    /// Nowhere: the whole result is what the tool returns.
    #[default]
    Returned,
    /// To the host, through the `output` import.
    #[cfg_attr(not(feature = "tool"), allow(dead_code))]
    Host(fn(&str)),
    /// Into memory, for tests of tool code that hands pieces over.
    Collected(std::sync::Arc<std::sync::Mutex<String>>),
}

impl fmt::Debug for Output {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Output::Returned => "Returned",
            Output::Host(_) => "Host",
            Output::Collected(_) => "Collected",
        })
    }
}

/// The pieces a [`Context::collecting`] context was handed, in order.
#[derive(Debug, Clone, Default)]
pub struct Collected(std::sync::Arc<std::sync::Mutex<String>>);

impl Collected {
    /// Everything handed over so far, leaving nothing behind.
    pub fn take(&self) -> String {
        std::mem::take(&mut self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl Context {
    /// A context for running tool code outside the sandbox (tests, benchmarks, native builds).
    pub fn new(workspace: impl Into<PathBuf>, grants: Vec<Grant>, max_output_bytes: usize) -> Self {
        Context {
            workspace: normalize(&workspace.into()),
            grants: grants
                .into_iter()
                .map(|g| Grant {
                    path: normalize(&g.path),
                    access: g.access,
                })
                .collect(),
            max_output_bytes,
            output: Output::Returned,
        }
    }

    /// This context, with what [`Context::emit`] hands over collected in memory instead of
    /// dropped: for testing tool code natively that hands its result over in pieces.
    pub fn collecting(mut self) -> (Context, Collected) {
        let collected = Collected::default();
        self.output = Output::Collected(collected.0.clone());
        (self, collected)
    }

    /// Whether [`Context::emit`] takes pieces of the result in this call. When it does not (tool
    /// code run natively, as in its tests), the whole result is what the tool returns.
    pub fn emits(&self) -> bool {
        !matches!(self.output, Output::Returned)
    }

    /// Hand `text` over as the next piece of the result, before the call returns: the result
    /// is every piece handed over, in order, then the text the tool returns. Pieces count
    /// against [`Context::max_output_bytes`] with the rest. A tool making a large result hands
    /// it over as it goes and reuses its buffer, so it never holds the result whole and the host
    /// can show it as it comes. Returns false, taking nothing, where [`Context::emits`] is false.
    pub fn emit(&self, text: &str) -> bool {
        match &self.output {
            Output::Returned => return false,
            Output::Host(write) => write(text),
            Output::Collected(into) => into
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push_str(text),
        }
        true
    }

    /// The workspace root. Relative input paths are relative to it.
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// Every directory this call may use.
    pub fn grants(&self) -> &[Grant] {
        &self.grants
    }

    /// The largest result the host accepts from this call, in bytes.
    pub fn max_output_bytes(&self) -> usize {
        self.max_output_bytes
    }

    /// `path` made absolute against the workspace, with `.` and `..` resolved lexically. This
    /// does not touch the filesystem; the sandbox still has the last word on symlinks.
    pub fn absolute(&self, path: &str) -> PathBuf {
        let p = Path::new(path);
        if p.is_absolute() {
            normalize(p)
        } else {
            normalize(&self.workspace.join(p))
        }
    }

    /// The widest access any grant gives to `path` (already absolute), if any covers it.
    ///
    /// Grants do not nest: a read-only grant inside a read-write one gives no protection, since
    /// the sandbox can reach the same file through the wider grant. The host never makes such
    /// pairs, and this reports what the sandbox would actually allow.
    pub fn access(&self, path: &Path) -> Option<Access> {
        self.grants
            .iter()
            .filter(|g| path.starts_with(&g.path))
            .map(|g| g.access)
            .max()
    }

    /// `path` resolved for reading, or a `Denied` error naming the grants.
    pub fn readable(&self, path: &str) -> Result<PathBuf, ToolError> {
        let abs = self.absolute(path);
        match self.access(&abs) {
            Some(_) => Ok(abs),
            None => Err(self.outside(&abs, "read")),
        }
    }

    /// `path` resolved for writing, or a `Denied` error naming the grants.
    pub fn writable(&self, path: &str) -> Result<PathBuf, ToolError> {
        let abs = self.absolute(path);
        match self.access(&abs) {
            Some(Access::ReadWrite) => Ok(abs),
            Some(Access::ReadOnly) => Err(ToolError::Denied(format!(
                "{} is read-only for this call; it cannot be written",
                abs.display()
            ))),
            None => Err(self.outside(&abs, "write")),
        }
    }

    /// `path` shown relative to the workspace when it is inside it, for shorter output.
    pub fn display<'a>(&self, path: &'a Path) -> std::borrow::Cow<'a, str> {
        match path.strip_prefix(&self.workspace) {
            Ok(rel) if rel.as_os_str().is_empty() => ".".into(),
            Ok(rel) => rel.to_string_lossy().into_owned().into(),
            Err(_) => path.to_string_lossy(),
        }
    }

    fn outside(&self, abs: &Path, what: &str) -> ToolError {
        if self.grants.is_empty() {
            return ToolError::Denied(format!(
                "cannot {what} {}: this call has no filesystem access",
                abs.display()
            ));
        }
        let granted: Vec<String> = self
            .grants
            .iter()
            .map(|g| g.path.display().to_string())
            .collect();
        ToolError::Denied(format!(
            "cannot {what} {}: it is outside the granted paths ({})",
            abs.display(),
            granted.join(", ")
        ))
    }
}

pub use crate::path::normalize;

/// Register the tools a plugin provides. List every type implementing [`Tool`]:
///
/// ```ignore
/// rawko_plugin_sdk::export_tools!(Read, Write);
/// ```
#[cfg(feature = "tool")]
#[macro_export]
macro_rules! export_tools {
    ($($tool:ty),+ $(,)?) => {
        #[doc(hidden)]
        pub struct __RawkoToolPlugin;

        impl $crate::__private::tool::ToolsGuest for __RawkoToolPlugin {
            fn list_tools() -> ::std::vec::Vec<$crate::__private::tool::WitToolSpec> {
                ::std::vec![$($crate::__private::tool::spec::<$tool>()),+]
            }

            fn call(
                name: ::std::string::String,
                input: ::std::string::String,
                context: $crate::__private::tool::WitCallContext,
            ) -> ::std::result::Result<::std::string::String, $crate::__private::tool::WitToolError> {
                $(
                    if name == <$tool as $crate::tool::Tool>::NAME {
                        return $crate::__private::tool::dispatch::<$tool>(&input, context);
                    }
                )+
                ::std::result::Result::Err($crate::__private::tool::unknown(name))
            }
        }

        // Exported symbols carry WIT names (`rawko:plugin/tools@0.1.1#call`) that only a wasm
        // linker accepts; native builds of a plugin crate (tests, benchmarks) leave them out.
        #[cfg(target_arch = "wasm32")]
        $crate::__private::tool::bindings::__export_tool_world!(
            __RawkoToolPlugin with_types_in $crate::__private::tool::bindings
        );
    };
}

#[cfg(feature = "tool")]
#[doc(hidden)]
pub mod __dispatch {
    use super::*;
    use crate::__private::tool::bindings::exports::rawko::plugin::tools as wit;
    use crate::__private::tool::bindings::rawko::plugin::types::ToolSpec;

    pub fn spec<T: Tool>() -> ToolSpec {
        let schema = schemars::schema_for!(T::Input);
        ToolSpec {
            name: T::NAME.to_string(),
            description: T::DESCRIPTION.to_string(),
            input_schema: serde_json::to_string(&schema).unwrap_or_else(|_| "{}".to_string()),
        }
    }

    pub fn dispatch<T: Tool>(input: &str, cx: wit::CallContext) -> Result<String, wit::ToolError> {
        let cx = Context {
            workspace: normalize(Path::new(&cx.workspace)),
            grants: cx
                .grants
                .into_iter()
                .map(|g| Grant {
                    path: normalize(Path::new(&g.path)),
                    access: match g.access {
                        wit::Access::ReadOnly => Access::ReadOnly,
                        wit::Access::ReadWrite => Access::ReadWrite,
                    },
                })
                .collect(),
            max_output_bytes: usize::try_from(cx.max_output_bytes).unwrap_or(usize::MAX),
            // The import exists only inside a component; a native build of a plugin crate
            // (its tests) returns whole results.
            output: if cfg!(target_arch = "wasm32") {
                Output::Host(host_write)
            } else {
                Output::Returned
            },
        };
        let input: T::Input = serde_json::from_str(input)
            .map_err(|e| wit::ToolError::InvalidInput(format!("{}: {e}", T::NAME)))?;
        T::call(input, &cx).map_err(|e| match e {
            ToolError::InvalidInput(m) => wit::ToolError::InvalidInput(m),
            ToolError::NotFound(m) => wit::ToolError::NotFound(m),
            ToolError::Denied(m) => wit::ToolError::Denied(m),
            ToolError::Failed(m) => wit::ToolError::Failed(m),
        })
    }

    fn host_write(text: &str) {
        crate::__private::tool::bindings::rawko::plugin::output::write(text);
    }

    pub fn unknown(name: String) -> wit::ToolError {
        wit::ToolError::UnknownTool(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cx() -> Context {
        Context::new(
            "/ws",
            vec![
                Grant {
                    path: "/ws".into(),
                    access: Access::ReadOnly,
                },
                Grant {
                    path: "/ws/out".into(),
                    access: Access::ReadWrite,
                },
            ],
            1024,
        )
    }

    #[test]
    fn relative_paths_resolve_against_the_workspace() {
        assert_eq!(cx().absolute("src/../a.rs"), PathBuf::from("/ws/a.rs"));
        assert_eq!(cx().absolute("./"), PathBuf::from("/ws"));
        assert_eq!(
            cx().absolute("/etc/../etc/passwd"),
            PathBuf::from("/etc/passwd")
        );
    }

    #[test]
    fn dotdot_cannot_climb_out_lexically() {
        let err = cx().readable("../../etc/passwd").unwrap_err();
        assert!(matches!(err, ToolError::Denied(ref m) if m.contains("outside the granted paths")));
    }

    #[test]
    fn write_needs_a_read_write_grant() {
        assert!(cx().writable("out/x.txt").is_ok());
        assert!(
            matches!(cx().writable("a.txt"), Err(ToolError::Denied(m)) if m.contains("read-only"))
        );
        // A sibling whose name merely starts with the granted one is not inside it.
        assert!(matches!(
            cx().writable("output/x"),
            Err(ToolError::Denied(_))
        ));
    }

    #[test]
    fn display_is_workspace_relative() {
        let c = cx();
        assert_eq!(c.display(Path::new("/ws/src/a.rs")), "src/a.rs");
        assert_eq!(c.display(Path::new("/ws")), ".");
        assert_eq!(c.display(Path::new("/other")), "/other");
    }
}
