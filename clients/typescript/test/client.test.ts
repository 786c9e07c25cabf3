/**
 * The client's edges against a real loom serve: LoomError for each way a
 * call fails, one HTTP round trip per checkpointer call while a real graph
 * runs, and the thread operations loom does natively (copy, prune, delete
 * by run).
 */
import { createServer } from "node:http";
import { once } from "node:events";
import type { AddressInfo } from "node:net";
import type { RunnableConfig } from "@langchain/core/runnables";
import { emptyCheckpoint, uuid6, type Checkpoint, type CheckpointMetadata, type CheckpointTuple } from "@langchain/langgraph-checkpoint";
import { describe, expect, inject, it } from "vitest";
import { LoomError, LoomSaver } from "../src/index.js";
import { buildGraph, question } from "./graph.js";

const { stores, keys } = inject("loom");

function spy() {
  const requests: string[] = [];
  const statuses: number[] = [];
  const f: typeof fetch = async (input, init) => {
    const i = requests.push(`${init?.method ?? "GET"} ${new URL(String(input)).pathname}`) - 1;
    const res = await fetch(input, init);
    statuses[i] = res.status;
    return res;
  };
  return { requests, statuses, fetch: f };
}

async function rejection(p: Promise<unknown>): Promise<LoomError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(LoomError);
  return err as LoomError;
}

async function all(saver: LoomSaver, config: RunnableConfig): Promise<CheckpointTuple[]> {
  const out: CheckpointTuple[] = [];
  for await (const t of saver.list(config)) out.push(t);
  return out;
}

function checkpoint(values: Record<string, unknown> = {}): Checkpoint {
  return { ...emptyCheckpoint(), id: uuid6(3), channel_values: values, channel_versions: Object.fromEntries(Object.keys(values).map((k) => [k, 1])) };
}

/** CountingSaver counts the checkpointer calls LangGraph makes. */
class CountingSaver extends LoomSaver {
  calls = 0;
  override async getTuple(config: RunnableConfig) {
    this.calls++;
    return super.getTuple(config);
  }
  override async *list(...args: Parameters<LoomSaver["list"]>) {
    this.calls++;
    yield* super.list(...args);
  }
  override async put(...args: Parameters<LoomSaver["put"]>) {
    this.calls++;
    return super.put(...args);
  }
  override async putWrites(...args: Parameters<LoomSaver["putWrites"]>) {
    this.calls++;
    return super.putWrites(...args);
  }
}

describe("LoomError", () => {
  const url = Object.values(stores)[0]!;

  it("says unauthorized for a wrong or missing key", async () => {
    for (const apiKey of ["wrong", undefined]) {
      const err = await rejection(new LoomSaver({ url, apiKey }).getTuple({ configurable: { thread_id: "t" } }));
      expect(err.code).toBe("unauthorized");
      expect(err.status).toBe(401);
    }
  });

  it("says invalid for what loom refuses, and nothing is stored", async () => {
    const saver = new LoomSaver({ url, apiKey: keys.ops });
    const thread = "x".repeat(2000);
    const err = await rejection(saver.put({ configurable: { thread_id: thread, checkpoint_ns: "" } }, checkpoint(), { source: "input", step: -1, parents: {} }, {}));
    expect(err.code).toBe("invalid");
    expect(err.status).toBe(400);
    expect(err.message).toMatch(/thread_id/);
    expect(await saver.getTuple({ configurable: { thread_id: thread.slice(0, 1000) } })).toBeUndefined();
  });

  it("says network when nothing answers", async () => {
    const srv = createServer();
    srv.listen(0, "127.0.0.1");
    await once(srv, "listening");
    const port = (srv.address() as AddressInfo).port;
    srv.close();
    await once(srv, "close");
    const err = await rejection(new LoomSaver({ url: `http://127.0.0.1:${port}` }).getTuple({ configurable: { thread_id: "t" } }));
    expect(err.code).toBe("network");
    expect(err.status).toBe(0);
  });

  it("says bad_response, with the status, when what answers is not loom", async () => {
    const srv = createServer((_, res) => {
      res.writeHead(502, { "Content-Type": "text/plain" });
      res.end("bad gateway");
    });
    srv.listen(0, "127.0.0.1");
    await once(srv, "listening");
    try {
      const err = await rejection(new LoomSaver({ url: `http://127.0.0.1:${(srv.address() as AddressInfo).port}` }).deleteThread("t"));
      expect(err.code).toBe("bad_response");
      expect(err.status).toBe(502);
    } finally {
      srv.close();
    }
  });

  it("is not what a missing checkpoint gives: getTuple answers undefined", async () => {
    const saver = new LoomSaver({ url, apiKey: keys.ops });
    expect(await saver.getTuple({ configurable: { thread_id: `none-${uuid6(3)}`, checkpoint_id: uuid6(3) } })).toBeUndefined();
    await saver.deleteThread(`none-${uuid6(3)}`); // no error either
  });

  it("comes before any request for a config without a thread_id", async () => {
    const s = spy();
    const saver = new LoomSaver({ url, apiKey: keys.ops, fetch: s.fetch });
    await expect(saver.put({ configurable: {} }, checkpoint(), { source: "input", step: -1, parents: {} }, {})).rejects.toThrow(/thread_id/);
    await expect(saver.putWrites({ configurable: { thread_id: "t" } }, [["a", 1]], "task")).rejects.toThrow(/checkpoint_id/);
    expect(s.requests).toEqual([]);
  });
});

