// The engines' block hasher for replays: chained XXH3 on the wasm core, several
// times faster than the mock engine's default TS hash on the tens of millions
// of prompt tokens a trace replay hashes. The engine's hashes are opaque ids to
// the router, so the seed only has to differ from nothing in particular; a
// seed of its own keeps them visibly apart from the router's local hashes.
import { BlockHasher } from '../../bindings/block-hasher.js';
import type { HashBlocks } from '../mocker/block-hash.js';

const ENGINE_SEED = 0x656e67696e65n;

/** A HashBlocks on one wasm core; it returns copies, as the engine keeps them. */
export function wasmChainedHashes(hasher = new BlockHasher()): HashBlocks {
  return (tokens, blockSize) => {
    hasher.tokenView(tokens.length).set(tokens);
    const count = hasher.hashInto(tokens.length, blockSize, ENGINE_SEED, true);
    return hasher.sequenceView(count).slice();
  };
}
