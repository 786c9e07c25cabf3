import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    // @langchain/langgraph-checkpoint-validation's specs call describe/it/expect as globals.
    globals: true,
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/globalSetup.ts"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // The machine has two cores; the stores' files run side by side, not more.
    maxWorkers: 2,
  },
});
