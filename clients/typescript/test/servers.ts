/**
 * Real servers for the tests and the benchmark: `loom serve` (the binary
 * from $LOOM_BIN, or built from this repository) on SQLite or on a throwaway
 * PostgreSQL from internal/testserver/pgserve ($LOOM_PGSERVE, or built).
 * Nothing is mocked: the tests talk HTTP to the server users run.
 */
import { spawn, execFileSync, type ChildProcess } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

/** The repository's root: two levels up from clients/typescript. */
export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");

/** goBuild builds a package of the repository into dir and returns the binary's path. */
function goBuild(dir: string, pkg: string, name: string): string {
  const out = join(dir, name);
  execFileSync("go", ["build", "-o", out, pkg], { cwd: repoRoot, stdio: ["ignore", "inherit", "inherit"] });
  return out;
}

/** loomBinary is $LOOM_BIN, or loom built once into dir. */
export function loomBinary(dir: string): string {
  return process.env.LOOM_BIN || goBuild(dir, "./cmd/loom", "loom");
}

/** pgserveBinary is $LOOM_PGSERVE, or pgserve built once into dir. */
export function pgserveBinary(dir: string): string {
  return process.env.LOOM_PGSERVE || goBuild(dir, "./internal/testserver/pgserve", "pgserve");
}

export function tempDir(prefix: string): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

export interface Running {
  url: string;
  proc: ChildProcess;
  stop(): Promise<void>;
}

/**
 * matches waits for the first count lines of stream that match re (their
 * first group), failing when the process exits first or after timeoutMs.
 */
function matches(proc: ChildProcess, stream: NodeJS.ReadableStream, re: RegExp, what: string, timeoutMs: number, count = 1): Promise<string[]> {
  return new Promise((resolvePromise, reject) => {
    const lines: string[] = [];
    const found: string[] = [];
    const rl = createInterface({ input: stream });
    const timer = setTimeout(() => {
      rl.close();
      reject(new Error(`${what}: not ready after ${timeoutMs} ms; it said:\n${lines.join("\n")}`));
    }, timeoutMs);
    const onExit = (code: number | null, signal: string | null) => {
      clearTimeout(timer);
      reject(new Error(`${what}: exited (${code ?? signal}) before it was ready; it said:\n${lines.join("\n")}`));
    };
    proc.once("exit", onExit);
    rl.on("line", (line) => {
      lines.push(line);
      const m = re.exec(line);
      if (m) found.push(m[1] ?? m[0]);
      if (found.length === count) {
        clearTimeout(timer);
        proc.off("exit", onExit);
        rl.removeAllListeners("line");
        rl.on("line", () => {}); // keep draining so the child never blocks on a full pipe
        resolvePromise(found);
      }
    });
  });
}

async function terminate(proc: ChildProcess, signal: NodeJS.Signals = "SIGTERM"): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return;
  const exited = once(proc, "exit");
  proc.kill(signal);
  const timer = setTimeout(() => proc.kill("SIGKILL"), 10_000);
  await exited;
  clearTimeout(timer);
}

/**
 * startLoom runs `loom serve --addr 127.0.0.1:0 --store <store>` and waits
 * for its start line, {"msg":"listening","url":"http://...",...}, on its stderr. keys is a map of tenant
 * to API key, written to a --keys file when given; extra are more flags
 * (the OpenAI SDK tests give `--provider scripted`).
 */
export async function startLoom(bin: string, store: string, keys?: Record<string, string>, extra: string[] = []): Promise<Running> {
  const args = ["serve", "--addr", "127.0.0.1:0", "--store", store, ...extra];
  if (keys && Object.keys(keys).length > 0) {
    const file = join(tempDir("loom-keys-"), "keys");
    writeFileSync(file, Object.entries(keys).map(([tenant, key]) => `${tenant}:${key}\n`).join(""), { mode: 0o600 });
    args.push("--keys", file);
  }
  const proc = spawn(bin, args, { stdio: ["ignore", "ignore", "pipe"], env: { ...process.env, LOOM_API_KEYS: "" } });
  const [url] = await matches(proc, proc.stderr!, /"msg":"listening","url":"(http:\/\/[^"]+)"/, `loom serve --store ${store}`, 60_000);
  return { url: url!, proc, stop: () => terminate(proc) };
}

/**
 * startPostgres runs pgserve for n fresh databases; it keeps the server
 * until its stdin closes.
 */
export async function startPostgres(bin: string, n = 1): Promise<{ urls: string[]; stop(): Promise<void> }> {
  const proc = spawn(bin, ["-n", String(n)], { stdio: ["pipe", "pipe", "inherit"] });
  const urls = await matches(proc, proc.stdout!, /^(postgres(?:ql)?:\/\/\S+)$/, "pgserve", 120_000, n);
  return {
    urls,
    stop: async () => {
      if (proc.exitCode !== null || proc.signalCode !== null) return;
      const exited = once(proc, "exit");
      proc.stdin?.end();
      const timer = setTimeout(() => proc.kill("SIGTERM"), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
