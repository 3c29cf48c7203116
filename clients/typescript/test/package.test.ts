/**
 * The package as a consumer gets it: importable by its name through the exports map, with
 * declarations, nothing but dist/ and the README packed, and no Node-only import in what a
 * browser would load.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

const PACKAGE_DIR = new URL("../..", import.meta.url).pathname;
const manifest = JSON.parse(readFileSync(join(PACKAGE_DIR, "package.json"), "utf8")) as {
  name: string;
  dependencies?: Record<string, string>;
};

test("the package imports by its name and exports the client and every error class", async () => {
  const sdk = (await import(manifest.name)) as Record<string, unknown>;
  for (const name of [
    "MemoryClient",
    "CogsubError",
    "InvalidInputError",
    "RejectedInputError",
    "NotFoundError",
    "ConflictError",
    "RejectedConflictError",
    "NotConfiguredError",
    "UnavailableError",
    "AuthenticationError",
    "PermissionDeniedError",
    "RejectedError",
    "ServerError",
    "OPERATIONS",
  ]) {
    assert.ok(sdk[name] !== undefined, `${manifest.name} exports ${name}`);
  }
});

test("it has no runtime dependencies", () => {
  assert.deepEqual(Object.keys(manifest.dependencies ?? {}), []);
});

test("what a browser loads imports nothing but its own modules", () => {
  const dist = join(PACKAGE_DIR, "dist");
  const modules = readdirSync(dist).filter((name) => name.endsWith(".js"));
  assert.ok(modules.includes("index.js") && modules.includes("client.js"));
  for (const name of modules) {
    const text = readFileSync(join(dist, name), "utf8");
    const imports = [...text.matchAll(/from\s+"([^"]+)"/g)].map((m) => m[1] as string);
    for (const target of imports)
      assert.match(target, /^\.\/[\w-]+\.js$/, `${name} imports ${target}`);
    assert.ok(!/\bprocess\.|\brequire\(|\bBuffer\b/.test(text), `${name} uses a Node-only global`);
  }
});

test("the packed tarball holds dist with declarations and the README, not the sources or tests", () => {
  const output = execFileSync("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], {
    cwd: PACKAGE_DIR,
    encoding: "utf8",
  });
  const [packed] = JSON.parse(output) as [{ files: { path: string }[] }];
  const paths = packed.files.map((file) => file.path);
  for (const needed of [
    "package.json",
    "README.md",
    "dist/index.js",
    "dist/index.d.ts",
    "dist/generated.d.ts",
  ]) {
    assert.ok(paths.includes(needed), `${needed} in ${paths.join(", ")}`);
  }
  assert.ok(
    !paths.some((path) => /^(src|test|scripts)\//.test(path) || path.startsWith(".test-build")),
  );
});
