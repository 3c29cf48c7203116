// The console's shell: a hash router over the pages, the session first.

import { ApiError } from "./api.js";
import { errorBox, h } from "./dom.js";
import { loadSession, session, whoText } from "./session.js";
import { parseRoute, routeTo } from "./router.js";
import { banksPage } from "./pages/banks.js";
import { keysPage } from "./pages/keys.js";
import { memoriesPage } from "./pages/memories.js";
import { memoryPage } from "./pages/memory.js";
import { operationsPage } from "./pages/operations.js";
import { playgroundPage } from "./pages/playground.js";

const PAGES = {
  banks: banksPage,
  memories: memoriesPage,
  memory: memoryPage,
  playground: playgroundPage,
  operations: operationsPage,
  keys: keysPage,
};

let rendering = 0;

async function render() {
  const turn = (rendering += 1);
  const route = parseRoute(location.hash);
  const main = document.getElementById("main");
  for (const link of document.querySelectorAll("nav a")) {
    const current = link.dataset.page === route.page || (route.page === "memory" && link.dataset.page === "memories");
    if (current) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  let content;
  try {
    if (!session.status && route.page !== "keys") await loadSession();
    content = await PAGES[route.page](route);
  } catch (error) {
    if (error instanceof ApiError && error.status === 401 && route.page !== "keys") {
      location.hash = routeTo("keys", [], { reason: error.message });
      return;
    }
    content = h("section", {}, h("h1", {}, "Something went wrong"), errorBox(error));
  }
  if (turn !== rendering) return; // a newer navigation already drew its page
  document.getElementById("who").textContent = whoText();
  main.replaceChildren(content);
  document.body.dataset.page = route.page;
  document.body.dataset.ready = String(turn);
  const heading = main.querySelector("h1");
  if (heading) {
    heading.tabIndex = -1;
    heading.focus({ preventScroll: true });
  }
}

window.addEventListener("hashchange", render);
render();
