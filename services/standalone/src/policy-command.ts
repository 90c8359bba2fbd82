import { readFile } from "node:fs/promises";
import type { Readable } from "node:stream";
import { assertTenantId, createLogger, createPostgresDb, type Db, type Env } from "@chaos-core/kit";
import {
  createFilePolicyStore,
  createSqlPolicyStore,
  formatPolicyDocument,
  migratePolicy,
  parsePolicyDocument,
  STANDALONE_TENANT,
  validatePolicyDocument,
  type PolicyDocumentJson,
  type PolicyStore,
} from "@chaos-core/policy";
import { adminRequest, type AdminFile } from "./admin-client.js";
import { parseCommandLine, storesFromCommandLine, unknownCommand, UsageError } from "./command-line.js";
import type { OperatorStores } from "./config.js";
import { accessDataDir } from "./data-dir-access.js";
import { POLICY_FILE, policyFilePath } from "./data-dir-layout.js";
import { argsProblems, capabilityCatalogue, explain, explanationJson, explanationText, readPolicyTests, testPolicy, type PolicyInForce } from "./policy-check-command.js";

/** Where the command reads and writes; the process streams by default, buffers in tests. */
export interface PolicyCommandIo {
  stdout: { write(chunk: string): unknown };
  stderr: { write(chunk: string): unknown };
  stdin?: Readable;
  /** The environment the stores are found from when no flag names them. */
  env: Env;
}

/** Exit code: done. */
export const EXIT_OK = 0;
/** Exit code: the document is not valid (the message names the field), or the store refused. */
export const EXIT_FAILED = 1;
/** Exit code: the command line was wrong. */
export const EXIT_USAGE = 2;

/** The help text of `chaos-core policy`. */
export const POLICY_USAGE = `Usage: chaos-core policy <command> [--tenant <tenant>] [--database-url <url> | --data-dir <dir>] [--json]

Commands:
  show        The tenant's capability policy: the document on stdout, as policy.json holds it
              (edit it and set it again), its version and where it lives on stderr; with --json
              one object {tenant, version, source, updated_at, document, last_error?}
  set <file>  Validates <file> (- reads stdin) exactly as policy.json is validated and stores it
              as the next version; a bad field is named and nothing is stored
              [--expected-version N: store only while the policy is at version N]
  explain --capability NAME [--principal ID] [--roles a,b] [--args JSON] [--now ISO] [--host H] [--risk R]
              What the policy would decide for that call, without running anything: the
              decision, the rule that made it, its condition, the version, and every rule naming
              the capability with what its condition said. The capability's risk and annotations
              come from this environment's registry (built-in capabilities and the pinned tools
              of upstreams.json); --risk for one it does not know
  test <file> Runs the cases of <file> ({"cases": [{name, capability, principal: {id, roles},
              args, now?, risk?, expect: {effect, rule?}}]}) against the policy and prints each
              (FAIL: expected and got); exits 1 when one fails
  explain and test decide with the tenant's stored policy, or with --policy FILE (not stored:
  a change checked before it is set).

Where the policy is: --database-url, --data-dir, else where a server started in this
environment keeps it: Postgres when DATABASE_URL is set (one versioned document per tenant),
else the data directory's ${POLICY_FILE} (CHAOS_CORE_DATA_DIR, else the per-user data
directory). A running server on that data directory stores it through its loopback admin
endpoint and applies it at once; with none running the command writes it in place, and the
next start applies it. A data directory holds the policy of tenant "default" only.
--tenant defaults to "default". This is the capability policy (which capabilities may run,
which need a person); spend and tool-approval policies are CHAOS_CORE_LEDGER_POLICY_FILE's.
Exits 0 when done, 1 when the document is invalid or the store refused, 2 on a usage error.
`;

/** One version of a tenant's policy, as every source reports it. */
interface Shown {
  tenant: string;
  version: number;
  source: string;
  updated_at: string;
  document: PolicyDocumentJson;
  last_error?: string;
}

async function withPostgresStore<T>(url: string, fn: (store: PolicyStore) => Promise<T>): Promise<T> {
  const db: Db = createPostgresDb({ connectionString: url, max: 2, applicationName: "chaos-core-policy-cli" });
  try {
    // Idempotent and advisory-locked, as every service start runs it: the table exists afterwards.
    await migratePolicy(db);
    const store = createSqlPolicyStore(db);
    try {
      return await fn(store);
    } finally {
      await store.close();
    }
  } finally {
    await db.close();
  }
}

/** The data directory's policy store while this command holds the directory (no server runs there). */
async function withFileStore<T>(dataDir: string, fn: (store: PolicyStore) => Promise<T>): Promise<T> {
  const store = await createFilePolicyStore({ path: policyFilePath(dataDir), logger: createLogger("chaos-core-policy", "silent") });
  try {
    return await fn(store);
  } finally {
    await store.close();
  }
}

