/**
 * Waits until `check` answers true, asking every 50 ms (a condition, not a fixed sleep).
 * @returns ms it took
 * @throws Error naming `what` when `timeoutMs` passed first
 */
export async function eventually(check: () => Promise<boolean>, timeoutMs: number, what: string): Promise<number> {
  const started = Date.now();
  while (!(await check())) {
    if (Date.now() - started > timeoutMs) throw new Error(`not within ${timeoutMs} ms: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return Date.now() - started;
}
