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
  return t("the server answered {status}", { status });
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

// Resolves once the browser says it is online again (or `signal` aborts).
const online = (signal) =>
  new Promise((resolve) => {
    if (navigator.onLine || signal.aborted) { resolve(); return; }
    const done = () => {
      window.removeEventListener("online", done);
      signal.removeEventListener("abort", done);
      resolve();
    };
    window.addEventListener("online", done);
    signal.addEventListener("abort", done);
  });

export class EventStream {
  // `cursor()` says where to resume: the seq of the last event the page applied.
  // `onState` hears "live", "reconnecting", or "offline" (the browser has no network: the
  // stream waits for it to be back, then connects at once).
  constructor(sessionId, { cursor, onEvent, onState }) {
    this.sessionId = sessionId;
    this.cursor = cursor;
    this.onEvent = onEvent;
    this.onState = onState;
    this.controller = new AbortController();
    this.connection = null; // the open connection's controller
    // A browser that goes offline may leave an open stream looking alive until the
    // silence watchdog gives up: the browser's word ends it now. Back online, a stream
    // connects again at once (not after its backoff), so the badge and the errors that
    // only said "no connection" are right again.
    this.onOffline = () => { if (this.connection) this.connection.abort(); };
    this.onOnline = () => { if (this.connection) this.connection.abort(); };
  }

  start() {
    window.addEventListener("offline", this.onOffline);
    window.addEventListener("online", this.onOnline);
    this.loop();
    return this;
  }

  stop() {
    window.removeEventListener("offline", this.onOffline);
    window.removeEventListener("online", this.onOnline);
    this.controller.abort();
  }

  async loop() {
    const signal = this.controller.signal;
    let backoff = 250;
    while (!signal.aborted) {
      if (!navigator.onLine) {
        this.onState("offline");
        await online(signal);
        backoff = 250;
        continue;
      }
      const connection = new AbortController();
      const stop = () => connection.abort();
      signal.addEventListener("abort", stop, { once: true });
      this.connection = connection;
      try {
        const headers = {
          Authorization: `Bearer ${savedToken() || ""}`,
          Accept: "text/event-stream",
          "Last-Event-ID": String(this.cursor()),
        };
        const url = `/api/sessions/${encodeURIComponent(this.sessionId)}/events`;
        const response = await fetch(url, { headers, signal: connection.signal, cache: "no-store" });
        if (response.status === 401) { onSignedOut(); return; }
        if (!response.ok) throw new ApiError(response.status, t("the server answered {status}", { status: response.status }));
        this.onState("live");
        backoff = 250;
        await this.read(response.body, connection.signal);
      } catch (error) {
        if (signal.aborted) return;
      } finally {
        signal.removeEventListener("abort", stop);
        this.connection = null;
      }
      if (signal.aborted) return;
      if (!navigator.onLine) continue; // said at the top, waited for there
      if (connection.signal.aborted) continue; // back online: at once
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