function shown(tenant: string, snapshot: Awaited<ReturnType<PolicyStore["get"]>>): Shown {
  return {
    tenant,
    version: snapshot.version,
    source: snapshot.source,
    updated_at: snapshot.updatedAt.toISOString(),
    document: snapshot.document,
    ...(snapshot.lastError !== undefined ? { last_error: snapshot.lastError } : {}),
  };
}

/**
 * Runs `fn` on the store of the stores given: Postgres, or a data directory's file store (held
 * by this command); `viaServer` is taken instead when a server runs on the data directory.
 */
async function onStores<T>(
  stores: OperatorStores,
  tenant: string,
  fn: (store: PolicyStore) => Promise<T>,
  viaServer: (admin: AdminFile, dataDir: string) => Promise<T>,
): Promise<T> {
  if (stores.kind === "postgres") return withPostgresStore(stores.url, fn);
  if (tenant !== STANDALONE_TENANT) {
    throw new Error(
      `a data directory's ${POLICY_FILE} holds the policy of tenant "${STANDALONE_TENANT}" only, not "${tenant}"; ` +
        "other tenants' policies live in Postgres (--database-url)",
    );
  }
  const access = await accessDataDir(stores.dataDir);
  if (access.running) return viaServer(access.admin, stores.dataDir);
  try {
    return await withFileStore(stores.dataDir, fn);
  } finally {
    await access.release();
  }
}

async function readDocument(file: string, io: PolicyCommandIo): Promise<PolicyDocumentJson> {
  let text: string;
  try {
    if (file === "-") {
      const chunks: Buffer[] = [];
      for await (const chunk of (io.stdin ?? process.stdin) as AsyncIterable<Buffer | string>) {
        chunks.push(typeof chunk === "string" ? Buffer.from(chunk) : chunk);
      }
      text = Buffer.concat(chunks).toString("utf8");
    } else {
      text = await readFile(file, "utf8");
    }
  } catch (err) {
    throw new Error(`cannot read ${file}: ${(err as Error).message}`, { cause: err });
  }
  // The validation policy.json gets: the same message, naming the file and each bad field.
  return parsePolicyDocument(text, file === "-" ? "stdin" : file);
}

function onePositional(positionals: string[], what: string): string {
  if (positionals.length !== 1) throw new UsageError(`expected exactly one ${what}`);
  return positionals[0]!;
}

/** The tenant's policy in force: through the running server on a data directory, else from the store. */
async function policyInForce(stores: OperatorStores, tenant: string): Promise<PolicyInForce> {
  const policy = await onStores(
    stores,
    tenant,
    async (store) => shown(tenant, await store.get(tenant)),
    async (admin) => (await (await adminRequest(admin, "GET", `/v1/policy?tenant=${encodeURIComponent(tenant)}`)).json()) as Shown,
  );
  return { document: validatePolicyDocument(policy.document, `${policy.source} policy of tenant "${tenant}"`), version: policy.version, source: policy.source };
}

const CHECK_FLAGS = ["capability", "principal", "roles", "args", "now", "host", "risk", "policy"] as const;

