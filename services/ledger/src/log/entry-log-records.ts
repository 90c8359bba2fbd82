import { logs, SeverityNumber, type LogAttributes } from "@opentelemetry/api-logs";
import type { LedgerEntry } from "./entry.js";

/**
 * Each committed ledger entry as an OpenTelemetry log record (docs/ledger.md, "The audit trail
 * in the SIEM"), exported over OTLP with the same endpoint settings as traces
 * (`OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_LOGS_EXPORTER`, …), so a platform team's collector ships
 * the audit trail to its SIEM. A record carries what says what happened — the entry's position
 * and hashes, its type, tenant and principal, the decision and outcome — and never the event's
 * arguments, receipts, nonces, reasons or anything else it holds: only the fields named here
 * leave. OTLP export is best effort (the SDK's batch processor drops records under pressure);
 * the durable path out is the webhook outbox and `chaos-core ledger export`.
 */
export const ENTRY_EVENT_NAME = "chaoscore.ledger.entry";

const logger = logs.getLogger("chaoscore.ledger");

/** The event's fields that may leave, each a string, number or boolean as recorded; by their attribute name. */
const EVENT_FIELDS: ReadonlyArray<[field: string, attribute: string]> = [
  ["capability", "chaoscore.capability"],
  ["tool", "chaoscore.tool"],
  ["upstream", "chaoscore.upstream"],
  ["stepId", "chaoscore.step.id"],
  ["status", "chaoscore.step.status"],
  ["ran", "chaoscore.step.ran"],
  ["succeeded", "chaoscore.step.succeeded"],
  ["risk", "chaoscore.risk"],
  ["errorCode", "chaoscore.error.code"],
  ["argsHash", "chaoscore.args_hash"],
  ["resultHash", "chaoscore.result_hash"],
  ["approvalId", "chaoscore.approval.id"],
];
/** The verdict's fields that may leave. */
const VERDICT_FIELDS: ReadonlyArray<[field: string, attribute: string]> = [
  ["decision", "chaoscore.policy.decision"],
  ["matchedRule", "chaoscore.policy.matched_rule"],
  ["policyVersion", "chaoscore.policy.version"],
];

function copy(from: Record<string, unknown>, fields: ReadonlyArray<[string, string]>, into: LogAttributes): void {
  for (const [field, attribute] of fields) {
    const v = from[field];
    if (typeof v === "string" || typeof v === "boolean" || (typeof v === "number" && Number.isFinite(v))) into[attribute] = v;
  }
}

/** The record of one entry: its attributes, as they leave. */
export function entryLogAttributes(entry: LedgerEntry): LogAttributes {
  const event = entry.event;
  const attributes: LogAttributes = {
    "chaoscore.tenant": entry.tenant,
    "chaoscore.principal": entry.principal,
    "chaoscore.ledger.seq": entry.seq,
    "chaoscore.ledger.type": typeof event["type"] === "string" ? event["type"] : "",
    "chaoscore.ledger.content_hash": entry.content_hash,
    "chaoscore.ledger.sig": entry.sig,
  };
  copy(event, EVENT_FIELDS, attributes);
  const verdict = event["verdict"];
  if (typeof verdict === "object" && verdict !== null) copy(verdict as Record<string, unknown>, VERDICT_FIELDS, attributes);
  return attributes;
}

/** Emits a log record per entry of a committed batch, when a log exporter is configured (else nothing is built). */
export function emitEntryLogRecords(entries: readonly LedgerEntry[]): void {
  if (!logger.enabled({ eventName: ENTRY_EVENT_NAME })) return;
  for (const entry of entries) {
    const attributes = entryLogAttributes(entry);
    logger.emit({
      eventName: ENTRY_EVENT_NAME,
      timestamp: new Date(entry.ts),
      severityNumber: SeverityNumber.INFO,
      severityText: "INFO",
      body: `ledger entry ${entry.seq} of ${entry.tenant}: ${String(attributes["chaoscore.ledger.type"])}`,
      attributes,
    });
  }
}
