import { ChaosError, DEFAULT_TOOLSETS, servedToolsets, START_WAIT_MS, type Logger } from "@chaos-core/kit";
import type { CredentialDirectory } from "../auth/directory.js";

/**
 * The toolsets of the one tenant a stdio connection serves (the local user's), read from the
 * tenant registry as HTTP reads each request's tenant (docs/tenants.md, "Enabled toolsets"), so an
 * operator's `chaos-core tenants settings default --toolsets …` holds over stdio too.
 *
 * The registry opens with the stores, which open with the first request. A `tools/call` waits for
 * it (a tool the operator withheld is never run on a guess), and so does a 2026-07-28 client's
 * `tools/list`, since nothing can tell that client later that the list changed; each waits as
 * long as a call waits for the stores (`START_WAIT_MS`), then the defaults serve it. A
 * 2025-11-25 session's `tools/list` that comes first is answered at once with the defaults, as
 * stdio answers it before its stores open; if the registry then says otherwise, `onChanged`
 * tells the client to list again (`notifications/tools/list_changed`).
 */
export interface LocalToolsets {
  /** What the server reads at each listing and call (`EdgeDeps.enabledToolsets`). */
  enabled(tenant: string): readonly string[] | undefined;
  /** Before a `tools/call`: the tenant's toolsets as the registry holds them now, waiting for it to open. */
  beforeCall(): Promise<void>;
  /**
   * Before a `tools/list`: re-read once the registry has answered. Until then a 2025-11-25
   * session is listed the defaults at once, and a 2026-07-28 request (`modern`) waits for it.
   */
  beforeList(modern: boolean): Promise<void>;
}

export function localToolsets(
  tenant: string,
  directory: Promise<CredentialDirectory>,
  logger: Logger,
  onChanged: () => void,
  waitMs = START_WAIT_MS,
): LocalToolsets {
  // Undefined: the default toolsets, also while the registry cannot be read (what is opt-in is
  // never served on a guess).
  let toolsets: readonly string[] | undefined;
  // The registry has answered once: from then on every listing reads it.
  let answered = false;
  let listedDefaults = false;
  let down = false;

  let opened: CredentialDirectory | undefined;
  /** The registry, waiting for it at most `waitMs`. */
  const registryOf = async (): Promise<CredentialDirectory> => {
    if (opened) return opened;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new ChaosError("unavailable", `the tenant registry did not open within ${Math.round(waitMs / 1000)} s`)), waitMs);
      timer.unref();
    });
    try {
      return await Promise.race([directory, late]);
    } finally {
      clearTimeout(timer);
    }
  };

  const read = async () => {
    try {
      const registry = await registryOf();
      // Re-reads the tenant's state when its generation moved (a map lookup in the standalone).
      await registry.tenantRefusal(tenant);
      toolsets = registry.enabledToolsets(tenant);
      down = false;
    } catch (err) {
      toolsets = undefined;
      if (!down) logger.warn({ err }, "the tenant registry could not be read: serving the default toolsets until it can");
      down = true;
      return;
    }
    if (answered) return;
    answered = true;
    if (listedDefaults && !sameMembers(servedToolsets(toolsets), DEFAULT_TOOLSETS)) onChanged();
  };
  // Read as soon as the stores are open: a version probe, which opens none, never reads.
  directory.then(
    (registry) => {
      opened = registry;
      return read();
    },
    () => {},
  );

  return {
    enabled: (t) => (t === tenant ? toolsets : undefined),
    beforeCall: read,
    beforeList: async (modern) => {
      if (answered || modern) return read();
      listedDefaults = true;
    },
  };
}

function sameMembers(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((x) => b.includes(x));
}
