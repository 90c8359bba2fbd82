// @ts-check
/**
 * The layers of services/ledger/src, top to bottom, as forbidden imports: a folder imports only the
 * folders below it (docs/architecture.md). Each rule says why in one line.
 * @type {import('dependency-cruiser').IForbiddenRuleType[]}
 */
module.exports = [
  {
    name: "ledger-entry-points-on-top",
    comment: "main.ts wires the process and index.ts is the package's face: a module importing either would import the whole house, main's start-up included.",
    severity: "error",
    from: { path: below("entry points") },
    to: { path: layer("entry points") },
  },
  {
    name: "ledger-server-above-handlers",
    comment: "server.ts puts the handlers on a gRPC server: what is served never depends on how it is served (standalone serves the same handlers in-process).",
    severity: "error",
    from: { path: below("server") },
    to: { path: layer("server") },
  },
  {
    name: "ledger-handlers-above-service",
    comment: "Handlers map proto messages to the service and back; the service never sees a proto message or a gRPC status, so it is tested and embedded without either.",
    severity: "error",
    from: { path: below("handlers") },
    to: { path: layer("handlers") },
  },
  {
    name: "ledger-service-above-adapters-and-webhooks",
    comment: "The service composes stores, clients and rules into the ledger's operations; a store or rule that reached back into an operation would knot the two (what both need moves down).",
    severity: "error",
    from: { path: below("service") },
    to: { path: layer("service") },
  },
  {
    name: "ledger-adapters-and-webhooks-above-log",
    comment: "The log never calls out: policy, Redis and webhook receivers are reached from above it (the outbox joins a flush through the log's BatchListener), so an append waits on no outside service.",
    severity: "error",
    from: { path: below("adapters, webhooks and witness") },
    to: { path: layer("adapters, webhooks and witness") },
  },
  {
    name: "ledger-log-above-authz",
    comment: "Receipts, keys and the spend gate are decided without a database: a rule that imported the log could not be unit-tested without one.",
    severity: "error",
    from: { path: below("log") },
    to: { path: layer("log") },
  },
  {
    name: "ledger-authz-above-keys",
    comment: "The keyring holds and loads keys and knows no receipt rule: rotating a key never changes what a receipt must say.",
    severity: "error",
    from: { path: below("authz") },
    to: { path: layer("authz") },
  },
  {
    name: "ledger-keys-above-domain",
    comment: "The spend gate is CHP arithmetic on its inputs: it signs nothing and reads no key file.",
    severity: "error",
    from: { path: below("keys") },
    to: { path: layer("keys") },
  },
  {
    name: "ledger-domain-above-config",
    comment: "config.ts only parses the environment it is given: reading a setting runs no rule of the ledger.",
    severity: "error",
    from: { path: below("domain") },
    to: { path: layer("domain") },
  },
  {
    name: "ledger-domain-is-pure",
    comment: "domain/ imports no gRPC, OpenTelemetry, database or Redis driver, and no file or network I/O (DESIGN), so its tests need neither a server nor a network.",
    severity: "error",
    from: { path: layer("domain") },
    to: {
      path: [
        "(^|/)node_modules/(@grpc|@opentelemetry|pg|pg-[^/]+|@electric-sql|ioredis)/",
        "^proto/",
        "^(fs|fs/promises|net|http|http2|https|dgram|dns|dns/promises|tls|child_process)$",
      ],
    },
  },
  {
    name: "ledger-every-module-in-a-layer",
    comment: "A module outside the folders above has no place in the order, so nothing holds its imports: put it in the folder of its layer (or name a new layer here).",
    severity: "error",
    from: { path: "^services/ledger/src/" },
    to: { path: "^services/ledger/src/", pathNot: anyLayer() },
  },
];

/**
 * The ledger's layers, top to bottom (docs/ledger.md, "Map"), each with the regex of its modules
 * under services/ledger/src/ (a folder ends in `/`). adapters/, webhooks/ and witness/ stand side by side.
 * Function declarations, so the rules above can use them.
 * @returns {Array<[string, string]>}
 */
function layersTopDown() {
  return [
    ["entry points", "(main|index)\\.ts$"],
    ["server", "server\\.ts$"],
    ["handlers", "handlers/"],
    ["service", "service/"],
    ["adapters, webhooks and witness", "(adapters|webhooks|witness)/"],
    ["log", "log/"],
    ["authz", "authz/"],
    ["keys", "keys/"],
    ["domain", "domain/"],
    ["config", "config\\.ts$"],
  ];
}

/** @param {string} name */
function layer(name) {
  const found = layersTopDown().find(([n]) => n === name);
  if (!found) throw new Error(`depcruise/ledger.cjs: no layer "${name}"`);
  return `^services/ledger/src/${found[1]}`;
}

/**
 * Every layer below `name`.
 * @param {string} name
 */
function below(name) {
  const layers = layersTopDown();
  const at = layers.findIndex(([n]) => n === name);
  if (at < 0) throw new Error(`depcruise/ledger.cjs: no layer "${name}"`);
  return pathOf(layers.slice(at + 1));
}

/** Every layer. */
function anyLayer() {
  return pathOf(layersTopDown());
}

/** @param {Array<[string, string]>} layers */
function pathOf(layers) {
  return `^services/ledger/src/(${layers.map(([, path]) => path).join("|")})`;
}
