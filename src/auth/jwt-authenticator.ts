import { createPublicKey, type KeyObject } from 'node:crypto';
import { createRemoteJWKSet, errors as jose, jwtVerify, type JWTPayload, type JWTVerifyGetKey, type JWTVerifyOptions } from 'jose';
import type { AuthConfig } from '../config/config-schema.js';
import { brokerError, BrokerError } from '../errors/catalog.js';
import { bearerToken, subjectFromClaims, type Authenticator } from './authenticator.js';
import { TokenCache } from './token-cache.js';
import type { Subject } from './subject.js';


/** Tuning of a {@link JwtAuthenticator} that has no config key; the defaults suit production. */
export interface JwtAuthenticatorOptions {
  /** How long a JWKS download may take before the request answers 503 (ms). Default 2000. */
  readonly jwksTimeoutMs?: number;
  /** Most verified tokens remembered. Default 10,000. */
  readonly cacheMaxEntries?: number;
  /** Longest a verified token is remembered (ms); it is never remembered past its `exp`. Default 60,000; 0 = no cache. */
  readonly cacheMaxTtlMs?: number;
  /** The clock, epoch milliseconds (tests). Default `Date.now`. */
  readonly now?: () => number;
}

/** A failure to obtain the verification keys (JWKS endpoint down, slow or answering garbage). */
class KeySourceUnavailable extends Error {
  override readonly name = 'KeySourceUnavailable';
}

/** Fewest bits of an RSA key that verifies RS or PS signatures (RFC 7518 §3.3, §3.5). */
const MIN_RSA_BITS = 2048;

/** Key errors that concern the token (its `kid` or `alg`), not the availability of the JWKS endpoint. */
const TOKEN_KEY_ERRORS = [jose.JWKSNoMatchingKey, jose.JWKSMultipleMatchingKeys, jose.JOSEAlgNotAllowed, jose.JOSENotSupported];

/** The PS algorithm of an RSA-PSS key bound to a hash (its parameters name it). */
const PSS_ALGORITHM_OF_HASH: Readonly<Record<string, string>> = { sha256: 'PS256', 'sha-256': 'PS256', sha384: 'PS384', 'sha-384': 'PS384', sha512: 'PS512', 'sha-512': 'PS512' };

/**
 * The signature algorithms a public key can verify, by key type (RFC 7518 §3, RFC 8037); an RSA-PSS key
 * whose parameters bind it to one hash verifies only that one's PS algorithm.
 */
function algorithmsOfKey(key: KeyObject): readonly string[] {
  switch (key.asymmetricKeyType) {
    case 'rsa':
      return ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512'];
    case 'rsa-pss': {
      const hash = key.asymmetricKeyDetails?.hashAlgorithm;
      if (hash === undefined) return ['PS256', 'PS384', 'PS512'];
      const bound = PSS_ALGORITHM_OF_HASH[hash.toLowerCase()];
      return bound === undefined ? [] : [bound];
    }
    case 'ec': {
      const curve = key.asymmetricKeyDetails?.namedCurve;
      return curve === 'prime256v1' ? ['ES256'] : curve === 'secp384r1' ? ['ES384'] : curve === 'secp521r1' ? ['ES512'] : [];
    }
    case 'ed25519':
    case 'ed448':
      return ['EdDSA'];
    default:
      return [];
  }
}

/**
 * Auth mode `jwt` (docs/security.md "Authentication: who is asking"): verifies `Authorization: Bearer <jwt>`
 * locally with `jose` against the keys of `auth.jwt.jwksUrl` (downloaded on first use, kept 10 minutes,
 * reloaded at most every 30 s for an unknown `kid`) or, when that is empty, the PEM key
 * `auth.jwt.publicKey`. Checks the signature, the algorithm (`auth.jwt.algorithms`), `exp`/`nbf` with
 * `auth.jwt.clockToleranceSeconds` of leeway, and `iss`/`aud` when configured; the subject comes from
 * the claims by `auth.subjectClaim` and `auth.attributeClaims`.
 *
 * Verified tokens are remembered by their text (at most 10,000, oldest evicted first) until
 * min(token `exp`, 60 s), so a producer publishing at a high rate with one token pays one signature
 * check per minute, not one per request.
 */
