// @ts-check
/**
 * The import rules `npm run lint` holds (docs/architecture.md, "Layers"; issue 31). Between
 * services: standalone → edge → the services → contracts, kit, proto, and nothing points back up.
 * Inside a service: its folders are layers (depcruise/<service>.cjs), each importing only those
 * below it. Every rule says in one line why it exists.
 * @type {import('dependency-cruiser').IConfiguration}
 */
const SERVICE_SRC = "^services/([^/]+)/src/";

module.exports = {
  forbidden: [
    {
      name: "no-circular",
      comment: "A circle, type-only imports included, is one knot a reader must untie whole: what both sides need moves below both.",
      severity: "error",
      from: { path: SERVICE_SRC },
      to: { circular: true },
    },
    {
      name: "no-deep-service-import",
      comment: "A service reaches another only through that package's exports: a path into its src/ couples to a file that may move.",
      severity: "error",
      from: { path: SERVICE_SRC },
      to: { path: "^services/[^/]+/src/", pathNot: "^services/$1/src/" },
    },
    {
      name: "no-unexported-package-path",
      comment: "A @chaos-core/* path the package's exports do not list does not resolve for its users either: list it there, or do not use it.",
      severity: "error",
      from: { path: SERVICE_SRC },
      to: { couldNotResolve: true, path: "^@chaos-core/" },
    },
    {
      name: "kit-and-proto-import-no-service",
      comment: "kit and proto sit below every service: one that imported a service would pull the whole house into each of them.",
      severity: "error",
      from: { path: "^(services/kit|proto)/" },
      to: { path: "^services/(?!kit/)[^/]+/" },
    },
    {
      name: "services-import-no-edge-or-standalone",
      comment: "The edge composes the services and the standalone composes everything: nothing below them may import them.",
      severity: "error",
      from: { path: "^services/(?!edge/|standalone/)[^/]+/src/" },
      to: { path: "^services/(edge|standalone)/" },
    },
    ...require("./depcruise/edge.cjs"),
    ...require("./depcruise/cognition.cjs"),
    ...require("./depcruise/policy.cjs"),
    ...require("./depcruise/ledger.cjs"),
  ],
  options: {
    // Another package is reached through its built exports (dist/): seen as a target, not followed.
    doNotFollow: { path: "(^|/)(node_modules|dist)/" },
    // Tests and their helpers, and the scanner's evasion fixtures, are not the house.
    exclude: { path: "(^|/)(fixtures|test-support)/|\\.test\\.ts$|\\.contract\\.ts$" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.base.json" },
    enhancedResolveOptions: {
      exportsFields: ["exports"],
      conditionNames: ["import", "require", "node", "default", "types"],
      extensions: [".ts", ".js"],
    },
    reporterOptions: {
      mermaid: { minify: false },
    },
  },
};
