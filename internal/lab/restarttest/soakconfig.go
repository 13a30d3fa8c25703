package restarttest

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"time"
)

// SoakConfig is one soak: long-lived serve and workers under a mixed load,
// with the database crashed every CrashEvery.
type SoakConfig struct {
	// Duration of the load; the settle and the verdict come after.
	Duration time.Duration
	// CrashEvery: a hard crash of the database (pgembed.Cluster.Crash:
	// SIGKILL of every process, then crash recovery) this often.
	CrashEvery time.Duration
	// Rate: new intents (runs: a conversation, its invoice and message)
	// per second.
	Rate float64
	// StormRate: share of runs whose first message is posted StormSize
	// times at once (a same-key storm: one message, one intent, one key).
	StormRate float64
	StormSize int
	// RedeliverRate: webhook redeliveries per second of a message
	// delivered earlier (same message id, as WhatsApp redelivers).
	RedeliverRate float64
	// FaultRate: share of charge requests the PSP answers with a fault
	// (500 before charging, charge then drop, charge then 500, charge then
	// answer too late), drawn per request.
	FaultRate float64
	// Workers and Concurrency: the long-lived workers.
	Workers     int
	Concurrency int
	// DBSynchronousCommit as in Config.
	DBSynchronousCommit string
	// SampleEvery: how often the memory and goroutines of serve and the
	// workers are read; WarmUp: samples before it are not compared.
	SampleEvery time.Duration
	WarmUp      time.Duration
	// SettleTimeout bounds the wait for every run to settle after the load.
	SettleTimeout time.Duration

	Seed      int64
	Bin       string
	Log       io.Writer
	Templates []Template
	Timings   Timings
	// Progress, when set, is called every SampleEvery and at the end.
	Progress func(SoakProgress)
}

func (c *SoakConfig) defaults() {
	c.Duration = cmp.Or(c.Duration, 30*time.Minute)
	c.CrashEvery = cmp.Or(c.CrashEvery, 3*time.Minute)
	c.Rate = cmp.Or(c.Rate, 1)
	c.StormSize = cmp.Or(c.StormSize, 8)
	c.Workers = cmp.Or(c.Workers, 2)
	c.Concurrency = cmp.Or(c.Concurrency, 8)
	c.SampleEvery = cmp.Or(c.SampleEvery, 10*time.Second)
	c.WarmUp = cmp.Or(c.WarmUp, min(3*time.Minute, c.Duration/5))
	c.SettleTimeout = cmp.Or(c.SettleTimeout, 5*time.Minute)
	if c.Templates == nil {
		c.Templates = DefaultTemplates()
	}
	c.Timings = cmp.Or(c.Timings, DefaultTimings())
	c.Log = cmp.Or(c.Log, io.Discard)
}

func (c *SoakConfig) validate() error {
	switch {
	case c.Duration < 10*time.Second:
		return fmt.Errorf("--duration %s: want at least 10s", c.Duration)
	case c.Rate <= 0 || c.Rate > 50:
		return fmt.Errorf("--rate %v: want (0, 50] new intents per second", c.Rate)
	case c.Rate*c.Duration.Seconds() > 99_000:
		return fmt.Errorf("--rate × --duration: %d runs, want at most 99,000", int(c.Rate*c.Duration.Seconds()))
	case c.StormRate < 0 || c.StormRate > 1 || c.FaultRate < 0 || c.FaultRate > 1:
		return errors.New("--storm-rate and --fault-rate: want 0..1")
	case c.RedeliverRate < 0:
		return errors.New("--redeliver-rate: want at least 0")
	case c.Workers < 1 || c.Workers > 16:
		return fmt.Errorf("--workers %d: want 1..16", c.Workers)
	case c.Concurrency < 1 || c.Concurrency > 100:
		return fmt.Errorf("--concurrency %d: want 1..100", c.Concurrency)
	case c.CrashEvery < 10*time.Second:
		return fmt.Errorf("--crash-every %s: want at least 10s", c.CrashEvery)
	}
	return nil
}

// soakFault is the soak's one row in the restart test's report.
var soakFault = Fault{Name: "soak", Description: "long-lived serve and workers under mixed load (new intents, redeliveries, same-key storms, PSP faults), the database crashed every few minutes"}

// soakFaults are the PSP faults the soak's proxies draw from.
func soakFaults(tm Timings) []string {
	return []string{"fail-before", "drop-after", "fail-after", pspFault("psp-slow", tm)}
}
