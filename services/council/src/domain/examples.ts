/**
 * A realistic council session for tests, the end-to-end suite and the benchmark: the seed's
 * MySQL → PostgreSQL migration, in English, one output per phase. Every output passes its
 * phase and the five together raise no contradiction and no authority warning.
 */

/** The task of the example session (moderate complexity: the standard five-phase pipeline). */
export const MIGRATION_TASK = "Migrate MySQL to PostgreSQL. 2GB data, downtime < 30 minutes. Handling JSON and ENUM types.";

/** The example's optional title. */
export const MIGRATION_TITLE = "MySQL to PostgreSQL migration";

/** Decompile, as the Systems Analyst would write it. */
export const DECOMPILE_OUTPUT = {
  summary:
    "The migration splits into four sub-problems: moving 2GB of data, keeping downtime under 30 minutes, converting JSON columns to a PostgreSQL type, and mapping ENUM columns without losing their value checks.",
  components: [
    "Bulk transfer of the 2GB dataset",
    "Keeping the write freeze within the downtime budget",
    "JSON column conversion",
    "ENUM column mapping",
    "Switching application connections",
  ],
  decisions: [
    {
      text: "Treat schema conversion and data transfer as separate sub-problems",
      rationale: "Type mapping for JSON and ENUM can be settled and reviewed before any data moves",
      alternatives: ["One combined migration step"],
    },
    {
      text: "Keep application changes out of scope except the connection switch",
      rationale: "The task asks for a database migration, not an application rewrite",
    },
  ],
  constraints: [
    "Downtime must not exceed 30 minutes",
    "All 2GB of data must arrive intact",
    "JSON documents must stay queryable after the move",
    "ENUM columns must keep rejecting values outside their set",
  ],
  confidence: 0.8,
  criticalQuestions: [
    "Which tables receive writes during business hours?",
    "Do any queries depend on MySQL-specific JSON functions?",
    "Are ENUM values ordered or compared anywhere in the application?",
    "Is a read-only period acceptable before the final switch?",
  ],
  claims: [
    { text: "The dataset is about 2GB", certainty: "confirmed", source: "task statement" },
    { text: "Downtime must stay under 30 minutes", certainty: "confirmed", source: "task statement" },
    { text: "Some JSON columns are queried by the application", certainty: "likely", source: "typical usage of JSON columns" },
    { text: "ENUM ordering is not relied on by queries", certainty: "assumption" },
  ],
  knowledgeBoundary: {
    whatIKnow: ["Data volume is 2GB", "The downtime budget is 30 minutes", "The schema has JSON and ENUM columns"],
    whatIAssume: ["ENUM ordering is not relied on", "Network bandwidth between the servers is not the bottleneck"],
    whatIDontKnow: ["The write rate during the migration window", "Which MySQL JSON functions the queries use"],
    whatNeedsVerification: ["JSON function usage, from the slow-query log"],
  },
};

