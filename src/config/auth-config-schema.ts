/**
 * The `auth` section of the configuration schema (docs/security.md "Authentication: who is asking"), with
 * {@link AuthConfig} derived from it. Part of `configSchema` in `config-schema.ts`; `description`
 * feeds the README's configuration table.
 */
import { Type, type Static } from '@sinclair/typebox';
import { Closed, OneOf, positiveInt, type DeepReadonly } from './schema-parts.js';

/** Signature algorithms `auth.jwt.algorithms` may list. */
const JWT_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA'] as const;

/** Local verification of bearer JWTs (auth mode `jwt`). */
const jwtSchema = Type.Object(
  {
    /** JWKS document URL; empty = use `publicKey`. */
    jwksUrl: Type.String({ description: 'JWKS URL the token keys come from (mode `jwt`); empty = `auth.jwt.publicKey`' }),
    /** A PEM public key (SPKI) used when `jwksUrl` is empty. */
    publicKey: Type.String({ description: 'PEM (SPKI) public key verifying tokens when no JWKS URL is set' }),
    /** Required `iss` (empty = not checked). */
    issuer: Type.String({ description: 'required `iss` claim (empty = not checked)' }),
    /** Required `aud` (empty = not checked). */
    audience: Type.String({ description: 'required `aud` claim (empty = not checked)' }),
    algorithms: Type.Array(OneOf(JWT_ALGORITHMS), { minItems: 1, description: 'accepted signature algorithms (JSON array)' }),
    clockToleranceSeconds: Type.Integer({ minimum: 0, maximum: 300, description: 'leeway for `exp`/`nbf`' }),
  },
  Closed,
);

/** Remote introspection of bearer tokens (auth mode `tokeninfo`). */
const tokeninfoSchema = Type.Object(
  {
    /** The local token-info URL (GET with the bearer token). */
    url: Type.String({ description: 'token-info URL (mode `tokeninfo`): GET with the bearer token, answers the claims as JSON' }),
    /** The remote token-info URL, used while the feature `remote_tokeninfo` is on (empty = always `url`). */
    remoteUrl: Type.String({ description: 'token-info URL used instead while the feature `remote_tokeninfo` is on (empty = `url`)' }),
    cacheTtlMs: Type.Integer({ minimum: 0, maximum: 300000, description: 'how long a token-info answer is reused (0 = never)' }),
    timeoutMs: positiveInt('a token-info call that takes longer answers 503'),
  },
  Closed,
);

/** JSON Schema of the `auth` section: authentication and authorization (docs/security.md). */
export const authConfigSchema = Type.Object(
  {
    /** `off`: every request is the subject `unauthenticated`; `jwt`: verified bearer tokens; `tokeninfo`: remote introspection. */
    mode: OneOf(['off', 'jwt', 'tokeninfo'], {
      description: '`off`: no token checks, every request is the subject `unauthenticated` (development); `jwt`: bearer tokens verified locally; `tokeninfo`: bearer tokens introspected by a token-info service',
    }),
    /** The claim that names the subject (its id). */
    subjectClaim: Type.String({ minLength: 1, description: 'the token claim that names the subject (`published_by`, blacklist `*_APP` names)' }),
    /** Authorization data type → the claim holding the subject's values of it (a string or an array of strings). */
    attributeClaims: Type.Unsafe<Record<string, string>>({
      type: 'object',
      minProperties: 1,
      additionalProperties: { type: 'string', minLength: 1 },
      propertyNames: { pattern: '^[a-z][a-z0-9_]*$' },
      description: 'authorization data type → token claim holding the subject\'s values of it (JSON object); its keys are the data types attributes may use',
    }),
    /** The administrators stored on first start when none are (all three lists); empty = `user`/`unauthenticated` (mode `off` only). */
    initialAdmins: Type.Array(Type.Object({ data_type: Type.String({ minLength: 1 }), value: Type.String({ minLength: 1 }) }, Closed), {
      description: 'administrators (JSON array of attributes) stored for all three admin lists when Redis holds none; empty = `user`/`unauthenticated`, allowed only in mode `off`',
    }),
    jwt: jwtSchema,
    tokeninfo: tokeninfoSchema,
  },
  Closed,
);

/** Authentication and authorization (docs/security.md): the `auth` section, derived from {@link authConfigSchema}. */
export type AuthConfig = DeepReadonly<Static<typeof authConfigSchema>> & {
  /**
   * Verified tokens kept (`caches.tokenEntries`; not a key of the section: `createApp` sets it from
   * that key, absent in tests = 10,000).
   */
  readonly tokenCacheEntries?: number;
};
