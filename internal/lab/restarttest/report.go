package restarttest

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Settings are the knobs a run used, printed with its report so that it
// can be read (and repeated) on its own.
type Settings struct {
	Scenarios       []string `json:"scenarios"`
	Workers         int      `json:"workers"`
	Batch           int      `json:"batch"`
	Journal         string   `json:"journal"`
	Naive           bool     `json:"naive"`
	WrongAmountRate float64  `json:"wrong_amount_rate"`
	ModelLatency    string   `json:"model_latency"`
	WorkerFlags     string   `json:"worker_flags"`
	ServeFlags      string   `json:"serve_flags"`
	RescueAfter     string   `json:"rescue_after"`
	Redelivery      string   `json:"redelivery"`
	Database        string   `json:"database"`
	Schema          string   `json:"schema"`
}

// Row is one scenario's line of the table (or the total).
type Row struct {
	Scenario string `json:"scenario"`
	// What the scenario does, in a sentence.
	Description string `json:"description"`
	Runs        int    `json:"runs"`
	Messages    int    `json:"messages"`
	// Kills: worker processes killed during the scenario's batches;
	// AtPoint of them at the scenario's own point (failpoint fired, proxy
	// kill, random timer); Hit: runs that had a job in flight in a killed
	// worker.
	Kills   int `json:"kills"`
	AtPoint int `json:"kills_at_point"`
	Hit     int `json:"runs_hit"`
	// Redeliveries: job runs beyond the first (inbox and reply jobs).
	Redeliveries int `json:"redeliveries"`
	Rescues      int `json:"rescues"`
	KeysEqual    int `json:"keys_equal"`
	// Charges: intents by number of charges ("1": n means n intents
	// charged exactly once); Duplicates: charges beyond the first.
	Charges    map[int]int `json:"charges_per_intent"`
	Duplicates int         `json:"duplicate_charges"`
	Lost       int         `json:"lost"`
	Stuck      int         `json:"stuck"`
	// Replies beyond one per message.
	DuplicateReplies int     `json:"duplicate_replies"`
	ModelCalls       int     `json:"model_calls"`
	ModelReplayed    int     `json:"model_replayed"`
	ModelPerMessage  float64 `json:"model_calls_per_message"`
	MaxModelCalls    int     `json:"max_model_calls_per_message"`
	PSPRequests      int     `json:"psp_requests"`
	FaultsInjected   int     `json:"faults_injected,omitempty"`
	PGRestarts       int     `json:"pg_restarts,omitempty"`
	PGCrashes        int     `json:"pg_crashes,omitempty"`
	Failovers        int     `json:"failovers,omitempty"`
	// DBDownMax: the longest a crash (until recovery ended) or a failover
	// (until the standby took writes) left the processes without a
	// database.
	DBDownMax    string `json:"db_down_max,omitempty"`
	RaceHandouts int    `json:"race_handouts,omitempty"`
	// Covered: the scenario's point was reached (or its fault happened) at
	// least once.
	Covered bool `json:"covered"`
}

// Report is the outcome of a restart test.
type Report struct {
	Pass    bool   `json:"pass"`
	Verdict string `json:"verdict"` // the one-line verdict
	// Failures lists every reason Pass is false.
	Failures []string `json:"failures"`
	Seed     int64    `json:"seed"`
	Runs     int      `json:"runs"`
	Naive    bool     `json:"naive"`
	Duration string   `json:"duration"`
	Seconds  float64  `json:"seconds"`
	Settings Settings `json:"settings"`
	Rows     []Row    `json:"rows"`
	Total    Row      `json:"total"`
	// MultiSpelling: runs whose intent was asked for in several messages
	// with the key spelled differently (CPF punctuated and bare; a phone
	// three ways), and how many of them ended with one key and one charge.
	MultiSpelling   int `json:"multi_spelling_runs"`
	MultiSpellingOK int `json:"multi_spelling_one_key_one_charge"`
	// WrongAmounts: runs charged (once) at an amount the model misread.
	WrongAmounts int `json:"wrong_amounts"`
	// UnattributedRequests: PSP requests whose key belongs to no intent
	// and no charge (a key drawn inside the attempt that charged nothing).
	UnattributedRequests int `json:"unattributed_psp_requests"`
	PSPRequests          int `json:"psp_requests"`
	// WebhookPosts: deliveries of the messages through the signed webhook
	// (duplicates included), for Messages messages; RunsHitTwice: runs
	// that more than one kill found in flight (a redelivered job killed
	// again).
	WebhookPosts int `json:"webhook_posts"`
	Messages     int `json:"messages"`
	RunsHitTwice int `json:"runs_hit_twice"`
	// RiverLeader: after database faults, River's leader once the
	// redelivery was done, elected after the last fault.
	RiverLeader string `json:"river_leader,omitempty"`
	// StartedActions: actions of any kind left 'started' at the end.
	StartedActions int         `json:"started_actions"`
	Problems       []string    `json:"problems,omitempty"`
	Kills          []Kill      `json:"kills"`
	Results        []RunResult `json:"results"`

	// APIPix holds the API Pix flavour's checks (nil for the v1 PSP).
	APIPix *APIPixCheck `json:"apipix,omitempty"`
	// Refunds holds the refunds' (API Pix with Config.RefundRate).
	Refunds *RefundCheck `json:"refunds,omitempty"`
}

