//! Checks that go beyond a field's type: names, tools, shell patterns, output schemas, and
//! (across agents) transitions.
//!
//! The per-field checks run inside each dialect decoder, so every problem is reported with the
//! position of the value at fault. The cross-agent checks run on a whole registry, once the
//! winners for every name are known.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use super::decode::Spanned;
use super::diag::{Diagnostic, Pos, Problems, Severity, did_you_mean};
use super::model::{Agent, Target, builtin_tools};

/// Longest agent name; names become tool names, which model APIs cap at 64.
pub const MAX_NAME_LEN: usize = 64;

/// Check an agent name: it names a state and a tool, and must never be a path.
pub fn check_name(name: &Spanned<String>, p: &mut Problems) -> bool {
    let n = name.value.as_str();
    let problem = if n.is_empty() {
        Some(("the agent name is empty".to_string(), None))
    } else if n.contains(['/', '\\']) || n == "." || n == ".." {
        Some((
            format!("agent name '{n}' contains a path separator"),
            Some("a name is not a path: use letters, digits, '-' and '_'".to_string()),
        ))
    } else if n.chars().count() > MAX_NAME_LEN {
        Some((
            format!("agent name is longer than {MAX_NAME_LEN} characters"),
            None,
        ))
    } else if !n.starts_with(|c: char| c.is_ascii_alphanumeric())
        || !n
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        Some((
            format!(
                "agent name '{}' has characters other than letters, digits, '-' and '_'",
                n.escape_debug()
            ),
            Some("the name becomes a state and a tool name; start with a letter or digit".into()),
        ))
    } else if Target::TERMINALS.contains(&n) {
        Some((
            format!("'{n}' is a terminal state and cannot name an agent"),
            Some("pick another name".into()),
        ))
    } else {
        None
    };
    match problem {
        Some((message, hint)) => {
            p.error(name.pos, message, hint);
            false
        }
        None => true,
    }
}

/// Whether `s` is a well-formed agent name (for transition targets and defaults from file
/// names).
pub fn is_valid_name(s: &str) -> bool {
    let mut scratch = Problems::new();
    check_name(&Spanned::new(s.to_string(), Pos::START), &mut scratch)
}

/// Check tool names: a built-in tool in the wrong case is a mistake (an error in rawko
/// dialects); a near miss gets a hint. Other names may be plugin tools or agents.
pub fn check_tool_names(tools: &[Spanned<String>], strict: bool, p: &mut Problems) {
    let builtin = builtin_tools();
    for t in tools {
        let name = t.value.as_str();
        if name.is_empty() || name.chars().any(char::is_control) {
            p.error(
                t.pos,
                "a tool name is empty or has control characters",
                None,
            );
            continue;
        }
        if builtin.contains(&name) {
            continue;
        }
        if let Some(exact) = builtin.iter().find(|b| b.eq_ignore_ascii_case(name)) {
            let msg = format!("tool names are case-sensitive: '{name}' is not '{exact}'");
            let hint = Some(format!("write '{exact}'"));
            if strict {
                p.error(t.pos, msg, hint);
            } else {
                p.warn(t.pos, msg, hint);
            }
        } else if let Some(close) = did_you_mean(name, &builtin) {
            p.warn(
                t.pos,
                format!("'{name}' is not a built-in tool"),
                Some(format!(
                    "did you mean '{close}'? other names must come from a plugin or name an agent"
                )),
            );
        }
    }
}

/// Patterns at most this long without counted repetition (`{n,m}`) are checked by parsing
/// alone: they cannot reach the regex crate's compiled-size limit, and parsing is a hundred
/// times cheaper than compiling (which matters when a thousand agents are reloaded).
const PARSE_ONLY_MAX_LEN: usize = 256;