/** Runs `chaos-core policy …` (argv after `policy`) and resolves with the exit code. */
export async function runPolicyCommand(argv: string[], io: PolicyCommandIo): Promise<number> {
  const [command, ...rest] = argv;
  let json = false;
  try {
    if (command === undefined) throw new UsageError("name a command: show, set, explain or test");
    if (command === "help" || command === "--help" || command === "-h") {
      io.stdout.write(POLICY_USAGE);
      return EXIT_OK;
    }
    if (command !== "show" && command !== "set" && command !== "explain" && command !== "test") {
      throw unknownCommand("policy command", command, ["show", "set", "explain", "test", "help"]);
    }
    const { values, positionals } = parseCommandLine(
      rest,
      {
        tenant: { type: "string" },
        "database-url": { type: "string" },
        "data-dir": { type: "string" },
        "expected-version": { type: "string" },
        json: { type: "boolean" },
        capability: { type: "string" },
        principal: { type: "string" },
        roles: { type: "string" },
        args: { type: "string" },
        now: { type: "string" },
        host: { type: "string" },
        risk: { type: "string" },
        policy: { type: "string" },
      },
      { positionals: true },
    );
    json = values.json === true;
    const tenant = values.tenant ?? STANDALONE_TENANT;
    try {
      assertTenantId(tenant);
    } catch (err) {
      throw new UsageError(`--tenant: ${(err as Error).message}`);
    }
    const stores = storesFromCommandLine(values, io.env);
    // The capabilities a server on these stores serves: the built-in ones and its upstreams' pinned tools.
    const catalogue = () => capabilityCatalogue(stores.kind === "data-dir" ? { ...io.env, CHAOS_CORE_DATA_DIR: stores.dataDir } : io.env);
    const checkFlag = CHECK_FLAGS.find((flag) => values[flag] !== undefined);
    if (checkFlag && command !== "explain" && !(command === "test" && checkFlag === "policy")) {
      throw new UsageError(`--${checkFlag} belongs to ${checkFlag === "policy" ? "explain and test" : "explain"}`);
    }

    if (command === "explain" || command === "test") {
      if (values["expected-version"] !== undefined) throw new UsageError("--expected-version belongs to set");
      const testsFile = command === "test" ? onePositional(positionals, "tests file") : undefined;
      if (command === "explain" && positionals.length > 0) throw new UsageError("explain takes flags only (--capability NAME …)");
      const policyFile = values.policy;
      const policy: PolicyInForce = policyFile
        ? { document: await readDocument(policyFile, io), version: 0, source: `file ${policyFile}, not stored` }
        : await policyInForce(stores, tenant);
      const known = await catalogue();
      if (testsFile === undefined) {
        const e = explain(values, policy, tenant, known.facts);
        const capability = values.capability!;
        const problems = argsProblems(policy, known);
        io.stdout.write(json ? `${JSON.stringify(explanationJson(e, policy, tenant, capability, problems))}\n` : explanationText(e, policy, capability, problems));
        return EXIT_OK;
      }
      const run = testPolicy(await readPolicyTests(testsFile), policy, tenant, known);
      if (json) io.stdout.write(`${JSON.stringify({ tenant, policy_version: policy.version, source: policy.source, ...run })}\n`);
      else {
        const lines = [...run.args_problems.map((p) => `FAIL ${p}`), ...run.results.map((r) => r.line)];
        io.stdout.write(`${lines.join("\n")}\n${run.passed} passed, ${run.failed} failed (policy version ${policy.version}, ${policy.source})\n`);
      }
      return run.failed === 0 ? EXIT_OK : EXIT_FAILED;
    }

    if (command === "show") {
      if (positionals.length > 0) throw new UsageError("show takes no arguments");
      if (values["expected-version"] !== undefined) throw new UsageError("--expected-version belongs to set");
      const policy = await onStores(
        stores,
        tenant,
        async (store) => shown(tenant, await store.get(tenant)),
        async (admin) => (await (await adminRequest(admin, "GET", `/v1/policy?tenant=${encodeURIComponent(tenant)}`)).json()) as Shown,
      );
      if (json) {
        io.stdout.write(`${JSON.stringify(policy)}\n`);
      } else {
        io.stdout.write(formatPolicyDocument(policy.document));
        io.stderr.write(`policy of tenant "${tenant}": version ${policy.version} (${policy.source}, stored ${policy.updated_at})\n`);
        if (policy.last_error) io.stderr.write(`the latest edit was refused; version ${policy.version} stays in force: ${policy.last_error}\n`);
      }
      return EXIT_OK;
    }

    const file = onePositional(positionals, "policy file (or - for stdin)");
    const expectedText = values["expected-version"];
    if (expectedText !== undefined && !/^[1-9][0-9]{0,15}$/.test(expectedText)) {
      throw new UsageError(`--expected-version must be a version number (1 or more), got "${expectedText}"`);
    }
    const expected = expectedText === undefined ? undefined : Number(expectedText);
    const document = await readDocument(file, io);
    // Checked against the pinned tools this environment serves, where they are known (docs/policy-conditions.md §5).
    const unpinned = argsProblems({ document, version: 0, source: file }, await catalogue());
    if (unpinned.length > 0) throw new Error(`${file === "-" ? "stdin" : file}: ${unpinned.join("; ")}; nothing was stored`);
    const stored = await onStores(
      stores,
      tenant,
      async (store) => ({
        version: await store.put(tenant, document, expected),
        where: stores.kind === "postgres" ? "postgres" : `file:${policyFilePath(stores.dataDir)}; the next start applies it`,
      }),
      async (admin, dataDir) => {
        const body = { tenant, document, ...(expected !== undefined ? { expected_version: expected } : {}) };
        const answer = (await (await adminRequest(admin, "PUT", "/v1/policy", body)).json()) as { version: number };
        return { version: answer.version, where: `in force now on the server running on ${dataDir}` };
      },
    );
    io.stdout.write(
      json
        ? `${JSON.stringify({ tenant, version: stored.version, source: stored.where })}\n`
        : `policy of tenant "${tenant}" stored as version ${stored.version} (${stored.where})\n`,
    );
    return EXIT_OK;
  } catch (err) {
    if (err instanceof UsageError) {
      io.stderr.write(`chaos-core policy: ${err.message}\n\n${POLICY_USAGE}`);
      return EXIT_USAGE;
    }
    const message = err instanceof Error ? err.message : String(err);
    io.stderr.write(`chaos-core policy: ${message}\n`);
    if (json) io.stdout.write(`${JSON.stringify({ error: message })}\n`);
    return EXIT_FAILED;
  }
}
