import type {
  CopyRequest,
  DeleteRunsRequest,
  DeltaRequest,
  DeltaResponse,
  GetQuery,
  ListRequest,
  ListResponse,
  PruneRequest,
  PutRequest,
  PutResponse,
  Tuple,
  WritesRequest,
} from "./wire.js";

/**
 * An error loom serve answered with (its one shape,
 * `{"error": {"code", "message"}}`), or one on the way to it: `code` is
 * loom's (`not_found`, `invalid`, `conflict`, `unauthorized`, ...), or
 * `network` when no answer came (status 0), or `bad_response` when the
 * answer was not loom's.
 */
export class LoomError extends Error {
  readonly code: string;
  readonly status: number;

  constructor(code: string, message: string, status: number, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "LoomError";
    this.code = code;
    this.status = status;
  }
}

export interface LoomClientOptions {
  /** loom serve's base URL, e.g. `http://127.0.0.1:8080`. */
  url: string;
  /** Sent as `Authorization: Bearer <apiKey>` when loom serve runs with --keys. */
  apiKey?: string;
  /** The fetch to use; Node's global fetch when absent. */
  fetch?: typeof fetch;
}

type Query = Record<string, string | undefined>;

/**
 * A small typed client of loom serve's LangGraph routes: each method is one
 * HTTP round trip.
 */
export class LoomClient {
  readonly url: string;
  readonly #apiKey: string | undefined;
  readonly #fetch: typeof fetch;

  constructor(options: LoomClientOptions) {
    if (typeof options?.url !== "string" || options.url === "") {
      throw new TypeError("LoomClient: url is required");
    }
    this.url = options.url.replace(/\/+$/, "");
    this.#apiKey = options.apiKey === "" ? undefined : options.apiKey;
    this.#fetch = options.fetch ?? globalThis.fetch;
  }

  /** put: stores a checkpoint; answers its config. */
  putCheckpoint(body: PutRequest): Promise<PutResponse> {
    return this.#json<PutResponse>("POST", "/v1/langgraph/checkpoints", { body });
  }

  /** putWrites: stores the pending writes of one task. */
  async putWrites(body: WritesRequest): Promise<void> {
    await this.#send("POST", "/v1/langgraph/writes", { body });
  }

  /** getTuple: the checkpoint named (the latest without checkpoint_id), or undefined when there is none. */
  async getCheckpoint(query: GetQuery): Promise<Tuple | undefined> {
    try {
      return await this.#json<Tuple>("GET", "/v1/langgraph/checkpoint", {
        query: {
          thread_id: query.thread_id,
          checkpoint_ns: query.checkpoint_ns ?? "",
          checkpoint_id: query.checkpoint_id,
          messages_n: query.messages_n === undefined ? undefined : String(query.messages_n),
          messages_h: query.messages_h,
        },
      });
    } catch (err) {
      if (err instanceof LoomError && err.status === 404 && err.code === "not_found") {
        return undefined;
      }
      throw err;
    }
  }

  /** list: checkpoints newest first. */
  searchCheckpoints(body: ListRequest): Promise<ListResponse> {
    return this.#json<ListResponse>("POST", "/v1/langgraph/checkpoints/search", { body });
  }

  /** deleteThread: removes a LangGraph thread with every namespace (no error when missing). */
  async deleteThread(threadId: string): Promise<void> {
    await this.#send("DELETE", `/v1/langgraph/threads/${encodeURIComponent(threadId)}`, {});
  }

  /** copyThread: copies every checkpoint of a thread to a new thread id. */
  async copyThread(threadId: string, body: CopyRequest): Promise<void> {
    await this.#send("POST", `/v1/langgraph/threads/${encodeURIComponent(threadId)}/copy`, { body });
  }

  /** prune: keeps only each thread's latest checkpoint, or deletes the threads. */
  async prune(body: PruneRequest): Promise<void> {
    await this.#send("POST", "/v1/langgraph/prune", { body });
  }

  /** deleteForRuns: deletes the checkpoints whose metadata.run_id is one of the run ids. */
  async deleteRuns(body: DeleteRunsRequest): Promise<void> {
    await this.#send("POST", "/v1/langgraph/runs/delete", { body });
  }

  /** getDeltaChannelHistory: each channel's seed and writes along a checkpoint's ancestors. */
  deltaHistory(body: DeltaRequest): Promise<DeltaResponse> {
    return this.#json<DeltaResponse>("POST", "/v1/langgraph/delta-history", { body });
  }

  async #json<T>(method: string, path: string, init: { query?: Query; body?: unknown }): Promise<T> {
    const res = await this.#send(method, path, init);
    const text = await res.text();
    try {
      return JSON.parse(text) as T;
    } catch (cause) {
      throw new LoomError("bad_response", `loom serve answered ${method} ${path} with a body that is not JSON`, res.status, { cause });
    }
  }

  async #send(method: string, path: string, init: { query?: Query; body?: unknown }): Promise<Response> {
    let url = this.url + path;
    if (init.query) {
      const params = new URLSearchParams();
      for (const [k, v] of Object.entries(init.query)) {
        if (v !== undefined) params.set(k, v);
      }
      const qs = params.toString();
      if (qs) url += `?${qs}`;
    }
    const headers: Record<string, string> = { Accept: "application/json" };
    if (this.#apiKey !== undefined) headers.Authorization = `Bearer ${this.#apiKey}`;
    let body: string | undefined;
    if (init.body !== undefined) {
      headers["Content-Type"] = "application/json";
      body = JSON.stringify(init.body);
    }
    let res: Response;
    try {
      res = await this.#fetch(url, { method, headers, body });
    } catch (cause) {
      throw new LoomError("network", `${method} ${url}: ${cause instanceof Error ? cause.message : String(cause)}`, 0, { cause });
    }
    if (res.ok) return res;
    throw await errorFrom(res, method, path);
  }
}

/** errorFrom reads loom's error shape; an answer in another shape keeps its status. */
async function errorFrom(res: Response, method: string, path: string): Promise<LoomError> {
  let text = "";
  try {
    text = await res.text();
  } catch {
    // The status alone says enough.
  }
  try {
    const parsed: unknown = JSON.parse(text);
    if (typeof parsed === "object" && parsed !== null && "error" in parsed) {
      const e = (parsed as { error: unknown }).error;
      if (typeof e === "object" && e !== null) {
        const { code, message } = e as { code?: unknown; message?: unknown };
        if (typeof code === "string" && typeof message === "string") {
          return new LoomError(code, message, res.status);
        }
      }
    }
  } catch {
    // Not JSON: fall through.
  }
  return new LoomError("bad_response", `loom serve answered ${method} ${path} with status ${res.status}`, res.status);
}
