package restarttest

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/retrysafe/retrysafe/agent"
)

// CrashPoint is a moment at which the worker that hosts a message dies.
type CrashPoint struct {
	Name string
	// Failpoint is the RETRYSAFE_FAILPOINTS name the worker is armed
	// with; empty for the points the test reaches from outside.
	Failpoint   string
	Description string
	// OptIn, when set, keeps the point out of the default selection and
	// says why; "all" (or its name) selects it.
	OptIn string
}

// CrashPoints lists every crash point, in the order of a message's life.
var CrashPoints = []CrashPoint{
	{Name: "model-answered", Failpoint: agent.FailModelAnswered, Description: "a model answer is journaled, nothing done with it"},
	{Name: "intent-frozen", Failpoint: agent.FailIntentFrozen, Description: "the intent is frozen (committed), the action not claimed"},
	{Name: "action-claimed", Failpoint: agent.FailActionClaimed + ".pix.charge", Description: "the action is claimed (started + lease), the PSP not called"},
	{Name: "provider-call", Failpoint: "", Description: "inside the PSP call: the PSP charged and answered, the answer is on the wire (the test's proxy kills the worker)"},
	{Name: "provider-answered", Failpoint: agent.FailProviderAnswered + ".pix.charge", Description: "the PSP's answer is in hand, the completion not recorded"},
	{Name: "action-completed", Failpoint: agent.FailActionCompleted, Description: "the completion is recorded, the turn is not"},
	{Name: "turn-recorded", Failpoint: agent.FailTurnRecorded, Description: "the turn, reply intent and reply job are committed, the inbox job not acknowledged"},
	{Name: "inbox-before-ack", Failpoint: agent.FailInboxBeforeAck, Description: "the inbox handler is returning success, River has not acknowledged"},
	{Name: "reply-claimed", Failpoint: agent.FailActionClaimed + ".whatsapp.send_text", Description: "the reply's send is claimed (started + lease), WhatsApp not called"},
	{Name: "reply-before-ack", Failpoint: agent.FailReplyBeforeAck, Description: "the reply is sent and recorded, the reply job not acknowledged"},
	{Name: "random", Failpoint: "", Description: "SIGKILL at a random moment (real timing, no failpoint)"},
}

// Fault is an extra fault, each its own scenario (row).
type Fault struct {
	Name        string
	Description string
	// OptIn, when set, keeps the fault out of the default selection and
	// says why; "all" (or its name) selects it.
	OptIn string
	// OwnCluster: the fault is done to the test's own PostgreSQL cluster,
	// so it needs one (no --database-url).
	OwnCluster bool
}

// Faults lists the extra faults.
var Faults = []Fault{
	{Name: "pg-restart", OwnCluster: true, Description: "PostgreSQL restarted (pg_ctl restart -m fast, a checkpointed stop) while the batch is in flight; only on the test's own cluster"},
	{Name: "pg-crash", OwnCluster: true, Description: "PostgreSQL crashed while claims, completions and PSP calls are in flight: SIGKILL of the postmaster and every backend at once, then a start through crash recovery; only on the test's own cluster"},
	{Name: "pg-failover", OwnCluster: true, Description: "the primary crashed (SIGKILL of every process) while the batch is in flight, its streaming standby promoted, serve and workers reconnect through the URL's second host (target_session_attrs=read-write); then a new standby; only on the test's own cluster",
		OptIn: "runs a standby through the whole test and rebuilds it after every failover (--standby sync|async)"},
	{Name: "psp-500", Description: "the PSP answers 500 without charging (fail-before): the batch worker's first charge request, then half of them"},
	{Name: "psp-drop", Description: "the PSP charges, then drops the connection (drop-after): first charge request, then half"},
	{Name: "psp-fail-after", Description: "the PSP charges, then answers 500 (fail-after): first charge request, then half"},
	{Name: "psp-slow", Description: "the PSP charges, then answers after the worker's provider timeout (slow): first charge request, then half"},
	{Name: "race", Description: "two workers race for the same messages: the queue hands a running job to a second worker"},
}

// dbFault reports whether f is done to the database (restart, crash,
// failover).
func (f *Fault) dbFault() bool { return f != nil && f.OwnCluster }

// Timings are the worker settings the test runs with: short, so that a
// killed job comes back in seconds, not minutes. They are printed in the
// report.
type Timings struct {
	ModelTimeout      time.Duration // --model-timeout
	ClaimTTL          time.Duration // --claim-ttl: > ModelTimeout
	JobTimeout        time.Duration // --job-timeout
	RescueAfter       time.Duration // --rescue-after: > JobTimeout
	RetryBase         time.Duration // --retry-base
	RetryMax          time.Duration // --retry-max
	Poll              time.Duration // --poll
	ProviderTimeout   time.Duration // --timeout
	Lease             time.Duration // --lease: > ProviderTimeout + 2s
	ReconcileInterval time.Duration // --reconcile-interval
}

