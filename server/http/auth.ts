// Bearer-token checks for the admin API and the KV ingest endpoint.
import { createHash, timingSafeEqual } from 'node:crypto';
import { RouterError } from '../../router/errors.js';

const digest = (text: string) => createHash('sha256').update(text).digest();

/** A check that throws KVR_ERR_UNAUTHORIZED unless the Authorization header is "Bearer <token>". */
export function bearerCheck(token: string): (authorization: string | undefined) => void {
  const expected = digest(`Bearer ${token}`);
  return (authorization) => {
    // Compared as digests of equal length, so the time taken says nothing about the token.
    if (typeof authorization !== 'string' || !timingSafeEqual(digest(authorization), expected)) throw new RouterError('KVR_ERR_UNAUTHORIZED');
  };
}
