//! The graph as SVG, laid out here so a page can show it without a graph library: states in
//! columns by their distance from the first, edges as arrows (the transition table solid, the
//! arbiter's own choices dashed, agents called as tools dotted), and a task's path drawn over
//! it, numbered. Every name and label is XML-escaped: it is text on the page, never markup.

use std::collections::VecDeque;
use std::fmt::Write as _;

use super::{EdgeKind, FAILURE, Graph, MARK, NodeKind, Overlay, PATH, one_line};

/// Width of a character, height of a line, and the gaps of the layout, in pixels.
const CHAR_W: f64 = 7.2;
const LINE_H: f64 = 16.0;
const PAD: f64 = 8.0;
const COL_GAP: f64 = 150.0;
const ROW_GAP: f64 = 60.0;
const MARGIN: f64 = 36.0;

struct Box_ {
    x: f64,
    y: f64,
    w: f64,
    h: f64,
}

impl Box_ {
    fn right(&self) -> (f64, f64) {
        (self.x + self.w, self.y + self.h / 2.0)
    }
    fn left(&self) -> (f64, f64) {
        (self.x, self.y + self.h / 2.0)
    }
    fn bottom(&self) -> (f64, f64) {
        (self.x + self.w / 2.0, self.y + self.h)
    }
}

/// `text` as XML character data or attribute value.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

