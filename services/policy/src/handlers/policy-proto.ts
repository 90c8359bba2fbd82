import { create } from "@bufbuild/protobuf";
import {
  Decision as ProtoDecision,
  PolicyDocumentSchema,
  Risk as ProtoRisk,
  type PolicyDocument,
} from "@chaos-core/proto/gen/chaoscore/policy/v1/policy_pb.js";
import type { Decision } from "../domain/engine.js";
import { validatePolicyDocument, type PolicyDocumentJson } from "../domain/policy-document.js";
import type { Risk, RiskThreshold } from "../domain/risk.js";

const RISK_FROM_PROTO: Partial<Record<number, Exclude<Risk, "unspecified">>> = {
  [ProtoRisk.LOW]: "low",
  [ProtoRisk.MEDIUM]: "medium",
  [ProtoRisk.HIGH]: "high",
  [ProtoRisk.CRITICAL]: "critical",
};

const RISK_TO_PROTO: Record<Risk, ProtoRisk> = {
  unspecified: ProtoRisk.UNSPECIFIED,
  low: ProtoRisk.LOW,
  medium: ProtoRisk.MEDIUM,
  high: ProtoRisk.HIGH,
  critical: ProtoRisk.CRITICAL,
};

/**
 * The domain risk of a proto risk. An enum value this build does not know (a newer client)
 * becomes `unspecified`, which the engine counts as critical: unknown never means safe.
 */
export function riskFromProto(risk: ProtoRisk): Risk {
  return RISK_FROM_PROTO[risk] ?? "unspecified";
}

/** The proto risk of a domain risk. */
export function riskToProto(risk: Risk): ProtoRisk {
  return RISK_TO_PROTO[risk];
}

const DECISION_TO_PROTO: Record<Decision, ProtoDecision> = {
  ALLOW: ProtoDecision.ALLOW,
  DENY: ProtoDecision.DENY,
  REQUIRE_APPROVAL: ProtoDecision.REQUIRE_APPROVAL,
};

/** The proto decision of a domain decision. */
export function decisionToProto(decision: Decision): ProtoDecision {
  return DECISION_TO_PROTO[decision];
}

/**
 * The domain decision of a proto decision. `DECISION_UNSPECIFIED` (or an unknown value) becomes
 * DENY, so a caller that receives something it cannot read fails closed.
 */
export function decisionFromProto(decision: ProtoDecision): Decision {
  if (decision === ProtoDecision.ALLOW) return "ALLOW";
  if (decision === ProtoDecision.REQUIRE_APPROVAL) return "REQUIRE_APPROVAL";
  return "DENY";
}

/** In a proto document, `RISK_UNSPECIFIED` switches a risk rule off (see policy.proto). */
function thresholdToProto(threshold: RiskThreshold): ProtoRisk {
  return threshold === "never" ? ProtoRisk.UNSPECIFIED : RISK_TO_PROTO[threshold];
}

function thresholdFromProto(risk: ProtoRisk): RiskThreshold | number {
  if (risk === ProtoRisk.UNSPECIFIED) return "never";
  // An unknown number is passed through so validation rejects it and names the field.
  return RISK_FROM_PROTO[risk] ?? risk;
}

/** The proto form of a policy document. */
export function policyDocumentToProto(doc: PolicyDocumentJson): PolicyDocument {
  return create(PolicyDocumentSchema, {
    allowedCapabilities: [...doc.allowedCapabilities],
    deniedCapabilities: [...doc.deniedCapabilities],
    requireConfirmationFor: [...doc.requireConfirmationFor],
    httpAllowedDomains: [...doc.httpAllowedDomains],
    riskRules: {
      requireApprovalAtOrAbove: thresholdToProto(doc.riskRules.requireApprovalAtOrAbove),
      denyAtOrAbove: thresholdToProto(doc.riskRules.denyAtOrAbove),
    },
  });
}

/**
 * Validates a proto policy document through the same schema as a `policy.json` file. An absent
 * `risk_rules` takes the default rules (approval at high and above); a present one maps
 * `RISK_UNSPECIFIED` to `never`, as policy.proto documents.
 * @throws PolicyDocumentError naming `source` and each bad field.
 */
export function policyDocumentFromProto(doc: PolicyDocument, source: string): PolicyDocumentJson {
  return validatePolicyDocument(
    {
      allowedCapabilities: doc.allowedCapabilities,
      deniedCapabilities: doc.deniedCapabilities,
      requireConfirmationFor: doc.requireConfirmationFor,
      httpAllowedDomains: doc.httpAllowedDomains,
      ...(doc.riskRules
        ? {
            riskRules: {
              requireApprovalAtOrAbove: thresholdFromProto(doc.riskRules.requireApprovalAtOrAbove),
              denyAtOrAbove: thresholdFromProto(doc.riskRules.denyAtOrAbove),
            },
          }
        : {}),
    },
    source,
  );
}
