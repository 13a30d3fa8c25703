package executor_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/retrysafe/retrysafe/derive"
	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/intent"
	"github.com/retrysafe/retrysafe/internal/testutil"
)

// Values PostgreSQL refuses (a NUL, invalid UTF-8) are refused before the
// call is frozen or grouped, as field or argument errors that are not
// retryable, while good calls run beside them; nothing of the bad calls
// reaches the database or the PSP.
func TestUnstorableInputNeverReachesTheDatabase(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	okFields := func(i int) map[string]any { return extraction(i, testutil.CPF(900+i)) }
	withField := func(k, v string) map[string]any {
		f := okFields(0)
		f[k] = v
		return f
	}
	bad := []struct {
		name  string
		call  executor.Call
		field string // the FieldError's field, "" for an argument error
	}{
		{"NUL in a field", pixCall("t1", "bad-1", withField("customer_id", "cust\x00")), "customer_id"},
		{"invalid UTF-8 in a field", pixCall("t1", "bad-2", withField("customer_id", "cust\xff")), "customer_id"},
		{"NUL in the ref", pixCall("t1", "bad-3\x00", okFields(1)), ""},
		{"invalid UTF-8 in the tenant", pixCall("t\xff", "bad-4", okFields(2)), ""},
		{"NUL in the source ref", executor.Call{Tenant: "t1", Ref: "bad-5", Action: "pix.charge", Fields: okFields(3), SourceRef: "m\x00"}, ""},
		{"a ref too long for the index", pixCall("t1", strings.Repeat("r", 3000), okFields(4)), ""},
	}
	var wg sync.WaitGroup
	const goods = 16
	for i := range goods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := e.ex.Execute(ctx, pixCall("t1", fmt.Sprintf("good-%d", i), okFields(10+i)), nil)
			if err != nil || out.Status != executor.StatusCompleted {
				t.Errorf("good %d: %+v %v", i, out, err)
			}
		}()
	}
	errs := make([]error, len(bad))
	for i, b := range bad {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = e.ex.Execute(ctx, b.call, nil)
		}()
	}
	wg.Wait()
	for i, b := range bad {
		err := errs[i]
		var fe *derive.FieldError
		switch {
		case err == nil:
			t.Errorf("%s: accepted", b.name)
		case executor.IsRetryable(err):
			t.Errorf("%s: %v is retryable", b.name, err)
		case b.field != "" && (!errors.As(err, &fe) || fe.Field != b.field):
			t.Errorf("%s: %v, want a field error on %s", b.name, err, b.field)
		case b.field == "" && !errors.Is(err, intent.ErrInvalid):
			t.Errorf("%s: %v, want intent.ErrInvalid", b.name, err)
		}
	}
	var n int
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM intents`).Scan(&n); err != nil || n != goods {
		t.Fatalf("%d intents (%v), want %d", n, err, goods)
	}
	if c := e.psp.Count(""); c != goods {
		t.Fatalf("%d charges, want %d", c, goods)
	}
}

// The backstop: a refusal of the call's data by the database (class 22)
// is ErrRefused, never retryable, and does not quote the server's message.
func TestRefusedDataIsNotRetryable(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	_, err := e.pool.Exec(context.Background(), `SELECT 1 / 0`)
	got := executor.Refused(err)
	if !errors.Is(got, executor.ErrRefused) || executor.IsRetryable(got) {
		t.Fatalf("refused(%v) = %v", err, got)
	}
	_, err = e.pool.Exec(context.Background(), `SELECT * FROM no_such_table`)
	if executor.Refused(err) != err {
		t.Fatal("a non-data error was marked refused")
	}
}
