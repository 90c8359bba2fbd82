import { readFile } from "node:fs/promises";
import { parseUpstreamsFile } from "@chaos-core/kit";

/**
 * The names the operator's upstreams file declares, read when asked (an edit applies to the next
 * AddUpstream): a tenant's upstream may not shadow one (docs/federation.md §3). No file: none. A
 * file that does not parse refuses the add, naming the file and field, rather than guessing.
 */
export function operatorUpstreamNames(file: string | undefined): () => Promise<string[]> {
  return async () => {
    if (!file) return [];
    let text: string;
    try {
      text = await readFile(file, "utf8");
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return [];
      throw err;
    }
    return parseUpstreamsFile(text, file).map((u) => u.name);
  };
}
