/**
 * Serve a fetch handler (the fetch adapter's wrapped handler, or a Hono app's `fetch`) on a free loopback
 * port through `@hono/node-server`, as a production Node deployment of either would.
 */
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { onTestFinished } from 'vitest';

/** A listening fetch handler: the URL of `path` on it, and how to close it. */
export interface ListeningFetch {
  url: string;
  close(): Promise<void>;
}

/** Listen on 127.0.0.1 with a free port; `url` is `path` on that server. */
export async function listenFetch(
  fetchHandler: (request: Request) => Response | Promise<Response>,
  path: string,
): Promise<ListeningFetch> {
  const server = await new Promise<ReturnType<typeof serve>>((resolve) => {
    const s = serve({ fetch: fetchHandler, port: 0, hostname: '127.0.0.1' }, () => resolve(s));
  });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}${path}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/**
 * {@link listenFetch} at the root, closed when the current test finishes; resolves to the base URL. The
 * close is not waited for: a client's kept-alive connection would hold it back.
 */
export async function listenFetchForTest(
  fetchHandler: (request: Request) => Response | Promise<Response>,
): Promise<string> {
  const listening = await listenFetch(fetchHandler, '');
  onTestFinished(() => {
    void listening.close();
  });
  return listening.url;
}
