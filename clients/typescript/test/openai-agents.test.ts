/**
 * The OpenAI Agents SDK for TypeScript (`@openai/agents`, pinned) with loom
 * as its service: the agent's model is an OpenAIResponsesModel over an
 * `openai` client whose base URL is loom's /openai/v1, its memory an
 * OpenAIConversationsSession on the same client. Three turns with a tool
 * that really runs here, then the conversation read through loom's native
 * API, forked there, and the fork continued by the SDK with a session of
 * its own: it sees the history, and the original does not see its turn.
 * Tracing is off, so nothing leaves the machine.
 */
import OpenAI from "openai";
import { Agent, OpenAIConversationsSession, OpenAIResponsesModel, run, setTracingDisabled, tool, type AgentInputItem } from "@openai/agents";
import { z } from "zod";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { ID26, Native, startScripted, textOf, type NativeMessage, type OpenAILoom } from "./openai.js";

const { loomBin } = inject("loom");
const KEY = "agents-key-0123456789";

let server: OpenAILoom;

beforeAll(async () => {
  setTracingDisabled(true);
  server = await startScripted(loomBin, { agents: KEY });
});

afterAll(async () => {
  await server?.stop();
});

/** Sent is one request the SDK made: its method, path and JSON body. */
interface Sent {
  method: string;
  path: string;
  body: Record<string, unknown> | undefined;
}

/**
 * recordingClient is an `openai` client on loom that records every request
 * it makes (and fails the test if one goes anywhere but loom).
 */
function recordingClient(sent: Sent[]): OpenAI {
  const record: typeof fetch = async (input, init) => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    expect(url.origin).toBe(new URL(server.url).origin);
    const raw = init?.body;
    sent.push({ method: init?.method ?? "GET", path: url.pathname, body: typeof raw === "string" ? (JSON.parse(raw) as Record<string, unknown>) : undefined });
    return fetch(input, init);
  };
  return new OpenAI({ baseURL: server.baseURL, apiKey: KEY, maxRetries: 0, fetch: record });
}

/** summary is an agent item in a line: its type, and its text or call. */
function summary(item: AgentInputItem): string {
  const i = item as { type?: string; role?: string; content?: unknown; name?: string; arguments?: string; output?: unknown };
  if (i.type === "function_call") return `call ${i.name} ${i.arguments}`;
  if (i.type === "function_call_result" || i.type === "function_call_output") {
    const out = i.output as { text?: string } | string;
    return `result ${typeof out === "string" ? out : out.text}`;
  }
  const content = i.content;
  const text = typeof content === "string" ? content : (content as Array<{ text?: string }>).map((p) => p.text ?? "").join("");
  return `${i.role}: ${text}`;
}

/** nativeSummary is the same line for a loom message. */
function nativeSummary(m: NativeMessage): string {
  const c = m.contents[0]!;
  if (c.type === "function_call") return `call ${c.name} ${c.arguments}`;
  if (c.type === "function_result") return `result ${String(c.result)}`;
  return `${m.role}: ${textOf(m)}`;
}

