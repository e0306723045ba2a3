// Package tuning is the offline tuning pipeline: it turns replay records (package
// replay) into what the calibrate, report, fit and backoff commands compute and
// write. Its one job is that turning; replaying sessions stays in replay, pricing
// and sweeping in calibrate, and flags, printing and plotting in the commands.
//
// It holds:
//
//   - the replays of a store grouped by settings (Group, LoadGroups, with the
//     cutoff each pruned under, Group.Cutoff) and read again from their
//     session files (LoadSource);
//   - the calibrate records of a replay (Outputs, OutputsAt, Calls,
//     PendingPrunes, CompactionOf) and what a calibration gathers from a store
//     (Gather, ReportInput) into what calibrate --json prints (Calibration), with
//     the stub digests' coverage (DigestCoverage), the digest budget sweep
//     (Calibration.AddDigestSweep) and what a modelled ask lag costs (SplitLag, LagCost);
//   - the fitted scorer's training rows (TrainingSet) and their held-out
//     evaluation, whose cutoff calibrate's rule chooses (calibrate.RecommendBy);
//   - the back-off schedule comparison (ParseSchedules, Comparison,
//     ReplaySchedules);
//   - the advisor config a tuning writes (WriteCutoff, WriteModelFile);
//   - the one worker helper of the pipeline (InOrder).
//
// It imports replay and calibrate; replay imports neither. It reads a store only
// through the interfaces it declares (Store), so it links no storage, no HTTP
// stack, no model client and no plotting (internal/layers checks it).
package tuning
