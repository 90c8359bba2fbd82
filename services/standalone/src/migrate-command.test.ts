import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../../../test/support/postgres.js";
import { runMigrateCommand } from "./migrate-command.js";

let database: TestDatabase;

async function run(env: Record<string, string | undefined>, ...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = "";
  let err = "";
  const code = await runMigrateCommand(argv, { stdout: { write: (s: string) => (out += s) }, stderr: { write: (s: string) => (err += s) }, env });
  return { code, out, err };
}

async function migrationsIn(url: string): Promise<Record<string, string[]>> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const found: Record<string, string[]> = {};
    for (const schema of ["memory", "council", "ledger", "policy"]) {
      const exists = await client.query("SELECT 1 FROM information_schema.tables WHERE table_schema = $1 AND table_name = 'schema_migrations'", [schema]);
      found[schema] = exists.rowCount ? (await client.query<{ id: string }>(`SELECT id FROM ${schema}.schema_migrations ORDER BY id`)).rows.map((r) => r.id) : [];
    }
    return found;
  } finally {
    await client.end();
  }
}

beforeAll(async () => {
  database = await createTestDatabase("chaoscore_migrate_cli");
});

afterAll(async () => {
  await database?.drop();
});

describe("chaos-core migrate", () => {
  it("applies every service's migrations to DATABASE_URL, then finds them current on a second run", async () => {
    const first = await run({ DATABASE_URL: database.url });
    expect(first.err).toBe("");
    expect(first.code).toBe(0);
    expect(first.out).toMatch(/^memory: applied 0001_items, 0002_items_updated, 0003_one_statement_calls, 0004_search_words\ncouncil: applied .+\nledger: applied .+\npolicy: applied .+\nmigrations current in /);
    const applied = await migrationsIn(database.url);
    for (const schema of ["memory", "council", "ledger", "policy"]) expect(applied[schema], schema).not.toEqual([]);

    const second = await run({}, "--database-url", database.url);
    expect(second).toMatchObject({ code: 0, err: "" });
    expect(second.out).toMatch(/^memory: up to date\ncouncil: up to date\nledger: up to date\npolicy: up to date\n/);
    expect(await migrationsIn(database.url)).toEqual(applied);
  });

  it("needs a database: no DATABASE_URL, or one that is not postgres://, is a usage error naming it", async () => {
    expect(await run({})).toMatchObject({ code: 2, out: "", err: expect.stringMatching(/^chaos-core migrate: DATABASE_URL: is required/) });
    expect(await run({ DATABASE_URL: "mysql://db/x" })).toMatchObject({ code: 2, err: expect.stringMatching(/DATABASE_URL: must be a postgres:\/\//) });
    expect(await run({}, "--database-url", "mysql://db/x")).toMatchObject({ code: 2, err: expect.stringMatching(/--database-url: must be a postgres:\/\//) });
    expect(await run({}, "--bogus")).toMatchObject({ code: 2, err: expect.stringMatching(/unknown option '--bogus'/i) });
  });

  it("a database it cannot reach fails with exit 1, naming the service and the URL without its password", async () => {
    const res = await run({ DATABASE_URL: "postgres://chaos:s3cret@127.0.0.1:1/nowhere" });
    expect(res.code).toBe(1);
    expect(res.err).toMatch(/the memory migrations failed on postgres:\/\/chaos:\*\*\*@127\.0\.0\.1:1\/nowhere \(DATABASE_URL\): the database is unavailable/);
    expect(res.err).not.toContain("s3cret");
  });
});
