import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { ROOT } from "../support/processes.js";

const run = promisify(execFile);
const DEPCRUISE = join(ROOT, "node_modules/.bin/depcruise");
const CONFIG = join(ROOT, ".dependency-cruiser.cjs");
const FIXTURES = join(ROOT, "test/fixtures/import-rules");

interface Violation {
  rule: { name: string };
  from: string;
  to: string;
}

/** The checker with the repository's rules over `services/` in `cwd`, as `npm run lint` runs it; its violations. */
async function cruise(cwd: string, extra: string[] = []): Promise<Violation[]> {
  const { stdout } = await run(DEPCRUISE, ["services", "--config", CONFIG, "--output-type", "json", ...extra], {
    cwd,
    encoding: "utf8",
    maxBuffer: 256 * 1024 * 1024,
  });
  return (JSON.parse(stdout) as { summary: { violations: Violation[] } }).summary.violations;
}

describe("the import rules npm run lint holds", () => {
  it("each fires on code that breaks it: a circle, a deep import, an unexported package path, kit importing a service, an upward import", async () => {
    const found = (await cruise(FIXTURES)).map((v) => `${v.rule.name}: ${v.from} → ${v.to}`);
    expect(found).toEqual(
      expect.arrayContaining([
        // Type-only imports make a circle too.
        "no-circular: services/alpha/src/a.ts → services/alpha/src/b.ts",
        "no-deep-service-import: services/alpha/src/deep.ts → services/beta/src/x.ts",
        "no-unexported-package-path: services/alpha/src/unexported.ts → @chaos-core/kit/src/errors.js",
        "kit-and-proto-import-no-service: services/kit/src/k.ts → services/alpha/src/a.ts",
        "services-import-no-edge-or-standalone: services/alpha/src/up.ts → services/edge/src/e.ts",
      ]),
    );
  });

  it("each service's layering fires on an import that points up inside it", async () => {
    const found = (await cruise(FIXTURES)).map((v) => `${v.rule.name}: ${v.from} → ${v.to}`);
    expect(found).toEqual(
      expect.arrayContaining([
        "edge-below-transport: services/edge/src/tools/upward.ts → services/edge/src/transport/http.ts",
        "cognition-executor-below-brain: services/cognition/src/executor/upward.ts → services/cognition/src/brain/brain.ts",
        "policy-domain-at-the-bottom: services/policy/src/domain/upward.ts → services/policy/src/handlers/handlers.ts",
        "ledger-service-above-adapters-and-webhooks: services/ledger/src/domain/upward.ts → services/ledger/src/service/desk.ts",
      ]),
    );
  });

  it("are kept by the repository", async () => {
    expect(await cruise(ROOT)).toEqual([]);
  });
});
