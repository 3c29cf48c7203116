// Each signal's weighted part of a recall score: weight × signal, summing to `final`.

export const SIGNAL_ORDER = [
  "relevance", "importance", "recency", "reward", "reinforcement", "novelty", "type_boost", "rerank",
];

export function signalShares(explain) {
  const weights = explain.weights || {};
  const names = Object.keys(weights).sort(
    (a, b) => rankOf(a) - rankOf(b) || a.localeCompare(b),
  );
  return names.map((name) => {
    const value = typeof explain[name] === "number" ? explain[name] : 0;
    const weight = weights[name];
    return { name, weight, value, contribution: weight * value };
  });
}

function rankOf(name) {
  const at = SIGNAL_ORDER.indexOf(name);
  return at === -1 ? SIGNAL_ORDER.length : at;
}

// Percent widths of each part of a bar whose whole length is final / scale of the track.
export function barWidths(shares, scale) {
  const positive = shares.map((s) => Math.max(0, s.contribution));
  return positive.map((part) => (scale > 0 ? (100 * part) / scale : 0));
}
