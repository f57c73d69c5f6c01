import { setTimeout as sleep } from 'node:timers/promises';
/**
 * The client side of the chaos test: create N payments, each POSTed three times at once with the same
 * Idempotency-Key and body, every POST retried until it gets a final answer (a 409 in progress, a 503, a
 * 5xx, a refused or reset connection or a timeout all mean "try again after a short backoff").
 * @module
 */

/** What the load saw. */
export interface LoadResult {
  /** Payment id per idempotency key, from the 201 answers. */
  paymentIds: Map<string, string>;
  /** Keys whose three answers did not all carry the same payment (must stay empty). */
  disagreements: string[];
  /** Final answers that were not 201 (must stay empty). */
  unexpected: string[];
  /** Answers marked `Idempotent-Replayed: true`. */
  replayed: number;
  /** Retries, by reason (`409`, `503`, `network`, …). */
  retries: Record<string, number>;
}

/** Options of {@link runPaymentLoad}. */
export interface LoadOptions {
  /** The API's base URL. */
  baseUrl: string;
  /** Payments to create. */
  payments: number;
  /** Payments in flight at once (each with its three POSTs). */
  concurrency: number;
  /** Prefix of the idempotency keys (unique per run). */
  keyPrefix: string;
  /** Payment `i` starts no earlier than `i / payments × minDurationMs` after the start. @default 0 */
  minDurationMs?: number;
  /** Give up (and fail) past this time (epoch ms). */
  deadline: number;
}

interface Answer {
  status: number;
  replayed: boolean;
  id: string | undefined;
}

async function postUntilAnswered(
  options: LoadOptions,
  key: string,
  body: string,
  retries: Record<string, number>,
): Promise<Answer> {
  for (let attempt = 1; ; attempt++) {
    if (Date.now() > options.deadline)
      throw new Error(`no final answer for ${key} before the deadline`);
    let reason: string;
    try {
      const response = await fetch(`${options.baseUrl}/v1/payments`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': key },
        body,
        signal: AbortSignal.timeout(15_000),
      });
      const text = await response.text();
      if (response.status < 500 && response.status !== 409) {
        const parsed = response.status === 201 ? (JSON.parse(text) as { id?: string }) : {};
        return {
          status: response.status,
          replayed: response.headers.get('idempotent-replayed') === 'true',
          id: parsed.id,
        };
      }
      reason = String(response.status);
    } catch {
      // Refused while the API restarts, reset by a kill mid-request, or timed out.
      reason = 'network';
    }
    retries[reason] = (retries[reason] ?? 0) + 1;
    await sleep(Math.min(50 * attempt, 500) * (0.5 + Math.random()));
  }
}

/** Run the load; resolves when every payment has its three answers. */
export async function runPaymentLoad(options: LoadOptions): Promise<LoadResult> {
  const result: LoadResult = {
    paymentIds: new Map(),
    disagreements: [],
    unexpected: [],
    replayed: 0,
    retries: {},
  };
  let next = 0;
  const started = Date.now();
  const lane = async () => {
    for (;;) {
      const index = next++;
      if (index >= options.payments) return;
      const notBefore = started + (index / options.payments) * (options.minDurationMs ?? 0);
      if (notBefore > Date.now()) await sleep(notBefore - Date.now());
      const key = `${options.keyPrefix}-${index}`;
      const body = JSON.stringify({
        amount: 100 + index,
        currency: 'EUR',
        customer: `cus_${index % 37}`,
      });
      const answers = await Promise.all(
        [0, 1, 2].map(() => postUntilAnswered(options, key, body, result.retries)),
      );
      for (const answer of answers) {
        if (answer.status !== 201) result.unexpected.push(`${key}: ${answer.status}`);
        if (answer.replayed) result.replayed++;
      }
      const ids = new Set(answers.map((answer) => answer.id));
      const [id] = ids;
      if (ids.size !== 1 || id === undefined)
        result.disagreements.push(`${key}: ${[...ids].join(', ')}`);
      else result.paymentIds.set(key, id);
    }
  };
  await Promise.all(Array.from({ length: options.concurrency }, lane));
  return result;
}