/// Blocked patterns are regular expressions (the `regex` crate's syntax) and must compile.
pub fn check_blocked_patterns(patterns: &[Spanned<String>], p: &mut Problems) {
    for pat in patterns {
        if pat.value.is_empty() {
            p.error(
                pat.pos,
                "an empty blocked pattern would block every command",
                None,
            );
            continue;
        }
        let parse_only = pat.value.len() <= PARSE_ONLY_MAX_LEN && !pat.value.contains('{');
        let result = if parse_only {
            regex_syntax::parse(&pat.value)
                .map(drop)
                .map_err(|e| e.to_string())
        } else {
            regex::Regex::new(&pat.value)
                .map(drop)
                .map_err(|e| e.to_string())
        };
        if let Err(detail) = result {
            let last = detail
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("");
            p.error(
                pat.pos,
                format!(
                    "blocked pattern '{}' is not a valid regular expression",
                    pat.value
                ),
                Some(last.trim().trim_start_matches("error: ").to_string()),
            );
        }
    }
}

/// Allowed commands are patterns like `git status` or `cargo test *`: one line of text.
pub fn check_command_patterns(commands: &[Spanned<String>], p: &mut Problems) {
    for c in commands {
        if c.value.trim().is_empty() {
            p.error(c.pos, "an allowed command is empty", None);
        } else if c.value.chars().any(char::is_control) {
            p.error(
                c.pos,
                "an allowed command may not contain newlines or control characters",
                Some("list each command pattern as its own item".into()),
            );
        }
    }
}

/// An output schema must itself be a valid JSON Schema.
pub fn check_output_schema(schema: &serde_json::Value, pos: Pos, p: &mut Problems) -> bool {
    if !schema.is_object() {
        p.error(pos, "'outputSchema' must be a JSON Schema object", None);
        return false;
    }
    match jsonschema::validator_for(schema) {
        Ok(_) => true,
        Err(e) => {
            p.error(
                pos,
                "'outputSchema' is not a valid JSON Schema",
                Some(e.to_string()),
            );
            false
        }
    }
}

/// A transition target: a terminal state or something that can be an agent's name.
pub fn check_target(target: &Spanned<String>, event: &str, p: &mut Problems) -> Option<Target> {
    let t = target.value.as_str();
    if Target::TERMINALS.contains(&t) || is_valid_name(t) {
        return Some(t.parse().expect("infallible"));
    }
    let hint = match did_you_mean(t, Target::TERMINALS) {
        Some(s) => format!("did you mean '{s}'?"),
        None => "name an agent, or done, failed or escalated".to_string(),
    };
    p.error(
        target.pos,
        format!(
            "'{event}' target '{}' is not an agent name or a terminal state",
            t.escape_debug()
        ),
        Some(hint),
    );
    None
}

/// A transition written in a file: which file, which event, which target, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    pub file: String,
    pub event: &'static str,
    pub target: String,
    pub pos: Pos,
}

impl Reference {
    /// The transitions of a loaded agent.
    pub fn of(a: &Agent) -> impl Iterator<Item = Reference> + '_ {
        a.transitions.iter().map(|(event, t)| Reference {
            file: a.source.display.clone(),
            event,
            target: t.to_string(),
            pos: a.source.spans.transition(event),
        })
    }
}

/// Checks across a registry: every transition (`refs`, from usable agents and from files that
/// failed to load but whose transitions could be read) names an agent that exists (`known`)
/// or a terminal state, and no group of `agents` passes the task around forever.
pub fn cross_check(
    agents: &BTreeMap<String, Arc<Agent>>,
    refs: &[Reference],
    known: &BTreeSet<String>,
) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let names: Vec<&str> = known.iter().map(String::as_str).collect();
    for r in refs {
        let name = r.target.as_str();
        if Target::TERMINALS.contains(&name) || known.contains(name) {
            continue;
        }
        let mut candidates = names.clone();
        candidates.extend_from_slice(Target::TERMINALS);
        let hint = match did_you_mean(name, &candidates) {
            Some(s) => format!("did you mean '{s}'?"),
            None if names.len() <= 12 => format!(
                "known agents: {}; or done, failed, escalated",
                names.join(", ")
            ),
            None => "`rawko agents list` shows the agents; or done, failed, escalated".into(),
        };
        out.push(Diagnostic {
            file: r.file.clone(),
            line: r.pos.line,
            column: r.pos.column,
            severity: Severity::Error,
            message: format!(
                "'{}' names agent '{}', which does not exist",
                r.event,
                super::diag::printable(name, false)
            ),
            hint: Some(hint),
        });
    }
    out.extend(cycles(agents));
    out
}

