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
import { LoomClient } from "./client.js";
import { MESSAGES_CHANNEL, fromStoredMessages, toStoredMessages } from "./messages.js";
import type { Config, ListRequest, PendingWrite as WirePendingWrite, Tuple, Value } from "./wire.js";

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

  constructor(options: LoomSaverOptions) {
    super(options.serde);
    this.client = new LoomClient(options);
  }

  override async getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    const threadId = config.configurable?.thread_id as unknown;
    if (threadId === undefined || threadId === null || threadId === "") return undefined;
    const checkpointId = getCheckpointId(config);
    const tuple = await this.client.getCheckpoint({
      thread_id: String(threadId),
      checkpoint_ns: namespaceOf(config),
      checkpoint_id: checkpointId === "" ? undefined : checkpointId,
    });
    if (tuple === undefined) return undefined;
    const out = await this.#fromWire(tuple);
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
    const tuples = await Promise.all(checkpoints.map((t) => this.#fromWire(t)));
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
    const { channel_values: values, ...header } = checkpoint;
    const channelValues: Record<string, Value> = {};
    for (const channel of Object.keys(newVersions)) {
      if (values !== undefined && Object.prototype.hasOwnProperty.call(values, channel)) {
        channelValues[channel] = await this.#toValue(channel, (values as Record<string, unknown>)[channel]);
      }
    }
    const wireConfig: Config = { thread_id: threadId, checkpoint_ns: namespaceOf(config) };
    if (typeof parentId === "string" && parentId !== "") wireConfig.checkpoint_id = parentId;
    const res = await this.client.putCheckpoint({
      config: wireConfig,
      checkpoint: header,
      metadata: metadata as Record<string, unknown>,
      new_versions: newVersions,
      channel_values: channelValues,
    });
    return toRunnableConfig(res.config);
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
    await this.client.putWrites({
      config: { thread_id: threadId, checkpoint_ns: namespaceOf(config), checkpoint_id: checkpointId },
      task_id: taskId,
      task_path: taskPath,
      writes: wire,
    });
  }

  override async deleteThread(threadId: string): Promise<void> {
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
      if (h?.seed !== undefined && h.seed !== null) entry.seed = await this.#fromValue(h.seed);
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

  async #fromValue(value: Value): Promise<unknown> {
    if (value.messages !== undefined && value.messages !== null) return fromStoredMessages(value.messages);
    if (value.blob !== undefined && value.blob !== null) {
      return this.serde.loadsTyped(value.blob.type, new Uint8Array(Buffer.from(value.blob.data, "base64")));
    }
    throw new Error("LoomSaver: loom serve answered a value that is neither a blob nor messages");
  }

  async #fromWireWrite(w: WirePendingWrite): Promise<CheckpointPendingWrite> {
    return [w.task_id, w.channel, await this.#fromValue(w.value)];
  }

  async #fromWire(t: Tuple): Promise<CheckpointTuple> {
    const { channel_values: wireValues, ...header } = t.checkpoint as Record<string, unknown> & {
      channel_values?: Record<string, Value>;
    };
    const channelValues: Record<string, unknown> = {};
    for (const [ch, v] of Object.entries(wireValues ?? {})) channelValues[ch] = await this.#fromValue(v);
    const checkpoint = { ...header, channel_values: channelValues } as unknown as Checkpoint;
    const out: CheckpointTuple = {
      config: toRunnableConfig(t.config),
      checkpoint,
      metadata: t.metadata as unknown as CheckpointMetadata,
      pendingWrites: await Promise.all((t.pending_writes ?? []).map((w) => this.#fromWireWrite(w))),
    };
    if (t.parent_config) out.parentConfig = toRunnableConfig(t.parent_config);
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
