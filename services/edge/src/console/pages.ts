import type { Timestamp } from "@bufbuild/protobuf/wkt";
import type { ApprovalSummary } from "@chaos-core/proto/gen/chaoscore/cognition/v1/cognition_pb.js";
import type { Entry, SpendRequest } from "@chaos-core/proto/gen/chaoscore/ledger/v1/ledger_pb.js";
import type { ApprovalChannelOption } from "../approvals/channels.js";
import type { ApprovalView } from "../approvals/view.js";
import { visibleText } from "../approvals/visible-text.js";
import { isoTime } from "../clients/timestamps.js";
import { html, type SafeHtml } from "./html.js";
import { spendPath, stepPath } from "../deps/console-links.js";

/**
 * The console's pages (docs/approvals.md §2), each built through {@link html} only: every value
 * from a service, a request or a person is escaped there. Plain forms and tables; no script (the
 * CSP allows none), no inline style.
 */

/** Who is signed in, as the page header shows it, with the CSRF token of the sign-out form. */
export interface SignedIn {
  readonly tenant: string;
  readonly principal: string;
  readonly csrf: string;
}

/** What every page needs: where the console is mounted as this browser reached it, and who is signed in. */
export interface PageFrame {
  /** The console's path as the browser sees it, e.g. `/approvals` (or `/prefix/approvals` behind CHAOS_CORE_PUBLIC_URL). */
  readonly base: string;
  readonly signedIn?: SignedIn;
}

/** Free text as a person must read it: hidden characters written as escapes. */
const text = (s: string) => visibleText(s).text;

const time = (t: Timestamp | undefined) => isoTime(t) ?? "";

/**
 * A whole page around `body`. `refreshTo`: a path of the console this page moves on to by itself
 * (an HTML refresh, no script), as after an OAuth sign-in.
 */
export function page(frame: PageFrame, title: string, body: SafeHtml, refreshTo?: string): SafeHtml {
  const who = frame.signedIn;
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
${refreshTo ? html`<meta http-equiv="refresh" content="0; url=${refreshTo}">` : ""}
<title>${title} · Chaos Core approvals</title>
<link rel="stylesheet" href="${frame.base}/console.css">
</head>
<body>
<header>
<a class="brand" href="${frame.base}">Chaos Core approvals</a>
${
  who
    ? html`<span class="who">Signed in as <strong>${text(who.principal)}</strong> in tenant <strong>${who.tenant}</strong></span>
<form method="post" action="${frame.base}/sign-out"><input type="hidden" name="csrf" value="${who.csrf}"><button type="submit">Sign out</button></form>`
    : ""
}
</header>
<main>
${body}
</main>
</body>
</html>
`;
}

/** What the sign-in page offers. */
export interface SignInOptions {
  /** The form's token: the HMAC of the pre-session cookie's value. */
  readonly csrf: string;
  /** Whether this server has API keys (else nobody signs in with one). */
  readonly apiKeys: boolean;
  /** Whether the standalone operator's one-time links are served here. */
  readonly operatorLinks: boolean;
  /** The OAuth issuer people may sign in through ("Sign in with …"); absent when not configured. */
  readonly oauthIssuer?: string;
  /** The approval page (`/step/<id>`, `/spend/<seq>`) to go on to once signed in. */
  readonly next?: string;
  /** Why the person is here again (a session ended), or what went wrong with the last try. */
  readonly notice?: string;
  readonly error?: string;
}

/**
 * The name a sign-in button gives an issuer: its host (and port), which is what a person
 * recognises in the address bar once there; the whole issuer is written beside it.
 */
export function issuerName(issuer: string): string {
  return new URL(issuer).host;
}

/** `GET /approvals/sign-in`: "Sign in with <issuer>" when configured, and an approver's API key in a password field. */
export function signInPage(frame: PageFrame, o: SignInOptions): SafeHtml {
  const oauth = o.oauthIssuer
    ? html`<p><a class="button sign-in-oauth" href="${frame.base}/sign-in/oauth${o.next ? `?next=${encodeURIComponent(o.next)}` : ""}">Sign in with ${issuerName(o.oauthIssuer)}</a></p>
<p class="muted">Through the authorization server <code>${o.oauthIssuer}</code>. Only an account it grants the <code>chaoscore:approver</code> scope
is signed in here; an agent's token is refused.</p>`
    : "";
  const operator = o.operatorLinks
    ? html`<p>The operator at this machine signs in without a key: run <code>chaos-core approvals console</code> (with
<code>--tenant</code> for another tenant than <code>default</code>) and open the one-time link it prints, within 120 seconds.</p>`
    : "";
  const form = o.apiKeys
    ? html`<form class="sign-in" method="post" action="${frame.base}/sign-in">
<input type="hidden" name="csrf" value="${o.csrf}">
${o.next ? html`<input type="hidden" name="next" value="${o.next}">` : ""}
<label for="api_key">Approver API key</label>
<input id="api_key" name="api_key" type="password" autocomplete="off" required>
<button type="submit">Sign in</button>
</form>
<p class="muted">Only a key holding the <code>approver</code> role signs in here; an agent's key is refused, so no agent approves its own request.</p>`
    : o.oauthIssuer
      ? ""
      : html`<p>This server has no API keys (<code>CHAOS_CORE_API_KEYS_FILE</code>), so nobody signs in with one.</p>`;
  return page(
    frame,
    "Sign in",
    html`<h1>Sign in to review approvals</h1>
${o.notice ? html`<p class="warning">${o.notice}</p>` : ""}
${o.error ? html`<p class="error" role="alert">${o.error}</p>` : ""}
${oauth}
${o.oauthIssuer && o.apiKeys ? html`<h2>Or with an API key</h2>` : ""}
${form}
${operator}`,
  );
}