func (t *tester) description(name string) string {
	for _, s := range t.scenarios {
		if s.name == name {
			if s.point != nil {
				return s.point.Description
			}
			return s.fault.Description
		}
	}
	return ""
}

// report aggregates the runs into rows and decides the verdict. Called
// with t.mu held.
func (t *tester) report(results []RunResult, unattributed, pspRequests, started int) *Report {
	d := time.Since(t.start)
	rep := &Report{Seed: t.cfg.Seed, Runs: len(results), Naive: t.cfg.Naive, Duration: elapsed(d), Seconds: d.Seconds(),
		Settings: t.settings, UnattributedRequests: unattributed, PSPRequests: pspRequests, StartedActions: started,
		Problems: slices.Clone(t.problems), Kills: slices.Clone(t.kills), Results: results}
	rows := t.scenarioRows()
	for _, k := range t.kills {
		rows[k.Scenario].countKill(k)
	}
	for _, r := range results {
		rows[r.Scenario].addResult(r)
		rep.addResult(r)
	}
	total := Row{Scenario: "total", Charges: map[int]int{}, Covered: true}
	for _, s := range t.scenarios {
		row := rows[s.name]
		row.Covered = s.covered(row)
		row.ModelPerMessage = modelPerMessage(row)
		rep.Rows = append(rep.Rows, *row)
		total.add(*row)
		total.Covered = total.Covered && row.Covered
	}
	total.ModelPerMessage = modelPerMessage(&total)
	rep.Total = total
	fail := t.failures(rep, unattributed, started)
	rep.Failures = fail
	rep.Pass = len(fail) == 0
	if rep.Pass {
		rep.Verdict = fmt.Sprintf("PASS: %d runs, %d worker kills, %d redeliveries: every intent charged exactly once, 0 lost, 0 stuck, one key per intent on every attempt (%d PSP requests), every scenario covered",
			total.Runs, total.Kills, total.Redeliveries, pspRequests)
	} else {
		rep.Verdict = "FAIL: " + strings.Join(fail, ", ")
		if t.cfg.Naive {
			rep.Verdict += " (naive control: a fresh key per attempt; failing is the expected outcome)"
		}
	}
	return rep
}

// scenarioRows starts a row for every scenario, with what its batches
// did beyond kills.
func (t *tester) scenarioRows() map[string]*Row {
	rows := map[string]*Row{}
	for _, s := range t.scenarios {
		st := t.stats[s.name]
		rows[s.name] = &Row{Scenario: s.name, Description: t.description(s.name), Charges: map[int]int{},
			FaultsInjected: st.faultsInjected, PGRestarts: st.pgRestarts, RaceHandouts: st.raceHandouts,
			PGCrashes: st.pgCrashes, Failovers: st.failovers}
		if st.dbDown > 0 {
			rows[s.name].DBDownMax = elapsed(st.dbDown)
		}
	}
	return rows
}

// countKill adds a kill of the row's scenario.
func (row *Row) countKill(k Kill) {
	row.Kills++
	row.Hit += k.RunsHit
	if k.atPoint() {
		row.AtPoint++
	}
}

// atPoint reports whether the kill met its scenario's point: its
// failpoint fired, the proxy cut the call, or the random timer ran out.
func (k Kill) atPoint() bool { return k.How == "failpoint" || k.How == "proxy" || k.How == "timer" }

// addResult adds a run of the row's scenario.
func (row *Row) addResult(r RunResult) {
	row.Runs++
	row.Messages += r.Messages
	row.Redeliveries += r.Redeliveries
	row.Rescues += r.Rescues
	if r.KeysEqual {
		row.KeysEqual++
	}
	row.Charges[r.Charges]++
	row.Duplicates += max(0, r.Charges-1)
	if r.Lost {
		row.Lost++
	}
	row.Stuck += r.Stuck
	row.DuplicateReplies += max(0, r.Replies-r.Messages)
	row.ModelCalls += r.ModelCalls
	row.ModelReplayed += r.ModelReplayed
	row.MaxModelCalls = max(row.MaxModelCalls, r.MaxModelCalls)
	row.PSPRequests += r.PSPRequests
}

