package restarttest

import (
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
}

// Faults lists the extra faults.
var Faults = []Fault{
	{"pg-restart", "PostgreSQL restarted (pg_ctl restart) while the batch is in flight; only on the test's own cluster"},
	{"psp-500", "the PSP answers 500 without charging (fail-before): the batch worker's first charge request, then half of them"},
	{"psp-drop", "the PSP charges, then drops the connection (drop-after): first charge request, then half"},
	{"psp-fail-after", "the PSP charges, then answers 500 (fail-after): first charge request, then half"},
	{"psp-slow", "the PSP charges, then answers after the worker's provider timeout (slow): first charge request, then half"},
	{"race", "two workers race for the same messages: the queue hands a running job to a second worker"},
}

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

	// DatabaseURL: empty starts a private cluster (needed by pg-restart).
	DatabaseURL string
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
	if c.Runs == 0 {
		c.Runs = 100
	}
	if c.Workers == 0 {
		c.Workers = 2
	}
	if c.Batch == 0 {
		c.Batch = 8
	}
	if c.Concurrency == 0 {
		c.Concurrency = 8
	}
	if c.Journal == "" {
		c.Journal = "on"
	}
	if c.Timings == (Timings{}) {
		c.Timings = DefaultTimings()
	}
	if c.SettleTimeout == 0 {
		c.SettleTimeout = 3 * time.Minute
	}
	if c.Templates == nil {
		c.Templates = DefaultTemplates()
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
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
	var cpNames, cpDefaults, fNames []string
	for _, p := range CrashPoints {
		cpNames = append(cpNames, p.Name)
		if p.OptIn == "" {
			cpDefaults = append(cpDefaults, p.Name)
		}
	}
	for _, f := range Faults {
		fNames = append(fNames, f.Name)
	}
	cps, faults := c.CrashPoints, c.Faults
	if cps == nil {
		cps = []string{"default"}
	}
	explicitPG := slices.Contains(faults, "pg-restart")
	if faults == nil {
		faults = []string{"default"}
	}
	selCP, err := pick(cps, cpNames, cpDefaults, "crash point")
	if err != nil {
		return nil, err
	}
	selF, err := pick(faults, fNames, fNames, "fault")
	if err != nil {
		return nil, err
	}
	if selF["pg-restart"] && !ownCluster {
		if explicitPG {
			return nil, errors.New("fault pg-restart restarts the test's own PostgreSQL cluster: leave --database-url empty, or drop pg-restart from --faults")
		}
		delete(selF, "pg-restart") // "all" means all that apply
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
	case c.Journal != "on" && c.Journal != "off":
		return fmt.Errorf("--journal %q: want on or off", c.Journal)
	case !(c.WrongAmountRate >= 0 && c.WrongAmountRate <= 1):
		return fmt.Errorf("--wrong-amount-rate %v: want 0..1", c.WrongAmountRate)
	case c.Timings.RescueAfter <= c.Timings.JobTimeout:
		return fmt.Errorf("--rescue-after (%s) must exceed --job-timeout (%s)", c.Timings.RescueAfter, c.Timings.JobTimeout)
	case c.Timings.ClaimTTL <= c.Timings.ModelTimeout:
		return fmt.Errorf("--claim-ttl (%s) must exceed --model-timeout (%s)", c.Timings.ClaimTTL, c.Timings.ModelTimeout)
	}
	return nil
}
