package sidecar

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/server/metrics"
)

// reviewCollector exports how many actions wait for an operator, per tenant
// and action, read from the database at scrape time: the number an operator
// alerts on, true across restarts and across every process sharing the
// database, which no in-process counter can be.
type reviewCollector struct {
	db      DB
	timeout time.Duration
	desc    *prometheus.Desc
}

func newReviewCollector(db DB, timeout time.Duration) *reviewCollector {
	return &reviewCollector{db: db, timeout: timeout, desc: prometheus.NewDesc(
		metrics.Namespace+"_actions_in_review",
		"Actions waiting for an operator (status review), read from the database at scrape time.",
		[]string{"tenant", "action"}, nil)}
}

func (c *reviewCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *reviewCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	counts, err := executor.CountReview(ctx, c.db)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	for _, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n.N), n.Tenant, n.Action)
	}
}
