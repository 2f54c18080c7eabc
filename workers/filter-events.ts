/**
 * The worker side of consumer filters (docs/consuming.md "Filters"): stored event texts are parsed and
 * tested against a filter's validator, one flag per event.
 */
import type { ValidateFunction } from 'ajv';

const NEWLINE = 0x0a;

/**
 * Tests each of `count` events against `validate`.
 * @param data the events' stored texts joined by `\n` (JSON text never holds a raw newline)
 * @returns one byte per event, in order: 1 when the event parses and `validate` accepts it, else 0 (a
 *   text that does not parse, which stored events never are, matches nothing); missing texts (fewer
 *   lines than `count`) are 0
 */
export function matchEvents(validate: ValidateFunction, data: Uint8Array, count: number): Uint8Array {
  const flags = new Uint8Array(count);
  const text = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  let position = 0;
  for (let i = 0; i < count && position <= text.length; i++) {
    const newline = text.indexOf(NEWLINE, position);
    const end = newline < 0 ? text.length : newline;
    let event: unknown;
    try {
      event = JSON.parse(text.toString('utf8', position, end));
    } catch {
      position = end + 1;
      continue;
    }
    position = end + 1;
    if (validate(event) === true) flags[i] = 1;
  }
  return flags;
}