/** Design, as the Solution Architect would write it. */
export const DESIGN_OUTPUT = {
  summary:
    "Recommend an initial bulk copy followed by change data capture from the MySQL binlog, so the final cutover only drains the remaining changes; JSON becomes jsonb and each ENUM becomes a PostgreSQL enum type.",
  approaches: [
    {
      name: "Bulk copy with binlog change data capture",
      description:
        "Copy the 2GB snapshot with pgloader while the source stays online, stream later changes from the MySQL binlog, then switch over once the replica has caught up.",
      pros: ["The write freeze only covers draining the last changes", "The source stays online during the bulk copy"],
      cons: ["More moving parts to operate", "Needs the binlog in row format"],
    },
    {
      name: "Offline dump and restore",
      description: "Stop writes, dump MySQL, convert and restore into PostgreSQL in one window.",
      pros: ["Simplest to reason about", "No replication tooling"],
      cons: ["The write freeze lasts for the whole copy and restore", "A failed restore consumes the entire downtime budget"],
    },
  ],
  justification:
    "Only the change data capture approach keeps the write freeze inside the 30 minute downtime budget with margin; the offline dump ties downtime to copy speed, which the analysis could not confirm.",
  tradeoffs: [
    "Change data capture adds operational complexity in exchange for a short cutover",
    "jsonb costs a little write speed in exchange for indexable JSON queries",
    "A PostgreSQL enum type keeps value checking but needs ALTER TYPE to add new values",
  ],
  recommended: "Bulk copy with binlog change data capture",
  decisions: [
    {
      text: "Map JSON columns to jsonb",
      rationale: "jsonb supports GIN indexes and keeps the JSON documents queryable",
      alternatives: ["json", "text"],
    },
    {
      text: "Map each ENUM column to a PostgreSQL enum type",
      rationale: "It keeps rejecting values outside the set, as the analysis requires",
      alternatives: ["text with a CHECK constraint"],
    },
  ],
  claims: [
    { text: "pgloader converts MySQL ENUM columns to PostgreSQL enum types", certainty: "likely", source: "pgloader documentation" },
    { text: "jsonb supports GIN indexing for containment queries", certainty: "confirmed", source: "PostgreSQL documentation" },
  ],
  knowledgeBoundary: {
    whatIKnow: ["jsonb can be indexed with GIN", "pgloader reads MySQL schemas directly"],
    whatIAssume: ["The binlog is already in row format"],
    whatIDontKnow: ["Replication lag under peak write load"],
    whatNeedsVerification: ["Binlog format on the production server"],
  },
  confidence: 0.75,
};

/** Critique, as the Security & Quality Auditor would write it. */
export const CRITIQUE_OUTPUT = {
  summary:
    "The recommended design fits the constraints, but three risks need mitigation: replication lag at cutover, silent JSON conversion failures, and ENUM values present in rows but missing from the type definition.",
  vulnerabilities: [
    {
      description: "Replication lag during peak writes could stretch the final cutover beyond the downtime budget",
      severity: "high",
      area: "availability",
      mitigation: "Schedule the cutover in the lowest-traffic hour and gate it on replication lag",
    },
    { description: "Invalid JSON stored in MySQL text columns fails the jsonb conversion", severity: "medium", area: "data integrity" },
    { description: "ENUM values present in rows but missing from the column definition are rejected on insert", severity: "medium", area: "data integrity" },
    { description: "Replication credentials give broad read access to the source database", severity: "low", area: "security" },
  ],
  riskLevel: "high",
  mitigation: [
    "Gate the cutover on replication lag below 5 seconds, sustained for 10 minutes",
    "Validate every JSON value with a dry-run conversion before the bulk copy",
    "Scan ENUM columns for values outside their definition before the copy",
    "Use a dedicated replication user limited to the migrated schema",
  ],
  confidence: 0.8,
  constraints: ["Cutover starts only when replication lag is below 5 seconds"],
  claims: [
    { text: "Row counts and per-table checksums reveal lost rows after the copy", certainty: "confirmed", source: "standard migration practice" },
    { text: "Peak write load may delay the catch-up of change data capture", certainty: "uncertain" },
  ],
  knowledgeBoundary: {
    whatIKnow: ["jsonb rejects invalid JSON on insert", "PostgreSQL enum types reject unknown values"],
    whatIAssume: ["The lowest-traffic hour is known to the operators"],
    whatIDontKnow: ["How much invalid JSON the source holds"],
    whatNeedsVerification: ["Peak write rate and the resulting replication lag"],
  },
};