// addResult adds a run to the report's figures beyond the rows.
func (rep *Report) addResult(r RunResult) {
	if r.Messages > 1 {
		rep.MultiSpelling++
		if r.KeysEqual && r.Charges == 1 {
			rep.MultiSpellingOK++
		}
	}
	if r.WrongAmount {
		rep.WrongAmounts++
	}
	rep.WebhookPosts += r.Deliveries
	rep.Messages += r.Messages
	if r.Hits > 1 {
		rep.RunsHitTwice++
	}
}

// add sums o into a total row; Covered, ModelPerMessage and DBDownMax
// are the caller's.
func (row *Row) add(o Row) {
	row.Runs += o.Runs
	row.Messages += o.Messages
	row.Kills += o.Kills
	row.AtPoint += o.AtPoint
	row.Hit += o.Hit
	row.Redeliveries += o.Redeliveries
	row.Rescues += o.Rescues
	row.KeysEqual += o.KeysEqual
	for n, c := range o.Charges {
		row.Charges[n] += c
	}
	row.Duplicates += o.Duplicates
	row.Lost += o.Lost
	row.Stuck += o.Stuck
	row.DuplicateReplies += o.DuplicateReplies
	row.ModelCalls += o.ModelCalls
	row.ModelReplayed += o.ModelReplayed
	row.MaxModelCalls = max(row.MaxModelCalls, o.MaxModelCalls)
	row.PSPRequests += o.PSPRequests
	row.FaultsInjected += o.FaultsInjected
	row.PGRestarts += o.PGRestarts
	row.PGCrashes += o.PGCrashes
	row.Failovers += o.Failovers
	row.RaceHandouts += o.RaceHandouts
}

// covered reports whether the scenario's point was reached (or its fault
// happened) in row.
func (s scenario) covered(row *Row) bool {
	switch {
	case s.point != nil:
		return row.AtPoint > 0
	case s.fault.Name == "pg-restart":
		return row.PGRestarts > 0
	case s.fault.Name == "pg-crash":
		return row.PGCrashes > 0
	case s.fault.Name == "pg-failover":
		return row.Failovers > 0
	case s.fault.Name == "race":
		return row.RaceHandouts > 0
	default:
		return row.FaultsInjected > 0
	}
}

func modelPerMessage(row *Row) float64 {
	if row.Messages == 0 {
		return 0
	}
	return float64(row.ModelCalls) / float64(row.Messages)
}

// failures is the verdict: the four conditions, plus what else
// would mean the test did not test (a scenario never reached, a harness
// failure) or a side effect repeated elsewhere (a reply sent twice).
func (t *tester) failures(rep *Report, unattributed, started int) []string {
	total := rep.Total
	dupIntents := 0
	for n, c := range total.Charges {
		if n > 1 {
			dupIntents += c
		}
	}
	var fail failureList
	fail.add(total.Duplicates > 0, "%d duplicate charges on %d of %d intents", total.Duplicates, dupIntents, total.Runs)
	fail.add(total.Lost > 0, "%d lost intents", total.Lost)
	fail.add(total.Stuck > 0 || started > 0, "%d actions left started", max(total.Stuck, started))
	fail.add(total.KeysEqual < total.Runs, "%d intents whose attempts carried different keys", total.Runs-total.KeysEqual)
	fail.add(unattributed > 0, "%d PSP requests with a key of no intent", unattributed)
	fail.add(total.DuplicateReplies > 0, "%d duplicate replies", total.DuplicateReplies)
	for _, row := range rep.Rows {
		fail.add(!row.Covered, "%s not covered (never reached)", row.Scenario)
	}
	fail.add(len(t.problems) > 0, "%d harness problems (listed below)", len(t.problems))
	return fail
}

// failureList collects the reasons a verdict fails.
type failureList []string

// add appends the reason when bad holds.
func (f *failureList) add(bad bool, format string, a ...any) {
	if bad {
		*f = append(*f, fmt.Sprintf(format, a...))
	}
}

// merge adds the failures of a check made after the runs' verdict (the
// receipts, the refunds); pass is what a passing check adds to a passing
// verdict.
func (rep *Report) merge(fail []string, pass string) {
	if len(fail) == 0 {
		if rep.Pass {
			rep.Verdict += pass
		}
		return
	}
	rep.Failures = append(rep.Failures, fail...)
	if rep.Pass {
		rep.Pass = false
		rep.Verdict = "FAIL: " + strings.Join(fail, ", ")
	} else {
		rep.Verdict += "; " + strings.Join(fail, ", ")
	}
}
