import { isBaseMessage, mapStoredMessagesToChatMessages, type BaseMessage, type StoredMessage } from "@langchain/core/messages";
import type { SerializerProtocol } from "@langchain/langgraph-checkpoint";
import type { StoredMessageWire } from "./wire.js";

/**
 * The channel whose value loom keeps as its own messages (LangGraph's
 * MessagesAnnotation / messagesStateReducer); every other channel is a blob.
 */
export const MESSAGES_CHANNEL = "messages";

/**
 * verified remembers, for each message object already sent, the JSON of the
 * stored form that was shown to round-trip. A thread's state keeps the same
 * message objects from step to step, so each is checked once, not at every
 * checkpoint; a message changed in place has another stored form and is
 * checked again.
 */
const verified = new WeakMap<BaseMessage, string>();

/**
 * toStoredMessages returns value as LangChain's stored messages when it is a
 * non-empty list of messages, each with an id, that come back from their
 * stored form as the same message: the same class and the same serialized
 * bytes under serde (what a blob would have kept). Otherwise it returns
 * undefined and the caller sends the value as a blob, so nothing is lost
 * (a RemoveMessage, a chunk, a message without an id, a list of strings).
 */
export async function toStoredMessages(value: unknown, serde: SerializerProtocol): Promise<StoredMessageWire[] | undefined> {
  if (!Array.isArray(value) || value.length === 0) return undefined;
  const out: StoredMessageWire[] = [];
  for (const m of value) {
    if (!isBaseMessage(m) || typeof m.id !== "string" || m.id === "") return undefined;
    let json: string;
    try {
      const stored = m.toDict();
      // The type is the stored form's own member; loom gives a message's
      // type back in data too (Python's message_to_dict has it there), so
      // a data that has a type of its own could not come back as it was.
      if (Object.prototype.hasOwnProperty.call(stored.data, "type")) return undefined;
      json = JSON.stringify(stored);
    } catch {
      return undefined;
    }
    if (verified.get(m) !== json) {
      if (!(await roundTrips(m, json, serde))) return undefined;
      verified.set(m, json);
    }
    out.push(JSON.parse(json) as StoredMessageWire);
  }
  return out;
}

/** fromStoredMessages turns stored messages back into message objects. */
export function fromStoredMessages(stored: StoredMessageWire[]): BaseMessage[] {
  return mapStoredMessagesToChatMessages(
    stored.map((s) => {
      if (!Object.prototype.hasOwnProperty.call(s.data, "type")) return s as unknown as StoredMessage;
      // data.type is the stored form's type again (see toStoredMessages):
      // JS's toDict() has it only outside data.
      const { type: _type, ...data } = s.data;
      return { type: s.type, data } as unknown as StoredMessage;
    }),
  );
}

async function roundTrips(m: BaseMessage, json: string, serde: SerializerProtocol): Promise<boolean> {
  let back: BaseMessage | undefined;
  try {
    back = fromStoredMessages([JSON.parse(json) as StoredMessageWire])[0];
  } catch {
    return false;
  }
  if (back === undefined || back.constructor !== m.constructor) return false;
  try {
    const [t1, b1] = await serde.dumpsTyped(m);
    const [t2, b2] = await serde.dumpsTyped(back);
    return t1 === t2 && Buffer.from(b1).equals(Buffer.from(b2));
  } catch {
    return false;
  }
}
