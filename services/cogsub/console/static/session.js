// Who the console is talking as (the key's grants) and which banks it may show.

import { ApiError, get, query, storedKey } from "./api.js";

export const session = { status: null, banks: [], listing: false, extra: [] };

const MAX_BANK_PAGES = 20;

export async function loadSession() {
  session.status = await get("/v1/operations/status");
  session.banks = await bankSummaries();
  return session;
}

// GET /v1/banks when the server has it; else the key's own banks and those rounds named.
async function bankSummaries() {
  try {
    const found = [];
    let cursor = null;
    for (let page = 0; page < MAX_BANK_PAGES; page += 1) {
      const answer = await get("/v1/banks" + query({ cursor, limit: 100 }));
      found.push(...answer.banks);
      cursor = answer.next_cursor;
      if (!cursor) break;
    }
    session.listing = true;
    return found;
  } catch (error) {
    if (!(error instanceof ApiError) || (error.status !== 404 && error.status !== 405)) throw error;
  }
  session.listing = false;
  const ids = new Set(session.status.banks || []);
  if (session.status.banks === null) {
    const rounds = await get("/v1/operations/consolidation-rounds?limit=100");
    for (const r of rounds.rounds) ids.add(r.report.bank_id);
  }
  return [...ids].sort().map((bank_id) => ({ bank_id, total: null, counts: {}, newest_at: null }));
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
