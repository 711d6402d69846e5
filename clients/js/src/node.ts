// A store in a file for Node (mode 0600: it holds the device secret and token), written to a
// temporary file and renamed, so a crash leaves the old or the new record, never half of one.

import { readFile, rename, writeFile } from "node:fs/promises";
import type { Store } from "./device.js";

/** A store in the file ``path``. */
export function fileStore(path: string): Store {
  return {
    async load() {
      try {
        return await readFile(path, "utf8");
      } catch (err) {
        if ((err as { code?: string }).code === "ENOENT") return null;
        throw err;
      }
    },
    async save(text: string) {
      const tmp = `${path}.tmp`;
      await writeFile(tmp, text, { encoding: "utf8", mode: 0o600 });
      await rename(tmp, path);
    },
  };
}
