// The kvrouter WebAssembly core: one module, one exported memory.
// Each kernel lives in its own file; this entry only re-exports them.
// The ABI (exports, layouts, ownership) is documented in docs/core-abi.md.
export { abiVersion } from './abi';
export { liveBytes } from './alloc';
export {
  lanesCreateHeap,
  lanesDestroyHeap,
  lanesPush,
  lanesUpdate,
  lanesRemove,
  lanesPeek,
  lanesPop,
  lanesSize,
  lanesHeapOf,
} from './lane-heap';
export {
  hashReserveInput,
  hashReserveBlocks,
  hashLocalPtr,
  hashSequencePtr,
  hashBlocks,
  hashChain,
  hashXxh3,
} from './block-hash';
export {
  ledgerReserveWorkers,
  ledgerRows,
  ledgerColumn,
  ledgerSetWorker,
  ledgerSetAvailable,
  ledgerRemoveWorker,
  ledgerAdd,
  ledgerPrefillComplete,
  ledgerFree,
  ledgerSweep,
  ledgerDroppedPtr,
  ledgerLiveRequests,
  ledgerActiveHashes,
  ledgerProject,
  ledgerProjectColumns,
  ledgerEnableFastPath,
  ledgerReserveInput,
  ledgerInputSeqPtr,
  ledgerInputSlotsPtr,
  ledgerInputDepthsPtr,
} from './load-table';
export {
  selectReserve,
  selectColumn,
  selectCountsPtr,
  selectReserveAllowed,
  selectAllowedPtr,
  selectLastCost,
  selectEligibility,
  selectCost,
  selectPick,
  selectRun,
} from './select';
export { selectDecide, selectLastPath } from './select-fast';
export { selectSeed, selectNextRandom } from './random';
export { hrwReserve, hrwOutPtr, hrwTopK } from './rendezvous';
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
export { bpeVocabInput, bpeVocabBuild, bpeTextInput, bpePieceInput, bpeOutPtr, bpeEncode, bpeTune, bpeStats } from './bpe';
