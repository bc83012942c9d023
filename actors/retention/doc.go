// Package retention is the storage life cycle of a node: the cleaner that
// purges messages once they have rested past their retention, with the
// call records written before they go.
//
// A message comes to rest when it is delivered, failed or forward_failed,
// or forwarded (the peer has it; only its report is owed). From then on:
//
//	delivered                         purged Retention after it came to rest
//	failed, forward_failed            purged RetentionFailed after
//	forwarded, no report ever came    purged ForwardedAfter after it was forwarded
//	                                  (the peer's own validity ends its delivery
//	                                  within MessageValidity; the report is then
//	                                  taken as lost)
//	anything with outbox work left    kept (a report owed to its origin)
//	anything not at rest              kept
//
// The cleaner runs on the ring's master only (the embedded store's one
// instance), so a site purges once; it asks before every batch, so that a
// master replaced in the middle of a pass stops at once. A pass counts
// what is eligible (the switchboard_retention_eligible gauge), then
// purges in batches, each one transaction, with a pause after each; the
// Pacer sizes the batches so
// that one holds the store for about Target (shrinking after a slow or
// failed batch, growing while they are fast), and the pause is as long as
// the batch took, so that the cleaner takes at most half of the store's
// writer while it catches up and the intake the rest. A pass ends when a
// batch comes back short or fails; the upkeep then runs (the audit
// trail's purge, and Compact: it gives space back, Postgres folds its
// counters' deltas), and the next pass comes Interval after this one
// started (after a failure, Backoff after it at the earliest) and counts
// again.
//
// With a call record file (Config.CDR), each batch is read whole first
// (Store.Purgeable), its records are appended and synced, and only then
// is the batch purged, by id: a message's record is on disk before the
// message can go. A crash between the two writes the records again on the
// next pass (a record names its message id and its final time: readers
// drop repeats). When the records cannot be written (a full disk), nothing
// is purged until they can; the passes go on meanwhile, each ended by its
// failed first batch, so the eligible gauge still follows the backlog and
// the upkeep still runs. A batch that does not fit in the file before
// its rotation is split across files, each part synced before the next
// file is begun; when a later part fails, the messages of the parts
// synced are purged and the others wait. A part the file took only in
// part is cut off it again (Records.Append).
package retention
