package pairs_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/retrysafe/retrysafe/internal/pairs"
)

func TestSplit(t *testing.T) {
	ps, err := pairs.Split(" a=one, b = two ,a=th=ree,", "tenant=token")
	if err != nil {
		t.Fatal(err)
	}
	want := []pairs.Pair{{Key: "a", Value: "one", N: 1}, {Key: "b", Value: "two", N: 2}, {Key: "a", Value: "th=ree", N: 3}}
	if len(ps) != len(want) {
		t.Fatalf("%+v", ps)
	}
	for i := range want {
		if ps[i] != want[i] {
			t.Errorf("entry %d: %+v, want %+v", i, ps[i], want[i])
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"", "no entries: want tenant=token entries, comma separated"},
		{" , ", "no entries"},
		{"a=S3CRET,S3CRET", "entry 2: want tenant=token"},
		{"=S3CRET", "entry 1: want tenant=token"},
		{"a=", "entry 1: want tenant=token"},
	} {
		_, err := pairs.Split(tc.in, "tenant=token")
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "S3CRET") {
			t.Errorf("%q: %v, want %q and no value", tc.in, err, tc.want)
		}
	}
	if _, err := pairs.Split("", "k=v"); !errors.Is(err, pairs.ErrEmpty) {
		t.Errorf("empty list: %v, want ErrEmpty", err)
	}
}

func TestMap(t *testing.T) {
	m, err := pairs.Map("stripe=whsec_1, psp=whsec_2", "provider=secret")
	if err != nil || len(m) != 2 || m["stripe"] != "whsec_1" || m["psp"] != "whsec_2" {
		t.Fatalf("%v %v", m, err)
	}
	_, err = pairs.Map("psp=S3CRET,psp=S3CRET2", "provider=secret")
	if err == nil || err.Error() != `entry 2: provider "psp" given twice` {
		t.Fatalf("duplicate: %v", err)
	}
}