/** Synthesis, as the Implementation Engineer would write it. */
export const SYNTHESIS_OUTPUT = {
  summary:
    "Seven steps take the migration from schema conversion to cutover, with a rollback path that keeps MySQL as the source of truth until PostgreSQL is verified.",
  implementation: [
    "Convert the schema: JSON columns to jsonb and each ENUM column to its own PostgreSQL enum type",
    "Run the pre-copy scans for invalid JSON and out-of-set ENUM values, and fix offending rows in MySQL",
    "Bulk copy the 2GB snapshot with pgloader while MySQL stays online",
    "Start binlog change data capture into PostgreSQL from the snapshot position",
    "Wait until replication lag stays below 5 seconds for 10 minutes",
    "Freeze writes, drain the remaining changes and switch the application connection string to PostgreSQL; the expected write freeze is about 10 minutes",
    "Rollback path: if validation fails, point the application back to MySQL, which received no writes after the freeze",
  ],
  testing: [
    "Compare row counts and per-table checksums between MySQL and PostgreSQL",
    "Run the application's JSON queries against PostgreSQL and compare the results",
    "Insert an out-of-set ENUM value and expect it to be rejected",
    "Rehearse the cutover on a staging copy and time the write freeze",
  ],
  warnings: [
    "MySQL-specific JSON functions in queries must be ported before cutover",
    "Adding ENUM values later needs ALTER TYPE in PostgreSQL",
  ],
  decisions: [
    { text: "Use pgloader for the snapshot", rationale: "It converts the schema types and copies the data in one tool" },
  ],
  claims: [
    { text: "The write freeze covers draining changes and the connection switch only", certainty: "likely", source: "design.recommended" },
    { text: "pgloader finishes the snapshot well within the business day", certainty: "uncertain" },
  ],
  knowledgeBoundary: {
    whatIKnow: ["The steps follow the recommended design", "The rollback keeps MySQL untouched after the freeze"],
    whatIAssume: ["A staging copy of production is available for the rehearsal"],
    whatIDontKnow: ["The exact snapshot duration on production hardware"],
    whatNeedsVerification: ["Snapshot duration, measured in the rehearsal"],
  },
  confidence: 0.8,
};

/** Verify, as Quality Assurance would write it: every check passes and the plan is approved. */
export const VERIFY_OUTPUT = {
  summary:
    "The plan meets every constraint: the rehearsed write freeze fits the downtime budget, data integrity checks cover JSON and ENUM columns, and the rollback path was exercised. Approved.",
  checks: [
    { name: "Downtime budget", passed: true, details: "The rehearsed write freeze took 12 minutes" },
    { name: "Data integrity", passed: true, details: "Row counts and checksums match on all tables in the rehearsal" },
    { name: "JSON queries", passed: true, details: "All application JSON queries return identical results" },
    { name: "ENUM enforcement", passed: true, details: "Out-of-set values are rejected by the enum types" },
    { name: "Rollback path", passed: true, details: "Pointing the application back to MySQL worked in the rehearsal" },
  ],
  passedCount: 5,
  failedCount: 0,
  finalConfidence: 0.85,
  decision: "approve",
  recommendations: ["Keep MySQL read-only for a week as a fallback", "Monitor replication lag on the cutover dashboard"],
  claims: [
    { text: "The rehearsal measured a 12 minute write freeze", certainty: "confirmed", source: "staging rehearsal log" },
    { text: "Production write load matches the staging rehearsal", certainty: "likely", source: "traffic comparison" },
  ],
  knowledgeBoundary: {
    whatIKnow: ["All five checks passed in the rehearsal"],
    whatIAssume: ["Production behaves like staging under the same load"],
    whatIDontKnow: ["Behaviour under an unexpected traffic spike during cutover"],
    whatNeedsVerification: ["Replication lag during the production cutover"],
  },
};

/** A verify of the same session that rejects the plan (one failed check), for loop-back tests. */
export const VERIFY_REJECT_OUTPUT = {
  ...VERIFY_OUTPUT,
  summary:
    "The plan fails the downtime check: the rehearsed write freeze ran past the budget because the drain step was slow, so the plan is rejected and goes back to design.",
  checks: [
    { name: "Downtime budget", passed: false, details: "The drain step did not finish inside the budget in the rehearsal" },
    ...VERIFY_OUTPUT.checks.slice(1),
  ],
  passedCount: 4,
  failedCount: 1,
  decision: "reject",
  recommendations: ["Shorten the drain step before the next rehearsal"],
  claims: [{ text: "The drain step was the slowest part of the rehearsal", certainty: "confirmed", source: "staging rehearsal log" }],
};

/** The five outputs in order, keyed by phase. */
export const MIGRATION_OUTPUTS = {
  decompile: DECOMPILE_OUTPUT,
  design: DESIGN_OUTPUT,
  critique: CRITIQUE_OUTPUT,
  synthesis: SYNTHESIS_OUTPUT,
  verify: VERIFY_OUTPUT,
} as const;

