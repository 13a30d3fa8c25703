package pgtest

import "testing"

func TestMentions(t *testing.T) {
	for _, c := range []struct {
		cond, column string
		want         bool
	}{
		{"(tenant_id = $1)", "tenant_id", true},
		{"((tenant_id = $1) AND (idem_key = $2))", "idem_key", true},
		{"(old_tenant_id = $1)", "tenant_id", false},
		{"(tenant_id_x = $1)", "tenant_id", false},
		{"(tenant_idx = $1) AND (tenant_id = $2)", "tenant_id", true},
		{"(lease_until <= now())", "lease_until", true},
		{"(a.seq <= $3)", "seq", true},
		{"", "seq", false},
	} {
		if got := mentions(c.cond, c.column); got != c.want {
			t.Errorf("mentions(%q, %q) = %v, want %v", c.cond, c.column, got, c.want)
		}
	}
}

func TestPlanCheck(t *testing.T) {
	keys := map[string][]string{
		"actions":                   nil,
		"actions_pkey":              {"tenant_id", "idem_key"},
		"actions_started_lease_idx": {"lease_until"},
		"conversations_invoice_idx": {"tenant_id", "invoice_ref", "updated_at"},
	}
	for _, c := range []struct {
		name string
		n    planNode
		want int
	}{
		{"lookup by key", planNode{NodeType: "Index Scan", Index: "actions_pkey", IndexCond: "((tenant_id = $1) AND (idem_key = $2))"}, 0},
		{"seq scan", planNode{NodeType: "Seq Scan", Relation: "actions"}, 1},
		{"seq scan of another table", planNode{NodeType: "Seq Scan", Relation: "other"}, 0},
		{"whole index", planNode{NodeType: "Index Scan", Index: "actions_started_lease_idx"}, 1},
		{"tenant only", planNode{NodeType: "Bitmap Index Scan", Index: "actions_pkey", IndexCond: "(tenant_id = $1)"}, 1},
		{"not the leading column", planNode{NodeType: "Index Scan", Index: "actions_pkey", IndexCond: "(idem_key = $1)"}, 1},
		{"leading columns, the last to order", planNode{NodeType: "Index Scan", Index: "conversations_invoice_idx", IndexCond: "((tenant_id = $1) AND (invoice_ref = $2))"}, 0},
		{"nested", planNode{NodeType: "Nested Loop", Plans: []planNode{
			{NodeType: "Function Scan"},
			{NodeType: "Index Scan", Index: "actions_pkey", IndexCond: "(tenant_id = u.t)"},
		}}, 1},
	} {
		var problems []string
		c.n.check(keys, &problems)
		if len(problems) != c.want {
			t.Errorf("%s: %q, want %d problems", c.name, problems, c.want)
		}
	}
}

func TestUnscoped(t *testing.T) {
	scoped := map[string]bool{"actions": true}
	for _, c := range []struct {
		name string
		n    planNode
		want int
	}{
		{"lookup by tenant and key", planNode{NodeType: "Index Scan", Relation: "actions", IndexCond: "((tenant_id = $1) AND (idem_key = $2))"}, 0},
		{"lookup by key alone", planNode{NodeType: "Index Scan", Relation: "actions", IndexCond: "(idem_key = $2)"}, 1},
		{"tenant in the filter", planNode{NodeType: "Tid Scan", Relation: "actions", TIDCond: "(ctid = due.ctid)", Filter: "(tenant_id = due.tenant_id)"}, 0},
		{"bitmap heap scan over a tenant's index condition", planNode{NodeType: "Bitmap Heap Scan", Relation: "actions",
			Plans: []planNode{{NodeType: "Bitmap Index Scan", Index: "actions_pkey", IndexCond: "(tenant_id = $1)"}}}, 0},
		{"insert reads nothing", planNode{NodeType: "ModifyTable", Relation: "actions"}, 0},
		{"scan of an unguarded table", planNode{NodeType: "Seq Scan", Relation: "other"}, 0},
		{"update over a scan by key alone", planNode{NodeType: "ModifyTable", Relation: "actions",
			Plans: []planNode{{NodeType: "Index Scan", Relation: "actions", IndexCond: "(idem_key = $2)"}}}, 1},
	} {
		var got []string
		c.n.unscoped(scoped, &got)
		if len(got) != c.want {
			t.Errorf("%s: %v, want %d", c.name, got, c.want)
		}
	}
}
