package retention

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-dev/switchboard/messages"
)

// Metrics are the cleaner's.
type Metrics struct {
	purged   *prometheus.CounterVec
	eligible prometheus.Gauge
}

// NewMetrics registers switchboard_retention_purged_total{state} and
// switchboard_retention_eligible on reg. Every resting state's series
// exists from the start (at 0).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		purged: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_retention_purged_total",
			Help: "Messages purged after their retention, by the state they rested in.",
		}, []string{"state"}),
		eligible: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchboard_retention_eligible",
			Help: "Messages past their retention and not yet purged, as the cleaner last counted them (at the start of its pass, less what it purged since; 0 on an instance that is not the ring master).",
		}),
	}
	for _, c := range []prometheus.Collector{m.purged, m.eligible} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for _, st := range messages.AllStates {
		if st.Final() || st == messages.StateForwarded {
			m.purged.WithLabelValues(string(st))
		}
	}
	return m, nil
}
