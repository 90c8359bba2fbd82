import type { RequestHandler, Response } from "express";
import type { McpLocals } from "./http-errors.js";
import { envelopeRefusal, refusalResponse, screenMessage, type Refusal, type RequestId } from "./incoming.js";

/*
 * A POST body on its way in, before the SDK sees it: screened as raw bytes, its head kept so a
 * body too large to parse still gets its id back, its envelope checked once parsed.
 */

/** Thrown from the body parser's verify hook: body-parser hands it, unchanged, to the error handler. */
export class BodyRefused extends Error {
  readonly type = "chaoscore.body.refused";
  readonly status = 400;

  constructor(readonly refusal: Refusal) {
    super(refusal.error.message);
  }
}

/** Screens the raw bytes before body-parser decodes them (a bad byte would become U+FFFD) and keeps the id. */
export function screenBody(_req: unknown, res: Response, body: Buffer): void {
  const screened = screenMessage(body);
  if (screened.id !== undefined) (res.locals as McpLocals).requestId = screened.id;
  if (screened.refusal) throw new BodyRefused(screened.refusal);
}

/**
 * How much of a body is kept to find the id of a request too large to parse: clients write
 * `{"jsonrpc":"2.0","id":…` first, so the id sits in the first bytes of even a huge body.
 */
const BODY_HEAD_BYTES = 64 * 1024;
/** How long a body declared too large may take to send that head before it is refused anyway. */
const BODY_HEAD_WAIT_MS = 1000;

/**
 * Keeps the first {@link BODY_HEAD_BYTES} of a POST body beside body-parser, so its 413 can echo
 * the request's id. A body whose Content-Length is over the limit is refused by body-parser before
 * it reads a byte: its head is read here first.
 */
export function keepBodyHead(maxBodyBytes: number): RequestHandler {
  return (req, res, next) => {
    const head: Buffer[] = [];
    let kept = 0;
    const keep = (chunk: Buffer) => {
      head.push(chunk);
      kept += chunk.length;
      if (kept >= BODY_HEAD_BYTES) req.off("data", keep);
    };
    (res.locals as McpLocals).bodyHead = () => Buffer.concat(head).subarray(0, BODY_HEAD_BYTES);
    // body-parser's own listener joins in this same tick, before the first chunk is emitted.
    req.on("data", keep);
    if (!(Number(req.headers["content-length"]) > maxBodyBytes)) return next();
    const done = () => {
      clearTimeout(timer);
      req.off("data", check).off("end", done).off("error", done);
      req.off("data", keep);
      req.pause();
      next();
    };
    const check = () => {
      if (kept >= BODY_HEAD_BYTES) done();
    };
    const timer = setTimeout(done, BODY_HEAD_WAIT_MS);
    req.on("data", check).on("end", done).on("error", done);
  };
}

/** The id in the head of a body too large to parse, when it is there. */
export function idInBodyHead(res: Response): RequestId | undefined {
  const head = (res.locals as McpLocals).bodyHead?.();
  if (!head || head.length === 0) return undefined;
  return screenMessage(head).id;
}

/** A parsed body that is no JSON-RPC message is refused here, where its id is known, not by the SDK with id null. */
export const jsonRpcEnvelope: RequestHandler = (req, res, next) => {
  const refusal = req.body === undefined ? undefined : envelopeRefusal(req.body, (res.locals as McpLocals).requestId);
  if (refusal) return void res.status(400).json(refusalResponse(refusal));
  next();
};
