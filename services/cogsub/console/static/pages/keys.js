// Asks for an API key when the server requires one; the key lives in this tab only.

import { storeKey, storedKey } from "../api.js";
import { field, h } from "../dom.js";
import { loadSession, session } from "../session.js";

export async function keysPage(route) {
  const reason = route.params.get("reason");
  const input = h("input", { type: "password", name: "key", autocomplete: "off", required: true, spellcheck: "false" });
  const message = h("p", { role: "status", class: "muted" });
  const form = h("form", { class: "stack", onsubmit: (event) => submit(event, input, message) },
    field("API key", input, "Sent as the bearer header; kept in this tab's session storage only."),
    h("div", { class: "row" },
      h("button", { type: "submit" }, "Use this key"),
      storedKey() && h("button", { type: "button", class: "secondary", onclick: forget }, "Forget the key")));
  return h("section", {},
    h("h1", {}, "API key"),
    reason && h("p", { class: "error", role: "alert" }, reason),
    h("p", {}, storedKey() ? "A key is set for this tab." : "No key is set: the console calls the API as a loopback caller."),
    form, message);
}

async function submit(event, input, message) {
  event.preventDefault();
  storeKey(input.value.trim());
  try {
    session.status = null;
    await loadSession();
    location.hash = "#/banks";
  } catch (error) {
    storeKey(null);
    message.textContent = `Refused: ${error.message}`;
    message.className = "error";
  }
}

// Drawn again from scratch, so neither the page nor the header still speaks for the old key.
function forget() {
  storeKey(null);
  session.status = null;
  session.banks = [];
  window.dispatchEvent(new HashChangeEvent("hashchange"));
}
