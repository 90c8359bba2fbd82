import { describe, expect, it } from "vitest";
import { z } from "zod";
import { envVars, parseEnv } from "../config.js";
import { defaultChannelOptions, parseGrpcTarget } from "./target.js";

describe("parseGrpcTarget", () => {
  it.each([
    ["policy:50051", "host-port"],
    ["127.0.0.1:50051", "host-port"],
    ["[::1]:50051", "host-port"],
    ["cognition-headless.chaos.svc.cluster.local:50053", "host-port"],
    ["dns:///cognition-headless.chaos.svc.cluster.local:50053", "dns"],
    ["dns:///cognition-headless.chaos.svc.cluster.local.:50053", "dns"],
    ["dns:///127.0.0.1:50053", "dns"],
    ["dns:///[::1]:50053", "dns"],
    ["ipv4:127.0.0.1:50053", "ipv4"],
    ["ipv4:127.0.0.1:50053,127.0.0.1:50063", "ipv4"],
    ["ipv6:[::1]:50053,[::1]:50063", "ipv6"],
  ])("accepts %s as %s, unchanged", (value, kind) => {
    expect(parseGrpcTarget(value)).toEqual({ ok: true, kind, target: value });
  });

  it.each([
    ["policy", /"policy" has no port/],
    ["policy:", /"policy:" has no port/],
    ["policy:0", /port 0, outside 1-65535/],
    ["policy:70000", /port 70000, outside 1-65535/],
    ["policy:http", /port "http", which is not a number/],
    ["::1:50051", /bare IPv6 address; write it in brackets/],
    ["[zz]:50051", /"\[zz\]", which is not an IPv6 address/],
    ["pol icy:50051", /contains white space/],
    ["bad_host!:50051", /host "bad_host!", which is not a DNS name/],
    ["dns://10.0.0.10/cognition:50053", /names a DNS server; write dns:\/\/\/host:port/],
    ["dns:cognition:50053", /write dns:\/\/\/host:port \(three slashes\)/],
    ["dns:///cognition", /"dns:\/\/\/cognition" has no port/],
    ["ipv4:", /ipv4: lists no address/],
    ["ipv4:127.0.0.1", /address 1 \("127.0.0.1"\) has no port/],
    ["ipv4:127.0.0.1:1,", /address 2 is empty \(a stray comma\?\)/],
    ["ipv4:127.0.0.1:1,cognition:2", /address 2 \("cognition:2"\) is not an IPv4 address/],
    ["ipv4:///127.0.0.1:1", /without slashes/],
    ["ipv6:::1:50053", /not a bracketed IPv6 address/],
    ["http://cognition:50053", /scheme http:, which is not supported/],
    ["unix:/run/cognition.sock", /scheme unix:, which is not supported/],
  ])("refuses %s, saying why and which forms work", (value, why) => {
    const parsed = parseGrpcTarget(value);
    expect(parsed.ok).toBe(false);
    const error = (parsed as { error: string }).error;
    expect(error).toMatch(why);
    expect(error).toContain("must be host:port, dns:///host:port, ipv4:IP:PORT[,IP:PORT…]");
  });
});

describe("envVars.serviceAddr", () => {
  const schema = z.object({ COGNITION_ADDR: envVars.serviceAddr("the edge", "cognition"), LEDGER_ADDR: envVars.optionalServiceAddr() });

  it("names the variable of a bad address", () => {
    expect(() => parseEnv(schema, { COGNITION_ADDR: "ipv4:127.0.0.1" })).toThrow(
      /COGNITION_ADDR: "ipv4:127.0.0.1": address 1 \("127.0.0.1"\) has no port/,
    );
    expect(() => parseEnv(schema, { COGNITION_ADDR: "cognition:50053", LEDGER_ADDR: "ledger" })).toThrow(/LEDGER_ADDR: "ledger" has no port/);
  });

  it("says what a missing required address is", () => {
    expect(() => parseEnv(schema, {})).toThrow(
      /COGNITION_ADDR: is required when the edge runs alone: the address of the cognition service \(host:port, dns:\/\/\/host:port/,
    );
  });

  it("passes every accepted form through", () => {
    expect(parseEnv(schema, { COGNITION_ADDR: "dns:///cognition-headless:50053" })).toEqual({ COGNITION_ADDR: "dns:///cognition-headless:50053" });
  });
});

describe("defaultChannelOptions", () => {
  it("balances round robin and ignores service configs from DNS", () => {
    const options = defaultChannelOptions();
    expect(JSON.parse(options["grpc.service_config"] as string)).toEqual({ loadBalancingConfig: [{ round_robin: {} }] });
    expect(options["grpc.service_config_disable_resolution"]).toBe(1);
  });
});
