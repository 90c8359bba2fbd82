import { ChaosError, ConfigError, createPostgresDb, envVars, parseEnv, type Db, type Env } from "@chaos-core/kit";
import { migrateCouncil } from "@chaos-core/council";
import { migrateLedger } from "@chaos-core/ledger";
import { migrateMemory } from "@chaos-core/memory";
import { migratePolicy } from "@chaos-core/policy";
import { z } from "zod";
import { parseCommandLine, UsageError, withFlags } from "./command-line.js";

/** Where the command writes; the process streams by default, buffers in tests. */
export interface MigrateCommandIo {
  stdout: { write(chunk: string): unknown };
  stderr: { write(chunk: string): unknown };
  env: Env;
}

/** The help text of `chaos-core migrate`. */
export const MIGRATE_USAGE = `Usage: chaos-core migrate [--database-url <url>]

Applies every service's database migrations (memory, council, ledger, policy: each in its own
schema, in that order, as chaos-core serve does on start) to the Postgres database in
--database-url, else DATABASE_URL, once, and exits. Safe to run again and beside a running
service: each service's migrations apply in one transaction under the advisory lock the
services take, and what is applied already is skipped. This is what the container image's
"migrate" component runs (a Kubernetes Job before the services roll out).
Exits 0 when every schema is current, 1 when the database refused or could not be reached, 2 on a
usage error.
`;

/** The services whose schemas live in the database, in the order they are migrated. */
const SERVICES: ReadonlyArray<readonly [string, (db: Db) => Promise<string[]>]> = [
  ["memory", migrateMemory],
  ["council", migrateCouncil],
  ["ledger", migrateLedger],
  ["policy", migratePolicy],
];

const schema = z.object({
  // Required here; its form is checked as every service checks it.
  DATABASE_URL: z.string({ error: "is required: the Postgres database to migrate (postgres://user@host:5432/db)" }).pipe(envVars.postgresUrl().unwrap()),
});

/** `postgres://user:***@host:port/db`: the URL fit for a message. */
function redact(url: string): string {
  const u = new URL(url);
  if (u.password) u.password = "***";
  return u.toString();
}

/** Runs `chaos-core migrate`; resolves with the exit code. */
export async function runMigrateCommand(args: string[], io: MigrateCommandIo): Promise<number> {
  let url: string;
  try {
    const { values } = parseCommandLine(args, { "database-url": { type: "string" }, help: { type: "boolean", short: "h" } });
    if (values.help) {
      io.stdout.write(MIGRATE_USAGE);
      return 0;
    }
    const { env, fromFlags } = withFlags(io.env, values, { "database-url": "DATABASE_URL" });
    try {
      url = parseEnv(schema, env).DATABASE_URL!;
    } catch (err) {
      if (err instanceof ConfigError && fromFlags.size > 0) throw new UsageError(`--database-url: ${err.issues[0]?.message ?? err.message}`);
      throw err;
    }
  } catch (err) {
    if (err instanceof UsageError) {
      io.stderr.write(`chaos-core migrate: ${err.message}\n${MIGRATE_USAGE.split("\n")[0]}\n`);
      return 2;
    }
    if (err instanceof ConfigError) {
      io.stderr.write(`chaos-core migrate: ${err.issues.map((i) => `${i.variable}: ${i.message}`).join("; ")}\n`);
      return 2;
    }
    throw err;
  }

  // No statement timeout: a migration over a large table may take minutes; the Job that runs this
  // has its own deadline.
  const db = createPostgresDb({ connectionString: url, applicationName: "chaos-core-migrate", max: 1, statementTimeoutMs: 0 });
  let service = SERVICES[0]![0];
  try {
    for (const [name, migrateService] of SERVICES) {
      service = name;
      const applied = await migrateService(db);
      io.stdout.write(`${name}: ${applied.length > 0 ? `applied ${applied.join(", ")}` : "up to date"}\n`);
    }
    io.stdout.write(`migrations current in ${redact(url)}\n`);
    return 0;
  } catch (err) {
    const cause = err instanceof ChaosError && err.cause instanceof Error ? `${err.message}: ${err.cause.message}` : (err as Error).message;
    io.stderr.write(`chaos-core migrate: the ${service} migrations failed on ${redact(url)} (DATABASE_URL): ${cause}\n`);
    return 1;
  } finally {
    await db.close().catch(() => undefined);
  }
}
