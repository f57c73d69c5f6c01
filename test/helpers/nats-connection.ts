/**
 * One NATS connection shared by a test file's tests.
 * @module
 */
import { type NatsConnection, connect as natsConnect } from '@nats-io/transport-node';
import { afterAll, beforeAll } from 'vitest';
import { env, requireService } from './env.js';

/**
 * Open a connection to the test server before the file's tests (failing them when NATS is not running) and
 * close it after them. Call at the top of a `describe`; returns the connection's getter.
 */
export function natsConnectionForFile(): () => NatsConnection {
  let nc: NatsConnection | undefined;
  beforeAll(async () => {
    await requireService('NATS', env.natsUrl);
    nc = await natsConnect({ servers: env.natsUrl });
  });
  afterAll(async () => {
    await nc?.close();
  });
  return () => {
    if (nc === undefined) throw new Error('the NATS connection is opened in beforeAll');
    return nc;
  };
}
