import HyperExpress from 'hyper-express';
import { describe, expect, it } from 'vitest';
import { receiveDeclaredBody } from '../../src/http/engine-workarounds.js';

/**
 * `receiveDeclaredBody` (src/http/engine-workarounds.ts): the body hyper-express collected, without the
 * copy its own `buffer()` makes. The integration tests publish through it; here, what it returns.
 */
describe('receiveDeclaredBody', () => {
  it('uses the collector of the installed hyper-express (an upgrade that drops it fails here)', () => {
    const prototype = HyperExpress.Request.prototype as unknown as Record<string, unknown>;
    expect(typeof prototype._body_parser_get_received_data).toBe('function');
  });

  it('wraps the collected array instead of copying it', async () => {
    const collected = new Uint8Array(Buffer.from('[{"a":1}]'));
    const request = { _body_parser_get_received_data: () => Promise.resolve(collected), buffer: () => Promise.reject(new Error('not used')) };
    const body = await receiveDeclaredBody(request as unknown as HyperExpress.Request);
    expect(body.toString()).toBe('[{"a":1}]');
    expect(body.buffer).toBe(collected.buffer);
  });

  it('falls back to buffer() when the engine has no collector', async () => {
    const request = { buffer: () => Promise.resolve(Buffer.from('[]')) };
    expect((await receiveDeclaredBody(request as unknown as HyperExpress.Request)).toString()).toBe('[]');
  });
});
