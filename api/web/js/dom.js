// Building the page from DOM nodes, never from HTML strings: every piece of text becomes
// a text node, so nothing a model or a user writes can turn into markup or script.

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "dataset") Object.assign(node.dataset, value);
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  append(node, children);
  return node;
}

export function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function textOf(content) {
  return (content || [])
    .filter((block) => block.type === "text")
    .map((block) => block.text)
    .join("\n");
}

export function clockTime(ms) {
  return new Date(ms).toLocaleTimeString([], { hour12: false });
}

export function duration(ms) {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)} s`;
  const m = Math.floor(s / 60);
  return `${m} min ${Math.round(s - m * 60)} s`;
}

export function shortId(id) {
  return id ? id.slice(0, 8) : "";
}
