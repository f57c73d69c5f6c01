/**
 * Whether a store call failed because the application closed the store's client (a shutdown), rather
 * than because the server is unreachable for a while. Retrying the first is pointless: the client will
 * not come back, and a completion retried for the rest of its lease would only hold a shutting-down
 * process up to 30 s. The clients say so only in their own words, so they are matched here, along the
 * `cause` chain the stores wrap them in.
 * @module
 */

/** What each supported client says once the application closed it. */
const CLOSED_MESSAGES = [
  'The client is closed', // node-redis 4 and 5 (ClientClosedError)
  'Connection is closed.', // ioredis, after quit() or disconnect()
  'Cannot use a pool after calling end on the pool', // pg Pool
  'Client was closed and is not queryable', // pg Client
  'The database connection is not open', // better-sqlite3
];

/** True when `error`, or an error in its `cause` chain, says the store's client was closed. */
export function isClosedClientError(error: unknown): boolean {
  let current = error;
  for (let depth = 0; depth < 5 && typeof current === 'object' && current !== null; depth++) {
    const { name, message, cause } = current as {
      name?: unknown;
      message?: unknown;
      cause?: unknown;
    };
    if (name === 'ClientClosedError') return true;
    if (typeof message === 'string' && CLOSED_MESSAGES.includes(message)) return true;
    current = cause;
  }
  return false;
}
