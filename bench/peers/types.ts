/**
 * What the peer-library rows of `bench/http-peers.ts` share: the configuration the parent sends to a peer
 * server, and the contract of the per-peer Express app factories in this folder.
 */
import type { Express } from 'express';

/** The peer libraries measured against idempotency-kit. */
export const PEERS = ['express-idempotency', 'node-idempotency', 'powertools'] as const;

/** One of {@link PEERS}. */
export type PeerName = (typeof PEERS)[number];

/** Table labels: the package, its version and its Redis layer. */
export const PEER_LABELS: Record<PeerName, string> = {
  'express-idempotency': 'express-idempotency 1.0.6, redis adapter 1.0.8',
  'node-idempotency': '@node-idempotency/core 1.0.11, storage-adapter-redis 1.0.2',
  powertools: '@aws-lambda-powertools/idempotency 2.35.0, CachePersistenceLayer',
};

/** What the parent asks a peer server (`bench/peers/server.ts`) for, in `IK_BENCH_PEER` (JSON). */
export interface PeerServerConfig {
  peer: PeerName;
  /** Handler latency, as in `bench/lib/http-server.ts`. */
  delayMs: number;
  /** Redis URL including the private DB index (e.g. `redis://127.0.0.1:6379/9`). */
  redisUrl: string;
  /** Every Redis key the peer writes starts with this prefix (the run's cleanup deletes `prefix*`). */
  keyPrefix: string;
}

/** The body of `POST /orders`, as the load generator sends it. */
export interface OrderBody {
  amount?: number;
  currency?: string;
}

/** The handler's answer: the same JSON the baseline and idempotency-kit rows send, with status 201. */
export interface Order {
  id: string;
  amount: number;
}

/** What a peer factory gets. */
export interface PeerAppOptions {
  redisUrl: string;
  keyPrefix: string;
  /**
   * The route's business work (the configured delay, then the order). Injected, so that every row does the
   * same work and the server can count how often it really ran (a replay must not run it).
   */
  runOrder: (body: OrderBody) => Promise<Order>;
}

/** A peer's Express app serving `POST /orders`, ready to listen. */
export interface PeerApp {
  app: Express;
  /** Close the peer's Redis connection. */
  close: () => Promise<void>;
}

/** Every file in this folder exports one of these as `createPeerApp`. */
export type PeerAppFactory = (options: PeerAppOptions) => Promise<PeerApp>;
