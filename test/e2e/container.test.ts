/**
 * The container image (deploy/Dockerfile), built once by scripts/ci/image.sh and run with podman
 * exactly as locked down as the chart runs it: read-only root filesystem, uid 1000, no
 * capabilities, nothing writable but /tmp (and the standalone's data volume), `--init`, the host
 * network. Standalone on a named volume, then every service as its own container against this
 * machine's Postgres and Redis, each driven by a real MCP client over HTTP.
 */
import { randomBytes } from "node:crypto";
import { chmodSync, chownSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { generateMrtrKeyringFile, hashApiKey } from "@chaos-core/edge";
import { checkGrpcHealth } from "@chaos-core/kit";
import { generateKeyringFile } from "@chaos-core/ledger";
import { containersUnavailable, Containers, podman, testImage, waitFor, type Container, type TestImage } from "../support/containers.js";
import { createTestDatabase, type TestDatabase } from "../support/postgres.js";
import { httpClient } from "../support/processes.js";
import { TEST_REDIS_URL, uniquePrefix } from "../support/redis.js";

const unavailable = containersUnavailable();
if (unavailable) console.warn(`container tests skipped: ${unavailable}`);
const describeImage = describe.skipIf(unavailable !== undefined);
const suffix = unavailable ? ` (skipped: ${unavailable})` : "";

/** What each phase took, printed once at the end (a measurement, never an assertion). */
const timings: Record<string, number> = {};

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** A folder of files the containers mount read-only: uid 1000 must read them, nobody else. */
function keysDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "chaos-core-container-keys-"));
  chownSync(dir, 1000, 1000);
  chmodSync(dir, 0o700);
  return dir;
}

/** Writes a file only uid 1000 (the containers' user) reads. */
function writeOwned(path: string, text: string): string {
  writeFileSync(path, text, { mode: 0o600 });
  chownSync(path, 1000, 1000);
  return path;
}

function envFile(dir: string, name: string, env: Record<string, string>): string {
  return writeOwned(
    join(dir, `${name}.env`),
    Object.entries(env)
      .map(([k, v]) => `${k}=${v}\n`)
      .join(""),
  );
}

async function mcpAnswers(url: string, headers?: Record<string, string>): Promise<boolean> {
  const client = await httpClient(url, headers);
  try {
    await client.listTools();
    return true;
  } finally {
    await client.close();
  }
}

let image: TestImage;

beforeAll(async () => {
  if (unavailable) return;
  image = await testImage();
  timings["image.sh (base and image, built or cached)"] = image.ms;
  for (const line of image.log.split("\n")) {
    const m = /^image: (?:base .+|.+) built in (\d+) ms/.exec(line);
    if (m) timings[line.includes(" base ") ? "base build" : "image build (staging included)"] = Number(m[1]);
  }
}, 600_000);

afterAll(() => {
  if (!unavailable) console.log(`container timings (ms): ${JSON.stringify(timings)}`);
});

