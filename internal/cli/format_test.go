package cli

import (
	"strings"
	"testing"
	"time"
)

// What a request line gets wrong is said in JSON's words: the field and
// the type it wants, never Go's struct or map types, nor the value.
func TestJSONProblemSpeaksJSON(t *testing.T) {
	t.Parallel()
	for line, want := range map[string]string{
		`{"tenant":"t","action":"a","fields":"S3CRET"}`: `"fields" must be an object, not a string`,
		`{"tenant":52998224725}`:                        `"tenant" must be a string, not a number`,
		`{"version":1.5}`:                               `"version" must be a whole number`,
		`{"version":"2"}`:                               `"version" must be a whole number, not a string`,
		`{"tenant":"t","extra":1}`:                      `unknown field "extra"`,
		`{"tenant":`:                                    `unexpected EOF`,
		`nope`:                                          `not JSON (at byte 2)`,
	} {
		got := deriveLine(nil, []byte(line), 1).Error
		if !strings.Contains(got, want) {
			t.Errorf("%s: %q, want %q", line, got, want)
		}
		for _, goism := range []string{"Go ", "struct", "map[", "interface", "keyInput", "S3CRET", "52998224725"} {
			if strings.Contains(got, goism) {
				t.Errorf("%s: %q shows %q", line, got, goism)
			}
		}
	}
}

func TestDurationText(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		6 * time.Hour: "6h", time.Minute: "1m", 90 * time.Minute: "1h30m", 200 * time.Millisecond: "200ms",
		10 * time.Second: "10s", 720 * time.Hour: "720h", 0: "0s", 61 * time.Second: "1m1s",
	} {
		if got := durationText(d); got != want {
			t.Errorf("%s: %q, want %q", d, got, want)
		}
	}
}
