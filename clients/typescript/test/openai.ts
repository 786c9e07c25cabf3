/**
 * What the OpenAI SDK tests share: a real `loom serve --provider scripted`
 * on a SQLite file of its own (the demo model answers "You said: <text>",
 * calls a tool when told "call <tool> {json}" and it is offered, and says
 * "Tool <name> returned: <result>" after a tool's output), the official
 * `openai` client pointed at its OpenAI-compatible prefix, and a small
 * client of loom's native /v1 API to check what the SDKs did there.
 */
import { rmSync } from "node:fs";
import { join } from "node:path";
import OpenAI from "openai";
import { expect } from "vitest";
import { startLoom, tempDir, type Running } from "./servers.js";

/** An id loom hands out after its prefix: 26 characters of its alphabet. */
export const ID26 = "[0-9a-hjkmnp-tv-z]{26}";

export interface OpenAILoom extends Running {
  /** The base URL an OpenAI SDK is given: `<url>/openai/v1`. */
  baseURL: string;
}

/**
 * startScripted starts loom serve with the scripted demo model on a fresh
 * SQLite file; keys (tenant → key) turn on --keys, without them any key
 * works (the server listens on loopback); flags replace `--provider
 * scripted` (none: a server without a model).
 */
export async function startScripted(bin: string, keys?: Record<string, string>, flags: string[] = ["--provider", "scripted"]): Promise<OpenAILoom> {
  const dir = tempDir("loom-openai-");
  const s = await startLoom(bin, `sqlite://${join(dir, "loom.db")}`, keys, flags).catch((err: unknown) => {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  });
  return {
    ...s,
    baseURL: `${s.url}/openai/v1`,
    stop: async () => {
      await s.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * sdk is the official client against loom. maxRetries is 0: the SDK would
 * send a request that failed with 5xx/409/429 twice more, and a test wants
 * to see the first answer.
 */
export function sdk(server: OpenAILoom, apiKey: string): OpenAI {
  return new OpenAI({ baseURL: server.baseURL, apiKey, maxRetries: 0, timeout: 30_000 });
}

/** A loom message as loom's native API reads it (docs/wire-format.md). */
export interface NativeMessage {
  id: string;
  role: string;
  contents: Array<{ type: string; text?: string; call_id?: string; name?: string; arguments?: string; result?: unknown; [k: string]: unknown }>;
  metadata?: Record<string, unknown>;
}

export interface NativeThread {
  id: string;
  kind: string;
  title: string;
  labels: Record<string, string>;
  head?: string;
  version: number;
  forked_from?: { thread: string; commit?: string; message?: string };
}

export interface NativeHistory {
  entries: Array<{ version: number; commit?: string; op: string; time: string }>;
  next_before?: number;
}

/** Native talks to loom's own /v1 API with a tenant's key. */
export class Native {
  constructor(
    private readonly url: string,
    private readonly key: string,
  ) {}

  async call<T>(method: string, path: string, body?: unknown): Promise<T> {
    const res = await fetch(this.url + path, {
      method,
      headers: { authorization: `Bearer ${this.key}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
    return (text ? JSON.parse(text) : undefined) as T;
  }

  thread(id: string): Promise<NativeThread> {
    return this.call("GET", `/v1/threads/${id}`);
  }

  /**
   * messages reads all of a thread's messages (at version, else the head),
   * oldest first: loom answers the newest 100 and next_before when older
   * ones exist, so it pages back with before, every page at the version of
   * the first.
   */
  async messages(id: string, version?: number): Promise<NativeMessage[]> {
    type Page = { version: number; next_before?: string; messages: NativeMessage[] };
    const path = `/v1/threads/${id}/messages`;
    let page = await this.call<Page>("GET", version === undefined ? path : `${path}?version=${version}`);
    const pages = [page.messages];
    const at = page.version;
    while (page.next_before !== undefined) {
      page = await this.call<Page>("GET", `${path}?version=${at}&before=${encodeURIComponent(page.next_before)}`);
      pages.unshift(page.messages);
    }
    return pages.flat();
  }

  history(id: string): Promise<NativeHistory> {
    return this.call("GET", `/v1/threads/${id}/history`);
  }

  fork(id: string, body: Record<string, unknown> = {}): Promise<NativeThread> {
    return this.call("POST", `/v1/threads/${id}/fork`, body);
  }

  family(id: string): Promise<{ root: string; threads: NativeThread[] }> {
    return this.call("GET", `/v1/threads/${id}/family`);
  }
}

/** textOf is the text of a native message: its text contents joined. */
export function textOf(m: NativeMessage): string {
  return m.contents
    .filter((c) => c.type === "text")
    .map((c) => c.text ?? "")
    .join("");
}

/**
 * threadOfResponse is the loom thread a response id names: the contract
 * makes it `resp_<26 id chars>_<thread id>`.
 */
export function threadOfResponse(id: string): string {
  const m = new RegExp(`^resp_${ID26}_(.+)$`).exec(id);
  expect(m, `response id ${id}`).not.toBeNull();
  return m![1]!;
}

/** APIError is the SDK's error for a status answer. */
export type APIError = InstanceType<typeof OpenAI.APIError>;

/** rejection awaits p's failure and returns it (failing when p succeeds). */
export async function rejection(p: Promise<unknown>): Promise<unknown> {
  const outcome = await p.then(
    (v: unknown) => ({ ok: true as const, v }),
    (e: unknown) => ({ ok: false as const, e }),
  );
  if (outcome.ok) throw new Error(`expected a failure, got ${JSON.stringify(outcome.v)}`);
  return outcome.e;
}

/**
 * apiError awaits p's failure, checks it is an instance of cls (the SDK's
 * error class for the status) and returns it.
 */
export async function apiError<C extends abstract new (...args: never[]) => APIError>(p: Promise<unknown>, cls: C): Promise<InstanceType<C>> {
  const err = await rejection(p);
  expect(err).toBeInstanceOf(cls);
  return err as InstanceType<C>;
}

/** OpenAIErrorBody is the `error` member of OpenAI's error answers. */
export interface OpenAIErrorBody {
  message: string;
  type: string;
  param: string | null;
  code: string | null;
}

/** errorBody is the OpenAI error body an APIError carries. */
export function errorBody(err: APIError): OpenAIErrorBody {
  return err.error as OpenAIErrorBody;
}
