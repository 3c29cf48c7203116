// The banks the key grants: memories by type, the newest, and how far the pipeline lags.

import { field, formatTime, h } from "../dom.js";
import { routeTo } from "../router.js";
import { get } from "../api.js";
import { bankIds, refreshBanks, session } from "../session.js";

export async function banksPage() {
  const [status] = await Promise.all([get("/v1/operations/status"), refreshBanks()]);
  session.status = status;
  const summaries = new Map(session.banks.map((b) => [b.bank_id, b]));
  const rows = bankIds().map((id) => bankRow(summaries.get(id) || { bank_id: id, counts: {} }));
  return h("section", {},
    h("h1", {}, "Banks"),
    h("div", { class: "tiles" },
      tile("Ingestion lag", status.lag ? status.lag.ingestion : undefined, "experience.raw records not yet indexed"),
      tile("Extraction lag", status.lag ? status.lag.extraction : undefined, "announcements not yet consolidated")),
    // The lag counts every tenant's records, so the API tells it to operators only.
    !status.lag && h("p", { class: "muted", id: "lag-note" }, "Pipeline lag spans every bank: only an operator key (or a keyless server) sees it."),
    rows.length
      ? h("div", { class: "scroll" }, h("table", { id: "banks" },
        h("thead", {}, h("tr", {}, ["Bank", "Memories", "By type", "Newest", ""].map((t) => h("th", { scope: "col" }, t)))),
        h("tbody", {}, rows)))
      : h("p", { class: "muted", id: "no-banks" }, "No banks yet."),
    status.banks === null && openForm());
}

function tile(label, value, hint) {
  // undefined: not shown to this key; null: the bus did not answer.
  const shown = value === undefined ? "—" : value === null ? "unknown" : String(value);
  return h("div", { class: "tile", title: hint },
    h("span", { class: "tile-value", "data-lag": label }, shown),
    h("span", { class: "tile-label" }, label));
}

function bankRow(bank) {
  const counts = Object.entries(bank.counts || {}).filter(([, n]) => n > 0);
  return h("tr", { dataset: { bank: bank.bank_id } },
    h("th", { scope: "row" }, h("a", { href: routeTo("memories", [bank.bank_id]) }, bank.bank_id)),
    h("td", { class: "num" }, bank.total === null || bank.total === undefined ? "—" : String(bank.total)),
    h("td", {}, counts.length
      ? h("ul", { class: "chips" }, counts.map(([type, n]) => h("li", { class: `chip t-${type}` }, `${type} ${n}`)))
      : "—"),
    h("td", {}, formatTime(bank.newest_at)),
    h("td", {}, h("a", { href: routeTo("playground", [bank.bank_id]) }, "Recall…")));
}

// An operator may look into any bank by name, listed or not.
function openForm() {
  const input = h("input", { name: "bank", required: true, pattern: "[A-Za-z0-9_][A-Za-z0-9_.:@+\\-]*", maxlength: 128 });
  return h("form", {
    class: "row",
    onsubmit: (event) => {
      event.preventDefault();
      session.extra.push(input.value);
      location.hash = routeTo("memories", [input.value]);
    },
  }, field("Open a bank by id", input), h("button", { type: "submit" }, "Open"));
}