export class JwtAuthenticator implements Authenticator {
  private readonly keySource: { readonly jwks: JWTVerifyGetKey } | { readonly key: KeyObject };
  private readonly verifyOptions: JWTVerifyOptions;
  private readonly cache: TokenCache<Subject>;
  private readonly cacheMaxTtlMs: number;
  private readonly now: () => number;
  /** Whether a clock was given (then `exp`/`nbf` are checked against it too). */
  private readonly ownClock: boolean;
  private verified = 0;

  /**
   * @param config `auth` config; `jwt.jwksUrl` or `jwt.publicKey` must be set
   * @throws Error (at construction, so startup stops) when neither is set, the JWKS URL is not an
   *   http(s) URL, the PEM key does not parse or is an RSA key under 2048 bits, or none of `jwt.algorithms` fits the PEM key
   */
  constructor(
    private readonly config: AuthConfig,
    options: JwtAuthenticatorOptions = {},
  ) {
    const { jwt } = config;
    this.now = options.now ?? Date.now;
    this.ownClock = options.now !== undefined;
    this.cacheMaxTtlMs = options.cacheMaxTtlMs ?? 60_000;
    this.cache = new TokenCache(options.cacheMaxEntries ?? config.tokenCacheEntries ?? 10_000, this.now);
    let algorithms = [...jwt.algorithms];
    if (jwt.jwksUrl !== '') {
      const url = URL.canParse(jwt.jwksUrl) ? new URL(jwt.jwksUrl) : undefined;
      if (url === undefined) throw new Error(`config key "auth.jwt.jwksUrl" is not a URL: ${JSON.stringify(jwt.jwksUrl)}`);
      if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error(`config key "auth.jwt.jwksUrl" must be an http(s) URL, not ${url.protocol}`);
      this.keySource = { jwks: this.unavailableOnFailure(createRemoteJWKSet(url, { timeoutDuration: options.jwksTimeoutMs ?? 2000 })) };
    } else if (jwt.publicKey !== '') {
      let key: KeyObject;
      try {
        // A key given in an environment variable may carry its line breaks as the two characters `\n`.
        key = createPublicKey({ key: jwt.publicKey.replaceAll('\\n', '\n'), format: 'pem' });
      } catch {
        throw new Error('config key "auth.jwt.publicKey" is not a PEM public key (-----BEGIN PUBLIC KEY-----)');
      }
      const bits = key.asymmetricKeyDetails?.modulusLength;
      if (bits !== undefined && bits < MIN_RSA_BITS) {
        throw new Error(`config key "auth.jwt.publicKey" is an RSA key of ${bits} bits; RS and PS signatures need at least ${MIN_RSA_BITS} (RFC 7518 §3.3)`);
      }
      const fitting = algorithmsOfKey(key);
      algorithms = algorithms.filter((alg) => fitting.includes(alg));
      if (algorithms.length === 0) {
        throw new Error(`config key "auth.jwt.publicKey" is a ${key.asymmetricKeyType ?? 'unknown'} key, which verifies none of auth.jwt.algorithms [${jwt.algorithms.join(', ')}]`);
      }
      this.keySource = { key };
    } else {
      throw new Error('config key "auth.jwt.jwksUrl" or "auth.jwt.publicKey" must be set when auth.mode is jwt');
    }
    this.verifyOptions = {
      algorithms,
      clockTolerance: jwt.clockToleranceSeconds,
      ...(jwt.issuer !== '' ? { issuer: jwt.issuer } : {}),
      ...(jwt.audience !== '' ? { audience: jwt.audience } : {}),
    };
  }

