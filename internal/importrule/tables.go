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

// SQLPending lists packages that hold SQL naming a table they do not own
// ({package, table}), or that export a SQL string ({package, "exported
// Name"}), each with the issue that removes it. The test fails when an entry
// is no longer needed.
var SQLPending = map[[2]string]string{
	{"executor", "actions"}:                           "issue 19",
	{"executor", "exported ActionClaim"}:              "issue 19",
	{"executor", "exported ActionClaimMany"}:          "issue 19",
	{"executor", "exported ActionComplete"}:           "issue 19",
	{"executor", "exported ActionCompleteMany"}:       "issue 19",
	{"executor", "exported ActionGet"}:                "issue 19",
	{"executor", "exported ActionGetForIntent"}:       "issue 19",
	{"executor", "exported ActionGetForIntentMany"}:   "issue 19",
	{"executor", "exported ActionHeartbeat"}:          "issue 19",
	{"executor", "exported ActionList"}:               "issue 19",
	{"executor", "exported ActionPurge"}:              "issue 19",
	{"executor", "exported ActionReconcileTake"}:      "issue 19",
	{"executor", "exported ActionRelease"}:            "issue 19",
	{"executor", "exported ActionResolve"}:            "issue 19",
	{"executor", "exported ActionRetake"}:             "issue 19",
	{"executor", "exported ActionTakeover"}:           "issue 19",
	{"executor", "exported IntentActionClaimNewMany"}: "issue 19",
	{"executor", "exported IntentActionGet"}:          "issue 19",
	{"executor", "exported IntentActionGetMany"}:      "issue 19",
	{"executor", "exported IntentGetByKeyMany"}:       "issue 19",
	{"executor", "intents"}:                           "issue 19",
	{"intent", "actions"}:                             "issue 19",
	{"intent", "exported ActionStatusGet"}:            "issue 19",
	{"intent", "exported ActionTombstoneDelete"}:      "issue 19",
	{"intent", "exported ActionTombstoneInsert"}:      "issue 19",
	{"intent", "exported FreezeManyInsert"}:           "issue 19",
	{"intent", "exported IntentAmend"}:                "issue 19",
	{"intent", "exported IntentFreeze"}:               "issue 19",
	{"intent", "exported IntentGet"}:                  "issue 19",
	{"intent", "exported IntentGetByKey"}:             "issue 19",
	{"intent", "exported IntentGetMany"}:              "issue 19",
	{"intent", "exported IntentRevisionInsert"}:       "issue 19",
	{"intent", "exported IntentRevisionList"}:         "issue 19",
	{"intent", "intent_revisions"}:                    "issue 19",
	{"intent", "intents"}:                             "issue 19",
	{"internal/harness", "actions"}:                   "issue 19",
	{"internal/harness", "intents"}:                   "issue 19",
	{"internal/restarttest", "actions"}:               "issue 19",
	{"internal/restarttest", "intents"}:               "issue 19",
	{"internal/restarttest", "river_job"}:             "issue 19",
	{"internal/restarttest", "river_leader"}:          "issue 19",
	{"server/console", "actions"}:                     "issue 19",
	{"server/console", "intents"}:                     "issue 19",
	{"server/sidecar", "actions"}:                     "issue 19",
	{"webhook", "actions"}:                            "issue 19",
	{"webhook", "intents"}:                            "issue 19",
}
