package agent

import "github.com/retrysafe/retrysafe/executor"

// Failpoint names (see internal/failpoint). The tool points are the
// executor's (hit on executor.Config.Failpoints around each provider call,
// also with ".<action>" appended: "agent.provider-answered.pix.charge"), so
// that a crash test can target one tool.
const (
	// FailModelAnswered: a model answer is in hand (recorded in the ledger
	// and, journal on, in the journal), nothing done with it yet.
	FailModelAnswered = "agent.model-answered"
	// FailIntentFrozen: the tool call's intent is frozen (committed), the
	// action not claimed yet.
	FailIntentFrozen = "agent.intent-frozen"
	// FailActionClaimed: the executor committed the claim (started +
	// lease) and is about to call the provider.
	FailActionClaimed = executor.FailActionClaimed
	// FailProviderAnswered: the provider answered, the executor has not
	// recorded the completion.
	FailProviderAnswered = executor.FailProviderAnswered
	// FailActionCompleted: the executor recorded the outcome; the turn is
	// not recorded yet.
	FailActionCompleted = "agent.action-completed"
	// FailTurnRecorded: the turn, the reply intent and the reply job are
	// committed; the inbox job is not acknowledged.
	FailTurnRecorded = "agent.turn-recorded"
	// FailInboxBeforeAck: the inbox handler is about to return success.
	FailInboxBeforeAck = "agent.inbox-before-ack"
	// FailReplyBeforeAck: the reply is sent and its status recorded; the
	// reply job is not acknowledged.
	FailReplyBeforeAck = "agent.reply-before-ack"
)
