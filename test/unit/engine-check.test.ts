import { describe, expect, it } from 'vitest';
import { binaryName, engineProblem, readEngineEnvironment, type EngineEnvironment } from '../../src/http/engine-check.js';

/** The binaries uWebSockets.js 20.30 ships for linux-x64: Node 16, 18 and 20. */
const SHIPPED = ['uws_linux_x64_93.node', 'uws_linux_x64_108.node', 'uws_linux_x64_115.node', 'uws_darwin_arm64_115.node'];
const node20: EngineEnvironment = { platform: 'linux', arch: 'x64', abi: '115', nodeVersion: 'v20.19.0', engineVersion: '20.30.0', binaries: SHIPPED };

describe('HTTP engine check', () => {
  it('passes when the binary for this platform, CPU and Node ABI is there and loads', () => {
    expect(engineProblem(node20)).toBeUndefined();
  });

  it('refuses Node 22 (no binary for ABI 127), naming the Node found and the ones shipped', () => {
    const problem = engineProblem({ ...node20, abi: '127', nodeVersion: 'v22.12.0' });
    expect(problem).toContain('no native binary for Node v22.12.0 (ABI 127) on linux-x64');
    expect(problem).toContain('Node 16 (ABI 93), Node 18 (ABI 108), Node 20 (ABI 115) on linux-x64');
    expect(problem).toContain('Node 20');
  });

  it('refuses a platform with no binary at all', () => {
    expect(engineProblem({ ...node20, platform: 'linux', arch: 'ppc64' })).toContain('ships no binary for linux-ppc64');
  });

  it('refuses a binary that is there but does not load (e.g. musl instead of glibc)', () => {
    const problem = engineProblem({ ...node20, loadError: 'Error relocating uws_linux_x64_115.node: __sprintf_chk: symbol not found' });
    expect(problem).toContain('uws_linux_x64_115.node does not load');
    expect(problem).toContain('__sprintf_chk');
  });

  it.each(['1', 'true', 'TRUE', 'True'])('refuses UWS_USE_FALLBACK=%s (the engine would use its fallback on purpose)', (flag) => {
    expect(engineProblem({ ...node20, fallbackFlag: flag })).toContain(`UWS_USE_FALLBACK=${flag}`);
  });

  it('ignores UWS_USE_FALLBACK values the engine ignores', () => {
    expect(engineProblem({ ...node20, fallbackFlag: '0' })).toBeUndefined();
    expect(engineProblem({ ...node20, fallbackFlag: '' })).toBeUndefined();
  });

  it('finds the installed engine and its binary for the Node running the tests', () => {
    const env = readEngineEnvironment();
    expect(env.binaries).toContain(binaryName(process.platform, process.arch, process.versions.modules));
    expect(env.loadError).toBeUndefined();
    expect(engineProblem({ ...env, fallbackFlag: '0' })).toBeUndefined();
  });
});
