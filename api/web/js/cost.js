// What model calls cost, as the CLI says it: "$0.0123", or "cost unknown (no price for
// model X)" when the price table has none for a model (see domain/cost.py).

export function costText(costUsd, unpricedModels) {
  if (costUsd === null || costUsd === undefined) {
    return `cost unknown (no price for model ${(unpricedModels || []).join(", ") || "?"})`;
  }
  if (costUsd >= 1) return `$${costUsd.toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 2 })}`;
  if (costUsd > 0 && costUsd < 0.00005) return "<$0.0001";
  return `$${costUsd.toFixed(4)}`;
}

export function rateText(rate) {
  return rate === null || rate === undefined ? "no prompt tokens" : `${Math.round(rate * 100)}% cache hits`;
}
