/**
 * The chat agent of the end-to-end tests and the benchmark: a real LangGraph
 * StateGraph (MessagesAnnotation, an agent node, a ToolNode) whose model is a
 * fake from LangChain's core package that calls a tool on each question and
 * answers once the tool has answered. No network; everything it says is
 * fixed by its input, so two runs on two checkpointers say the same things
 * with the same message ids.
 */
import { BaseChatModel, type BaseChatModelParams } from "@langchain/core/language_models/chat_models";
import { AIMessage, HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import type { ChatResult } from "@langchain/core/outputs";
import { tool } from "@langchain/core/tools";
import { Annotation, END, MessagesAnnotation, START, StateGraph, interrupt, type BaseCheckpointSaver } from "@langchain/langgraph";
import { ToolNode } from "@langchain/langgraph/prebuilt";
import { z } from "zod";

/** The sizes of what a turn says, in bytes (about). */
export interface Sizes {
  question: number;
  toolResult: number;
  answer: number;
}

export const defaultSizes: Sizes = { question: 40, toolResult: 60, answer: 80 };

/** filler is n bytes of text that starts with what. */
export function filler(what: string, n: number): string {
  const words = " lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor";
  let s = what;
  while (s.length < n) s += words;
  return s.slice(0, Math.max(n, what.length));
}

/**
 * FakeToolCallingModel asks the search tool about every human message and
 * answers every tool message. Its messages' ids and tool call ids are
 * numbered by the length of the conversation it is given.
 */
export class FakeToolCallingModel extends BaseChatModel {
  readonly sizes: Sizes;

  constructor(sizes: Sizes = defaultSizes, params: BaseChatModelParams = {}) {
    super(params);
    this.sizes = sizes;
  }

  _llmType(): string {
    return "fake-tool-calling";
  }

  async _generate(messages: BaseMessage[]): Promise<ChatResult> {
    const n = messages.length;
    const last = messages[n - 1];
    let message: AIMessage;
    if (last !== undefined && ToolMessage.isInstance(last)) {
      message = new AIMessage({
        id: `ai-${n}`,
        content: filler(`answer ${n}: `, this.sizes.answer),
        response_metadata: { model_name: "fake", finish_reason: "stop" },
        usage_metadata: { input_tokens: n, output_tokens: 7, total_tokens: n + 7 },
      });
    } else {
      const question = last === undefined ? "" : String(last.content).slice(0, 40);
      message = new AIMessage({
        id: `ai-${n}`,
        content: "",
        tool_calls: [{ id: `call-${n}`, name: "search", args: { query: question }, type: "tool_call" }],
        additional_kwargs: { reasoning: `looking up ${n}` },
        response_metadata: { model_name: "fake", finish_reason: "tool_calls" },
      });
    }
    return { generations: [{ message, text: typeof message.content === "string" ? message.content : "" }] };
  }
}

export interface GraphOptions {
  sizes?: Sizes;
  /** Adds an "approve" node before the tools that asks a person (interrupt) and records the answer. */
  approval?: boolean;
  /** Runs inside the search tool before it answers (the crash test hangs here). */
  inTool?: (query: string) => Promise<void>;
}

export const AgentState = Annotation.Root({
  ...MessagesAnnotation.spec,
  approvals: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
});

/** buildGraph compiles the chat agent on checkpointer. */
export function buildGraph(checkpointer: BaseCheckpointSaver, options: GraphOptions = {}) {
  const sizes = options.sizes ?? defaultSizes;
  const model = new FakeToolCallingModel(sizes);
  const search = tool(
    async ({ query }: { query: string }, config) => {
      await options.inTool?.(query);
      const callId = String(config.toolCall?.id ?? "");
      return new ToolMessage({
        id: `tool-${callId}`,
        tool_call_id: callId,
        name: "search",
        content: filler(`found for ${query}: `, sizes.toolResult),
        artifact: { hits: 3 },
      });
    },
    { name: "search", description: "Searches the notes.", schema: z.object({ query: z.string() }) },
  );
  const agent = async (state: typeof AgentState.State) => ({ messages: [await model.invoke(state.messages)] });
  const approve = async () => {
    const answer = interrupt<string, string>("may I search?");
    return { approvals: [answer] };
  };
  const route = (state: typeof AgentState.State) => {
    const last = state.messages[state.messages.length - 1];
    if (last !== undefined && AIMessage.isInstance(last) && (last.tool_calls?.length ?? 0) > 0) {
      return options.approval ? "approve" : "tools";
    }
    return END;
  };
  const g = new StateGraph(AgentState)
    .addNode("agent", agent)
    .addNode("tools", new ToolNode([search]))
    .addNode("approve", approve)
    .addEdge(START, "agent")
    .addConditionalEdges("agent", route, ["tools", "approve", END])
    .addEdge("approve", "tools")
    .addEdge("tools", "agent");
  return g.compile({ checkpointer });
}

/** question is the human message of turn i. */
export function question(i: number, sizes: Sizes = defaultSizes): HumanMessage {
  return new HumanMessage({ id: `human-${i}`, content: filler(`question ${i}: `, sizes.question) });
}
