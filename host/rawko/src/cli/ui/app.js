// rawko ui: the page's only script. Everything from the store is put on the page as text
// (textContent), never as markup; the graph is SVG that rawko made and escaped, parsed as an
// SVG document, never as HTML.
"use strict";

const token = new URLSearchParams(location.search).get("t") || "";
const q = "?t=" + encodeURIComponent(token);
const main = document.getElementById("main");

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}

function when(ms) {
  return ms ? new Date(ms).toLocaleString() : "";
}

function secs(ms) {
  return ms >= 1000 ? (ms / 1000).toFixed(1) + " s" : Math.round(ms) + " ms";
}

async function get(path) {
  const r = await fetch(path + q, { cache: "no-store" });
  if (!r.ok) {
    let why = r.status + " " + r.statusText;
    try { why = (await r.json()).error || why; } catch (_) { /* not JSON */ }
    throw new Error(why);
  }
  return r.json();
}

function failed(e) {
  main.replaceChildren(el("p", "error", "Cannot read it: " + e.message));
}

// ---- the list of tasks ----

async function showList() {
  document.getElementById("where").textContent = "tasks";
  const tasks = await get("/api/tasks");
  const table = el("table", "tasks");
  const head = el("tr");
  for (const h of ["task", "status", "state", "steps", "tokens", "started", "prompt"]) {
    head.append(el("th", null, h));
  }
  table.append(head);
  for (const t of tasks) {
    const row = el("tr", "task-row");
    const link = el("a", null, t.id);
    link.href = "/task/" + encodeURIComponent(t.id) + q;
    const id = el("td");
    id.append(link);
    row.append(id, el("td", "status " + t.status, t.status), el("td", null, t.state),
      el("td", "num", t.steps), el("td", "num", t.tokens), el("td", null, when(t.created_at)),
      el("td", "prompt", (t.prompt || "").split("\n")[0]));
    table.append(row);
  }
  main.replaceChildren(tasks.length ? table : el("p", "quiet", "No tasks in this workspace yet."));
}

// ---- one task ----

const open = new Set();

function graph(svgText) {
  const doc = new DOMParser().parseFromString(svgText, "image/svg+xml");
  const svg = doc.documentElement;
  if (svg.nodeName !== "svg") return el("p", "error", "the graph could not be drawn");
  const box = el("div", "graph");
  box.append(document.importNode(svg, true));
  return box;
}

function timeline(d) {
  const turns = d.turns;
  const start = Math.min(d.task.created_at, ...turns.map((t) => t.started_at));
  const ends = [Date.now()];
  if (!["running"].includes(d.task.status)) ends.length = 0;
  for (const t of turns) ends.push(t.ended_at || t.started_at);
  for (const c of d.tool_calls) ends.push(c.at);
  for (const m of d.model_calls) ends.push(m.ended_at);
  const end = Math.max(start + 1, ...ends);
  const x = (ms) => (100 * (ms - start)) / (end - start);
  const box = el("div", "timeline");
  const scale = el("div", "scale", "0 — " + secs(end - start));
  box.append(scale);
  // Where each later run resumed the task.
  for (const [i, r] of d.runs.entries()) {
    if (i === 0) continue;
    const m = el("div", "resume-mark", "resumed (run " + (i + 1) + ")");
    // On the lanes' scale: they start after the 288px labels, inside the box's 8px padding.
    m.style.left = "calc(296px + (100% - 304px) * " + x(r.started_at) / 100 + ")";
    // Near the right end, the label goes left of its line.
    if (x(r.started_at) > 70) m.classList.add("flip");
    box.append(m);
  }
  for (const t of turns) {
    const row = el("div", "turn");
    row.dataset.turn = String(t.id);
    const label = el("button", "turn-label");
    const usage = d.usage_by_turn[String(t.id)];
    const tokens = usage ? usage.input_tokens + usage.output_tokens + usage.cache_read + usage.cache_write : 0;
    label.append(el("span", "agent", (t.parent_id ? "↳ " : "") + t.agent),
      el("span", "outcome " + (t.outcome || "open"), t.outcome || "in progress"),
      el("span", "tokens", tokens + " tokens"));
    label.addEventListener("click", () => {
      if (open.has(t.id)) open.delete(t.id); else open.add(t.id);
      render(d);
    });
    const lane = el("div", "lane");
    const span = el("div", "turn-span");
    span.style.left = x(t.started_at) + "%";
    span.style.width = Math.max(0.3, x(t.ended_at || end) - x(t.started_at)) + "%";
    lane.append(span);
    for (const m of d.model_calls.filter((m) => m.turn_id === t.id)) {
      const bar = el("div", "bar model" + (m.attempt > 1 ? " retry" : "") + (m.outcome !== "ok" ? " fail" : ""));
      bar.style.left = x(m.started_at) + "%";
      bar.style.width = Math.max(0.2, x(m.ended_at) - x(m.started_at)) + "%";
      bar.title = m.model + " · " + secs(m.ended_at - m.started_at) + (m.attempt > 1 ? " · retry " + m.attempt : "");
      lane.append(bar);
      if (m.attempt > 1) {
        const mark = el("span", "mark retry-mark", "↻");
        mark.style.left = x(m.started_at) + "%";
        lane.append(mark);
      }
    }
    for (const c of d.tool_calls.filter((c) => c.turn_id === t.id)) {
      const begin = c.at - c.duration_us / 1000;
      const denied = /^denied|^blocked|^refused/i.test(c.verdict);
      const bar = el("div", "bar tool" + (c.is_error ? " fail" : "") + (denied ? " denied" : ""));
      bar.style.left = x(begin) + "%";
      bar.style.width = Math.max(0.2, x(c.at) - x(begin)) + "%";
      bar.title = c.tool + " · " + c.verdict + " · " + secs(c.duration_us / 1000);
      lane.append(bar);
      if (denied) {
        const mark = el("span", "mark denial-mark", "✗");
        mark.style.left = x(c.at) + "%";
        mark.title = c.tool + ": " + c.verdict;
        lane.append(mark);
      }
    }
    row.append(label, lane);
    box.append(row);
    if (open.has(t.id)) box.append(details(d, t));
  }
  return box;
}

