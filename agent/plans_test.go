package agent_test

import (
	"context"
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
	ctx := context.Background()
	pool, _ := pgtest.Schema(t, &pgtest.Opts{MaxConns: 1})
	c, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	conn := c.Hijack() // it keeps plan_cache_mode forced: not back to the pool
	defer conn.Close(ctx)
	tables := []string{"messages", "conversations", "agent_turns", "model_calls", "model_journal", "intents", "actions"}
	for _, s := range []struct{ name, sql string }{
		{"MessageInsert", agent.MessageInsert},
		{"MessageInsertReply", agent.MessageInsertReply},
		{"MessageClaim", agent.MessageClaim},
		{"MessageClaimState", agent.MessageClaimState},
		{"MessageRelease", agent.MessageRelease},
		{"MessageMarkProcessed", agent.MessageMarkProcessed},
		{"MessageListConversation", agent.MessageListConversation},
		{"ConversationGet", agent.ConversationGet},
		{"ConversationUpsert", agent.ConversationUpsert},
		{"TurnInsert", agent.TurnInsert},
		{"TurnSetReplyKey", agent.TurnSetReplyKey},
		{"TurnSetReplyStatus", agent.TurnSetReplyStatus},
		{"TurnGet", agent.TurnGet},
		{"ModelCallInsert", agent.ModelCallInsert},
		{"ModelJournalInsert", agent.ModelJournalInsert},
		{"ModelJournalGet", agent.ModelJournalGet},
	} {
		problems, err := pgtest.GenericPlanProblems(ctx, conn, s.sql, tables)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		for _, p := range problems {
			t.Errorf("%s: %s", s.name, p)
		}
	}
}
