import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { httpClient, removeDir, startServe, stdioClient, tempDir, type ServeProcess } from "../support/processes.js";

describe("the tool surface", () => {
  const dirs = [tempDir(), tempDir()];
  let serve: ServeProcess;
  let overHttp: Client;
  let overStdio: Client;

  beforeAll(async () => {
    serve = await startServe({ CHAOS_CORE_DATA_DIR: dirs[0] });
    overHttp = await httpClient(serve.url);
    overStdio = (await stdioClient({ CHAOS_CORE_DATA_DIR: dirs[1] })).client;
  });

  afterAll(async () => {
    await overHttp?.close();
    await overStdio?.close();
    await serve?.stop();
    dirs.forEach(removeDir);
  });

  it("is identical over stdio and Streamable HTTP", async () => {
    const [a, b] = await Promise.all([overStdio.listTools(), overHttp.listTools()]);
    expect(b.tools).toEqual(a.tools);
    expect(a.tools.map((t) => t.name).sort()).toEqual([
      "chaoscore_achieve",
      "chaoscore_approve",
      "chaoscore_execute",
      "chaoscore_inspect",
      "chaoscore_plan",
      "chaoscore_reason",
      "chaoscore_recall",
      "chaoscore_remember",
    ]);
    for (const tool of a.tools) {
      expect(tool.outputSchema, `${tool.name} has an output schema`).toBeDefined();
      expect(tool.annotations, `${tool.name} has annotations`).toBeDefined();
    }
  });

  it("declares the logging capability on both transports", () => {
    expect(overHttp.getServerCapabilities()?.logging).toBeDefined();
    expect(overStdio.getServerCapabilities()?.logging).toBeDefined();
  });
});
