package cli

import (
	"flag"
	"log/slog"
	"reflect"
	"slices"
	"testing"

	"github.com/riverqueue/river"

	"github.com/retrysafe/retrysafe/agent"
	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/intent"
	"github.com/retrysafe/retrysafe/server/mcpserver"
	"github.com/retrysafe/retrysafe/server/metrics"
	"github.com/retrysafe/retrysafe/server/sidecar"
	"github.com/retrysafe/retrysafe/tools"
)

// Stand-ins for what a Config only needs to be set: nothing here calls
// them.
type (
	noPool      struct{ agent.Beginner }
	noSidecarDB struct{ sidecar.DB }
	noQueue     struct{ agent.Inserter }
	noModel     struct{ agent.ChatModel }
)

// A flag that sets a field of a package's Config defaults to what that
// package fills into the zero field: a default lives in one place, and
// --help shows the one that applies. Each case compares the flags' values
// before any parsing with the package's Config validated from zero.
func TestFlagDefaultsArePackageDefaults(t *testing.T) {
	t.Parallel()
	e, _, _ := testEnv(nil, map[string]string{"RETRYSAFE_HMAC_KEY": testSecret, "RETRYSAFE_PSP_URL": "http://127.0.0.1:1", "RETRYSAFE_PSP_TOKEN": "t"})
	reg, err := tools.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	reply, err := agent.NewWhatsAppText(tools.HTTPConfig{BaseURL: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(reply); err != nil {
		t.Fatal(err)
	}
	ex := &executor.Executor{} // the Configs below only check that it is set

	t.Run("executor", func(t *testing.T) {
		// runtimeFlags are not an executor.Config: the builder maps them,
		// so the executor it builds from the flags' defaults is compared.
		var rt runtimeFlags
		rt.register(NewFlagSet(e, "t", "t", "t"), e)
		treg, err := rt.registry()
		if err != nil {
			t.Fatal(err)
		}
		rtm, err := rt.build(noPool{}, treg, metrics.New(), slog.New(slog.DiscardHandler), nil)
		if err != nil {
			t.Fatal(err)
		}
		want, err := executor.Config{DB: noPool{}, Intents: rtm.Intents, Tools: treg}.Validate()
		if err != nil {
			t.Fatal(err)
		}
		got := rtm.Executor.Config()
		gv, wv := reflect.ValueOf(got), reflect.ValueOf(want)
		compared := 0
		for i := range gv.NumField() {
			name := gv.Type().Field(i).Name
			if name == "Owner" || !scalar(gv.Field(i)) { // Owner: random per process
				continue
			}
			compared++
			if g, w := gv.Field(i).Interface(), wv.Field(i).Interface(); g != w {
				t.Errorf("executor.Config.%s: the flags give %v, the package's default is %v", name, g, w)
			}
		}
		if compared < 10 {
			t.Fatalf("compared %d fields of executor.Config", compared)
		}
	})

	t.Run("worker", func(t *testing.T) {
		var w workerCmd
		fs := w.flags(e)
		want, err := agent.Config{DB: noPool{}, Tools: reg, Intents: &intent.Store{}, Executor: ex, Queue: noQueue{},
			Model: noModel{}, ModelName: "required"}.Validate()
		if err != nil {
			t.Fatal(err)
		}
		wantRiver, err := agent.RiverConfig{}.Validate()
		if err != nil {
			t.Fatal(err)
		}
		// Zero is River's own default, which the flag shows.
		wantRiver.FetchPollInterval = river.FetchPollIntervalDefault
		checkFlagDefaults(t, fs, []string{"ModelName"}, flagTarget{&w.acf, want}, flagTarget{&w.rcf, wantRiver})
	})

	t.Run("serve", func(t *testing.T) {
		var c serveCmd
		fs := c.flags(e)
		want, err := sidecar.Config{DB: noSidecarDB{}, Executor: ex, Tools: reg, Credentials: []sidecar.Credential{{Tenant: "a", Token: "t"}}}.Validate()
		if err != nil {
			t.Fatal(err)
		}
		checkFlagDefaults(t, fs, nil, flagTarget{&c.cfg, want})
	})

	t.Run("mcp", func(t *testing.T) {
		var c mcpCmd
		fs := c.flags(e)
		want, err := mcpserver.Config{Executor: ex, Tools: reg}.Validate()
		if err != nil {
			t.Fatal(err)
		}
		checkFlagDefaults(t, fs, nil, flagTarget{&c.cfg, want})
	})
}

// flagTarget is a Config whose fields flags write (a pointer), and the
// same Config validated from zero.
type flagTarget struct {
	fields, want any
}

// checkFlagDefaults finds, for every flag of fs, the field of a target it
// writes, and compares the flag's default with the package's. Fields named
// in required have no package default.
func checkFlagDefaults(t *testing.T, fs *flag.FlagSet, required []string, targets ...flagTarget) {
	t.Helper()
	found := map[int]int{}
	fs.VisitAll(func(f *flag.Flag) {
		v := reflect.ValueOf(f.Value)
		if v.Kind() != reflect.Pointer {
			return
		}
		for ti, tg := range targets {
			fv := reflect.ValueOf(tg.fields).Elem()
			for i := range fv.NumField() {
				if !fv.Field(i).CanAddr() || fv.Field(i).Addr().Pointer() != v.Pointer() {
					continue
				}
				field := fv.Type().Field(i)
				found[ti]++
				if slices.Contains(required, field.Name) {
					return
				}
				got, want := fv.Field(i).Interface(), reflect.ValueOf(tg.want).Field(i).Interface()
				if !reflect.DeepEqual(got, want) {
					t.Errorf("--%s defaults to %v, but %s.%s defaults to %v", f.Name, got, fv.Type(), field.Name, want)
				}
				return
			}
		}
	})
	for ti, tg := range targets {
		if found[ti] == 0 {
			t.Errorf("no flag writes a field of %T", tg.fields)
		}
	}
}

// scalar reports whether v is a setting compared by value (numbers,
// durations, strings, booleans).
func scalar(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int32, reflect.Int64, reflect.String:
		return true
	}
	return false
}