/**
 * The page an OAuth sign-in ends on: who is signed in, until when, and a refresh (and a link) on
 * to the list or the approval the person was going to.
 */
export function signedInPage(frame: PageFrame, o: { readonly href: string; readonly until?: Date }): SafeHtml {
  const who = frame.signedIn;
  return page(
    frame,
    "Signed in",
    html`<h1 class="signed-in">Signed in as ${text(who?.principal ?? "")} in tenant ${who?.tenant ?? ""}</h1>
${o.until ? html`<p class="muted">Until ${o.until.toISOString()} at the latest, when the access token you signed in with expires; then sign in again.</p>` : ""}
<p><a href="${o.href}">Continue</a></p>`,
    o.href,
  );
}

/** `GET /approvals/sign-in/link?t=…`: a button, so fetching the link alone signs nobody in. */
export function linkSignInPage(frame: PageFrame, o: { readonly token: string; readonly csrf: string; readonly tenant: string; readonly expiresAt: Date }): SafeHtml {
  return page(
    frame,
    "Sign in as operator",
    html`<h1>Sign in as the operator</h1>
<p>This one-time link signs you in to tenant <strong>${o.tenant}</strong> as <strong>operator</strong>, the
principal every answer given at this machine is recorded under. It can be used once, until ${o.expiresAt.toISOString()}.</p>
<form method="post" action="${frame.base}/sign-in/link">
<input type="hidden" name="t" value="${o.token}">
<input type="hidden" name="csrf" value="${o.csrf}">
<button type="submit">Sign in as operator</button>
</form>`,
  );
}

/** A page that says what happened and where to go, for refusals and failures. */
export function messagePage(frame: PageFrame, title: string, message: string, next?: { readonly href: string; readonly label: string }): SafeHtml {
  return page(
    frame,
    title,
    html`<h1>${title}</h1>
<p class="error" role="alert">${message}</p>
${next ? html`<p><a href="${next.href}">${next.label}</a></p>` : ""}`,
  );
}

