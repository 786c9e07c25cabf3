/**
 * The README's TypeScript example under "Use loom from the OpenAI SDKs",
 * run as a user would: the block is taken from the repository's README.md,
 * its base URL pointed at a real `loom serve --provider scripted` started
 * without keys (any key works on loopback), written to a file beside this
 * package's node_modules and run with tsx. It must print the demo model's
 * answer.
 */
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { startScripted, type OpenAILoom } from "./openai.js";
import { repoRoot } from "./servers.js";

const SECTION = "## Use loom from the OpenAI SDKs";
const README_BASE_URL = "http://127.0.0.1:8080/openai/v1";
const pkgDir = resolve(dirname(fileURLToPath(import.meta.url)), "..");

const { loomBin } = inject("loom");
let server: OpenAILoom;

beforeAll(async () => {
  server = await startScripted(loomBin);
});

afterAll(async () => {
  await server?.stop();
});

/**
 * snippet is the first ```ts block of the README's section (up to the next
 * "## " heading).
 */
function snippet(readme: string): string {
  const start = readme.indexOf(`${SECTION}\n`);
  if (start < 0) throw new Error(`README.md has no "${SECTION}" section`);
  const rest = readme.slice(start + SECTION.length);
  const end = rest.search(/\n## /);
  const section = end < 0 ? rest : rest.slice(0, end);
  const m = /```(?:ts|typescript)\n([\s\S]*?)```/.exec(section);
  if (!m) throw new Error(`README.md's "${SECTION}" has no \`\`\`ts block`);
  return m[1]!;
}

describe("README", () => {
  it("runs its TypeScript OpenAI SDK example against loom", async () => {
    const code = snippet(readFileSync(join(repoRoot, "README.md"), "utf8"));
    expect(code.trim().split("\n").length).toBeLessThanOrEqual(5);
    expect(code).toContain(README_BASE_URL);
    const dir = mkdtempSync(join(pkgDir, ".readme-"));
    try {
      const file = join(dir, "example.mts");
      writeFileSync(file, code.replaceAll(README_BASE_URL, server.baseURL));
      const { stdout } = await promisify(execFile)(join(pkgDir, "node_modules", ".bin", "tsx"), [file], { cwd: dir, timeout: 60_000 });
      expect(stdout).toBe("You said: Hello!\n");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
