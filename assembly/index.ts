// The kvrouter WebAssembly core: one module, one exported memory.
// Each kernel lives in its own file; this entry only re-exports them.
// The ABI (exports, layouts, ownership) is documented in docs/core-abi.md.
export { abiVersion } from './abi';
export { liveBytes, coreFailAllocation, coreHeapHasRoom } from './alloc';
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
  hashPrompt,
  hashXxh3,
} from './block-hash';
export {
  ledgerReserveWorkers,
  ledgerRows,
  ledgerColumn,
  ledgerSetWorker,
  ledgerSetAvailable,
  ledgerSetGroup,
  ledgerSetRouted,
  ledgerSetSpeed,
  ledgerRemoveWorker,
} from './ledger/fleet';
export { ledgerAdd, ledgerPrefillComplete, ledgerPrefillProgress, ledgerFree, ledgerSweep, ledgerDroppedPtr, ledgerLiveRequests, ledgerActiveHashes } from './ledger/requests';
export { ledgerProject, ledgerProjectColumns } from './ledger/projection';
export { ledgerConfigureCost, ledgerOpenView, ledgerCloseView, ledgerViewMembers, ledgerViewHolds } from './ledger/views';
export { ledgerReserveInput, ledgerInputSeqPtr, ledgerInputSlotsPtr, ledgerInputDepthsPtr } from './ledger/staging';
export {
  selectReserveAllowed,
  selectAllowedPtr,
  selectReserveExcluded,
  selectExcludedPtr,
  selectReserveGroups,
  selectGroupAllowedPtr,
  selectGroupMultiplierPtr,
} from './constraints';
export {
  selectReserve,
  selectColumn,
  selectCountsPtr,
  selectLastCost,
  selectEligibility,
  selectCost,
  selectCostKind,
  selectPick,
} from './select';
export { selectDecide, selectLastPath } from './select-fast';
export { decideBlock, decidePrepare, decideMatch, decideReserveMatches, decideUseMatches, decideReserveRuns, decideUseRuns, decideBestDepth, decideRun } from './decide';
export { selectSeed, selectNextRandom } from './random';
export { hrwReserve, hrwOutPtr, hrwTopK } from './rendezvous';
export {
  indexInput,
  indexConfigure,
  indexConfigureShard,
  indexSetMemoryBound,
  indexStored,
  indexRemoved,
  indexCleared,
  indexFailedUpdates,
  indexFind,
  indexOutSlots,
  indexOutDepths,
  indexAnswer,
  indexExpand,
  indexInsertRouted,
  indexExpire,
  indexRoutedTop,
  indexRoutedTopPtr,
  indexRoutedPop,
  indexNodes,
  indexBlocks,
  indexRoutedBlocks,
  indexUnknownParents,
  indexUnknownRemovals,
  indexEvictedBlocks,
  indexSlotEvicted,
  indexHeldBytes,
  indexUsedBytes,
  indexEvictionLog,
  indexEvictionLogPtr,
  indexEvictionLogCount,
  indexEvictionLogClear,
  indexReset,
  indexDumpNodes,
  indexDumpSlot,
  indexDumpBuffer,
  indexDumpRelease,
  indexVerify,
} from './prefix-index';
export { wireInput, wireSummaryPtr, wireScan, wireParsedPtr, wireApply } from './kv-wire';
export { bpeVocabInput, bpeVocabBuild, bpeMergesInput, bpeMergesBuild, bpeTextInput, bpePieceInput, bpeOutPtr, bpeEncode, bpeEncodeText, bpeTakenUnits, bpeSplit, bpeSplitPattern, bpeTune, bpeSpliceTune, bpeLongPieces, bpeStats } from './bpe';
