/**
 * The `messages` channel as loom messages: which values go as LangChain's
 * stored messages, that they come back from loom serve as the very same
 * messages (class, id, tool calls, kwargs, metadata), and that anything
 * that could not is sent as a blob instead.
 */
import {
  AIMessage,
  AIMessageChunk,
  ChatMessage,
  HumanMessage,
  RemoveMessage,
  SystemMessage,
  ToolMessage,
  type BaseMessage,
} from "@langchain/core/messages";
import { JsonPlusSerializer, emptyCheckpoint, uuid6, type CheckpointTuple } from "@langchain/langgraph-checkpoint";
import type { RunnableConfig } from "@langchain/core/runnables";
import { describe, expect, inject, it } from "vitest";
import { LoomSaver, fromStoredMessages, toStoredMessages } from "../src/index.js";
import type { PutRequest, WritesRequest } from "../src/wire.js";

const serde = new JsonPlusSerializer();

/** Messages with every field a chat agent's messages carry. */
function conversation(): BaseMessage[] {
  return [
    new SystemMessage({ id: "s1", content: "be brief" }),
    new HumanMessage({ id: "h1", content: "what is loom?", name: "ada", additional_kwargs: { lang: "en" } }),
    new AIMessage({
      id: "a1",
      content: "",
      tool_calls: [
        { id: "call-1", name: "search", args: { q: "loom", n: 3, nested: { ok: true, list: [1, "two", null] } }, type: "tool_call" },
        { id: "call-2", name: "fetch", args: {}, type: "tool_call" },
      ],
      additional_kwargs: { reasoning: { steps: ["a", "b"] } },
      response_metadata: { model_name: "fake", finish_reason: "tool_calls", logprobs: null },
      usage_metadata: { input_tokens: 10, output_tokens: 5, total_tokens: 15 },
    }),
    new ToolMessage({ id: "t1", tool_call_id: "call-1", name: "search", content: "a thread layer", artifact: { hits: [1, 2] }, status: "success" }),
    new ToolMessage({ id: "t2", tool_call_id: "call-2", content: "failed", status: "error" }),
    new AIMessage({
      id: "a2",
      content: [{ type: "text", text: "loom keeps threads" }],
      invalid_tool_calls: [{ id: "bad", name: "search", args: "{not json", error: "parse", type: "invalid_tool_call" }],
      response_metadata: { model_name: "fake" },
    }),
    new ChatMessage({ id: "c1", content: "aside", role: "critic" }),
    new HumanMessage({ id: "h2", content: [{ type: "text", text: "and unicode: ünïcødé 🧵" }] }),
  ];
}

/**
 * serialized is what serde makes of m, parsed: loom gives JSON objects back
 * with their members in another order, which is the same JSON.
 */
async function serialized(m: unknown): Promise<unknown> {
  const [type, data] = await serde.dumpsTyped(m);
  return { type, value: JSON.parse(Buffer.from(data).toString()) };
}

async function expectSameMessages(got: unknown, want: BaseMessage[]): Promise<void> {
  expect(Array.isArray(got)).toBe(true);
  const list = got as BaseMessage[];
  expect(list).toHaveLength(want.length);
  for (let i = 0; i < want.length; i++) {
    expect(list[i]!.constructor).toBe(want[i]!.constructor);
    expect(await serialized(list[i])).toStrictEqual(await serialized(want[i]));
  }
}

describe("toStoredMessages and fromStoredMessages", () => {
  it("round-trip every kind of message exactly, through JSON", async () => {
    const msgs = conversation();
    const stored = await toStoredMessages(msgs, serde);
    expect(stored).toBeDefined();
    expect(stored!.map((s) => s.type)).toEqual(["system", "human", "ai", "tool", "tool", "ai", "generic", "human"]);
    await expectSameMessages(fromStoredMessages(JSON.parse(JSON.stringify(stored))), msgs);
  });

  it("send anything that could not come back the same as a blob", async () => {
    const cases: Array<[string, unknown]> = [
      ["an empty list", []],
      ["not a list", new HumanMessage({ id: "h", content: "x" })],
      ["a message without an id", [new HumanMessage({ content: "x" })]],
      ["a message with an empty id", [new HumanMessage({ id: "", content: "x" })]],
      ["a RemoveMessage", [new RemoveMessage({ id: "h1" })]],
      ["a chunk (it would come back as an AIMessage)", [new AIMessageChunk({ id: "c", content: "x" })]],
      ["strings", ["hi"]],
      ["a message among other things", [new HumanMessage({ id: "h", content: "x" }), 3]],
      ["a message with a type in its fields", [new HumanMessage({ id: "h", content: "x", type: "odd" } as never)]],
    ];
    for (const [what, value] of cases) {
      expect(await toStoredMessages(value, serde), what).toBeUndefined();
    }
  });

  it("check a message again when it was changed in place", async () => {
    const m = new HumanMessage({ id: "h", content: "x" });
    expect(await toStoredMessages([m], serde)).toBeDefined();
    m.additional_kwargs.extra = { v: 1 };
    const stored = await toStoredMessages([m], serde);
    expect(stored?.[0]?.data.additional_kwargs).toEqual({ extra: { v: 1 } });
  });

  it("read a type inside data (as Python's message_to_dict writes it) as the stored form's type", () => {
    const [m] = fromStoredMessages([{ type: "human", data: { id: "h", content: "x", type: "human", additional_kwargs: {}, response_metadata: {} } }]);
    expect(m).toBeInstanceOf(HumanMessage);
    expect(m!.toDict()).toEqual(new HumanMessage({ id: "h", content: "x" }).toDict());
  });
});

