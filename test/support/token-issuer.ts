import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, exportSPKI, generateKeyPair, SignJWT, type JWK, type KeyLike } from 'jose';

/** Signature algorithms the issuer has keys for. */
export type IssuerAlgorithm = 'RS256' | 'ES256';

/** What a {@link TokenIssuer} endpoint does with a request. */
export type EndpointBehaviour = 'answer' | 'fail' | 'hang';

/** The endpoints of a {@link TokenIssuer}, as counted by {@link TokenIssuer.calls}. */
export type Endpoint = 'jwks' | 'tokeninfo' | 'remote';

/** A JWT to sign; every field is optional. */
export interface TokenSpec {
  /** `sub`; default `alice`. Set `null` to leave the claim out. */
  readonly sub?: string | null;
  /** Further claims (they win over the ones below). */
  readonly claims?: Readonly<Record<string, unknown>>;
  /** Seconds from now to `exp` (negative = already expired); default 3600. `null` = no `exp`. */
  readonly expiresInSeconds?: number | null;
  /** Seconds from now to `nbf`; default none. */
  readonly notBeforeSeconds?: number;
  readonly issuer?: string;
  readonly audience?: string;
  /** Default RS256. */
  readonly alg?: IssuerAlgorithm;
  /** Default the key's own kid (`rs-1`, `es-1`). */
  readonly kid?: string;
  /** Sign with a key the JWKS does not publish (a forged token, same `kid`). */
  readonly forged?: boolean;
}

interface KeyPair {
  readonly kid: string;
  readonly privateKey: KeyLike;
  readonly publicKey: KeyLike;
}

/** The issuer `iss` of tokens signed by default. */
export const TEST_ISSUER = 'https://issuer.test';

/**
 * A local identity provider for tests (docs/security.md "Authentication: who is asking"): real key pairs (RS256 `rs-1`, ES256
 * `es-1`, plus an unpublished RS256 key for forged tokens), a JWKS document at {@link jwksUrl}, and a
 * token-info service at {@link tokeninfoUrl} and {@link remoteTokeninfoUrl} that maps opaque tokens
 * registered with {@link registerOpaque} to their claims (unknown tokens answer 401). Every endpoint
 * counts its calls and can be switched to answer 500 (`fail`) or never answer (`hang`).
 * Everything listens on a free 127.0.0.1 port; {@link close} ends open connections.
 */
export class TokenIssuer {
  /** Opaque token → the token-info endpoints' answer to it. */
  private readonly opaque = new Map<string, { readonly status: number; readonly body: Readonly<Record<string, unknown>> | string }>();
  private readonly counts = new Map<Endpoint, number>();
  private readonly behaviours = new Map<Endpoint, EndpointBehaviour>();
  /** Answer delay of the token-info endpoints (ms), to hold lookups in flight. */
  tokeninfoDelayMs = 0;

  private constructor(
    private readonly server: http.Server,
    private readonly keys: Readonly<Record<IssuerAlgorithm, KeyPair>>,
    private readonly rogue: KeyPair,
    /** `http://127.0.0.1:<port>` */
    readonly url: string,
  ) {}

