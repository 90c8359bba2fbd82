/**
 * Who is calling, as a verified credential says. The edge never takes a tenant from a header,
 * an argument or a session id: only from one of these.
 */
export interface Identity {
  readonly tenant: string;
  readonly principal: string;
}

/**
 * The identity of stdio and of unauthenticated loopback HTTP: whoever can reach the process
 * locally is its one user.
 */
export const LOCAL_IDENTITY: Identity = Object.freeze({ tenant: "default", principal: "local" });
