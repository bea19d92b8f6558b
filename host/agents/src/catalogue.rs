//! The tools rawko itself provides, each with what it does to the workspace and the kind an
//! editor shows it as: one table that agent validation, the dialect readers, the trust rules,
//! the file tools' plugin and `rawko acp` all read, so a list of tool names is never kept by
//! hand in two places.
//!
//! The file tools' plugin's entries are here ([`FILE_TOOLS`]). The host's own tools live in
//! `rawko-toolset` (which depends on this crate) and describe themselves: it [`install`]s their
//! entries once, at start, before any agent is read, so a new host tool needs no line here.

use std::sync::OnceLock;

/// What a tool does to the workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolAccess {
    /// It only reads. (`Git` is one: its write operations need the write grant, which a
    /// read-only agent does not get.)
    Read,
    /// It may change the workspace; an agent allowed no such tool is read-only.
    Write,
}

/// The kind of a tool call as the Agent Client Protocol names it, which an editor uses to show
/// the call (an icon, a diff, a terminal) and an external agent uses to describe what it asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AcpKind {
    Read,
    Edit,
    Delete,
    Move,
    Search,
    Execute,
    Think,
    Fetch,
    Other,
}

impl AcpKind {
    /// Every kind, for parsing.
    pub const ALL: [AcpKind; 9] = [
        AcpKind::Read,
        AcpKind::Edit,
        AcpKind::Delete,
        AcpKind::Move,
        AcpKind::Search,
        AcpKind::Execute,
        AcpKind::Think,
        AcpKind::Fetch,
        AcpKind::Other,
    ];

    /// The kind as ACP writes it.
    pub const fn as_str(self) -> &'static str {
        match self {
            AcpKind::Read => "read",
            AcpKind::Edit => "edit",
            AcpKind::Delete => "delete",
            AcpKind::Move => "move",
            AcpKind::Search => "search",
            AcpKind::Execute => "execute",
            AcpKind::Think => "think",
            AcpKind::Fetch => "fetch",
            AcpKind::Other => "other",
        }
    }

    /// The kind ACP's `kind` names, if it is one.
    pub fn parse(kind: &str) -> Option<AcpKind> {
        Self::ALL.into_iter().find(|k| k.as_str() == kind)
    }

    /// The built-in tool whose rights a call of this kind needs: the first in the catalogue
    /// of the kind it is judged as (a search reads, a delete or a move edits). None for the
    /// kinds no built-in tool does.
    pub fn judged_as(self) -> Option<&'static str> {
        let like = match self {
            AcpKind::Search => AcpKind::Read,
            AcpKind::Delete | AcpKind::Move => AcpKind::Edit,
            AcpKind::Think | AcpKind::Fetch | AcpKind::Other => return None,
            k => k,
        };
        catalogue()
            .iter()
            .find(|t| t.acp_kind == like)
            .map(|t| t.name)
    }
}

/// One tool rawko itself provides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuiltinTool {
    /// As models call it.
    pub name: &'static str,
    pub access: ToolAccess,
    pub acp_kind: AcpKind,
}

const fn tool(name: &'static str, access: ToolAccess, acp_kind: AcpKind) -> BuiltinTool {
    BuiltinTool {
        name,
        access,
        acp_kind,
    }
}

/// The file tools' plugin's tools, in the order agents and users see them listed.
pub const FILE_TOOLS: &[BuiltinTool] = &[
    tool("Read", ToolAccess::Read, AcpKind::Read),
    tool("Write", ToolAccess::Write, AcpKind::Edit),
    tool("Edit", ToolAccess::Write, AcpKind::Edit),
    tool("Glob", ToolAccess::Read, AcpKind::Search),
    tool("Grep", ToolAccess::Read, AcpKind::Search),
    tool("LS", ToolAccess::Read, AcpKind::Read),
];

static INSTALLED: OnceLock<Vec<BuiltinTool>> = OnceLock::new();

/// Complete the catalogue with the host's own tools, as they describe themselves, after the
/// file tools. Once per process: `rawko-toolset` calls it when its host tools are made, which
/// every entry point that reads agents does first. A later call changes nothing.
pub fn install(host: impl IntoIterator<Item = BuiltinTool>) -> &'static [BuiltinTool] {
    INSTALLED.get_or_init(|| FILE_TOOLS.iter().copied().chain(host).collect())
}

/// The tools rawko itself provides (the file tools' plugin, then the host's own), in the order
/// agents and users see them listed. The agent loop's `finish` is not a tool of this kind.
///
/// Before [`install`], only the file tools: an agent read then would not know `Bash` as a tool
/// that writes, so a debug build stops there rather than judge it. Tests that read agents
/// without the host's tools stand in for them ([`install_stand_ins`]).
pub fn catalogue() -> &'static [BuiltinTool] {
    if let Some(all) = INSTALLED.get() {
        return all;
    }
    #[cfg(test)]
    {
        install_stand_ins()
    }
    #[cfg(not(test))]
    {
        debug_assert!(
            false,
            "the tool catalogue was read before rawko-toolset installed the host's tools"
        );
        FILE_TOOLS
    }
}

/// What the host's tools say of themselves, for the tests of crates that read agents without
/// linking the tools (rawko-toolset's tests check the real ones against it).
pub const HOST_STAND_INS: &[BuiltinTool] = &[
    tool("Bash", ToolAccess::Write, AcpKind::Execute),
    tool("Git", ToolAccess::Read, AcpKind::Other),
    tool("Knowledge", ToolAccess::Read, AcpKind::Search),
];

/// Install [`HOST_STAND_INS`] as the host's tools, for tests; rawko itself never calls it.
pub fn install_stand_ins() -> &'static [BuiltinTool] {
    install(HOST_STAND_INS.iter().copied())
}

/// The catalogue's entry for `name`.
pub fn builtin(name: &str) -> Option<&'static BuiltinTool> {
    catalogue().iter().find(|t| t.name == name)
}

/// The names of the tools `access` selects (all of them for none), in catalogue order.
pub fn names(access: Option<ToolAccess>) -> Vec<&'static str> {
    catalogue()
        .iter()
        .filter(|t| access.is_none_or(|a| a == t.access))
        .map(|t| t.name)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_acp_kind_is_judged_as_the_tool_with_its_rights() {
        let judged = |k: &str| AcpKind::parse(k).and_then(AcpKind::judged_as);
        assert_eq!(judged("read"), Some("Read"));
        assert_eq!(judged("search"), Some("Read"));
        assert_eq!(judged("edit"), Some("Write"));
        assert_eq!(judged("delete"), Some("Write"));
        assert_eq!(judged("move"), Some("Write"));
        assert_eq!(judged("execute"), Some("Bash"));
        assert_eq!(judged("fetch"), None);
        assert_eq!(judged("think"), None);
        assert_eq!(judged("other"), None);
        assert_eq!(judged("nonsense"), None);
        for k in AcpKind::ALL {
            assert_eq!(AcpKind::parse(k.as_str()), Some(k));
        }
    }
}
