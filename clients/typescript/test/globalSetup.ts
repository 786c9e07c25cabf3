/**
 * Starts the servers every test file shares: one `loom serve` on SQLite and
 * one on PostgreSQL (pgserve), each with API keys for several tenants, so
 * that each test file keeps to its own tenant and no file sees another's
 * threads. $LOOM_TS_STORES (default "sqlite,postgres") picks the stores.
 */
import { randomBytes } from "node:crypto";
import { rmSync } from "node:fs";
import { join } from "node:path";
import type { TestProject } from "vitest/node";
import { loomBinary, pgserveBinary, startLoom, startPostgres, tempDir } from "./servers.js";

export const TENANTS = ["validation", "e2e", "ops", "messages"] as const;
export type Tenant = (typeof TENANTS)[number];

export interface LoomServers {
  /** Each store's loom serve URL. */
  stores: Record<string, string>;
  /** Each tenant's API key (the same on every store). */
  keys: Record<Tenant, string>;
  /** The loom binary the servers run. */
  loomBin: string;
}

declare module "vitest" {
  export interface ProvidedContext {
    loom: LoomServers;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const wanted = (process.env.LOOM_TS_STORES ?? "sqlite,postgres").split(",").map((s) => s.trim()).filter(Boolean);
  const dir = tempDir("loom-ts-tests-");
  const stops: Array<() => Promise<void>> = [];
  const teardown = async () => {
    for (const stop of stops.reverse()) await stop();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const loomBin = loomBinary(dir);
    const keys = Object.fromEntries(TENANTS.map((t) => [t, randomBytes(16).toString("hex")])) as Record<Tenant, string>;
    const stores: Record<string, string> = {};
    if (wanted.includes("sqlite")) {
      const s = await startLoom(loomBin, `sqlite://${join(dir, "loom.db")}`, keys);
      stops.push(s.stop);
      stores.sqlite = s.url;
    }
    if (wanted.includes("postgres")) {
      const pg = await startPostgres(pgserveBinary(dir));
      stops.push(pg.stop);
      const s = await startLoom(loomBin, pg.urls[0]!, keys);
      stops.push(s.stop);
      stores.postgres = s.url;
    }
    project.provide("loom", { stores, keys, loomBin });
  } catch (err) {
    await teardown();
    throw err;
  }
  return teardown;
}
