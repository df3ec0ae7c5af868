// Talking to the API: every request carries the bearer token in its Authorization
// header, never in a URL. The event stream is read with fetch() for the same reason
// (EventSource cannot send headers), and resumes from the last event it delivered.

import { t } from "./i18n.js";

const TOKEN_KEY = "duragent.token";
let onSignedOut = () => {};

export function savedToken() {
  return sessionStorage.getItem(TOKEN_KEY) || localStorage.getItem(TOKEN_KEY);
}

export function saveToken(token, remember) {
  forgetToken();
  (remember ? localStorage : sessionStorage).setItem(TOKEN_KEY, token);
}

export function forgetToken() {
  sessionStorage.removeItem(TOKEN_KEY);
  localStorage.removeItem(TOKEN_KEY);
}

export function whenSignedOut(callback) {
  onSignedOut = callback;
}

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }

  // No answer came at all (status 0): it no longer holds once the server answers again.
  get unreachable() {
    return this.status === 0;
  }
}

const UNREACHABLE = "The page cannot reach the server: it or the network is down. "
  + "Try again once the connection is back (the badge above says live).";

function detailOf(status, body) {
  const detail = body && body.detail;
  if (typeof detail === "string") return detail;
  if (Array.isArray(detail)) {
    // FastAPI's validation errors: say which field broke which rule.
    return detail.map((d) => `${(d.loc || []).slice(1).join(".") || "request"}: ${d.msg}`).join("; ");
  }
  return `the server answered ${status}`;
}

export async function api(path, { method = "GET", body, signal, token } = {}) {
  const headers = { Authorization: `Bearer ${token || savedToken() || ""}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
      cache: "no-store",
    });
  } catch (error) {
    if (signal && signal.aborted) throw error;
    // The browser says only "Failed to fetch": no answer came, the server or the network is down.
    throw new ApiError(0, t(UNREACHABLE));
  }
  if (response.status === 401 && !token) onSignedOut();
  if (!response.ok) {
    const parsed = await response.json().catch(() => null);
    throw new ApiError(response.status, detailOf(response.status, parsed));
  }
  return response.status === 204 ? null : response.json();
}

const sleep = (ms, signal) =>
  new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => { clearTimeout(timer); resolve(); }, { once: true });
  });

// A connection that delivered nothing (not even the server's 15 s keep-alive) this long
// is presumed dead: the network can drop without closing it.
const SILENCE_MS = 40000;

export class EventStream {
  // `cursor()` says where to resume: the seq of the last event the page applied.
  constructor(sessionId, { cursor, onEvent, onState }) {
    this.sessionId = sessionId;
    this.cursor = cursor;
    this.onEvent = onEvent;
    this.onState = onState;
    this.controller = new AbortController();
  }

  start() {
    this.loop();
    return this;
  }

  stop() {
    this.controller.abort();
  }

  async loop() {
    const signal = this.controller.signal;
    let backoff = 250;
    while (!signal.aborted) {
      try {
        const headers = {
          Authorization: `Bearer ${savedToken() || ""}`,
          Accept: "text/event-stream",
          "Last-Event-ID": String(this.cursor()),
        };
        const url = `/api/sessions/${encodeURIComponent(this.sessionId)}/events`;
        const response = await fetch(url, { headers, signal, cache: "no-store" });
        if (response.status === 401) { onSignedOut(); return; }
        if (!response.ok) throw new ApiError(response.status, "event stream refused");
        this.onState("live");
        backoff = 250;
        await this.read(response.body, signal);
      } catch (error) {
        if (signal.aborted) return;
      }
      if (signal.aborted) return;
      this.onState("reconnecting");
      await sleep(backoff, signal);
      backoff = Math.min(backoff * 2, 4000);
    }
  }

  async read(body, signal) {
    const reader = body.pipeThrough(new TextDecoderStream()).getReader();
    let watchdog = null;
    const arm = () => {
      clearTimeout(watchdog);
      watchdog = setTimeout(() => reader.cancel().catch(() => {}), SILENCE_MS);
    };
    let buffer = "";
    let data = [];
    try {
      arm();
      for (;;) {
        const { value, done } = await reader.read();
        if (done || signal.aborted) return;
        arm();
        buffer += value;
        const lines = buffer.split(/\r\n|\r|\n/);
        buffer = lines.pop();
        for (const line of lines) {
          if (line === "") {
            // A blank line ends an event (Server-Sent Events framing).
            if (data.length) this.onEvent(JSON.parse(data.join("\n")));
            data = [];
          } else if (line.startsWith("data:")) {
            data.push(line.slice(5).replace(/^ /, ""));
          }
          // `id:` and `event:` repeat what the data holds (seq, type); `:` is a keep-alive.
        }
      }
    } finally {
      clearTimeout(watchdog);
    }
  }
}
