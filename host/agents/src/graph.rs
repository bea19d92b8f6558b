//! The agents' transition graph as text: Mermaid, which renders inside a Markdown code block on
//! the forges, and DOT, for Graphviz.
//!
//! [`Graph::of`] reads the agents: each one's transitions (`onSuccess`, `onFailure`,
//! `onMaxIterations`, and the retry the arbiter makes when `onFailure` is unset), where the
//! arbiter may send it beyond that table (escalation after repeated failures; with an `llm`
//! arbiter, every target a model may pick), and the agents it may call as tools. Each kind of edge is drawn in its own style and labelled. An [`Overlay`] adds the path
//! one task took: its steps in order, numbered, with failures, retries, escalation and the
//! points where it was resumed.
//!
//! Agent names, display names and everything a task store holds come from strangers' files, so
//! nothing of them is ever an identifier: nodes are numbered, and labels are escaped for each
//! format so that no name can close a label, start a statement, end the reader's Markdown code
//! block or smuggle markup into the page that renders it.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use rawko_config::{ArbiterMode, Trust};

use crate::model::{Agent, AgentOrigin, Target, builtin_tools};

mod svg;

/// Longest label line drawn, in characters; longer text is cut with an ellipsis.
const MAX_LABEL: usize = 80;

/// What a node stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeKind {
    /// An agent in effect.
    Agent,
    /// `done`, `failed` or `escalated`.
    Terminal,
    /// A name some transition or task names, which no loaded agent has.
    Missing,
}

/// One state of the graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub name: String,
    pub kind: NodeKind,
    /// Where the agent comes from (agents only).
    pub origin: Option<AgentOrigin>,
    /// An agent of a workspace the user has not trusted.
    pub untrusted: bool,
    /// `acp` or `cli` for an external agent.
    pub external: Option<&'static str>,
}

impl Node {
    pub(crate) fn lines(&self) -> Vec<String> {
        let mut lines = vec![self.name.clone()];
        let mut about = Vec::new();
        if let Some(kind) = self.external {
            about.push(format!("external ({kind})"));
        }
        if let Some(origin) = self.origin.filter(|o| *o != AgentOrigin::Builtin) {
            about.push(origin.as_str().to_string());
        }
        if self.untrusted {
            about.push("untrusted".to_string());
        }
        if self.kind == NodeKind::Missing {
            about.push("not loaded".to_string());
        }
        if !about.is_empty() {
            lines.push(about.join(", "));
        }
        lines
    }
}

/// How an edge arises, and so how it is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EdgeKind {
    /// The transition table: an event's target, or the retry when `onFailure` is unset.
    Transition,
    /// The arbiter's own choices: any candidate of an `llm` arbiter, or escalation after
    /// repeated failures.
    Arbiter,
    /// The agent may call the other as a tool.
    Call,
}

/// One edge between two nodes (indices into [`Graph::nodes`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edge {
    pub from: usize,
    pub to: usize,
    pub kind: EdgeKind,
    pub label: String,
}

/// The agents' states and what leads from one to another.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Graph {
    pub nodes: Vec<Node>,
    pub edges: Vec<Edge>,
}

