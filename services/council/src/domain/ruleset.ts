import { type Phase } from "./phases.js";

/** Pipeline depth chosen from the task's complexity. */
export type Depth = "light" | "standard" | "full";

/** Complexity level of a task. */
export type ComplexityLevel = "simple" | "moderate" | "complex";

/** A physical dimension numbers are normalised into, so "30 minutes" and "2 hours" compare. */
export type Dimension = "duration" | "size" | "percent" | "count";

/** Weights of the six per-phase dimensions; they are normalised by their sum. */
export interface DimensionWeights {
  completeness: number;
  consistency: number;
  decisionQuality: number;
  structure: number;
  transparency: number;
  agentic: number;
}

/** One not-authority rule of a persona and the phrases that betray a breach of it. */
export interface AuthorityRule {
  /** The not-authority item, as the persona brief lists it. */
  rule: string;
  /** Case-insensitive regular expressions (source text) matched per sentence. */
  patterns: string[];
}

/** A quantity the contradiction checker follows across phases, under all its names. */
export interface QuantityRule {
  name: string;
  aliases: string[];
  dimension: Dimension;
}

/** A unit, its spellings and its factor to the dimension's base unit (seconds, bytes, percent). */
export interface UnitRule {
  spellings: string[];
  dimension: Dimension;
  factor: number;
}

/**
 * Every keyword list, weight, threshold and limit of the council. Internal functions take a
 * `Ruleset` so tests (and a future operator override) can change a rule and see the effect;
 * the engine uses {@link RULESET}. Change `version` whenever a rule changes: it is returned
 * with every score, so a changed score can be traced to a changed rule.
 */
