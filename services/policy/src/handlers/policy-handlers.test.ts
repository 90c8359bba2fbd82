import { randomBytes } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import {
  ChaosError,
  ContextSigner,
  createGrpcClient,
  createInProcessClient,
  createLogger,
  createPostgresDb,
  register,
  startGrpcServer,
  type CallContext,
  type Db,
  type ServiceClient,
  type ServiceImpl,
} from "@chaos-core/kit";
import {
  ApprovalChannel,
  Decision,
  PolicyDocumentSchema,
  PolicyService,
  Risk,
  type PolicyDocument,
} from "@chaos-core/proto/gen/chaoscore/policy/v1/policy_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../../../../test/support/postgres.js";
import { createFilePolicyStore } from "../adapters/file-store.js";
import { within } from "../adapters/policy-store.contract.js";
import { createSqlPolicyStore, migratePolicy } from "../adapters/sql-store.js";
import { defaultPolicyDocument, validatePolicyDocument } from "../domain/policy-document.js";
import type { PolicyStore } from "../domain/policy-store.js";
import { createPolicyHandlers } from "./policy-handlers.js";
import { policyDocumentFromProto, policyDocumentToProto } from "./policy-proto.js";

type Client = ServiceClient<typeof PolicyService>;

const KEY = "policy-handlers-test-key-0123456789abcdef";
const signer = new ContextSigner(KEY);
const silent = createLogger("policy-test", "silent");

interface Transport {
  name: string;
  open(handlers: ServiceImpl<typeof PolicyService>): Promise<{ client: Client; close(): Promise<void> }>;
}

const transports: Transport[] = [
  {
    name: "in-process",
    async open(handlers) {
      return { client: createInProcessClient(PolicyService, handlers), close: async () => undefined };
    },
  },
  {
    name: "gRPC",
    async open(handlers) {
      const server = await startGrpcServer({
        host: "127.0.0.1",
        port: 0,
        signer,
        logger: silent,
        registrations: [register(PolicyService, handlers)],
      });
      const grpc = createGrpcClient(PolicyService, `127.0.0.1:${server.port}`, signer);
      return {
        client: grpc.client,
        async close() {
          grpc.close();
          await server.shutdown(1_000);
        },
      };
    },
  },
];

function ctx(tenant: string): { ctx: CallContext } {
  return { ctx: { tenant, principal: "agent@test" } };
}

function newTenant(): string {
  return `t${randomBytes(5).toString("hex")}`;
}

async function rejectionOf(promise: Promise<unknown>): Promise<ChaosError> {
  try {
    await promise;
  } catch (err) {
    expect(err).toBeInstanceOf(ChaosError);
    return err as ChaosError;
  }
  throw new Error("expected the call to fail");
}

function protoDoc(fields: MessageInitShape<typeof PolicyDocumentSchema>): PolicyDocument {
  return create(PolicyDocumentSchema, fields);
}

let database: TestDatabase;
let db: Db;

beforeAll(async () => {
  database = await createTestDatabase("chaoscore_policy_handlers");
  db = createPostgresDb({ connectionString: database.url });
  await migratePolicy(db);
});

afterAll(async () => {
  await db?.close();
  await database?.drop();
});

