import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { CLI, childEnv, ROOT } from "../../../test/support/processes.js";
import { answerChpLine, runChpConformance } from "./chp-conformance.js";

// Requests are written the way the reference runner writes them (Python json.dumps), so
// gate numbers carry their ".0".
const POLICY =
  '{"version": "test-1", "max_notional": 500.0, "daily_cap": 2500.0, "hitl_threshold": 250.0, "min_confidence": 0.55, "allowed_actions": ["LONG", "SHORT"], "per_asset_limits": {"CAKE": 100.0}}';
const gate = (op: string, action: string, committed = "0.0", extra = "") =>
  `{"op": "${op}", "args": {"action": ${action}, "policy": ${POLICY}, "committed_today": ${committed}${extra}}}`;

/** The DESIGN.md vectors as request lines and the content hash each must produce. */
const VECTORS: ReadonlyArray<readonly [string, string, string]> = [
  [
    gate("evaluate_gate", '{"action": "LONG", "asset": "ETH", "notional": 100.0, "confidence": 0.8}'),
    "LOCKED",
    "4610642fe2682d765c2716a874692b842e00ab9489735d12a135dc1d426633b8",
  ],
  [
    gate("evaluate_gate", '{"action": "LONG", "asset": "ETH", "notional": 501.0, "confidence": 0.9}'),
    "BLOCKED",
    "9d41b833af4c77387a6a6eefa7dfcab2958a27dbc8d77bf1da034a12404b9019",
  ],
  [
    gate("evaluate_gate", '{"action": "LONG", "asset": "ETH", "notional": 100.0, "confidence": null}'),
    "LOCKED",
    "6fb82bd7c57223274452ca9e038fde09047455cdd250725f882f92efe2a9c804",
  ],
  [
    gate("approve_human", '{"action": "LONG", "asset": "ETH", "notional": 300.0, "confidence": 0.9}', "0.0", ', "approver": "cfo@example.com"'),
    "LOCKED",
    "822dec6c003ba5d3ff493363b0638b817537624625857797b02baa2f5067dc8c",
  ],
];

const CANONICAL = '{"op": "canonical_json", "args": {"payload": {"b": 1, "a": 2}}}';
const CONTENT = '{"op": "content_hash", "args": {"payload": {"b": 1, "a": 2}}}';
const CHAIN = '{"op": "chain_hash", "args": {"prev_sig": "", "entry": {"seq": 1, "event": "decision.locked", "decision_id": "d-001"}}}';

const parse = (line: string) => JSON.parse(line) as { ok: boolean; result?: unknown; error?: string };