function stepRow(frame: PageFrame, a: ApprovalSummary): SafeHtml {
  return html`<tr>
<td>step</td>
<td><code>${text(a.capability)}</code></td>
<td>${a.risk || "unspecified"}</td>
<td>${text(a.requestedBy)}</td>
<td>${time(a.createdAt)}</td>
<td>${time(a.expiresAt)}</td>
<td><a href="${frame.base}${stepPath(a.approvalId)}">Review</a></td>
</tr>`;
}

function spendRow(frame: PageFrame, r: SpendRequest): SafeHtml {
  return html`<tr>
<td>${r.kind === "finance" ? "finance" : "spend"}</td>
<td><code>${r.tool ? text(r.tool) : "evaluate_spend_gate"}</code> <span class="muted">policy ${text(r.policy)}</span></td>
<td>spend</td>
<td>${text(r.requestedBy)}</td>
<td>${r.createdAt}</td>
<td>${r.expiresAt}</td>
<td><a href="${frame.base}${spendPath(r.requestSeq)}">Review</a></td>
</tr>`;
}

/** `GET /approvals`: what waits for a person in the signed-in tenant, soonest to expire first. */
export function listPage(frame: PageFrame, o: { readonly steps: readonly ApprovalSummary[]; readonly spends?: readonly SpendRequest[] }): SafeHtml {
  const rows = [...o.steps.map((a) => stepRow(frame, a)), ...(o.spends ?? []).map((r) => spendRow(frame, r))];
  const table =
    rows.length > 0
      ? html`<table>
<thead><tr><th>Kind</th><th>Capability or tool</th><th>Risk</th><th>Requested by</th><th>Created</th><th>Expires</th><th></th></tr></thead>
<tbody>
${rows}
</tbody>
</table>`
      : html`<p>Nothing waits for a person in this tenant.</p>`;
  return page(
    frame,
    "Pending approvals",
    html`<h1>Pending approvals</h1>
<p class="muted">${o.steps.length} step approval(s) and ${o.spends?.length ?? 0} spend request(s) wait for a person in tenant
${frame.signedIn?.tenant ?? ""}. Open one to see every argument of the call as it would run.</p>
${o.spends ? "" : html`<p class="warning">This server has no audit ledger configured: spend requests cannot be listed.</p>`}
${table}
<p><a href="${frame.base}">Refresh</a></p>`,
  );
}

function hiddenNote(escaped: readonly string[]): SafeHtml | string {
  return escaped.length > 0 ? html`<p class="escaped">Hidden characters, written above as escapes: ${escaped.join(", ")}</p>` : "";
}

/** How an approval that is no longer pending was answered, as its page names it. */
export interface ApprovalAnswered {
  /** Who answered, as recorded (`alice (console)`, `operator`). */
  readonly by: string;
  /** The channel that answered, canonical name. */
  readonly channel?: string;
  /** The ledger entry of the answer, when known. */
  readonly ledgerSeq?: bigint;
}

/** What an approval's page says besides the view itself. */
export interface ApprovalPageOptions {
  /** The page's own path under the console (`/step/<id>`, `/spend/<seq>`): its answer form posts there. */
  readonly path: string;
  /** Whether it still waits for an answer. */
  readonly pending: boolean;
  /** Its status as its service names it (`approved`, `DECLINED`), for an approval no longer pending. */
  readonly status: string;
  /** Who answered it, once answered. */
  readonly answered?: ApprovalAnswered;
  /** The channels policy accepts for it (canonical names) and the rule that chose them. */
  readonly channels: readonly string[];
  readonly channelsRule?: string;
  /** The ways to answer it that exist here other than this page. */
  readonly ways: readonly ApprovalChannelOption[];
  /** Whether the signed-in principal is the one who asked: another person must answer. */
  readonly ownRequest: boolean;
  /** False when the stored arguments do not hash to what was recorded (a spend): nothing can be approved on them. */
  readonly argumentsVerified?: boolean;
  /** Whether a rejection takes a reason (a spend's decline is shown to the requester). */
  readonly rejectReason?: boolean;
}