  /**
   * @param authorization the request's `Authorization` header
   * @returns the token's subject
   * @throws BrokerError UNAUTHORIZED (401) for a missing header, another scheme, a malformed token, an
   *   unknown `kid`, a disallowed algorithm, a bad signature, an expired or not-yet-valid token, a wrong
   *   `iss`/`aud` or a missing subject claim; AUTH_UNAVAILABLE (503) when the JWKS endpoint cannot be
   *   reached, times out or answers something other than a key set
   */
  async authenticate(authorization: string | undefined): Promise<Subject> {
    const token = bearerToken(authorization);
    const cached = this.cache.get(token);
    if (cached !== undefined) return cached;
    const payload = await this.verify(token);
    const subject = subjectFromClaims(payload, this.config);
    if (subject === undefined) throw brokerError('UNAUTHORIZED', { reason: `The token has no "${this.config.subjectClaim}" claim naming its subject.` });
    const untilExpiry = typeof payload.exp === 'number' ? payload.exp * 1000 - this.now() : Number.POSITIVE_INFINITY;
    this.cache.set(token, subject, Math.min(untilExpiry, this.cacheMaxTtlMs));
    return subject;
  }

  close(): void {
    this.cache.clear();
  }

  /** Verified tokens remembered now (tests, metrics). */
  get cachedTokens(): number {
    return this.cache.size;
  }

  /** Tokens verified (signature checked) so far, cache hits not counted (tests, metrics). */
  get verifications(): number {
    return this.verified;
  }

  private async verify(token: string): Promise<JWTPayload> {
    this.verified++;
    const options: JWTVerifyOptions = this.ownClock ? { ...this.verifyOptions, currentDate: new Date(this.now()) } : this.verifyOptions;
    try {
      const { payload } = 'jwks' in this.keySource ? await jwtVerify(token, this.keySource.jwks, options) : await jwtVerify(token, this.keySource.key, options);
      return payload;
    } catch (err) {
      throw this.toBrokerError(err);
    }
  }

  /** Wraps a JWKS key getter so that failures to obtain the key set are told apart from token problems. */
  private unavailableOnFailure(jwks: JWTVerifyGetKey): JWTVerifyGetKey {
    return async (header, token) => {
      try {
        return await jwks(header, token);
      } catch (err) {
        if (TOKEN_KEY_ERRORS.some((type) => err instanceof type)) throw err;
        throw new KeySourceUnavailable(
          err instanceof jose.JWKSTimeout
            ? 'did not answer in time'
            : err instanceof jose.JWKSInvalid
              ? 'answered an invalid key set'
              : err instanceof jose.JOSEError
                ? `answered badly (${err.message})`
                : `cannot be reached (${(err as NodeJS.ErrnoException).code ?? 'network error'})`,
        );
      }
    };
  }

  private toBrokerError(err: unknown): BrokerError {
    if (err instanceof KeySourceUnavailable) return brokerError('AUTH_UNAVAILABLE', { service: 'JWKS endpoint', failure: err.message, action: 'verified' });
    if (err instanceof jose.JWTExpired) return brokerError('UNAUTHORIZED', { reason: 'The token has expired.' });
    if (err instanceof jose.JWTClaimValidationFailed) return brokerError('UNAUTHORIZED', { reason: `The token's claims do not verify: ${err.message}.` });
    if (err instanceof jose.JWSSignatureVerificationFailed) return brokerError('UNAUTHORIZED', { reason: 'The token signature does not verify.' });
    if (err instanceof jose.JWKSNoMatchingKey) return brokerError('UNAUTHORIZED', { reason: 'No key of the key set matches the token (its "kid" and "alg").' });
    if (err instanceof jose.JWKSMultipleMatchingKeys) return brokerError('UNAUTHORIZED', { reason: 'Several keys of the key set match the token; it needs a "kid".' });
    if (err instanceof jose.JOSEAlgNotAllowed || err instanceof jose.JOSENotSupported) return brokerError('UNAUTHORIZED', { reason: `The token's signature algorithm is not accepted (accepted: ${(this.verifyOptions.algorithms ?? []).join(', ')}).` });
    if (err instanceof jose.JOSEError) return brokerError('UNAUTHORIZED', { reason: `The token is not a valid JWT: ${err.message}.` });
    return brokerError('UNAUTHORIZED', { reason: 'The token is not a valid JWT.' });
  }
}
