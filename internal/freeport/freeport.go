package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// low is the lowest port Pick draws: under it are the well-known and
// commonly configured service ports.
const low = 10000

// rangeFile is where Linux keeps the ephemeral range ("32768\t60999").
var rangeFile = "/proc/sys/net/ipv4/ip_local_port_range"

// Pick returns a port on 127.0.0.1 that nothing listens on, drawn from
// [low, the ephemeral range's first port), or from the ephemeral range by
// listening on port 0 where there is no room below it (or no /proc).
func Pick() (int, error) {
	hi := ephemeralLow()
	if hi-low < 1000 {
		return listenZero()
	}
	var err error
	for range 64 {
		p := low + rand.IntN(hi-low)
		var l net.Listener
		if l, err = net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p))); err == nil {
			l.Close()
			return p, nil
		}
	}
	return 0, fmt.Errorf("freeport: no free port in [%d, %d) after 64 draws: %w", low, hi, err)
}

// ephemeralLow is the first port of the kernel's ephemeral range, 0 when
// it cannot be read.
func ephemeralLow() int {
	b, err := os.ReadFile(rangeFile)
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0
	}
	n, err := strconv.Atoi(f[0])
	if err != nil {
		return 0
	}
	return n
}

func listenZero() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