/** The other ways to answer, with each exact call or command. */
function waysList(ways: readonly ApprovalChannelOption[]): SafeHtml {
  return ways.length > 0
    ? html`<ul class="ways">${ways.map((w) => html`<li><strong>${w.channel}</strong>: ${w.how}${w.command ? html` <pre>${w.command}</pre>` : ""}</li>`)}</ul>`
    : html`<p>No other way to answer it exists on this server.</p>`;
}

/** The page's Approve / Reject form: posted to the approval's own path with the session's CSRF token. */
function answerForm(frame: PageFrame, o: ApprovalPageOptions): SafeHtml {
  return html`<form class="answer" method="post" action="${frame.base}${o.path}">
<input type="hidden" name="csrf" value="${frame.signedIn?.csrf ?? ""}">
${
  o.rejectReason
    ? html`<label for="reason">Reason, if you reject (at most 500 characters; the requester is shown it)</label>
<input id="reason" name="reason" type="text" maxlength="500" autocomplete="off">`
    : ""
}
<p class="muted">You answer as <strong>${text(frame.signedIn?.principal ?? "")}</strong> through the console; the answer is recorded in the audit ledger and is final.</p>
<button type="submit" name="decision" value="approve" class="approve">Approve</button>
<button type="submit" name="decision" value="reject" class="reject">Reject</button>
</form>`;
}

/** Why no answer form is shown (or the form), then the other ways. */
function answerSection(frame: PageFrame, o: ApprovalPageOptions): SafeHtml {
  if (!o.pending) {
    const a = o.answered;
    const by = a ? html`, answered by <strong>${text(a.by)}</strong>${a.channel ? html` through <strong>${a.channel}</strong>` : ""}${a.ledgerSeq ? html` in ledger entry ${a.ledgerSeq}` : ""}` : "";
    return html`<p>This approval is <strong>${o.status}</strong>${by}: nothing is left to answer.</p>`;
  }
  const ways = html`<p>Other ways to answer it here:</p>
${waysList(o.ways)}`;
  if (o.ownRequest) {
    return html`<p class="warning">You asked for this; another approver must answer.</p>
${ways}`;
  }
  if (!o.channels.includes("console")) {
    return html`<p class="warning">Policy does not accept an answer on this page for it: it accepts ${o.channels.join(", ")}${o.channelsRule ? ` (rule ${o.channelsRule})` : ""}.</p>
${ways}`;
  }
  if (o.argumentsVerified === false) {
    return html`<p class="error" role="alert">The stored arguments do not hash to the args_hash the ledger entry recorded: nothing can be approved on them.</p>`;
  }
  return html`${answerForm(frame, o)}
${ways}`;
}

/**
 * `GET /approvals/step/<id>`, `GET /approvals/spend/<seq>`: the approval as a person reviews it,
 * whole (§5): every argument by path, the facts (policy decision and rule, requester and
 * session, created and expiry, the channels policy allows) and the hash the answer binds to.
 */
export function approvalPage(frame: PageFrame, view: ApprovalView, o: ApprovalPageOptions): SafeHtml {
  const hidden = view.rows.filter((r) => r.escaped.length > 0).length + view.facts.filter((f) => f.escaped.length > 0).length;
  const warning =
    hidden > 0
      ? html`<p class="warning">WARNING: ${hidden} value(s) below hold characters that would display differently from what runs
(invisible, control or text-direction characters); they are written as escapes and named under their value.</p>`
      : "";
  const rows = view.rows.map(
    (r) => html`<tr><th scope="row"><code>${r.path === "" ? "(the whole value)" : r.path}</code></th><td class="value"><pre>${r.value}</pre>${hiddenNote(r.escaped)}</td></tr>`,
  );
  const facts = view.facts.map((f) => html`<tr><th scope="row">${f.label}</th><td class="value">${f.value}${hiddenNote(f.escaped)}</td></tr>`);
  return page(
    frame,
    view.kind === "step" ? `Approval ${view.id}` : `Spend request ${view.id}`,
    html`<h1>${view.title}</h1>
${warning}
<h2>${view.rowsTitle} (${view.rows.length} value(s), each as JSON text, strings in quotes)</h2>
<table class="rows">
<tbody>
${rows}
</tbody>
</table>
<h2>Facts</h2>
<table class="facts">
<tbody>
${facts}
<tr><th scope="row">${view.hash.label}</th><td class="value"><code>${view.hash.value}</code></td></tr>
</tbody>
</table>
<h2>Answer</h2>
${answerSection(frame, o)}
<p><a href="${frame.base}${o.path}">Refresh</a> · <a href="${frame.base}">All pending approvals</a></p>`,
  );
}

