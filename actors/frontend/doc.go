// Package frontend holds the adapters between a delivery worker and the
// three kinds of frontend:
//
//   - webhook: the node POSTs messages.Outgoing as JSON with headers
//     Idempotency-Key (the message id) and X-Switchboard-Attempt. 2xx is
//     delivered; 408, 429, 5xx, timeouts and connection errors are retries;
//     any other status is a permanent failure. Classify is that table.
//   - pull: frontends long-poll; Waiters is the pure queue of waiting polls
//     (FIFO, each with a deadline).
//   - actor: an in-process actor registered through the embedding API
//     receives messages.Delivery and responds with messages.DeliveryResult.
//     Actors keeps the PIDs, which live only as long as the process.
package frontend
