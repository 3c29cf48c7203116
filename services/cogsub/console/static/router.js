// Hash routes: "#/memory/bank/id?x=1" ↔ { page: "memory", args: ["bank", "id"], params }.

export const PAGE_NAMES = ["banks", "memories", "memory", "playground", "operations", "keys"];

export function parseRoute(hash) {
  const [path, search = ""] = hash.replace(/^#\/?/, "").split("?");
  const [page, ...args] = path.split("/").filter(Boolean).map(decodeURIComponent);
  return { page: PAGE_NAMES.includes(page) ? page : "banks", args, params: new URLSearchParams(search) };
}

export function routeTo(page, args = [], params = {}) {
  const path = [page, ...args.map(encodeURIComponent)].join("/");
  const search = new URLSearchParams(
    Object.entries(params).filter(([, v]) => v !== null && v !== undefined && v !== ""),
  ).toString();
  return `#/${path}${search ? "?" + search : ""}`;
}