// DefaultTimings are the settings restart-test uses unless told otherwise.
func DefaultTimings() Timings {
	return Timings{
		ModelTimeout:      3 * time.Second,
		ClaimTTL:          4 * time.Second,
		JobTimeout:        6 * time.Second,
		RescueAfter:       7 * time.Second,
		RetryBase:         100 * time.Millisecond,
		RetryMax:          2 * time.Second,
		Poll:              200 * time.Millisecond,
		ProviderTimeout:   2 * time.Second,
		Lease:             5 * time.Second,
		ReconcileInterval: time.Second,
	}
}

// workerArgs are the worker flags for t.
func (t Timings) workerArgs() []string {
	return []string{
		"--model-timeout", t.ModelTimeout.String(),
		"--claim-ttl", t.ClaimTTL.String(),
		"--job-timeout", t.JobTimeout.String(),
		"--rescue-after", t.RescueAfter.String(),
		"--retry-base", t.RetryBase.String(),
		"--retry-max", t.RetryMax.String(),
		"--poll", t.Poll.String(),
		"--timeout", t.ProviderTimeout.String(),
		"--lease", t.Lease.String(),
		"--reconcile-interval", t.ReconcileInterval.String(),
	}
}

// Config is one restart test.
type Config struct {
	Runs int
	Seed int64
	// CrashPoints and Faults select scenarios by name; nil or "default"
	// means every one without OptIn, "all" every one (pg-restart only when
	// the test starts its own cluster).
	CrashPoints []string
	Faults      []string
	// Workers is how many workers work the redeliveries at once.
	Workers int
	// Naive runs the broken control: a random key per provider call.
	Naive bool
	// PSP is the sandbox PSP's API: PSPV1 ("" too: pix.charge with
	// Idempotency-Key) or PSPAPIPix (the Central Bank's API Pix: pix.cob
	// by txid; afterwards every charge is paid and its receipt checked).
	PSP string

	// DatabaseURL: empty starts a private cluster (needed by the pg-*
	// faults). The private cluster runs durable settings (fsync,
	// synchronous_commit, full_page_writes on) and the sandbox PSP's
	// tables live on a second cluster that no fault touches.
	DatabaseURL string
	// DBSynchronousCommit, when set, becomes the private database's
	// synchronous_commit (ALTER DATABASE ... SET) before anything
	// connects: off is the throughput tuning under which the claim must
	// still commit durably.
	DBSynchronousCommit string
	// Standby is the private cluster's standby when pg-failover is
	// selected: "sync" (the default) or "async".
	Standby string
	// Keep keeps the schemas (and prints them) for inspection.
	Keep bool
	// Bin is the retrysafe binary; default this executable.
	Bin string
	// Templates phrase the messages; nil means DefaultTemplates.
	Templates []Template

	// Batch is how many runs are delivered to one armed worker before it
	// is killed; Concurrency is each worker's --concurrency.
	Batch       int
	Concurrency int
	// Journal is the worker's --journal (on or off).
	Journal string
	// WrongAmountRate and ModelLatency configure the sandbox model.
	WrongAmountRate float64
	ModelLatency    time.Duration
	Timings         Timings
	// MaxAttempts is the workers' and serve's --max-attempts (claims of
	// one action before it goes to review); 0 keeps their default (5).
	MaxAttempts int
	// ServeReconcileOff starts `retrysafe serve` with --reconcile=false, so
	// that only the workers (which have every tool) settle expired
	// actions. Off by default: a deployment runs serve's reconciler.
	ServeReconcileOff bool
	// SettleTimeout bounds the wait for every run to settle after the
	// kills.
	SettleTimeout time.Duration
	// RefundRate is the share of runs (API Pix only; ignored for v1) that,
	// once their charge is paid, refund part of it: a pix.refund intent of
	// its own (intent_ref "<invoice>:refund:1"), asked for through serve's
	// sidecar and settled by workers killed at the refund's crash points
	// (RefundPoints).
	RefundRate float64

	// Log receives every process's output (line-prefixed); nil discards.
	Log io.Writer
	// Progress, when set, is called as the test advances.
	Progress func(Progress)
}

// Progress is where a test stands.
type Progress struct {
	Phase     string // "starting", "kills", "redelivery", "verifying", "done"
	Scenario  string // the scenario whose batch is in flight (kills)
	Scenarios int    // scenarios done
	Total     int    // scenarios
	Delivered int    // runs delivered
	Runs      int
	Kills     int
	Settled   int // runs settled (redelivery)
	Elapsed   time.Duration
}

func (c *Config) defaults() {
	c.Runs = cmp.Or(c.Runs, 100)
	c.Workers = cmp.Or(c.Workers, 2)
	c.Batch = cmp.Or(c.Batch, 8)
	c.Concurrency = cmp.Or(c.Concurrency, 8)
	c.Journal = cmp.Or(c.Journal, "on")
	c.Timings = cmp.Or(c.Timings, DefaultTimings())
	c.SettleTimeout = cmp.Or(c.SettleTimeout, 3*time.Minute)
	if c.Templates == nil {
		c.Templates = DefaultTemplates()
	}
	c.Log = cmp.Or(c.Log, io.Discard)
}

// scenario is one row of the report: a crash point, or an extra fault.
type scenario struct {
	name  string // "action-claimed", "fault:psp-drop"
	point *CrashPoint
	fault *Fault
}

