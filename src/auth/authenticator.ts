import type { AuthConfig } from '../config/config-schema.js';
import { brokerError } from '../errors/catalog.js';
import { UNAUTHENTICATED, type Subject } from './subject.js';

/**
 * Turns a request's credentials into a {@link Subject} (docs/security.md "Authentication: who is asking").
 * Runs for every request except `GET /health`, before the handler.
 */
export interface Authenticator {
  /**
   * @param authorization the request's `Authorization` header, if any
   * @returns the subject
   * @throws BrokerError UNAUTHORIZED (401) for a missing, malformed, unverifiable, expired or inactive
   *   token; AUTH_UNAVAILABLE (503) when a token-info service cannot be asked
   */
  authenticate(authorization: string | undefined): Promise<Subject>;
  /** Releases timers and caches. */
  close(): void;
}

/** Auth mode `off`, for development: token checks disabled, every request is `unauthenticated` (docs/security.md "Authentication: who is asking"). */
export class NoAuthentication implements Authenticator {
  private readonly subject = Promise.resolve(UNAUTHENTICATED);

  authenticate(): Promise<Subject> {
    return this.subject;
  }

  close(): void {}
}

/**
 * Builds a subject from verified claims: the id from `auth.subjectClaim`, each data type's values from
 * its claim in `auth.attributeClaims` (a string, or the strings of an array; other claim types are ignored).
 * @returns undefined when the subject claim is missing or not a non-empty string
 */
export function subjectFromClaims(claims: Readonly<Record<string, unknown>>, config: Pick<AuthConfig, 'subjectClaim' | 'attributeClaims'>): Subject | undefined {
  const id = Object.hasOwn(claims, config.subjectClaim) ? claims[config.subjectClaim] : undefined;
  if (typeof id !== 'string' || id.length === 0) return undefined;
  const attributes = new Map<string, string[]>();
  for (const [dataType, claim] of Object.entries(config.attributeClaims)) {
    const value = Object.hasOwn(claims, claim) ? claims[claim] : undefined;
    const values = typeof value === 'string' ? [value] : Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : [];
    if (values.length > 0) attributes.set(dataType, values);
  }
  return { id, attributes };
}

/** RFC 6750 §2.1 `b64token`: the only characters a bearer token may have. */
const B64TOKEN = /^[A-Za-z0-9\-._~+/]+=*$/;

/** Longest bearer token accepted (characters); longer ones are rejected before any verification. */
const MAX_TOKEN_CHARS = 16_384;

/**
 * The token of an `Authorization: Bearer <token>` header (docs/security.md "Authentication: who is asking"). The scheme is
 * matched case-insensitively.
 * @param authorization the request's `Authorization` header, if any
 * @returns the token text
 * @throws BrokerError UNAUTHORIZED (401, with `WWW-Authenticate: Bearer`) when the header is missing,
 *   names another scheme, or the token is empty, too long or not `b64token` characters
 */
export function bearerToken(authorization: string | undefined): string {
  if (authorization === undefined || authorization.trim() === '') throw brokerError('UNAUTHORIZED', { reason: 'No bearer token: send the header "Authorization: Bearer <token>".' });
  const match = /^\s*(\S+)(?:\s+(.*))?$/.exec(authorization);
  const scheme = match?.[1] ?? '';
  if (scheme.toLowerCase() !== 'bearer') throw brokerError('UNAUTHORIZED', { reason: 'The Authorization scheme must be Bearer.' });
  const token = (match?.[2] ?? '').trim();
  if (token === '') throw brokerError('UNAUTHORIZED', { reason: 'The Authorization header has the scheme Bearer but no token.' });
  if (token.length > MAX_TOKEN_CHARS) throw brokerError('UNAUTHORIZED', { reason: `The bearer token is longer than ${MAX_TOKEN_CHARS} characters.` });
  if (!B64TOKEN.test(token)) throw brokerError('UNAUTHORIZED', { reason: 'The bearer token is malformed: it has characters a bearer token cannot have.' });
  return token;
}
