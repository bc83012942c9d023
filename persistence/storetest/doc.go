// Package storetest is the one conformance suite every persistence.Store
// runs. The Store interface is a contract in prose; this package turns each
// sentence of it into a subtest, so that the embedded SQLite store and the
// Postgres store cannot drift apart in the places callers rely on: idempotent
// accept, the outbox lease rules, the ledger barrier (keyed by kind of work),
// outcomes by kind, expiry and resubmit, and federation: delivery_status
// reports in both directions, the forward queue and its expiry, and peer
// registries.
//
// A driver's test calls Run with an opener that returns a fresh, empty store
// (wrapped so that it also implements LedgerSeeder) and registers its own
// cleanup:
//
//	type seedingStore struct{ *Store }
//
//	func (s seedingStore) SeedLedger(ctx context.Context, e persistence.LedgerEntry) error {
//		// INSERT INTO ledger ... straight through the store's database
//	}
//
//	func TestStore(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) persistence.Store {
//			s := openFreshStore(t) // its t.Cleanup closes it
//			return seedingStore{s}
//		})
//	}
//
// Subtests are named after the method and the rule they check
// (TestStore/ClaimWork/LeasedRowNotClaimableUntilLeaseEnds), so a failure
// names the sentence of the contract that broke. They do not run in
// parallel: an opener need not support that.
//
// The suite never reads the wall clock and never sleeps: every time it hands a
// store is derived from one fixed base instant (in a non-UTC zone, with
// nanoseconds, so normalization is checked everywhere). It assumes nothing
// about a driver beyond the interface, except one hook, LedgerSeeder, for the
// single rule the interface cannot reach on its own (see its comment). One
// subtest closes the store itself, so the opener's cleanup must accept a
// second Close that reports persistence.ErrClosed.
//
// Where the contract is silent the suite pins one reading, so that both
// stores agree on it:
//   - Seq is positive (0 is the "from newest" cursor).
//   - Accept takes any valid state as the first one (the suite accepts
//     forward_queued and forward_failed messages directly) and refuses a
//     batch with an empty id, writing none of it.
//   - NextDue counts rows a Limit left behind: their due_at, which may be at
//     or before Now, telling the worker to come back at once.
//   - An outcome for work of another kind or target than the message's row
//     is NoWork; an outcome for a final message is AlreadyRecorded even when
//     that work has no row (the message is done, whatever the worker thinks).
//   - ExpireMessages also expires pending messages that have no work, and
//     leaves status rows (reports owed to an origin) alone.
//   - A forward retry of a message already forward_queued appends no history
//     and keeps updated_at and queued_at.
//   - ApplyStatus writes the forward ledger entry with the report's result,
//     keeps a message's reason on a delivered report, details its history
//     "reported by <peer>...", and gives NoWork for a message of that
//     dest_smsc in retry (local work, not forwarded).
//   - QueueForwards returns ids in acceptance order; FailForwards returns
//     messages oldest queued first.
//   - PutPeerRegistry refuses an empty peer or frontend name, stores each
//     frontend once, and lists them sorted; an empty registry leaves the peer
//     absent from PeerRegistries.
package storetest