impl Graph {
    /// The graph of `agents` (in the order given), with `trust` deciding which of the
    /// workspace's agents are untrusted, and the states the `arbiter` may choose beyond the
    /// transition table.
    pub fn of<'a>(
        agents: impl IntoIterator<Item = &'a Agent>,
        trust: Trust,
        arbiter: ArbiterMode,
    ) -> Graph {
        let agents: Vec<&Agent> = agents.into_iter().collect();
        let mut g = Graph::default();
        for a in &agents {
            g.nodes.push(Node {
                name: a.name.clone(),
                kind: NodeKind::Agent,
                origin: Some(a.source.origin),
                untrusted: a.is_untrusted(trust),
                external: a.external.as_ref().map(|e| e.kind()),
            });
        }
        let host_tools = builtin_tools();
        for (i, a) in agents.iter().enumerate() {
            // The table, one edge per target with the events that lead there.
            let mut by_target: Vec<(Target, Vec<&str>)> = Vec::new();
            for (event, target) in a.transitions.iter() {
                match by_target.iter_mut().find(|(t, _)| t == target) {
                    Some((_, events)) => events.push(event),
                    None => by_target.push((target.clone(), vec![event])),
                }
            }
            let mut table: Vec<Target> = Vec::new();
            for (target, events) in by_target {
                let to = g.node_for(&target);
                g.add(i, to, EdgeKind::Transition, events.join(", "));
                table.push(target);
            }
            // Without onFailure, a failed state is retried (until the failure limit).
            let me = Target::Agent(a.name.clone());
            if a.transitions.on_failure.is_none() && !table.contains(&me) {
                g.add(i, i, EdgeKind::Transition, "retry".to_string());
                table.push(me.clone());
            }
            match arbiter {
                // Whatever the event, a model may pick any target the transitions name, the
                // retry the table would make, or escalation.
                ArbiterMode::Llm => {
                    let mut candidates: Vec<Target> = a.targets().cloned().collect();
                    if a.transitions.on_failure.is_none() {
                        candidates.push(me);
                    }
                    candidates.push(Target::Escalated);
                    let mut seen = Vec::new();
                    for target in candidates {
                        if seen.contains(&target) {
                            continue;
                        }
                        let to = g.node_for(&target);
                        g.add(i, to, EdgeKind::Arbiter, "arbiter".to_string());
                        seen.push(target);
                    }
                }
                // Repeated failure escalates, whatever the table says.
                ArbiterMode::Fixed => {
                    if !table.contains(&Target::Escalated) {
                        let to = g.node_for(&Target::Escalated);
                        g.add(i, to, EdgeKind::Arbiter, "escalation".to_string());
                    }
                }
            }
            // Agents named in the allow-list are offered as tools (never itself, never a name a
            // host tool has).
            let mut called = BTreeSet::new();
            for name in a.tools.allowed.iter().flatten() {
                if name == &a.name || host_tools.contains(&name.as_str()) {
                    continue;
                }
                let Some(to) = g
                    .index(name)
                    .filter(|&t| g.nodes[t].kind == NodeKind::Agent)
                else {
                    continue;
                };
                if called.insert(to) {
                    g.add(i, to, EdgeKind::Call, "calls".to_string());
                }
            }
        }
        g.in_order()
    }

    /// The part of the graph reachable from the agent `start` (over every kind of edge), or
    /// `None` when no agent has that name.
    pub fn reachable_from(&self, start: &str) -> Option<Graph> {
        let first = self
            .index(start)
            .filter(|&i| self.nodes[i].kind == NodeKind::Agent)?;
        let mut seen = BTreeSet::from([first]);
        let mut todo = vec![first];
        while let Some(n) = todo.pop() {
            for e in self.edges.iter().filter(|e| e.from == n) {
                if seen.insert(e.to) {
                    todo.push(e.to);
                }
            }
        }
        Some(self.keep(|i| seen.contains(&i)))
    }

    /// The node named `name`.
    pub fn index(&self, name: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.name == name)
    }

    /// The graph with only the nodes `keep` accepts (and the edges between them), in order.
    fn keep(&self, keep: impl Fn(usize) -> bool) -> Graph {
        self.reorder((0..self.nodes.len()).filter(|&i| keep(i)).collect())
    }

    /// The graph with the nodes `order` lists, in that order, and the edges between them.
    fn reorder(&self, order: Vec<usize>) -> Graph {
        let map: BTreeMap<usize, usize> = order.iter().enumerate().map(|(n, &i)| (i, n)).collect();
        let mut g = Graph {
            nodes: order.iter().map(|&i| self.nodes[i].clone()).collect(),
            edges: Vec::new(),
        };
        for e in &self.edges {
            if let (Some(&from), Some(&to)) = (map.get(&e.from), map.get(&e.to)) {
                g.edges.push(Edge {
                    from,
                    to,
                    ..e.clone()
                });
            }
        }
        g
    }

    /// Agents first, then names no agent has, then the terminal states in their usual order.
    fn in_order(&self) -> Graph {
        let rank = |n: &Node| match n.kind {
            NodeKind::Agent => 0,
            NodeKind::Missing => 1,
            NodeKind::Terminal => {
                2 + Target::TERMINALS
                    .iter()
                    .position(|t| *t == n.name)
                    .unwrap_or(0)
            }
        };
        let mut order: Vec<usize> = (0..self.nodes.len()).collect();
        order.sort_by_key(|&i| rank(&self.nodes[i]));
        self.reorder(order)
    }

    /// The node for a transition target, added when it is not there yet.
    fn node_for(&mut self, target: &Target) -> usize {
        let kind = if target.is_terminal() {
            NodeKind::Terminal
        } else {
            NodeKind::Missing
        };
        self.node_named(&target.to_string(), kind)
    }

    /// The node named `name`, added with `kind` when it is not there yet.
    fn node_named(&mut self, name: &str, kind: NodeKind) -> usize {
        if let Some(i) = self.index(name) {
            return i;
        }
        self.nodes.push(Node {
            name: name.to_string(),
            kind,
            origin: None,
            untrusted: false,
            external: None,
        });
        self.nodes.len() - 1
    }

    /// The node for a state a task store names: a terminal by its name, else an agent (known
    /// or not).
    fn state_node(&mut self, name: &str) -> usize {
        let kind = if Target::TERMINALS.contains(&name) {
            NodeKind::Terminal
        } else {
            NodeKind::Missing
        };
        self.node_named(name, kind)
    }

    fn add(&mut self, from: usize, to: usize, kind: EdgeKind, label: String) {
        self.edges.push(Edge {
            from,
            to,
            kind,
            label,
        });
    }

    /// The graph as a Mermaid flowchart, with `overlay` drawn on it.
    pub fn to_mermaid(&self, overlay: Option<&Overlay>) -> String {
        let mut g = self.clone();
        let path = overlay.map(|o| g.place(o)).unwrap_or_default();
        let mut out = String::from("flowchart LR\n");
        out.push_str(
            "  %% solid: the transition table; dotted: the arbiter's own choices (escalation \
             after repeated failures, or what an llm arbiter may pick); thick: agents called \
             as tools\n",
        );
        if overlay.is_some() {
            out.push_str("  %% numbered: the path the task took\n");
        }
        for (i, n) in g.nodes.iter().enumerate() {
            let label = mermaid_label(&n.lines());
            let _ = match n.kind {
                NodeKind::Terminal => writeln!(out, "  n{i}([{label}])"),
                _ => writeln!(out, "  n{i}[{label}]"),
            };
        }
        if path.start {
            out.push_str("  s0((start))\n");
        }
        for (m, (_, text)) in path.marks.iter().enumerate() {
            let _ = writeln!(out, "  m{m}>{}]", mermaid_label(&[text.as_str()]));
        }
        let mut link = 0usize;
        let mut styles: Vec<(usize, &str)> = Vec::new();
        for e in &g.edges {
            let arrow = match e.kind {
                EdgeKind::Transition => "-->",
                EdgeKind::Arbiter => "-.->",
                EdgeKind::Call => "==>",
            };
            let label = mermaid_label(&[e.label.as_str()]);
            let _ = writeln!(out, "  n{} {arrow}|{label}| n{}", e.from, e.to);
            link += 1;
        }
        for s in &path.steps {
            let from = match s.from {
                Some(i) => format!("n{i}"),
                None => "s0".to_string(),
            };
            let label = mermaid_label(&[s.label.as_str()]);
            let _ = writeln!(out, "  {from} -->|{label}| n{}", s.to);
            styles.push((link, if s.failure { FAILURE } else { PATH }));
            link += 1;
        }
        for (from, to, label) in &path.calls {
            let _ = writeln!(out, "  n{from} ==>|{}| n{to}", mermaid_label(&[label]));
            styles.push((link, PATH));
            link += 1;
        }
        for (m, (node, _)) in path.marks.iter().enumerate() {
            let _ = writeln!(out, "  m{m} -.- n{node}");
            styles.push((link, MARK));
            link += 1;
        }
        let ids = |pick: &dyn Fn(&Node) -> bool| -> Vec<String> {
            g.nodes
                .iter()
                .enumerate()
                .filter(|(_, n)| pick(n))
                .map(|(i, _)| format!("n{i}"))
                .collect()
        };
        let classes: [(&str, &str, Vec<String>); 3] = [
            (
                "terminal",
                "fill:#f2f2f2,stroke:#888888",
                ids(&|n| n.kind == NodeKind::Terminal),
            ),
            (
                "untrusted",
                "fill:#fdecea,stroke:#c62828,stroke-width:2px,stroke-dasharray:5 3",
                ids(&|n| n.untrusted),
            ),
            (
                "missing",
                "fill:#ffffff,stroke:#888888,stroke-dasharray:2 2",
                ids(&|n| n.kind == NodeKind::Missing),
            ),
        ];
        for (class, style, members) in classes {
            if !members.is_empty() {
                let _ = writeln!(out, "  classDef {class} {style}");
                let _ = writeln!(out, "  class {} {class}", members.join(","));
            }
        }
        if overlay.is_some() {
            if !path.visited.is_empty() {
                let members: Vec<String> = path.visited.iter().map(|i| format!("n{i}")).collect();
                let _ = writeln!(out, "  classDef visited stroke:{PATH},stroke-width:3px");
                let _ = writeln!(out, "  class {} visited", members.join(","));
            }
            for (i, colour) in styles {
                let width = if colour == MARK { 1 } else { 3 };
                let _ = writeln!(
                    out,
                    "  linkStyle {i} stroke:{colour},stroke-width:{width}px,color:{colour}"
                );
            }
        }
        out
    }

    /// The graph in Graphviz's DOT language, with `overlay` drawn on it.
    pub fn to_dot(&self, overlay: Option<&Overlay>) -> String {
        let mut g = self.clone();
        let path = overlay.map(|o| g.place(o)).unwrap_or_default();
        let mut out = String::from("digraph agents {\n");
        out.push_str(
            "  // solid: the transition table; dotted: the arbiter's own choices (escalation \
             after repeated failures, or what an llm arbiter may pick); bold: agents called \
             as tools\n",
        );
        if overlay.is_some() {
            out.push_str("  // numbered: the path the task took\n");
        }
        out.push_str("  rankdir=LR;\n");
        out.push_str("  node [shape=box, style=rounded, fontname=\"Helvetica\"];\n");
        out.push_str("  edge [fontname=\"Helvetica\", fontsize=10];\n");
        for (i, n) in g.nodes.iter().enumerate() {
            let mut attrs = vec![format!("label={}", dot_label(&n.lines()))];
            let mut colour = None;
            match n.kind {
                NodeKind::Terminal => {
                    attrs.push("shape=ellipse".into());
                    attrs.push("style=filled".into());
                    attrs.push("fillcolor=\"#f2f2f2\"".into());
                    colour = Some("#888888");
                }
                NodeKind::Missing => {
                    attrs.push("style=\"rounded,dotted\"".into());
                    colour = Some("#888888");
                }
                NodeKind::Agent if n.untrusted => {
                    attrs.push("style=\"rounded,dashed,filled\"".into());
                    attrs.push("fillcolor=\"#fdecea\"".into());
                    colour = Some("#c62828");
                }
                NodeKind::Agent => {}
            }
            if path.visited.contains(&i) {
                colour = Some(PATH);
                attrs.push("penwidth=3".into());
            } else if n.untrusted {
                attrs.push("penwidth=2".into());
            }
            if let Some(c) = colour {
                attrs.push(format!("color=\"{c}\""));
            }
            let _ = writeln!(out, "  n{i} [{}];", attrs.join(", "));
        }
        if path.start {
            out.push_str("  s0 [label=\"start\", shape=circle];\n");
        }
        for (m, (_, text)) in path.marks.iter().enumerate() {
            let _ = writeln!(
                out,
                "  m{m} [label={}, shape=note, color=\"{MARK}\", fontcolor=\"{MARK}\"];",
                dot_label(&[text.as_str()])
            );
        }
        for e in &g.edges {
            let style = match e.kind {
                EdgeKind::Transition => "",
                EdgeKind::Arbiter => ", style=dotted",
                EdgeKind::Call => ", style=bold, arrowhead=empty, color=\"#555555\"",
            };
            let _ = writeln!(
                out,
                "  n{} -> n{} [label={}{style}];",
                e.from,
                e.to,
                dot_label(&[e.label.as_str()])
            );
        }
        for s in &path.steps {
            let from = match s.from {
                Some(i) => format!("n{i}"),
                None => "s0".to_string(),
            };
            let colour = if s.failure { FAILURE } else { PATH };
            let _ = writeln!(
                out,
                "  {from} -> n{} [label={}, color=\"{colour}\", fontcolor=\"{colour}\", \
                 penwidth=2.5];",
                s.to,
                dot_label(&[s.label.as_str()])
            );
        }
        for (from, to, label) in &path.calls {
            let _ = writeln!(
                out,
                "  n{from} -> n{to} [label={}, style=bold, arrowhead=empty, color=\"{PATH}\", \
                 fontcolor=\"{PATH}\", penwidth=2.5];",
                dot_label(&[label])
            );
        }
        for (m, (node, _)) in path.marks.iter().enumerate() {
            let _ = writeln!(
                out,
                "  m{m} -> n{node} [style=dashed, arrowhead=none, color=\"{MARK}\"];"
            );
        }
        out.push_str("}\n");
        out
    }

    /// `overlay` placed on the graph: its states as nodes (added when the graph lacks them).
    pub(crate) fn place(&mut self, overlay: &Overlay) -> Placed {
        let mut placed = Placed::default();
        let mut n = 0usize;
        for s in &overlay.steps {
            let from = s.from.as_deref().map(|f| self.state_node(f));
            placed.start |= from.is_none();
            let to = self.state_node(&s.to);
            n += 1;
            placed.visited.extend(from);
            placed.visited.insert(to);
            placed.steps.push(PlacedStep {
                from,
                to,
                failure: s.failure,
                label: format!("{n}: {}", s.label),
            });
        }
        for c in &overlay.calls {
            let from = self.state_node(&c.caller);
            let to = self.state_node(&c.callee);
            placed.visited.extend([from, to]);
            let label = match c.times {
                1 => "asked once".to_string(),
                n => format!("asked {n} times"),
            };
            placed.calls.push((from, to, label));
        }
        for m in &overlay.marks {
            let at = self.state_node(&m.state);
            placed.visited.insert(at);
            placed.marks.push((at, m.label.clone()));
        }
        placed
    }
}

