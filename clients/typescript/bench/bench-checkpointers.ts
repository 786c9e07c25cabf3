/**
 * Side by side: the chat agent of test/graph.ts for N turns (default 500) on
 * LoomSaver (loom serve on SQLite, over HTTP), on LangGraph's SqliteSaver
 * and on its PostgresSaver, each through its public API. A turn is a user
 * message (~200 bytes), a tool call, the tool's result (~300 bytes) and the
 * answer (~800 bytes). Prints a markdown table: per-turn time (mean of the
 * first 100 and of the last 100 turns), getState, a history of 10, bytes on
 * disk (the database's files with their WAL; pg_total_relation_size of
 * PostgresSaver's tables) and the raw message bytes (the sum of
 * JSON.stringify of each final message's stored form).
 *
 *     npx tsx bench/bench-checkpointers.ts [--turns 500] [--savers loom,sqlite,postgres]
 *
 * Not run by the tests: it takes minutes, and the machine is shared.
 */
import { readdirSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";
import type { BaseMessage } from "@langchain/core/messages";
import type { BaseCheckpointSaver } from "@langchain/langgraph";
import { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";
import pg from "pg";
import { LoomSaver } from "../src/index.js";
import { buildGraph, question, type Sizes } from "../test/graph.js";
import { loomBinary, pgserveBinary, startLoom, startPostgres, tempDir } from "../test/servers.js";

const { values: args } = parseArgs({
  options: {
    turns: { type: "string", default: "500" },
    savers: { type: "string", default: "loom,sqlite,postgres" },
    samples: { type: "string", default: "20" },
  },
});
const turns = Number(args.turns);
const samples = Number(args.samples);
const sizes: Sizes = { question: 200, toolResult: 300, answer: 800 };

interface Result {
  name: string;
  first: number;
  last: number;
  getState: number;
  history10: number;
  disk: number;
  /** The files' bytes once the store is closed (SQLite folds its WAL in); undefined where not files. */
  atRest?: number;
  raw: number;
}

interface Subject {
  name: string;
  saver: BaseCheckpointSaver;
  disk(): Promise<number>;
  close(): Promise<void>;
  /** The bytes on disk after close, for a store kept in files. */
  atRest?(): number;
}

function mean(xs: number[]): number {
  return xs.reduce((a, b) => a + b, 0) / Math.max(xs.length, 1);
}

/** dirBytes is the size of the files in dir (a database with its WAL), each said on stderr. */
function dirBytes(dir: string): number {
  let n = 0;
  for (const f of readdirSync(dir)) {
    const size = statSync(join(dir, f)).size;
    process.stderr.write(`  ${f}: ${size} bytes\n`);
    n += size;
  }
  return n;
}

async function run(subject: Subject): Promise<Result> {
  const graph = buildGraph(subject.saver, { sizes });
  const config = { configurable: { thread_id: "bench" } };
  const times: number[] = [];
  for (let i = 1; i <= turns; i++) {
    const t0 = performance.now();
    await graph.invoke({ messages: [question(i, sizes)] }, config);
    times.push(performance.now() - t0);
    if (i % 50 === 0) process.stderr.write(`${subject.name}: turn ${i}, ${times[times.length - 1]!.toFixed(1)} ms\n`);
  }
  const getState: number[] = [];
  const history: number[] = [];
  let state;
  for (let i = 0; i < samples; i++) {
    let t0 = performance.now();
    state = await graph.getState(config);
    getState.push(performance.now() - t0);
    t0 = performance.now();
    let n = 0;
    for await (const _ of graph.getStateHistory(config, { limit: 10 })) n++;
    history.push(performance.now() - t0);
    if (n !== 10) throw new Error(`${subject.name}: a history of ${n}, not 10`);
  }
  const messages = (state!.values as { messages: BaseMessage[] }).messages;
  if (messages.length !== 4 * turns) throw new Error(`${subject.name}: ${messages.length} messages after ${turns} turns`);
  const raw = messages.reduce((n, m) => n + Buffer.byteLength(JSON.stringify(m.toDict())), 0);
  return {
    name: subject.name,
    first: mean(times.slice(0, 100)),
    last: mean(times.slice(-100)),
    getState: mean(getState),
    history10: mean(history),
    disk: await subject.disk(),
    raw,
  };
}

async function loomSubject(dir: string): Promise<Subject> {
  const dbDir = join(dir, "loom");
  rmSync(dbDir, { recursive: true, force: true });
  const { mkdirSync } = await import("node:fs");
  mkdirSync(dbDir);
  const server = await startLoom(loomBinary(dir), `sqlite://${join(dbDir, "loom.db")}`);
  return {
    name: "LoomSaver (loom serve, SQLite, HTTP)",
    saver: new LoomSaver({ url: server.url }),
    disk: async () => dirBytes(dbDir),
    close: () => server.stop(),
    atRest: () => dirBytes(dbDir),
  };
}

async function sqliteSubject(dir: string): Promise<Subject> {
  const dbDir = join(dir, "sqlite");
  const { mkdirSync } = await import("node:fs");
  mkdirSync(dbDir, { recursive: true });
  const saver = SqliteSaver.fromConnString(join(dbDir, "checkpoints.sqlite"));
  return {
    name: "SqliteSaver",
    saver,
    disk: async () => dirBytes(dbDir),
    close: async () => saver.db.close(),
    atRest: () => dirBytes(dbDir),
  };
}

async function postgresSubject(dir: string): Promise<Subject> {
  const server = await startPostgres(pgserveBinary(dir));
  const url = server.urls[0]!;
  const saver = PostgresSaver.fromConnString(url);
  await saver.setup();
  return {
    name: "PostgresSaver",
    saver,
    disk: async () => {
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        const r = await client.query<{ bytes: string }>(
          `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::text AS bytes
             FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE c.relkind = 'r' AND n.nspname NOT IN ('pg_catalog', 'information_schema')`,
        );
        return Number(r.rows[0]!.bytes);
      } finally {
        await client.end();
      }
    },
    close: async () => {
      await saver.end();
      await server.stop();
    },
  };
}

function fmtBytes(n: number): string {
  if (n >= 1 << 30) return `${(n / (1 << 30)).toFixed(2)} GiB`;
  if (n >= 1 << 20) return `${(n / (1 << 20)).toFixed(1)} MiB`;
  if (n >= 1 << 10) return `${(n / (1 << 10)).toFixed(1)} KiB`;
  return `${n} B`;
}

const dir = tempDir("loom-bench-");
const makers: Record<string, (dir: string) => Promise<Subject>> = { loom: loomSubject, sqlite: sqliteSubject, postgres: postgresSubject };
const results: Result[] = [];
try {
  for (const name of args.savers!.split(",").map((s) => s.trim())) {
    const make = makers[name];
    if (!make) throw new Error(`unknown saver ${name}: loom, sqlite or postgres`);
    const subject = await make(dir);
    let result: Result | undefined;
    try {
      result = await run(subject);
    } finally {
      await subject.close();
    }
    if (subject.atRest) result.atRest = subject.atRest();
    results.push(result);
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}

const window = Math.min(100, turns);
console.log(`${turns} turns of the chat agent (a tool call each turn; messages of ~200, ~300 and ~800 bytes), Node ${process.version}\n`);
console.log(
  `| checkpointer | turn, first ${window} (ms) | turn, last ${window} (ms) | getState (ms) | history of 10 (ms) | bytes on disk (with WAL) | disk / raw | at rest (closed) | at rest / raw | raw message bytes |`,
);
console.log("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
for (const r of results) {
  const rest = r.atRest === undefined ? "—" : fmtBytes(r.atRest);
  const restRatio = r.atRest === undefined ? "—" : `${(r.atRest / r.raw).toFixed(1)}×`;
  console.log(
    `| ${r.name} | ${r.first.toFixed(2)} | ${r.last.toFixed(2)} | ${r.getState.toFixed(2)} | ${r.history10.toFixed(2)} | ${fmtBytes(r.disk)} | ${(r.disk / r.raw).toFixed(1)}× | ${rest} | ${restRatio} | ${fmtBytes(r.raw)} |`,
  );
}
