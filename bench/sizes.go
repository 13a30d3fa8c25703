package main

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// relSize is the size of one of the ledger's relations.
type relSize struct {
	Table string `json:"table"`
	// Name is the relation: the table's heap (its main fork), one of its
	// indexes, or "total" (pg_total_relation_size: heap, indexes, TOAST,
	// free-space and visibility maps).
	Name  string `json:"name"`
	Kind  string `json:"kind"` // heap, index, indexes, total
	Bytes int64  `json:"bytes"`
}

// ledgerSizes is the sizes of intents, intent_revisions and actions and
// of each of their indexes, and the intents counted.
type ledgerSizes struct {
	Intents int64     `json:"intents"`
	Rels    []relSize `json:"relations"`
}

// perMillion is b per 1,000,000 intents, in MB.
func (s *ledgerSizes) perMillion(b int64) float64 {
	if s.Intents == 0 {
		return 0
	}
	return float64(b) / float64(s.Intents) * 1e6 / (1 << 20)
}

func (s *ledgerSizes) find(table, name string) (relSize, bool) {
	for _, r := range s.Rels {
		if r.Table == table && r.Name == name {
			return r, true
		}
	}
	return relSize{}, false
}

// measureSizes reads the sizes of the ledger's tables and indexes
// (pg_relation_size, pg_indexes_size, pg_total_relation_size) and counts
// the intents.
func measureSizes(ctx context.Context, db *database) (*ledgerSizes, error) {
	p, err := db.pool(ctx, 1)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	out := &ledgerSizes{}
	if err := p.QueryRow(ctx, `SELECT count(*) FROM intents`).Scan(&out.Intents); err != nil {
		return nil, err
	}
	rows, err := p.Query(ctx, `SELECT t.relname, t.relname, 'heap', pg_relation_size(t.oid), 0 AS o FROM pg_class t
	WHERE t.oid = ANY (ARRAY['intents', 'intent_revisions', 'actions']::regclass[])
UNION ALL
SELECT t.relname, i.relname, 'index', pg_relation_size(i.oid), 1 FROM pg_index x JOIN pg_class t ON t.oid = x.indrelid JOIN pg_class i ON i.oid = x.indexrelid
	WHERE t.oid = ANY (ARRAY['intents', 'intent_revisions', 'actions']::regclass[])
UNION ALL
SELECT t.relname, 'indexes', 'indexes', pg_indexes_size(t.oid), 2 FROM pg_class t
	WHERE t.oid = ANY (ARRAY['intents', 'intent_revisions', 'actions']::regclass[])
UNION ALL
SELECT t.relname, 'total', 'total', pg_total_relation_size(t.oid), 3 FROM pg_class t
	WHERE t.oid = ANY (ARRAY['intents', 'intent_revisions', 'actions']::regclass[])
ORDER BY 1 DESC, 5, 2`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var r relSize
		var order int
		if err := rows.Scan(&r.Table, &r.Name, &r.Kind, &r.Bytes, &order); err != nil {
			return nil, err
		}
		out.Rels = append(out.Rels, r)
	}
	return out, rows.Err()
}

// sizeTable writes the sizes per million intents of the scale database
// (fresh from the preload: indexes built by sorting; reused: grown since by
// restores of purged rows and the runs' executions) and, when live is not
// nil, of tables the executor filled.
func sizeTable(sb *strings.Builder, pre, live *ledgerSizes, reused bool) {
	if pre == nil {
		return
	}
	what := "after the preload (%s intents, indexes built by sorting)"
	if reused {
		what = "of the reused scale database (%s intents: preloaded with its indexes built by sorting, then grown by restores of purged rows and earlier runs' executions)"
	}
	fmt.Fprintf(sb, "\nTable and index sizes per 1,000,000 intents (each with its completed action), MB: "+what, groupDigits(pre.Intents))
	if live != nil {
		fmt.Fprintf(sb, " and on the empty database after its slices (%s intents written by Executor.Execute, indexes grown by random inserts)", groupDigits(live.Intents))
	}
	sb.WriteString(":\n\n| table | relation | scale database |")
	if live != nil {
		sb.WriteString(" written by the executor |")
	}
	sb.WriteString("\n|---|---|---:|")
	if live != nil {
		sb.WriteString("---:|")
	}
	sb.WriteString("\n")
	for _, r := range pre.Rels {
		if r.Table == "intent_revisions" && r.Kind != "total" {
			continue // only amendments write it: its total says enough
		}
		name := "`" + r.Name + "`"
		switch r.Kind {
		case "heap":
			name = "heap"
		case "indexes":
			name = "all indexes (pg_indexes_size)"
		case "total":
			name = "**total** (pg_total_relation_size)"
		}
		fmt.Fprintf(sb, "| %s | %s | %s |", r.Table, name, sizeMB(pre, r.Table, r.Bytes))
		if live != nil {
			if l, ok := live.find(r.Table, r.Name); ok {
				fmt.Fprintf(sb, " %s |", sizeMB(live, l.Table, l.Bytes))
			} else {
				sb.WriteString(" – |")
			}
		}
		sb.WriteString("\n")
	}
}

// sizeMB is b per million intents, except for intent_revisions, which only
// amendments write: its size as it is.
func sizeMB(s *ledgerSizes, table string, b int64) string {
	if table == "intent_revisions" {
		return fmt.Sprintf("%d kB (as is)", b/1024)
	}
	v := s.perMillion(b)
	if v < 1 {
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.0f", v)
}

// groupDigits prints 10000000 as 10,000,000.
func groupDigits(n int64) string {
	s := fmt.Sprint(n)
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}

// keyIndexes are the ledger's indexes that every first execution inserts
// into at a place its key or its ref picks (an HMAC digest, a caller's
// reference), so that on preloaded tables the whole of each is the
// working set, not its right-hand edge.
var keyIndexes = []struct{ table, name string }{
	{"intents", "intents_pkey"}, {"intents", "intents_idem_key_tenant_id_key"}, {"actions", "actions_pkey"},
}

// keyIndexBytes is the size of s's keyIndexes, and whether s had all of
// them.
func (s *ledgerSizes) keyIndexBytes() (int64, bool) {
	var n int64
	for _, k := range keyIndexes {
		r, ok := s.find(k.table, k.name)
		if !ok {
			return 0, false
		}
		n += r.Bytes
	}
	return n, true
}

// pgBytes reads a memory setting as current_setting shows it (128MB,
// 16384kB, 4GB): a whole number and a unit. A bare number (a count of the
// setting's own blocks) or anything else is not read.
func pgBytes(s string) (int64, bool) {
	i := strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	if i <= 0 {
		return 0, false
	}
	mult := map[string]int64{"B": 1, "kB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40}[s[i:]]
	n, err := strconv.ParseInt(s[:i], 10, 64)
	if err != nil || mult == 0 || n > math.MaxInt64/mult {
		return 0, false
	}
	return n * mult, true
}
