// A memory's lineage (from GET …/history) as a small left-to-right graph in inline SVG.

import { svg } from "./dom.js";

export function lineageGraph(history) {
  const nodes = new Map();
  const edges = [];
  const node = (id, label, kind) => {
    if (!nodes.has(id)) nodes.set(id, { id, label, kind });
    return id;
  };
  const self = node(history.memory_id, labelOf(history.memory.text), history.kind || history.memory.fact_type || "memory");
  nodes.get(self).self = true;
  const linked = (items, relation) => {
    for (const item of items || []) {
      node(item.memory_id, labelOf(item.text), item.fact_type || relation);
      edges.push({ from: item.memory_id, to: self, label: relation });
    }
  };
  linked(history.corrections, "correction");
  linked(history.sources, "source");
  linked(history.evidence, "evidence");
  const versions = history.versions || [];
  for (let i = 0; i < versions.length; i += 1) {
    const v = versions[i];
    node(v.memory_id, labelOf(v.text, `v${v.version} `), "version");
    if (v.memory_id === self) nodes.get(self).label = labelOf(v.text, `v${v.version} `);
    if (i > 0) edges.push({ from: versions[i - 1].memory_id, to: v.memory_id, label: "version" });
  }
  for (const record of history.supersedes || []) {
    node(record.memory_id, record.memory_id, "superseded");
    edges.push({ from: record.memory_id, to: record.superseded_by, label: record.rule });
  }
  const successor = history.superseded_by;
  if (successor) {
    node(successor.superseded_by, successor.superseded_by, "successor");
    edges.push({ from: self, to: successor.superseded_by, label: successor.rule });
  }
  return { nodes: [...nodes.values()], edges: dedupe(edges) };
}

function dedupe(edges) {
  const seen = new Map();
  for (const e of edges) {
    const key = `${e.from}→${e.to}`;
    // A version step that is also a supersession keeps the supersession's rule.
    if (!seen.has(key) || seen.get(key).label === "version") seen.set(key, e);
  }
  return [...seen.values()].filter((e) => e.from !== e.to);
}

function short(label) {
  return label.length > EDGE_LABEL_CHARS ? label.slice(0, EDGE_LABEL_CHARS - 1) + "…" : label;
}

// A node's box holds 28 characters, the version prefix included.
function labelOf(text, prefix = "") {
  const line = prefix + (text ? String(text).split("\n")[0] : "(forgotten)");
  return line.length > 28 ? line.slice(0, 27) + "…" : line;
}

// Column of each node: the longest chain of edges leading to it (cycles cut at the node count).
export function columns(graph) {
  const column = new Map(graph.nodes.map((n) => [n.id, 0]));
  for (let pass = 0; pass < graph.nodes.length; pass += 1) {
    let moved = false;
    for (const e of graph.edges) {
      const next = column.get(e.from) + 1;
      if (next > column.get(e.to)) {
        column.set(e.to, next);
        moved = true;
      }
    }
    if (!moved) break;
  }
  return column;
}

const BOX_W = 190;
const BOX_H = 44;
const GAP_X = 150;
const EDGE_LABEL_CHARS = 24;
const GAP_Y = 18;

export function renderLineage(graph, hrefOf) {
  const column = columns(graph);
  const rows = new Map();
  const at = new Map();
  for (const n of graph.nodes) {
    const c = column.get(n.id);
    const r = rows.get(c) || 0;
    rows.set(c, r + 1);
    at.set(n.id, { x: 8 + c * (BOX_W + GAP_X), y: 8 + r * (BOX_H + GAP_Y) });
  }
  const width = 16 + (Math.max(0, ...column.values()) + 1) * (BOX_W + GAP_X) - GAP_X;
  const height = 16 + Math.max(1, ...rows.values()) * (BOX_H + GAP_Y) - GAP_Y;
  const root = svg("svg", {
    class: "lineage", viewBox: `0 0 ${width} ${height}`, width, height, role: "img",
    "aria-label": `Lineage: ${graph.nodes.length} memories, ${graph.edges.length} links`,
  });
  root.append(svg("defs", {}, svg("marker", {
    id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse",
  }, svg("path", { d: "M0,0 L10,5 L0,10 z", class: "arrowhead" }))));
  for (const e of graph.edges) {
    const a = at.get(e.from);
    const b = at.get(e.to);
    const x1 = a.x + BOX_W;
    const y1 = a.y + BOX_H / 2;
    const x2 = b.x;
    const y2 = b.y + BOX_H / 2;
    root.append(svg("g", { class: "edge", "data-from": e.from, "data-to": e.to, "data-label": e.label },
      svg("path", { d: `M${x1},${y1} C${x1 + 30},${y1} ${x2 - 30},${y2} ${x2},${y2}`, "marker-end": "url(#arrow)" }),
      svg("title", {}, e.label),
      svg("text", { x: (x1 + x2) / 2, y: (y1 + y2) / 2 - 5, "text-anchor": "middle" }, short(e.label))));
  }
  for (const n of graph.nodes) {
    const p = at.get(n.id);
    const box = svg("g", { class: `node ${n.self ? "self" : ""}`, "data-id": n.id, "data-kind": n.kind },
      svg("title", {}, `${n.kind}: ${n.id}`),
      svg("rect", { x: p.x, y: p.y, width: BOX_W, height: BOX_H, rx: 6 }),
      svg("text", { x: p.x + 8, y: p.y + 17, class: "kind" }, n.kind),
      svg("text", { x: p.x + 8, y: p.y + 34 }, n.label));
    root.append(n.self ? box : svg("a", { href: hrefOf(n.id) }, box));
  }
  return root;
}
