import { Buffer } from "node:buffer";
import type { ApprovalView } from "./view.js";

/**
 * The longest message (UTF-8 bytes) a form-mode elicitation carries. A client shows the message
 * in a dialog; a longer request is not offered as a form at all, because cutting it would ask a
 * person to approve what they were not shown.
 */
export const MAX_FORM_MESSAGE_BYTES = 16 * 1024;

/** True when `message` fits in a form-mode elicitation ({@link MAX_FORM_MESSAGE_BYTES}). */
export function fitsForm(message: string): boolean {
  return Buffer.byteLength(message, "utf8") <= MAX_FORM_MESSAGE_BYTES;
}

function marked(escaped: readonly string[]): string[] {
  return escaped.length > 0 ? [`    ^ hidden characters, written above as escapes: ${escaped.join(", ")}`] : [];
}

/**
 * A view as plain text, for an elicitation message and the operator CLI: the title, one line per
 * argument (`path = value`), a line under each value that held hidden characters naming them,
 * the facts and the hash. Every value is whole; nothing is cut or summarised.
 */
export function renderText(view: ApprovalView): string {
  const hidden = view.rows.filter((r) => r.escaped.length > 0).length + view.facts.filter((f) => f.escaped.length > 0).length;
  const lines = [view.title];
  if (hidden > 0) {
    lines.push(
      `WARNING: ${hidden} value(s) below hold characters that would display differently from what runs ` +
        "(invisible, control or text-direction characters); they are written as escapes and named under their line.",
    );
  }
  lines.push(`${view.rowsTitle} (${view.rows.length} value(s), each as JSON text, strings in quotes):`);
  for (const row of view.rows) {
    lines.push(`  ${row.path === "" ? "(the whole value)" : row.path} = ${row.value}`, ...marked(row.escaped));
  }
  for (const f of view.facts) lines.push(`${f.label}: ${f.value}`, ...marked(f.escaped));
  lines.push(`${view.hash.label}: ${view.hash.value}`);
  return lines.join("\n");
}

/**
 * The first words of the refusal when `message` does not fit a form: the request is never shown
 * cut, so the person is not asked this way; the caller says who can answer instead.
 */
export function tooLongForForm(message: string): string {
  const kib = (Buffer.byteLength(message, "utf8") / 1024).toFixed(1);
  return (
    `the request is too long to show in a form (${kib} KiB; a form carries at most ${MAX_FORM_MESSAGE_BYTES / 1024} KiB) ` +
    "and is never shown cut, so your user was not asked."
  );
}
