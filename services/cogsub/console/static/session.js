// Who the console is talking as (the key's grants) and which banks it may show.

import { get, query, storedKey } from "./api.js";

export const session = { status: null, banks: [], extra: [] };

export async function loadSession() {
  session.status = await get("/v1/operations/status");
  return session;
}

// Banks and their counts change while a tab is open: pages that list or pick banks call this.
export async function refreshBanks() {
  const found = [];
  let cursor = null;
  do {
    const answer = await get("/v1/banks" + query({ cursor, limit: 100 }));
    found.push(...answer.banks);
    cursor = answer.next_cursor;
  } while (cursor);
  session.banks = found;
  return found;
}

export function bankIds() {
  const ids = new Set(session.banks.map((b) => b.bank_id));
  // A bank opened by name (an operator's choice) joins the list for this tab.
  if (session.status && session.status.banks === null) for (const id of session.extra) ids.add(id);
  return [...ids].sort();
}

export function whoText() {
  const status = session.status;
  if (!status) return storedKey() ? "key set" : "";
  if (!status.keys_required) return "no keys · loopback";
  return status.operator ? "key · every bank" : `key · ${status.banks.length} bank(s)`;
}
