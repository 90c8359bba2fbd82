import { z } from "zod";
import { spendPath, stepPath } from "../deps/console-links.js";
import type { OperatorAccess } from "../deps/edge-deps.js";

/**
 * The ways an approval can be given (docs/approvals.md §1), as policy and cognition name them.
 * Policy decides which of them an approval accepts and cognition enforces it; the edge only
 * reads the list to say what a person can do here, and never decides that an answer counts.
 */
export const APPROVAL_CHANNEL_NAMES = ["client_elicitation", "approver", "operator", "console"] as const;

export type ApprovalChannelName = (typeof APPROVAL_CHANNEL_NAMES)[number];

/** What an approval stored before channels existed accepts (cognition's rule, mirrored to offer the same). */
const LEGACY_CHANNELS: readonly ApprovalChannelName[] = ["approver", "operator", "console"];

/** What this edge offers in this call, beyond what policy accepts. */
export interface ChannelPlace {
  /** The caller's tenant: the operator command names it when it is not `default`. */
  readonly tenant: string;
  /** Whether this call can ask the client's user through a form (the client declared form elicitation). */
  readonly canElicit: boolean;
  /** Set only in standalone, where `chaos-core approvals` reaches the admin endpoint. */
  readonly operator?: OperatorAccess;
  /**
   * The approval console's URL of a path under `/approvals` as a person reaches it from this
   * call (`ToolContext.consoleUrl`); absent, or undefined for the path, when the console is off.
   */
  readonly consoleUrl?: (path: string) => string | undefined;
  /**
   * Whether this client declared URL-mode elicitation: its next call for the approval sends its
   * user to the console page and waits there for the answer (docs/approvals.md §3).
   */
  readonly urlElicitation?: boolean;
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

/** How to call approve_spend for a recorded spend request, as an agent would type it. */
export function approveSpendCall(requestSeq: number): string {
  return `approve_spend {"request_seq": ${requestSeq}}`;
}

/**
 * What an approval is about: a cognition step (`approval_id`), a spend or finance request the
 * ledger stored (`request_seq`), or a tool-approval receipt request (`call`: the exact
 * `issue_approval_receipt` call that answers it). Each is answered through its own tool and
 * operator command.
 */
export type ApprovalSubject =
  | { readonly kind: "step"; readonly approvalId: string }
  | { readonly kind: "spend"; readonly requestSeq: number }
  | { readonly kind: "receipt"; readonly call: string };

/** The requester's and an approver's calls that answer `subject`. */
function answerCalls(subject: ApprovalSubject): { readonly requester: string; readonly approver: string } {
  switch (subject.kind) {
    case "step":
      return { requester: executeCall(subject.approvalId), approver: approveCall(subject.approvalId) };
    case "spend":
      return { requester: approveSpendCall(subject.requestSeq), approver: approveSpendCall(subject.requestSeq) };
    case "receipt":
      return { requester: subject.call, approver: subject.call };
  }
}

/**
 * What a person does on the console. The link carries no credential (the MCP elicitation spec's
 * "Safe URL Handling"): they sign in with their own approver key, or, in standalone, the
 * operator with a one-time link from `chaos-core approvals console`, review the whole request and
 * approve or reject it on the page.
 */
function consoleHow(url: string, place: ChannelPlace, requesterCall: string): string {
  const operator = place.operator
    ? ` (or the operator of this Chaos Core, after ${operatorConsoleCommand(place.tenant, place.operator)} prints a one-time sign-in link)`
    : "";
  const sent = place.urlElicitation
    ? ` Your client supports URL-mode elicitation: your next ${requesterCall} sends your user to this page and waits for the answer given there.`
    : "";
  return (
    `A person holding the approver role opens ${url} and signs in with their own API key${operator}; ` +
    `the page shows the whole request, and they approve or reject it there.${sent}`
  );
}

/** The operator's command that prints a one-time console sign-in link for the tenant. */
export function operatorConsoleCommand(tenant: string, operator: OperatorAccess): string {
  const t = tenant === "default" ? "" : ` --tenant ${shellWord(tenant)}`;
  const dataDir = operator.dataDir ? ` --data-dir ${shellWord(operator.dataDir)}` : "";
  return `chaos-core approvals console${t}${dataDir}`;
}

/** How `channel` answers `subject` here, with the exact call or command; undefined where it cannot. */
function wayOf(subject: ApprovalSubject, channel: ApprovalChannelName, place: ChannelPlace): Omit<ApprovalChannelOption, "channel"> | undefined {
  const calls = answerCalls(subject);
  const step = subject.kind === "step";
  switch (channel) {
    case "client_elicitation":
      if (!place.canElicit) return undefined;
      return step
        ? { how: `Call ${calls.requester}: your user will be shown the request and asked to approve it; it runs only if they do.`, call: calls.requester }
        : { how: `you call ${calls.requester} and this client's user confirms when asked`, call: calls.requester };
    case "approver":
      return step
        ? { how: `A person holding the approver role in this tenant calls ${calls.approver} with their own API key, from their own session.`, call: calls.approver }
        : { how: `someone holding the approver role calls ${calls.approver} with their own API key`, call: calls.approver };
    case "operator": {
      // No operator command answers a tool-receipt request: its receipt goes to whoever issues it.
      if (!place.operator || subject.kind === "receipt") return undefined;
      if (subject.kind === "step") {
        const command = operatorApproveCommand(subject.approvalId, place, place.operator);
        return { how: `The operator of this Chaos Core runs ${command} on its machine (chaos-core approvals list shows the whole call).`, command };
      }
      const command = operatorCommand("approve-spend", subject.requestSeq, place.tenant, place.operator);
      return { how: `the operator of this server runs ${command}`, command };
    }
    case "console": {
      // The console reviews steps and spends; a tool-receipt request is answered by its issuer.
      if (subject.kind === "receipt") return undefined;
      const url = place.consoleUrl?.(subject.kind === "step" ? stepPath(subject.approvalId) : spendPath(subject.requestSeq));
      if (!url) return undefined;
      return { how: consoleHow(url, place, calls.requester), url };
    }
  }
}

/**
 * Every channel that can approve `subject` here: policy's list (`channels`: cognition's for a
 * step, the ledger's for a spend, policy's own for a receipt), filtered to what exists in this
 * call (the client's own form only when it can be asked, the operator only in standalone), each
 * with the exact way to use it, in the channels' fixed order. The one place the list is built,
 * so every answer names the same channels (the console joins it here).
 */
export function approvalChannelOptions(subject: ApprovalSubject, channels: readonly string[], place: ChannelPlace): ApprovalChannelOption[] {
  const options: ApprovalChannelOption[] = [];
  for (const channel of acceptedChannels(channels)) {
    const way = wayOf(subject, channel, place);
    if (way) options.push({ channel, ...way });
  }
  return options;
}

/** Every channel that can approve this step approval here ({@link approvalChannelOptions}). */
export function stepApprovalChannels(approvalId: string, channels: readonly string[], place: ChannelPlace): ApprovalChannelOption[] {
  return approvalChannelOptions({ kind: "step", approvalId }, channels, place);
}

/**
 * Why this call does not ask its user through a form, or undefined when it may: policy must
 * accept the client's own answer (`channels`; by default not at high risk and above, nor for any
 * spend: the client's host can answer a form itself), and the client must have declared form
 * elicitation. `about` names what is approved, `rule` the policy entry that chose the channels.
 */
export function whyClientNotAsked(channels: readonly string[], about: string, rule: string, canElicit: boolean): string | undefined {
  if (!acceptedChannels(channels).includes("client_elicitation")) {
    return (
      `policy does not accept an answer from this client for it (${about}, ${rule ? `rule ${rule}` : "an approval stored before channels existed"}): ` +
      "a form the client answers proves nothing about a person, so your user was not asked."
    );
  }
  if (!canElicit) return "this client cannot ask its user (it did not declare elicitation).";
  return undefined;
}

/**
 * The ways to approve as `- channel: how` lines; when none exists here, which channels policy
 * accepts, so an operator can see what to enable.
 */
export function wayLines(options: readonly ApprovalChannelOption[], channels: readonly string[]): string {
  if (options.length === 0) {
    return (
      `No way to approve it is available here: policy accepts only ${acceptedChannels(channels).join(", ")} for it. ` +
      "Ask the operator of this Chaos Core."
    );
  }
  return options.map((o) => `- ${o.channel}: ${o.how}`).join("\n");
}

/**
 * The channel list of a step approval as lines for a message or a `next_step`: each way to
 * approve, then how the agent runs the step ({@link wayLines}).
 */
export function channelLines(approvalId: string, options: readonly ApprovalChannelOption[], channels: readonly string[]): string {
  if (options.length === 0) return wayLines(options, channels);
  const elicit = options.length === 1 && options[0]!.channel === "client_elicitation";
  const ways = wayLines(options, channels);
  return elicit
    ? `Who can approve it:\n${ways}`
    : `Who can approve it here:\n${ways}\nOnce approved, call ${executeCall(approvalId)} to run it, once.`;
}
