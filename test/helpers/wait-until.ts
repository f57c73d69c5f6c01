/**
 * Poll a condition until it holds: the one loop the consumer and broker tests wait with, each file
 * keeping its own timeout and pace.
 */

/**
 * Poll `predicate` every `pollMs` until it holds, or fail after `timeoutMs` with `what`.
 * @example
 * await waitUntil('the message to be acked', () => acked.length === 1, 5000);
 */
export async function waitUntil(
  what: string,
  predicate: () => boolean | Promise<boolean>,
  timeoutMs = 10_000,
  pollMs = 10,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, pollMs));
  }
}