/// The colour of a task's path.
pub(crate) const PATH: &str = "#1f6feb";
/// The colour of a failed step on it.
pub(crate) const FAILURE: &str = "#d1242f";
/// The colour of notes on it (resumed, stopped).
pub(crate) const MARK: &str = "#9a6700";

/// The path one task took, to draw on a [`Graph`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overlay {
    /// The steps in order; they are numbered from 1 as drawn.
    pub steps: Vec<Step>,
    /// Agents that asked others, called as tools.
    pub calls: Vec<Call>,
    /// Notes on states: where the task was resumed, where it stopped.
    pub marks: Vec<Mark>,
}

/// An agent that asked another, called as a tool, during the task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub caller: String,
    pub callee: String,
    pub times: usize,
}

/// One step of a task: from a state (`None`: the task's start) to the next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub from: Option<String>,
    pub to: String,
    /// What happened (the event, how the next state was chosen).
    pub label: String,
    /// The state ended in failure (failed, max iterations, timeout).
    pub failure: bool,
}

/// A note on one state of the path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mark {
    pub state: String,
    pub label: String,
}

#[derive(Debug, Default)]
pub(crate) struct Placed {
    /// A step leaves from the task's start.
    pub(crate) start: bool,
    pub(crate) steps: Vec<PlacedStep>,
    pub(crate) calls: Vec<(usize, usize, String)>,
    pub(crate) marks: Vec<(usize, String)>,
    pub(crate) visited: BTreeSet<usize>,
}

