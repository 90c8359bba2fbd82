import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { parseUpstreamsLock, type ContractSet } from "@chaos-core/contracts";
import { ChaosError, parseUpstreamsFile, type UpstreamDeclaration } from "@chaos-core/kit";

/** Where the operator's upstreams are declared and pinned (docs/federation.md §3, §4). */
export interface UpstreamFiles {
  /** The declarations (`CHAOS_CORE_UPSTREAMS_FILE`, or the data directory's `upstreams.json`). */
  readonly file: string;
  /** Whether the file was named: then it must exist; the data directory's may be absent. */
  readonly required: boolean;
  /** The pins (`upstreams.lock`). */
  readonly lock: string;
}

/** The operator's declarations and pins; none when no file is there (and none was named). */
export async function loadUpstreams(files: UpstreamFiles): Promise<{ declarations: UpstreamDeclaration[]; pins: Map<string, ContractSet> }> {
  if (!existsSync(files.file)) {
    if (files.required) throw new ChaosError("failed_precondition", `CHAOS_CORE_UPSTREAMS_FILE: ${files.file} does not exist`);
    return { declarations: [], pins: new Map() };
  }
  const declarations = parseUpstreamsFile(await readFile(files.file, "utf8"), files.file);
  const pins = existsSync(files.lock) ? parseUpstreamsLock(await readFile(files.lock, "utf8"), files.lock) : new Map<string, ContractSet>();
  return { declarations, pins };
}
