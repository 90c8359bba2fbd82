// @ts-check
/**
 * The layers of services/policy/src, top to bottom, as forbidden imports: a folder imports only the
 * folders below it (docs/architecture.md). Each rule says why in one line.
 * @type {import('dependency-cruiser').IForbiddenRuleType[]}
 */
module.exports = [
  // main.ts → server.ts → handlers/ → adapters/ → domain/; config.ts is read by main.ts, which hands its values down.
  {
    name: "policy-main-on-top",
    comment: "main.ts is the one module that starts anything (telemetry, config, stores, server): nothing imports it, so importing any other module starts nothing.",
    severity: "error",
    from: { path: "^services/policy/src/" },
    to: { path: "^services/policy/src/main\\.ts$" },
  },
  {
    name: "policy-folders-below-the-root",
    comment: "server.ts, index.ts and config.ts compose the folders and main.ts hands config values down: a folder imports none of them.",
    severity: "error",
    from: { path: "^services/policy/src/[^/]+/" },
    to: { path: "^services/policy/src/[^/]+\\.ts$" },
  },
  {
    name: "policy-adapters-below-handlers",
    comment: "Stores implement the domain's interfaces and know nothing of the wire: the proto mapping stays in handlers/.",
    severity: "error",
    from: { path: "^services/policy/src/adapters/" },
    to: { path: "^services/policy/src/handlers/" },
  },
  {
    name: "policy-domain-at-the-bottom",
    comment: "domain/ (document, engine, channels, tenants) is what handlers and adapters share: it imports neither of them.",
    severity: "error",
    from: { path: "^services/policy/src/domain/" },
    to: { path: "^services/policy/src/(handlers|adapters)/" },
  },
  {
    name: "policy-domain-is-pure",
    comment: "domain/ is unit-tested without a network: the wire (proto, gRPC), a database, Redis, telemetry and files reach it only through handlers and adapters.",
    severity: "error",
    from: { path: "^services/policy/src/domain/" },
    to: {
      path: [
        "^proto/",
        "^node_modules/(@bufbuild|@grpc|@opentelemetry|@electric-sql|pg|ioredis)/",
        "^(fs|fs/promises|net|http|https|http2|dns|dns/promises|child_process)$",
      ],
    },
  },
];
