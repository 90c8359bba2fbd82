// @ts-check
/**
 * The layers of services/edge/src, top to bottom, as forbidden imports: a folder imports only the
 * folders below it (docs/architecture.md). Each rule says why in one line.
 * @type {import('dependency-cruiser').IForbiddenRuleType[]}
 */
module.exports = edgeRules();

/** The rules, built from the layer table below (a function, so the export above comes first). */
function edgeRules() {
  const SRC = "^services/edge/src/";

  /** A path pattern for folders (and root files, named with their `.ts`) of the edge's src/. */
  const under = (/** @type {string[]} */ ...names) => `${SRC}(${names.map((n) => (n.endsWith(".ts") ? `${n.replace(".", "\\.")}$` : `${n}/`)).join("|")})`;

  /**
   * Top to bottom, down to the one above the bottom. Each layer's rule forbids every layer below it
   * to import it: one rule per boundary, named for the layer above it and saying why it is drawn there.
   */
  const LAYERS = [
    {
      layer: "roots",
      names: ["main.ts", "stdio-entry.ts", "relay-entry.ts", "index.ts"],
      why: "main.ts and the entry files are the composition roots and the package's doors: a module that imported one would wire the whole edge, or start it, by being imported.",
    },
    {
      layer: "transport",
      names: ["transport"],
      why: "A transport mounts the server and the console on a listener or stdio: nothing it carries may depend on how it is carried.",
    },
    {
      layer: "server-and-console",
      names: ["server", "console"],
      why: "The MCP server and the approval console are what a transport serves; the contracts, the surface and everything under them must run with neither.",
    },
    {
      layer: "contracts",
      names: ["contracts"],
      why: "contracts/ checks the whole surface against the lock (it reads every definition list), so the surface it checks cannot depend on it.",
    },
    {
      layer: "resources",
      names: ["resources"],
      why: "Resources show what prompts and tools already render: prompts and tools never reach into a resource.",
    },
    {
      layer: "prompts",
      names: ["prompts"],
      why: "Prompts reuse the tools' shapes (the council's phases and session ids); tools never reach into a prompt.",
    },
    {
      layer: "tools",
      names: ["tools"],
      why: "tools/ is the surface's base; approvals and the definitions under it serve every tool, so none of them may know a particular one.",
    },
    {
      layer: "approvals",
      names: ["approvals"],
      why: "How an approval is shown and asked for is shared by tools and the console; the definitions and records under it know nothing of approvals.",
    },
    {
      layer: "definitions",
      names: ["definitions"],
      why: "A definition says what a tool, prompt or resource is handed while it runs (the record, the clients): what is handed cannot depend on who takes it.",
    },
    {
      layer: "record-and-settings",
      names: ["deps", "config.ts"],
      why: "The dependency record (deps/) and the settings (config.ts) are what a composition root hands the edge; the stores, keys and limiters they carry, and whose defaults config reads, cannot depend on them.",
    },
    {
      layer: "machinery",
      names: ["auth", "sessions", "events", "mrtr", "limits"],
      why: "Credentials, session and event stores, sealed state and limiters are the edge's machinery; the typed service clients are plain types of the services' APIs and know none of it.",
    },
  ];

  /** The bottom: the typed service clients and how their answers read. It imports no other layer. */
  const BOTTOM = ["clients"];

  const layerRules = LAYERS.map(({ layer, names, why }, i) => ({
    name: `edge-below-${layer}`,
    comment: why,
    severity: /** @type {const} */ ("error"),
    from: { path: under(...LAYERS.slice(i + 1).flatMap((l) => l.names), ...BOTTOM) },
    to: { path: under(...names) },
  }));

  return [
    ...layerRules,
    {
      name: "edge-server-and-console-apart",
      comment: "The MCP server and the approval console are two rooms a transport mounts side by side: what both need (links, approval views) lives below them.",
      severity: "error",
      from: { path: `${SRC}(server|console)/` },
      to: { path: `${SRC}(server|console)/`, pathNot: `${SRC}$1/` },
    },
    {
      name: "edge-record-and-settings-apart",
      comment: "The dependency record and the settings are filled separately by a composition root: neither is built from the other.",
      severity: "error",
      from: { path: under("deps", "config.ts") },
      to: { path: under("deps", "config.ts"), pathNot: `${SRC}$1` },
    },
    {
      name: "edge-file-outside-the-layers",
      comment: "Every source file of the edge sits in one layer of this list, so the rules above see it: add a new folder to its layer here.",
      severity: "error",
      from: { path: SRC, pathNot: under(...LAYERS.flatMap((l) => l.names), ...BOTTOM) },
      to: {},
    },
  ];
}
