// What model calls cost, as the CLI says it: "$0.0123", or "cost unknown (no price for
// model X)" when the price table has none for a model (see domain/cost.py); and the model
// that wrote a message, named as the run header names it.

import { t } from "./i18n.js";

export function costText(costUsd, unpricedModels) {
  if (costUsd === null || costUsd === undefined) {
    return t("cost unknown (no price for model {models})", { models: (unpricedModels || []).join(", ") || "?" });
  }
  if (costUsd >= 1) return `$${costUsd.toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 2 })}`;
  if (costUsd > 0 && costUsd < 0.00005) return "<$0.0001";
  return `$${costUsd.toFixed(4)}`;
}

// The share of the prompt read from the provider's cache; nothing when there was no
// prompt (a run before its first reply), rather than a figure of nothing.
export function rateText(rate) {
  return rate === null || rate === undefined ? "" : t("{n}% cache hits", { n: Math.round(rate * 100) });
}

// The offline model answers in the name of the model it stands in for: the page names it
// as what it is, here as in the header.
export function modelText(model, offline) {
  return offline ? t("offline model (scripted)") : model || t("model");
}

// What one model call cost, beside "Assistant" ("$0.0044 · claude-…", drawn by the style
// sheet from data-cost, so the message's text stays its own); tokens and the cache hit
// rate in its tooltip.
export function turnCostAttrs(cost, usage) {
  if (!cost) return {};
  const u = usage || {};
  const n = (value) => (value || 0).toLocaleString();
  const tokens = t("{input} in, {output} out, {read} cache read, {write} cache write tokens", {
    input: n(u.input_tokens), output: n(u.output_tokens), read: n(u.cache_read_tokens), write: n(u.cache_write_tokens),
  });
  const rate = rateText(cost.cache_hit_rate);
  return {
    dataset: { cost: `${costText(cost.cost_usd, [cost.model || "?"])} · ${modelText(cost.model, cost.offline)}` },
    title: rate ? `${tokens}; ${rate}` : tokens,
  };
}
