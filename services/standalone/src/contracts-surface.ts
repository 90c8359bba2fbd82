import { join } from "node:path";
import { BUILT_IN_CAPABILITIES, capabilitySource } from "@chaos-core/cognition";
import {
  capabilityContract,
  contractSet,
  promptContract,
  resourceContract,
  toolContract,
  violationsOf,
  type ContractSet,
} from "@chaos-core/contracts";
import { edgeSurface } from "@chaos-core/edge";
import { appRoot } from "@chaos-core/kit";
import type * as ScannerExports from "@chaos-core/contracts/scanner";

type ScannerModule = typeof ScannerExports;

/** Where the scanner starts: the modules that list every tool and every capability. */
export const SCAN_ROOTS = ["services/edge/src/tools/index.ts", "services/cognition/src/capabilities/index.ts"] as const;

/** The contracts of everything Chaos Core serves, recomputed from the code, and their violations. */
export interface ComputedContracts {
  readonly contracts: ContractSet;
  readonly violations: readonly string[];
}

/**
 * Recomputes every contract: the live definitions (the edge's published schemas, cognition's
 * capabilities) for surface, behavior and token economics, and the entitlement scanner over the
 * sources under `root` (by default the root of the installed app: the repository in a checkout)
 * for gates and entitlements. Needs the sources and the TypeScript compiler
 * (a development install): the scanner is loaded only here.
 */
export async function computeContracts(root = appRoot()): Promise<ComputedContracts> {
  let scannerModule: ScannerModule;
  try {
    scannerModule = await import("@chaos-core/contracts/scanner");
  } catch (err) {
    // A production install (the container image) has neither the compiler nor the sources.
    throw new Error(`the entitlement scanner needs the TypeScript compiler and the sources (a development checkout): ${(err as Error).message}`, {
      cause: err,
    });
  }
  const { EntitlementScanner, workspacePaths } = scannerModule;
  const scanner = new EntitlementScanner({ rootDir: root, files: SCAN_ROOTS.map((f) => join(root, f)), paths: workspacePaths(root) });
  const scanned = (defineFn: string, member: string) => {
    const out = new Map<string, ReturnType<typeof scanner.scan>>();
    for (const site of scanner.definitions(defineFn, member)) {
      const result = scanner.scan(site.entry);
      for (const name of site.names) {
        if (out.has(name)) throw new Error(`${site.file}: ${name} is defined by more than one ${defineFn} call`);
        out.set(name, result);
      }
    }
    return out;
  };
  const toolScans = scanned("defineTool", "run");
  const capabilityScans = scanned("defineCapability", "handler");
  const surface = edgeSurface();
  const missing = (kind: string, name: string) => new Error(`no ${kind} call in the sources defines ${name}, so its entitlements cannot be derived`);
  const tools = surface.tools.map((t) => {
    const scan = toolScans.get(t.name);
    if (!scan) throw missing("defineTool", t.name);
    return toolContract(t, scan);
  });
  const capabilities = BUILT_IN_CAPABILITIES.map((c) => {
    const scan = capabilityScans.get(c.name);
    if (!scan) throw missing("defineCapability", c.name);
    return capabilityContract(capabilitySource(c), scan.entitlements);
  });
  const contracts = contractSet({
    tools,
    capabilities,
    prompts: surface.prompts.map(promptContract),
    resources: surface.resources.map(resourceContract),
  });
  const violations = [
    ...Object.entries(contracts.tools).flatMap(([n, c]) => violationsOf(`tool ${n}`, c)),
    ...Object.entries(contracts.capabilities).flatMap(([n, c]) => violationsOf(`capability ${n}`, c)),
  ];
  return { contracts, violations };
}
