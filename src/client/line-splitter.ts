/** Incremental cutting of a newline-delimited body into lines, for the stream client (src/client/stream-client.ts). */

const NEWLINE = 0x0a;

/**
 * Cuts newline-delimited bytes into lines as they arrive. Lines are cut at the "\n" byte on the raw
 * bytes — a "\n" byte never occurs inside a multi-byte UTF-8 sequence, so a character split across
 * two chunks is whole once the line is — and handed out without the "\n"; empty lines are skipped.
 */
export class LineSplitter {
  private pending: Buffer[] = [];

  /** Bytes held after the last "\n" seen, waiting for the end of their line. */
  get pendingBytes(): number {
    let n = 0;
    for (const piece of this.pending) n += piece.byteLength;
    return n;
  }

  /** Calls `onLine` with every line `chunk` completes, in order; keeps the bytes after its last "\n". */
  push(chunk: Buffer, onLine: (line: Buffer) => void): void {
    let start = 0;
    let newline = chunk.indexOf(NEWLINE, start);
    while (newline >= 0) {
      const piece = chunk.subarray(start, newline);
      const whole = this.pending.length === 0 ? piece : Buffer.concat([...this.pending, piece]);
      this.pending = [];
      if (whole.byteLength > 0) onLine(whole);
      start = newline + 1;
      newline = chunk.indexOf(NEWLINE, start);
    }
    if (start < chunk.byteLength) this.pending.push(chunk.subarray(start));
  }

  /** The body ended: calls `onLine` with the bytes after the last "\n" (a last line without one), if any. */
  end(onLine: (line: Buffer) => void): void {
    const rest = Buffer.concat(this.pending);
    this.pending = [];
    if (rest.byteLength > 0) onLine(rest);
  }
}
