import type { AuthConfig } from '../config/config-schema.js';
import { brokerError, BrokerError } from '../errors/catalog.js';
import { subjectFromClaims, type Authenticator } from './authenticator.js';
import { bearerToken } from './authenticator.js';
import { TokenCache } from './token-cache.js';
import type { Subject } from './subject.js';

/** Tuning of a {@link TokenInfoAuthenticator} that has no config key; the defaults suit production. */
export interface TokenInfoAuthenticatorOptions {
  /** Most token-info answers remembered. Default 10,000. */
  readonly cacheMaxEntries?: number;
  /** Longest a rejection (401) is remembered (ms), at most `auth.tokeninfo.cacheTtlMs`. Default 1000. */
  readonly negativeTtlMs?: number;
  /** The clock, epoch milliseconds (tests). Default `Date.now`. */
  readonly now?: () => number;
}

/** What the token-info service said of a token: its subject, or why it is refused. */
type Verdict = { readonly subject: Subject; readonly ttlMs: number } | { readonly refused: string };

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function checkUrl(text: string, key: string): void {
  if (!URL.canParse(text)) throw new Error(`config key "${key}" is not a URL: ${JSON.stringify(text)}`);
  const url = new URL(text);
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error(`config key "${key}" must be an http(s) URL, not ${url.protocol}`);
}

/**
 * Auth mode `tokeninfo` (docs/security.md "Authentication: who is asking"): asks a token-info service about each
 * bearer token with `GET <url>` and the header `Authorization: Bearer <token>`.
 *
 * The service answers 200 with a JSON object of claims, either token-info style (`uid`, `scope`,
 * `expires_in` seconds) or RFC 7662 introspection style (`active`, `sub`, `exp` epoch seconds); the
 * subject comes from the claims by `auth.subjectClaim` and `auth.attributeClaims`. An `active` other
 * than `true`, an `exp` in the past or an `expires_in` ≤ 0 refuse the token; so do the statuses 400,
 * 401 and 403. Any other status, a body that is not a JSON object, a network error or no answer within
 * `auth.tokeninfo.timeoutMs` make the request answer 503 AUTH_UNAVAILABLE.
 *
 * Answers are remembered per token and service URL for `auth.tokeninfo.cacheTtlMs` (never past the
 * token's `exp`/`expires_in`; 0 = not at all), refusals for min(that, 1 s); 503s are not remembered.
 * Concurrent requests with the same token share one call. While `useRemote()` is true and
 * `auth.tokeninfo.remoteUrl` is set (the feature `remote_tokeninfo`), `remoteUrl` is asked instead of `url`.
 */
export class TokenInfoAuthenticator implements Authenticator {
  private readonly cache: TokenCache<Verdict>;
  private readonly negativeTtlMs: number;
  private readonly now: () => number;
  /** Lookups under way by cache key, so concurrent requests with one token share a call. */
  private readonly pending = new Map<string, Promise<Verdict>>();
  private closed = false;

  /**
   * @param config `auth` config; `tokeninfo.url` must be set
   * @param useRemote asked per lookup: true = ask `tokeninfo.remoteUrl` (when set) instead of `tokeninfo.url`
   * @throws Error (at construction, so startup stops) when `tokeninfo.url` is empty or either URL is not http(s)
   */
  constructor(
    private readonly config: AuthConfig,
    private readonly useRemote: () => boolean,
    options: TokenInfoAuthenticatorOptions = {},
  ) {
    const { tokeninfo } = config;
    if (tokeninfo.url === '') throw new Error('config key "auth.tokeninfo.url" must be set when auth.mode is tokeninfo');
    checkUrl(tokeninfo.url, 'auth.tokeninfo.url');
    if (tokeninfo.remoteUrl !== '') checkUrl(tokeninfo.remoteUrl, 'auth.tokeninfo.remoteUrl');
    this.now = options.now ?? Date.now;
    this.negativeTtlMs = Math.min(options.negativeTtlMs ?? 1000, tokeninfo.cacheTtlMs);
    this.cache = new TokenCache(options.cacheMaxEntries ?? config.tokenCacheEntries ?? 10_000, this.now);
  }

