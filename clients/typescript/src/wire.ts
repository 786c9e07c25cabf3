/**
 * The wire shapes of loom's LangGraph routes (/v1/langgraph/...), as
 * httpapi/openapi.json declares them. Hand-written until the generated
 * types land; replaced by aliases of src/generated/openapi.ts.
 */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

export interface Config {
  thread_id: string;
  checkpoint_ns: string;
  checkpoint_id?: string;
}

export interface Blob {
  type: string;
  data: string;
}

export interface StoredMessageWire {
  type: string;
  data: Record<string, unknown>;
}

export interface Value {
  blob?: Blob;
  messages?: StoredMessageWire[];
}

export interface PutRequest {
  config: Config;
  checkpoint: Record<string, unknown>;
  metadata: Record<string, unknown>;
  new_versions: Record<string, number | string>;
  channel_values: Record<string, Value>;
}

export interface PutResponse {
  config: Config;
}

export interface Write {
  idx: number;
  channel: string;
  value: Value;
}

export interface WritesRequest {
  config: Config;
  task_id: string;
  task_path: string;
  writes: Write[];
}

export interface PendingWrite {
  task_id: string;
  channel: string;
  value: Value;
  idx: number;
  task_path: string;
}

export interface Tuple {
  config: Config;
  checkpoint: Record<string, unknown>;
  metadata: Record<string, unknown>;
  parent_config?: Config | null;
  pending_writes: PendingWrite[];
}

export interface ListRequest {
  thread_id?: string;
  checkpoint_ns?: string;
  checkpoint_id?: string;
  filter?: Record<string, unknown>;
  before?: string;
  limit?: number;
}

export interface ListResponse {
  checkpoints: Tuple[];
}

export interface PruneRequest {
  thread_ids: string[];
  strategy: "keep_latest" | "delete";
}

export interface DeleteRunsRequest {
  run_ids: string[];
}

export interface DeltaRequest {
  config: Config;
  channels: string[];
}

export interface DeltaHistory {
  seed?: Value;
  writes: PendingWrite[];
}

export interface DeltaResponse {
  channels: Record<string, DeltaHistory>;
}

export interface ErrorBody {
  error: { code: string; message: string };
}

export interface CopyRequest {
  target_thread_id: string;
}