// scenarios resolves the selection, in table order.
func (c *Config) scenarios(ownCluster bool) ([]scenario, error) {
	var out []scenario
	pick := func(list []string, known, defaults []string, what string) (map[string]bool, error) {
		sel := map[string]bool{}
		for _, n := range list {
			n = strings.TrimSpace(n)
			switch {
			case n == "" || n == "none":
			case n == "all":
				for _, k := range known {
					sel[k] = true
				}
			case n == "default":
				for _, k := range defaults {
					sel[k] = true
				}
			case !slices.Contains(known, n):
				return nil, fmt.Errorf("unknown %s %q (known: %s)", what, n, strings.Join(known, ", "))
			default:
				sel[n] = true
			}
		}
		return sel, nil
	}
	var cpNames, cpDefaults, fNames, fDefaults []string
	for _, p := range CrashPoints {
		cpNames = append(cpNames, p.Name)
		if p.OptIn == "" {
			cpDefaults = append(cpDefaults, p.Name)
		}
	}
	for _, f := range Faults {
		fNames = append(fNames, f.Name)
		if f.OptIn == "" {
			fDefaults = append(fDefaults, f.Name)
		}
	}
	cps, faults := c.CrashPoints, c.Faults
	if cps == nil {
		cps = []string{"default"}
	}
	if faults == nil {
		faults = []string{"default"}
	}
	selCP, err := pick(cps, cpNames, cpDefaults, "crash point")
	if err != nil {
		return nil, err
	}
	selF, err := pick(faults, fNames, fDefaults, "fault")
	if err != nil {
		return nil, err
	}
	for _, f := range Faults {
		if f.OwnCluster && selF[f.Name] && !ownCluster {
			if slices.Contains(faults, f.Name) {
				return nil, fmt.Errorf("fault %s is done to the test's own PostgreSQL cluster: leave --database-url empty, or drop %s from --faults", f.Name, f.Name)
			}
			delete(selF, f.Name) // "all" and "default" mean all that apply
		}
	}
	for i := range CrashPoints {
		if selCP[CrashPoints[i].Name] {
			out = append(out, scenario{name: CrashPoints[i].Name, point: &CrashPoints[i]})
		}
	}
	for i := range Faults {
		if selF[Faults[i].Name] {
			out = append(out, scenario{name: "fault:" + Faults[i].Name, fault: &Faults[i]})
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no crash point and no fault selected")
	}
	return out, nil
}

func (c *Config) validate(nScenarios int) error {
	switch {
	case c.Runs < nScenarios:
		return fmt.Errorf("--runs %d: need at least one run per scenario (%d selected)", c.Runs, nScenarios)
	case c.Workers < 1 || c.Workers > 32:
		return fmt.Errorf("--workers %d: want 1..32", c.Workers)
	case c.Batch < 1 || c.Batch > 200:
		return fmt.Errorf("--batch %d: want 1..200", c.Batch)
	case c.Concurrency < 1 || c.Concurrency > 100:
		return fmt.Errorf("--concurrency %d: want 1..100", c.Concurrency)
	case c.MaxAttempts < 0:
		return fmt.Errorf("--max-attempts %d: want at least 1 (0: the runtime's default)", c.MaxAttempts)
	case c.PSP != "" && c.PSP != PSPV1 && c.PSP != PSPAPIPix:
		return fmt.Errorf("--psp %q: want %s or %s", c.PSP, PSPV1, PSPAPIPix)
	case c.DBSynchronousCommit != "" && c.DatabaseURL != "":
		return errors.New("--db-synchronous-commit sets the test's own cluster's database default: leave --database-url empty")
	case c.DBSynchronousCommit != "" && !slices.Contains([]string{"on", "off", "local", "remote_write", "remote_apply"}, c.DBSynchronousCommit):
		return fmt.Errorf("--db-synchronous-commit %q: want on, off, local, remote_write or remote_apply", c.DBSynchronousCommit)
	case c.Standby != "" && c.Standby != "sync" && c.Standby != "async":
		return fmt.Errorf("--standby %q: want sync or async", c.Standby)
	case c.Journal != "on" && c.Journal != "off":
		return fmt.Errorf("--journal %q: want on or off", c.Journal)
	case !(c.RefundRate >= 0 && c.RefundRate <= 1):
		return fmt.Errorf("--refund-rate %v: want 0..1", c.RefundRate)
	case !(c.WrongAmountRate >= 0 && c.WrongAmountRate <= 1):
		return fmt.Errorf("--wrong-amount-rate %v: want 0..1", c.WrongAmountRate)
	case c.Timings.RescueAfter <= c.Timings.JobTimeout:
		return fmt.Errorf("--rescue-after (%s) must exceed --job-timeout (%s)", c.Timings.RescueAfter, c.Timings.JobTimeout)
	case c.Timings.ClaimTTL <= c.Timings.ModelTimeout:
		return fmt.Errorf("--claim-ttl (%s) must exceed --model-timeout (%s)", c.Timings.ClaimTTL, c.Timings.ModelTimeout)
	}
	return nil
}
