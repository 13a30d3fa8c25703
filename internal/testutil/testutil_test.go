package testutil_test

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/derive"
	"github.com/retrysafe/retrysafe/internal/testutil"
)

func TestCPFKnownValues(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		base int
		want string
	}{
		{529982247, "52998224725"},
		{111444777, "11144477735"},
		{0, "00000000000"},
		{1, "00000000191"},
		{1529982247, "52998224725"}, // only the last nine digits count
	} {
		if got := testutil.CPF(c.base); got != c.want {
			t.Errorf("CPF(%d) = %s, want %s", c.base, got, c.want)
		}
	}
	if got := testutil.PunctuatedCPF("52998224725"); got != "529.982.247-25" {
		t.Errorf("PunctuatedCPF = %s", got)
	}
}

// derive, which validates Pix keys in production, accepts every CPF the
// builder makes, bare and punctuated, and refuses each with a wrong last
// check digit.
func TestCPFAcceptedByDerive(t *testing.T) {
	t.Parallel()
	d, err := derive.New(derive.Config{Secret: []byte("testutil-secret-0123456789abcdef0123"), Schemas: []derive.Schema{{
		Action: "t.cpf", Version: 2, Fields: []derive.Field{
			{Name: "pix_key", Rule: derive.RulePixKey, TypeField: "pix_key_type"},
			{Name: "pix_key_type", Rule: derive.RulePixKeyType, Optional: true},
		}}}})
	if err != nil {
		t.Fatal(err)
	}
	accept := func(key string) (string, error) {
		r, err := d.Derive("t", "t.cpf", map[string]any{"pix_key": key, "pix_key_type": "cpf"}, nil)
		if err != nil {
			return "", err
		}
		got, _ := r.Payload.Get("pix_key")
		return got, nil
	}
	for i := range 300 {
		base := (i*104729 + 7) % 1000000000 * 3331 % 1000000000
		c := testutil.CPF(base)
		if strings.Count(c, c[:1]) == len(c) {
			continue // 000.000.000-00 and the like: valid digits, refused keys
		}
		for _, spelling := range []string{c, testutil.PunctuatedCPF(c)} {
			if got, err := accept(spelling); err != nil || got != c {
				t.Fatalf("CPF(%d) spelled %s: derive gave %q, %v", base, spelling, got, err)
			}
		}
		for k := range 9 {
			bad := c[:10] + fmt.Sprint((int(c[10]-'0')+1+k)%10)
			if _, err := accept(bad); err == nil {
				t.Fatalf("CPF(%d) = %s: %s with a wrong check digit was accepted", base, c, bad)
			}
		}
	}
}

func TestTogether(t *testing.T) {
	t.Parallel()
	const n = 50
	var prepared, ran [n]atomic.Int32
	testutil.TogetherPrepared(n, func(i int) func() {
		prepared[i].Add(1)
		return func() { ran[i].Add(1) }
	})
	seen := make([]int, n)
	testutil.Together(n, func(i int) { seen[i]++ })
	for i := range n {
		if prepared[i].Load() != 1 || ran[i].Load() != 1 || seen[i] != 1 {
			t.Fatalf("goroutine %d: prepared %d, ran %d and %d times", i, prepared[i].Load(), ran[i].Load(), seen[i])
		}
	}
}

func TestCrashpoints(t *testing.T) {
	t.Parallel()
	var c testutil.Crashpoints
	c.Hit("p") // unarmed: nothing
	c.Arm("p", 2)
	after := 0
	err, crashed := testutil.RunCrashable(func() error {
		c.Hit("p")
		after++
		c.Hit("p")
		after++
		return errors.New("unreachable")
	})
	if !crashed || err != nil || after != 1 {
		t.Fatalf("armed for the 2nd hit: crashed %v, err %v, %d hits passed", crashed, err, after)
	}
	want := errors.New("done")
	err, crashed = testutil.RunCrashable(func() error { c.Hit("p"); return want })
	if crashed || err != want {
		t.Fatalf("after the crash the point is disarmed: crashed %v, err %v", crashed, err)
	}
}

func TestLockedBuffer(t *testing.T) {
	t.Parallel()
	var b testutil.LockedBuffer
	testutil.Together(20, func(int) { _, _ = b.Write([]byte("x")); _ = b.String() })
	if got := b.String(); got != strings.Repeat("x", 20) {
		t.Fatalf("got %q", got)
	}
}

func TestFinishWithin(t *testing.T) {
	t.Parallel()
	ran := false
	testutil.FinishWithin(t, time.Minute, "a quick function", func() { ran = true })
	if !ran {
		t.Fatal("f did not run")
	}
}

// WaitFor wakes on the write that completes what it waits for, across
// writes that do not, and returns at once for what was already written.
func TestLockedBufferWaitFor(t *testing.T) {
	t.Parallel()
	var b testutil.LockedBuffer
	fmt.Fprint(&b, "level=INFO msg=started\n")
	b.WaitFor(t, time.Second, "started")
	go func() {
		fmt.Fprint(&b, "level=INFO msg=other\n")
		fmt.Fprint(&b, "level=WARN msg=\"connection ")
		fmt.Fprint(&b, "lost\"\n")
	}()
	b.WaitFor(t, 10*time.Second, `msg="connection lost"`)
}
