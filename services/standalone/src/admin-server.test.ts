import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { connect } from "node:net";
import { networkInterfaces, tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { JsonObject } from "@bufbuild/protobuf";
import { createLogger, type CallContext } from "@chaos-core/kit";
import { createSignInLinks } from "@chaos-core/edge";
import { loadStandaloneConfig } from "./config.js";
import { ADMIN_FILE, type AdminFile } from "./admin-client.js";
import { createRuntime, type Runtime } from "./runtime.js";

const AGENT: CallContext = { tenant: "default", principal: "local", sessionId: "session-1" };

let dir: string;
let runtime: Runtime;
let admin: AdminFile;
const signInLinks = createSignInLinks();

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "chaos-core-admin-"));
  writeFileSync(join(dir, "policy.json"), JSON.stringify({ requireConfirmationFor: ["memory.remember", "http.request"] }));
  const config = loadStandaloneConfig({ CHAOS_CORE_DATA_DIR: dir, LOG_LEVEL: "silent" });
  runtime = await createRuntime(config, createLogger("admin-test", "silent"), { version: "0.0.0", sessionTtlSeconds: 600, admin: true, signInLinks });
  admin = JSON.parse(readFileSync(join(dir, ADMIN_FILE), "utf8")) as AdminFile;
});

afterAll(async () => {
  await runtime?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A raw HTTP request, so headers (Host, Authorization) are exactly what the test says. */
function send(
  method: string,
  path: string,
  options: { token?: string | null; body?: string; headers?: Record<string, string> } = {},
): Promise<{ status: number; body: Record<string, unknown> }> {
  const url = new URL(admin.url);
  const headers: Record<string, string> = { ...(options.headers ?? {}) };
  const token = options.token === undefined ? admin.token : options.token;
  if (token !== null) headers.authorization = `Bearer ${token}`;
  if (options.body !== undefined) headers["content-type"] ??= "application/json";
  return new Promise((resolve, reject) => {
    const req = request({ host: url.hostname, port: url.port, method, path, headers }, (res) => {
      let text = "";
      res.on("data", (d: Buffer) => (text += d.toString()));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} }));
    });
    req.on("error", reject);
    req.end(options.body);
  });
}

async function pendingApproval(input: JsonObject): Promise<string> {
  const res = await runtime.deps.cognition.execute(
    { target: { case: "steps", value: { steps: [{ id: "s1", capability: "memory.remember", input }] } } },
    { ctx: AGENT },
  );
  const result = res.results[0]!;
  expect(result.status).toBe("pending_approval");
  return result.approval!.approvalId;
}

const errorOf = (body: Record<string, unknown>) => body.error as { code: string; message: string };

