import type { BaseMessage } from "@langchain/core/messages";
import type { RunnableConfig } from "@langchain/core/runnables";
import {
  BaseCheckpointSaver,
  TASKS,
  WRITES_IDX_MAP,
  getCheckpointId,
  maxChannelVersion,
  type ChannelVersions,
  type Checkpoint,
  type CheckpointListOptions,
  type CheckpointMetadata,
  type CheckpointPendingWrite,
  type CheckpointTuple,
  type DeltaChannelHistory,
  type PendingWrite,
  type SerializerProtocol,
} from "@langchain/langgraph-checkpoint";
import { LoomClient, LoomError } from "./client.js";
import { KnownLists } from "./lists.js";
import { MESSAGES_CHANNEL, fromStoredMessages, toStoredMessages } from "./messages.js";
import type { Config, ListRequest, PendingWrite as WirePendingWrite, Tuple, Value, WritesRequest } from "./wire.js";

export interface LoomSaverOptions {
  /** loom serve's base URL, e.g. `http://127.0.0.1:8080`. */
  url: string;
  /** Sent as `Authorization: Bearer <apiKey>` when loom serve runs with --keys. */
  apiKey?: string;
  /** The serializer of channel values; LangGraph's JsonPlusSerializer when absent. */
  serde?: SerializerProtocol;
  /** The fetch to use; Node's global fetch when absent. */
  fetch?: typeof fetch;
}

/**
 * LoomSaver is a LangGraph checkpointer kept by loom serve: every method is
 * one HTTP round trip, a thread's checkpoints are a loom thread's commits,
 * and its `messages` channel is kept as loom messages, each stored once.
 *
 *     const checkpointer = new LoomSaver({ url: "http://127.0.0.1:8080", apiKey });
 *     const graph = workflow.compile({ checkpointer });
 */
export class LoomSaver extends BaseCheckpointSaver<number> {
  readonly client: LoomClient;

  /**
   * LangGraph's loop chains its puts one after another but sends a task's
   * writes as soon as the task ends, so the writes of a checkpoint can come
   * before its put has even been called (PostgresSaver takes them, its
   * writes table having no key on checkpoints; loom keeps writes with their
   * checkpoint). These remember which checkpoints loom has (put or read
   * here), which puts are in flight per thread, and the puts writes wait
   * for, so that such writes follow their checkpoint.
   */
  readonly #known = new RecentSet(10_000);
  /** Per thread, the requests in flight here; a put maps to its parent's key (it waits for that one's writes). */
  readonly #inflight = new Map<string, Map<Promise<unknown>, string | undefined>>();
  readonly #puts = new Map<string, Deferred>();
  /**
   * The writes this saver is sending, per checkpoint: a put waits for those
   * of its parent, so that loom takes a step's written messages before the
   * checkpoint that lists them (else it answers the put's extends 409 and
   * the whole list goes again).
   */
  readonly #writing = new Map<string, Set<Promise<unknown>>>();
  readonly #lists = new KnownLists();

  constructor(options: LoomSaverOptions) {
    super(options.serde);
    this.client = new LoomClient(options);
  }

  override async getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    const threadId = config.configurable?.thread_id as unknown;
    if (threadId === undefined || threadId === null || threadId === "") return undefined;
    const checkpointId = getCheckpointId(config);
    const ns = namespaceOf(config);
    const thread = threadKey(String(threadId), ns);
    // The list held for this checkpoint, or the last one put or got here:
    // loom then sends only the messages after it.
    const known = (checkpointId === "" ? undefined : this.#lists.get(thread, checkpointId)) ?? this.#lists.latest(thread);
    const tuple = await this.client.getCheckpoint({
      thread_id: String(threadId),
      checkpoint_ns: ns,
      checkpoint_id: checkpointId === "" ? undefined : checkpointId,
      messages_n: known?.n,
      messages_h: known?.h,
    });
    if (tuple === undefined) return undefined;
    const out = await this.#fromWire(tuple, []);
    await this.#migratePendingSends([out]);
    return out;
  }

