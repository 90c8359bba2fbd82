// @ts-check
/**
 * The layers of services/cognition/src, top to bottom, as forbidden imports: a folder imports only the
 * folders below it (docs/architecture.md). Each rule says why in one line.
 * @type {import('dependency-cruiser').IForbiddenRuleType[]}
 */
module.exports = [
  // main.ts → server.ts → handlers/ → brain/ → executor/ → capabilities/ → providers/ → plans/,
  // and upstreams/ (connections to upstream MCP servers) below capabilities/ beside providers/;
  // config.ts is read by main.ts, which hands its values down.
  {
    name: "cognition-main-on-top",
    comment: "main.ts is the one module that starts anything (telemetry, config, Redis, server): nothing imports it, so importing any other module starts nothing.",
    severity: "error",
    from: { path: "^services/cognition/src/" },
    to: { path: "^services/cognition/src/main\\.ts$" },
  },
  {
    name: "cognition-folders-below-the-root",
    comment: "server.ts, index.ts and config.ts compose the folders and main.ts hands config values down: a folder imports none of them.",
    severity: "error",
    from: { path: "^services/cognition/src/[^/]+/" },
    to: { path: "^services/cognition/src/[^/]+\\.ts$" },
  },
  {
    name: "cognition-brain-below-handlers",
    comment: "The brain (reason, plan, the cognitive loop) is what the handlers call and knows nothing of proto: it is tested without a server.",
    severity: "error",
    from: { path: "^services/cognition/src/brain/" },
    to: { path: "^services/cognition/src/handlers/" },
  },
  {
    name: "cognition-executor-below-brain",
    comment: "The executor runs the steps it is given and never plans: choosing steps and re-planning around a failure are the brain's.",
    severity: "error",
    from: { path: "^services/cognition/src/executor/" },
    to: { path: "^services/cognition/src/(brain|handlers)/" },
  },
  {
    name: "cognition-capabilities-below-executor",
    comment: "A capability is a handler the executor calls after policy and the audit: one that reached the executor or the brain could run steps around them.",
    severity: "error",
    from: { path: "^services/cognition/src/capabilities/" },
    to: { path: "^services/cognition/src/(executor|brain|handlers)/" },
  },
  {
    name: "cognition-providers-below-capabilities",
    comment: "A provider answers prompts (a model, or the offline parser) and runs nothing: capabilities and the brain call it, never the other way round.",
    severity: "error",
    from: { path: "^services/cognition/src/providers/" },
    to: { path: "^services/cognition/src/(capabilities|upstreams|executor|brain|handlers)/" },
  },
  {
    name: "cognition-upstreams-below-capabilities",
    comment: "An upstream connection is what an upstream tool's capability calls after policy allowed it: the pool may never reach the executor, the brain or a capability.",
    severity: "error",
    from: { path: "^services/cognition/src/upstreams/" },
    to: { path: "^services/cognition/src/(capabilities|executor|brain|handlers|providers|plans)/" },
  },
  {
    name: "cognition-plans-at-the-bottom",
    comment: "A plan's shape, its step references and its stores are what every layer above speaks, the offline parser included: plans/ imports none of them.",
    severity: "error",
    from: { path: "^services/cognition/src/plans/" },
    to: { path: "^services/cognition/src/(providers|upstreams|capabilities|executor|brain|handlers)/" },
  },
];
