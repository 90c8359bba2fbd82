import { z } from "zod";

/**
 * The ways an approval can be given (docs/approvals.md §1), as policy and cognition name them.
 * Policy decides which of them an approval accepts and cognition enforces it; the edge only
 * reads the list to say what a person can do here, and never decides that an answer counts.
 */
export const APPROVAL_CHANNEL_NAMES = ["client_elicitation", "approver", "operator", "console"] as const;

export type ApprovalChannelName = (typeof APPROVAL_CHANNEL_NAMES)[number];

/** What an approval stored before channels existed accepts (cognition's rule, mirrored to offer the same). */
const LEGACY_CHANNELS: readonly ApprovalChannelName[] = ["approver", "operator", "console"];

/** The standalone operator's command line, when this edge runs inside `chaos-core serve` or `stdio`. */
export interface OperatorAccess {
  /**
   * The data directory the running server uses, when it is not the default one `chaos-core
   * approvals` finds by itself: the command then names it with `--data-dir`.
   */
  readonly dataDir?: string;
}

/** What this edge offers in this call, beyond what policy accepts. */
export interface ChannelPlace {
  /** The caller's tenant: the operator command names it when it is not `default`. */
  readonly tenant: string;
  /** Whether this call can ask the client's user through a form (the client declared form elicitation). */
  readonly canElicit: boolean;
  /** Set only in standalone, where `chaos-core approvals` reaches the admin endpoint. */
  readonly operator?: OperatorAccess;
}

/** One way a person can approve, with the exact call or command. */
export const approvalChannelOutput = z.object({
  channel: z.enum(APPROVAL_CHANNEL_NAMES),
  how: z.string().describe("Who answers, and how, in plain words"),
  call: z.string().optional().describe("The exact tool call, for the channels answered through a tool"),
  command: z.string().optional().describe("The exact command line, for the operator"),
  url: z.string().optional().describe("The page to open, for the console"),
});

export type ApprovalChannelOption = z.output<typeof approvalChannelOutput>;

/** How to call `chaoscore_execute` for an approval, as an agent would type it. */
export function executeCall(approvalId: string): string {
  return `chaoscore_execute {"approval_id": "${approvalId}"}`;
}

/** How a person with the approver role answers an approval. */
export function approveCall(approvalId: string): string {
  return `chaoscore_approve {"approval_id": "${approvalId}", "approve": true}`;
}

/** A word for a shell: as is when it holds nothing a shell reads, else single-quoted. */
function shellWord(word: string): string {
  return /^[A-Za-z0-9_./:@%+=,-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`;
}

/**
 * The operator's exact command line for this server: the tenant and the data directory are named
 * when `chaos-core approvals` would not find them by itself.
 */
export function operatorCommand(verb: "approve" | "approve-spend" | "reject-spend", id: string | number, tenant: string, operator: OperatorAccess): string {
  const t = tenant === "default" ? "" : ` --tenant ${shellWord(tenant)}`;
  const dataDir = operator.dataDir ? ` --data-dir ${shellWord(operator.dataDir)}` : "";
  return `chaos-core approvals ${verb} ${id}${t}${dataDir}`;
}

/** The operator's exact command for a step approval. */
export function operatorApproveCommand(approvalId: string, place: ChannelPlace, operator: OperatorAccess): string {
  return operatorCommand("approve", approvalId, place.tenant, operator);
}

/**
 * The channels an approval accepts, as names this build knows, in the fixed order; an empty list
 * (an approval stored before channels existed) is what cognition then accepts.
 */
export function acceptedChannels(channels: readonly string[]): readonly ApprovalChannelName[] {
  const named = APPROVAL_CHANNEL_NAMES.filter((c) => channels.includes(c));
  return named.length > 0 ? named : LEGACY_CHANNELS;
}

/**
 * Every channel that can approve this step approval here: policy's list (`channels`, from
 * cognition), filtered to what exists in this call (the client's own form only when it can be
 * asked, the operator only in standalone), each with the exact way to use it. The one place
 * the list is built, so every answer names the same channels (the console joins it here).
 */
export function stepApprovalChannels(approvalId: string, channels: readonly string[], place: ChannelPlace): ApprovalChannelOption[] {
  const options: ApprovalChannelOption[] = [];
  for (const channel of acceptedChannels(channels)) {
    switch (channel) {
      case "client_elicitation":
        if (place.canElicit) {
          options.push({
            channel,
            how: `Call ${executeCall(approvalId)}: your user will be shown the request and asked to approve it; it runs only if they do.`,
            call: executeCall(approvalId),
          });
        }
        break;
      case "approver":
        options.push({
          channel,
          how: `A person holding the approver role in this tenant calls ${approveCall(approvalId)} with their own API key, from their own session.`,
          call: approveCall(approvalId),
        });
        break;
      case "operator":
        if (place.operator) {
          const command = operatorApproveCommand(approvalId, place, place.operator);
          options.push({
            channel,
            how: `The operator of this Chaos Core runs ${command} on its machine (chaos-core approvals list shows the whole call).`,
            command,
          });
        }
        break;
      case "console":
        // Served with the approval console (docs/approvals.md §2); not offered until it exists.
        break;
    }
  }
  return options;
}

/**
 * The channel list as lines for a message or a `next_step`: each way to approve, then how the
 * agent runs the step. When none exists here, says which channels policy accepts, so an
 * operator can see what to enable.
 */
export function channelLines(approvalId: string, options: readonly ApprovalChannelOption[], channels: readonly string[]): string {
  if (options.length === 0) {
    return (
      `No way to approve it is available here: policy accepts only ${acceptedChannels(channels).join(", ")} for it. ` +
      "Ask the operator of this Chaos Core."
    );
  }
  const elicit = options.length === 1 && options[0]!.channel === "client_elicitation";
  const ways = options.map((o) => `- ${o.channel}: ${o.how}`).join("\n");
  return elicit
    ? `Who can approve it:\n${ways}`
    : `Who can approve it here:\n${ways}\nOnce approved, call ${executeCall(approvalId)} to run it, once.`;
}