describe.each(transports)("PolicyService over $name", (transport) => {
  let client: Client;
  let store: PolicyStore;
  let close: () => Promise<void>;

  beforeAll(async () => {
    store = createSqlPolicyStore(db, { pollMs: 25 });
    ({ client, close } = await transport.open(createPolicyHandlers(store)));
  });

  afterAll(async () => {
    await close?.();
    await store?.close();
  });

  it("evaluates against the safe default policy at version 0", async () => {
    const tenant = newTenant();
    const low = await client.evaluate({ capability: "memory.read", risk: Risk.LOW }, ctx(tenant));
    expect(low).toMatchObject({ decision: Decision.ALLOW, matchedRule: "default", policyVersion: 0n });
    const high = await client.evaluate({ capability: "memory.write", risk: Risk.HIGH }, ctx(tenant));
    expect(high).toMatchObject({
      decision: Decision.REQUIRE_APPROVAL,
      matchedRule: "riskRules.requireApprovalAtOrAbove",
    });
    expect(high.reason).toContain("requires a human approval at or above high risk");
    const http = await client.evaluate(
      { capability: "http.request", risk: Risk.LOW, facts: { httpHost: "example.com" } },
      ctx(tenant),
    );
    expect(http).toMatchObject({ decision: Decision.DENY, matchedRule: "httpAllowedDomains" });
  });

  it("counts an unknown risk value as the highest risk", async () => {
    const res = await client.evaluate({ capability: "memory.read", risk: 42 as Risk }, ctx(newTenant()));
    expect(res.decision).toBe(Decision.REQUIRE_APPROVAL);
    expect(res.reason).toContain("unspecified risk (counted as critical)");
  });

  it("stores a policy, serves it back and decides with it, for the caller's tenant only", async () => {
    const tenant = newTenant();
    const document = protoDoc({
      deniedCapabilities: ["shell.exec"],
      httpAllowedDomains: ["api.example.com"],
      requireConfirmationFor: ["http.request"],
    });
    const put = await client.putPolicy({ document, expectedVersion: 0n }, ctx(tenant));
    expect(put.version).toBe(1n);

    const got = await client.getPolicy({}, ctx(tenant));
    expect(got.version).toBe(1n);
    expect(got.source).toBe("postgres");
    expect(got.lastError).toBe("");
    expect(got.document?.deniedCapabilities).toEqual(["shell.exec"]);
    // An absent risk_rules took the defaults.
    expect(got.document?.riskRules).toMatchObject({ requireApprovalAtOrAbove: Risk.HIGH, denyAtOrAbove: Risk.UNSPECIFIED });
    expect(Math.abs(timestampDate(got.updatedAt!).getTime() - Date.now())).toBeLessThan(60_000);

    const denied = await client.evaluate({ capability: "shell.exec", risk: Risk.LOW }, ctx(tenant));
    expect(denied).toMatchObject({ decision: Decision.DENY, matchedRule: "deniedCapabilities", policyVersion: 1n });
    const http = await client.evaluate(
      { capability: "http.request", risk: Risk.LOW, facts: { httpHost: "api.example.com" } },
      ctx(tenant),
    );
    expect(http).toMatchObject({ decision: Decision.REQUIRE_APPROVAL, matchedRule: "requireConfirmationFor" });

    const other = await client.evaluate({ capability: "shell.exec", risk: Risk.LOW }, ctx(newTenant()));
    expect(other).toMatchObject({ decision: Decision.ALLOW, policyVersion: 0n });
  });

  it("maps proto risk rules: RISK_UNSPECIFIED switches a rule off", async () => {
    const tenant = newTenant();
    const document = protoDoc({
      riskRules: { requireApprovalAtOrAbove: Risk.UNSPECIFIED, denyAtOrAbove: Risk.CRITICAL },
    });
    await client.putPolicy({ document }, ctx(tenant));
    const got = await client.getPolicy({}, ctx(tenant));
    expect(got.document?.riskRules).toMatchObject({ requireApprovalAtOrAbove: Risk.UNSPECIFIED, denyAtOrAbove: Risk.CRITICAL });
    expect((await client.evaluate({ capability: "x.y", risk: Risk.HIGH }, ctx(tenant))).decision).toBe(Decision.ALLOW);
    expect((await client.evaluate({ capability: "x.y", risk: Risk.CRITICAL }, ctx(tenant))).decision).toBe(Decision.DENY);
  });

  it("rejects an invalid document with invalid_argument naming the field, across the hop", async () => {
    const tenant = newTenant();
    const err = await rejectionOf(
      client.putPolicy(
        { document: protoDoc({ httpAllowedDomains: ["api.example.com", "https://evil.example.com/x"] }) },
        ctx(tenant),
      ),
    );
    expect(err.code).toBe("invalid_argument");
    expect(err.message).toContain('document: httpAllowedDomains[1]: "https://evil.example.com/x" is a URL');
    const unknownRisk = await rejectionOf(
      client.putPolicy({ document: protoDoc({ riskRules: { denyAtOrAbove: 9 as Risk } }) }, ctx(tenant)),
    );
    expect(unknownRisk.code).toBe("invalid_argument");
    expect(unknownRisk.message).toContain("document: riskRules.denyAtOrAbove: expected one of");
    expect((await rejectionOf(client.putPolicy({}, ctx(tenant)))).code).toBe("invalid_argument");
    expect((await client.getPolicy({}, ctx(tenant))).version).toBe(0n);
  });

  it("refuses a rule whose condition does not compile, naming the rule, the position and the expression, across the hop", async () => {
    const tenant = newTenant();
    const err = await rejectionOf(
      client.putPolicy(
        {
          document: protoDoc({
            rules: [
              { capability: "jira.*", effect: Decision.DENY, when: '!("support" in principal.roles)' },
              { capability: "jira.delete", effect: Decision.DENY, when: '"support" in principal.rolez' },
            ],
          }),
        },
        ctx(tenant),
      ),
    );
    expect(err.code).toBe("invalid_argument");
    expect(err.message).toBe('document: rules[1].when: unknown field "rolez" at 1:24 in "\\"support\\" in principal.rolez"');
    const noEffect = await rejectionOf(client.putPolicy({ document: protoDoc({ rules: [{ capability: "jira.delete" }] }) }, ctx(tenant)));
    expect(noEffect.message).toBe('document: rules[0].effect: expected one of "allow", "deny", "require_approval", got "UNSPECIFIED"');
    expect((await client.getPolicy({}, ctx(tenant))).version).toBe(0n);
  });

  it("decides a rule's condition from the request's arguments and the caller's signed context, never from the request's claims", async () => {
    const tenant = newTenant();
    await client.putPolicy(
      { document: protoDoc({ rules: [{ capability: "jira.*", effect: Decision.DENY, when: '!("support" in principal.roles) || args.project == "HR"' }] }) },
      ctx(tenant),
    );
    const evaluate = (roles: string[], args: unknown) =>
      client.evaluate({ capability: "jira.create", risk: Risk.LOW, argumentsJson: JSON.stringify(args) }, { ctx: { tenant, principal: "p", roles } });
    expect((await evaluate(["support"], { project: "OPS" })).decision).toBe(Decision.ALLOW);
    expect(await evaluate(["support"], { project: "HR" })).toMatchObject({ decision: Decision.DENY, matchedRule: "rules[0]" });
    // Roles written into the arguments are arguments, not roles.
    expect(await evaluate([], { project: "OPS", principal: { roles: ["support"] } })).toMatchObject({ decision: Decision.DENY });
    const garbage = await rejectionOf(client.evaluate({ capability: "jira.create", risk: Risk.LOW, argumentsJson: "[1" }, ctx(tenant)));
    expect(garbage).toMatchObject({ code: "invalid_argument" });
    expect(garbage.message).toMatch(/^arguments_json: not valid JSON/);
    const list = await rejectionOf(client.evaluate({ capability: "jira.create", risk: Risk.LOW, argumentsJson: "[1]" }, ctx(tenant)));
    expect(list.message).toBe("arguments_json: must be a JSON object (the step's arguments by name)");
  });

  it("says with each REQUIRE_APPROVAL which channels may give it, and none with ALLOW", async () => {
    const tenant = newTenant();
    const high = await client.evaluate({ capability: "memory.write", risk: Risk.HIGH }, ctx(tenant));
    expect(high).toMatchObject({
      decision: Decision.REQUIRE_APPROVAL,
      approvalChannels: [ApprovalChannel.APPROVER, ApprovalChannel.OPERATOR, ApprovalChannel.CONSOLE],
      channelsRule: "approvalChannels.byRisk.high",
    });
    const low = await client.evaluate({ capability: "memory.read", risk: Risk.LOW }, ctx(tenant));
    expect(low).toMatchObject({ decision: Decision.ALLOW, approvalChannels: [], channelsRule: "" });

    await client.putPolicy(
      { document: protoDoc({ approvalChannels: { capabilities: { "memory.write": { channels: [ApprovalChannel.CONSOLE] } } } }) },
      ctx(tenant),
    );
    const named = await client.evaluate({ capability: "memory.write", risk: Risk.HIGH }, ctx(tenant));
    expect(named).toMatchObject({
      approvalChannels: [ApprovalChannel.CONSOLE],
      channelsRule: "approvalChannels.capabilities.memory.write",
      policyVersion: 1n,
    });
  });

  it("answers EvaluateApprovalChannels for a capability, a spend and a tool receipt under the tenant's policy", async () => {
    const tenant = newTenant();
    const PERSON = [ApprovalChannel.APPROVER, ApprovalChannel.OPERATOR, ApprovalChannel.CONSOLE];
    const spend = { subject: { case: "spend", value: { spendPolicy: "wire", tool: "wire_treasury_transfer" } } } as const;
    expect(await client.evaluateApprovalChannels(spend, ctx(tenant))).toMatchObject({
      channels: PERSON,
      matchedRule: "approvalChannels.spend.default",
      policyVersion: 0n,
    });
    await client.putPolicy(
      {
        document: protoDoc({
          approvalChannels: {
            spendPolicies: { wire: { channels: [ApprovalChannel.CLIENT_ELICITATION, ApprovalChannel.APPROVER] } },
            spendTools: { wire_treasury_transfer: { channels: [ApprovalChannel.OPERATOR] } },
          },
        }),
      },
      ctx(tenant),
    );
    expect(await client.evaluateApprovalChannels(spend, ctx(tenant))).toMatchObject({
      channels: [ApprovalChannel.OPERATOR],
      matchedRule: "approvalChannels.spend.tools.wire_treasury_transfer",
      policyVersion: 1n,
    });
    const plain = await client.evaluateApprovalChannels({ subject: { case: "spend", value: { spendPolicy: "wire" } } }, ctx(tenant));
    expect(plain).toMatchObject({
      channels: [ApprovalChannel.CLIENT_ELICITATION, ApprovalChannel.APPROVER],
      matchedRule: "approvalChannels.spend.policies.wire",
    });
    const capability = await client.evaluateApprovalChannels(
      { subject: { case: "capability", value: { name: "memory.write", risk: Risk.MEDIUM } } },
      ctx(tenant),
    );
    expect(capability).toMatchObject({ matchedRule: "approvalChannels.byRisk.medium" });
    expect(capability.channels).toContain(ApprovalChannel.CLIENT_ELICITATION);
    const receipt = await client.evaluateApprovalChannels({ subject: { case: "tool", value: { tool: "deploy" } } }, ctx(tenant));
    expect(receipt).toMatchObject({ channels: PERSON, matchedRule: "approvalChannels.byRisk.critical" });
    // Another tenant still has the defaults.
    expect((await client.evaluateApprovalChannels(spend, ctx(newTenant()))).matchedRule).toBe("approvalChannels.spend.default");
  });

  it("rejects an EvaluateApprovalChannels request without a subject or with a bad name, naming the field", async () => {
    const tenant = newTenant();
    const none = await rejectionOf(client.evaluateApprovalChannels({}, ctx(tenant)));
    expect(none.code).toBe("invalid_argument");
    expect(none.message).toContain("subject: required");
    const noPolicy = await rejectionOf(
      client.evaluateApprovalChannels({ subject: { case: "spend", value: { tool: "wire_treasury_transfer" } } }, ctx(tenant)),
    );
    expect(noPolicy.message).toContain("spend.spend_policy: must not be empty");
    const badName = await rejectionOf(
      client.evaluateApprovalChannels({ subject: { case: "capability", value: { name: "http.*" } } }, ctx(tenant)),
    );
    expect(badName.code).toBe("invalid_argument");
    expect(badName.message).toContain('capability.name: "http.*" is a wildcard');
  });

  it("stores the approvalChannels section, serves it with defaults applied, and warns of a client_elicitation opt-in", async () => {
    const tenant = newTenant();
    const fresh = await client.getPolicy({}, ctx(tenant));
    expect(fresh.warnings).toEqual([]);
    expect(fresh.document?.approvalChannels?.spendDefault?.channels).toEqual([
      ApprovalChannel.APPROVER,
      ApprovalChannel.OPERATOR,
      ApprovalChannel.CONSOLE,
    ]);
    await client.putPolicy(
      {
        document: protoDoc({
          approvalChannels: { high: { channels: [ApprovalChannel.CONSOLE, ApprovalChannel.CLIENT_ELICITATION] } },
        }),
      },
      ctx(tenant),
    );
    const got = await client.getPolicy({}, ctx(tenant));
    const section = got.document?.approvalChannels;
    // Stored in the channel order; the keys left unset took their defaults.
    expect(section?.high?.channels).toEqual([ApprovalChannel.CLIENT_ELICITATION, ApprovalChannel.CONSOLE]);
    expect(section?.critical?.channels).toEqual([ApprovalChannel.APPROVER, ApprovalChannel.OPERATOR, ApprovalChannel.CONSOLE]);
    expect(got.warnings).toHaveLength(1);
    expect(got.warnings[0]).toMatch(/^approvalChannels\.byRisk\.high lists client_elicitation/);
  });

  it("rejects an empty or unnamed channel in a stored section with invalid_argument naming the field", async () => {
    const tenant = newTenant();
    const empty = await rejectionOf(
      client.putPolicy({ document: protoDoc({ approvalChannels: { high: { channels: [] } } }) }, ctx(tenant)),
    );
    expect(empty.code).toBe("invalid_argument");
    expect(empty.message).toContain("document: approvalChannels.byRisk.high: an empty list leaves no way to approve");
    const unnamed = await rejectionOf(
      client.putPolicy(
        { document: protoDoc({ approvalChannels: { spendPolicies: { wire: { channels: [ApprovalChannel.UNSPECIFIED] } } } }) },
        ctx(tenant),
      ),
    );
    expect(unnamed.message).toContain('document: approvalChannels.spend.policies.wire[0]: "unspecified" is not an approval channel');
    expect((await client.getPolicy({}, ctx(tenant))).version).toBe(0n);
  });

  it("rejects a stale expectedVersion with conflict, across the hop", async () => {
    const tenant = newTenant();
    await client.putPolicy({ document: protoDoc({}) }, ctx(tenant));
    await client.putPolicy({ document: protoDoc({ deniedCapabilities: ["a.b"] }), expectedVersion: 1n }, ctx(tenant));
    const err = await rejectionOf(
      client.putPolicy({ document: protoDoc({ deniedCapabilities: ["c.d"] }), expectedVersion: 1n }, ctx(tenant)),
    );
    expect(err.code).toBe("conflict");
    expect(err.message).toContain("version 2, not 1");
  });

  it("rejects an evaluation without a capability with invalid_argument", async () => {
    const err = await rejectionOf(client.evaluate({ risk: Risk.LOW }, ctx(newTenant())));
    expect(err.code).toBe("invalid_argument");
    expect(err.message).toContain("capability");
  });

  it("streams the current policy and then each new version", async () => {
    const tenant = newTenant();
    const controller = new AbortController();
    const stream = client.watchPolicy({}, { ...ctx(tenant), signal: controller.signal, timeoutMs: 30_000 });
    const it = stream[Symbol.asyncIterator]();
    const first = await within(it.next(), "the current policy");
    expect(first.value).toMatchObject({ version: 0n });
    const pending = it.next();
    await client.putPolicy({ document: protoDoc({ deniedCapabilities: ["shell.exec"] }) }, ctx(tenant));
    const second = await within(pending, "version 1");
    expect(second.value?.version).toBe(1n);
    expect(second.value?.document?.deniedCapabilities).toEqual(["shell.exec"]);
    await it.return?.();
  });
});

