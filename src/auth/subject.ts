/**
 * Who is asking (docs/security.md "Authentication: who is asking"). Every request is authenticated into a subject before its
 * handler runs: the constant {@link UNAUTHENTICATED} in auth mode `off`, a verified token's claims in
 * `jwt` and `tokeninfo` modes.
 */
export interface Subject {
  /** The subject's id (the token's subject claim): `published_by` of its events, the name the blacklist's `*_APP` entries match. */
  readonly id: string;
  /**
   * The subject's authorization attributes by data type (docs/security.md "Authorization: what a subject
   * may do"), e.g. `user → ["alice"]`, `team → ["payments", "search"]`; mapped from token claims by `auth.attributeClaims`.
   */
  readonly attributes: ReadonlyMap<string, readonly string[]>;
}

/** The subject of every request in auth mode `off`: id `unauthenticated`, attribute `user`/`unauthenticated`. */
export const UNAUTHENTICATED: Subject = Object.freeze({
  id: 'unauthenticated',
  attributes: new Map([['user', ['unauthenticated']]]),
});