/** What an answer given on the console did. */
export interface AnswerResult {
  /** `Approved as alice (console)`, `Rejected as alice (console)`. */
  readonly headline: string;
  /** What follows from it, each its own paragraph (who collects it, what runs). */
  readonly lines: readonly string[];
  /** The ledger entry that records the answer; absent without a ledger. */
  readonly entry?: Entry;
  /** The approval's page. */
  readonly path: string;
}

/**
 * An event as indented JSON, each line's hidden characters written as escapes (JSON itself
 * escapes control characters inside strings, so its line breaks are all its own).
 */
function eventText(event: unknown): string {
  return JSON.stringify(event, null, 2)
    .split("\n")
    .map((line) => text(line))
    .join("\n");
}

/** The ledger entry as the result page shows it: seq, ts, type, who, content_hash and the event itself. */
function entryTable(e: Entry): SafeHtml {
  const event = e.event ?? {};
  const type = typeof event["type"] === "string" ? event["type"] : "";
  return html`<table class="entry">
<tbody>
<tr><th scope="row">seq</th><td class="value"><code>${e.seq}</code></td></tr>
<tr><th scope="row">ts</th><td class="value"><code>${e.ts}</code></td></tr>
<tr><th scope="row">type</th><td class="value"><code>${text(type)}</code></td></tr>
<tr><th scope="row">principal</th><td class="value"><code>${text(e.principal)}</code></td></tr>
<tr><th scope="row">session</th><td class="value"><code>${text(e.session)}</code></td></tr>
<tr><th scope="row">content_hash</th><td class="value"><code>${e.contentHash}</code></td></tr>
<tr><th scope="row">event</th><td class="value"><pre>${eventText(event)}</pre></td></tr>
</tbody>
</table>`;
}

/** The page a POST answer ends on: what happened, and the ledger entry that records it. */
export function answerResultPage(frame: PageFrame, o: AnswerResult): SafeHtml {
  return page(
    frame,
    o.headline,
    html`<h1 class="result">${o.headline}</h1>
${o.lines.map((l) => html`<p>${l}</p>`)}
<h2>The ledger entry that records it</h2>
${o.entry ? entryTable(o.entry) : html`<p class="muted">This server keeps no audit ledger: the answer is in the in-process audit only.</p>`}
<p><a href="${frame.base}${o.path}">This approval</a> · <a href="${frame.base}">All pending approvals</a></p>`,
  );
}

/** What a refused answer's page says. */
export interface AnswerRefusal {
  /** What the refusal means for the person, in plain words. */
  readonly headline: string;
  /** The refusing service's own message (its code first), as it recorded it. */
  readonly message: string;
  /** The ways to answer that exist here, when someone else (or another channel) can still answer. */
  readonly ways?: readonly ApprovalChannelOption[];
  readonly path: string;
}

/** A refused answer: nothing was approved or rejected. */
export function answerRefusedPage(frame: PageFrame, o: AnswerRefusal): SafeHtml {
  return page(
    frame,
    "Answer refused",
    html`<h1>Answer refused</h1>
<p class="error" role="alert">${o.headline}</p>
<p class="muted">${o.message}</p>
${o.ways ? html`<p>Who can answer it, and how:</p>
${waysList(o.ways)}` : ""}
<p><a href="${frame.base}${o.path}">This approval</a> · <a href="${frame.base}">All pending approvals</a></p>`,
  );
}