/// Warn about groups of agents that can never reach a terminal state: every transition of
/// every member (an unset onFailure or onMaxIterations leaves through the arbiter's failure
/// handling) stays inside the group.
fn cycles(agents: &BTreeMap<String, Arc<Agent>>) -> Vec<Diagnostic> {
    // For each agent: can it reach an exit? Start from agents with a direct exit and walk the
    // reverse edges; whatever is never reached is trapped.
    let mut can_exit: BTreeSet<&str> = BTreeSet::new();
    let mut reverse: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    let mut queue: Vec<&str> = Vec::new();
    for (name, a) in agents {
        let t = &a.transitions;
        let leaves = t.on_failure.is_none()
            || t.on_max_iterations.is_none()
            || a.targets().any(|t| match t {
                Target::Agent(n) => !agents.contains_key(n),
                _ => true,
            });
        if leaves {
            can_exit.insert(name);
            queue.push(name);
        }
        for target in a.targets() {
            if let Some(n) = target.agent()
                && agents.contains_key(n)
            {
                reverse.entry(n).or_default().push(name);
            }
        }
    }
    while let Some(n) = queue.pop() {
        for from in reverse.get(n).into_iter().flatten() {
            if can_exit.insert(from) {
                queue.push(from);
            }
        }
    }
    let mut out = Vec::new();
    out.extend(success_loops(agents, &can_exit));
    for (name, a) in agents {
        if can_exit.contains(name.as_str()) {
            continue;
        }
        let loop_names: Vec<&str> = a.targets().filter_map(Target::agent).collect();
        let pos = a.source.spans.on_success;
        out.push(Diagnostic {
            file: a.source.display.clone(),
            line: pos.line,
            column: pos.column,
            severity: Severity::Warning,
            message: format!(
                "a task in '{name}' can never finish: its transitions ({}) lead only to agents that never reach done, failed or escalated",
                loop_names.join(", ")
            ),
            hint: Some("route one transition to a terminal state".into()),
        });
    }
    out
}

/// Warn about agents whose success leads round in a circle: following `onSuccess` from them
/// comes back without reaching a terminal state, so a task that keeps succeeding never ends.
/// Reported once per circle, at its first member by name; trapped groups are reported apart.
fn success_loops(
    agents: &BTreeMap<String, Arc<Agent>>,
    can_exit: &BTreeSet<&str>,
) -> Vec<Diagnostic> {
    // Each agent has one onSuccess successor, so following them from every agent, and never
    // walking past an agent already walked, finds every circle in linear time.
    let mut done: HashSet<&str> = HashSet::new();
    let mut out = Vec::new();
    for start in agents.keys() {
        if done.contains(start.as_str()) || !can_exit.contains(start.as_str()) {
            continue;
        }
        let mut path: Vec<&str> = Vec::new();
        let mut on_path: HashMap<&str, usize> = HashMap::new();
        let mut current = start.as_str();
        loop {
            if done.contains(current) {
                break;
            }
            if let Some(&i) = on_path.get(current) {
                out.push(loop_warning(agents, &path[i..]));
                break;
            }
            on_path.insert(current, path.len());
            path.push(current);
            match agents[current].transitions.on_success.agent() {
                Some(next) if agents.contains_key(next) => current = next,
                _ => break,
            }
        }
        done.extend(path);
    }
    out
}