/**
 * spy wraps fetch to keep each request's method, path and body: the
 * requests still go to the real server.
 */
function spy() {
  const requests: Array<{ method: string; path: string; body: unknown }> = [];
  const f: typeof fetch = async (input, init) => {
    const url = new URL(String(input));
    requests.push({ method: init?.method ?? "GET", path: url.pathname, body: init?.body ? JSON.parse(String(init.body)) : undefined });
    return fetch(input, init);
  };
  return { requests, fetch: f };
}

const { stores, keys } = inject("loom");

describe.each(Object.keys(stores))("LoomSaver's messages on %s", (store) => {
  const url = stores[store]!;

  it("keeps a messages channel and messages writes as loom messages that come back the same", async () => {
    const s = spy();
    const saver = new LoomSaver({ url, apiKey: keys.messages, fetch: s.fetch });
    const msgs = conversation();
    const thread = `m-${uuid6(3)}`;
    const checkpoint = { ...emptyCheckpoint(), channel_values: { messages: msgs, other: { n: 1 } }, channel_versions: { messages: 1, other: 1 } };
    const config = await saver.put({ configurable: { thread_id: thread, checkpoint_ns: "" } }, checkpoint, { source: "input", step: -1, parents: {} }, { messages: 1, other: 1 });
    const added = [new AIMessage({ id: "a9", content: "more", tool_calls: [{ id: "c9", name: "search", args: { q: 1 }, type: "tool_call" }] })];
    const removal = [new RemoveMessage({ id: "h1" })];
    await saver.putWrites(config, [["messages", added], ["messages", removal]], "task-1");

    const put = s.requests.find((r) => r.path === "/v1/langgraph/checkpoints")!.body as PutRequest;
    expect(put.channel_values?.messages?.messages?.map((m) => m.data.id)).toEqual(msgs.map((m) => m.id));
    expect(put.channel_values?.other?.blob).toBeDefined();
    const writes = s.requests.find((r) => r.path === "/v1/langgraph/writes")!.body as WritesRequest;
    expect(writes.writes[0]!.value.messages).toBeDefined();
    expect(writes.writes[1]!.value.blob).toBeDefined(); // a RemoveMessage is not a loom message

    const tuple = await saver.getTuple(config);
    await expectSameMessages(tuple?.checkpoint.channel_values.messages, msgs);
    expect(tuple?.checkpoint.channel_values.other).toEqual({ n: 1 });
    await expectSameMessages(tuple?.pendingWrites?.[0]?.[2], added);
    const removed = tuple?.pendingWrites?.[1]?.[2] as BaseMessage[];
    expect(removed[0]).toBeInstanceOf(RemoveMessage);
    expect(removed[0]!.id).toBe("h1");

    // A child whose list extends its parent's: the same messages again.
    const more = [...msgs, ...added];
    const child = { ...emptyCheckpoint(), id: uuid6(3), channel_values: { messages: more }, channel_versions: { messages: 2, other: 1 } };
    const childConfig = await saver.put(config, child, { source: "loop", step: 0, parents: {} }, { messages: 2 });
    const childTuple = await saver.getTuple(childConfig);
    await expectSameMessages(childTuple?.checkpoint.channel_values.messages, more);
    expect(childTuple?.checkpoint.channel_values.other).toEqual({ n: 1 });
    await saver.deleteThread(thread);
  });
});

