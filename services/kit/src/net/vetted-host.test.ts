import { describe, expect, it } from "vitest";
import { allowCidrs } from "./address.js";
import { parseAllowedAddresses, resolveVetted } from "./vetted-host.js";

const lookup = async (host: string) => (host === "split.test" ? [{ address: "93.184.215.14", family: 4 }, { address: "172.20.0.5", family: 4 }] : [{ address: "93.184.215.14", family: 4 }]);

describe("vetted resolution", () => {
  it("vets an IP literal as it is, and refuses a name with one internal answer among public ones", async () => {
    const deps = { lookup, allowAddress: allowCidrs([]), who: "a tenant's upstream" };
    await expect(resolveVetted("169.254.169.254", "url", deps)).rejects.toThrow(/^url: 169\.254\.169\.254 is link-local .*a tenant's upstream does not reach/);
    await expect(resolveVetted("[fd00::1]", "url", deps)).rejects.toThrow(/fd00::1 is unique-local/);
    await expect(resolveVetted("split.test", "url", deps)).rejects.toThrow(/"split\.test" resolves to 172\.20\.0\.5 \(private\)/);
    expect(await resolveVetted("public.test", "url", deps)).toEqual([{ address: "93.184.215.14", family: 4 }]);
  });

  it("reads the operator's allowed ranges, naming the variable when one is malformed", () => {
    expect(parseAllowedAddresses(" 127.0.0.1, 10.20.0.0/16 ,")).toEqual(["127.0.0.1", "10.20.0.0/16"]);
    expect(parseAllowedAddresses(undefined)).toEqual([]);
    expect(() => parseAllowedAddresses("10.0.0.0/33")).toThrow(/^CHAOS_CORE_HTTP_ALLOWED_ADDRESSES: "10\.0\.0\.0\/33" has an invalid prefix length/);
    expect(() => parseAllowedAddresses("localhost")).toThrow(/^CHAOS_CORE_HTTP_ALLOWED_ADDRESSES: "localhost" is not an IP address/);
    expect(() => parseAllowedAddresses("10.0.0.0/8/garbage")).toThrow(/^CHAOS_CORE_HTTP_ALLOWED_ADDRESSES: "10\.0\.0\.0\/8\/garbage" is not an IP address or CIDR range/);
  });
});
