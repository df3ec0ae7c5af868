// The official AG-UI client, `@ag-ui/client`'s HttpAgent, on one duragent session,
// steered by the test through JSON lines: each line on stdin is a command, each answer a
// line on stdout. One agent lives for the whole script, so what the client keeps between
// runs (its messages, its pending interrupts) is the real client's.
//
//   node drive.mjs URL TOKEN THREAD_ID
//   {"op": "send", "text": "..."}         add a user message, run the agent
//   {"op": "resume", "status": "resolved", "payload": {...}}
//                                         answer every pending interrupt alike, run the agent
//
// Each answer: {"ok": true, "events": [...], "messages": [...], "pendingInterrupts": [...],
// "newMessages": [...]} (what `runAgent` resolved with: the messages the run added), or
// {"ok": false, "error": "...", ...} when the client refused or the run failed.
import { createInterface } from "node:readline";
import { randomUUID } from "node:crypto";
import { HttpAgent } from "@ag-ui/client";

const [url, token, threadId] = process.argv.slice(2);
const agent = new HttpAgent({ url, threadId, headers: { Authorization: `Bearer ${token}` } });

async function run(options) {
  const events = [];
  const state = () => ({
    events,
    messages: agent.messages,
    pendingInterrupts: agent.pendingInterrupts,
  });
  try {
    const { newMessages } = await agent.runAgent(options, {
      onEvent: ({ event }) => void events.push(event),
    });
    return { ok: true, ...state(), newMessages };
  } catch (err) {
    return { ok: false, error: String(err?.message ?? err), ...state() };
  }
}

async function answer(command) {
  if (command.op === "send") {
    agent.addMessage({ id: randomUUID(), role: "user", content: command.text });
    return run({});
  }
  if (command.op === "resume") {
    const resume = agent.pendingInterrupts.map((interrupt) => ({
      interruptId: interrupt.id,
      status: command.status,
      ...(command.payload === undefined ? {} : { payload: command.payload }),
    }));
    return run({ resume });
  }
  return { ok: false, error: `unknown op ${JSON.stringify(command.op)}` };
}

for await (const line of createInterface({ input: process.stdin })) {
  if (!line.trim()) continue;
  process.stdout.write(JSON.stringify(await answer(JSON.parse(line))) + "\n");
}
