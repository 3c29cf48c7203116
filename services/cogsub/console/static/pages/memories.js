// A bank's memories, newest first, filtered by type, tag and time, a page at a time.

import { bankPath, get, query } from "../api.js";
import { refreshBanks } from "../session.js";
import { errorBox, field, formatTime, h } from "../dom.js";
import { routeTo } from "../router.js";
import { bankPicker, checkedTypes, chosenBank, noBank, typeBoxes } from "./common.js";

const PAGE_SIZE = 25;

export async function memoriesPage(route) {
  await refreshBanks();
  const bank = chosenBank(route);
  if (!bank) return noBank();
  const p = route.params;
  const filters = {
    types: p.get("types") || "", tags: p.get("tags") || "", since: p.get("since") || "",
    until: p.get("until") || "", include_superseded: p.get("include_superseded") || "", cursor: p.get("cursor") || "",
  };
  const form = filterForm(bank, filters);
  return h("section", {},
    h("h1", {}, "Memories ", h("span", { class: "muted" }, bank)),
    bankPicker(bank, (id) => routeTo("memories", [id])),
    form,
    await listing(bank, filters),
    openById(bank));
}

function filterForm(bank, filters) {
  const since = h("input", { type: "datetime-local", name: "since", value: filters.since.replace(/Z$/, "") });
  const until = h("input", { type: "datetime-local", name: "until", value: filters.until.replace(/Z$/, "") });
  const tags = h("input", { name: "tags", value: filters.tags, placeholder: "a,b" });
  const superseded = h("input", { type: "checkbox", name: "include_superseded", checked: filters.include_superseded === "true" });
  const form = h("form", {
    class: "filters",
    onsubmit: (event) => {
      event.preventDefault();
      location.hash = routeTo("memories", [bank], {
        types: checkedTypes(form).join(","), tags: tags.value.trim(),
        since: since.value ? since.value + "Z" : "", until: until.value ? until.value + "Z" : "",
        include_superseded: superseded.checked ? "true" : "",
      });
    },
  },
  typeBoxes(filters.types ? filters.types.split(",") : []),
  h("div", { class: "row" }, field("Tags (any)", tags), field("Since (UTC)", since), field("Until (UTC)", until),
    h("label", { class: "check" }, superseded, "include superseded")),
  h("button", { type: "submit" }, "Filter"));
  return form;
}

async function listing(bank, filters) {
  let page;
  try {
    page = await get(bankPath(bank, "/memories") + query({ ...filters, limit: PAGE_SIZE }));
  } catch (error) {
    return errorBox(error);
  }
  if (!page.memories.length) return h("p", { class: "muted", id: "no-memories" }, "No memories match.");
  const rows = page.memories.map((m) => h("tr", { dataset: { memory: m.id } },
    h("td", {}, formatTime(m.timestamp)),
    h("td", {}, h("span", { class: `chip t-${m.fact_type}` }, m.fact_type || "—")),
    h("td", {}, h("a", { href: routeTo("memory", [bank, m.id]) }, firstLine(m.text))),
    h("td", {}, m.tags.join(", "))));
  return h("div", {},
    h("div", { class: "scroll" }, h("table", { id: "memories" },
      h("thead", {}, h("tr", {}, ["Time", "Type", "Text", "Tags"].map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", {}, rows))),
    h("div", { class: "row" },
      filters.cursor && h("a", { href: routeTo("memories", [bank], { ...filters, cursor: "" }) }, "First page"),
      page.next_cursor && h("a", { href: routeTo("memories", [bank], { ...filters, cursor: page.next_cursor }), rel: "next" }, "Next page")));
}

function firstLine(text) {
  const line = text.split("\n")[0];
  return line.length > 120 ? line.slice(0, 119) + "…" : line;
}

function openById(bank) {
  const input = h("input", { name: "memory_id", required: true });
  return h("form", {
    class: "row",
    onsubmit: (event) => {
      event.preventDefault();
      location.hash = routeTo("memory", [bank, input.value.trim()]);
    },
  }, field("Open a memory by id", input), h("button", { type: "submit" }, "Open"));
}
