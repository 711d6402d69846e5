// The browser bundle (every export of the package, minified ES module) stays within 20 kB.
import { test } from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

test("minified bundle <= 20 kB", async () => {
  const out = await build({
    entryPoints: [fileURLToPath(new URL("../dist/index.js", import.meta.url))],
    bundle: true, minify: true, format: "esm", write: false, logLevel: "silent",
  });
  const size = out.outputFiles[0].contents.length;
  assert.ok(size <= 20_000, `bundle is ${size} bytes`);
});
