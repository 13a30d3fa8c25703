package importrule

// MaxFileLines and MaxFuncLines bound what a reader takes in at once: a
// non-test file of the module, and a function of an engine package (one
// that a Production command links). Lab and test code may run longer
// functions (a scenario reads best top to bottom) but not longer files.
const (
	MaxFileLines = 600
	MaxFuncLines = 80
)

// SizePending lists files ({"file", path}) and functions ({"func",
// "path:Name"}) over the bounds today, each with the issue that shortens
// it. The test fails when an entry is no longer needed.
var SizePending = map[[2]string]string{}