describe("PolicyService over gRPC: context", () => {
  it("refuses a call whose context is signed with another key", async () => {
    const store = createSqlPolicyStore(db);
    const server = await startGrpcServer({
      host: "127.0.0.1",
      port: 0,
      signer,
      logger: silent,
      registrations: [register(PolicyService, createPolicyHandlers(store))],
    });
    const stranger = createGrpcClient(PolicyService, `127.0.0.1:${server.port}`, new ContextSigner("x".repeat(32)));
    try {
      const err = await rejectionOf(stranger.client.evaluate({ capability: "a.b" }, ctx("default")));
      expect(err.code).toBe("unauthenticated");
    } finally {
      stranger.close();
      await server.shutdown(1_000);
      await store.close();
    }
  });
});

describe("PolicyService on the standalone file store", () => {
  it("reports a rejected edit of policy.json through getPolicy while the last good version stays in force", async () => {
    const dir = await mkdtemp(join(tmpdir(), "chaoscore-policy-handlers-"));
    const path = join(dir, "policy.json");
    const store = await createFilePolicyStore({ path, logger: silent, pollMs: 50 });
    const client = createInProcessClient(PolicyService, createPolicyHandlers(store));
    try {
      const start = await client.getPolicy({}, ctx("default"));
      expect(start).toMatchObject({ version: 1n, source: `file:${path}`, lastError: "" });
      await writeFile(path, '{"deniedCapabilities": [true]}');
      let got = start;
      for (let i = 0; i < 200 && !got.lastError.includes("deniedCapabilities"); i++) {
        await new Promise((r) => setTimeout(r, 25));
        got = await client.getPolicy({}, ctx("default"));
      }
      expect(got.lastError).toContain(`${path}: deniedCapabilities[0]: expected string, got boolean`);
      expect(got.version).toBe(1n);
      expect(policyDocumentFromProto(got.document!, "got")).toEqual(defaultPolicyDocument());
      const other = await rejectionOf(client.getPolicy({}, ctx("acme")));
      expect(other.code).toBe("permission_denied");
    } finally {
      await store.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe("proto mapping", () => {
  it("round-trips documents, including every risk threshold, through the proto form", () => {
    const thresholds = ["low", "medium", "high", "critical", "never"] as const;
    for (const requireApprovalAtOrAbove of thresholds) {
      for (const denyAtOrAbove of thresholds) {
        const json = validatePolicyDocument(
          {
            allowedCapabilities: ["a.b", "http.request"],
            deniedCapabilities: ["c"],
            requireConfirmationFor: ["http.request"],
            httpAllowedDomains: ["api.example.com"],
            riskRules: { requireApprovalAtOrAbove, denyAtOrAbove },
          },
          "test",
        );
        expect(policyDocumentFromProto(policyDocumentToProto(json), "rt")).toEqual(json);
      }
    }
    expect(policyDocumentFromProto(policyDocumentToProto(defaultPolicyDocument()), "rt")).toEqual(defaultPolicyDocument());
  });

  it("round-trips the approvalChannels section, every entry and channel, through the proto form", () => {
    const json = validatePolicyDocument(
      {
        approvalChannels: {
          byRisk: { low: ["approver"], medium: ["operator"], high: ["console"], critical: ["client_elicitation", "console"] },
          capabilities: { "http.request": ["console"], "memory.write": ["approver", "operator"] },
          spend: {
            default: ["operator"],
            policies: { wire: ["console"], equity: ["client_elicitation"] },
            tools: { wire_treasury_transfer: ["approver", "console"] },
          },
        },
      },
      "test",
    );
    expect(policyDocumentFromProto(policyDocumentToProto(json), "rt")).toEqual(json);
  });

  it("reads an absent section, or an unset set in it, as the defaults", () => {
    expect(policyDocumentFromProto(protoDoc({}), "rt").approvalChannels).toEqual(defaultPolicyDocument().approvalChannels);
    const partial = policyDocumentFromProto(protoDoc({ approvalChannels: { low: { channels: [ApprovalChannel.CONSOLE] } } }), "rt");
    expect(partial.approvalChannels).toEqual({ ...defaultPolicyDocument().approvalChannels, byRisk: { ...defaultPolicyDocument().approvalChannels.byRisk, low: ["console"] } });
  });
});
