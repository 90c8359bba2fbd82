import { z } from "zod";

/**
 * The model arguments of the synthetic finance reference tools, mirrored from the ledger's
 * definitions (services/ledger/src/domain/reference-tools.ts) so a malformed call is refused
 * here with the field named. The ledger validates again and is the authority: the receipt's
 * argument hash is computed there, over exactly what this edge forwards (nothing is added or
 * defaulted on the way).
 */
export const REFERENCE_TOOL_NAMES = ["place_equity_order", "wire_treasury_transfer", "rebalance_portfolio"] as const;
export type ReferenceToolName = (typeof REFERENCE_TOOL_NAMES)[number];

const confidence = z
  .number()
  .min(0)
  .max(1)
  .optional()
  .describe("The agent's confidence, 0..1; the spend policy may set a minimum, or require it (require_confidence)");
const money = z.number().max(1e12);

const equityShape = {
  symbol: z.string().regex(/^[A-Z][A-Z0-9.]{0,9}$/, "must be an upper-case ticker such as AAPL").describe("Ticker, e.g. AAPL"),
  side: z.enum(["BUY", "SELL"]),
  quantity: z.number().int().positive().max(1e9).describe("Whole shares"),
  notional: money.describe("Order value; the equity spend policy gates it"),
  confidence,
};

const wireShape = {
  beneficiary: z.string().min(1).max(200).describe("Who receives the transfer"),
  amount: money.describe("Amount in currency; the wire spend policy gates it"),
  currency: z.string().regex(/^[A-Z]{3}$/, "must be an ISO 4217 code such as USD"),
  memo: z.string().max(500).optional(),
  confidence,
};

const rebalanceShape = {
  portfolio_id: z.string().min(1).max(100),
  targets: z
    .array(z.strictObject({ asset: z.string().min(1).max(20), weight: z.number().min(0).max(1) }))
    .min(1)
    .max(100)
    .refine((t) => Math.abs(t.reduce((s, x) => s + x.weight, 0) - 1) < 1e-9, "weights must sum to 1")
    .describe("Target weights per asset, summing to 1"),
  notional: money.describe("Value moved; the rebalance spend policy gates it"),
  confidence,
};

/** One reference tool as the edge describes it. */
export interface ReferenceToolSpec {
  readonly name: ReferenceToolName;
  readonly title: string;
  /** The receipt's resource. */
  readonly scope: string;
  /** The operator spend policy that gates it. */
  readonly spendPolicy: string;
  /** What it pretends to do, for the description. */
  readonly summary: string;
  /** The model arguments (without `receipt`). */
  readonly shape: z.ZodRawShape;
}

export const REFERENCE_TOOL_SPECS: { readonly [K in ReferenceToolName]: ReferenceToolSpec } = {
  place_equity_order: {
    name: "place_equity_order",
    title: "Place equity order (synthetic)",
    scope: "trading:equities:place",
    spendPolicy: "equity",
    summary: "Place a synthetic equity order (scope trading:equities:place, spend policy equity)",
    shape: equityShape,
  },
  wire_treasury_transfer: {
    name: "wire_treasury_transfer",
    title: "Wire treasury transfer (synthetic)",
    scope: "treasury:wire",
    spendPolicy: "wire",
    summary:
      "Send a synthetic treasury wire (scope treasury:wire, spend policy wire). A wire always needs a person's " +
      "approval: its policy's approval threshold is 0, so every request is HITL_REQUIRED",
    shape: wireShape,
  },
  rebalance_portfolio: {
    name: "rebalance_portfolio",
    title: "Rebalance portfolio (synthetic)",
    scope: "portfolio:rebalance",
    spendPolicy: "rebalance",
    summary: "Rebalance a synthetic portfolio to target weights (scope portfolio:rebalance, spend policy rebalance)",
    shape: rebalanceShape,
  },
};

/** The strict arguments schema of a reference tool: an extra key is refused, never silently hashed or dropped. */
export function referenceArgs(name: ReferenceToolName): z.ZodObject {
  return z.strictObject(REFERENCE_TOOL_SPECS[name].shape);
}
