//go:build race

package labcli

// raceEnabled: this test binary runs under the race detector, and so do
// the retrysafe processes TestRestartTest builds and starts.
const raceEnabled = true
