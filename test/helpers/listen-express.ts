/**
 * Serve an Express app (5 or 4) on a free loopback port for the current test: the server and its
 * connections are closed when the test finishes, so no test leaves a listener or a kept-alive socket to
 * the next.
 */
import { once } from 'node:events';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { onTestFinished } from 'vitest';

/** Listen on 127.0.0.1 with a free port until the test ends; resolves to the base URL. */
export async function listenExpress(app: {
  listen(port: number, host: string): Server;
}): Promise<string> {
  const server = app.listen(0, '127.0.0.1');
  onTestFinished(async () => {
    server.closeAllConnections();
    await new Promise((done) => server.close(done));
  });
  await once(server, 'listening');
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}
