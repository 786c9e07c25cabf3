/**
 * LangGraph.js's own conformance suite for checkpointers,
 * @langchain/langgraph-checkpoint-validation (pinned), used as a library
 * under vitest (its 1.1.1 CLI refuses every initializer): validate() and the
 * opt-in deltaChannelHistoryTests(), against LoomSaver on a real loom serve.
 */
import { deltaChannelHistoryTests, validate, type CheckpointSaverTestInitializer } from "@langchain/langgraph-checkpoint-validation";
import { describe, inject, it } from "vitest";
import { LoomSaver } from "../src/index.js";

export function validateOn(store: string): void {
  const { stores, keys } = inject("loom");
  const url = stores[store];
  if (url === undefined) {
    describe.skip(`LoomSaver on ${store} (not started: LOOM_TS_STORES)`, () => {
      it("is skipped", () => {});
    });
    return;
  }
  const initializer: CheckpointSaverTestInitializer<LoomSaver> = {
    // Not a name the suite exempts from any test.
    checkpointerName: `LoomSaver (${store})`,
    createCheckpointer: () => new LoomSaver({ url, apiKey: keys.validation }),
    // Each suite expects a store with only its own threads (list without a
    // thread_id sees them all): delete every thread the suite made.
    destroyCheckpointer: async (saver) => {
      const threads = new Set<string>();
      for await (const t of saver.list({})) threads.add(String(t.config.configurable?.thread_id));
      for (const id of threads) await saver.deleteThread(id);
    },
  };
  validate(initializer);
  deltaChannelHistoryTests(initializer);
}
