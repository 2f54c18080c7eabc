/** Hash slots of a Redis Cluster. */
export const SLOT_COUNT = 16384;

/** CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0), the checksum Redis Cluster hashes keys with. */
const CRC16_TABLE = (() => {
  const table = new Uint16Array(256);
  for (let byte = 0; byte < 256; byte++) {
    let crc = byte << 8;
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    table[byte] = crc;
  }
  return table;
})();

const OPEN = 0x7b; // {
const CLOSE = 0x7d; // }

/**
 * The Redis Cluster hash slot of a key (Redis Cluster specification, "Hash tags"): CRC16 of the key's
 * UTF-8 bytes between the first `{` and the next `}` when that part is non-empty, else of the whole key,
 * modulo {@link SLOT_COUNT}. The same rule as `CLUSTER KEYSLOT`; `keys.ts` builds every key so that the
 * keys of one partition (or one subscription, the registry, the settings) share a slot.
 * @returns 0 .. 16383
 */
export function keySlot(key: string): number {
  let bytes = Buffer.from(key, 'utf8');
  const open = bytes.indexOf(OPEN);
  if (open >= 0) {
    const close = bytes.indexOf(CLOSE, open + 1);
    if (close > open + 1) bytes = bytes.subarray(open + 1, close);
  }
  let crc = 0;
  for (const byte of bytes) crc = ((crc << 8) & 0xffff) ^ (CRC16_TABLE[((crc >> 8) ^ byte) & 0xff] as number);
  return crc % SLOT_COUNT;
}
