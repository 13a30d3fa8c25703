package failpoint

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Env is the environment variable that arms failpoints.
const Env = "RETRYSAFE_FAILPOINTS"

var (
	once  sync.Once
	armed map[string]int // name -> the hit that kills (1 = first)
	mu    sync.Mutex
	hits  map[string]int
)

func load() {
	armed = parse(os.Getenv(Env))
	hits = map[string]int{}
}

func parse(s string) map[string]int {
	out := map[string]int{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		name, count, ok := strings.Cut(f, "@")
		n := 1
		if ok {
			if v, err := strconv.Atoi(count); err == nil && v > 0 {
				n = v
			}
		}
		out[name] = n
	}
	return out
}

// Armed reports whether name is armed in this process.
func Armed(name string) bool {
	once.Do(load)
	_, ok := armed[name]
	return ok
}

// Hit kills the process with SIGKILL when name is armed (on its Nth hit for
// "name@N"). Otherwise it returns at once; an unarmed process pays one map
// lookup.
func Hit(name string) {
	once.Do(load)
	if len(armed) == 0 {
		return
	}
	want, ok := armed[name]
	if !ok {
		return
	}
	mu.Lock()
	hits[name]++
	n := hits[name]
	mu.Unlock()
	if n < want {
		return
	}
	// Stderr is unbuffered: the line reaches the test before the kill.
	os.Stderr.WriteString("retrysafe: failpoint " + name + " hit: killing the process\n")
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // SIGKILL cannot be caught; never return into the caller
}
