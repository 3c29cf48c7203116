// One memory: its text, signals, the archived event, and its lineage as a graph.

import { bankPath, get } from "../api.js";
import { formatTime, h } from "../dom.js";
import { lineageGraph, renderLineage } from "../lineage.js";
import { routeTo } from "../router.js";

export async function memoryPage(route) {
  const [bank, id] = route.args;
  const history = await get(bankPath(bank, `/memories/${encodeURIComponent(id)}/history`));
  const record = history.memory;
  return h("section", { class: "memory" },
    h("h1", {}, h("span", { class: `chip t-${record.fact_type}` }, history.kind || record.fact_type || "memory"), " ", record.id),
    h("p", { class: "muted" }, h("a", { href: routeTo("memories", [bank]) }, `← ${bank}`), ` · ${formatTime(record.timestamp)}`,
      record.tags.length ? ` · tags: ${record.tags.join(", ")}` : ""),
    h("div", { class: "split" },
      h("div", {}, h("h2", {}, "Text"), memoryText(record)),
      h("div", {}, h("h2", {}, "Signals"), signals(record, history))),
    h("h2", {}, "Lineage"),
    lineage(bank, history),
    supersessions(history),
    h("details", {}, h("summary", {}, "Archived event"),
      h("pre", { class: "json", id: "archived-event" }, JSON.stringify(record.archived_event, null, 2))));
}

function memoryText(record) {
  const steps = findKey(record.archived_event, "steps");
  if (Array.isArray(steps) && steps.length) {
    const rationale = findKey(record.archived_event, "rationale");
    return h("div", {},
      h("ol", { class: "steps" }, steps.map((step) => h("li", {}, String(step)))),
      rationale && h("p", {}, h("strong", {}, "Rationale: "), String(rationale)));
  }
  return h("p", { class: "text" }, record.text);
}

// The first value under ``key`` anywhere in the archived event (typed blocks nest it).
function findKey(value, key) {
  if (!value || typeof value !== "object") return undefined;
  if (!Array.isArray(value) && key in value && value[key] !== null) return value[key];
  for (const inner of Object.values(value)) {
    const found = findKey(inner, key);
    if (found !== undefined) return found;
  }
  return undefined;
}

function signals(record, history) {
  const s = history.signals || {};
  const rows = [
    ["importance", s.importance_score ?? record.importance_score],
    ["decay", s.decay_factor],
    ["count", s.retrieval_count ?? record.retrieval_count],
    ["proof", s.proof_count],
    ["reward", s.reward_score],
    ["confidence", s.confidence],
    ["superseded", s.superseded],
  ].filter(([, v]) => v !== undefined && v !== null);
  return h("dl", { class: "signals", id: "signals" }, rows.map(([name, v]) => [
    h("dt", {}, name), h("dd", { dataset: { signal: name } }, typeof v === "number" && !Number.isInteger(v) ? v.toFixed(3) : String(v)),
  ]));
}

function lineage(bank, history) {
  const graph = lineageGraph(history);
  if (graph.edges.length === 0) return h("p", { class: "muted", id: "lineage-none" }, "Retained as is: no sources, versions or supersessions.");
  return h("div", { class: "scroll", id: "lineage" }, renderLineage(graph, (id) => routeTo("memory", [bank, id])));
}

function supersessions(history) {
  const records = [...(history.supersedes || []), ...(history.superseded_by ? [history.superseded_by] : [])];
  if (!records.length) return null;
  return h("ul", { class: "rules" }, records.map((r) => h("li", {},
    h("a", { href: routeTo("memory", [history.bank_id, r.memory_id]) }, r.memory_id), " superseded by ",
    h("a", { href: routeTo("memory", [history.bank_id, r.superseded_by]) }, r.superseded_by),
    ` — rule: ${r.rule}`)));
}

