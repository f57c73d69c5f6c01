/**
 * Send the same keyed request to a Hono app twice, through `app.request`, and read each answer as the
 * error-after-answer tests compare them: the status and the problem code, or the value thrown out of
 * `app.fetch` (Hono lets a thrown value that is not an `Error` out; `@hono/node-server` answers it 500).
 */
import { randomUUID } from 'node:crypto';
import { Hono } from 'hono';

/**
 * A Hono app whose onError answers as Hono's default does (500, `Internal Server Error`) without logging
 * each error the tests provoke.
 */
export function quietHono(): Hono {
  const app = new Hono();
  app.onError((_error, c) => c.text('Internal Server Error', 500));
  return app;
}

/** One answer: its status and problem code, or the value `app.request` rejected with. */
export type SameKeyAnswer = { status: number; code: string | undefined } | { thrown: unknown };

/** POST `path` twice with one new key; the first answer, then the retry's. */
export async function sameKeyTwice(
  app: Hono,
  path = '/charges',
): Promise<[SameKeyAnswer, SameKeyAnswer]> {
  const key = randomUUID();
  const send = async (): Promise<SameKeyAnswer> => {
    let response: Response;
    try {
      response = await app.request(path, { method: 'POST', headers: { 'idempotency-key': key } });
    } catch (thrown) {
      return { thrown };
    }
    const text = await response.text();
    const body = (text.startsWith('{') ? JSON.parse(text) : {}) as { code?: string };
    return { status: response.status, code: body.code };
  };
  const first = await send();
  return [first, await send()];
}