/// The warning for one circle of onSuccess transitions, at its first member by name.
fn loop_warning(agents: &BTreeMap<String, Arc<Agent>>, circle: &[&str]) -> Diagnostic {
    let at = (0..circle.len())
        .min_by_key(|&i| circle[i])
        .expect("a circle has members");
    let mut shown: Vec<&str> = circle[at..].iter().chain(&circle[..at]).copied().collect();
    shown.push(circle[at]);
    let path = if shown.len() > 8 {
        format!(
            "{} -> ... -> {} ({} agents)",
            shown[..3].join(" -> "),
            circle[at],
            circle.len()
        )
    } else {
        shown.join(" -> ")
    };
    let a = &agents[circle[at]];
    let pos = a.source.spans.on_success;
    Diagnostic {
        file: a.source.display.clone(),
        line: pos.line,
        column: pos.column,
        severity: Severity::Warning,
        message: format!(
            "onSuccess transitions form a cycle with no exit ({path}): a task that keeps succeeding never reaches done"
        ),
        hint: Some("end the chain with 'onSuccess: done'".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(f: impl FnOnce(&mut Problems)) -> Vec<String> {
        let mut p = Problems::new();
        f(&mut p);
        p.into_diagnostics("f")
            .iter()
            .map(|d| d.to_string())
            .collect()
    }

    fn s(v: &str) -> Spanned<String> {
        Spanned::new(v.to_string(), Pos::new(3, 7))
    }

    #[test]
    fn names_with_path_separators_or_odd_characters_are_refused() {
        for bad in [
            "../etc/passwd",
            "a/b",
            "a\\b",
            "..",
            "",
            "-x",
            "a b",
            "done",
            "ünï",
        ] {
            assert!(!is_valid_name(bad), "{bad}");
        }
        for good in ["planner", "pr_review_agent", "csharp-analyzer", "Agent2"] {
            assert!(is_valid_name(good), "{good}");
        }
        let e = errors(|p| {
            check_name(&s("../../etc/passwd"), p);
        });
        assert_eq!(
            e,
            [
                "f:3:7: agent name '../../etc/passwd' contains a path separator (a name is not a path: use letters, digits, '-' and '_')"
            ]
        );
    }

    #[test]
    fn tool_case_mistakes_are_errors_in_strict_mode() {
        let e = errors(|p| check_tool_names(&[s("read"), s("Grpe"), s("MyPluginTool")], true, p));
        assert_eq!(e.len(), 2, "{e:?}");
        assert!(e[0].contains("'read' is not 'Read'"), "{e:?}");
        assert!(
            e[1].contains("warning: 'Grpe' is not a built-in tool (did you mean 'Grep'?"),
            "{e:?}"
        );
    }

    #[test]
    fn blocked_patterns_must_compile() {
        let e = errors(|p| {
            check_blocked_patterns(&[s("rm\\s+-rf"), s("(unclosed"), s("x{99999999}")], p)
        });
        assert_eq!(e.len(), 2, "{e:?}");
        assert!(
            e[0].contains("'(unclosed' is not a valid regular expression"),
            "{e:?}"
        );
    }

    /// A hostile workspace may hold thousands of agents in one long circle: found once, in
    /// linear time, and described briefly.
    #[test]
    fn a_huge_success_circle_is_one_short_warning() {
        const N: usize = 5000;
        let agents: BTreeMap<String, Arc<Agent>> = (0..N)
            .map(|i| {
                let text = format!(
                    "name: a{i}\nsystemPrompt: p\ntransitions: {{onSuccess: a{}}}\n",
                    (i + 1) % N
                );
                let rel = format!("a{i}.yaml");
                let l = super::super::load_text(
                    &text,
                    super::super::FileInfo {
                        path: std::path::Path::new(&rel),
                        display: &rel,
                        origin: super::super::AgentOrigin::File,
                    },
                );
                (format!("a{i}"), l.agent.unwrap())
            })
            .collect();
        let refs: Vec<Reference> = agents.values().flat_map(|a| Reference::of(a)).collect();
        let known: BTreeSet<String> = agents.keys().cloned().collect();
        let d = cross_check(&agents, &refs, &known);
        assert_eq!(d.len(), 1, "{d:#?}");
        assert!(
            d[0].message
                .contains("(a0 -> a1 -> a2 -> ... -> a0 (5000 agents))"),
            "{}",
            d[0].message
        );
        assert!(d[0].message.len() < 300);
    }

    #[test]
    fn targets_are_names_or_terminal_states() {
        let e = errors(|p| {
            assert_eq!(check_target(&s("done"), "onSuccess", p), Some(Target::Done));
            assert_eq!(
                check_target(&s("tester"), "onSuccess", p),
                Some(Target::Agent("tester".into()))
            );
            assert_eq!(check_target(&s("../x"), "onFailure", p), None);
        });
        assert_eq!(e.len(), 1);
        assert!(e[0].contains("'onFailure' target '../x'"), "{e:?}");
    }
}
