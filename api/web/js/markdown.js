// A small markdown renderer for model output that builds DOM nodes directly.
//
// Safety comes from the construction, not from filtering: text only ever becomes text
// nodes, the only elements made are the ones listed here, and the only attributes set are
// a checked href (http, https or relative), rel and target on links. Raw HTML in the input
// is shown as the characters it is. Images are shown as links, never loaded.
//
// Supported: paragraphs (single newlines kept as line breaks), # headings, fenced code,
// block quotes, - / 1. lists (nested by indentation), tables, ---, `code`, **bold**,
// *italic*, ~~strike~~, [links](url), <autolinks> and bare http(s) URLs.

import { el } from "./dom.js";

export function renderMarkdown(text) {
  const fragment = document.createDocumentFragment();
  for (const node of blocks(String(text).replace(/\r\n?/g, "\n").split("\n"))) {
    fragment.append(node);
  }
  return fragment;
}

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)/;
const HEADING = /^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const RULE = /^ {0,3}([-*_])(\s*\1){2,}\s*$/;
const QUOTE = /^ {0,3}> ?/;
const ITEM = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/;
const TABLE_SEPARATOR = /^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/;

function blocks(lines) {
  const out = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (!line.trim()) { i++; continue; }
    let match;
    if ((match = FENCE.exec(line))) {
      const fence = match[1];
      const body = [];
      i++;
      while (i < lines.length && !lines[i].trim().startsWith(fence)) body.push(lines[i++]);
      i++;
      const code = el("code", {}, body.join("\n"));
      if (match[2]) code.dataset.lang = match[2];
      out.push(el("pre", {}, code));
    } else if ((match = HEADING.exec(line))) {
      out.push(el(`h${Math.min(match[1].length + 2, 6)}`, {}, inline(match[2])));
      i++;
    } else if (RULE.test(line)) {
      out.push(el("hr"));
      i++;
    } else if (QUOTE.test(line)) {
      const body = [];
      while (i < lines.length && QUOTE.test(lines[i])) body.push(lines[i++].replace(QUOTE, ""));
      out.push(el("blockquote", {}, blocks(body)));
    } else if (ITEM.test(line)) {
      i = list(lines, i, out);
    } else if (line.includes("|") && i + 1 < lines.length && TABLE_SEPARATOR.test(lines[i + 1])) {
      i = table(lines, i, out);
    } else {
      const body = [];
      while (i < lines.length && lines[i].trim() && !startsBlock(lines, i)) body.push(lines[i++]);
      if (!body.length) body.push(lines[i++]);
      out.push(el("p", {}, lineBreaks(body)));
    }
  }
  return out;
}

function startsBlock(lines, i) {
  const line = lines[i];
  return (
    FENCE.test(line) || HEADING.test(line) || RULE.test(line) || QUOTE.test(line) ||
    ITEM.test(line) ||
    (line.includes("|") && i + 1 < lines.length && TABLE_SEPARATOR.test(lines[i + 1]))
  );
}

function lineBreaks(lines) {
  const nodes = [];
  lines.forEach((line, index) => {
    if (index) nodes.push(el("br"));
    nodes.push(...inline(line.trim()));
  });
  return nodes;
}

function list(lines, start, out) {
  const first = ITEM.exec(lines[start]);
  const indent = first[1].length;
  const ordered = /\d/.test(first[2]);
  const node = el(ordered ? "ol" : "ul");
  if (ordered && parseInt(first[2], 10) !== 1) node.setAttribute("start", String(parseInt(first[2], 10)));
  let i = start;
  while (i < lines.length) {
    const match = ITEM.exec(lines[i]);
    if (!match || match[1].length !== indent || /\d/.test(match[2]) !== ordered) break;
    const body = [match[3]];
    i++;
    // The item goes on while lines are indented deeper than its marker (or blank and
    // followed by such a line): nested lists and continued paragraphs.
    while (i < lines.length) {
      const next = lines[i];
      const deeper = next.trim() && next.length - next.trimStart().length > indent;
      const blankThenDeeper =
        !next.trim() && i + 1 < lines.length && lines[i + 1].trim() &&
        lines[i + 1].length - lines[i + 1].trimStart().length > indent;
      if (!deeper && !blankThenDeeper) break;
      body.push(next.slice(Math.min(next.length - next.trimStart().length, indent + 2)));
      i++;
    }
    const inner = blocks(body);
    const tight = inner.length && inner[0].tagName === "P" ? [...inner[0].childNodes, ...inner.slice(1)] : inner;
    node.append(el("li", {}, tight));
    while (i < lines.length && !lines[i].trim() && i + 1 < lines.length && ITEM.test(lines[i + 1]) &&
           ITEM.exec(lines[i + 1])[1].length === indent) i++;
  }
  out.push(node);
  return i;
}

function cells(line) {
  let row = line.trim();
  if (row.startsWith("|")) row = row.slice(1);
  if (row.endsWith("|") && !row.endsWith("\\|")) row = row.slice(0, -1);
  return row.split(/(?<!\\)\|/).map((cell) => cell.trim().replace(/\\\|/g, "|"));
}

