package fault

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/retrysafe/retrysafe/internal/problem"
)

// Header is the request header that selects faults per request.
const Header = "X-Sandbox-Fault"

// ErrBadSpec reports an unparseable fault specification.
var ErrBadSpec = errors.New("fault: bad specification")

// Spec is a set of faults for one request.
type Spec struct {
	Delay      time.Duration // before executing
	FailBefore bool          // 500 instead of executing
	DropAfter  bool          // execute, then drop the connection
	FailAfter  bool          // execute, then 500
	Slow       time.Duration // execute, then wait before answering
}

// IsZero reports whether s injects nothing.
func (s Spec) IsZero() bool { return s == Spec{} }

// Parse reads a comma separated list of faults (see the package
// documentation). The empty string is the zero Spec.
func Parse(text string) (Spec, error) {
	var s Spec
	for _, part := range strings.Split(text, ",") {
		part = strings.TrimSpace(part)
		name, val, hasVal := strings.Cut(part, "=")
		var err error
		switch {
		case part == "" || part == "none":
		case name == "fail-before" && !hasVal:
			s.FailBefore = true
		case name == "drop-after" && !hasVal:
			s.DropAfter = true
		case name == "fail-after" && !hasVal:
			s.FailAfter = true
		case name == "delay" && hasVal:
			s.Delay, err = parseDuration(val)
		case name == "slow" && hasVal:
			s.Slow, err = parseDuration(val)
		default:
			return Spec{}, fmt.Errorf("%w: %q (want fail-before, drop-after, fail-after, delay=D or slow=D)", ErrBadSpec, part)
		}
		if err != nil {
			return Spec{}, fmt.Errorf("%w: %q: %v", ErrBadSpec, part, err)
		}
	}
	return s, nil
}

func parseDuration(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, err
	}
	if d < 0 || d > 10*time.Minute {
		return 0, fmt.Errorf("duration %v outside 0..10m", d)
	}
	return d, nil
}

// String is the specification in Parse's syntax.
func (s Spec) String() string {
	var parts []string
	if s.Delay > 0 {
		parts = append(parts, "delay="+s.Delay.String())
	}
	if s.FailBefore {
		parts = append(parts, "fail-before")
	}
	if s.DropAfter {
		parts = append(parts, "drop-after")
	}
	if s.FailAfter {
		parts = append(parts, "fail-after")
	}
	if s.Slow > 0 {
		parts = append(parts, "slow="+s.Slow.String())
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ",")
}

// Injector wraps handlers with faults.
type Injector struct {
	// Default applies to requests that carry no X-Sandbox-Fault header, for
	// which Applies (when set) returns true, with probability Rate.
	Default Spec
	// Rate is the probability (0..1) that Default applies to a request. A
	// zero Rate with a non-zero Default means 1.
	Rate float64
	// Applies selects the requests Default may apply to; nil means all.
	Applies func(*http.Request) bool
}

// Wrap returns h with faults injected.
func (in Injector) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		spec, err := in.specFor(r)
		if err != nil {
			writeFault(w, http.StatusBadRequest, err.Error())
			return
		}
		Apply(spec, h, w, r)
	})
}

func (in Injector) specFor(r *http.Request) (Spec, error) {
	if v := r.Header.Values(Header); len(v) > 0 {
		return Parse(strings.Join(v, ","))
	}
	if in.Default.IsZero() || (in.Applies != nil && !in.Applies(r)) {
		return Spec{}, nil
	}
	if in.Rate > 0 && in.Rate < 1 && rand.Float64() >= in.Rate {
		return Spec{}, nil
	}
	return in.Default, nil
}

// Apply serves r with h under spec.
func Apply(spec Spec, h http.Handler, w http.ResponseWriter, r *http.Request) {
	if spec.Delay > 0 && !sleep(r, spec.Delay) {
		return
	}
	if spec.FailBefore {
		writeFault(w, http.StatusInternalServerError, "injected fault fail-before: the request was not executed")
		return
	}
	if !spec.DropAfter && !spec.FailAfter && spec.Slow == 0 {
		h.ServeHTTP(w, r)
		return
	}
	// Execute against a buffer: the answer is decided (and, behind the
	// idempotency middleware, committed) before the fault hits it.
	buf := &buffer{header: http.Header{}}
	h.ServeHTTP(buf, r)
	switch {
	case spec.DropAfter:
		// net/http closes the connection without a response and does not
		// log this panic: the client sees EOF or a reset.
		panic(http.ErrAbortHandler)
	case spec.FailAfter:
		writeFault(w, http.StatusInternalServerError, "injected fault fail-after: the request was executed, this answer is a lie")
		return
	}
	if !sleep(r, spec.Slow) {
		return
	}
	for k, v := range buf.header {
		w.Header()[k] = v
	}
	if buf.status == 0 {
		buf.status = http.StatusOK
	}
	w.Header().Set("Content-Length", strconv.Itoa(buf.body.Len()))
	w.WriteHeader(buf.status)
	w.Write(buf.body.Bytes()) //nolint:errcheck // the client may have given up: that is the point
}

// sleep waits d or until the client goes away; false means it went.
func sleep(r *http.Request, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}

// ProblemFault is the problem type of every injected fault, documented in
// the repository's docs/problems.md.
const ProblemFault = problem.Docs + "#sandbox-fault"

func writeFault(w http.ResponseWriter, status int, detail string) {
	problem.Write(w, status, problem.Details{Type: ProblemFault, Title: http.StatusText(status), Status: status, Detail: detail}, nil)
}

type buffer struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *buffer) Header() http.Header { return b.header }

func (b *buffer) WriteHeader(status int) {
	if b.status == 0 && status >= 200 {
		b.status = status
	}
}

func (b *buffer) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	return b.body.Write(p)
}
