/**
 * POST a body with an `Idempotency-Key` and read the answer as the HTTP tests compare it: the status, the
 * `Idempotent-Replayed` header and the JSON body.
 */

/** What {@link postWithKey} reads of an answer. */
export interface KeyedAnswer<B> {
  status: number;
  replayed: string | null;
  body: B;
}

/** POST `body` to `url` with the key (and `headers`); the status, the replay header and the JSON body. */
export async function postWithKey<B>(
  url: string,
  key: string,
  body: RequestInit['body'],
  headers: Record<string, string> = {},
): Promise<KeyedAnswer<B>> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'idempotency-key': key, ...headers },
    body,
  });
  return {
    status: response.status,
    replayed: response.headers.get('idempotent-replayed'),
    body: (await response.json()) as B,
  };
}
