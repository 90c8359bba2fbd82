import { ChaosError } from "@chaos-core/kit";
import { describe, expect, it } from "vitest";
import { createUpstreamUrlCheck } from "./upstream-address.js";

async function refusal(p: Promise<unknown>): Promise<ChaosError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(ChaosError);
    return err as ChaosError;
  }
  throw new Error("expected a refusal");
}

// Names resolved as a cluster's DNS might answer them.
const lookup = async (host: string) => {
  const table: Record<string, string[]> = { "mcp.example.com": ["93.184.215.14"], "internal.example.com": ["93.184.215.14", "10.0.3.7"], "metadata.example.com": ["169.254.169.254"] };
  const found = table[host];
  if (!found) throw Object.assign(new Error("not found"), { code: "ENOTFOUND" });
  return found.map((address) => ({ address, family: address.includes(":") ? 6 : 4 }));
};

describe("a tenant's upstream URL", () => {
  const check = createUpstreamUrlCheck({ lookup });

  it("passes when every address of its host is public", async () => {
    await expect(check("https://mcp.example.com/mcp")).resolves.toBeUndefined();
  });

  it.each([
    ["http://169.254.169.254/", /169\.254\.169\.254 is link-local \(cloud metadata lives here\)/],
    ["http://127.0.0.1:8080/mcp", /127\.0\.0\.1 is loopback/],
    ["http://[::1]:8080/mcp", /::1 is loopback/],
    ["http://10.1.2.3/mcp", /10\.1\.2\.3 is private/],
    ["http://192.168.0.10/mcp", /private/],
    ["http://[::ffff:169.254.169.254]/", /link-local .*embedded in IPv6/],
    ["http://metadata.example.com/", /"metadata\.example\.com" resolves to 169\.254\.169\.254/],
    ["http://internal.example.com/mcp", /"internal\.example\.com" resolves to 10\.0\.3\.7 \(private\)/],
  ])("refuses %s naming the field", async (url, why) => {
    const err = await refusal(check(url));
    expect(err.code).toBe("invalid_argument");
    expect(err.message).toMatch(/^declaration\.url: /);
    expect(err.message).toMatch(why);
    expect(err.message).toMatch(/CHAOS_CORE_HTTP_ALLOWED_ADDRESSES/);
  });

  it("reaches a range the operator allows, and only that range", async () => {
    const allowing = createUpstreamUrlCheck({ lookup, allowedAddresses: ["127.0.0.1", "10.0.3.0/24"] });
    await expect(allowing("http://127.0.0.1:8080/mcp")).resolves.toBeUndefined();
    await expect(allowing("http://internal.example.com/mcp")).resolves.toBeUndefined();
    expect((await refusal(allowing("http://127.0.0.2/mcp"))).message).toMatch(/loopback/);
    expect((await refusal(allowing("http://169.254.169.254/"))).message).toMatch(/link-local/);
  });

  it("a host that does not resolve is unavailable, named", async () => {
    const err = await refusal(check("https://nowhere.example.com/mcp"));
    expect(err.code).toBe("unavailable");
    expect(err.message).toMatch(/^declaration\.url: could not resolve "nowhere\.example\.com"/);
  });
});