describe.each(Object.keys(stores))("a turn sends what it adds, on %s", (store) => {
  const url = stores[store]!;
  const meta = { source: "loop" as const, step: 0, parents: {} };

  function spyBodies() {
    const seen: Array<{ method: string; path: string; query: string; body: any; status: number; answer: any }> = [];
    const f: typeof fetch = async (input, init) => {
      const u = new URL(String(input));
      const res = await fetch(input, init);
      const text = await res.clone().text();
      seen.push({ method: init?.method ?? "GET", path: u.pathname, query: u.search, body: init?.body ? JSON.parse(String(init.body)) : undefined, status: res.status, answer: text ? JSON.parse(text) : undefined });
      return res;
    };
    return { seen, fetch: f };
  }

  async function putList(saver: LoomSaver, parent: RunnableConfig, list: BaseMessage[]): Promise<RunnableConfig> {
    const cp = { ...emptyCheckpoint(), id: uuid6(3), channel_values: { messages: list }, channel_versions: { messages: list.length } };
    return saver.put(parent, cp, meta, { messages: list.length });
  }

  it("puts only the messages after the parent's, gets only those it lacks, and rebuilds on the same objects", async () => {
    const s = spyBodies();
    const saver = new LoomSaver({ url, apiKey: keys.messages, fetch: s.fetch });
    const thread = `ext-${uuid6(3)}`;
    const msgs = conversation();
    const c1 = await putList(saver, { configurable: { thread_id: thread, checkpoint_ns: "" } }, msgs.slice(0, 3));
    const list2 = [...msgs.slice(0, 3), ...msgs.slice(3, 6)];
    const c2 = await putList(saver, c1, list2);
    const put2 = s.seen.filter((r) => r.path === "/v1/langgraph/checkpoints")[1]!;
    expect(put2.body.channel_values.messages.extends.n).toBe(3);
    expect(put2.body.channel_values.messages.messages.map((m: { data: { id: string } }) => m.data.id)).toEqual(["t1", "t2", "a2"]);

    const t2 = await saver.getTuple(c2);
    const get = s.seen.at(-1)!;
    expect(get.query).toMatch(/messages_n=6/);
    expect(get.answer.checkpoint.channel_values.messages.messages ?? []).toHaveLength(0); // it holds them all
    const got = t2!.checkpoint.channel_values.messages as BaseMessage[];
    for (let i = 0; i < list2.length; i++) expect(got[i]).toBe(list2[i]);

    // A fresh saver holds nothing: the whole list comes, equal to what was put.
    const fresh = new LoomSaver({ url, apiKey: keys.messages });
    await expectSameMessages((await fresh.getTuple(c2))!.checkpoint.channel_values.messages, list2);
    await saver.deleteThread(thread);
  });

  it("sends the whole list again when loom's list for the parent is not the one held (409)", async () => {
    const s = spyBodies();
    const a = new LoomSaver({ url, apiKey: keys.messages, fetch: s.fetch });
    const b = new LoomSaver({ url, apiKey: keys.messages });
    const thread = `conflict-${uuid6(3)}`;
    const msgs = conversation();
    const root = { configurable: { thread_id: thread, checkpoint_ns: "" } };
    const cp = { ...emptyCheckpoint(), id: uuid6(3), channel_values: { messages: msgs.slice(0, 3) }, channel_versions: { messages: 1 } };
    const c1 = await a.put(root, cp, meta, { messages: 1 });
    // Another saver puts the same checkpoint again with another list.
    await b.put(root, { ...cp, channel_values: { messages: [msgs[1]!, msgs[0]!] } }, meta, { messages: 1 });
    const list2 = [...msgs.slice(0, 3), msgs[3]!];
    const c2 = await putList(a, c1, list2);
    const puts = s.seen.filter((r) => r.path === "/v1/langgraph/checkpoints");
    expect(puts.map((p) => p.status)).toEqual([200, 409, 200]);
    expect(puts[2]!.body.channel_values.messages.extends).toBeUndefined();
    const fresh = new LoomSaver({ url, apiKey: keys.messages });
    await expectSameMessages((await fresh.getTuple(c2))!.checkpoint.channel_values.messages, list2);
    await a.deleteThread(thread);
  });

  it("rebuilds a list's tuples on the earlier ones they share messages with", async () => {
    const saver = new LoomSaver({ url, apiKey: keys.messages });
    const thread = `shares-${uuid6(3)}`;
    const msgs = conversation();
    let config: RunnableConfig = { configurable: { thread_id: thread, checkpoint_ns: "" } };
    const lists: BaseMessage[][] = [];
    for (let n = 2; n <= msgs.length; n += 2) {
      lists.push(msgs.slice(0, n));
      config = await putList(saver, config, msgs.slice(0, n));
    }
    const s = spyBodies();
    const reader = new LoomSaver({ url, apiKey: keys.messages, fetch: s.fetch });
    const listed: CheckpointTuple[] = [];
    for await (const t of reader.list({ configurable: { thread_id: thread } })) listed.push(t);
    expect(listed).toHaveLength(lists.length);
    lists.reverse();
    for (let i = 0; i < listed.length; i++) await expectSameMessages(listed[i]!.checkpoint.channel_values.messages, lists[i]!);
    const answer = s.seen[0]!.answer as { checkpoints: Array<{ checkpoint: { channel_values: { messages: { shares?: unknown } } } }> };
    expect(answer.checkpoints.some((t) => t.checkpoint.channel_values.messages.shares !== undefined)).toBe(true);
    await saver.deleteThread(thread);
  });
});