#[derive(Debug)]
pub(crate) struct PlacedStep {
    pub(crate) from: Option<usize>,
    pub(crate) to: usize,
    pub(crate) failure: bool,
    pub(crate) label: String,
}

/// One label line: control characters (newlines included) become spaces, and the line is cut
/// to [`MAX_LABEL`] characters.
pub(crate) fn one_line(text: &str) -> String {
    let cleaned: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if cleaned.chars().count() > MAX_LABEL {
        let mut cut: String = cleaned.chars().take(MAX_LABEL - 1).collect();
        cut.push('…');
        cut
    } else {
        cleaned
    }
}

/// A quoted Mermaid label of `lines`. Letters, digits, spaces and a few harmless marks stay as
/// they are; every other character is written as Mermaid's numeric entity (`#35;`), so no
/// text can end the quoted string, begin a Markdown string (a backtick), close the reader's
/// code fence, or become HTML in the rendered page.
fn mermaid_label(lines: &[impl AsRef<str>]) -> String {
    let mut out = String::from("\"");
    for (i, line) in lines.iter().enumerate() {
        if i > 0 {
            out.push_str("<br/>");
        }
        for c in one_line(line.as_ref()).chars() {
            if c.is_alphanumeric() || " -_.,:()'+/…×".contains(c) {
                out.push(c);
            } else {
                let _ = write!(out, "#{};", c as u32);
            }
        }
    }
    out.push('"');
    out
}

