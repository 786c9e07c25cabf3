/**
 * A real LangGraph StateGraph (the chat agent of graph.ts) on LoomSaver over
 * a real loom serve, on each store: a crash mid-graph and its resume,
 * getStateHistory, updateState at a past checkpoint and the branch it
 * makes, interrupt() and its resume with a Command; and the same scenario on
 * LangGraph's SqliteSaver gives the same states.
 */
import { spawn } from "node:child_process";
import { once } from "node:events";
import { randomUUID } from "node:crypto";
import { fileURLToPath } from "node:url";
import { createInterface } from "node:readline";
import type { RunnableConfig } from "@langchain/core/runnables";
import { AIMessage, HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { Command, type BaseCheckpointSaver, type StateSnapshot } from "@langchain/langgraph";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";
import { describe, expect, inject, it } from "vitest";
import { LoomSaver } from "../src/index.js";
import { buildGraph, question } from "./graph.js";

const { stores, keys } = inject("loom");

type Snapshot = StateSnapshot;

async function history(graph: ReturnType<typeof buildGraph>, config: RunnableConfig): Promise<Snapshot[]> {
  const out: Snapshot[] = [];
  for await (const s of graph.getStateHistory(config)) out.push(s);
  return out;
}

function messagesOf(s: Snapshot): BaseMessage[] {
  return (s.values as { messages?: BaseMessage[] }).messages ?? [];
}

/**
 * normalize keeps what two checkpointers must agree on: values (messages
 * with their class and every field), next, tasks and their interrupts,
 * metadata, and the shape of the tree, with checkpoint ids replaced by
 * their rank (uuid6 ids sort in the order they were made).
 */
function normalize(snapshots: Snapshot[]): unknown[] {
  const ids = new Set<string>();
  for (const s of snapshots) {
    for (const c of [s.config, s.parentConfig]) {
      const id = c?.configurable?.checkpoint_id;
      if (typeof id === "string") ids.add(id);
    }
  }
  const rank = new Map([...ids].sort().map((id, i) => [id, i]));
  const idOf = (c: RunnableConfig | undefined) => {
    const id = c?.configurable?.checkpoint_id;
    return typeof id === "string" ? rank.get(id) : undefined;
  };
  return snapshots.map((s) => {
    const { messages, ...rest } = s.values as { messages?: BaseMessage[] };
    const metadata = { ...(s.metadata ?? {}) } as Record<string, unknown>;
    delete metadata.thread_id; // each scenario runs on threads of its own
    metadata.parents = Object.fromEntries(
      Object.entries((metadata.parents as Record<string, string>) ?? {}).map(([ns, id]) => [ns, rank.get(id)]),
    );
    return {
      checkpoint: idOf(s.config),
      parent: idOf(s.parentConfig),
      next: s.next,
      messages: (messages ?? []).map((m) => [m.constructor.name, m.toDict()]),
      values: rest,
      metadata,
      tasks: s.tasks.map((t) => ({ name: t.name, interrupts: (t.interrupts ?? []).map((i) => i.value), error: t.error })),
    };
  });
}

interface ScenarioResult {
  chat: Snapshot[];
  approval: Snapshot[];
}

/**
 * scenario runs two turns, reads the history, branches with updateState at
 * the end of turn one and runs the branch on, then on a second thread runs
 * a turn that stops at interrupt() and resumes it; it asserts what must
 * hold on any checkpointer and returns both threads' histories.
 */
async function scenario(saver: BaseCheckpointSaver): Promise<ScenarioResult> {
  const graph = buildGraph(saver);
  const config = { configurable: { thread_id: `chat-${randomUUID()}` } };
  await graph.invoke({ messages: [question(1)] }, config);
  const turn2 = await graph.invoke({ messages: [question(2)] }, config);
  expect(turn2.messages.map((m: BaseMessage) => m.id)).toEqual(["human-1", "ai-1", "tool-call-1", "ai-3", "human-2", "ai-5", "tool-call-5", "ai-7"]);

  // getStateHistory: newest first, every step of both turns, each a parent of the one before.
  const hist = await history(graph, config);
  expect(hist.map((s) => s.metadata?.step)).toEqual([8, 7, 6, 5, 4, 3, 2, 1, 0, -1].slice(0, hist.length));
  expect(hist).toHaveLength(10);
  for (let i = 0; i + 1 < hist.length; i++) {
    expect(hist[i]!.parentConfig?.configurable?.checkpoint_id).toBe(hist[i + 1]!.config.configurable?.checkpoint_id);
  }
  expect(messagesOf(hist[0]!).map((m) => m.id)).toEqual(turn2.messages.map((m: BaseMessage) => m.id));

  // updateState at the end of turn one: a branch, continued from there.
  const endOfTurn1 = hist.find((s) => messagesOf(s).length === 4 && s.next.length === 0)!;
  expect(endOfTurn1).toBeDefined();
  const branch = await graph.updateState(endOfTurn1.config, { messages: [new HumanMessage({ id: "human-b", content: "another question" })] }, "tools");
  expect(branch.configurable?.checkpoint_id).not.toBe(endOfTurn1.config.configurable?.checkpoint_id);
  const branched = await graph.invoke(null, branch);
  expect(branched.messages.map((m: BaseMessage) => m.id)).toEqual(["human-1", "ai-1", "tool-call-1", "ai-3", "human-b", "ai-5", "tool-call-5", "ai-7"]);
  expect((branched.messages[5] as AIMessage).tool_calls?.[0]?.args).toEqual({ query: "another question" });
  // The branch is the thread's latest; the first line of turns is still there.
  expect(messagesOf(await graph.getState(config)).map((m) => m.id)).toContain("human-b");
  const before = await graph.getState(hist[0]!.config);
  expect(messagesOf(before).map((m) => m.id)).toContain("human-2");
  expect(messagesOf(before).map((m) => m.id)).not.toContain("human-b");

  // interrupt() and a resume with a Command.
  const approving = buildGraph(saver, { approval: true });
  const config2 = { configurable: { thread_id: `approve-${randomUUID()}` } };
  const stopped = await approving.invoke({ messages: [question(1)] }, config2);
  const interrupts = (stopped as { __interrupt__?: Array<{ value: unknown }> }).__interrupt__;
  expect(interrupts?.map((i) => i.value)).toEqual(["may I search?"]);
  const waiting = await approving.getState(config2);
  expect(waiting.next).toEqual(["approve"]);
  expect(waiting.tasks[0]?.interrupts.map((i) => i.value)).toEqual(["may I search?"]);
  const resumed = await approving.invoke(new Command({ resume: "yes, search" }), config2);
  expect(resumed.approvals).toEqual(["yes, search"]);
  expect(resumed.messages.map((m: BaseMessage) => m.id)).toEqual(["human-1", "ai-1", "tool-call-1", "ai-3"]);

  return { chat: await history(graph, config), approval: await history(approving, config2) };
}

describe.each(Object.keys(stores))("LoomSaver end to end on %s", (store) => {
  const url = stores[store]!;
  const saver = () => new LoomSaver({ url, apiKey: keys.e2e });

  it("resumes a graph whose process was SIGKILLed in the middle of a step", async () => {
    const threadId = `crash-${randomUUID()}`;
    const child = spawn(process.execPath, ["--import", "tsx", fileURLToPath(new URL("./fixtures/crash-child.ts", import.meta.url))], {
      env: { ...process.env, LOOM_URL: url, LOOM_API_KEY: keys.e2e, THREAD_ID: threadId },
      stdio: ["ignore", "pipe", "inherit"],
    });
    const exited = once(child, "exit");
    const lines = createInterface({ input: child.stdout! });
    const inTool = new Promise<void>((resolve, reject) => {
      lines.on("line", (line) => line === "IN_TOOL" && resolve());
      child.once("exit", (code) => reject(new Error(`the graph's process exited (${code}) before reaching the tool`)));
    });
    await inTool;
    child.kill("SIGKILL");
    const [, signal] = await exited;
    expect(signal).toBe("SIGKILL");

    // What the killed process checkpointed: the agent's tool call, the tools next.
    let toolRuns = 0;
    const graph = buildGraph(saver(), { inTool: async () => void toolRuns++ });
    const config = { configurable: { thread_id: threadId } };
    const stopped = await graph.getState(config);
    expect(stopped.next).toEqual(["tools"]);
    const last = messagesOf(stopped).at(-1);
    expect(last).toBeInstanceOf(AIMessage);
    expect((last as AIMessage).tool_calls?.map((c) => c.id)).toEqual(["call-1"]);

    const done = await graph.invoke(null, config);
    expect(toolRuns).toBe(1);
    expect(done.messages.map((m: BaseMessage) => m.id)).toEqual(["human-1", "ai-1", "tool-call-1", "ai-3"]);
    expect(done.messages[2]).toBeInstanceOf(ToolMessage);
    expect((await graph.getState(config)).next).toEqual([]);
  });

  it("keeps history, branches with updateState, interrupts and resumes, with the states SqliteSaver gives", async () => {
    const loom = await scenario(saver());
    const sqlite = SqliteSaver.fromConnString(":memory:");
    const reference = await scenario(sqlite);
    expect(normalize(loom.chat)).toEqual(normalize(reference.chat));
    expect(normalize(loom.approval)).toEqual(normalize(reference.approval));
    // Every field of every message came back, tool calls, ids and metadata included.
    const final = messagesOf(loom.chat[0]!);
    expect(final[5]!.toDict()).toEqual(messagesOf(reference.chat[0]!)[5]!.toDict());
    expect((final[5] as AIMessage).tool_calls).toEqual([{ id: "call-5", name: "search", args: { query: "another question" }, type: "tool_call" }]);
    expect(final[5]!.additional_kwargs).toEqual({ reasoning: "looking up 5" });
    expect(final[7]!.response_metadata).toEqual({ model_name: "fake", finish_reason: "stop" });
  });
});
