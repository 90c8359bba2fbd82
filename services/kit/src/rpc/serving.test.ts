import { checkGrpcHealth, ContextSigner, createLogger, LIVENESS_HEALTH_SERVICE, startGrpcServer } from "../index.js";
import { describe, expect, it } from "vitest";

describe("RunningGrpcServer.setServing", () => {
  it("turns health NOT_SERVING and back (liveness staying SERVING), and stays NOT_SERVING once shutdown has begun", async () => {
    const server = await startGrpcServer({
      host: "127.0.0.1",
      port: 0,
      signer: new ContextSigner("serving-test-key-0123456789abcdefghijkl"),
      registrations: [],
      logger: createLogger("serving-test", "silent"),
    });
    const address = `127.0.0.1:${server.port}`;
    expect(await checkGrpcHealth(address)).toBe("SERVING");
    server.setServing(false);
    expect(await checkGrpcHealth(address)).toBe("NOT_SERVING");
    // Not ready is not dead: the liveness name stays SERVING.
    expect(await checkGrpcHealth(address, LIVENESS_HEALTH_SERVICE)).toBe("SERVING");
    server.setServing(true);
    expect(await checkGrpcHealth(address)).toBe("SERVING");
    const stopping = server.shutdown(5_000);
    // The port is closing, so watch what would be set: nothing, once shutdown has begun.
    const set: string[] = [];
    server.health.setStatus = (service: string, status) => void set.push(`${service}=${status}`);
    server.setServing(true);
    expect(set).toEqual([]);
    await stopping;
  });
});
