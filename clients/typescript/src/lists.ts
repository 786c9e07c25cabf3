import type { BaseMessage } from "@langchain/core/messages";
import type { MessagesSum } from "./wire.js";

/** A list of message objects the saver holds, and loom's name for it. */
export interface KnownList {
  list: readonly BaseMessage[];
  n: number;
  h: string;
}

/**
 * KnownLists keeps, for the last few threads (thread_id and namespace),
 * the message lists of their last few checkpoints that loom has named
 * (a put's answer, a GET's or a list's sum), so that a put sends only the
 * messages its parent's list lacks and a GET gets only those the saver
 * does not hold. Least recently used first out.
 */
export class KnownLists {
  readonly #perThread: number;
  readonly #threads: number;
  readonly #map = new Map<string, Map<string, KnownList>>();

  constructor(perThread = 8, threads = 1000) {
    this.#perThread = perThread;
    this.#threads = threads;
  }

  #thread(thread: string, create: boolean): Map<string, KnownList> | undefined {
    let m = this.#map.get(thread);
    if (m !== undefined) {
      this.#map.delete(thread);
      this.#map.set(thread, m);
    } else if (create) {
      m = new Map();
      this.#map.set(thread, m);
      if (this.#map.size > this.#threads) {
        const oldest = this.#map.keys().next().value;
        if (oldest !== undefined) this.#map.delete(oldest);
      }
    }
    return m;
  }

  /** get is checkpoint's list, when held. */
  get(thread: string, checkpointId: string): KnownList | undefined {
    return this.#thread(thread, false)?.get(checkpointId);
  }

  /** latest is the list the saver last put or got on thread. */
  latest(thread: string): KnownList | undefined {
    const m = this.#thread(thread, false);
    if (m === undefined) return undefined;
    let last: KnownList | undefined;
    for (const v of m.values()) last = v;
    return last;
  }

  /** named is a held list of thread that loom names sum, when there is one. */
  named(thread: string, sum: MessagesSum): KnownList | undefined {
    const m = this.#thread(thread, false);
    if (m === undefined) return undefined;
    for (const v of m.values()) if (v.n === sum.n && v.h === sum.h) return v;
    return undefined;
  }

  set(thread: string, checkpointId: string, list: readonly BaseMessage[], sum: MessagesSum): void {
    if (list.length !== sum.n) return; // not the list loom named
    const m = this.#thread(thread, true)!;
    m.delete(checkpointId);
    m.set(checkpointId, { list, n: sum.n, h: sum.h });
    if (m.size > this.#perThread) {
      const oldest = m.keys().next().value;
      if (oldest !== undefined) m.delete(oldest);
    }
  }

  /** forget drops what is held of thread (all its namespaces), as deleteThread does on the server. */
  forget(threadId: string): void {
    for (const k of [...this.#map.keys()]) {
      if ((JSON.parse(k) as [string, string])[0] === threadId) this.#map.delete(k);
    }
  }
}