describe("the operator's admin endpoint", () => {
  it("listens on 127.0.0.1 only, and writes admin.json with mode 0600", async () => {
    expect(admin.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(admin.pid).toBe(process.pid);
    expect(admin.token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(runtime.admin?.token).toBe(admin.token);
    expect(statSync(join(dir, ADMIN_FILE)).mode & 0o777).toBe(0o600);
    // Any other address of this machine refuses the connection: nothing listens there.
    const port = Number(new URL(admin.url).port);
    const others = Object.values(networkInterfaces())
      .flat()
      .filter((i) => i && i.family === "IPv4" && !i.internal)
      .map((i) => i!.address);
    for (const address of others) {
      const outcome = await new Promise<string>((resolve) => {
        const socket = connect({ host: address, port }, () => {
          socket.destroy();
          resolve("connected");
        });
        socket.on("error", (err: NodeJS.ErrnoException) => resolve(err.code ?? "error"));
      });
      expect(outcome, address).toBe("ECONNREFUSED");
    }
  });

  it("needs the token: none or a wrong one is 401 and reveals nothing", async () => {
    const none = await send("GET", "/v1/approvals", { token: null });
    expect(none.status).toBe(401);
    expect(errorOf(none.body).code).toBe("unauthenticated");
    const wrong = await send("GET", "/v1/approvals", { token: `${admin.token.slice(0, -1)}${admin.token.endsWith("A") ? "B" : "A"}` });
    expect(wrong.status).toBe(401);
    expect(wrong.body).not.toHaveProperty("approvals");
    const resolve = await send("POST", "/v1/approvals/resolve", { token: "x".repeat(43), body: "{}" });
    expect(resolve.status).toBe(401);
    const basic = await send("GET", "/v1/approvals", { token: null, headers: { authorization: `Basic ${admin.token}` } });
    expect(basic.status).toBe(401);
  });

  it("refuses a Host that is not loopback (DNS rebinding)", async () => {
    const port = new URL(admin.url).port;
    const res = await send("GET", "/v1/approvals", { headers: { host: `evil.example:${port}` } });
    expect(res.status).toBe(403);
  });

  it("answers bad input with 400 naming the field", async () => {
    const cases: Array<[string, string, string | undefined, RegExp]> = [
      ["GET", "/v1/approvals?tenant=Not%20A%20Tenant", undefined, /^tenant: /],
      ["GET", "/v1/approvals?limit=0", undefined, /^limit: /],
      ["GET", "/v1/approvals?colour=red", undefined, /colour/],
      ["POST", "/v1/approvals/resolve", "{not json", /^body: not valid JSON/],
      ["POST", "/v1/approvals/resolve", JSON.stringify({ approve: true }), /^approval_id: /],
      ["POST", "/v1/approvals/resolve", JSON.stringify({ approval_id: "../x", approve: true }), /^approval_id: .*UUID/],
      ["POST", "/v1/approvals/resolve", JSON.stringify({ approval_id: "00000000-0000-4000-8000-000000000000", approve: "yes" }), /^approve: /],
      ["POST", "/v1/spend/approve", JSON.stringify({ request_seq: -1 }), /^request_seq: /],
      ["POST", "/v1/spend/approve", JSON.stringify({ request_seq: 1.5 }), /^request_seq: /],
      ["POST", "/v1/spend/approve", JSON.stringify({ request_seq: 3, ttl_seconds: 99999 }), /^ttl_seconds: /],
      ["POST", "/v1/spend/decline", JSON.stringify({ request_seq: 0 }), /^request_seq: /],
      ["POST", "/v1/spend/decline", JSON.stringify({ request_seq: 3, reason: "x".repeat(501) }), /^reason: at most 500 characters/],
      ["POST", "/v1/spend/decline", JSON.stringify({ request_seq: 3, approve: true }), /approve/],
      ["GET", "/v1/ledger/export?tenant=Not%20A%20Tenant", undefined, /^tenant: /],
      ["GET", "/v1/policy?tenant=default&x=1", undefined, /x/],
      ["PUT", "/v1/policy", JSON.stringify({ document: [] }), /^document: /],
      ["PUT", "/v1/policy", JSON.stringify({ document: { deniedCapabilities: ["ok.one", 7] } }), /^document: deniedCapabilities\[1\]: /],
      ["PUT", "/v1/policy", JSON.stringify({ document: { denyAtOrAbove: "high" } }), /^document: denyAtOrAbove: unknown field/],
      ["PUT", "/v1/policy", JSON.stringify({ document: {}, expected_version: -1 }), /^expected_version: /],
    ];
    for (const [method, path, body, message] of cases) {
      const res = await send(method, path, body === undefined ? {} : { body });
      expect(res.status, `${method} ${path} ${body}`).toBe(400);
      expect(errorOf(res.body).code).toBe("invalid_argument");
      expect(errorOf(res.body).message).toMatch(message);
    }
    expect((await send("DELETE", "/v1/approvals")).status).toBe(404);
  });

  it("lists pending approvals and answers them as the operator, through cognition's rules", async () => {
    const first = await pendingApproval({ key: "deploy-window", value: "friday" });
    const second = await pendingApproval({ key: "freeze", value: "december" });
    const listed = await send("GET", "/v1/approvals");
    expect(listed.status).toBe(200);
    const approvals = listed.body.approvals as Array<Record<string, unknown>>;
    expect(approvals.map((a) => a.approval_id)).toEqual([first, second]);
    expect(approvals[0]).toMatchObject({
      capability: "memory.remember",
      input: { key: "deploy-window", value: "friday" },
      requested_by: "local",
      requested_in_session: "session-1",
      matched_rule: expect.stringMatching(/requireConfirmationFor/) as unknown,
    });
    expect(approvals[0]!.args_hash).toMatch(/^[0-9a-f]{64}$/);
    // Another tenant sees none of them.
    expect((await send("GET", "/v1/approvals?tenant=acme")).body.approvals).toEqual([]);

    const approved = await send("POST", "/v1/approvals/resolve", { body: JSON.stringify({ approval_id: first, approve: true }) });
    expect(approved).toMatchObject({ status: 200, body: { approval_id: first, status: "approved", resolved_by: "operator (operator)" } });
    const again = await send("POST", "/v1/approvals/resolve", { body: JSON.stringify({ approval_id: first, approve: false }) });
    expect(again.status).toBe(409);
    const rejected = await send("POST", "/v1/approvals/resolve", { body: JSON.stringify({ approval_id: second, approve: false }) });
    expect(rejected.body).toMatchObject({ status: "rejected" });
    expect((await send("GET", "/v1/approvals")).body.approvals).toEqual([]);

    // Another tenant's id is not found; the agent then runs the approved step once.
    const elsewhere = await send("POST", "/v1/approvals/resolve", { body: JSON.stringify({ approval_id: first, approve: true, tenant: "acme" }) });
    expect(elsewhere.status).toBe(404);
    const ran = await runtime.deps.cognition.execute({ target: { case: "approvalId", value: first } }, { ctx: AGENT });
    expect(ran.results[0]).toMatchObject({ status: "executed", ran: true });
  });

  it("refuses an operator answer to a request the operator made (no self-approval)", async () => {
    const res = await runtime.deps.cognition.execute(
      { target: { case: "steps", value: { steps: [{ id: "s1", capability: "memory.remember", input: { key: "k", value: "v" } }] } } },
      { ctx: { tenant: "default", principal: "operator", sessionId: "s" } },
    );
    const id = res.results[0]!.approval!.approvalId;
    const self = await send("POST", "/v1/approvals/resolve", { body: JSON.stringify({ approval_id: id, approve: true }) });
    expect(self.status).toBe(403);
    expect(errorOf(self.body).message).toMatch(/self-approval/);
  });

  it("approves a HITL spend by its request_seq, once", async () => {
    const gate = await runtime.deps.ledger!.evaluateSpendGate(
      { policyName: "equity", action: { action: "BUY", asset: "AAPL", notional: 300, confidence: 0.9 } },
      { ctx: AGENT },
    );
    expect(gate.state).toBe("HITL_REQUIRED");
    const approved = await send("POST", "/v1/spend/approve", { body: JSON.stringify({ request_seq: Number(gate.ledgerSeq) }) });
    expect(approved.status).toBe(200);
    // Recorded as the operator's channel; the approval waits for the agent, who collects it.
    expect(approved.body).toMatchObject({ request_seq: Number(gate.ledgerSeq), state: "LOCKED", receipt_pending: true, channel: "operator", requester: "local" });
    expect(approved.body).not.toHaveProperty("receipt");
    const twice = await send("POST", "/v1/spend/approve", { body: JSON.stringify({ request_seq: Number(gate.ledgerSeq) }) });
    expect(twice.status).toBeGreaterThanOrEqual(400);
    expect(twice.status).toBeLessThan(500);
  });

  it("lists a held wire with every argument beside the steps, and declines it as the operator", async () => {
    const wire = { beneficiary: "Umbrella Payments AG", amount: 75, currency: "CHF", memo: "retainer <b>May</b>" };
    const held = await runtime.deps.ledger!.requestAuthorization({ tool: "wire_treasury_transfer", arguments: wire }, { ctx: AGENT });
    expect(held.status).toBe("HITL_REQUIRED");
    const seq = Number(held.ledgerSeq);
    const spends = (await send("GET", "/v1/approvals")).body.spend_requests as Array<Record<string, unknown>>;
    expect(spends).toEqual([
      expect.objectContaining({ request_seq: seq, kind: "finance", tool: "wire_treasury_transfer", arguments: wire, requested_by: "local", state: "PENDING", arguments_verified: true }),
    ]);
    // Who may answer it, as policy chose when it was made (the operator's own command among them).
    expect(spends[0]).toMatchObject({ channels: ["approver", "operator", "console"], channels_rule: "approvalChannels.spend.default" });
    // The text a person reads carries every argument, exactly.
    expect(spends[0]!.text).toContain('beneficiary = "Umbrella Payments AG"');
    expect(spends[0]!.text).toContain('memo = "retainer <b>May</b>"');
    expect((await send("GET", "/v1/approvals?tenant=acme")).body.spend_requests).toEqual([]);

    const declined = await send("POST", "/v1/spend/decline", { body: JSON.stringify({ request_seq: seq, reason: "not ours" }) });
    expect(declined).toMatchObject({ status: 200, body: { request_seq: seq, declined_by: "operator", channel: "operator" } });
    expect((await send("GET", "/v1/approvals")).body.spend_requests).toEqual([]);
    const again = await send("POST", "/v1/spend/decline", { body: JSON.stringify({ request_seq: seq }) });
    expect(again.status).toBe(409);
    expect(errorOf(again.body).message).toMatch(/^already_answered: /);
  });

  it("issues one-time console sign-in links for a tenant once the console serves, and names it in admin.json", async () => {
    const before = await send("POST", "/v1/console/sign-in-link", { body: "{}" });
    expect(before.status).toBe(409);
    expect(errorOf(before.body).message).toMatch(/does not serve the approval console/);
    expect(admin.console_url).toBeUndefined();

    await runtime.admin!.setConsoleUrl("http://127.0.0.1:4100/approvals");
    const file = JSON.parse(readFileSync(join(dir, ADMIN_FILE), "utf8")) as AdminFile;
    expect(file).toEqual({ ...admin, console_url: "http://127.0.0.1:4100/approvals" });
    expect(statSync(join(dir, ADMIN_FILE)).mode & 0o777).toBe(0o600);

    const issued = await send("POST", "/v1/console/sign-in-link", { body: JSON.stringify({ tenant: "acme" }) });
    expect(issued.status).toBe(200);
    const url = issued.body.url as string;
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:4100\/approvals\/sign-in\/link\?t=[A-Za-z0-9_-]{43}$/);
    expect(issued.body).toMatchObject({ tenant: "acme", expires_at: expect.stringMatching(/Z$/) as string });
    const token = new URL(url).searchParams.get("t")!;
    // The token is the console's to consume, once, for the tenant it was issued for.
    expect(signInLinks.consume(token)).toEqual({ tenant: "acme" });
    expect(signInLinks.consume(token)).toBeUndefined();
    expect((await send("POST", "/v1/console/sign-in-link", { body: JSON.stringify({}) })).body.tenant).toBe("default");
    const bad = await send("POST", "/v1/console/sign-in-link", { body: JSON.stringify({ tenant: "Not A Tenant" }) });
    expect(bad.status).toBe(400);
    expect(errorOf(bad.body).message).toMatch(/^tenant: must be a tenant id/);
    expect((await send("POST", "/v1/console/sign-in-link", { token: null, body: "{}" })).status).toBe(401);
  });

  it("removes admin.json when it closes", async () => {
    const other = mkdtempSync(join(tmpdir(), "chaos-core-admin-"));
    try {
      const config = loadStandaloneConfig({ CHAOS_CORE_DATA_DIR: other, LOG_LEVEL: "silent" });
      const rt = await createRuntime(config, createLogger("admin-test", "silent"), { version: "0.0.0", sessionTtlSeconds: 600, admin: true });
      expect(existsSync(join(other, ADMIN_FILE))).toBe(true);
      await rt.close();
      expect(existsSync(join(other, ADMIN_FILE))).toBe(false);
    } finally {
      rmSync(other, { recursive: true, force: true });
    }
  });
});
