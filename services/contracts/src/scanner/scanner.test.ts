import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { beforeAll, describe, expect, it } from "vitest";
import { NO_GATES, toolContract, violationsOf } from "../contract.js";
import { EntitlementScanner, sourceFiles, type ScanResult } from "./scanner.js";
import { isHighEntropyLiteral } from "./rules.js";

const ROOT = fileURLToPath(new URL("../../../..", import.meta.url));
const FIXTURES = "services/contracts/src/scanner/fixtures";

let results: Map<string, ScanResult>;

beforeAll(() => {
  const scanner = new EntitlementScanner({
    rootDir: ROOT,
    files: sourceFiles(join(ROOT, FIXTURES, "pkg-tools/src")),
    paths: { "@fx/helpers": [`${FIXTURES}/pkg-helpers/src/index.ts`] },
  });
  results = new Map();
  for (const site of scanner.definitions("defineTool", "run")) for (const name of site.names) results.set(name, scanner.scan(site.entry));
});

const of = (name: string) => {
  const r = results.get(name);
  if (!r) throw new Error(`no fixture tool ${name}`);
  return r.entitlements;
};
const flags = (name: string) => {
  const e = of(name);
  return (["filesystem", "filesystemWrite", "network", "subprocess", "crypto", "codeEvaluation"] as const).filter((f) => e[f]);
};

describe("the entitlement scanner (TypeScript compiler API) on fixtures", () => {
  it("finds every fixture tool by its defineTool call", () => {
    expect([...results.keys()].sort()).toEqual(
      [
        "aliased_import",
        "comments_and_strings",
        "computed_global",
        "computed_import",
        "computed_require",
        "direct_eval",
        "direct_import",
        "dynamic_import",
        "from_char_code",
        "helper_across_packages",
        "high_entropy",
        "indirect_eval",
        "namespace_read",
        "new_function",
        "not_reached",
        "reexported_alias",
        "through_clients",
      ].sort(),
    );
  });

  it("direct import: a write through node:fs", () => {
    expect(flags("direct_import")).toEqual(["filesystem", "filesystemWrite"]);
    expect(of("direct_import").evidence).toEqual([`filesystemWrite: fs.writeFileSync @ ${FIXTURES}/pkg-tools/src/imports.ts`]);
  });

  it("aliased import: spawn imported as launch is still a subprocess", () => {
    expect(flags("aliased_import")).toEqual(["subprocess"]);
    expect(of("aliased_import").evidence).toEqual([`subprocess: child_process.spawn @ ${FIXTURES}/pkg-tools/src/imports.ts`]);
  });

  it("namespace import: a read is a read, not a write", () => {
    expect(flags("namespace_read")).toEqual(["filesystem"]);
  });

  it("dynamic import with a literal specifier: classified by its module and what is called on it", () => {
    expect(flags("dynamic_import")).toEqual(["subprocess"]);
    expect(of("dynamic_import").evidence).toEqual([
      `subprocess: child_process.execFileSync @ ${FIXTURES}/pkg-tools/src/imports.ts`,
      `subprocess: import() child_process @ ${FIXTURES}/pkg-tools/src/imports.ts`,
    ]);
  });

  it("helper modules across packages: fetch one package away, through a re-export", () => {
    expect(flags("helper_across_packages")).toEqual(["network"]);
    expect(of("helper_across_packages").evidence).toEqual([`network: fetch @ ${FIXTURES}/pkg-helpers/src/net.ts`]);
  });

  it("re-exported aliases: createHash re-exported as digestOf is crypto; a helper's appendFileSync a write", () => {
    expect(flags("reexported_alias")).toEqual(["filesystem", "filesystemWrite", "crypto"]);
  });

  it("follows calls, not imports: an imported module whose functions are not called adds nothing", () => {
    expect(flags("not_reached")).toEqual([]);
  });

  it("comments and strings are never matched: no entitlement, no evasion signal", () => {
    expect(of("comments_and_strings")).toMatchObject({ filesystem: false, network: false, subprocess: false, codeEvaluation: false, evasion: [], evidence: [] });
  });

  it("typed service clients are recorded as the services they reach, with the gates they pass", () => {
    const r = results.get("through_clients")!;
    expect(r.entitlements.services).toEqual(["cognition", "ledger", "memory"]);
    expect(r.entitlements.serviceMethods).toEqual(["cognition.execute", "cognition.getApproval", "ledger.authorize", "memory.recall"]);
    expect(flags("through_clients")).toEqual([]);
    expect(r.gates).toEqual({ capabilities: ["memory.remember"], executor: true, approvalPath: true });
  });

  describe("evasion signals", () => {
    const file = (f: string) => `${FIXTURES}/pkg-tools/src/${f}`;
    it("computed require()", () => expect(of("computed_require").evasion).toEqual([`computed-require @ ${file("evasion.ts")}`]));
    it("computed import()", () => expect(of("computed_import").evasion).toEqual([`computed-import @ ${file("evasion.ts")}`]));
    it("eval, direct and indirect, is code evaluation", () => {
      for (const name of ["direct_eval", "indirect_eval"]) {
        expect(of(name).evasion).toEqual([`eval @ ${file("evasion.ts")}`]);
        expect(flags(name)).toEqual(["codeEvaluation"]);
      }
    });
    it("new Function", () => {
      expect(of("new_function").evasion).toEqual([`new-function @ ${file("evasion.ts")}`]);
      expect(flags("new_function")).toEqual(["codeEvaluation"]);
    });
    it("String.fromCharCode reconstruction", () => expect(of("from_char_code").evasion).toEqual([`fromCharCode @ ${file("evasion.ts")}`]));
    it("long high-entropy literals (and not a long sentence)", () => {
      expect(of("high_entropy").evasion).toEqual([`high-entropy-literal @ ${file("evasion.ts")}`]);
      expect(isHighEntropyLiteral("Store a JSON value under a key in durable memory, per tenant, with tags")).toBe(false);
      expect(isHighEntropyLiteral("a".repeat(64))).toBe(false);
    });
    it("computed global access", () => expect(of("computed_global").evasion).toEqual([`computed-global @ ${file("evasion.ts")}`]));
  });

  it("a read-only tool whose code writes files is a violation; one that reads is not", () => {
    const contract = (name: string) =>
      toolContract(
        {
          name,
          title: name,
          description: "",
          toolset: "core",
          inputSchema: {},
          outputSchema: {},
          annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
        },
        { gates: NO_GATES, entitlements: of(name) },
      );
    expect(violationsOf("direct_import", contract("direct_import"))).toEqual(["direct_import is marked read-only but its code writes files"]);
    expect(violationsOf("helper_across_packages", contract("helper_across_packages"))).toEqual([
      "helper_across_packages is marked read-only and closed-world but its code opens network connections",
    ]);
    expect(violationsOf("namespace_read", contract("namespace_read"))).toEqual([]);
  });
});
