// Operations: readiness, the latest consolidation rounds, and dead letters to re-publish.

import { ApiError, bankPath, get, post, query } from "../api.js";
import { errorBox, formatTime, h } from "../dom.js";
import { routeTo } from "../router.js";
import { refreshBanks, session } from "../session.js";
import { bankPicker, chosenBank } from "./common.js";

const DEPENDENCIES = ["index", "archive", "bus"];

export async function operationsPage(route) {
  const [ready, rounds] = await Promise.all([
    readiness(), get("/v1/operations/consolidation-rounds?limit=20"), refreshBanks(),
  ]);
  const bank = chosenBank(route);
  return h("section", {},
    h("h1", {}, "Operations"),
    h("h2", {}, "Readiness"),
    h("ul", { class: "tiles", id: "readiness" }, DEPENDENCIES.map((name) => {
      const problem = ready.problems.find((p) => p.field === name);
      return h("li", { class: `tile ${problem ? "bad" : "good"}`, dataset: { dependency: name, state: problem ? "failing" : "ok" } },
        h("span", { class: "tile-value" }, problem ? "failing" : "ok"),
        h("span", { class: "tile-label" }, problem ? `${name}: ${problem.rule}` : name));
    })),
    h("h2", {}, "Consolidation rounds"),
    bank && consolidateForm(bank),
    roundsTable(rounds.rounds),
    h("h2", {}, "Dead letters"),
    await deadLetters(route));
}

async function readiness() {
  try {
    await get("/readyz");
    return { problems: [] };
  } catch (error) {
    if (error instanceof ApiError && error.status === 503) {
      return { problems: error.problems.length ? error.problems : DEPENDENCIES.map((field) => ({ field, rule: error.message })) };
    }
    throw error;
  }
}

function consolidateForm(bank) {
  const message = h("p", { role: "status", class: "muted" });
  const form = h("form", {
    class: "row",
    onsubmit: async (event) => {
      event.preventDefault();
      const chosen = form.querySelector("select").value;
      message.textContent = "Consolidating…";
      try {
        await post(bankPath(chosen, "/consolidate"));
        window.dispatchEvent(new HashChangeEvent("hashchange"));
      } catch (error) {
        message.textContent = error.message;
        message.className = "error";
      }
    },
  }, bankPicker(bank, (id) => routeTo("operations", [id])), h("button", { type: "submit" }, "Run a round now"));
  return h("div", {}, form, message);
}

function roundsTable(rounds) {
  if (!rounds.length) return h("p", { class: "muted", id: "no-rounds" }, "No rounds since this API process started.");
  const produced = (r) => [
    ["observations", r.observations], ["preferences", r.preferences], ["procedures", r.procedures], ["superseded", r.superseded],
  ].filter(([, ids]) => ids.length);
  return h("div", { class: "scroll" }, h("table", { id: "rounds" },
    h("thead", {}, h("tr", {}, ["Finished", "Bank", "Produced", "Reinforced", "Decayed", "Scanned", "Took"].map((t) => h("th", { scope: "col" }, t)))),
    h("tbody", {}, rounds.map(({ finished_at, report: r }) => h("tr", { dataset: { bank: r.bank_id } },
      h("td", {}, formatTime(finished_at)),
      h("td", {}, r.bank_id),
      h("td", {}, produced(r).length ? produced(r).map(([kind, ids]) => h("div", {}, `${kind}: `,
        ids.map((id, i) => [i ? ", " : "", h("a", { href: routeTo("memory", [r.bank_id, id]) }, id)]))) : "nothing new"),
      h("td", { class: "num" }, String(r.reinforced)),
      h("td", { class: "num" }, String(r.decayed)),
      h("td", { class: "num" }, `${r.scanned}${r.complete ? "" : "+"}`),
      h("td", { class: "num" }, `${r.took_ms} ms`))))));
}

async function deadLetters(route) {
  if (session.status && !session.status.operator) {
    return h("p", { class: "muted" }, "Dead letters hold every bank's data: they need a key that grants every bank (*).");
  }
  let page;
  try {
    page = await get("/v1/dead-letters" + query({ after: route.params.get("after"), limit: 50 }));
  } catch (error) {
    return errorBox(error);
  }
  if (!page.dead_letters.length) return h("p", { class: "muted", id: "no-dead-letters" }, "No dead letters.");
  return h("div", {},
    h("div", { class: "scroll" }, h("table", { id: "dead-letters" },
      h("thead", {}, h("tr", {}, ["Letter", "Time", "Kind", "Reason", "Bank", ""].map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", {}, page.dead_letters.map(letterRow)))),
    page.next && h("a", { href: routeTo("operations", route.args, { after: page.next }) }, "Next page"));
}

function letterRow(letter) {
  const result = h("span", { role: "status", class: "muted" });
  const button = h("button", {
    type: "button",
    class: "secondary",
    onclick: async () => {
      button.disabled = true;
      try {
        const retried = await post(`/v1/dead-letters/${encodeURIComponent(letter.id)}/retry`);
        result.textContent = `re-published to ${retried.republished_to}`;
      } catch (error) {
        result.textContent = error.message;
        result.className = "error";
        button.disabled = false;
      }
    },
  }, "Re-publish");
  return h("tr", { dataset: { letter: letter.id } },
    h("td", {}, h("code", {}, letter.id)),
    h("td", {}, formatTime(letter.time)),
    h("td", {}, letter.kind),
    h("td", { class: "reason" }, letter.reason),
    h("td", {}, letter.bank_id || "—"),
    h("td", {}, button, " ", result));
}