  /**
   * @param authorization the request's `Authorization` header
   * @returns the token's subject
   * @throws BrokerError UNAUTHORIZED (401) for a missing header, another scheme, a malformed token, a
   *   token the service refuses (400/401/403) or calls inactive or expired, or claims without the subject
   *   claim; AUTH_UNAVAILABLE (503) when the service cannot be reached, times out, answers another status
   *   or a body that is not a JSON object
   */
  async authenticate(authorization: string | undefined): Promise<Subject> {
    const token = bearerToken(authorization);
    const url = this.useRemote() && this.config.tokeninfo.remoteUrl !== '' ? this.config.tokeninfo.remoteUrl : this.config.tokeninfo.url;
    const key = `${url} ${token}`;
    const verdict = this.cache.get(key) ?? (await this.lookupOnce(key, url, token));
    if ('refused' in verdict) throw brokerError('UNAUTHORIZED', { reason: verdict.refused });
    return verdict.subject;
  }

  /** Forgets remembered answers; lookups under way end within `tokeninfo.timeoutMs` and are not remembered. */
  close(): void {
    this.closed = true;
    this.cache.clear();
  }

  /** Answers remembered now (tests, metrics). */
  get cachedAnswers(): number {
    return this.cache.size;
  }

  private lookupOnce(key: string, url: string, token: string): Promise<Verdict> {
    const underWay = this.pending.get(key);
    if (underWay !== undefined) return underWay;
    const lookup = this.lookup(url, token)
      .then((verdict) => {
        if (!this.closed) this.cache.set(key, verdict, 'refused' in verdict ? this.negativeTtlMs : verdict.ttlMs);
        return verdict;
      })
      .finally(() => this.pending.delete(key));
    this.pending.set(key, lookup);
    return lookup;
  }

  private async lookup(url: string, token: string): Promise<Verdict> {
    const { timeoutMs } = this.config.tokeninfo;
    let body: unknown;
    try {
      const response = await fetch(url, { headers: { authorization: `Bearer ${token}`, accept: 'application/json' }, signal: AbortSignal.timeout(timeoutMs) });
      if (response.status === 400 || response.status === 401 || response.status === 403) {
        await response.body?.cancel();
        return { refused: `The token-info service refuses the token (HTTP ${response.status}).` };
      }
      if (response.status !== 200) {
        await response.body?.cancel();
        throw this.unavailable(`answered HTTP ${response.status}`);
      }
      const text = await response.text();
      try {
        body = JSON.parse(text);
      } catch {
        throw this.unavailable('answered 200 with a body that is not JSON');
      }
    } catch (err) {
      if (err instanceof BrokerError) throw err;
      if (err instanceof DOMException && err.name === 'TimeoutError') throw this.unavailable(`did not answer within ${timeoutMs} ms`);
      const code = err instanceof Error && isObject(err.cause) && typeof err.cause.code === 'string' ? err.cause.code : 'network error';
      throw this.unavailable(`cannot be reached (${code})`);
    }
    if (!isObject(body)) throw this.unavailable('answered 200 with JSON that is not an object of claims');
    return this.verdictOf(body);
  }

  /** Judges a 200 answer's claims (RFC 7662 `active`/`exp`, token-info `expires_in`). */
  private verdictOf(claims: Record<string, unknown>): Verdict {
    if (Object.hasOwn(claims, 'active') && claims.active !== true) return { refused: 'The token-info service says the token is not active.' };
    let ttlMs = this.config.tokeninfo.cacheTtlMs;
    const exp = Object.hasOwn(claims, 'exp') ? claims.exp : undefined;
    if (typeof exp === 'number') {
      const left = exp * 1000 - this.now();
      if (left <= 0) return { refused: 'The token has expired.' };
      ttlMs = Math.min(ttlMs, left);
    }
    const expiresIn = Object.hasOwn(claims, 'expires_in') ? claims.expires_in : undefined;
    if (typeof expiresIn === 'number') {
      if (expiresIn <= 0) return { refused: 'The token has expired.' };
      ttlMs = Math.min(ttlMs, expiresIn * 1000);
    }
    const subject = subjectFromClaims(claims, this.config);
    if (subject === undefined) return { refused: `The token-info answer has no "${this.config.subjectClaim}" claim naming the subject.` };
    return { subject, ttlMs };
  }

  private unavailable(what: string): BrokerError {
    return brokerError('AUTH_UNAVAILABLE', { service: 'token-info service', failure: what, action: 'checked' });
  }
}