  override async *list(config: RunnableConfig, options?: CheckpointListOptions): AsyncGenerator<CheckpointTuple> {
    const c = config.configurable ?? {};
    const body: ListRequest = {};
    if (c.thread_id !== undefined && c.thread_id !== null) body.thread_id = String(c.thread_id);
    if (c.checkpoint_ns !== undefined && c.checkpoint_ns !== null) body.checkpoint_ns = String(c.checkpoint_ns);
    const checkpointId = getCheckpointId(config);
    if (checkpointId !== "") body.checkpoint_id = checkpointId;
    if (options?.filter !== undefined) body.filter = options.filter;
    const before = options?.before === undefined ? "" : getCheckpointId(options.before);
    if (before !== "") body.before = before;
    if (options?.limit !== undefined) body.limit = options.limit;
    const { checkpoints } = await this.client.searchCheckpoints(body);
    // In order: a tuple's messages may begin with an earlier tuple's (shares).
    const lists: Array<BaseMessage[] | undefined> = [];
    const tuples: CheckpointTuple[] = [];
    for (const t of checkpoints) tuples.push(await this.#fromWire(t, lists));
    await this.#migratePendingSends(tuples);
    yield* tuples;
  }

  override async put(
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    newVersions: ChannelVersions,
  ): Promise<RunnableConfig> {
    if (config.configurable === undefined) throw new Error("LoomSaver.put: config.configurable is missing");
    const threadId = requireString(config.configurable.thread_id, "LoomSaver.put", "thread_id");
    const parentId = config.configurable.checkpoint_id as unknown;
    const wireConfig: Config = { thread_id: threadId, checkpoint_ns: namespaceOf(config) };
    if (typeof parentId === "string" && parentId !== "") wireConfig.checkpoint_id = parentId;
    const thread = threadKey(threadId, wireConfig.checkpoint_ns);
    const ck = checkpointKey(threadId, wireConfig.checkpoint_ns, String(checkpoint.id));
    // Before any await: writes sent from now on wait for this put.
    const waiting = new Deferred();
    this.#puts.set(ck, waiting);
    const parentCk = wireConfig.checkpoint_id === undefined ? undefined : checkpointKey(threadId, wireConfig.checkpoint_ns, wireConfig.checkpoint_id);
    let flying = this.#inflight.get(thread);
    if (flying === undefined) this.#inflight.set(thread, (flying = new Map()));
    const settled = waiting.promise.catch(() => {});
    flying.set(settled, parentCk);
    try {
      const parentWrites = parentCk === undefined ? undefined : this.#writing.get(parentCk);
      if (parentWrites !== undefined) await Promise.all(parentWrites);
      const { channel_values: values, ...header } = checkpoint;
      const all = (values ?? {}) as Record<string, unknown>;
      const channelValues: Record<string, Value> = {};
      let sentRest = false; // only the messages after the parent's went
      for (const channel of Object.keys(newVersions)) {
        if (!Object.prototype.hasOwnProperty.call(all, channel)) continue;
        const value = all[channel];
        if (channel === MESSAGES_CHANNEL && wireConfig.checkpoint_id !== undefined) {
          const rest = await this.#restOf(thread, wireConfig.checkpoint_id, value);
          if (rest !== undefined) {
            channelValues[channel] = rest;
            sentRest = true;
            continue;
          }
        }
        channelValues[channel] = await this.#toValue(channel, value);
      }
      const body = { config: wireConfig, checkpoint: header, metadata: metadata as Record<string, unknown>, new_versions: newVersions, channel_values: channelValues };
      let res;
      try {
        res = await this.client.putCheckpoint(body);
      } catch (err) {
        // loom's list for the parent is not the one held here: send it whole.
        if (!sentRest || !(err instanceof LoomError && err.code === "conflict")) throw err;
        const whole = await this.#toValue(MESSAGES_CHANNEL, all[MESSAGES_CHANNEL]);
        res = await this.client.putCheckpoint({ ...body, channel_values: { ...channelValues, [MESSAGES_CHANNEL]: whole } });
      }
      const list = all[MESSAGES_CHANNEL];
      if (res.messages !== undefined && Array.isArray(list)) this.#lists.set(thread, String(checkpoint.id), list.slice() as BaseMessage[], res.messages);
      this.#known.add(ck);
      waiting.resolve();
      return toRunnableConfig(res.config);
    } catch (err) {
      waiting.reject(err);
      throw err;
    } finally {
      if (this.#puts.get(ck) === waiting) this.#puts.delete(ck);
      flying.delete(settled);
      if (flying.size === 0 && this.#inflight.get(thread) === flying) this.#inflight.delete(thread);
    }
  }

  /**
   * restOf is the messages value that names the parent's list and holds
   * only what follows it, when this saver holds the parent's list and value
   * begins with those very message objects (LangGraph's reducer keeps
   * them); otherwise undefined, and the list goes whole.
   */
  async #restOf(thread: string, parentId: string, value: unknown): Promise<Value | undefined> {
    const parent = this.#lists.get(thread, parentId);
    if (parent === undefined || !Array.isArray(value) || value.length <= parent.n) return undefined;
    for (let i = 0; i < parent.n; i++) if (value[i] !== parent.list[i]) return undefined;
    const messages = await toStoredMessages(value.slice(parent.n), this.serde);
    if (messages === undefined) return undefined;
    return { messages, extends: { n: parent.n, h: parent.h } };
  }

  override async putWrites(config: RunnableConfig, writes: PendingWrite[], taskId: string, taskPath = ""): Promise<void> {
    const c = config.configurable;
    const threadId = requireString(c?.thread_id, "LoomSaver.putWrites", "thread_id");
    const checkpointId = requireString(c?.checkpoint_id, "LoomSaver.putWrites", "checkpoint_id");
    const wire = await Promise.all(
      writes.map(async ([channel, value], i) => ({
        idx: WRITES_IDX_MAP[channel] ?? i,
        channel,
        value: await this.#toValue(channel, value),
      })),
    );
    const ns = namespaceOf(config);
    const body = { config: { thread_id: threadId, checkpoint_ns: ns, checkpoint_id: checkpointId }, task_id: taskId, task_path: taskPath, writes: wire };
    const ck = checkpointKey(threadId, ns, checkpointId);
    const thread = threadKey(threadId, ns);
    const sending = this.#sendWrites(thread, ck, body);
    const done = sending.then(
      () => {},
      () => {},
    );
    let set = this.#writing.get(ck);
    if (set === undefined) this.#writing.set(ck, (set = new Set()));
    set.add(done);
    try {
      await sending;
    } finally {
      set.delete(done);
      if (set.size === 0 && this.#writing.get(ck) === set) this.#writing.delete(ck);
    }
  }

  async #sendWrites(thread: string, ck: string, body: WritesRequest): Promise<void> {
    await this.#afterPutOf(thread, ck);
    try {
      await this.#flying(thread, this.client.putWrites(body));
    } catch (err) {
      // A put this saver had not been asked for yet when the writes left:
      // once it is done, send them again.
      if (!(err instanceof LoomError && err.code === "not_found") || this.#known.has(ck)) throw err;
      await this.#afterPutOf(thread, ck);
      if (!this.#known.has(ck)) throw err;
      await this.#flying(thread, this.client.putWrites(body));
    }
  }

  /** flying counts p among the requests of thread in flight until it settles. */
  async #flying<T>(thread: string, p: Promise<T>): Promise<T> {
    const done = p.then(
      () => {},
      () => {},
    );
    let flying = this.#inflight.get(thread);
    if (flying === undefined) this.#inflight.set(thread, (flying = new Map()));
    flying.set(done, undefined);
    try {
      return await p;
    } finally {
      flying.delete(done);
      if (flying.size === 0 && this.#inflight.get(thread) === flying) this.#inflight.delete(thread);
    }
  }

  /**
   * afterPutOf returns once the writes of checkpoint key ck can follow it:
   * when loom has it (put or read here), when its put here is done (it
   * throws that put's error), or when no request of its thread is in flight
   * here (but a put waiting for ck's writes) and no put of ck started after
   * them. LangGraph's loop calls a put
   * a few microtasks after what it waits for settles (the put before it,
   * and the writes to delta channels before it), so a put of ck that is
   * coming has started by the next macrotask after those.
   */
  async #afterPutOf(thread: string, ck: string): Promise<void> {
    for (;;) {
      if (this.#known.has(ck)) return;
      const put = this.#puts.get(ck);
      if (put !== undefined) {
        await put.promise;
        return;
      }
      // A put that waits for these very writes is not waited for.
      const others = [...(this.#inflight.get(thread) ?? [])].filter(([, parent]) => parent !== ck).map(([p]) => p);
      if (others.length === 0) {
        await new Promise<void>((resolve) => setImmediate(resolve));
        if (this.#puts.has(ck)) continue;
        return;
      }
      await Promise.race(others);
    }
  }

  override async deleteThread(threadId: string): Promise<void> {
    this.#lists.forget(threadId);
    await this.client.deleteThread(threadId);
  }

  override async getDeltaChannelHistory(options: { config: RunnableConfig; channels: string[] }): Promise<Record<string, DeltaChannelHistory>> {
    const { config, channels } = options;
    if (channels.length === 0) return {};
    const threadId = requireString(config.configurable?.thread_id, "LoomSaver.getDeltaChannelHistory", "thread_id");
    const wireConfig: Config = { thread_id: threadId, checkpoint_ns: namespaceOf(config) };
    const checkpointId = getCheckpointId(config);
    if (checkpointId !== "") wireConfig.checkpoint_id = checkpointId;
    const res = await this.client.deltaHistory({ config: wireConfig, channels });
    const out: Record<string, DeltaChannelHistory> = {};
    for (const ch of channels) {
      const h = res.channels[ch];
      const entry: DeltaChannelHistory = { writes: await Promise.all((h?.writes ?? []).map((w) => this.#fromWireWrite(w))) };
      if (h?.seed !== undefined && h.seed !== null) entry.seed = await this.#fromValue(h.seed, threadKey(threadId, wireConfig.checkpoint_ns));
      out[ch] = entry;
    }
    return out;
  }

  /**
   * copyThread copies every checkpoint of a thread (all namespaces, with
   * their writes) to a thread id that has none; in loom a copy is O(1).
   */
  async copyThread(sourceThreadId: string, targetThreadId: string): Promise<void> {
    await this.client.copyThread(sourceThreadId, { target_thread_id: targetThreadId });
  }

  /**
   * prune keeps only the latest checkpoint of each thread ("keep_latest", the
   * default) or deletes the threads ("delete").
   */
  async prune(threadIds: string[], options?: { strategy?: "keep_latest" | "delete" }): Promise<void> {
    await this.client.prune({ thread_ids: threadIds, strategy: options?.strategy ?? "keep_latest" });
  }

  /** deleteForRuns deletes every checkpoint whose metadata.run_id is one of runIds, with its writes. */
  async deleteForRuns(runIds: string[]): Promise<void> {
    await this.client.deleteRuns({ run_ids: runIds });
  }

  async #toValue(channel: string, value: unknown): Promise<Value> {
    if (channel === MESSAGES_CHANNEL) {
      const messages = await toStoredMessages(value, this.serde);
      if (messages !== undefined) return { messages };
    }
    const [type, bytes] = await this.serde.dumpsTyped(value);
    return { blob: { type, data: Buffer.from(bytes).toString("base64") } };
  }

  /**
   * fromValue decodes a value; a list of messages that begins with one
   * loom names (extends: a list held here; shares: an earlier tuple's of the
   * same answer, in lists) is rebuilt on the very objects it begins with.
   */
  async #fromValue(value: Value, thread?: string, lists?: Array<BaseMessage[] | undefined>): Promise<unknown> {
    if (value.blob !== undefined && value.blob !== null) {
      return this.serde.loadsTyped(value.blob.type, new Uint8Array(Buffer.from(value.blob.data, "base64")));
    }
    if (value.messages === undefined && value.extends === undefined && value.shares === undefined) {
      throw new LoomError("bad_response", "loom serve answered a value that is neither a blob nor messages", 200);
    }
    const rest = fromStoredMessages(value.messages ?? []);
    let head: readonly BaseMessage[] = [];
    if (value.extends !== undefined && value.extends !== null) {
      const known = thread === undefined ? undefined : this.#lists.named(thread, value.extends);
      if (known === undefined) throw new LoomError("bad_response", `loom serve answered messages after a list of ${value.extends.n} this saver does not hold`, 200);
      head = known.list.slice(0, value.extends.n);
    } else if (value.shares !== undefined && value.shares !== null) {
      const earlier = lists?.[value.shares.tuple];
      if (earlier === undefined || earlier.length < value.shares.n) {
        throw new LoomError("bad_response", `loom serve answered messages after those of tuple ${value.shares.tuple}, which has none so many`, 200);
      }
      head = earlier.slice(0, value.shares.n);
    }
    return head.length === 0 ? rest : head.concat(rest);
  }

  async #fromWireWrite(w: WirePendingWrite): Promise<CheckpointPendingWrite> {
    return [w.task_id, w.channel, await this.#fromValue(w.value)];
  }

  /**
   * fromWire decodes a tuple of an answer; lists holds the messages of the
   * answer's tuples before it (for shares) and gets this one's.
   */
  async #fromWire(t: Tuple, lists: Array<BaseMessage[] | undefined>): Promise<CheckpointTuple> {
    const { channel_values: wireValues, ...header } = t.checkpoint as Record<string, unknown> & {
      channel_values?: Record<string, Value>;
    };
    const thread = threadKey(t.config.thread_id, t.config.checkpoint_ns ?? "");
    const channelValues: Record<string, unknown> = {};
    let messages: BaseMessage[] | undefined;
    for (const [ch, v] of Object.entries(wireValues ?? {})) {
      channelValues[ch] = await this.#fromValue(v, thread, lists);
      if (ch === MESSAGES_CHANNEL && v.blob === undefined && Array.isArray(channelValues[ch])) {
        messages = channelValues[ch] as BaseMessage[];
        if (v.sum !== undefined && v.sum !== null && t.config.checkpoint_id !== undefined) {
          this.#lists.set(thread, t.config.checkpoint_id, messages.slice(), v.sum);
        }
      }
    }
    lists.push(messages);
    const checkpoint = { ...header, channel_values: channelValues } as unknown as Checkpoint;
    const out: CheckpointTuple = {
      config: toRunnableConfig(t.config),
      checkpoint,
      metadata: t.metadata as unknown as CheckpointMetadata,
      pendingWrites: await Promise.all((t.pending_writes ?? []).map((w) => this.#fromWireWrite(w))),
    };
    if (t.parent_config) out.parentConfig = toRunnableConfig(t.parent_config);
    if (t.config.checkpoint_id !== undefined) this.#known.add(checkpointKey(t.config.thread_id, t.config.checkpoint_ns ?? "", t.config.checkpoint_id));
    return out;
  }

  /**
   * migratePendingSends gives a checkpoint of format v < 4 (before sends
   * became the TASKS channel) its parent's TASKS writes as that channel's
   * value, as LangGraph's own savers do. Only such old checkpoints cost a
   * second round trip, and only when their parent is not among the tuples
   * at hand.
   */
  async #migratePendingSends(tuples: CheckpointTuple[]): Promise<void> {
    const old = tuples.filter((t) => t.checkpoint.v < 4 && t.parentConfig !== undefined);
    if (old.length === 0) return;
    const byId = new Map(tuples.map((t) => [key(t.config), t]));
    for (const t of old) {
      const parentConfig = t.parentConfig as RunnableConfig;
      const parent = byId.get(key(parentConfig)) ?? (await this.getTuple(parentConfig));
      const sends = (parent?.pendingWrites ?? []).filter((w) => w[1] === TASKS).map((w) => w[2]);
      const versions = Object.values(t.checkpoint.channel_versions);
      t.checkpoint.channel_values[TASKS] = sends;
      t.checkpoint.channel_versions[TASKS] = versions.length > 0 ? maxChannelVersion(...versions) : this.getNextVersion(undefined);
    }
  }
}

function threadKey(threadId: string, ns: string): string {
  return JSON.stringify([threadId, ns]);
}

function checkpointKey(threadId: string, ns: string, checkpointId: string): string {
  return JSON.stringify([threadId, ns, checkpointId]);
}

/** A promise with its resolve and reject; a rejection nobody awaits is not reported. */
class Deferred {
  readonly promise: Promise<void>;
  resolve!: () => void;
  reject!: (err: unknown) => void;

  constructor() {
    this.promise = new Promise<void>((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
    this.promise.catch(() => {});
  }
}

/** RecentSet is a set that keeps only its last max members. */
class RecentSet {
  readonly #max: number;
  readonly #items = new Set<string>();

  constructor(max: number) {
    this.#max = max;
  }

  has(k: string): boolean {
    return this.#items.has(k);
  }

  add(k: string): void {
    this.#items.delete(k);
    this.#items.add(k);
    if (this.#items.size > this.#max) {
      const oldest = this.#items.values().next().value;
      if (oldest !== undefined) this.#items.delete(oldest);
    }
  }
}

function key(config: RunnableConfig): string {
  const c = config.configurable ?? {};
  return JSON.stringify([c.thread_id, c.checkpoint_ns ?? "", c.checkpoint_id]);
}

function namespaceOf(config: RunnableConfig): string {
  const ns = config.configurable?.checkpoint_ns as unknown;
  return typeof ns === "string" ? ns : "";
}

function requireString(v: unknown, method: string, field: string): string {
  if (typeof v === "string" && v !== "") return v;
  if (typeof v === "number") return String(v);
  throw new Error(`${method}: config.configurable.${field} is missing`);
}

function toRunnableConfig(c: Config): RunnableConfig {
  return {
    configurable: {
      thread_id: c.thread_id,
      checkpoint_ns: c.checkpoint_ns ?? "",
      checkpoint_id: c.checkpoint_id,
    },
  };
}
