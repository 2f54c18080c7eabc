/**
 * Whether the HTTP engine can run natively here. hyper-express serves HTTP through uWebSockets.js, a
 * native addon shipped as one binary per platform, CPU and Node ABI (`binaries/uws_<platform>_<arch>_<abi>.node`).
 * When the binary for this Node is missing or does not load, or `UWS_USE_FALLBACK` is set, the addon's
 * loader prints a warning and falls back to a pure Node.js implementation: slower, and without the native
 * listen options (exclusive port) and response methods the broker relies on (src/http/engine-workarounds.ts).
 * The node refuses to start in that case instead of running degraded (src/main.ts).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

/** Node's ABI version (`process.versions.modules`) → Node major, for the messages. */
const NODE_OF_ABI: Readonly<Record<string, string>> = { '83': '14', '93': '16', '108': '18', '115': '20', '120': '21', '127': '22', '131': '23', '137': '24' };

/** What decides whether the engine runs natively. */
export interface EngineEnvironment {
  /** `process.platform`, e.g. `linux`. */
  readonly platform: string;
  /** `process.arch`, e.g. `x64`. */
  readonly arch: string;
  /** `process.versions.modules`, e.g. `115` for Node 20. */
  readonly abi: string;
  /** `process.version`, e.g. `v20.19.0`. */
  readonly nodeVersion: string;
  /** The value of `UWS_USE_FALLBACK`, if set. */
  readonly fallbackFlag?: string;
  /** The uWebSockets.js package version, for the message. */
  readonly engineVersion: string;
  /** The file names in the package's `binaries` directory. */
  readonly binaries: readonly string[];
  /** Why the binary for this platform, CPU and ABI failed to load, when it is present and did. */
  readonly loadError?: string;
}

/** The binary file uWebSockets.js loads for `platform`, `arch` and `abi`. */
export function binaryName(platform: string, arch: string, abi: string): string {
  return `uws_${platform}_${arch}_${abi}.node`;
}

/** `Node 20 (ABI 115)`, or `ABI <n>` when the ABI is not a known Node major. */
function nodeOfAbi(abi: string): string {
  const major = NODE_OF_ABI[abi];
  return major === undefined ? `ABI ${abi}` : `Node ${major} (ABI ${abi})`;
}

/**
 * Decides whether the engine would fall back (see the module comment).
 * @returns undefined when it runs natively, else the message the node exits with
 */
export function engineProblem(env: EngineEnvironment): string | undefined {
  const engine = `the HTTP engine (uWebSockets.js ${env.engineVersion}, under hyper-express)`;
  if (env.fallbackFlag !== undefined && /^(true|1)$/i.test(env.fallbackFlag)) {
    return `UWS_USE_FALLBACK=${env.fallbackFlag} is set: ${engine} would run its slower Node.js fallback instead of its native binary. Unset UWS_USE_FALLBACK.`;
  }
  const wanted = binaryName(env.platform, env.arch, env.abi);
  if (!env.binaries.includes(wanted)) {
    const prefix = `uws_${env.platform}_${env.arch}_`;
    const here = env.binaries
      .filter((file) => file.startsWith(prefix) && file.endsWith('.node'))
      .map((file) => file.slice(prefix.length, -'.node'.length))
      .sort((a, b) => Number(a) - Number(b))
      .map(nodeOfAbi);
    const shipped = here.length > 0 ? `it ships binaries for ${here.join(', ')} on ${env.platform}-${env.arch}` : `it ships no binary for ${env.platform}-${env.arch}`;
    return (
      `${engine} has no native binary for Node ${env.nodeVersion} (ABI ${env.abi}) on ${env.platform}-${env.arch} and would fall back to a slower ` +
      `Node.js implementation; ${shipped}. Run the broker on Node 20 (package.json "engines").`
    );
  }
  if (env.loadError !== undefined) {
    return `${engine}'s native binary ${wanted} does not load: ${env.loadError}. It needs glibc 2.27 or later (not musl/Alpine); the broker does not run on the slower Node.js fallback.`;
  }
  return undefined;
}

/**
 * Reads this process's {@link EngineEnvironment}: the uWebSockets.js package hyper-express resolves, its
 * binaries, and whether the one for this Node loads (loading it here is what the package does on import;
 * Node caches it, so the engine later gets the same module).
 * @throws Error when hyper-express or uWebSockets.js is not installed (`npm ci` was not run)
 */
export function readEngineEnvironment(): EngineEnvironment {
  const require = createRequire(import.meta.url);
  const fromEngine = createRequire(require.resolve('hyper-express'));
  const packageDir = path.dirname(fromEngine.resolve('uWebSockets.js/package.json'));
  const { version } = JSON.parse(readFileSync(path.join(packageDir, 'package.json'), 'utf8')) as { version: string };
  const binariesDir = path.join(packageDir, 'binaries');
  let binaries: string[] = [];
  try {
    binaries = readdirSync(binariesDir);
  } catch {
    binaries = [];
  }
  const base: EngineEnvironment = {
    platform: process.platform,
    arch: process.arch,
    abi: process.versions.modules,
    nodeVersion: process.version,
    ...(process.env.UWS_USE_FALLBACK === undefined ? {} : { fallbackFlag: process.env.UWS_USE_FALLBACK }),
    engineVersion: version,
    binaries,
  };
  const wanted = binaryName(base.platform, base.arch, base.abi);
  if (!binaries.includes(wanted)) return base;
  try {
    fromEngine(path.join(binariesDir, wanted));
    return base;
  } catch (err) {
    return { ...base, loadError: err instanceof Error ? err.message : String(err) };
  }
}

/**
 * The message the node exits with when the HTTP engine would not run natively, or undefined.
 * (docs/getting-started.md "Requirements": Node.js 20)
 */
export function checkHttpEngine(): string | undefined {
  let env: EngineEnvironment;
  try {
    env = readEngineEnvironment();
  } catch (err) {
    return `the HTTP engine is not installed (${err instanceof Error ? err.message : String(err)}); run npm ci`;
  }
  return engineProblem(env);
}