impl Graph {
    /// The graph as one SVG element, with `overlay` (a task's path) drawn on it.
    pub fn to_svg(&self, overlay: Option<&Overlay>) -> String {
        let mut g = self.clone();
        let path = overlay.map(|o| g.place(o)).unwrap_or_default();
        let n = g.nodes.len();

        // Columns: how many steps each state is from the first (the path's first state, else
        // the first node), along transitions and the path; what is not reached goes last.
        let first = path
            .steps
            .first()
            .map(|s| s.from.unwrap_or(s.to))
            .unwrap_or(0);
        let mut rank = vec![usize::MAX; n];
        let mut queue = VecDeque::new();
        if n > 0 {
            rank[first] = 0;
            queue.push_back(first);
        }
        let mut next: Vec<Vec<usize>> = vec![Vec::new(); n];
        for e in &g.edges {
            if e.kind != EdgeKind::Call {
                next[e.from].push(e.to);
            }
        }
        for s in &path.steps {
            if let Some(f) = s.from {
                next[f].push(s.to);
            }
        }
        while let Some(at) = queue.pop_front() {
            for &to in &next[at] {
                if rank[to] == usize::MAX {
                    rank[to] = rank[at] + 1;
                    queue.push_back(to);
                }
            }
        }
        let reached = rank.iter().filter(|r| **r != usize::MAX).max().copied();
        let last = reached.map_or(0, |r| r + 1);
        for r in &mut rank {
            if *r == usize::MAX {
                *r = last;
            }
        }
        let columns = rank.iter().max().map_or(0, |r| r + 1);

        // Boxes: each column as wide as its widest label, each state below the one before.
        let lines: Vec<Vec<String>> = g
            .nodes
            .iter()
            .map(|node| {
                let mut l: Vec<String> = node.lines().iter().map(|t| one_line(t)).collect();
                for (at, label) in &path.marks {
                    if g.nodes[*at].name == node.name {
                        l.push(one_line(label));
                    }
                }
                l
            })
            .collect();
        let width = |l: &[String]| {
            l.iter().map(|t| t.chars().count()).max().unwrap_or(1) as f64 * CHAR_W + 2.0 * PAD
        };
        let mut col_w = vec![0f64; columns];
        for i in 0..n {
            col_w[rank[i]] = col_w[rank[i]].max(width(&lines[i]));
        }
        let mut col_x = vec![MARGIN; columns];
        for c in 1..columns {
            col_x[c] = col_x[c - 1] + col_w[c - 1] + COL_GAP;
        }
        let mut col_y = vec![MARGIN + LINE_H; columns];
        let mut boxes = Vec::with_capacity(n);
        for i in 0..n {
            let h = lines[i].len() as f64 * LINE_H + PAD;
            let c = rank[i];
            boxes.push(Box_ {
                x: col_x[c],
                y: col_y[c],
                w: width(&lines[i]),
                h,
            });
            col_y[c] += h + ROW_GAP;
        }
        let total_w =
            col_x.last().copied().unwrap_or(MARGIN) + col_w.last().copied().unwrap_or(0.0) + MARGIN;
        let total_h = col_y.iter().copied().fold(0f64, f64::max) + MARGIN;

        let mut out = String::new();
        let _ = write!(
            out,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"agents-graph\" role=\"img\" \
             viewBox=\"0 0 {total_w:.0} {total_h:.0}\" width=\"{total_w:.0}\" \
             height=\"{total_h:.0}\" font-family=\"monospace\" font-size=\"12\">"
        );
        out.push_str("<title>The agents' transition graph</title><defs>");
        for (id, colour) in [
            ("arrow", "#57606a"),
            ("arrow-path", PATH),
            ("arrow-fail", FAILURE),
        ] {
            let _ = write!(
                out,
                "<marker id=\"{id}\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" \
                 markerWidth=\"7\" markerHeight=\"7\" orient=\"auto-start-reverse\">\
                 <path d=\"M 0 0 L 10 5 L 0 10 z\" fill=\"{colour}\"/></marker>"
            );
        }
        out.push_str("</defs>");

        // The graph's own edges, then the path over them.
        let curve = |from: usize, to: usize, bend: f64| -> (String, (f64, f64)) {
            let (a, b) = (&boxes[from], &boxes[to]);
            if from == to {
                let (x, y) = a.bottom();
                return (
                    format!(
                        "M {:.1} {:.1} C {:.1} {:.1}, {:.1} {:.1}, {:.1} {:.1}",
                        x - 10.0,
                        y,
                        x - 30.0,
                        y + 30.0 + bend,
                        x + 30.0,
                        y + 30.0 + bend,
                        x + 10.0,
                        y
                    ),
                    (x, y + 24.0 + bend),
                );
            }
            let forward = rank[to] > rank[from];
            let (x1, y1) = if forward { a.right() } else { a.bottom() };
            let (x2, y2) = if forward { b.left() } else { b.bottom() };
            let (cx, cy) = if forward {
                ((x1 + x2) / 2.0, (y1 + y2) / 2.0 + bend)
            } else {
                ((x1 + x2) / 2.0, y1.max(y2) + 40.0 + bend)
            };
            (
                format!("M {x1:.1} {y1:.1} Q {cx:.1} {cy:.1} {x2:.1} {y2:.1}"),
                ((x1 + 2.0 * cx + x2) / 4.0, (y1 + 2.0 * cy + y2) / 4.0),
            )
        };
        for e in &g.edges {
            let (d, (lx, ly)) = curve(e.from, e.to, 0.0);
            let dash = match e.kind {
                EdgeKind::Transition => "",
                EdgeKind::Arbiter => " stroke-dasharray=\"6 4\"",
                EdgeKind::Call => " stroke-dasharray=\"2 3\"",
            };
            let kind = match e.kind {
                EdgeKind::Transition => "transition",
                EdgeKind::Arbiter => "arbiter",
                EdgeKind::Call => "call",
            };
            let _ = write!(
                out,
                "<g class=\"edge {kind}\"><path d=\"{d}\" fill=\"none\" stroke=\"#8c959f\"{dash} \
                 marker-end=\"url(#arrow)\"/><text x=\"{lx:.1}\" y=\"{:.1}\" fill=\"#57606a\" \
                 text-anchor=\"middle\">{}</text></g>",
                ly - 3.0,
                escape(&one_line(&e.label))
            );
        }
        for (i, s) in path.steps.iter().enumerate() {
            let Some(from) = s.from else { continue };
            let (colour, arrow) = if s.failure {
                (FAILURE, "arrow-fail")
            } else {
                (PATH, "arrow-path")
            };
            let (d, (lx, ly)) = curve(from, s.to, 8.0 * (i % 3) as f64);
            let _ = write!(
                out,
                "<g class=\"step{}\" data-step=\"{}\"><path d=\"{d}\" fill=\"none\" \
                 stroke=\"{colour}\" stroke-width=\"2.5\" marker-end=\"url(#{arrow})\"/>\
                 <text x=\"{lx:.1}\" y=\"{:.1}\" fill=\"{colour}\" font-weight=\"bold\" \
                 text-anchor=\"middle\">{}</text></g>",
                if s.failure { " failure" } else { "" },
                i + 1,
                ly + 12.0,
                escape(&one_line(&s.label))
            );
        }
        for (from, to, label) in &path.calls {
            let (d, (lx, ly)) = curve(*from, *to, 12.0);
            let _ = write!(
                out,
                "<g class=\"asked\"><path d=\"{d}\" fill=\"none\" stroke=\"{PATH}\" \
                 stroke-dasharray=\"2 3\" stroke-width=\"2\" marker-end=\"url(#arrow-path)\"/>\
                 <text x=\"{lx:.1}\" y=\"{:.1}\" fill=\"{PATH}\" text-anchor=\"middle\">{}</text></g>",
                ly + 12.0,
                escape(label)
            );
        }

        // The states, over the edges.
        for (i, node) in g.nodes.iter().enumerate() {
            let b = &boxes[i];
            let on_path = path.visited.contains(&i);
            let (fill, stroke) = match node.kind {
                NodeKind::Terminal => ("#f6f8fa", "#57606a"),
                NodeKind::Missing => ("#fff8c5", MARK),
                NodeKind::Agent if node.untrusted => ("#ffebe9", FAILURE),
                NodeKind::Agent => ("#ffffff", "#57606a"),
            };
            let stroke = if on_path { PATH } else { stroke };
            let mut classes = String::from("node");
            if on_path {
                classes.push_str(" visited");
            }
            if node.untrusted {
                classes.push_str(" untrusted");
            }
            let _ = write!(
                out,
                "<g class=\"{classes}\" data-name=\"{}\"><rect x=\"{:.1}\" y=\"{:.1}\" \
                 width=\"{:.1}\" height=\"{:.1}\" rx=\"6\" fill=\"{fill}\" stroke=\"{stroke}\" \
                 stroke-width=\"{}\"/>",
                escape(&node.name),
                b.x,
                b.y,
                b.w,
                b.h,
                if on_path { 2.5 } else { 1.0 }
            );
            let marks_from = node.lines().len();
            for (k, line) in lines[i].iter().enumerate() {
                let (colour, weight, class) = if k == 0 {
                    ("#1f2328", " font-weight=\"bold\"", "name")
                } else if k >= marks_from {
                    (MARK, "", "mark")
                } else {
                    ("#57606a", "", "about")
                };
                let _ = write!(
                    out,
                    "<text class=\"{class}\" x=\"{:.1}\" y=\"{:.1}\" fill=\"{colour}\"{weight}>{}</text>",
                    b.x + PAD,
                    b.y + PAD / 2.0 + LINE_H * (k as f64 + 0.8),
                    escape(line)
                );
            }
            out.push_str("</g>");
        }
        if path.start
            && let Some(first_step) = path.steps.first()
        {
            let (x, y) = boxes[first_step.to].left();
            let _ = write!(
                out,
                "<g class=\"start\"><circle cx=\"{:.1}\" cy=\"{y:.1}\" r=\"5\" fill=\"{PATH}\"/>\
                 <path d=\"M {:.1} {y:.1} L {x:.1} {y:.1}\" stroke=\"{PATH}\" stroke-width=\"2\" \
                 marker-end=\"url(#arrow-path)\"/></g>",
                (x - 22.0).max(4.0),
                (x - 18.0).max(8.0)
            );
        }
        out.push_str("</svg>");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{Edge, Node, Step};

    #[test]
    fn every_name_and_label_is_text_and_the_path_is_numbered() {
        let hostile = "<script>alert(1)</script>\"' & <img src=x onerror=alert(2)>";
        let g = Graph {
            nodes: vec![
                Node {
                    name: "planner".into(),
                    kind: NodeKind::Agent,
                    origin: None,
                    untrusted: false,
                    external: None,
                },
                Node {
                    name: hostile.into(),
                    kind: NodeKind::Agent,
                    origin: None,
                    untrusted: true,
                    external: None,
                },
            ],
            edges: vec![Edge {
                from: 0,
                to: 1,
                kind: EdgeKind::Transition,
                label: format!("success {hostile}"),
            }],
        };
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
                    to: hostile.into(),
                    label: hostile.into(),
                    failure: true,
                },
                Step {
                    from: Some(hostile.into()),
                    to: "done".into(),
                    label: "success".into(),
                    failure: false,
                },
            ],
            calls: Vec::new(),
            marks: vec![crate::graph::Mark {
                state: "planner".into(),
                label: "run 2: resumed here".into(),
            }],
        };
        let svg = g.to_svg(Some(&overlay));
        assert!(svg.starts_with("<svg ") && svg.ends_with("</svg>"), "{svg}");
        assert!(!svg.contains("<script") && !svg.contains("<img"), "{svg}");
        assert!(svg.contains("&lt;script&gt;alert(1)&lt;/script&gt;&quot;&#39; &amp;"));
        assert_eq!(svg.matches("class=\"step").count(), 2, "{svg}");
        assert!(
            svg.contains("class=\"step failure\" data-step=\"2\""),
            "{svg}"
        );
        assert!(svg.contains("class=\"step\" data-step=\"3\""), "{svg}");
        assert!(svg.contains("run 2: resumed here"), "{svg}");
        assert!(svg.contains("class=\"node visited untrusted\""), "{svg}");
        // The terminal the path reached is drawn too.
        assert!(svg.contains("data-name=\"done\""), "{svg}");
        // Balanced: as many groups opened as closed.
        assert_eq!(svg.matches("<g ").count(), svg.matches("</g>").count());
    }
}
