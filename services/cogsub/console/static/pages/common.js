// Pieces several pages share: the bank picker and the memory types.

import { field, h } from "../dom.js";
import { bankIds } from "../session.js";

export const FACT_TYPES = [
  "world", "experience", "observation", "procedure", "reasoning", "preference", "correction", "profile",
];

export function chosenBank(route) {
  return route.args[0] || bankIds()[0] || null;
}

// A select of the banks the key grants; picking one goes to that bank's page.
export function bankPicker(current, hrefOf) {
  const ids = bankIds();
  if (current && !ids.includes(current)) ids.push(current);
  const select = h("select", {
    name: "bank",
    onchange: (event) => { location.hash = hrefOf(event.target.value); },
  }, ids.map((id) => h("option", { value: id, selected: id === current }, id)));
  return field("Bank", select);
}

export function typeBoxes(chosen, name = "types") {
  return h("fieldset", { class: "types" }, h("legend", {}, "Types"),
    FACT_TYPES.map((type) => h("label", { class: "check" },
      h("input", { type: "checkbox", name, value: type, checked: chosen.includes(type) }), type)));
}

export function checkedTypes(form, name = "types") {
  return [...form.querySelectorAll(`input[name="${name}"]:checked`)].map((box) => box.value);
}

export function noBank() {
  return h("section", {}, h("h1", {}, "No bank"), h("p", { class: "muted" }, "Your key grants no bank this console knows of yet."));
}