export interface Ruleset {
  version: string;
  limits: {
    /** Longest string anywhere in a phase output. */
    maxStringChars: number;
    /** Longest list anywhere in a phase output. */
    maxListItems: number;
    /** Largest phase output, measured as its JSON text. */
    maxOutputChars: number;
    maxTaskChars: number;
    maxTitleChars: number;
    /** Longest session id and tenant name. */
    maxIdChars: number;
    maxContextChars: number;
    /** Saves of one phase within one loop; bounds the stored history. */
    maxAttemptsPerPhase: number;
    maxClaimsToVerify: number;
  };
  thresholds: {
    /**
     * A phase saved with at least this score is locked and unlocks the next one. Below it the
     * phase stays open for an improved re-save: 50–69 ("needs_improvement") is close and the
     * failed checks say what is missing; under 50 ("insufficient") misses essentials. Neither
     * unlocks the next phase.
     */
    pass: number;
    excellent: number;
    good: number;
    needsImprovement: number;
  };
  complexity: {
    baseline: number;
    keywordWeight: number;
    maxKeywordPoints: number;
    /** Matched as word prefixes ("migrat" matches migrate, migration, migrating). */
    keywords: string[];
    domainBoost: number;
    domains: Record<string, string[]>;
    numberWeight: number;
    maxNumberPoints: number;
    /** Scores up to `simpleMax` are simple, up to `moderateMax` moderate, above complex. */
    simpleMax: number;
    moderateMax: number;
  };
  pipelines: Record<Depth, Phase[]>;
  depthOf: Record<ComplexityLevel, Depth>;
  loop: {
    /** How many times a rejecting verify may send a full-depth session back. */
    maxLoops: number;
    /** The phase a rejecting verify reopens (it and every later phase are redone). */
    loopBackTo: Phase;
  };
  /** Required and optional fields per phase; validation and completeness read the same list. */
  fields: Record<Phase, { required: string[]; optional: string[] }>;
  weights: DimensionWeights;
  completeness: {
    minSummaryChars: number;
    /** Least items per list field ("phase.field"), per depth; absent means 1. */
    minItems: Record<Depth, Record<string, number>>;
    /** Optional fields that earn a completeness check when present. */
    recommended: Record<Phase, string[]>;
  };
  consistency: {
    contradictionPenalty: number;
    warningPenalty: number;
    /** A confidence above this with mostly uncertain claims is flagged as overconfident. */
    overconfidence: number;
  };
  decisionQuality: {
    minRationaleChars: number;
    minJustificationChars: number;
    /** Words that show a rollback path in a synthesis (word prefixes). */
    rollbackWords: string[];
  };
  structure: {
    maxSummaryChars: number;
    minItemChars: number;
    maxItemChars: number;
  };
  transparency: {
    /** Points of the transparency dimension per part; they sum to 100. */
    certainty: number;
    knowledgeBoundary: number;
    assumptions: number;
  };
  agentic: {
    /** Points for speaking as the persona (identity keywords present). */
    identityPoints: number;
    minIdentityHits: number;
    /** Points lost per authority violation, out of the remaining points. */
    violationPenalty: number;
  };
  session: {
    weights: { quality: number; adaptability: number; transparency: number; agentic: number };
    retryPenalty: number;
    loopPenalty: number;
  };
  text: {
    stopwords: string[];
    negations: string[];
    /** Words that make a sentence hypothetical or a check, not an assertion. */
    hedges: string[];
  };
  contradictions: {
    /** Relative difference under which two values count as the same. */
    numericTolerance: number;
    /** Words an alias may sit away from its number. */
    aliasWindow: number;
    quantities: QuantityRule[];
    units: UnitRule[];
    /** Phrases right before a number that make it an upper bound ("< 30 minutes"). */
    upperBound: string[];
    /** Phrases that make it a lower bound; a negation before flips them ("no longer than"). */
    lowerBound: string[];
    /**
     * Fields whose text is not asserted as part of the plan (questions, risks, warnings,
     * unknowns, rejected alternatives): they are never one side of a contradiction.
     */
    nonAssertedFields: string[];
    /** Nouns that make a value in their clause a limit ("a downtime budget of 30 minutes"). */
    boundNouns: string[];
    /** Words that make a value an estimate ("about 10 minutes"), compared with the wider tolerance. */
    approximateMarkers: string[];
    /** Relative difference under which an estimate and another value count as the same. */
    approximateTolerance: number;
    /** Jaccard similarity of two propositions for them to be "the same statement". */
    polaritySimilarity: number;
    minPropositionTokens: number;
    /** Content words after the negation that make up a prohibition ("no triggers on orders"). */
    prohibitionTokens: number;
    prohibitionMinTokens: number;
    /** Phases whose text proposes things and so can breach a prohibition. */
    prohibitionCheckedPhases: Phase[];
  };
  authority: Record<Phase, { identityKeywords: string[]; rules: AuthorityRule[] }>;
  grounding: {
    /** Share of a claim's content words found in one stored item for it to be grounded. */
    verifiedOverlap: number;
    /** Lower share that suffices when the claim's source names where it comes from. */
    sourceOverlap: number;
  };
}

const CODE = "```";

