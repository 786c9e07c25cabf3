/**
 * src/generated/openapi.ts is what `npm run gen` makes of
 * httpapi/openapi.json today: regenerate it and compare, so that a change
 * to the document that the committed types miss fails here.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { expect, it } from "vitest";

const root = fileURLToPath(new URL("..", import.meta.url));

it("src/generated/openapi.ts is up to date with httpapi/openapi.json (npm run gen)", () => {
  const dir = mkdtempSync(join(tmpdir(), "loom-gen-"));
  try {
    const out = join(dir, "openapi.ts");
    // The same command as the gen script, into a file of its own.
    const gen = JSON.parse(readFileSync(join(root, "package.json"), "utf8")).scripts.gen as string;
    const args = gen.split(/\s+/).slice(1).map((a) => (a === "src/generated/openapi.ts" ? out : a));
    execFileSync(join(root, "node_modules", ".bin", "openapi-typescript"), args, { cwd: root, stdio: "pipe" });
    const committed = readFileSync(join(root, "src", "generated", "openapi.ts"), "utf8");
    expect(readFileSync(out, "utf8") === committed, "src/generated/openapi.ts differs from what npm run gen makes: run npm run gen and commit it").toBe(true);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
