// `kvrouter mock`'s event ports with several workers and ranks: worker w's
// rank r publishes on the --kv-events port + w x ranks + r (replay likewise),
// and flags whose port runs overlap are refused before anything binds.
import { describe, expect, it } from 'vitest';
import { eventPortOffset, startKvPublishers } from '../../server/cli/mock.js';
import { MOCK_OPTIONS } from '../e2e/mock-command-stack.js';

describe('kvrouter mock: event ports', () => {
  it('numbers ranks within a worker, then workers', () => {
    expect([0, 1, 2].flatMap((w) => [0, 1].map((r) => eventPortOffset(w, r, 2)))).toEqual([0, 1, 2, 3, 4, 5]);
  });

  it('refuses a replay port inside the run of event ports, naming both flags', async () => {
    const options = { ...MOCK_OPTIONS, workers: 2, dataParallelSize: 2, kvEvents: 'tcp://127.0.0.1:5557', kvReplay: 'tcp://127.0.0.1:5559' };
    await expect(startKvPublishers(options, () => {})).rejects.toThrow(
      "--kv-replay tcp://127.0.0.1:5559: its port tcp://127.0.0.1:5559 is also one of --kv-events's (4 ports from tcp://127.0.0.1:5557); leave more room between them",
    );
  });

  it('refuses a wildcard port when it would have to give several ranks their own', async () => {
    const options = { ...MOCK_OPTIONS, workers: 1, dataParallelSize: 2, kvEvents: 'tcp://127.0.0.1:*' };
    await expect(startKvPublishers(options, () => {})).rejects.toThrow('cannot give each rank its own port from tcp://127.0.0.1:*: use tcp://host:port');
  });
});
