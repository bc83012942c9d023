package forward

import (
	"github.com/prometheus/client_golang/prometheus"

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

func (m *Metrics) completed(peer string) { m.completedC.WithLabelValues(peer).Inc() }

func (m *Metrics) failed(peer string, kind persistence.WorkKind) {
	m.failedC.WithLabelValues(peer, string(kind)).Inc()
}
