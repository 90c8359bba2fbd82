import type { Request, RequestHandler } from "express";
import { html } from "../console/html.js";

/** What the page says about this server. */
export interface HomePageOptions {
  /** The server's version, as `initialize` reports it. */
  readonly version: string;
  /** Whether /mcp needs `Authorization: Bearer <API key>`. */
  readonly apiKeys: boolean;
  /**
   * The authorization server whose access tokens /mcp also accepts (OAuth clients discover it
   * from the Protected Resource Metadata); absent without OAuth.
   */
  readonly oauthIssuer?: string;
  /** Whether the approval console is served at /approvals. */
  readonly console?: boolean;
}

/** The endpoint as the browser reached this server: the same Host works for an MCP client. */
function endpointUrl(req: Request): string {
  const host = req.headers.host ?? `${req.socket.localAddress?.includes(":") ? `[${req.socket.localAddress}]` : req.socket.localAddress}:${req.socket.localPort}`;
  return `${req.protocol}://${host}/mcp`;
}

/** The page itself, rendered on the server; no script, no inline style (the CSP allows neither). */
export function renderHomePage(url: string, options: HomePageOptions) {
  const header = "Authorization: Bearer YOUR_API_KEY";
  const claude = options.apiKeys
    ? `claude mcp add --transport http chaos-core ${url} --header "${header}"`
    : `claude mcp add --transport http chaos-core ${url}`;
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Chaos Core</title>
</head>
<body>
<h1>Chaos Core ${options.version}</h1>
<p>A governed control plane for AI agents, served over the Model Context Protocol (MCP).
This address is for MCP clients; connect one as below.</p>

<h2>MCP endpoint</h2>
<p><code>${url}</code> (Streamable HTTP)</p>
<p>${
    options.apiKeys
      ? html`Every request needs an API key from the operator: <code>${header}</code>.`
      : options.oauthIssuer
        ? html`Every request needs an OAuth 2.1 access token.`
        : html`No API key needed: this server listens on loopback and serves the local user.`
  }${
    options.oauthIssuer
      ? html` OAuth clients sign in through <code>${options.oauthIssuer}</code> (scope <code>chaoscore:agent</code>)${options.apiKeys ? " instead" : ""};
they find it in the <a href="/.well-known/oauth-protected-resource">Protected Resource Metadata</a>.`
      : ""
  }</p>

<h2>Connect a client</h2>
<ul>
<li>Claude Code: <pre><code>${claude}</code></pre></li>
<li>MCP Inspector: <pre><code>npx @modelcontextprotocol/inspector</code></pre> then choose
transport &ldquo;Streamable HTTP&rdquo; and enter <code>${url}</code>${
    options.apiKeys ? html`, with the header <code>${header}</code>` : ""
  }.</li>
<li>Any other MCP client: add <code>${url}</code> as a Streamable HTTP (remote) server.</li>
</ul>

${
    options.console
      ? html`<h2>Approval console</h2>
<p><a href="/approvals">/approvals</a>: the approvals waiting for a person in your tenant, each shown whole. Sign in with an
approver's API key, or, at this machine, with the one-time link <code>chaos-core approvals console</code> prints.</p>

`
      : ""
  }<h2>Health</h2>
<dl>
<dt><a href="/healthz">/healthz</a></dt>
<dd>Liveness: <code>200 {"status":"ok"}</code> while the process serves HTTP.</dd>
<dt><a href="/readyz">/readyz</a></dt>
<dd>Readiness: <code>200 {"status":"ready","checks":{…}}</code> when policy, memory, cognition, council,
the session store and (when configured) the ledger each answer within 2 s; <code>200 {"status":"degraded"}</code>
when only the session store (Redis, shared by every replica) does not; otherwise
<code>503 {"status":"not ready"}</code> with the failing check's error code.</dd>
</dl>
</body>
</html>
`;
}

/**
 * `GET /`: a small page for the person who opens the server in a browser, naming the MCP
 * endpoint, the health endpoints and how to connect a client. Server-rendered through
 * {@link html}, with a CSP that allows nothing but this origin.
 */
export function homePage(options: HomePageOptions): RequestHandler {
  return (req, res) => {
    res
      .status(200)
      .set({
        "Content-Type": "text/html; charset=utf-8",
        "Content-Security-Policy": "default-src 'self'",
        "X-Content-Type-Options": "nosniff",
      })
      .send(renderHomePage(endpointUrl(req), options).text);
  };
}
