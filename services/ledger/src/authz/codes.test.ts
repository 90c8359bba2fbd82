import { readFile } from "node:fs/promises";
import { describe, expect, it } from "vitest";
import { FINANCE_DETAIL_CODES, FINANCE_REASONS } from "./codes.js";

/** The rows of the `detail_code` → `code` table in docs/ledger.md, as `detail code` pairs. */
async function documentedFinanceCodes(): Promise<string[]> {
  const doc = await readFile(new URL("../../../../docs/ledger.md", import.meta.url), "utf8");
  const section = doc.split("### Finance reference tools: `code` and `detail_code`")[1]?.split(/\n#{2,3} /)[0] ?? "";
  // The table's body: the rows after its |---| separator.
  const body = section.split(/^\|---\|.*$/m)[1] ?? "";
  return [...body.matchAll(/^\| `([A-Za-z_]+)` \| `([A-Za-z_]+)` \|/gm)].map((m) => `${m[1]} ${m[2]}`);
}

describe("the finance reference tools' reason codes", () => {
  it("docs/ledger.md maps every detail_code to the code the tools answer, and nothing else", async () => {
    const documented = await documentedFinanceCodes();
    expect(documented.length).toBeGreaterThan(0);
    expect([...documented].sort()).toEqual(FINANCE_DETAIL_CODES.map((c) => `${c.detail_code} ${c.code}`).sort());
  });

  it("keep the seed's six short codes: every detail maps to one of them (or EXECUTED), and each is used", () => {
    const codes = new Set(FINANCE_DETAIL_CODES.map((c) => c.code));
    expect([...codes].sort()).toEqual([...FINANCE_REASONS, "EXECUTED"].sort());
    expect(FINANCE_DETAIL_CODES).toContainEqual({ detail_code: "bad_signature", code: "missing_receipt" });
    expect(FINANCE_DETAIL_CODES).toContainEqual({ detail_code: "tenant_mismatch", code: "args_changed" });
  });
});
