//! The tools rawko itself provides, each with what it does to the workspace and the kind an
//! editor shows it as: one table that agent validation, the dialect readers, the trust rules,
//! the host tools, the file tools' plugin and `rawko acp` all read, so a list of tool names is
//! never kept by hand in two places.
//!
//! The tools themselves live in `rawko-toolset` (which depends on this crate); its tests check
//! that this table and the tools it serves name the same tools.

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
        CATALOGUE
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

/// The tools rawko itself provides (the file tools' plugin, then the host's own), in the order
/// agents and users see them listed. The agent loop's `finish` is not a tool of this kind.
pub const CATALOGUE: &[BuiltinTool] = &[
    tool("Read", ToolAccess::Read, AcpKind::Read),
    tool("Write", ToolAccess::Write, AcpKind::Edit),
    tool("Edit", ToolAccess::Write, AcpKind::Edit),
    tool("Glob", ToolAccess::Read, AcpKind::Search),
    tool("Grep", ToolAccess::Read, AcpKind::Search),
    tool("LS", ToolAccess::Read, AcpKind::Read),
    tool("Bash", ToolAccess::Write, AcpKind::Execute),
    tool("Git", ToolAccess::Read, AcpKind::Other),
    tool("Knowledge", ToolAccess::Read, AcpKind::Search),
];

/// The catalogue's entry for `name`.
pub fn builtin(name: &str) -> Option<&'static BuiltinTool> {
    CATALOGUE.iter().find(|t| t.name == name)
}

/// How many tools of the catalogue `access` selects (all of them for none).
pub(crate) const fn count(access: Option<ToolAccess>) -> usize {
    let mut n = 0;
    let mut i = 0;
    while i < CATALOGUE.len() {
        if selects(access, CATALOGUE[i].access) {
            n += 1;
        }
        i += 1;
    }
    n
}

/// The names of the tools `access` selects, in catalogue order, then `extra` (if any) in the
/// last place. `N` is their number.
pub(crate) const fn names<const N: usize>(
    access: Option<ToolAccess>,
    extra: Option<&'static str>,
) -> [&'static str; N] {
    let mut out = [""; N];
    let mut n = 0;
    let mut i = 0;
    while i < CATALOGUE.len() {
        if selects(access, CATALOGUE[i].access) {
            out[n] = CATALOGUE[i].name;
            n += 1;
        }
        i += 1;
    }
    if let Some(extra) = extra {
        out[n] = extra;
    }
    out
}

const fn selects(access: Option<ToolAccess>, of: ToolAccess) -> bool {
    match access {
        None => true,
        Some(a) => a as u8 == of as u8,
    }
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