function text(content) {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content.map((c) => {
      if (c.type === "text") return c.text;
      if (c.type === "tool_use" || c.type === "tool_call") return "→ " + (c.name || "") + " " + JSON.stringify(c.input || c.arguments || {});
      if (c.type === "tool_result") return "← " + (typeof c.content === "string" ? c.content : JSON.stringify(c.content));
      return JSON.stringify(c);
    }).join("\n");
  }
  return JSON.stringify(content, null, 2);
}

function details(d, t) {
  const box = el("div", "details");
  box.dataset.turn = String(t.id);
  if (t.summary) box.append(el("p", "summary", t.summary));
  const calls = d.tool_calls.filter((c) => c.turn_id === t.id);
  if (calls.length) {
    box.append(el("h3", null, "Tool calls"));
    for (const c of calls) {
      const call = el("div", "call" + (c.is_error ? " fail" : ""));
      call.append(el("div", "call-head", c.tool + " · " + c.verdict + " · " + secs(c.duration_us / 1000)),
        el("pre", "input", c.input), el("pre", "output", c.output));
      box.append(call);
    }
  }
  const audit = d.decisions.filter((a) => a.turn_id === t.id);
  if (audit.length) {
    box.append(el("h3", null, "Audit"));
    for (const a of audit) {
      box.append(el("div", "audit " + a.decision, a.subject + " " + a.capability + " " + a.detail + ": " + a.decision + " (" + a.reason + ")"));
    }
  }
  const messages = d.messages[String(t.id)] || [];
  if (messages.length) {
    box.append(el("h3", null, "Messages"));
    for (const m of messages) {
      const msg = el("div", "message " + m.role);
      msg.append(el("div", "role", m.role), el("pre", "content", text(m.content)));
      box.append(msg);
    }
  }
  return box;
}

function changes(d) {
  const box = el("div", "changes");
  box.append(el("h2", null, "What it changed"));
  if (!d.changes.length) box.append(el("p", "quiet", "No file was written or edited."));
  for (const c of d.changes) {
    const i = c.input || {};
    const item = el("div", "change");
    item.append(el("div", "path", c.tool + " " + (i.path || i.file_path || "")));
    if (typeof i.content === "string") item.append(el("pre", "added", i.content));
    if (typeof i.old_string === "string") item.append(el("pre", "removed", i.old_string));
    if (typeof i.new_string === "string") item.append(el("pre", "added", i.new_string));
    if (Array.isArray(i.edits)) item.append(el("pre", "added", JSON.stringify(i.edits, null, 2)));
    box.append(item);
  }
  return box;
}

function render(d) {
  const t = d.task;
  document.getElementById("where").textContent = "task " + t.id;
  const head = el("div", "task-head");
  head.append(el("h1", null, t.prompt.split("\n")[0]),
    el("div", "facts", t.status + " · state " + t.state + " · " + t.steps + " steps · " +
      (d.usage.input_tokens + d.usage.output_tokens + d.usage.cache_read + d.usage.cache_write) + " tokens · started " + when(t.created_at)));
  if (t.summary) head.append(el("p", "summary", t.summary));
  main.replaceChildren(head, el("h2", null, "Path"), graph(d.graph), el("h2", null, "Timeline"),
    timeline(d), changes(d));
}

async function showTask(id) {
  let d = await get("/api/task/" + encodeURIComponent(id));
  render(d);
  const events = new EventSource("/api/task/" + encodeURIComponent(id) + "/events" + q);
  const again = async () => {
    try {
      d = await get("/api/task/" + encodeURIComponent(id));
      render(d);
    } catch (e) { failed(e); }
  };
  const stopped = document.getElementById("stopped");
  let away = false;
  events.addEventListener("change", again);
  // A server that went away is asked again by the browser, with the same URL: the next
  // `rawko ui` of this workspace serves it, and what was committed meanwhile is fetched. One
  // that refuses (another token) is not asked again.
  events.onerror = () => {
    away = true;
    stopped.hidden = false;
  };
  events.onopen = () => {
    stopped.hidden = true;
    if (away) {
      away = false;
      again();
    }
  };
}

document.getElementById("home").href = "/" + q;
const at = location.pathname.match(/^\/task\/([^/]+)$/);
(at ? showTask(decodeURIComponent(at[1])) : showList()).catch(failed);
