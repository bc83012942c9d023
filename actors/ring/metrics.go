package ring

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-dev/switchboard/messages"
)

// Metrics are the ring's gauges and counters (docs/metrics.md).
type Metrics struct {
	coverage    prometheus.Gauge
	epoch       prometheus.Gauge
	ranges      *prometheus.GaugeVec
	role        *prometheus.GaugeVec
	reassigned  prometheus.Counter
	refusedC    *prometheus.CounterVec
	knownMember map[string]bool
}

// NewMetrics registers the ring metrics on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		coverage: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchboard_ring_coverage",
			Help: "Fraction of the token space owned, under the current epoch, by members that have applied it (1 when whole).",
		}),
		epoch: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchboard_ring_epoch",
			Help: "The ring assignment epoch this instance holds.",
		}),
		ranges: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "switchboard_ring_ranges",
			Help: "Token ranges each member owns in the assignment this instance holds.",
		}, []string{"member"}),
		role: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "switchboard_ring_role",
			Help: "1 on this instance's current ring role (master or slave).",
		}, []string{"role"}),
		reassigned: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchboard_ring_reassignments_total",
			Help: "Token ranges the master moved from one member to another (counted by the master that published them).",
		}),
		refusedC: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_ring_claims_refused_total",
			Help: "Claims the store refused because they named a stale ring epoch, by service.",
		}, []string{"service"}),
		knownMember: map[string]bool{},
	}
	for _, c := range []prometheus.Collector{m.coverage, m.epoch, m.ranges, m.role, m.reassigned, m.refusedC} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for _, svc := range messages.AllServices {
		m.refusedC.WithLabelValues(svc)
	}
	return m, nil
}

// Refused counts a claim refused for a stale epoch.
func (m *Metrics) Refused(service string) { m.refusedC.WithLabelValues(service).Inc() }

func (m *Metrics) setRole(role string) {
	for _, r := range []string{messages.RoleMaster, messages.RoleSlave} {
		v := 0.0
		if r == role {
			v = 1
		}
		m.role.WithLabelValues(r).Set(v)
	}
}

// held records the assignment this instance holds and its coverage.
func (m *Metrics) held(a messages.RingAssignment, coverage float64) {
	m.epoch.Set(float64(a.Epoch))
	m.coverage.Set(coverage)
	seen := map[string]bool{}
	for _, mem := range a.Members {
		seen[mem.InstanceID] = true
		m.knownMember[mem.InstanceID] = true
		m.ranges.WithLabelValues(mem.InstanceID).Set(float64(len(mem.Ranges)))
	}
	for id := range m.knownMember {
		if !seen[id] {
			m.ranges.DeleteLabelValues(id)
			delete(m.knownMember, id)
		}
	}
}
