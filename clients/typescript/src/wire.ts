/**
 * The wire shapes of loom's LangGraph routes (/v1/langgraph/...): the
 * types generated from httpapi/openapi.json (src/generated/openapi.ts,
 * `npm run gen`), so they cannot drift from the server's document. Where
 * the document says an object is kept as given (a checkpoint's other
 * members, a message's fields), the type is widened to say so too.
 */
import type { components, operations } from "./generated/openapi.js";

type S = components["schemas"];

export type Config = S["LangGraphConfig"];
export type Blob = S["LangGraphBlob"];

type GeneratedStoredMessage = NonNullable<S["LangGraphValue"]["messages"]>[number];

/** A LangChain message in its stored form ({type, data}); data holds every field of the message. */
export type StoredMessageWire = Omit<GeneratedStoredMessage, "data"> & {
  data: GeneratedStoredMessage["data"] & Record<string, unknown>;
};

export type MessagesSum = S["LangGraphMessagesSum"];
export type Share = S["LangGraphShare"];

/**
 * A blob, or messages: a list of stored messages, which may be only the
 * rest of a list that begins with one named by extends (a put's parent's,
 * or a list a GET said it knows) or by shares (an earlier tuple's, in a
 * list's answer); sum names the whole list in answers. An answer's list
 * whose rest is empty comes without messages.
 */
export type Value =
  | { blob: Blob; messages?: undefined; extends?: undefined; shares?: undefined; sum?: undefined }
  | { blob?: undefined; messages?: StoredMessageWire[]; extends?: MessagesSum; shares?: Share; sum?: MessagesSum };

export type PutRequest = Omit<S["LangGraphPutRequest"], "checkpoint" | "channel_values"> & {
  checkpoint: S["LangGraphPutRequest"]["checkpoint"] & Record<string, unknown>;
  channel_values?: Record<string, Value>;
};
export type PutResponse = S["LangGraphPutResponse"];

/** getTuple's query: messages_n and messages_h (both or neither) name a list the client holds. */
export type GetQuery = operations["getLangGraphCheckpoint"]["parameters"]["query"];

export type Write = Omit<S["LangGraphWrite"], "value"> & { value: Value };
export type WritesRequest = Omit<S["LangGraphWritesRequest"], "writes"> & { writes: Write[] };

export type PendingWrite = Omit<S["LangGraphPendingWrite"], "value"> & { value: Value };

export type Tuple = Omit<S["LangGraphTuple"], "checkpoint" | "pending_writes"> & {
  checkpoint: Record<string, unknown> & { channel_values: Record<string, Value> };
  pending_writes: PendingWrite[];
};

export type ListRequest = S["LangGraphListRequest"];
export type ListResponse = Omit<S["LangGraphListResponse"], "checkpoints"> & { checkpoints: Tuple[] };

export type CopyRequest = S["LangGraphCopyRequest"];
export type PruneRequest = S["LangGraphPruneRequest"];
export type DeleteRunsRequest = S["LangGraphDeleteRunsRequest"];

export type DeltaRequest = S["LangGraphDeltaRequest"];
export type DeltaHistory = Omit<S["LangGraphDeltaHistory"], "seed" | "writes"> & { seed?: Value; writes: PendingWrite[] };
export type DeltaResponse = { channels: Record<string, DeltaHistory> };

export type ErrorBody = S["Error"];
export type ErrorCode = S["ErrorDetail"]["code"];

/**
 * Type-level checks that the widened shapes above still are the generated
 * ones: an assignment fails to compile when the document changes under them.
 */
type Assert<T extends true> = T;
type Extends<A, B> = [A] extends [B] ? true : false;
export type _WireChecks = [
  Assert<Extends<Value, S["LangGraphValue"]>>,
  Assert<Extends<PutRequest, S["LangGraphPutRequest"]>>,
  Assert<Extends<WritesRequest, S["LangGraphWritesRequest"]>>,
  Assert<Extends<S["LangGraphTuple"]["config"], Tuple["config"]>>,
  Assert<Extends<DeltaRequest, S["LangGraphDeltaRequest"]>>,
];
