import { describe, expect, it } from "vitest";
import { ConfigError } from "@chaos-core/kit";
import { resolveDataDir, userDataDir } from "./config.js";

const noHome = () => "";

describe("the data directory every chaos-core command defaults to", () => {
  it("is the per-user data directory of each platform, never the working directory", () => {
    expect(userDataDir({ HOME: "/home/ada" }, "linux", noHome)).toBe("/home/ada/.local/share/chaos-core");
    expect(userDataDir({ HOME: "/home/ada", XDG_DATA_HOME: "/srv/xdg" }, "linux", noHome)).toBe("/srv/xdg/chaos-core");
    // The XDG spec: a relative XDG_DATA_HOME is ignored.
    expect(userDataDir({ HOME: "/home/ada", XDG_DATA_HOME: "xdg" }, "linux", noHome)).toBe("/home/ada/.local/share/chaos-core");
    expect(userDataDir({}, "freebsd", () => "/usr/home/ada")).toBe("/usr/home/ada/.local/share/chaos-core");
    expect(userDataDir({ HOME: "/Users/ada" }, "darwin", noHome)).toBe("/Users/ada/Library/Application Support/chaos-core");
    expect(userDataDir({ LOCALAPPDATA: "C:\\Users\\ada\\AppData\\Local" }, "win32", noHome)).toBe("C:\\Users\\ada\\AppData\\Local\\chaos-core");
    expect(userDataDir({}, "win32", () => "C:\\Users\\ada")).toBe("C:\\Users\\ada\\AppData\\Local\\chaos-core");
  });

  it("is CHAOS_CORE_DATA_DIR when set, resolved against the working directory", () => {
    expect(resolveDataDir({ CHAOS_CORE_DATA_DIR: "state", HOME: "/home/ada" }, "/work")).toBe("/work/state");
    expect(resolveDataDir({ CHAOS_CORE_DATA_DIR: "", HOME: "/home/ada", XDG_DATA_HOME: "/srv/xdg" }, "/work")).toBe("/srv/xdg/chaos-core");
  });

  it("without a home directory, says to set CHAOS_CORE_DATA_DIR", () => {
    expect(() => userDataDir({}, "linux", noHome)).toThrow(ConfigError);
    expect(() => userDataDir({}, "linux", noHome)).toThrow(/CHAOS_CORE_DATA_DIR/);
  });
});
