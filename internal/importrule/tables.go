package importrule

// Owners names, for each table of retrysafe's schema (migrations/), the one
// package that holds SQL naming it. Every other package reaches the table
// through that package's Go API, inside the caller's transaction where it
// needs one. The migrations create the tables and are not checked; River's
// tables (river_*) belong to River, and the module reaches them through
// River's API.
var Owners = map[string]string{
	"intents":          "internal/ledger",
	"intent_revisions": "internal/ledger",
	"actions":          "internal/ledger",

	"conversations":   "agent",
	"messages":        "agent",
	"agent_turns":     "agent",
	"model_calls":     "agent",
	"model_journal":   "agent",
	"inbound_ignored": "agent",

	"orders":                "webhook",
	"payment_notifications": "webhook",
	"payment_webhook_log":   "webhook",
	"processed_effects":     "webhook",
	"stale_events":          "webhook",

	"idempotency_requests": "idempotency",

	"console_operators": "server/console",
	"console_sessions":  "server/console",
	"console_audit":     "server/console",
}

// SQLAllowed lists the few packages allowed SQL on a table they do not
// own ({package, table}), each with why. Only the lab's crash test is
// here: it checks River's own state after a crash (which jobs are running,
// available, rescued or snoozed, and which process River elected leader
// after a database fault), which River's API does not expose.
var SQLAllowed = map[[2]string]string{
	{"internal/lab/restarttest", "river_job"}:    "the crash test reads and nudges River's jobs by state, attempt, errors and snoozes, as River stores them",
	{"internal/lab/restarttest", "river_leader"}: "the crash test checks that River elected a leader after the last database fault; River has no API for it",
}

// SQLPending lists packages that hold SQL naming a table they do not own
// ({package, table}), or that export a SQL string ({package, "exported
// Name"}), each with the issue that removes it. The test fails when an entry
// is no longer needed.
var SQLPending = map[[2]string]string{}
