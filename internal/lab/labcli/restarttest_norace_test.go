//go:build !race

package labcli

const raceEnabled = false