describe("answerChpLine", () => {
  it("answers the DESIGN.md canonical, hash and chain vectors", () => {
    expect(answerChpLine(CANONICAL)).toBe('{"ok":true,"result":"{\\"a\\":2,\\"b\\":1}"}');
    expect(parse(answerChpLine(CONTENT)).result).toBe("d3626ac30a87e6f7a6428233b3c68299976865fa5508e4267c5415c76af7a772");
    expect(parse(answerChpLine(CHAIN)).result).toBe("9b45b4c2aa09ffc8bf507448b2db317711686aa6a51b99d1371e3e98220e97f7");
  });

  it("keeps floats written with a decimal point floats", () => {
    expect(parse(answerChpLine('{"op": "canonical_json", "args": {"payload": {"n": 100.0, "i": 100, "e": 1E-5}}}')).result).toBe(
      '{"e":1e-05,"i":100,"n":100.0}',
    );
  });

  it("answers a gate op with the reference's result shape, committed_delta as a float", () => {
    const line = answerChpLine(VECTORS[0]![0]);
    expect(line).toContain('"committed_delta":100.0');
    expect(parse(line)).toEqual({
      ok: true,
      result: {
        state: "LOCKED",
        allowed: true,
        requires_human: false,
        reason: "auto-approved under CHP thresholds",
        claims: [
          { rule: "sane-notional", passed: true, detail: "notional=100.0" },
          { rule: "allowed-action", passed: true, detail: "action LONG" },
          { rule: "per-asset-cap", passed: true, detail: "ETH notional 100.0 vs cap 500.0" },
          { rule: "max-notional", passed: true, detail: "100.0 vs max 500.0" },
          { rule: "daily-cap", passed: true, detail: "projected 100.0 vs daily cap 2500.0" },
          { rule: "min-confidence", passed: true, detail: "confidence 0.8 vs min 0.55" },
        ],
        content_hash: "4610642fe2682d765c2716a874692b842e00ab9489735d12a135dc1d426633b8",
        committed_delta: 100,
      },
    });
    expect(answerChpLine(gate("evaluate_gate", '{"action": "LONG", "asset": "ETH", "notional": 501.0, "confidence": 0.9}'))).toContain(
      '"committed_delta":0.0',
    );
  });

  it("reads integers as the same gate numbers and defaults committed_today and version as the reference adapter does", () => {
    const ints = `{"op": "evaluate_gate", "args": {"action": {"action": "LONG", "asset": "ETH", "notional": 100, "confidence": 0.8}, "policy": {"max_notional": 500, "daily_cap": 2500, "hitl_threshold": 250, "min_confidence": 0.55, "allowed_actions": ["LONG"]}}}`;
    expect(parse(answerChpLine(ints)).result).toMatchObject({
      state: "LOCKED",
      content_hash: "4610642fe2682d765c2716a874692b842e00ab9489735d12a135dc1d426633b8",
    });
  });

  it("approval cannot bypass a hard rule", () => {
    const r = parse(answerChpLine(gate("approve_human", '{"action": "LONG", "asset": "ETH", "notional": 900.0, "confidence": 0.9}', "0.0", ', "approver": "cfo@example.com"')));
    expect(r.result).toMatchObject({
      state: "BLOCKED",
      reason: "approval by cfo@example.com rejected: blocked: per-asset-cap, max-notional",
      content_hash: "d8364053ecf2f8e3c05d8f39e9855840aab4a767d58a29e9f4f682a1db232ffa",
    });
  });

  it("answers a bad request with ok:false and a message saying what is wrong", () => {
    const cases: Array<[string, RegExp]> = [
      ["not json", /^line 7: not valid JSON/],
      ["[1,2]", /^line 7: a request is a JSON object/],
      ['{"op": 1, "args": {}}', /^line 7: op must be a string/],
      ['{"op": "teleport", "args": {}}', /^line 7: unsupported op "teleport"/],
      ['{"op": "content_hash", "args": []}', /^line 7: args must be a JSON object/],
      ['{"op": "content_hash", "args": {}}', /^line 7: args\.payload is required/],
      ['{"op": "chain_hash", "args": {"prev_sig": 1, "entry": {}}}', /^line 7: args\.prev_sig must be a string/],
      ['{"op": "canonical_json", "args": {"payload": [1e400]}}', /^line 7: .*out of the float range/],
      [gate("evaluate_gate", '{"action": "LONG", "asset": "ETH", "notional": "lots", "confidence": 0.9}'), /^line 7: action\.notional: /],
      [gate("approve_human", '{"action": "LONG", "asset": "ETH", "notional": 1.0, "confidence": 0.9}'), /^line 7: args\.approver is required/],
    ];
    for (const [line, message] of cases) {
      const r = parse(answerChpLine(line, 7));
      expect(r.ok).toBe(false);
      expect(r.error).toMatch(message);
    }
  });
});

describe("runChpConformance", () => {
  it("answers each non-blank line in order, keeps serving after a bad line, and resolves 0 at the end of input", async () => {
    const input = new PassThrough();
    const output = new PassThrough();
    let text = "";
    output.on("data", (d: Buffer) => (text += d.toString()));
    const done = runChpConformance(input, output);
    input.end(`${CONTENT}\r\n\n{oops\n${CHAIN}`);
    await expect(done).resolves.toBe(0);
    const lines = text.trimEnd().split("\n").map(parse);
    expect(lines.map((l) => l.ok)).toEqual([true, false, true]);
    expect(lines[1]!.error).toMatch(/^line 3: not valid JSON/);
    expect(lines[2]!.result).toBe("9b45b4c2aa09ffc8bf507448b2db317711686aa6a51b99d1371e3e98220e97f7");
  });
});

