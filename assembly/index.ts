// The kvrouter WebAssembly core: one module, one exported memory.
// Each kernel lives in its own file; this entry only re-exports them.
// The ABI (exports, layouts, ownership) is documented in docs/core-abi.md.
export { abiVersion } from './abi';
export { liveBytes } from './alloc';
export {
  indexInput,
  indexConfigure,
  indexStored,
  indexRemoved,
  indexCleared,
  indexFind,
  indexOutSlots,
  indexOutDepths,
  indexInsertRouted,
  indexExpire,
  indexNodes,
  indexBlocks,
  indexRoutedBlocks,
  indexUnknownParents,
  indexUnknownRemovals,
  indexDumpNodes,
  indexDumpSlot,
  indexDumpBuffer,
  indexDumpRelease,
  indexVerify,
} from './prefix-index';
