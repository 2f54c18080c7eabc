import type { AuthConfig } from '../config/config-schema.js';
import { NoAuthentication, type Authenticator } from './authenticator.js';
import { JwtAuthenticator } from './jwt-authenticator.js';
import { TokenInfoAuthenticator } from './tokeninfo-authenticator.js';

/**
 * The authenticator of `auth.mode` (docs/security.md "Authentication: who is asking"): `off` → {@link NoAuthentication},
 * `jwt` → {@link JwtAuthenticator}, `tokeninfo` → {@link TokenInfoAuthenticator}.
 * @param config the `auth` config
 * @param options.useRemoteTokeninfo asked per token-info lookup: whether the feature `remote_tokeninfo` is on
 * @throws Error when the mode's keys are unusable (no JWKS URL or key, a PEM that does not parse, a
 *   token-info URL that is not http(s)), so startup stops before the port opens
 */
export function createAuthenticator(config: AuthConfig, options: { useRemoteTokeninfo: () => boolean }): Authenticator {
  switch (config.mode) {
    case 'off':
      return new NoAuthentication();
    case 'jwt':
      return new JwtAuthenticator(config);
    case 'tokeninfo':
      return new TokenInfoAuthenticator(config, options.useRemoteTokeninfo);
  }
}
