package forward

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-dev/switchboard/messages"
	"github.com/switchboard-dev/switchboard/persistence"
)

// Metrics are the forward queues' counters.
type Metrics struct {
	completedC *prometheus.CounterVec
	failedC    *prometheus.CounterVec
}

// NewMetrics registers the forward metrics on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		completedC: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_federation_forward_completed_total",
			Help: "Messages a peer accepted from us (retries and duplicates included), by peer.",
		}, []string{"dest_controller"}),
		failedC: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_federation_requests_failed_total",
			Help: "Requests to a peer (forward or delivery_status) that did not complete; their work waits.",
		}, []string{"peer", "kind"}),
	}
	for _, c := range []prometheus.Collector{m.completedC, m.failedC} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// sent counts a request's result: failed when it did not complete, and
// each forward the peer accepted (in the requests that completed).
func (m *Metrics) sent(peer string, kind persistence.WorkKind, forward []messages.ForwardResult, err error) {
	if err != nil {
		m.failedC.WithLabelValues(peer, string(kind)).Inc()
	}
	for i, f := range forward {
		if forwardAnswered(forward, i, err) && f.Error == nil {
			m.completedC.WithLabelValues(peer).Inc()
		}
	}
}