/**
 * The same session as a model that follows the council seed's README writes it: the seed's field
 * names (`whatNeedsVerification`), plain strings where a list holds objects (decisions, claims,
 * approaches, vulnerabilities, checks) and the seed's enumeration words in its case (`APPROVED`,
 * `Confirmed`, `HIGH`). It has no `components`, which the seed does not list. Every phase passes.
 */
export const SEED_STYLE_OUTPUTS = {
  decompile: {
    summary: DECOMPILE_OUTPUT.summary,
    decisions: [
      "Treat schema conversion and data transfer as separate sub-problems",
      "Keep application changes out of scope except the connection switch",
    ],
    constraints: DECOMPILE_OUTPUT.constraints,
    confidence: 0.8,
    criticalQuestions: DECOMPILE_OUTPUT.criticalQuestions,
    claims: [
      { text: "The dataset is about 2GB", certainty: "Confirmed", source: "task statement" },
      { text: "Downtime must stay under 30 minutes", certainty: "CONFIRMED", source: "task statement" },
      "Some JSON columns are queried by the application",
    ],
    knowledgeBoundary: DECOMPILE_OUTPUT.knowledgeBoundary,
  },
  design: {
    summary: DESIGN_OUTPUT.summary,
    approaches: ["Bulk copy with binlog change data capture", "Offline dump and restore"],
    justification: DESIGN_OUTPUT.justification,
    tradeoffs: DESIGN_OUTPUT.tradeoffs,
    recommended: "Bulk copy with binlog change data capture",
    decisions: ["Map JSON columns to jsonb", "Map each ENUM column to a PostgreSQL enum type"],
    claims: [
      "pgloader converts MySQL ENUM columns to PostgreSQL enum types",
      { text: "jsonb supports GIN indexing for containment queries", certainty: "Confirmed", source: "PostgreSQL documentation" },
    ],
    knowledgeBoundary: DESIGN_OUTPUT.knowledgeBoundary,
    confidence: 0.75,
  },
  critique: {
    summary: CRITIQUE_OUTPUT.summary,
    vulnerabilities: [
      "Replication lag during peak writes could stretch the final cutover beyond the downtime budget",
      "Invalid JSON stored in MySQL text columns fails the jsonb conversion",
      "ENUM values present in rows but missing from the column definition are rejected on insert",
    ],
    riskLevel: "HIGH",
    mitigation: CRITIQUE_OUTPUT.mitigation,
    confidence: 0.8,
    claims: [
      { text: "Row counts and per-table checksums reveal lost rows after the copy", certainty: "Confirmed", source: "standard migration practice" },
      { text: "Peak write load may delay the catch-up of change data capture", certainty: "Uncertain" },
    ],
    knowledgeBoundary: CRITIQUE_OUTPUT.knowledgeBoundary,
  },
  synthesis: {
    summary: SYNTHESIS_OUTPUT.summary,
    implementation: SYNTHESIS_OUTPUT.implementation,
    testing: SYNTHESIS_OUTPUT.testing,
    warnings: SYNTHESIS_OUTPUT.warnings,
    decisions: ["Use pgloader for the snapshot"],
    claims: SYNTHESIS_OUTPUT.claims.map((c) => ({ ...c, certainty: c.certainty.toUpperCase() })),
    knowledgeBoundary: SYNTHESIS_OUTPUT.knowledgeBoundary,
    confidence: 0.8,
  },
  verify: {
    summary: VERIFY_OUTPUT.summary,
    checks: [
      "Downtime budget: the rehearsed write freeze took 12 minutes",
      "Data integrity: row counts and checksums match on all tables",
      "JSON queries return identical results",
      "ENUM enforcement rejects out-of-set values",
      "Rollback path: pointing the application back to MySQL worked in the rehearsal",
    ],
    passedCount: 5,
    failedCount: 0,
    finalConfidence: 0.85,
    decision: "APPROVED",
    recommendations: VERIFY_OUTPUT.recommendations,
    claims: VERIFY_OUTPUT.claims,
    knowledgeBoundary: VERIFY_OUTPUT.knowledgeBoundary,
  },
} as const;
