// Recall playground: a query's results with each signal's share of the score, and the context block.

import { bankPath, post } from "../api.js";
import { refreshBanks } from "../session.js";
import { errorBox, field, h } from "../dom.js";
import { routeTo } from "../router.js";
import { barWidths, signalShares } from "../shares.js";
import { bankPicker, checkedTypes, chosenBank, noBank, typeBoxes } from "./common.js";

export async function playgroundPage(route) {
  await refreshBanks();
  const bank = chosenBank(route);
  if (!bank) return noBank();
  const p = route.params;
  const queryInput = h("input", { name: "query", required: true, value: p.get("q") || "", maxlength: 4096, class: "wide" });
  const k = h("input", { type: "number", name: "k", min: 1, max: 100, value: p.get("k") || 10 });
  const maxTokens = h("input", { type: "number", name: "max_tokens", min: 1, max: 100000, value: p.get("max_tokens") || "", placeholder: "no limit" });
  const types = (p.get("types") || "").split(",").filter(Boolean);
  const form = h("form", {
    class: "stack",
    id: "recall-form",
    onsubmit: (event) => {
      event.preventDefault();
      location.hash = routeTo("playground", [bank], {
        q: queryInput.value, k: k.value, max_tokens: maxTokens.value, types: checkedTypes(form).join(","),
      });
    },
  },
  field("Query", queryInput),
  typeBoxes(types),
  h("div", { class: "row" }, field("k", k), field("max_tokens", maxTokens)),
  h("button", { type: "submit" }, "Recall"));
  const body = p.get("q") ? await outcome(bank, {
    query: p.get("q"), k: Number(k.value), max_tokens: maxTokens.value ? Number(maxTokens.value) : null,
    types: types.length ? types : null,
  }) : h("p", { class: "muted" }, "Ask something to see what recall returns and why.");
  return h("section", {},
    h("h1", {}, "Recall playground"),
    bankPicker(bank, (id) => routeTo("playground", [id], {
      q: p.get("q"), k: p.get("k"), max_tokens: p.get("max_tokens"), types: p.get("types"),
    })),
    form, body);
}

async function outcome(bank, request) {
  const recall = post(bankPath(bank, "/recall"), { ...request, reinforce: false });
  // Looking is not using: neither call counts toward the memories' reinforcement.
  const context = post(bankPath(bank, "/context"), {
    query: request.query, types: request.types, max_tokens: request.max_tokens || 1000, reinforce: false,
  });
  const [results, block] = await Promise.allSettled([recall, context]);
  return h("div", { class: "split" },
    h("div", {}, h("h2", {}, "Results"), results.status === "fulfilled" ? hits(bank, results.value) : errorBox(results.reason)),
    h("div", {}, h("h2", {}, "Context block"), contextBlock(block)));
}

function hits(bank, answer) {
  if (!answer.results.length) return h("p", { class: "muted" }, `Nothing recalled (${answer.candidates} candidates).`);
  const scale = Math.max(...answer.results.map((r) => r.score));
  const names = new Set();
  const items = answer.results.map((hit, n) => {
    const shares = signalShares(hit.explain);
    shares.forEach((s) => names.add(s.name));
    return h("li", { class: "hit", dataset: { memory: hit.id, score: hit.score } },
      h("div", { class: "hit-head" },
        h("span", { class: "rank" }, `#${n + 1}`),
        h("span", { class: `chip t-${hit.fact_type}` }, hit.fact_type || "—"),
        h("a", { href: routeTo("memory", [bank, hit.id]) }, hit.id),
        h("span", { class: "score", title: "final score" }, hit.score.toFixed(4))),
      h("p", { class: "text" }, hit.text),
      bar(shares, scale, hit.score));
  });
  return h("div", {},
    h("p", { class: "muted" }, `${answer.results.length} of ${answer.candidates} candidates · ${answer.tokens} tokens`),
    legend([...names]),
    h("ol", { class: "hits", id: "hits" }, items));
}

function bar(shares, scale, score) {
  const widths = barWidths(shares, scale);
  const label = shares.filter((s) => s.contribution > 0)
    .map((s) => `${s.name} ${s.contribution.toFixed(3)}`).join(", ");
  const track = h("div", { class: "bar", role: "img", "aria-label": `score ${score.toFixed(3)}: ${label}` });
  shares.forEach((s, i) => {
    if (s.contribution <= 0) return;
    const part = h("span", {
      class: `seg s-${s.name}`,
      title: `${s.name}: ${s.weight.toFixed(3)} × ${s.value.toFixed(3)} = ${s.contribution.toFixed(4)}`,
      dataset: { signal: s.name, contribution: s.contribution },
    });
    part.style.width = `${widths[i]}%`; // CSSOM, which the page's style policy allows
    track.append(part);
  });
  return track;
}

function legend(names) {
  return h("ul", { class: "legend" }, names.map((name) => h("li", {}, h("span", { class: `swatch s-${name}` }), name)));
}

function contextBlock(settled) {
  if (settled.status === "rejected") return errorBox(settled.reason);
  const block = settled.value;
  return h("div", {},
    h("p", { class: "muted" }, `${block.tokens} of ${block.max_tokens} tokens`),
    h("pre", { class: "context", id: "context-block" }, block.text || JSON.stringify(block.sections, null, 2)));
}