describeImage(`the image as standalone, on a data volume${suffix}`, () => {
  let containers: Containers;
  let dir: string;
  const volume = `chaos-core-test-data-${randomBytes(4).toString("hex")}`;
  const apiKey = randomBytes(24).toString("base64url");
  let port: number;
  let url: string;
  const auth = { Authorization: `Bearer ${apiKey}` };
  let env: string;

  beforeAll(async () => {
    containers = new Containers(image);
    dir = keysDir();
    writeOwned(join(dir, "api-keys.json"), JSON.stringify([{ tenant: "default", principal: "operator-agent", sha256: hashApiKey(apiKey) }]));
    port = await freePort();
    url = `http://127.0.0.1:${port}/mcp`;
    // What README's docker run does: every interface, so an API keys file, mounted read-only (tenant
    // "default": the standalone's data directory holds one tenant).
    env = envFile(dir, "standalone", { HOST: "0.0.0.0", PORT: String(port), CHAOS_CORE_API_KEYS_FILE: "/etc/chaos-core/api-keys.json", LOG_LEVEL: "warn" });
  });

  afterAll(async () => {
    await containers?.removeAll([volume]);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const start = () =>
    containers.start({ component: "standalone", envFile: env, volumes: [`${volume}:/var/lib/chaos-core`, `${dir}:/etc/chaos-core:ro`] });

  it("binds every interface without an API keys file only behind credentials: nobody is served unauthenticated", async () => {
    const openPort = await freePort();
    const openVolume = `${volume}-open`;
    const open = await containers.start({
      component: "standalone",
      envFile: envFile(dir, "open", { HOST: "0.0.0.0", PORT: String(openPort), LOG_LEVEL: "warn" }),
      volumes: [`${openVolume}:/var/lib/chaos-core`],
    });
    try {
      const refused = async () => {
        const res = await fetch(`http://127.0.0.1:${openPort}/mcp`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
        return res.status === 401 && (await res.text()).includes("Unauthorized: send Authorization: Bearer");
      };
      await waitFor("standalone without keys", refused, 90_000, () => open.logs());
    } finally {
      await open.stop();
      await containers.removeAll([openVolume]);
    }
  });

  it("serves MCP to a real client with its API key: initialize, list tools, remember and recall; keeps the data on the volume across containers", async () => {
    const started = performance.now();
    let first: Container | undefined = await start();
    try {
      await waitFor("standalone", () => mcpAnswers(url, auth), 90_000, () => first!.logs());
      timings["standalone: run to first MCP answer (new volume: embedded database created)"] = Math.round(performance.now() - started);

      const client: Client = await httpClient(url, auth);
      try {
        const { tools } = await client.listTools();
        expect(tools.map((t) => t.name)).toEqual(expect.arrayContaining(["chaoscore_remember", "chaoscore_recall", "chaoscore_achieve", "council_init"]));
        const wrote = await client.callTool({ name: "chaoscore_remember", arguments: { key: "container", value: { volume } } });
        expect(wrote.isError, JSON.stringify(wrote.content)).toBeFalsy();
        const read = await client.callTool({ name: "chaoscore_recall", arguments: { key: "container" } });
        expect(read.isError, JSON.stringify(read.content)).toBeFalsy();
        expect((read.structuredContent as { items: Array<{ value: unknown }> }).items[0]?.value).toEqual({ volume });
      } finally {
        await client.close();
      }
      // Without the key nothing is served.
      expect((await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" })).status).toBe(401);
      expect(await first.healthy()).toBe(true);

      await first.stop();
      first = undefined;
      const again = performance.now();
      const second = await start();
      await waitFor("standalone (restarted)", () => mcpAnswers(url, auth), 60_000, () => second.logs());
      timings["standalone: run to first MCP answer (existing volume)"] = Math.round(performance.now() - again);
      const client2 = await httpClient(url, auth);
      try {
        const read = await client2.callTool({ name: "chaoscore_recall", arguments: { key: "container" } });
        expect((read.structuredContent as { items: Array<{ value: unknown }> }).items[0]?.value).toEqual({ volume });
      } finally {
        await client2.close();
      }
      await second.stop();
    } finally {
      await first?.stop().catch(() => undefined);
    }
  });
});

describeImage(`the image as separate services on Postgres and Redis${suffix}`, () => {
  let containers: Containers;
  let db: TestDatabase;
  let dir: string;
  const started: Record<string, Container> = {};
  const ports: Record<string, number> = {};
  let client: Client;
  let migrate: { code: number; stdout: string; stderr: string };

  beforeAll(async () => {
    containers = new Containers(image);
    db = await createTestDatabase("chaoscore_container");
    dir = keysDir();
    // The files the services read, generated here (there is no default key), mounted read-only.
    await generateKeyringFile(join(dir, "ledger-keyring.json"));
    await generateMrtrKeyringFile(join(dir, "mrtr-keyring.json"));
    for (const f of ["ledger-keyring.json", "mrtr-keyring.json"]) chownSync(join(dir, f), 1000, 1000);
    for (const name of ["policy", "memory", "cognition", "ledger", "council", "edge"]) ports[name] = await freePort();
    const addr = (name: string) => `127.0.0.1:${ports[name]}`;
    const common = { CHAOS_CORE_CONTEXT_KEY: randomBytes(32).toString("hex"), LOG_LEVEL: "info" };
    const prefix = uniquePrefix("container");
    const envs: Record<string, Record<string, string>> = {
      policy: { ...common, PORT: String(ports.policy), DATABASE_URL: db.url },
      memory: { ...common, PORT: String(ports.memory), DATABASE_URL: db.url },
      council: { ...common, PORT: String(ports.council), DATABASE_URL: db.url },
      ledger: {
        ...common,
        PORT: String(ports.ledger),
        DATABASE_URL: db.url,
        REDIS_URL: TEST_REDIS_URL,
        CHAOS_CORE_REDIS_PREFIX: prefix,
        POLICY_ADDR: addr("policy"),
        CHAOS_CORE_LEDGER_KEYS_FILE: "/etc/chaos-core/ledger-keyring.json",
      },
      cognition: {
        ...common,
        PORT: String(ports.cognition),
        REDIS_URL: TEST_REDIS_URL,
        CHAOS_CORE_REDIS_PREFIX: prefix,
        POLICY_ADDR: addr("policy"),
        MEMORY_ADDR: addr("memory"),
        LEDGER_ADDR: addr("ledger"),
        CHAOS_CORE_PROVIDER: "heuristic",
      },
      edge: {
        ...common,
        PORT: String(ports.edge),
        REDIS_URL: TEST_REDIS_URL,
        POLICY_ADDR: addr("policy"),
        MEMORY_ADDR: addr("memory"),
        COGNITION_ADDR: addr("cognition"),
        COUNCIL_ADDR: addr("council"),
        LEDGER_ADDR: addr("ledger"),
        CHAOS_CORE_MRTR_KEYS_FILE: "/etc/chaos-core/mrtr-keyring.json",
      },
    };

    // Once, before the services, as the chart's pre-install Job does.
    let t = performance.now();
    migrate = await containers.runToExit({ component: "migrate", envFile: envFile(dir, "migrate", { DATABASE_URL: db.url }) });
    timings["migrate: run to exit"] = Math.round(performance.now() - t);

    // All at once: a service's gRPC clients connect when first used, so start order does not matter.
    t = performance.now();
    const volumes = [`${dir}:/etc/chaos-core:ro`];
    await Promise.all(
      Object.entries(envs).map(async ([component, env]) => {
        started[component] = await containers.start({ component, envFile: envFile(dir, component, env), volumes });
      }),
    );
    const grpc = ["policy", "memory", "council", "ledger", "cognition"];
    await Promise.all(
      grpc.map((name) =>
        waitFor(name, async () => (await checkGrpcHealth(addr(name), "", 1_000)) === "SERVING", 60_000, () => started[name]!.logs()),
      ),
    );
    const edgeUrl = `http://127.0.0.1:${ports.edge}/mcp`;
    await waitFor("edge", () => mcpAnswers(edgeUrl), 60_000, () => started.edge!.logs());
    timings["services: run (six containers at once) to first MCP answer at the edge"] = Math.round(performance.now() - t);
    client = await httpClient(edgeUrl);
  }, 240_000);

  afterAll(async () => {
    await client?.close();
    await containers?.removeAll();
    await db?.drop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("migrate applied every service's schema once and exited 0; the services found nothing left to apply", async () => {
    expect(migrate.stderr).toBe("");
    expect(migrate.code).toBe(0);
    expect(migrate.stdout).toMatch(/^memory: applied .+\ncouncil: applied .+\nledger: applied .+\npolicy: applied .+\nmigrations current in /);
    for (const name of ["policy", "memory", "council", "ledger"]) {
      expect(await started[name]!.logs(), name).not.toMatch(/migrations applied|applied migrations/);
    }
  });

  it("answers the edge's readiness with every peer reachable, and each image HEALTHCHECK passes", async () => {
    // The services started together: the edge's first connections to a peer still starting were
    // refused, and its channel retries with backoff (at most RECONNECT_BACKOFF_MS.max, 10 s), as a
    // kubelet's readiness probe would find it. Ready within that, every peer reachable.
    const readyz = `http://127.0.0.1:${ports.edge}/readyz`;
    // The edge is ready while a peer is still down (degraded, naming it): wait for every check.
    const read = async () => {
      const res = await fetch(readyz);
      return { status: res.status, body: (await res.json()) as { status?: string; checks?: Record<string, { ok: boolean }> } };
    };
    let ready = await read();
    for (const deadline = Date.now() + 30_000; ready.body.status !== "ready" && Date.now() < deadline; ready = await read()) {
      await new Promise((r) => setTimeout(r, 500));
    }
    const body = ready.body;
    // A peer still not reachable: how its container ended and what it said.
    const peers = Object.entries(body.checks ?? {}).filter(([name, check]) => !check.ok && started[name]);
    const why = await Promise.all(peers.map(async ([name]) => `${name}: ${await started[name]!.state()}\n${(await started[name]!.logs()).slice(-4_000)}`));
    expect(ready.status, `${JSON.stringify(body)}\n${why.join("\n")}`).toBe(200);
    expect(body).toMatchObject({ status: "ready", checks: { council: { ok: true }, ledger: { ok: true } } });
    for (const [name, container] of Object.entries(started)) expect(await container.healthy(), name).toBe(true);
  });

  it("serves a real MCP client through the edge: tools listed, remember and recall on Postgres, an objective achieved, a council session", async () => {
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).toEqual(expect.arrayContaining(["chaoscore_remember", "chaoscore_recall", "chaoscore_achieve", "council_init"]));
    const wrote = await client.callTool({ name: "chaoscore_remember", arguments: { key: "containers", value: { services: 6 } } });
    expect(wrote.isError, JSON.stringify(wrote.content)).toBeFalsy();
    const read = await client.callTool({ name: "chaoscore_recall", arguments: { key: "containers" } });
    expect(read.isError, JSON.stringify(read.content)).toBeFalsy();
    expect((read.structuredContent as { items: Array<{ value: unknown }> }).items[0]?.value).toEqual({ services: 6 });

    const achieved = await client.callTool({ name: "chaoscore_achieve", arguments: { objective: "remember that the image runs read-only" } });
    expect(achieved.isError, JSON.stringify(achieved.content)).toBeFalsy();
    expect(achieved.structuredContent).toMatchObject({ status: "succeeded" });

    const council = await client.callTool({ name: "council_init", arguments: { task: "Migrate a 2 GB MySQL database to PostgreSQL" } });
    expect(council.isError, JSON.stringify(council.content)).toBeFalsy();
    expect(council.structuredContent).toMatchObject({ phase: "decompile" });
  });

  it("stops a service on SIGTERM through --init within the grace period, exit 0", async () => {
    const t = performance.now();
    await started.council!.stop();
    timings["council: podman stop"] = Math.round(performance.now() - t);
    const { stdout } = await podman(image, ["inspect", started.council!.name, "--format", "{{.State.ExitCode}}"]);
    expect(stdout.trim()).toBe("0");
  });
});
