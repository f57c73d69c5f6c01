/**
 * Files an upload middleware mounted before the Express middleware took out of the body: it has read the
 * stream and left only the text fields in `req.body`, so two uploads of different files would
 * fingerprint alike. The fingerprint covers each file: its field, name, type, size and a SHA-256 of its
 * bytes, wherever the middleware keeps them:
 * - multer (`req.file`, `req.files` as an array or as arrays by field name): `buffer` with memory storage,
 *   a file at `path` with disk storage;
 * - express-fileupload (`req.files`, by field name, a file or an array of files): `data` in memory, or a
 *   file at `tempFilePath` with `useTempFiles` (`data` is then empty).
 *
 * Bytes on disk are read here, streamed through the hash (nothing held in memory), at most
 * `requestBodyLimit` bytes over all the request's files, as for a body the layer reads itself: past it
 * the request is refused (413) rather than fingerprinted without its bytes. The files are only read:
 * the handler finds them as the middleware left them.
 * @module
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import type { Request } from 'express';
import { RequestTooLargeError } from '../http/unread-body.js';

/** A file as multer or express-fileupload describe it; every field is checked before use. */
interface UploadedFile {
  /** multer: the form field. */
  fieldname?: unknown;
  /** multer: the client's file name. */
  originalname?: unknown;
  /** express-fileupload: the client's file name. */
  name?: unknown;
  mimetype?: unknown;
  size?: unknown;
  /** multer, memory storage. */
  buffer?: unknown;
  /** multer, disk storage. */
  path?: unknown;
  /** express-fileupload, in memory (empty with `useTempFiles`). */
  data?: unknown;
  /** express-fileupload with `useTempFiles` (`''` without). */
  tempFilePath?: unknown;
}

/** What identifies an uploaded file in the fingerprint. */
interface FileFacts {
  field: unknown;
  name: unknown;
  type: unknown;
  size: unknown;
  sha256: string | undefined;
}

/**
 * The body for the fingerprint: `req.body` as a parser before the middleware left it, with the files an
 * upload middleware took out of the stream (`{ fields, files }`). Without a file, `req.body` as it always
 * was (a route with `upload.array()` sets `req.files` to `[]`), so fingerprints stored before stay the
 * same; a promise only when a file's bytes are on disk.
 * @param limit - The most bytes read from disk for one request (`requestBodyLimit`); `false`: files on
 *   disk are covered by field, name, type and size only, their bytes left unread.
 * @throws (rejects with) RequestTooLargeError when the files on disk go over `limit`, or the error
 *   reading one of them.
 */
export function bodyWithUploads(req: Request, limit: number | false): unknown {
  const { file, files } = req as { file?: unknown; files?: unknown };
  if (file === undefined && files === undefined) return req.body as unknown;
  const uploads: Array<[field: string | undefined, file: UploadedFile]> = [];
  if (typeof file === 'object' && file !== null) uploads.push([undefined, file]);
  if (Array.isArray(files)) for (const each of files) uploads.push([undefined, each]);
  else if (typeof files === 'object' && files !== null) {
    // By field name (multer's `fields()`, express-fileupload): in the order their first file arrived;
    // sorted instead. express-fileupload gives one file as itself, several as an array.
    const byField = files as Record<string, unknown>;
    for (const field of Object.keys(byField).sort()) {
      for (const each of [byField[field] ?? []].flat()) uploads.push([field, each]);
    }
  }
  const facts: FileFacts[] = [];
  const onDisk: Array<[FileFacts, string]> = [];
  for (const [field, upload] of uploads) {
    if (typeof upload !== 'object' || upload === null) continue;
    const bytes = bytesOf(upload);
    const fact: FileFacts = {
      field: upload.fieldname ?? field,
      name: upload.originalname ?? upload.name,
      type: upload.mimetype,
      size: upload.size,
      sha256: bytes instanceof Uint8Array ? sha256(bytes) : undefined,
    };
    facts.push(fact);
    if (typeof bytes === 'string' && limit !== false) onDisk.push([fact, bytes]);
  }
  if (facts.length === 0) return req.body as unknown;
  const body = { fields: req.body as unknown, files: facts };
  if (onDisk.length === 0 || limit === false) return body;
  return hashFiles(onDisk, limit).then(() => body);
}

// The file's bytes in memory, or the path of the file that holds them, or neither.
function bytesOf(file: UploadedFile): Uint8Array | string | undefined {
  if (file.buffer instanceof Uint8Array) return file.buffer;
  const onDisk =
    typeof file.path === 'string' && file.path !== ''
      ? file.path
      : typeof file.tempFilePath === 'string' && file.tempFilePath !== ''
        ? file.tempFilePath
        : undefined;
  if (onDisk !== undefined) return onDisk;
  return file.data instanceof Uint8Array ? file.data : undefined;
}

const sha256 = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

// The files on disk hashed one after the other, their bytes counted against `limit` together. The sizes
// the middleware reported are checked first, so that a request announcing too much is refused unread.
async function hashFiles(files: Array<[FileFacts, string]>, limit: number): Promise<void> {
  let announced = 0;
  for (const [fact] of files) if (typeof fact.size === 'number') announced += fact.size;
  if (announced > limit) throw new RequestTooLargeError(limit);
  let left = limit;
  for (const [fact, path] of files) {
    const digest = createHash('sha256');
    // Leaving the loop (a throw) destroys the stream, which closes the file.
    for await (const chunk of createReadStream(path) as AsyncIterable<Buffer>) {
      left -= chunk.byteLength;
      if (left < 0) throw new RequestTooLargeError(limit);
      digest.update(chunk);
    }
    fact.sha256 = digest.digest('hex');
  }
}
