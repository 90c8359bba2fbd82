import { describe, expect, it } from "vitest";
import { allowCidrs, blockedAddressClass, parseAddress } from "./address.js";

describe("address rules (http.request, tenants' upstreams)", () => {
  it.each([
    ["127.0.0.1", "loopback"],
    ["127.255.255.254", "loopback"],
    ["10.1.2.3", "private"],
    ["172.16.0.1", "private"],
    ["172.31.255.255", "private"],
    ["192.168.1.1", "private"],
    ["169.254.169.254", "link-local"],
    ["100.64.0.1", "carrier-grade NAT"],
    ["0.0.0.0", "unspecified"],
    ["224.0.0.1", "multicast"],
    ["255.255.255.255", "reserved"],
    ["192.0.2.10", "documentation"],
    ["::", "unspecified"],
    ["::1", "loopback"],
    ["fe80::1", "link-local"],
    ["fe80::1%eth0", "link-local"],
    ["fd12:3456::1", "unique-local"],
    ["ff02::1", "multicast"],
    ["::ffff:127.0.0.1", "loopback, embedded in IPv6"],
    ["::ffff:7f00:1", "loopback, embedded in IPv6"],
    ["::ffff:10.0.0.1", "private, embedded in IPv6"],
    ["64:ff9b::a9fe:a9fe", "link-local"],
    ["2002:c0a8:0101::1", "private, embedded in IPv6"],
    ["2001:db8::1", "documentation"],
    ["::127.0.0.1", "IPv4-compatible"],
    ["not-an-ip", "not an IP address"],
  ])("refuses %s (%s)", (address, label) => {
    expect(blockedAddressClass(address)).toContain(label);
  });

  it.each(["93.184.216.34", "8.8.8.8", "172.32.0.1", "100.128.0.1", "2606:4700:4700::1111", "::ffff:8.8.8.8"])(
    "lets public unicast %s through",
    (address) => {
      expect(blockedAddressClass(address)).toBeUndefined();
    },
  );

  it("parses IPv6 with an embedded dotted quad to the same value as its hex form", () => {
    expect(parseAddress("::ffff:127.0.0.1")).toEqual(parseAddress("::ffff:7f00:1"));
    expect(parseAddress("1:2:3:4:5:6:7:8::")).toBeUndefined();
  });

  it("allows exactly the operator's ranges, matching IPv4-mapped IPv6 against IPv4 ranges", () => {
    const allow = allowCidrs(["127.0.0.1", "10.20.0.0/16", "fd00::/8"]);
    expect(allow("127.0.0.1")).toBe(true);
    expect(allow("::ffff:127.0.0.1")).toBe(true);
    expect(allow("127.0.0.2")).toBe(false);
    expect(allow("10.20.99.1")).toBe(true);
    expect(allow("10.21.0.1")).toBe(false);
    expect(allow("fd00::5")).toBe(true);
    expect(allow("::1")).toBe(false);
    expect(() => allowCidrs(["10.0.0.0/33"])).toThrow(/prefix/);
    expect(() => allowCidrs(["intranet"])).toThrow(/not an IP address/);
  });
});
