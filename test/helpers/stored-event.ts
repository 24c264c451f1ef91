// A BlockStored event for given token ids (16 per block), as an engine would
// publish it: block hashes unique within the test file, no parent.
import type { BlockStored } from '../../router/kv-events.js';

let nextHash = 1n;

export function storedEvent(tokens: number[]): BlockStored {
  return {
    type: 'stored',
    blockHashes: Array.from({ length: tokens.length / 16 }, () => nextHash++),
    parentBlockHash: null,
    tokenIds: tokens,
    blockSize: 16,
    loraName: null,
    medium: 'GPU',
  };
}
