/**
 * What the OpenAI-compatible surface costs: item create and list latency on
 * one loom serve (SQLite, over HTTP) three ways — the official `openai` SDK
 * against /openai/v1 (conversations.items.create / .list), plain fetch
 * against /openai/v1 (the same requests without the SDK's own work), and
 * plain fetch against loom's native API (POST and GET
 * /v1/threads/{id}/messages). Each operation alternates between the three
 * so that the machine's noise falls on all of them; prints the medians as a
 * markdown table with the compatible surface's overhead over native.
 *
 *     npx tsx bench/bench-openai.ts [--samples 300] [--bytes 200]
 *
 * A create is one user message of --bytes of text; a list reads the newest
 * 20 (the SDK's default page) and the newest 100 of a thread that holds
 * every message created so far plus 500 more. Not run by the tests: the
 * machine is shared.
 */
import { rmSync } from "node:fs";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import OpenAI from "openai";
import { loomBinary, startLoom, tempDir } from "../test/servers.js";

const { values: args } = parseArgs({
  options: {
    samples: { type: "string", default: "300" },
    bytes: { type: "string", default: "200" },
  },
});
const samples = Number(args.samples);
const text = "x".repeat(Number(args.bytes));
const KEY = "bench-key-0123456789";

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

async function timed(f: () => Promise<unknown>): Promise<number> {
  const t = performance.now();
  await f();
  return performance.now() - t;
}

async function call(url: string, method: string, body?: unknown): Promise<unknown> {
  const res = await fetch(url, {
    method,
    headers: { authorization: `Bearer ${KEY}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const out = await res.text();
  if (!res.ok) throw new Error(`${method} ${url}: ${res.status} ${out}`);
  return JSON.parse(out);
}

/** Way is one way to reach the items of a thread of its own. */
interface Way {
  name: string;
  create(): Promise<unknown>;
  list(limit: number): Promise<unknown>;
}

async function main(): Promise<void> {
  const dir = tempDir("loom-bench-openai-");
  const server = await startLoom(loomBinary(dir), `sqlite://${join(dir, "loom.db")}`, { bench: KEY });
  try {
    const base = `${server.url}/openai/v1`;
    const client = new OpenAI({ baseURL: base, apiKey: KEY, maxRetries: 0 });
    const filler = (n: number) => Array.from({ length: n }, (_, i) => ({ role: "user" as const, content: `${i} ${text}` }));

    const sdkConv = await client.conversations.create();
    const fetchConv = (await call(`${base}/conversations`, "POST", {})) as { id: string };
    const nativeThread = (await call(`${server.url}/v1/threads`, "POST", {})) as { id: string };
    // 500 messages to start with, so that a list reads a thread of some length.
    for (let i = 0; i < 5; i++) {
      await client.conversations.items.create(sdkConv.id, { items: filler(100) });
      await call(`${base}/conversations/${fetchConv.id}/items`, "POST", { items: filler(100) });
      await call(`${server.url}/v1/threads/${nativeThread.id}/messages`, "POST", {
        messages: filler(100).map((m) => ({ role: "user", contents: [{ type: "text", text: m.content }] })),
      });
    }

    const ways: Way[] = [
      {
        name: "openai SDK → /openai/v1",
        create: () => client.conversations.items.create(sdkConv.id, { items: [{ role: "user", content: text }] }),
        list: (limit) => client.conversations.items.list(sdkConv.id, { limit }),
      },
      {
        name: "fetch → /openai/v1",
        create: () => call(`${base}/conversations/${fetchConv.id}/items`, "POST", { items: [{ role: "user", content: text }] }),
        list: (limit) => call(`${base}/conversations/${fetchConv.id}/items?limit=${limit}`, "GET"),
      },
      {
        name: "fetch → native /v1",
        create: () => call(`${server.url}/v1/threads/${nativeThread.id}/messages`, "POST", { messages: [{ role: "user", contents: [{ type: "text", text }] }] }),
        list: (limit) => call(`${server.url}/v1/threads/${nativeThread.id}/messages?limit=${limit}`, "GET"),
      },
    ];

    // Warm up each way (connections, JIT, the store's caches).
    for (const w of ways) for (let i = 0; i < 20; i++) await w.list(20);

    const ops: Array<{ name: string; run: (w: Way) => Promise<unknown> }> = [
      { name: "create 1 item", run: (w) => w.create() },
      { name: "list 20 newest", run: (w) => w.list(20) },
      { name: "list 100 newest", run: (w) => w.list(100) },
    ];
    const results = new Map<string, number[]>();
    for (const op of ops) {
      for (let i = 0; i < samples; i++) {
        for (const w of ways) {
          const key = `${op.name}\u0000${w.name}`;
          const xs = results.get(key) ?? [];
          xs.push(await timed(() => op.run(w)));
          results.set(key, xs);
        }
      }
    }

    console.log(`loom serve on SQLite, ${samples} samples per cell, ${text.length}-byte messages; medians in ms.\n`);
    console.log(`| operation | ${ways.map((w) => w.name).join(" | ")} | SDK vs native | fetch /openai/v1 vs native |`);
    console.log(`|---|${ways.map(() => "---:").join("|")}|---:|---:|`);
    for (const op of ops) {
      const m = ways.map((w) => median(results.get(`${op.name}\u0000${w.name}`)!));
      const pct = (a: number, b: number) => `${a >= b ? "+" : ""}${(((a - b) / b) * 100).toFixed(0)}%`;
      console.log(`| ${op.name} | ${m.map((x) => x.toFixed(2)).join(" | ")} | ${pct(m[0]!, m[2]!)} | ${pct(m[1]!, m[2]!)} |`);
    }
  } finally {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
