// The headers a request carries to its worker: the data-parallel rank the
// router chose, never the client's own, and the client's other headers.
import { describe, expect, it } from 'vitest';
import { upstreamRequestHeaders } from '../../server/upstream/headers.js';

const pairs = (flat: string[]) => Array.from({ length: flat.length / 2 }, (_, i) => [flat[2 * i]!.toLowerCase(), flat[2 * i + 1]!]);

describe('upstreamRequestHeaders', () => {
  const client = ['Host', 'router:8000', 'Content-Type', 'application/json', 'X-Data-Parallel-Rank', '3', 'x-session-id', 's1', 'Authorization', 'Bearer client'];

  it('replaces the client\'s X-Data-Parallel-Rank with the chosen rank', () => {
    expect(pairs(upstreamRequestHeaders(client, null, 1))).toEqual([
      ['content-type', 'application/json'],
      ['x-session-id', 's1'],
      ['authorization', 'Bearer client'],
      ['x-data-parallel-rank', '1'],
    ]);
  });

  it('sends no rank for a worker with one rank, and the worker\'s key instead of the client\'s', () => {
    expect(pairs(upstreamRequestHeaders(client, 'worker-key', null))).toEqual([
      ['content-type', 'application/json'],
      ['x-session-id', 's1'],
      ['authorization', 'Bearer worker-key'],
    ]);
  });
});
