// Every call the console makes goes to its own origin, with the key (if any) as the bearer.

const KEY_ITEM = "cogsub.console.key";

export class ApiError extends Error {
  constructor(status, type, message, problems = []) {
    super(message);
    this.status = status;
    this.type = type;
    this.problems = problems;
  }
}

export function storedKey() {
  return sessionStorage.getItem(KEY_ITEM);
}

export function storeKey(key) {
  if (key) sessionStorage.setItem(KEY_ITEM, key);
  else sessionStorage.removeItem(KEY_ITEM);
}

export async function call(method, path, body) {
  const headers = { Accept: "application/json" };
  const key = storedKey();
  if (key) headers.Authorization = `Bearer ${key}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: "omit",
    cache: "no-store",
  });
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!response.ok) {
    const error = (data && data.error) || {};
    const message = error.message || `${response.status} ${response.statusText}`;
    throw new ApiError(response.status, error.type || "http", message, error.problems || []);
  }
  return data;
}

export const get = (path) => call("GET", path);
export const post = (path, body) => call("POST", path, body);

export function bankPath(bankId, rest = "") {
  return `/v1/banks/${encodeURIComponent(bankId)}${rest}`;
}

export function query(params) {
  const pairs = Object.entries(params).filter(([, v]) => v !== null && v !== undefined && v !== "");
  return pairs.length ? "?" + new URLSearchParams(pairs).toString() : "";
}
