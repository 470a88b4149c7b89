/**
 * A partition's relay: the loop ({@link PartitionWorker}), the round it runs ({@link runRound}),
 * the poll cursor and the lease keeper.
 */
export { backgroundFailure, type WorkerDeps } from './deps.js';
export { PollCursor } from './cursor.js';
export { PartitionWorker } from './partition-worker.js';
export { Pipeline, runRound, type RoundOptions, type RoundResult } from './round.js';