/// A quoted DOT label of `lines`: backslashes and quotes escaped (so neither Graphviz's escapes
/// such as `\N` nor a quote can act), lines joined by `\n`.
fn dot_label(lines: &[impl AsRef<str>]) -> String {
    let mut out = String::from("\"");
    for (i, line) in lines.iter().enumerate() {
        if i > 0 {
            out.push_str("\\n");
        }
        for c in one_line(line.as_ref()).chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '"' => out.push_str("\\\""),
                c => out.push(c),
            }
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::{FileInfo, load_text};

    fn agent(yaml: &str, origin: AgentOrigin) -> Agent {
        let loaded = load_text(
            yaml,
            FileInfo {
                path: Path::new("a.yaml"),
                display: "a.yaml",
                origin,
            },
        );
        assert!(!loaded.has_errors(), "{:?}", loaded.diagnostics);
        (*loaded.agent.unwrap()).clone()
    }

    fn builtin(yaml: &str) -> Agent {
        agent(yaml, AgentOrigin::Builtin)
    }

    /// Three agents: a planner handing to a developer that calls a helper, and a helper that
    /// only ends.
    fn three() -> Vec<Agent> {
        vec![
            builtin(
                "name: planner\nsystemPrompt: p\ntools: {allowed: [Read]}\n\
                 transitions: {onSuccess: developer, onFailure: escalated}\n",
            ),
            builtin(
                "name: developer\nsystemPrompt: p\ntools: {allowed: [Read, Edit, helper, developer]}\n\
                 transitions: {onSuccess: done, onFailure: planner, onMaxIterations: planner}\n",
            ),
            builtin("name: helper\nsystemPrompt: p\ntransitions: {onSuccess: done}\n"),
        ]
    }

    fn edges(g: &Graph) -> Vec<String> {
        g.edges
            .iter()
            .map(|e| {
                format!(
                    "{} -{:?}-> {}: {}",
                    g.nodes[e.from].name, e.kind, g.nodes[e.to].name, e.label
                )
            })
            .collect()
    }

    #[test]
    fn edges_are_the_table_the_arbiter_and_the_calls() {
        let agents = three();
        let g = Graph::of(&agents, Trust::Untrusted, ArbiterMode::Fixed);
        assert_eq!(
            edges(&g),
            [
                "planner -Transition-> developer: onSuccess",
                "planner -Transition-> escalated: onFailure",
                "developer -Transition-> done: onSuccess",
                "developer -Transition-> planner: onFailure, onMaxIterations",
                "developer -Arbiter-> escalated: escalation",
                "developer -Call-> helper: calls",
                "helper -Transition-> done: onSuccess",
                "helper -Transition-> helper: retry",
                "helper -Arbiter-> escalated: escalation",
            ]
        );
    }

    #[test]
    fn an_llm_arbiter_may_pick_every_candidate_on_any_event() {
        let agents = three();
        let g = Graph::of(&agents, Trust::Untrusted, ArbiterMode::Llm);
        let arbiter: Vec<String> = edges(&g)
            .into_iter()
            .filter(|e| e.contains("-Arbiter->"))
            .collect();
        assert_eq!(
            arbiter,
            [
                "planner -Arbiter-> developer: arbiter",
                "planner -Arbiter-> escalated: arbiter",
                "developer -Arbiter-> done: arbiter",
                "developer -Arbiter-> planner: arbiter",
                "developer -Arbiter-> escalated: arbiter",
                "helper -Arbiter-> done: arbiter",
                "helper -Arbiter-> helper: arbiter",
                "helper -Arbiter-> escalated: arbiter",
            ]
        );
    }

    #[test]
    fn reachable_from_keeps_only_what_the_start_can_reach() {
        let agents = three();
        let g = Graph::of(&agents, Trust::Untrusted, ArbiterMode::Fixed);
        let h = g.reachable_from("helper").unwrap();
        let names: Vec<&str> = h.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["helper", "done", "escalated"]);
        assert_eq!(h.edges.len(), 3);
        assert!(g.reachable_from("nobody").is_none());
        assert!(g.reachable_from("done").is_none(), "a terminal is no start");
        assert_eq!(g.reachable_from("planner").unwrap().nodes.len(), 5);
    }

    #[test]
    fn workspace_agents_are_untrusted_until_the_workspace_is() {
        let a = agent(
            "name: stranger\nsystemPrompt: p\ntransitions: {onSuccess: done}\n",
            AgentOrigin::Workspace,
        );
        let g = Graph::of([&a], Trust::Untrusted, ArbiterMode::Fixed);
        assert!(g.nodes[0].untrusted);
        let m = g.to_mermaid(None);
        assert!(
            m.contains("n0[\"stranger<br/>workspace, untrusted\"]"),
            "{m}"
        );
        assert!(m.contains("class n0 untrusted"), "{m}");
        let d = g.to_dot(None);
        assert!(
            d.contains(
                "n0 [label=\"stranger\\nworkspace, untrusted\", style=\"rounded,dashed,filled\""
            ),
            "{d}"
        );
        assert!(!Graph::of([&a], Trust::Trusted, ArbiterMode::Fixed).nodes[0].untrusted);
    }

    #[test]
    fn mermaid_draws_each_kind_in_its_own_style() {
        let agents = three();
        let m = Graph::of(&agents, Trust::Untrusted, ArbiterMode::Fixed).to_mermaid(None);
        assert!(m.starts_with("flowchart LR\n"), "{m}");
        assert!(m.contains("  n0 -->|\"onSuccess\"| n1\n"), "{m}");
        assert!(m.contains("  n1 -.->|\"escalation\"| n4\n"), "{m}");
        assert!(m.contains("  n1 ==>|\"calls\"| n2\n"), "{m}");
        assert!(m.contains("  n3([\"done\"])\n"), "{m}");
        assert!(m.contains("  class n3,n4 terminal\n"), "{m}");
        assert!(!m.contains("linkStyle"), "{m}");
    }

    #[test]
    fn dot_draws_each_kind_in_its_own_style() {
        let agents = three();
        let d = Graph::of(&agents, Trust::Untrusted, ArbiterMode::Fixed).to_dot(None);
        assert!(
            d.starts_with("digraph agents {\n") && d.ends_with("}\n"),
            "{d}"
        );
        assert!(d.contains("  n0 -> n1 [label=\"onSuccess\"];\n"), "{d}");
        assert!(
            d.contains("  n1 -> n4 [label=\"escalation\", style=dotted];\n"),
            "{d}"
        );
        assert!(d.contains("  n1 -> n2 [label=\"calls\", style=bold"), "{d}");
    }

    /// Names as hostile as a task store (which anyone can hand over) can hold; an agent file's
    /// names are stricter, but the renderers do not count on it.
    const HOSTILE: &[&str] = &[
        "a\"] --> evil[\"x",
        "end",
        "o-->x",
        "<script>alert(1)</script>",
        "line\nbreak\r\n  n9[\"x\"]",
        "```\n# heading",
        "#quot; &amp; \\N \\\" {x} [y] |z| ;",
        "click n0 call alert()",
        "%% comment",
    ];

    fn hostile_graph() -> (Graph, Overlay) {
        let mut g = Graph::default();
        for (i, name) in HOSTILE.iter().enumerate() {
            g.nodes.push(Node {
                name: name.to_string(),
                kind: NodeKind::Agent,
                origin: Some(AgentOrigin::Workspace),
                untrusted: true,
                external: None,
            });
            if i > 0 {
                g.add(i - 1, i, EdgeKind::Transition, name.to_string());
            }
        }
        let overlay = Overlay {
            steps: HOSTILE
                .iter()
                .map(|n| Step {
                    from: Some(HOSTILE[0].to_string()),
                    to: format!("{n}2"),
                    label: n.to_string(),
                    failure: false,
                })
                .collect(),
            calls: vec![Call {
                caller: HOSTILE[5].to_string(),
                callee: HOSTILE[6].to_string(),
                times: 3,
            }],
            marks: vec![Mark {
                state: HOSTILE[3].to_string(),
                label: HOSTILE[4].to_string(),
            }],
        };
        (g, overlay)
    }

    /// Every quoted string in a Mermaid text, and the text outside them.
    fn mermaid_quotes(text: &str) -> (Vec<&str>, String) {
        let mut quoted = Vec::new();
        let mut outside = String::new();
        let mut rest = text;
        while let Some(i) = rest.find('"') {
            outside.push_str(&rest[..i]);
            let after = &rest[i + 1..];
            let j = after.find('"').expect("balanced quotes");
            quoted.push(&after[..j]);
            rest = &after[j + 1..];
        }
        outside.push_str(rest);
        (quoted, outside)
    }

    #[test]
    fn hostile_names_stay_inside_their_mermaid_labels() {
        let (g, overlay) = hostile_graph();
        for m in [g.to_mermaid(None), g.to_mermaid(Some(&overlay))] {
            let (quoted, outside) = mermaid_quotes(&m);
            for q in &quoted {
                assert!(
                    q.chars()
                        .all(|c| c.is_alphanumeric() || " -_.,:()'+/…×#;<>".contains(c)),
                    "{q:?}"
                );
                // The only markup is the line break rawko puts there.
                assert!(!q.replace("<br/>", "").contains(['<', '>']), "{q:?}");
            }
            // Outside the labels, only rawko's own syntax: numbered ids, arrows, classes.
            for line in outside.lines().skip(1) {
                let line = line.trim_start();
                assert!(
                    line.starts_with("%% ")
                        || line.starts_with('n')
                        || line.starts_with('m')
                        || line.starts_with("s0")
                        || line.starts_with("class")
                        || line.starts_with("linkStyle"),
                    "{line:?} in\n{m}"
                );
                assert!(!line.contains("script") && !line.contains("evil"), "{line}");
            }
            assert!(!m.contains('`'), "{m}");
            assert!(!m.contains("\r"), "{m}");
            // Each hostile name is there, as entities: `"` is #34;, `<` is #60;.
            assert!(m.contains("#60;script#62;alert(1)#60;/script#62;"), "{m}");
            assert!(m.contains("a#34;#93; --#62; evil#91;#34;x"), "{m}");
        }
    }

    /// Every quoted string in a DOT text (backslash escapes honoured), and the text outside.
    fn dot_quotes(text: &str) -> (Vec<String>, String) {
        let mut quoted = Vec::new();
        let mut outside = String::new();
        let mut chars = text.chars();
        while let Some(c) = chars.next() {
            if c != '"' {
                outside.push(c);
                continue;
            }
            let mut q = String::new();
            loop {
                match chars.next().expect("balanced quotes") {
                    '\\' => {
                        q.push('\\');
                        q.push(chars.next().expect("an escaped character"));
                    }
                    '"' => break,
                    c => q.push(c),
                }
            }
            quoted.push(q);
        }
        (quoted, outside)
    }

    #[test]
    fn hostile_names_stay_inside_their_dot_labels() {
        let (g, overlay) = hostile_graph();
        for d in [g.to_dot(None), g.to_dot(Some(&overlay))] {
            let (quoted, outside) = dot_quotes(&d);
            for q in &quoted {
                assert!(!q.contains(['\n', '\r']), "{q:?}");
                // Backslashes only as rawko's escapes: \\, \" and its own line breaks \n.
                let mut it = q.chars();
                while let Some(c) = it.next() {
                    if c == '\\' {
                        let next = it.next();
                        assert!(matches!(next, Some('\\' | '"' | 'n')), "{q:?}");
                    }
                }
            }
            for line in outside.lines() {
                assert!(!line.contains("script") && !line.contains("evil"), "{line}");
            }
            assert!(
                d.contains("<script>alert(1)</script>"),
                "as text in a label: {d}"
            );
            assert!(d.contains("\\\\N"), "Graphviz's \\N is escaped: {d}");
        }
    }

    /// Graphviz itself reads the hostile graph as the nodes and edges rawko drew, when it is
    /// installed.
    #[test]
    fn graphviz_reads_hostile_names_as_labels() {
        let (g, overlay) = hostile_graph();
        let dot = g.to_dot(Some(&overlay));
        let child = std::process::Command::new("dot")
            .arg("-Tjson")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn();
        let Ok(mut child) = child else {
            eprintln!("skipped: Graphviz's `dot` is not installed");
            return;
        };
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(dot.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && stderr.is_empty(), "{stderr}\n{dot}");
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        // Exactly rawko's nodes: the agents, the states the overlay added and the mark,
        // each under the id rawko gave it.
        let names: Vec<&str> = json["objects"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["name"].as_str().unwrap())
            .collect();
        assert_eq!(names.len(), HOSTILE.len() * 2 + 1, "{names:?}");
        assert!(
            names
                .iter()
                .all(|n| n.starts_with(['n', 'm', 's'])
                    && n[1..].chars().all(|c| c.is_ascii_digit())),
            "{names:?}"
        );
        let edges = json["edges"].as_array().unwrap().len();
        assert_eq!(edges, g.edges.len() + overlay.steps.len() + 2);
    }

    #[test]
    fn long_labels_are_cut() {
        let long = "x".repeat(500);
        assert_eq!(one_line(&long).chars().count(), MAX_LABEL);
        assert!(one_line(&long).ends_with('…'));
        assert_eq!(one_line("a\nb\tc"), "a b c");
    }

    #[test]
    fn the_overlay_numbers_the_path_and_marks_failures_and_resumes() {
        let agents = three();
        let g = Graph::of(&agents, Trust::Untrusted, ArbiterMode::Fixed);
        let overlay = Overlay {
            steps: vec![
                Step {
                    from: None,
                    to: "planner".into(),
                    label: "start".into(),
                    failure: false,
                },
                Step {
                    from: Some("planner".into()),
                    to: "developer".into(),
                    label: "succeeded".into(),
                    failure: false,
                },
                Step {
                    from: Some("developer".into()),
                    to: "ghost".into(),
                    label: "failed, llm".into(),
                    failure: true,
                },
            ],
            calls: vec![Call {
                caller: "developer".into(),
                callee: "helper".into(),
                times: 2,
            }],
            marks: vec![Mark {
                state: "developer".into(),
                label: "resumed here (run 2)".into(),
            }],
        };
        let m = g.to_mermaid(Some(&overlay));
        assert!(m.contains("  s0((start))\n"), "{m}");
        assert!(m.contains("  s0 -->|\"1: start\"| n0\n"), "{m}");
        assert!(m.contains("  n0 -->|\"2: succeeded\"| n1\n"), "{m}");
        assert!(m.contains("  n5[\"ghost<br/>not loaded\"]\n"), "{m}");
        assert!(m.contains("  n1 -->|\"3: failed, llm\"| n5\n"), "{m}");
        assert!(m.contains("  m0>\"resumed here (run 2)\"]\n"), "{m}");
        assert!(m.contains("  n1 ==>|\"asked 2 times\"| n2\n"), "{m}");
        assert!(m.contains("  m0 -.- n1\n"), "{m}");
        assert!(m.contains("  class n0,n1,n2,n5 visited\n"), "{m}");
        // Nine edges of the graph come first: the path is links 9 to 11, the call 12, the
        // mark 13.
        assert!(m.contains(&format!("  linkStyle 9 stroke:{PATH},")), "{m}");
        assert!(
            m.contains(&format!("  linkStyle 11 stroke:{FAILURE},")),
            "{m}"
        );
        assert!(m.contains(&format!("  linkStyle 12 stroke:{PATH},")), "{m}");
        assert!(m.contains(&format!("  linkStyle 13 stroke:{MARK},")), "{m}");
        assert!(m.contains("  class n5 missing\n"), "{m}");

        let d = g.to_dot(Some(&overlay));
        assert!(
            d.contains("  s0 -> n0 [label=\"1: start\", color=\"#1f6feb\""),
            "{d}"
        );
        assert!(
            d.contains("  n1 -> n5 [label=\"3: failed, llm\", color=\"#d1242f\""),
            "{d}"
        );
        assert!(d.contains("  m0 -> n1 [style=dashed"), "{d}");
        assert!(
            d.contains("  n1 -> n2 [label=\"asked 2 times\", style=bold"),
            "{d}"
        );
    }
}
