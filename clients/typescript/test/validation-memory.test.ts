/**
 * The same suite on LangGraph's MemorySaver, as the reference the counts are
 * read against: it passes all but the one test it is exempt from ("should
 * only store channel_values that have changed"), which LoomSaver passes.
 */
import { MemorySaver } from "@langchain/langgraph-checkpoint";
import { deltaChannelHistoryTests, validate } from "@langchain/langgraph-checkpoint-validation";

const initializer = { checkpointerName: "MemorySaver", createCheckpointer: () => new MemorySaver() };
validate(initializer);
deltaChannelHistoryTests(initializer);
