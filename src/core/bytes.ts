/**
 * Bytes handed to a driver or a client.
 * @module
 */

/**
 * `bytes` as a `Buffer` over the same memory (no copy): node-postgres binds a `Buffer` as `bytea`,
 * better-sqlite3 as a BLOB, and both Redis clients send it as raw bytes. The view covers exactly the
 * caller's slice, whatever the offset of `bytes` in its `ArrayBuffer`.
 */
export function bufferView(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes)
    ? bytes
    : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}
