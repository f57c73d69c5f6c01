/**
 * Fastify's error-handling state, read from its internal symbols by description: on a Fastify whose
 * replies lack them (another version), nothing the handler sends is dropped, as before any was: a dropped
 * error page left the client without a response, and the key in progress.
 */
import fastify, { type FastifyReply } from 'fastify';
import { expect, it } from 'vitest';
import {
  errorHandlingBegan,
  errorHandlingState,
  UNREADABLE,
} from '../../../src/fastify/error-handling.js';
import { type Running, watchSends } from '../../../src/fastify/handler-answer.js';
import type { Execution } from '../../../src/http/index.js';

it('reads the state of a Fastify reply, and sees the error handling begin', async () => {
  // Arrange
  const app = fastify();
  const seen: unknown[] = [];
  app.setErrorHandler((_error, _request, reply) => {
    seen.push(errorHandlingState(reply), errorHandlingBegan(reply, seen[0]));
    reply.code(500).send('page');
  });
  app.get('/', (_request, reply) => {
    seen.push(errorHandlingState(reply));
    throw new Error('boom');
  });
  // Act
  const response = await app.inject('/');
  await app.close();
  // Assert
  expect(response.body).toBe('page');
  expect(seen[0]).toBeUndefined();
  expect(seen[1]).not.toBe(UNREADABLE);
  expect(seen[1]).not.toBeUndefined();
  expect(seen[2]).toBe(true);
});

it('lets every send through on a reply without the symbols it knows', () => {
  // Arrange: a reply of another layout, the handler's answer on its way.
  const sent: unknown[] = [];
  const reply = {
    statusCode: 201,
    sent: false,
    request: { url: '/', method: 'POST' },
    log: { warn() {}, error() {} },
    send(payload: unknown) {
      sent.push(payload);
      return this;
    },
  } as unknown as FastifyReply;
  const running: Running = { execution: {} as Execution, started: true };
  running.errorHandling = errorHandlingState(reply);
  watchSends(reply, running, () => {});
  // Act
  reply.send({ id: 'first' });
  reply.send({ message: 'an error page' });
  // Assert
  expect(running.errorHandling).toBe(UNREADABLE);
  expect(running.answered).toBe(201);
  expect(sent).toEqual([{ id: 'first' }, { message: 'an error page' }]);
});

it('stops dropping for good once an error page went out while the state read unchanged', () => {
  // Arrange: a reply with the symbols checked, whose error handling leaves no trace (a Fastify that
  // renamed `kReplyNextErrorHandler`). Last in this file: the finding holds for the process.
  const sent: unknown[] = [];
  const layout = () =>
    ({
      [Symbol('fastify.reply.isError')]: false,
      [Symbol('fastify.reply.isRunningOnErrorHook')]: false,
      statusCode: 201,
      sent: false,
      request: { url: '/', method: 'POST' },
      log: { warn() {}, error() {} },
      send(payload: unknown) {
        sent.push(payload);
        return this;
      },
    }) as unknown as FastifyReply;
  const reply = layout();
  const running: Running = { execution: {} as Execution, started: true };
  running.errorHandling = errorHandlingState(reply);
  watchSends(reply, running, () => {});
  reply.send({ id: 'first' });
  running.error = new Error('seen by the plugin');
  // Act
  reply.send({ message: 'an error page' });
  // Assert
  expect(running.errorHandling).toBeUndefined();
  expect(errorHandlingState(layout())).toBe(UNREADABLE);
  expect(sent).toEqual([{ id: 'first' }, { message: 'an error page' }]);
});
