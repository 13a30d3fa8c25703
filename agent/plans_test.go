package agent_test

import (
	"testing"

	"github.com/retrysafe/retrysafe/agent"
	"github.com/retrysafe/retrysafe/internal/pgtest"
)

// Each statement's generic plan, made on tables no ANALYZE has seen (a new
// deployment, or any time on a server with autovacuum off), must look its
// rows up by key: that plan is what a pooled connection keeps. Before
// migration 007, a message looked up by (tenant, id) went through the
// conversation index, which led with tenant_id, and read every message of
// the tenant; the journal's read joined model_calls by tenant.
func TestGenericPlansReadWhatTheyName(t *testing.T) {
	t.Parallel()
	pgtest.CheckGenericPlans(t, pgtest.PlanCheck{
		Tables: []string{"messages", "conversations", "agent_turns", "model_calls", "model_journal", "intents", "actions", "inbound_ignored"},
		Statements: []pgtest.Statement{
			{Name: "MessageInsert", SQL: agent.MessageInsert},
			{Name: "MessageInsertReply", SQL: agent.MessageInsertReply},
			{Name: "MessageClaim", SQL: agent.MessageClaim},
			{Name: "MessageClaimState", SQL: agent.MessageClaimState},
			{Name: "MessageRelease", SQL: agent.MessageRelease},
			{Name: "MessageMarkProcessed", SQL: agent.MessageMarkProcessed},
			{Name: "MessageListConversation", SQL: agent.MessageListConversation},
			{Name: "ConversationGet", SQL: agent.ConversationGet},
			{Name: "ConversationUpsert", SQL: agent.ConversationUpsert},
			{Name: "TurnInsert", SQL: agent.TurnInsert},
			{Name: "TurnSetReplyKey", SQL: agent.TurnSetReplyKey},
			{Name: "TurnSetReplyStatus", SQL: agent.TurnSetReplyStatus},
			{Name: "TurnGet", SQL: agent.TurnGet},
			{Name: "ModelCallInsert", SQL: agent.ModelCallInsert},
			{Name: "ModelJournalInsert", SQL: agent.ModelJournalInsert},
			{Name: "ModelJournalGet", SQL: agent.ModelJournalGet},
			{Name: "IgnoredInsert", SQL: agent.IgnoredInsert},
			{Name: "MessageLastInbound", SQL: agent.MessageLastInbound},
			{Name: "TurnSetReplySent", SQL: agent.TurnSetReplySent},
			{Name: "TurnForStatusByKey", SQL: agent.TurnForStatusByKey},
			{Name: "TurnForStatusByWamid", SQL: agent.TurnForStatusByWamid},
			{Name: "TurnMergeStatus", SQL: agent.TurnMergeStatus},
		},
	})
}
