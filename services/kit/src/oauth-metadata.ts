/**
 * The RFC 8414 metadata locations of an issuer, then the OpenID Connect ones, in the order the
 * MCP authorization spec has clients try them.
 */
export function authorizationServerMetadataUrls(issuer: string): string[] {
  const url = new URL(issuer);
  const path = url.pathname === "/" ? "" : url.pathname.replace(/\/$/, "");
  if (!path) return [`${url.origin}/.well-known/oauth-authorization-server`, `${url.origin}/.well-known/openid-configuration`];
  return [
    `${url.origin}/.well-known/oauth-authorization-server${path}`,
    `${url.origin}/.well-known/openid-configuration${path}`,
    `${url.origin}${path}/.well-known/openid-configuration`,
  ];
}

/**
 * The first answer from the issuer's metadata locations ({@link authorizationServerMetadataUrls},
 * in order) that is not a 404 and not a failure to connect, with where it came from; the caller
 * checks it (its `issuer` character for character, the endpoints it needs). Redirects are refused:
 * the metadata is the issuer's own. Rejects naming every location's problem when none answers.
 */
export async function fetchAuthorizationServerMetadata(
  issuer: string,
  options: { readonly fetch?: typeof fetch; readonly timeoutMs: number },
): Promise<{ readonly url: string; readonly res: Response }> {
  const get = options.fetch ?? fetch;
  const problems: string[] = [];
  for (const url of authorizationServerMetadataUrls(issuer)) {
    let res: Response;
    try {
      res = await get(url, { headers: { accept: "application/json" }, redirect: "error", signal: AbortSignal.timeout(options.timeoutMs) });
    } catch (err) {
      problems.push(`${url}: ${(err as Error).message}`);
      continue;
    }
    if (res.status === 404) {
      await res.body?.cancel();
      problems.push(`${url}: HTTP 404`);
      continue;
    }
    return { url, res };
  }
  throw new Error(`no authorization server metadata for ${issuer} (${problems.join("; ")})`);
}
