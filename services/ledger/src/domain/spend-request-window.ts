/**
 * How long a spend request can be answered and its approval collected (docs/approvals.md §4).
 * A rule of its own, below the requests' store and the webhook events that both reckon with it.
 */
export const SPEND_REQUEST_WINDOW_MS = 24 * 3600 * 1000;