function table(lines, start, out) {
  const head = cells(lines[start]);
  let i = start + 2;
  const rows = [];
  while (i < lines.length && lines[i].includes("|") && lines[i].trim()) rows.push(cells(lines[i++]));
  out.push(
    el("table", {},
      el("thead", {}, el("tr", {}, head.map((cell) => el("th", {}, inline(cell))))),
      el("tbody", {}, rows.map((row) => el("tr", {}, head.map((_, c) => el("td", {}, inline(row[c] || "")))))),
    ),
  );
  return i;
}

// Links: http(s) or relative only. Browsers drop tabs and newlines inside URLs, and
// ignore leading control characters, so those are removed before the scheme is read
// ("java\nscript:" is javascript:).
export function safeHref(url) {
  const cleaned = String(url).replace(/[\u0000-\u0020\u007f-\u009f]/g, "");
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(cleaned);
  if (scheme) return /^https?$/i.test(scheme[1]) ? cleaned : null;
  return cleaned.startsWith("//") ? null : cleaned;
}

function link(label, url) {
  const href = safeHref(url);
  if (href === null) return el("span", { class: "unsafe-link" }, label);
  return el("a", { href, rel: "noopener noreferrer nofollow", target: "_blank" }, label);
}

const ESCAPABLE = "\\`*_{}[]()#+-.!~|<>";
const BARE_URL = /^https?:\/\/[^\s<>"]+/i;

function inline(text) {
  const out = [];
  let buffer = "";
  const flush = () => {
    if (buffer) out.push(document.createTextNode(buffer));
    buffer = "";
  };
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    const rest = text.slice(i);
    if (c === "\\" && ESCAPABLE.includes(text[i + 1] || "\0")) {
      buffer += text[i + 1];
      i += 2;
      continue;
    }
    if (c === "`") {
      const ticks = /^`+/.exec(rest)[0];
      const end = text.indexOf(ticks, i + ticks.length);
      if (end > i) {
        flush();
        out.push(el("code", {}, text.slice(i + ticks.length, end).trim() || " "));
        i = end + ticks.length;
        continue;
      }
      buffer += ticks;
      i += ticks.length;
      continue;
    }
    const emphasis = emphasisAt(text, i);
    if (emphasis) {
      flush();
      out.push(el(emphasis.tag, {}, inline(emphasis.inner)));
      i = emphasis.end;
      continue;
    }
    if (c === "[" || (c === "!" && text[i + 1] === "[")) {
      const found = linkAt(text, c === "!" ? i + 1 : i);
      if (found) {
        flush();
        const label = c === "!" ? `image: ${found.label || found.url}` : inline(found.label);
        out.push(link(label, found.url));
        i = found.end;
        continue;
      }
    }
    if (c === "<") {
      const auto = /^<(https?:\/\/[^\s<>]+)>/i.exec(rest);
      if (auto) {
        flush();
        out.push(link(auto[1], auto[1]));
        i += auto[0].length;
        continue;
      }
    }
    if ((c === "h" || c === "H") && (i === 0 || /[\s(]/.test(text[i - 1]))) {
      const bare = BARE_URL.exec(rest);
      if (bare) {
        const url = bare[0].replace(/[.,;:!?)\]]+$/, "");
        flush();
        out.push(link(url, url));
        i += url.length;
        continue;
      }
    }
    buffer += c;
    i++;
  }
  flush();
  return out;
}

const WORD = /[\p{L}\p{N}]/u;

function emphasisAt(text, i) {
  for (const [marker, tag] of [["**", "strong"], ["__", "strong"], ["~~", "del"], ["*", "em"], ["_", "em"]]) {
    if (!text.startsWith(marker, i)) continue;
    const after = text[i + marker.length];
    if (!after || /\s/.test(after)) continue;
    // Underscores inside words (snake_case) are not emphasis.
    if (marker[0] === "_" && i > 0 && WORD.test(text[i - 1])) continue;
    let end = text.indexOf(marker, i + marker.length);
    while (end !== -1) {
      const before = text[end - 1];
      const next = text[end + marker.length];
      const single = marker.length === 1 && (next === marker || text[end - 1] === marker);
      const intraword = marker[0] === "_" && next && WORD.test(next);
      if (!/\s/.test(before) && !single && !intraword && end > i + marker.length) break;
      end = text.indexOf(marker, end + 1);
    }
    if (end === -1) continue;
    return { tag, inner: text.slice(i + marker.length, end), end: end + marker.length };
  }
  return null;
}

function linkAt(text, i) {
  let depth = 0;
  let close = -1;
  for (let j = i; j < text.length; j++) {
    if (text[j] === "\\") { j++; continue; }
    if (text[j] === "[") depth++;
    if (text[j] === "]" && --depth === 0) { close = j; break; }
  }
  if (close === -1 || text[close + 1] !== "(") return null;
  const target = /^\(\s*<?([^\s()<>]*(?:\([^\s()]*\)[^\s()<>]*)*)>?(?:\s+"[^"]*")?\s*\)/.exec(text.slice(close + 1));
  if (!target) return null;
  return { label: text.slice(i + 1, close), url: target[1], end: close + 1 + target[0].length };
}