  /** Generates the keys and starts the HTTP server on a free loopback port. */
  static async start(): Promise<TokenIssuer> {
    const pair = async (alg: IssuerAlgorithm, kid: string): Promise<KeyPair> => ({ kid, ...(await generateKeyPair(alg, { extractable: true })) });
    const keys = { RS256: await pair('RS256', 'rs-1'), ES256: await pair('ES256', 'es-1') };
    const rogue = await pair('RS256', 'rs-1');
    const jwks = { keys: await Promise.all(Object.entries(keys).map(async ([alg, k]): Promise<JWK> => ({ ...(await exportJWK(k.publicKey)), kid: k.kid, alg, use: 'sig' }))) };
    const server = http.createServer();
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    const { port } = server.address() as AddressInfo;
    const issuer = new TokenIssuer(server, keys, rogue, `http://127.0.0.1:${port}`);
    server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => issuer.handle(req, res, jwks));
    return issuer;
  }

  /** The JWKS document (both public keys). */
  /**
   * The environment of a broker node that authenticates with this issuer's JWTs (audience `broker`), with
   * `initialAdmins` (the `auth.initialAdmins` JSON; default the user `admin`).
   */
  brokerEnv(initialAdmins = '[{"data_type":"user","value":"admin"}]'): Record<string, string> {
    return { BROKER_AUTH_MODE: 'jwt', BROKER_AUTH_JWT_JWKS_URL: this.jwksUrl, BROKER_AUTH_JWT_ISSUER: TEST_ISSUER, BROKER_AUTH_JWT_AUDIENCE: 'broker', BROKER_AUTH_INITIAL_ADMINS: initialAdmins };
  }

  get jwksUrl(): string {
    return `${this.url}/.well-known/jwks.json`;
  }

  /** The local token-info endpoint. */
  get tokeninfoUrl(): string {
    return `${this.url}/tokeninfo`;
  }

  /** A second token-info endpoint with the same tokens, counted apart (the `remote_tokeninfo` URL). */
  get remoteTokeninfoUrl(): string {
    return `${this.url}/remote/tokeninfo`;
  }

  /** The PEM (SPKI) public key of an algorithm's key pair. */
  publicKeyPem(alg: IssuerAlgorithm = 'RS256'): Promise<string> {
    return exportSPKI(this.keys[alg].publicKey);
  }

  /** Signs a JWT as described by `spec` (defaults: RS256, `sub` alice, `iss` {@link TEST_ISSUER}, 1 h). */
  async sign(spec: TokenSpec = {}): Promise<string> {
    const alg = spec.alg ?? 'RS256';
    const pair = spec.forged === true ? this.rogue : this.keys[alg];
    const now = Math.floor(Date.now() / 1000);
    const payload: Record<string, unknown> = { iss: spec.issuer ?? TEST_ISSUER, iat: now };
    if (spec.sub !== null) payload.sub = spec.sub ?? 'alice';
    if (spec.audience !== undefined) payload.aud = spec.audience;
    if (spec.expiresInSeconds !== null) payload.exp = now + (spec.expiresInSeconds ?? 3600);
    if (spec.notBeforeSeconds !== undefined) payload.nbf = now + spec.notBeforeSeconds;
    Object.assign(payload, spec.claims);
    return new SignJWT(payload).setProtectedHeader({ alg: spec.forged === true ? 'RS256' : alg, kid: spec.kid ?? pair.kid, typ: 'JWT' }).sign(pair.privateKey);
  }

  /**
   * Registers a fresh opaque token (random text) with the token-info endpoints' answer to it.
   * @param body the claims (sent as JSON), or raw body text
   * @param status the answer's HTTP status
   */
  registerOpaque(body: Readonly<Record<string, unknown>> | string, status = 200): string {
    const token = randomBytes(24).toString('base64url');
    this.opaque.set(token, { status, body });
    return token;
  }

  /** Makes the token-info endpoints answer 401 for `token` from now on. */
  revoke(token: string): void {
    this.opaque.delete(token);
  }

  /** Sets what an endpoint does: `answer` (default), `fail` (HTTP 500) or `hang` (never answers). */
  set(endpoint: Endpoint, behaviour: EndpointBehaviour): void {
    this.behaviours.set(endpoint, behaviour);
  }

  /** Requests an endpoint received so far. */
  calls(endpoint: Endpoint): number {
    return this.counts.get(endpoint) ?? 0;
  }

  /** Sets every endpoint back to `answer`, no delay, and the counts to zero. */
  reset(): void {
    this.behaviours.clear();
    this.counts.clear();
    this.tokeninfoDelayMs = 0;
  }

  /** Stops the server, ending open (also hanging) connections. */
  async close(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeAllConnections();
    await closed;
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse, jwks: { keys: JWK[] }): void {
    const path = new URL(req.url ?? '/', this.url).pathname;
    const endpoint: Endpoint | undefined = path === '/.well-known/jwks.json' ? 'jwks' : path === '/tokeninfo' ? 'tokeninfo' : path === '/remote/tokeninfo' ? 'remote' : undefined;
    if (endpoint === undefined) return send(res, 404, { error: 'not_found' });
    this.counts.set(endpoint, this.calls(endpoint) + 1);
    const behaviour = this.behaviours.get(endpoint) ?? 'answer';
    if (behaviour === 'hang') return;
    if (behaviour === 'fail') return send(res, 500, { error: 'server_error' });
    if (endpoint === 'jwks') return send(res, 200, jwks);
    const match = /^Bearer (\S+)$/.exec(req.headers.authorization ?? '');
    const known = match?.[1] === undefined ? undefined : this.opaque.get(match[1]);
    const answer = (): void => (known === undefined ? send(res, 401, { error: 'invalid_token' }) : send(res, known.status, known.body));
    if (this.tokeninfoDelayMs > 0) setTimeout(answer, this.tokeninfoDelayMs);
    else answer();
  }
}

function send(res: http.ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' }).end(typeof body === 'string' ? body : JSON.stringify(body));
}