describe.each(Object.keys(stores))("LoomSaver on %s", (store) => {
  const url = stores[store]!;

  it("makes one HTTP round trip per checkpointer call while a graph runs", async () => {
    const s = spy();
    const saver = new CountingSaver({ url, apiKey: keys.ops, fetch: s.fetch });
    const graph = buildGraph(saver);
    const config = { configurable: { thread_id: `count-${uuid6(3)}` } };
    for (let i = 1; i <= 3; i++) await graph.invoke({ messages: [question(i)] }, config);
    for await (const _ of graph.getStateHistory(config, { limit: 5 })) void _;
    await graph.getState(config);
    expect(saver.calls).toBeGreaterThan(20);
    // One request a call: no write is sent ahead of its checkpoint (a 404
    // and a resend), no put ahead of its parent's writes (a 409 and the
    // whole list again).
    expect(s.statuses.filter((st) => st === 409 || st === 404)).toEqual([404]); // the new thread's first getTuple
    expect(s.requests).toHaveLength(saver.calls);
  });

  it("sends writes that come before their checkpoint's put after it, as LangGraph's loop sends them", async () => {
    const s = spy();
    const saver = new LoomSaver({ url, apiKey: keys.ops, fetch: s.fetch });
    const root = { configurable: { thread_id: `order-${uuid6(3)}`, checkpoint_ns: "" } };
    const c1 = checkpoint({ n: 1 });
    const c2 = checkpoint({ n: 2 });
    // The loop chains each put on the one before and sends a task's writes at once.
    const first = saver.put(root, c1, { source: "input", step: -1, parents: {} }, { n: 1 });
    const second = first.then((config) => saver.put(config, c2, { source: "loop", step: 0, parents: {} }, { n: 2 }));
    const writes = saver.putWrites({ configurable: { ...root.configurable, checkpoint_id: c2.id } }, [["n", 3]], "task");
    await Promise.all([second, writes]);
    expect(s.requests).toEqual(["POST /v1/langgraph/checkpoints", "POST /v1/langgraph/checkpoints", "POST /v1/langgraph/writes"]);
    const tuple = await saver.getTuple({ configurable: { ...root.configurable, checkpoint_id: c2.id } });
    expect(tuple?.pendingWrites).toEqual([["task", "n", 3]]);

    // Writes to a checkpoint nobody puts are refused at once.
    const err = await rejection(saver.putWrites({ configurable: { ...root.configurable, checkpoint_id: uuid6(3) } }, [["n", 4]], "task"));
    expect([err.code, err.status]).toEqual(["not_found", 404]);
  });

  it("copies a thread with every namespace and its writes", async () => {
    const saver = new LoomSaver({ url, apiKey: keys.ops });
    const a = `copy-a-${uuid6(3)}`;
    const b = `copy-b-${uuid6(3)}`;
    for (const ns of ["", "child:1"]) {
      const c1 = await saver.put({ configurable: { thread_id: a, checkpoint_ns: ns } }, checkpoint({ n: 1 }), { source: "input", step: -1, parents: {} }, { n: 1 });
      await saver.putWrites(c1, [["n", 2]], "task");
      await saver.put(c1, checkpoint({ n: 2 }), { source: "loop", step: 0, parents: {} }, { n: 2 });
    }
    await saver.copyThread(a, b);
    const strip = (ts: CheckpointTuple[]) => ts.map((t) => ({ ...t, config: { ...t.config.configurable, thread_id: undefined }, parentConfig: t.parentConfig && { ...t.parentConfig.configurable, thread_id: undefined } }));
    const copied = await all(saver, { configurable: { thread_id: b } });
    expect(copied).toHaveLength(4);
    expect(strip(copied)).toEqual(strip(await all(saver, { configurable: { thread_id: a } })));

    const conflict = await rejection(saver.copyThread(a, b));
    expect([conflict.code, conflict.status]).toEqual(["conflict", 409]);
    const missing = await rejection(saver.copyThread(`none-${uuid6(3)}`, `x-${uuid6(3)}`));
    expect([missing.code, missing.status]).toEqual(["not_found", 404]);
  });

  it("prunes to the latest checkpoint of each namespace, or deletes", async () => {
    const saver = new LoomSaver({ url, apiKey: keys.ops });
    const keep = `prune-${uuid6(3)}`;
    const gone = `prune-${uuid6(3)}`;
    const latest: string[] = [];
    for (const thread of [keep, gone]) {
      for (const ns of ["", "child:1"]) {
        let config: RunnableConfig = { configurable: { thread_id: thread, checkpoint_ns: ns } };
        for (let i = 0; i < 3; i++) config = await saver.put(config, checkpoint({ i }), { source: "loop", step: i, parents: {} }, { i: i + 1 });
        if (thread === keep) latest.push(String(config.configurable?.checkpoint_id));
      }
    }
    await saver.prune([keep]);
    expect((await all(saver, { configurable: { thread_id: keep } })).map((t) => t.checkpoint.id).sort()).toEqual(latest.sort());
    await saver.prune([gone], { strategy: "delete" });
    expect(await all(saver, { configurable: { thread_id: gone } })).toEqual([]);
  });

  it("deletes the checkpoints of given runs", async () => {
    const saver = new LoomSaver({ url, apiKey: keys.ops });
    const thread = `runs-${uuid6(3)}`;
    let config: RunnableConfig = { configurable: { thread_id: thread, checkpoint_ns: "" } };
    const ids: Record<string, string[]> = { r1: [], r2: [] };
    for (const run of ["r1", "r1", "r2"]) {
      config = await saver.put(config, checkpoint(), { source: "loop", step: 0, parents: {}, run_id: `${run}-${thread}` } as CheckpointMetadata, {});
      ids[run]!.push(String(config.configurable?.checkpoint_id));
    }
    await saver.deleteForRuns([`r1-${thread}`]);
    expect((await all(saver, { configurable: { thread_id: thread } })).map((t) => t.checkpoint.id)).toEqual(ids.r2);
  });
});
