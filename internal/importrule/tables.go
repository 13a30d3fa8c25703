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
	{"agent", "exported ConversationGet"}:             "issue 19",
	{"agent", "exported ConversationUpsert"}:          "issue 19",
	{"agent", "exported IgnoredInsert"}:               "issue 19",
	{"agent", "exported MessageClaim"}:                "issue 19",
	{"agent", "exported MessageClaimState"}:           "issue 19",
	{"agent", "exported MessageInsert"}:               "issue 19",
	{"agent", "exported MessageInsertReply"}:          "issue 19",
	{"agent", "exported MessageLastInbound"}:          "issue 19",
	{"agent", "exported MessageListConversation"}:     "issue 19",
	{"agent", "exported MessageMarkProcessed"}:        "issue 19",
	{"agent", "exported MessageRelease"}:              "issue 19",
	{"agent", "exported ModelCallInsert"}:             "issue 19",
	{"agent", "exported ModelJournalGet"}:             "issue 19",
	{"agent", "exported ModelJournalInsert"}:          "issue 19",
	{"agent", "exported TurnForStatusByKey"}:          "issue 19",
	{"agent", "exported TurnForStatusByWamid"}:        "issue 19",
	{"agent", "exported TurnGet"}:                     "issue 19",
	{"agent", "exported TurnInsert"}:                  "issue 19",
	{"agent", "exported TurnMergeStatus"}:             "issue 19",
	{"agent", "exported TurnSetReplyKey"}:             "issue 19",
	{"agent", "exported TurnSetReplySent"}:            "issue 19",
	{"agent", "exported TurnSetReplyStatus"}:          "issue 19",
	{"internal/harness", "model_calls"}:               "issue 19",
	{"internal/harness", "orders"}:                    "issue 19",
	{"internal/harness", "payment_webhook_log"}:       "issue 19",
	{"internal/restarttest", "agent_turns"}:           "issue 19",
	{"internal/restarttest", "messages"}:              "issue 19",
	{"internal/restarttest", "model_calls"}:           "issue 19",
	{"internal/restarttest", "payment_notifications"}: "issue 19",
	{"internal/restarttest", "processed_effects"}:     "issue 19",
	{"internal/restarttest", "river_job"}:             "issue 19",
	{"internal/restarttest", "river_leader"}:          "issue 19",
	{"internal/tokens", "model_calls"}:                "issue 19",
	{"server/console", "agent_turns"}:                 "issue 19",
	{"server/console", "model_calls"}:                 "issue 19",
	{"server/console", "payment_notifications"}:       "issue 19",
	{"server/console", "payment_webhook_log"}:         "issue 19",
	{"server/console", "processed_effects"}:           "issue 19",
	{"webhook", "conversations"}:                      "issue 19",
	{"webhook", "exported ConversationByInvoice"}:     "issue 19",
	{"webhook", "exported EffectInsert"}:              "issue 19",
	{"webhook", "exported EffectMarkStale"}:           "issue 19",
	{"webhook", "exported EffectPurge"}:               "issue 19",
	{"webhook", "exported LogInsert"}:                 "issue 19",
	{"webhook", "exported LogList"}:                   "issue 19",
	{"webhook", "exported LogPurge"}:                  "issue 19",
	{"webhook", "exported NotificationGet"}:           "issue 19",
	{"webhook", "exported NotificationInsert"}:        "issue 19",
	{"webhook", "exported NotificationList"}:          "issue 19",
	{"webhook", "exported NotificationSettle"}:        "issue 19",
	{"webhook", "exported OrderByPayment"}:            "issue 19",
	{"webhook", "exported OrderGet"}:                  "issue 19",
	{"webhook", "exported OrderTransition"}:           "issue 19",
	{"webhook", "exported PaidPaymentOfOrder"}:        "issue 19",
	{"webhook", "exported StaleEventInsert"}:          "issue 19",
	{"webhook", "exported StaleEventList"}:            "issue 19",
}