describe("@openai/agents on loom", () => {
  it("runs three turns with a tool in an OpenAIConversationsSession, forked natively and continued by the SDK", async () => {
    const calls: string[] = [];
    const weather = tool({
      name: "get_weather",
      description: "The weather in a city.",
      parameters: z.object({ city: z.string() }),
      execute: async ({ city }) => {
        calls.push(city);
        return `sunny in ${city}`;
      },
    });
    const sent: Sent[] = [];
    const client = recordingClient(sent);
    const agent = new Agent({
      name: "Weather agent",
      instructions: "Answer about the weather; call get_weather for it.",
      tools: [weather],
      model: new OpenAIResponsesModel(client, "loom"),
    });
    const session = new OpenAIConversationsSession({ client });

    // Turn 1: the model calls the tool, the SDK runs it, the model answers from its result.
    const t1 = await run(agent, 'call get_weather {"city":"Paris"}', { session });
    expect(calls).toEqual(["Paris"]);
    expect(t1.finalOutput).toBe("Tool get_weather returned: sunny in Paris");

    // Turn 2, streamed: the tool again, its call and the answer streamed.
    const t2 = await run(agent, 'call get_weather {"city":"Rome"}', { session, stream: true });
    let streamed = "";
    for await (const chunk of t2.toTextStream()) streamed += chunk;
    await t2.completed;
    expect(calls).toEqual(["Paris", "Rome"]);
    expect(streamed).toBe("Tool get_weather returned: sunny in Rome");
    expect(t2.finalOutput).toBe("Tool get_weather returned: sunny in Rome");

    // Turn 3: no tool.
    const t3 = await run(agent, "Thanks!", { session });
    expect(t3.finalOutput).toBe("You said: Thanks!");
    expect(calls).toEqual(["Paris", "Rome"]);

    const convId = await session.getSessionId();
    expect(convId).toMatch(new RegExp(`^conv_${ID26}$`));
    // The model got the session's history with each turn's input: turn 3's
    // request held turns 1 and 2 (the SDK keeps the context, loom the items).
    const modelCalls = sent.filter((s) => s.method === "POST" && s.path === "/openai/v1/responses");
    expect(modelCalls).toHaveLength(5);
    expect((modelCalls[4]!.body!.input as unknown[]).length).toBe(9);

    const line = [
      'user: call get_weather {"city":"Paris"}',
      'call get_weather {"city":"Paris"}',
      "result sunny in Paris",
      "assistant: Tool get_weather returned: sunny in Paris",
      'user: call get_weather {"city":"Rome"}',
      'call get_weather {"city":"Rome"}',
      "result sunny in Rome",
      "assistant: Tool get_weather returned: sunny in Rome",
      "user: Thanks!",
      "assistant: You said: Thanks!",
    ];
    expect((await session.getItems()).map(summary)).toEqual(line);
    expect((await session.getItems(3)).map(summary)).toEqual(line.slice(7));

    // loom's own API: the conversation is the thread with that id, one message per item.
    const native = new Native(server.url, KEY);
    const messages = await native.messages(convId);
    expect(messages.map(nativeSummary)).toEqual(line);
    expect(messages.map((m) => m.role)).toEqual(["user", "assistant", "tool", "assistant", "user", "assistant", "tool", "assistant", "user", "assistant"]);
    expect((await native.thread(convId)).labels).toEqual({ openai: "conversation" });

    // Fork natively at the end of turn 2, and continue the fork with the SDK.
    const fork = await native.fork(convId, { at: messages[7]!.id });
    expect(fork.forked_from?.thread).toBe(convId);
    const forkSession = new OpenAIConversationsSession({ conversationId: fork.id, client });
    expect((await forkSession.getItems()).map(summary)).toEqual(line.slice(0, 8));

    const before = sent.length;
    const t4 = await run(agent, 'call get_weather {"city":"Tokyo"}', { session: forkSession });
    expect(t4.finalOutput).toBe("Tool get_weather returned: sunny in Tokyo");
    expect(calls).toEqual(["Paris", "Rome", "Tokyo"]);
    // The fork's history went to the model: turns 1 and 2, not turn 3.
    const forkInput = sent.slice(before).find((s) => s.path === "/openai/v1/responses")!.body!.input as Array<{ content?: unknown }>;
    const forkInputText = JSON.stringify(forkInput);
    expect(forkInputText).toContain("sunny in Paris");
    expect(forkInputText).toContain("sunny in Rome");
    expect(forkInputText).not.toContain("Thanks!");

    const forkLine = [
      ...line.slice(0, 8),
      'user: call get_weather {"city":"Tokyo"}',
      'call get_weather {"city":"Tokyo"}',
      "result sunny in Tokyo",
      "assistant: Tool get_weather returned: sunny in Tokyo",
    ];
    expect((await forkSession.getItems()).map(summary)).toEqual(forkLine);
    expect((await native.messages(fork.id)).map(nativeSummary)).toEqual(forkLine);
    // The original does not see the fork's turn.
    expect((await session.getItems()).map(summary)).toEqual(line);
    expect((await native.messages(convId)).map(nativeSummary)).toEqual(line);

    // popItem drops the fork's last item (a new version: history keeps it),
    // clearSession deletes the fork; the original stays whole.
    const forkVersion = (await native.thread(fork.id)).version;
    const popped = await forkSession.popItem();
    expect(popped && summary(popped)).toBe("assistant: Tool get_weather returned: sunny in Tokyo");
    expect((await forkSession.getItems()).map(summary)).toEqual(forkLine.slice(0, -1));
    expect((await native.messages(fork.id, forkVersion)).map(nativeSummary)).toEqual(forkLine);
    await forkSession.clearSession();
    await expect(native.thread(fork.id)).rejects.toThrow(/404/);
    expect((await session.getItems()).map(summary)).toEqual(line);
  });

  it("keeps a server-managed conversation (conversationId) and a previousResponseId chain in loom", async () => {
    const calls: string[] = [];
    const weather = tool({
      name: "get_weather",
      description: "The weather in a city.",
      parameters: z.object({ city: z.string() }),
      execute: async ({ city }) => {
        calls.push(city);
        return `rain in ${city}`;
      },
    });
    const sent: Sent[] = [];
    const client = recordingClient(sent);
    const agent = new Agent({ name: "Weather agent", instructions: "Use get_weather.", tools: [weather], model: new OpenAIResponsesModel(client, "loom") });
    const native = new Native(server.url, KEY);

    // conversationId: the SDK sends each call's new items only, with
    // `conversation`; loom appends them and the answers to the thread.
    const conv = await client.conversations.create();
    const a = await run(agent, 'call get_weather {"city":"Bergen"}', { conversationId: conv.id });
    expect(a.finalOutput).toBe("Tool get_weather returned: rain in Bergen");
    const b = await run(agent, "Thanks", { conversationId: conv.id });
    expect(b.finalOutput).toBe("You said: Thanks");
    expect(calls).toEqual(["Bergen"]);
    const modelCalls = sent.filter((x) => x.path === "/openai/v1/responses");
    expect(modelCalls.map((x) => x.body!.conversation)).toEqual([conv.id, conv.id, conv.id]);
    expect(modelCalls.map((x) => (x.body!.input as unknown[]).length)).toEqual([1, 1, 1]);
    expect((await native.messages(conv.id)).map(nativeSummary)).toEqual([
      'user: call get_weather {"city":"Bergen"}',
      'call get_weather {"city":"Bergen"}',
      "result rain in Bergen",
      "assistant: Tool get_weather returned: rain in Bergen",
      "user: Thanks",
      "assistant: You said: Thanks",
    ]);

    // previousResponseId: each call continues the last response; the chain
    // is one loom thread, and a run from an earlier response is a fork.
    const c = await run(agent, 'call get_weather {"city":"Cork"}');
    const first = c.lastResponseId!;
    expect(c.finalOutput).toBe("Tool get_weather returned: rain in Cork");
    const d = await run(agent, "More", { previousResponseId: first });
    expect(d.finalOutput).toBe("You said: More");
    const e = await run(agent, "Other", { previousResponseId: first });
    expect(e.finalOutput).toBe("You said: Other");
    const main = /^resp_[0-9a-z]{26}_(.+)$/.exec(d.lastResponseId!)![1]!;
    const branch = /^resp_[0-9a-z]{26}_(.+)$/.exec(e.lastResponseId!)![1]!;
    expect(branch).not.toBe(main);
    expect((await native.thread(branch)).forked_from?.thread).toBe(main);
    expect((await native.messages(main)).map(nativeSummary).slice(-2)).toEqual(["user: More", "assistant: You said: More"]);
    expect((await native.messages(branch)).map(nativeSummary)).toEqual([
      'user: call get_weather {"city":"Cork"}',
      'call get_weather {"city":"Cork"}',
      "result rain in Cork",
      "assistant: Tool get_weather returned: rain in Cork",
      "user: Other",
      "assistant: You said: Other",
    ]);
  });

  it("gets back from loom the items of every kind a session adds: images, files, system text, reasoning, calls, refusals", async () => {
    const client = recordingClient([]);
    const session = new OpenAIConversationsSession({ client });
    const added = [
      {
        type: "message",
        role: "user",
        content: [
          { type: "input_text", text: "look" },
          { type: "input_image", image: "https://example.com/cat.png" },
          { type: "input_file", file: "data:application/pdf;base64,JVBERi0=", filename: "a.pdf" },
        ],
      },
      { type: "message", role: "system", content: "Be brief." },
      // A reasoning item keeps its id through a session (the SDK sends it).
      { type: "reasoning", id: "rs_kept", content: [] },
      { type: "function_call", callId: "c1", name: "lookup", arguments: '{"q":"cats"}', status: "completed" },
      { type: "function_call_result", callId: "c1", name: "lookup", status: "completed", output: { type: "text", text: "many cats" } },
      { type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text: "Cats." }, { type: "refusal", refusal: "No dogs." }] },
    ] as AgentInputItem[];
    await session.addItems(added);
    const got = (await session.getItems()) as Array<Record<string, unknown>>;
    expect(got).toHaveLength(6);
    expect(got[0]).toMatchObject({
      type: "message",
      role: "user",
      content: [
        { type: "input_text", text: "look" },
        { type: "input_image", image: "https://example.com/cat.png" },
        { type: "input_file", file: "data:application/pdf;base64,JVBERi0=", filename: "a.pdf" },
      ],
    });
    expect(got[1]).toMatchObject({ type: "message", role: "system", content: "Be brief." });
    expect(got[2]).toMatchObject({ type: "reasoning", id: "rs_kept" });
    expect(got[3]).toMatchObject({ type: "function_call", callId: "c1", name: "lookup", arguments: '{"q":"cats"}' });
    expect(got[4]).toMatchObject({ type: "function_call_result", callId: "c1", output: "many cats" });
    expect(got[5]).toMatchObject({ type: "message", role: "assistant", content: [{ type: "output_text", text: "Cats." }, { type: "refusal", refusal: "No dogs." }] });

    // In loom: the image and the file are data contents of the user's message.
    const msgs = await new Native(server.url, KEY).messages(await session.getSessionId());
    expect(msgs[0]!.contents.map((c) => c.type)).toEqual(["text", "data", "data"]);
    expect(msgs[2]!.id).toBe("rs_kept");
  });
});
