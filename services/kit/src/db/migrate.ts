import type { Logger } from "../logger.js";
import { APP_ROLE, type Db } from "./db.js";

/** One forward-only migration. Ids sort in the order they apply. */
export interface Migration {
  id: string;
  sql: string;
}

const SCHEMA_RE = /^[a-z][a-z0-9_]*$/;

/**
 * Applies a service's migrations to its own schema, once, in order, in one transaction held
 * under an advisory lock so concurrent replicas do not race. Creates the shared application
 * role first (a role is cluster-wide; a concurrent creator elsewhere is tolerated).
 * Returns the ids that were applied now.
 */
export async function migrate(db: Db, schema: string, migrations: Migration[]): Promise<string[]> {
  if (!SCHEMA_RE.test(schema)) throw new Error(`invalid schema name "${schema}"`);
  return db.adminTx(async (q) => {
    await q.query("SELECT pg_advisory_xact_lock(hashtext('chaoscore.migrate'))");
    await q.query(`DO $$ BEGIN
        IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '${APP_ROLE}') THEN
          CREATE ROLE ${APP_ROLE} NOLOGIN;
        END IF;
      EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
      END $$`);
    await q.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
    await q.query(`GRANT USAGE ON SCHEMA ${schema} TO ${APP_ROLE}`);
    await q.query(
      `CREATE TABLE IF NOT EXISTS ${schema}.schema_migrations (id text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`,
    );
    const done = new Set(
      (await q.query<{ id: string }>(`SELECT id FROM ${schema}.schema_migrations`)).rows.map((r) => r.id),
    );
    const applied: string[] = [];
    for (const m of [...migrations].sort((a, b) => a.id.localeCompare(b.id))) {
      if (done.has(m.id)) continue;
      await q.exec(m.sql);
      await q.query(`INSERT INTO ${schema}.schema_migrations (id) VALUES ($1)`, [m.id]);
      applied.push(m.id);
    }
    return applied;
  });
}

/**
 * The ids of `migrations` not yet applied to `schema` (all of them when the schema has none);
 * applies nothing. What a service started with `CHAOS_CORE_MIGRATE=verify` waits on.
 */
export async function pendingMigrations(db: Db, schema: string, migrations: Migration[]): Promise<string[]> {
  if (!SCHEMA_RE.test(schema)) throw new Error(`invalid schema name "${schema}"`);
  return db.adminTx(async (q) => {
    const table = (await q.query<{ t: string | null }>(`SELECT to_regclass('${schema}.schema_migrations')::text AS t`)).rows[0]?.t;
    const done = new Set(table ? (await q.query<{ id: string }>(`SELECT id FROM ${schema}.schema_migrations`)).rows.map((r) => r.id) : []);
    return migrations.map((m) => m.id).filter((id) => !done.has(id)).sort((a, b) => a.localeCompare(b));
  });
}

/** A gRPC server's readiness switch ({@link RunningGrpcServer.setServing}). */
export interface ServingSwitch {
  setServing(serving: boolean): void;
}

/** How a service run alone brings its schema current (see `CHAOS_CORE_MIGRATE`) and stays ready only while its database answers. */
export interface SchemaGate {
  /**
   * `verify`: NOT_SERVING now, SERVING once nothing is pending. Both modes: while serving, the
   * database is checked every `watchMs`; NOT_SERVING while it cannot be reached, SERVING again
   * once it answers.
   */
  hold(server: ServingSwitch): void;
  stop(): void;
}

/** How often a serving service checks that its database still answers (readiness). */
export const DATABASE_WATCH_MS = 5_000;
/** How long one such check may take before the database counts as unreachable. */
export const DATABASE_CHECK_TIMEOUT_MS = 3_000;

/**
 * `auto` applies the service's migrations now (under the advisory lock) and logs what it applied.
 * `verify` applies nothing: {@link SchemaGate.hold} keeps the server NOT_SERVING and checks every
 * `intervalMs` (default 2 s) until no migration is pending (a database out of reach counts as not
 * current), then marks it SERVING — `chaos-core migrate`, run once from a Job, does the applying.
 * In both modes the check then goes on every `watchMs` (default {@link DATABASE_WATCH_MS}): a
 * database that stops answering (or takes longer than {@link DATABASE_CHECK_TIMEOUT_MS}) turns
 * the server NOT_SERVING, so Kubernetes takes the pod out of its Services (and a headless name
 * stops resolving to it) instead of sending it calls that would fail; it turns SERVING again,
 * without a restart, once the database answers.
 */
export async function schemaGate(
  mode: "auto" | "verify",
  options: { apply: () => Promise<string[]>; pending: () => Promise<string[]>; logger: Logger; intervalMs?: number; watchMs?: number },
): Promise<SchemaGate> {
  const { logger } = options;
  if (mode === "auto") {
    const applied = await options.apply();
    if (applied.length > 0) logger.info({ migrations: applied }, "applied migrations");
  }
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  return {
    hold(server) {
      // auto: the server is SERVING already (the migrations just ran); verify: not until they are current.
      let serving = mode === "auto";
      if (!serving) server.setServing(false);
      let reported = "";
      const check = async () => {
        let problem: string | undefined;
        try {
          let timeout: NodeJS.Timeout | undefined;
          const pending = await Promise.race([
            options.pending(),
            new Promise<never>((_, reject) => {
              timeout = setTimeout(() => reject(new Error(`no answer within ${DATABASE_CHECK_TIMEOUT_MS} ms`)), DATABASE_CHECK_TIMEOUT_MS);
            }),
          ]).finally(() => clearTimeout(timeout));
          if (pending.length > 0) problem = `migrations pending: ${pending.join(", ")}; run chaos-core migrate (CHAOS_CORE_MIGRATE=verify applies none)`;
        } catch (err) {
          problem = `the database cannot be reached: ${(err as Error).message}`;
        }
        if (stopped) return;
        if (problem === undefined) {
          if (!serving) {
            server.setServing(true);
            logger.info(reported.startsWith("the database cannot be reached") ? "the database answers again: serving" : "migrations are current: serving");
          }
          serving = true;
          reported = "";
        } else {
          if (serving) server.setServing(false);
          serving = false;
          if (problem !== reported) {
            logger.warn({ problem }, problem.startsWith("migrations pending") ? "not serving until the migrations are current" : "not serving until the database answers");
          }
          reported = problem;
        }
        timer = setTimeout(() => void check(), serving ? (options.watchMs ?? DATABASE_WATCH_MS) : (options.intervalMs ?? 2_000));
      };
      if (serving) timer = setTimeout(() => void check(), options.watchMs ?? DATABASE_WATCH_MS);
      else void check();
    },
    stop() {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