describe("chaos-core chp-conformance (a real process)", () => {
  it("produces the DESIGN.md vectors, survives a bad line and exits 0 at EOF", async () => {
    const proc = spawn(process.execPath, [CLI, "chp-conformance"], { cwd: ROOT, env: childEnv({}), stdio: ["pipe", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    proc.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    proc.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<number | null>((resolve) => proc.once("exit", resolve));
    const requests = [CANONICAL, CONTENT, CHAIN, "{bad", ...VECTORS.map(([line]) => line)];
    proc.stdin.end(requests.join("\n") + "\n");
    expect(await exited, stderr).toBe(0);

    const lines = stdout.trimEnd().split("\n").map(parse);
    expect(lines).toHaveLength(requests.length);
    expect(lines[0]).toEqual({ ok: true, result: '{"a":2,"b":1}' });
    expect(lines[1]).toEqual({ ok: true, result: "d3626ac30a87e6f7a6428233b3c68299976865fa5508e4267c5415c76af7a772" });
    expect(lines[2]).toEqual({ ok: true, result: "9b45b4c2aa09ffc8bf507448b2db317711686aa6a51b99d1371e3e98220e97f7" });
    expect(lines[3]).toMatchObject({ ok: false, error: expect.stringMatching(/^line 4: not valid JSON/) });
    VECTORS.forEach(([, state, hash], i) => {
      expect(lines[4 + i]).toMatchObject({ ok: true, result: { state, content_hash: hash } });
    });
    expect(lines[5]!.result).toMatchObject({ reason: "blocked: per-asset-cap, max-notional" });
    expect(lines[7]!.result).toMatchObject({ reason: "human-approved by cfo@example.com", claims: [{ rule: "human-approval", passed: true, detail: "approved by cfo@example.com" }] });
  });

  it("documents every op and the names of its args in --help and in docs/ledger.md", async () => {
    const proc = spawn(process.execPath, [CLI, "chp-conformance", "--help"], { cwd: ROOT, env: childEnv({}), stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    proc.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    expect(await new Promise((resolve) => proc.once("exit", resolve))).toBe(0);
    const docs = readFileSync(join(ROOT, "docs/ledger.md"), "utf8");
    const ops: Record<string, string[]> = {
      canonical_json: ["payload"],
      content_hash: ["payload"],
      chain_hash: ["prev_sig", "entry"],
      evaluate_gate: ["action", "policy", "committed_today?"],
      approve_human: ["action", "policy", "committed_today?", "approver"],
    };
    // Every op the command answers is documented, and nothing else.
    const answered = Object.keys(ops).map((op) => JSON.parse(answerChpLine(JSON.stringify({ op, args: {} }))) as { error: string });
    answered.forEach((a) => expect(a.error).not.toMatch(/unsupported op/));
    expect(JSON.parse(answerChpLine('{"op": "nope", "args": {}}')).error).toContain(`supported: ${Object.keys(ops).join(", ")}`);
    for (const [op, args] of Object.entries(ops)) {
      const signature = new RegExp(`${op}\\s+\\{${args.map((a) => a.replace("?", "\\?")).join(", ")}\\}`);
      expect(stdout, op).toMatch(signature);
      expect(docs, op).toMatch(new RegExp(`\`${op}\`\\s*\\|\\s*\`\\{${args.map((a) => a.replace("?", "\\?")).join(", ")}\\}\``));
    }
    for (const field of ["action", "asset", "notional", "confidence?", "max_notional", "daily_cap", "hitl_threshold", "min_confidence"]) {
      expect(stdout, field).toContain(field);
      expect(docs, field).toContain(field);
    }
  });

  it("is listed in the help text", async () => {
    const proc = spawn(process.execPath, [CLI, "help"], { cwd: ROOT, env: childEnv({}), stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    proc.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    await new Promise((resolve) => proc.once("exit", resolve));
    expect(stdout).toContain("chp-conformance");
  });
});
