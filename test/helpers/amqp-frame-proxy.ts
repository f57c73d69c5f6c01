/**
 * A TCP proxy in front of RabbitMQ that reads the server's AMQP 0-9-1 frames and can drop the connection
 * right before a chosen one reaches the client: to lose a link between two frames the broker sends back to
 * back (a `basic.return` and the `basic.ack` of the same publish), which a byte-level cut cannot split.
 * It can also withhold every frame of one method from then on (the publisher confirms, say), the link
 * otherwise working: a confirm that never comes, while deliveries still arrive.
 */
import net from 'node:net';

/** Which server method frame to drop the connection before: its AMQP class and method ids. */
export interface AmqpMethod {
  classId: number;
  methodId: number;
}

/** `basic.return`: a mandatory message the broker could not route. */
export const BASIC_RETURN: AmqpMethod = { classId: 60, methodId: 50 };
/** `basic.ack`: a publisher confirm. */
export const BASIC_ACK: AmqpMethod = { classId: 60, methodId: 80 };

/** A running proxy. */
export interface AmqpFrameProxy {
  /** `amqp://guest:guest@127.0.0.1:<port>`, for `amqplib.connect`. */
  readonly url: string;
  /**
   * Drop the connection (both sockets) instead of forwarding the first `method` frame that comes after an
   * `after` frame on the same connection; once.
   */
  dropBefore(method: AmqpMethod, after: AmqpMethod): void;
  /** Never forward a `method` frame from now on, on any connection; every other frame goes through. */
  withhold(method: AmqpMethod): void;
  /**
   * Hold back every `method` frame from now on, on any connection, every other frame going through;
   * {@link AmqpFrameProxy.release} delivers them late, in order.
   */
  holdBack(method: AmqpMethod): void;
  /** Deliver the frames held back, in order, and forward every frame again. */
  release(): void;
  /** Close the proxy and every connection. */
  close(): Promise<void>;
}

const FRAME_METHOD = 1;
const FRAME_HEADER_BYTES = 7;
const FRAME_END_BYTES = 1;

const isMethod = (frame: Buffer, method: AmqpMethod) =>
  frame[0] === FRAME_METHOD &&
  frame.readUInt16BE(FRAME_HEADER_BYTES) === method.classId &&
  frame.readUInt16BE(FRAME_HEADER_BYTES + 2) === method.methodId;

/** Start a proxy to the RabbitMQ server of `amqpUrl`. */
export async function startAmqpFrameProxy(amqpUrl: string): Promise<AmqpFrameProxy> {
  const target = new URL(amqpUrl);
  const sockets = new Set<net.Socket>();
  let armed: { method: AmqpMethod; after: AmqpMethod } | undefined;
  let withheld: AmqpMethod | undefined;
  let heldBack: AmqpMethod | undefined;
  const held: Array<{ client: net.Socket; frame: Buffer }> = [];

  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port || 5672), target.hostname);
    sockets.add(client).add(upstream);
    const destroy = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    for (const socket of [client, upstream]) {
      socket.on('error', destroy);
      socket.on('close', destroy);
    }
    client.on('data', (chunk) => upstream.write(chunk));
    let pending = Buffer.alloc(0);
    let seenAfter = false;
    upstream.on('data', (chunk) => {
      pending = Buffer.concat([pending, chunk]);
      // Forward whole frames only, each checked against the armed trigger.
      for (;;) {
        if (pending.length < FRAME_HEADER_BYTES) return;
        const size = FRAME_HEADER_BYTES + pending.readUInt32BE(3) + FRAME_END_BYTES;
        if (pending.length < size) return;
        const frame = pending.subarray(0, size);
        pending = pending.subarray(size);
        if (armed !== undefined && isMethod(frame, armed.after)) seenAfter = true;
        if (armed !== undefined && seenAfter && isMethod(frame, armed.method)) {
          armed = undefined;
          destroy();
          return;
        }
        if (withheld !== undefined && isMethod(frame, withheld)) continue;
        if (heldBack !== undefined && isMethod(frame, heldBack)) {
          held.push({ client, frame: Buffer.from(frame) });
          continue;
        }
        client.write(frame);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  const through = new URL(amqpUrl);
  through.hostname = '127.0.0.1';
  through.port = String(port);
  return {
    url: through.href,
    dropBefore: (method, after) => {
      armed = { method, after };
    },
    withhold: (method) => {
      withheld = method;
    },
    holdBack: (method) => {
      heldBack = method;
    },
    release: () => {
      heldBack = undefined;
      for (const { client, frame } of held.splice(0)) if (!client.destroyed) client.write(frame);
    },
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