/** The rules in force. */
export const RULESET: Ruleset = {
  version: "council-rules/2025-06.2",
  limits: {
    maxStringChars: 20_000,
    maxListItems: 200,
    maxOutputChars: 200_000,
    maxTaskChars: 20_000,
    maxTitleChars: 200,
    maxIdChars: 200,
    maxContextChars: 20_000,
    maxAttemptsPerPhase: 25,
    maxClaimsToVerify: 100,
  },
  thresholds: { pass: 70, excellent: 90, good: 70, needsImprovement: 50 },
  complexity: {
    baseline: 10,
    keywordWeight: 8,
    maxKeywordPoints: 48,
    keywords: [
      "migrat",
      "downtime",
      "security",
      "kubernetes",
      "performance",
      "distributed",
      "concurren",
      "scalab",
      "latency",
      "throughput",
      "replicat",
      "encrypt",
      "authenticat",
      "authoriz",
      "compliance",
      "real-time",
      "high availability",
      "failover",
      "multi-tenant",
      "multi-region",
      "transaction",
      "sharding",
      "microservice",
      "legacy",
      "zero-downtime",
      "disaster recovery",
    ],
    domainBoost: 10,
    domains: {
      migration: ["migrat", "zero-downtime", "cutover"],
      security: ["security", "encrypt", "authenticat", "authoriz", "compliance", "vulnerab"],
      infrastructure: ["kubernetes", "multi-region", "failover", "disaster recovery", "high availability"],
      performance: ["performance", "latency", "throughput", "scalab"],
    },
    numberWeight: 5,
    maxNumberPoints: 20,
    simpleMax: 20,
    moderateMax: 60,
  },
  pipelines: {
    light: ["decompile", "synthesis", "verify"],
    standard: ["decompile", "design", "critique", "synthesis", "verify"],
    full: ["decompile", "design", "critique", "synthesis", "verify"],
  },
  depthOf: { simple: "light", moderate: "standard", complex: "full" },
  loop: { maxLoops: 2, loopBackTo: "design" },
  fields: {
    decompile: {
      required: ["summary", "decisions", "constraints", "confidence", "criticalQuestions", "claims"],
      optional: ["components", "knowledgeBoundary"],
    },
    design: {
      required: ["summary", "approaches", "justification", "tradeoffs", "recommended", "decisions"],
      optional: ["claims", "knowledgeBoundary", "confidence"],
    },
    critique: {
      required: ["summary", "vulnerabilities", "riskLevel", "mitigation", "confidence"],
      optional: ["claims", "knowledgeBoundary", "constraints"],
    },
    synthesis: {
      required: ["summary", "implementation", "testing", "warnings"],
      optional: ["decisions", "claims", "knowledgeBoundary", "confidence"],
    },
    verify: {
      // The seed's table: without a decision, the checks decide (validation's verifyDecision).
      required: ["summary", "checks", "passedCount", "failedCount", "finalConfidence"],
      optional: ["decision", "recommendations", "claims", "knowledgeBoundary"],
    },
  },
  weights: {
    completeness: 0.25,
    consistency: 0.25,
    decisionQuality: 0.15,
    structure: 0.1,
    transparency: 0.15,
    agentic: 0.1,
  },
  completeness: {
    minSummaryChars: 40,
    minItems: {
      light: { "verify.checks": 2 },
      standard: {
        "decompile.constraints": 2,
        "decompile.criticalQuestions": 2,
        "design.approaches": 2,
        "design.tradeoffs": 2,
        "critique.vulnerabilities": 2,
        "critique.mitigation": 2,
        "synthesis.implementation": 3,
        "synthesis.testing": 2,
        "verify.checks": 3,
      },
      full: {
        "decompile.constraints": 3,
        "decompile.criticalQuestions": 3,
        "decompile.claims": 2,
        "design.approaches": 3,
        "design.tradeoffs": 3,
        "critique.vulnerabilities": 3,
        "critique.mitigation": 3,
        "synthesis.implementation": 5,
        "synthesis.testing": 3,
        "verify.checks": 5,
      },
    },
    recommended: {
      decompile: ["knowledgeBoundary", "components"],
      design: ["claims", "knowledgeBoundary"],
      critique: ["claims", "knowledgeBoundary"],
      synthesis: ["claims", "knowledgeBoundary"],
      verify: ["recommendations", "knowledgeBoundary"],
    },
  },
  consistency: { contradictionPenalty: 30, warningPenalty: 10, overconfidence: 0.9 },
  decisionQuality: {
    minRationaleChars: 20,
    minJustificationChars: 40,
    rollbackWords: ["rollback", "roll back", "revert", "fallback", "fall back", "restore"],
  },
  structure: { maxSummaryChars: 2_000, minItemChars: 3, maxItemChars: 4_000 },
  transparency: { certainty: 40, knowledgeBoundary: 35, assumptions: 25 },
  agentic: { identityPoints: 30, minIdentityHits: 2, violationPenalty: 35 },
  session: {
    weights: { quality: 0.55, adaptability: 0.15, transparency: 0.15, agentic: 0.15 },
    retryPenalty: 5,
    loopPenalty: 10,
  },
  text: {
    stopwords: [
      "a", "an", "the", "and", "or", "of", "to", "in", "on", "for", "with", "by", "at", "from", "as",
      "is", "are", "was", "were", "be", "been", "being", "it", "its", "this", "that", "these", "those",
      "we", "our", "us", "you", "your", "they", "their", "i", "he", "she", "them",
      "will", "would", "shall", "should", "must", "can", "could", "may", "might", "do", "does", "did",
      "has", "have", "had", "then", "than", "so", "such", "into", "onto", "over", "under", "about",
      "which", "who", "whom", "what", "when", "where", "while", "there", "here", "also", "only", "all",
      "any", "each", "every", "both", "via", "per", "up", "out", "if", "but", "because", "just", "very",
    ],
    negations: [
      "not", "no", "never", "none", "nor", "without", "cannot", "zero", "avoid", "avoids", "avoiding",
      "prevent", "prevents", "forbid", "forbidden", "prohibit", "prohibited",
    ],
    hedges: [
      "if", "unless", "could", "might", "may", "risk", "risks", "whether", "check", "checks", "verify",
      "verifies", "verified", "detect", "detects", "ensure", "ensures", "confirm", "confirms", "test",
      "tests", "monitor", "alert", "fails", "failure", "worst", "otherwise", "would", "violate", "violates",
      "violating", "breach", "breaches",
    ],
  },
  contradictions: {
    numericTolerance: 0.1,
    aliasWindow: 5,
    nonAssertedFields: [
      "criticalQuestions", "vulnerabilities", "warnings", "whatIDontKnow", "whatNeedsVerification", "alternatives",
      "recommendations", "mitigation",
    ],
    quantities: [
      {
        name: "downtime",
        aliases: [
          "downtime", "outage", "maintenance window", "cutover window", "cutover", "read-only window",
          "write freeze", "service interruption",
        ],
        dimension: "duration",
      },
      { name: "data size", aliases: ["data", "dataset", "database size", "data volume"], dimension: "size" },
      { name: "latency", aliases: ["latency", "response time"], dimension: "duration" },
      { name: "replication lag", aliases: ["replication lag", "lag"], dimension: "duration" },
      { name: "availability", aliases: ["availability", "uptime", "sla"], dimension: "percent" },
      { name: "retention", aliases: ["retention", "backup retention"], dimension: "duration" },
    ],
    units: [
      { spellings: ["ms", "msec", "millisecond", "milliseconds"], dimension: "duration", factor: 0.001 },
      { spellings: ["s", "sec", "secs", "second", "seconds"], dimension: "duration", factor: 1 },
      { spellings: ["min", "mins", "minute", "minutes"], dimension: "duration", factor: 60 },
      { spellings: ["h", "hr", "hrs", "hour", "hours"], dimension: "duration", factor: 3_600 },
      { spellings: ["day", "days"], dimension: "duration", factor: 86_400 },
      { spellings: ["week", "weeks"], dimension: "duration", factor: 604_800 },
      { spellings: ["kb"], dimension: "size", factor: 1e3 },
      { spellings: ["mb"], dimension: "size", factor: 1e6 },
      { spellings: ["gb"], dimension: "size", factor: 1e9 },
      { spellings: ["tb"], dimension: "size", factor: 1e12 },
      { spellings: ["%", "percent"], dimension: "percent", factor: 1 },
    ],
    upperBound: [
      "<", "<=", "≤", "under", "below", "less than", "at most", "no more than", "up to", "within",
      "maximum of", "maximum", "max", "capped at", "not exceeding", "not to exceed",
    ],
    lowerBound: [">", ">=", "≥", "more than", "longer than", "greater than", "at least", "above", "over", "minimum of", "minimum", "exceeding", "exceeds", "exceed"],
    boundNouns: ["budget", "limit", "cap", "ceiling", "allowance", "sla", "target"],
    approximateMarkers: ["about", "around", "approximately", "roughly", "~", "≈", "expected", "estimated", "estimate"],
    approximateTolerance: 0.5,
    polaritySimilarity: 0.8,
    minPropositionTokens: 2,
    prohibitionTokens: 3,
    prohibitionMinTokens: 2,
    prohibitionCheckedPhases: ["design", "synthesis"],
  },
  authority: {
    decompile: {
      identityKeywords: ["constraint", "requirement", "sub-problem", "question", "component", "scope", "unknown", "assum"],
      rules: [
        {
          rule: "No solutions",
          patterns: [
            "\\b(?:i|we) (?:recommend|propose|suggest)\\b",
            "\\b(?:the|our) solution (?:is|will be)\\b",
            "\\b(?:we|you) (?:should|will|could) use\\b",
          ],
        },
        { rule: "No tech evaluation", patterns: ["\\bis (?:better|faster|safer) than\\b", "\\bbest (?:tool|option|choice|approach)\\b"] },
        { rule: "No design decisions", patterns: ["\\b(?:the|our) architecture (?:is|will)\\b", "\\bwe (?:chose|choose|pick|picked|decided to use)\\b"] },
      ],
    },
    design: {
      identityKeywords: ["approach", "tradeoff", "trade-off", "option", "recommend", "alternative", "architecture"],
      rules: [
        { rule: "No implementation", patterns: ["\\bstep \\d+\\s*:", "\\bhere is the (?:code|implementation)\\b"] },
        {
          rule: "No code",
          patterns: [CODE, "\\b(?:create|alter|drop) (?:table|index|trigger|function)\\b", "\\bselect\\s+[\\w*,\\s]+\\s+from\\s+\\w", "\\s--[a-z][a-z-]+(?:=|\\s)"],
        },
        { rule: "No detailed testing", patterns: ["\\bunit tests?\\b", "\\btest cases?\\b", "\\bassert(?:ion)?s?\\b"] },
      ],
    },
    critique: {
      identityKeywords: ["risk", "vulnerab", "failure", "threat", "mitigat", "exposure", "weakness"],
      rules: [
        { rule: "No solutions", patterns: ["\\bthe (?:new|better) solution\\b", "\\binstead,? (?:we|you) (?:should|will) build\\b"] },
        { rule: "No designs", patterns: ["\\bredesign\\b", "\\bnew architecture\\b", "\\breplace the (?:design|architecture)\\b"] },
        {
          rule: "No implementation",
          patterns: [CODE, "\\bhere is the (?:code|implementation|fix)\\b", "\\bi (?:have )?implemented\\b", "\\b(?:create|alter) table\\b"],
        },
      ],
    },
    synthesis: {
      identityKeywords: ["step", "implement", "test", "rollback", "run", "deploy", "script"],
      rules: [
        {
          rule: "No architecture changes",
          patterns: [
            "\\b(?:change|replace|switch) (?:the )?(?:architecture|approach|design)\\b",
            "\\binstead of the (?:recommended|chosen|approved) (?:approach|design)\\b",
          ],
        },
        {
          rule: "No requirement changes",
          patterns: ["\\b(?:relax|drop|remove|change|ignore|loosen) (?:the |this |that )?(?:constraint|requirement|downtime limit|limit)s?\\b"],
        },
      ],
    },
    verify: {
      identityKeywords: ["check", "verif", "pass", "fail", "approve", "reject", "evidence", "criteria"],
      rules: [
        { rule: "No redesign", patterns: ["\\bredesign(?:ed)?\\b", "\\bnew (?:architecture|design|approach)\\b"] },
        {
          rule: "No reimplementation",
          patterns: [CODE, "\\bre-?implement(?:ed)?\\b", "\\brewr(?:i|o)te\\b", "\\bi (?:changed|modified|fixed) the (?:code|implementation|script)\\b"],
        },
      ],
    },
  },
  grounding: { verifiedOverlap: 0.6, sourceOverlap: 0.4 },
};
